"""The arguments of ``torch.onnx.export`` that choose how, not what: the training mode, the opset, PyTorch's
switches that trainkit accepts and the few it refuses.
"""

from __future__ import annotations

import enum
from typing import Any

from .graph import OnnxExporterError

__all__ = ["DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "TrainingMode", "check_options", "opset_of"]

DEFAULT_OPSET = 18  # what torch 2.13's exporter writes
MIN_OPSET, MAX_OPSET = 13, 21


class TrainingMode(enum.IntEnum):
    """``torch.onnx.TrainingMode``: the mode the model is exported in (``export``'s ``training``).

    EVAL (the default) exports in evaluation mode; PRESERVE in the mode the model is in, which must then be
    evaluation mode; TRAINING is refused (a training graph needs dropout and batch statistics ops).

    >>> TrainingMode.EVAL, int(TrainingMode.TRAINING)
    (<TrainingMode.EVAL: 0>, 2)
    """

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def opset_of(opset_version: Any) -> int:
    """The opset to write: 18 by default, 13 to 21 accepted.

    >>> opset_of(None), opset_of(17)
    (18, 17)
    """
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxExporterError(
            f"torch.onnx.export: opset_version={opset_version} is not supported; trainkit writes opsets "
            f"{MIN_OPSET} to {MAX_OPSET}"
        )
    return opset


def check_options(
    model, training: Any, custom_translation_table: Any, custom_opsets: Any, operator_export_type
) -> None:
    """Refuse what trainkit cannot do, by the argument's name; the rest of PyTorch's switches change nothing.

    >>> check_options(None, TrainingMode.EVAL, None, None, None)
    """
    mode = TrainingMode(int(training)) if training is not None else TrainingMode.EVAL
    if mode == TrainingMode.TRAINING or (mode == TrainingMode.PRESERVE and getattr(model, "training", False)):
        raise OnnxExporterError(
            "torch.onnx.export: training=TrainingMode.TRAINING (or PRESERVE on a model in training mode) is not "
            "supported: trainkit exports the evaluation graph; call model.eval() or leave training at EVAL"
        )
    if custom_translation_table:
        raise OnnxExporterError(
            "torch.onnx.export: custom_translation_table is not supported (it maps torch ops to onnxscript "
            "functions); trainkit converts its own ops"
        )
    if custom_opsets:
        raise OnnxExporterError("torch.onnx.export: custom_opsets is not supported: trainkit writes the ONNX domain")
    if operator_export_type not in (None, 0) and getattr(operator_export_type, "name", "ONNX") != "ONNX":
        raise OnnxExporterError(
            f"torch.onnx.export: operator_export_type={operator_export_type!r} is not supported; trainkit writes "
            "ONNX ops only"
        )
