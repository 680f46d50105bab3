"""``trainkit.onnx`` (``torch.onnx``): ``export`` writes a model as an ONNX graph that onnxruntime and the other
ONNX runtimes run (docs/onnx.md: what exports, what is refused).

>>> import io, trainkit
>>> from trainkit import nn
>>> program = trainkit.onnx.export(nn.Linear(4, 2), (trainkit.ones(1, 4),), io.BytesIO(), input_names=["x"])
>>> program.model_proto.graph.input[0].name, program.model_proto.opset_import[0].version
('x', 18)
"""

from .export import export, is_in_onnx_export
from .graph import OnnxExporterError
from .options import DEFAULT_OPSET, TrainingMode
from .program import ONNXProgram

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OnnxExporterError", "TrainingMode", "export", "is_in_onnx_export"]
