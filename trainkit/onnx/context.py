"""What a converter gets: the record of the call it converts (and its twin from the second run, on other inputs),
the graph under construction, and helpers to name its inputs and bind its outputs.
"""

from __future__ import annotations

import numpy as np

from .graph import GraphBuilder, OnnxExporterError
from .shapes import Dims
from .trace import Record, flat_arrays

__all__ = ["Context", "axes_of", "differs", "elem_type", "flat_arrays", "operands", "reduce_node", "unary"]


class Context:
    """One conversion: ``rec`` (and ``rec2``, the same call in the second run, or None), ``g`` and ``dims``.

    >>> import numpy as np
    >>> from trainkit.onnx.trace import TensorMethod
    >>> g = GraphBuilder(18)
    >>> x = np.ones(3, "float32")
    >>> cx = Context(g, Dims(g, []), Record(TensorMethod("neg"), (x,), {}, -x, "head"), None, 18)
    >>> cx.what(), cx.shape(0)
    ("op neg (in module 'head')", (3,))
    """

    def __init__(self, g: GraphBuilder, dims: Dims, rec: Record, rec2: Record | None, opset: int):
        self.g, self.dims, self.rec, self.rec2, self.opset = g, dims, rec, rec2, opset

    @property
    def params(self) -> dict:
        return self.rec.params

    @property
    def params2(self) -> dict:
        return self.rec2.params if self.rec2 is not None else self.rec.params

    def input(self, i: int = 0, like: str | None = None) -> str:
        """The value name of the record's ``i``-th input (a number becomes a constant of ``like``'s dtype)."""
        return self.g.value(self.rec.inputs[i], like)

    def arg(self, i: int, name: str, default=None):
        """The op's argument ``name``, given as its ``i``-th positional input or by keyword."""
        return self.rec.inputs[i] if len(self.rec.inputs) > i else self.rec.params.get(name, default)

    def shape(self, i: int = 0) -> tuple:
        x = self.rec.inputs[i]
        return tuple(x.shape) if hasattr(x, "shape") else ()

    def shape2(self, i: int = 0) -> tuple:
        x = (self.rec2 or self.rec).inputs[i]
        return tuple(x.shape) if hasattr(x, "shape") else ()

    def out_arrays(self) -> list:
        return flat_arrays(self.rec.output)

    def bind(self, names) -> None:
        """The record's outputs are the values ``names`` (one name or a list, in the order of the outputs)."""
        names = [names] if isinstance(names, str) else list(names)
        arrays = self.out_arrays()
        if len(names) != len(arrays):
            raise OnnxExporterError(f"{self.what()}: converter gave {len(names)} outputs for {len(arrays)}")
        for n, a in zip(names, arrays):
            self.g.bind(a, n)

    def node(self, op_type: str, inputs: list, **attrs) -> str:
        return self.g.node(op_type, inputs, **attrs)

    def const_like(self, value, like: str) -> str:
        """A scalar constant of ``like``'s dtype."""
        return self.g.const(np.asarray(value, dtype=self.g.dtype(like) or np.float32))

    def dtype(self, name: str):
        return self.g.dtype(name)

    def what(self) -> str:
        """``op LinearBackward0 in module 'encoder.0'``: how errors name the call."""
        target = self.rec.target.__name__
        kind = "module" if self.rec.module is not None else "op"
        return f"{kind} {target} (in module {self.rec.scope or '<the model>'!r})"

    def refuse(self, why: str) -> OnnxExporterError:
        return OnnxExporterError(f"torch.onnx.export: {self.what()} cannot be exported: {why}")

    def vector_for(self, key: str, what: str, x: str) -> str:
        """The shape argument ``key`` of the op as the 1-d value ``what`` (Reshape or Expand) takes."""
        t2 = self.rec2.params[key] if self.rec2 is not None else None
        try:
            return self.dims.vector(self.params[key], t2, what, x, self.shape(0), self.shape2(0) if t2 else None)
        except OnnxExporterError as err:
            raise self.refuse(str(err)) from None

    def rec2_outputs(self) -> list:
        return flat_arrays(self.rec2.output) if self.rec2 is not None else self.out_arrays()

    def need_opset(self, n: int, op: str) -> None:
        if self.opset < n:
            raise self.refuse(f"ONNX {op} needs opset_version >= {n} (got {self.opset})")


