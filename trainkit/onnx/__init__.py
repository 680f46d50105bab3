"""``trainkit.onnx`` (``torch.onnx``): ``export`` writes a model as an ONNX graph (docs/onnx.md)."""

from .export import DEFAULT_OPSET, ONNXProgram, export, is_in_onnx_export
from .graph import OnnxExporterError

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OnnxExporterError", "export", "is_in_onnx_export"]
