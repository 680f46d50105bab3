"""What ``torch.onnx.export`` returns: the ONNX model, which can be saved, and run through onnxruntime."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..autograd.creation import from_numpy
from .graph import OnnxExporterError
from .trace import flat_arrays

__all__ = ["ONNXProgram"]


class ONNXProgram:
    """The exported model: ``model_proto`` (an ``onnx.ModelProto``), ``save(path)``, and a call that runs it in
    onnxruntime on tensors, as ``torch.onnx.ONNXProgram`` does.

    >>> import trainkit
    >>> from trainkit import nn
    >>> program = trainkit.onnx.export(nn.Linear(3, 2), (trainkit.ones(1, 3),), None, dynamic_axes={"input": [0]})
    >>> program(trainkit.ones(4, 3))[0].shape
    trainkit.Size([4, 2])
    """

    def __init__(self, model_proto):
        self.model_proto = model_proto
        self.session = None

    def save(self, destination) -> None:
        """Write the model to a path or a binary file object."""
        data = self.model_proto.SerializeToString()
        if hasattr(destination, "write"):
            destination.write(data)
            return
        with open(os.fspath(destination), "wb") as fh:
            fh.write(data)

    def optimize(self) -> None:
        """PyTorch's graph optimization pass: the graph is written folded already, so nothing is left to do."""

    def __call__(self, *args: Any, **kwargs: Any) -> list:
        """Run the model in onnxruntime on tensors (the example inputs' structure, any size the dynamic axes
        allow); returns the outputs as tensors."""
        try:
            import onnxruntime
        except ImportError:
            raise OnnxExporterError("running an ONNXProgram needs onnxruntime: pip install onnxruntime") from None
        if self.session is None:
            self.session = onnxruntime.InferenceSession(
                self.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
            )
        names = [i.name for i in self.session.get_inputs()]
        arrays = flat_arrays([args, kwargs])
        if len(arrays) != len(names):
            raise OnnxExporterError(f"ONNXProgram: {len(arrays)} tensors given for the inputs {names}")
        outputs = self.session.run(None, {n: np.asarray(a) for n, a in zip(names, arrays)})
        return [from_numpy(np.asarray(o)) for o in outputs]

    def verify(self, args: tuple, kwargs: dict, expected: list, rtol: float = 1e-3, atol: float = 1e-5) -> None:
        """``export(..., verify=True)``: run the model in onnxruntime on the example inputs and refuse it when its
        outputs are not the model's."""
        got = self(*args, **kwargs)
        for i, (g, want) in enumerate(zip(got, expected)):
            g = g.numpy()
            if g.shape != want.shape or not np.allclose(g, want, rtol=rtol, atol=atol, equal_nan=True):
                worst = float(np.max(np.abs(g - want))) if g.shape == want.shape else "shape"
                raise OnnxExporterError(
                    f"torch.onnx.export(verify=True): output {i} of the ONNX model differs from the model's "
                    f"(largest difference {worst}, shapes {g.shape} and {want.shape})"
                )

    def __repr__(self) -> str:
        return (
            f"ONNXProgram(opset={self.model_proto.opset_import[0].version}, nodes={len(self.model_proto.graph.node)})"
        )