def differs(a, b) -> bool:
    """Whether two recorded arguments differ (arrays by shape, containers item by item).

    >>> differs((2, 3, slice(0, 4)), (2, 3, slice(0, 5))), differs({"dim": 1}, {"dim": 1})
    (True, False)
    """
    if type(a) is not type(b):
        return True
    if isinstance(a, dict):
        return a.keys() != b.keys() or any(differs(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) != len(b) or any(differs(x, y) for x, y in zip(a, b))
    if isinstance(a, slice):
        return (a.start, a.stop, a.step) != (b.start, b.stop, b.step)
    if hasattr(a, "shape"):
        return tuple(a.shape) != tuple(b.shape)
    try:
        return bool(a != b)
    except Exception:
        return False


def unary(op_type: str, **attrs):
    """The converter of an op that is one ONNX op of one input.

    >>> unary("Relu").__doc__
    'ONNX Relu.'
    """

    def convert(cx: Context) -> None:
        cx.bind(cx.node(op_type, [cx.input(0)], **attrs))

    convert.__doc__ = f"ONNX {op_type}."
    return convert


def operands(cx: Context) -> tuple[str, str]:
    """The value names of a binary op's two operands (``y`` or ``other``); a number takes the dtype of the tensor
    beside it, as PyTorch's scalars do.

    >>> import numpy as np
    >>> from trainkit.onnx.trace import TensorMethod
    >>> g = GraphBuilder(18)
    >>> x = g.input_value(np.ones(2, "float32"), "x")
    >>> cx = Context(g, Dims(g, []), Record(TensorMethod("eq"), (g.arrays["x"], 2), {}, None, ""), None, 18)
    >>> a, b = operands(cx); a, g.dtype(b)
    ('x', dtype('float32'))
    """
    x = cx.rec.inputs[0]
    y = cx.arg(1, "y", cx.params.get("other"))
    if hasattr(x, "shape") or not hasattr(y, "shape"):
        a = cx.input(0)
        return a, cx.g.value(y, like=a)
    b = cx.g.value(y)
    return cx.input(0, like=b), b


def axes_of(cx: Context, axes) -> list[int]:
    """The reduced axes of the op's first input, non-negative; None means all of them.

    >>> import numpy as np
    >>> from trainkit.onnx.trace import TensorMethod
    >>> g = GraphBuilder(18)
    >>> cx = Context(g, Dims(g, []), Record(TensorMethod("sum"), (np.ones((2, 3)),), {}, None, ""), None, 18)
    >>> axes_of(cx, -1), axes_of(cx, None)
    ([1], [0, 1])
    """
    rank = len(cx.shape(0))
    if axes is None:
        return list(range(rank))
    axes = [axes] if isinstance(axes, int) else list(axes)
    return [a % rank if rank else 0 for a in axes]


def reduce_node(cx: Context, op_type: str, x: str, axes: list[int], keep: int, since: int = 18) -> str:
    """A reduction of ``x`` over ``axes``: the axes as an input from opset ``since`` (13 for ReduceSum, 18 for
    the others), as an attribute before."""
    if cx.opset >= since:
        return cx.node(op_type, [x, cx.g.ints(axes)], keepdims=keep)
    return cx.node(op_type, [x], axes=axes, keepdims=keep)


def elem_type(dtype) -> int:
    """ONNX's element type number of a NumPy dtype (float32 for None).

    >>> elem_type("float32"), elem_type("int64"), elem_type("bool")
    (1, 7, 9)
    """
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype or np.float32))
