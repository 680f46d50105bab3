"""``trainkit.onnx`` (``torch.onnx``): importable, so programs that offer an ONNX export run; the export refuses.

trainkit has no ONNX exporter: ``export`` raises ``RuntimeError`` saying so and how to keep the weights instead;
``is_in_onnx_export()`` is False.

>>> import trainkit
>>> trainkit.onnx.is_in_onnx_export()
False
"""

from __future__ import annotations

from typing import Any

__all__ = ["OnnxExporterError", "export", "is_in_onnx_export"]


class OnnxExporterError(RuntimeError):
    """What ``export`` raises.

    >>> issubclass(OnnxExporterError, RuntimeError)
    True
    """


def export(model: Any, args: Any = (), f: Any = None, *rest: Any, **kwargs: Any):
    """Refuses: trainkit cannot write ONNX graphs.

    >>> export(None, (), "model.onnx")
    Traceback (most recent call last):
    trainkit.onnx.OnnxExporterError: torch.onnx.export: trainkit has no ONNX exporter; ...
    """
    raise OnnxExporterError(
        "torch.onnx.export: trainkit has no ONNX exporter; save the weights with trainkit.save(model.state_dict(), "
        "path) (PyTorch's torch.load reads the file) and export from PyTorch"
    )


def is_in_onnx_export() -> bool:
    """False: no export ever runs.

    >>> is_in_onnx_export()
    False
    """
    return False
