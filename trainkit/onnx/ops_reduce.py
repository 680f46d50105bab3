"""Converters of the reductions (sum, mean, max with indices, var and std, norms, logsumexp), sorting and the
matrix products.
"""

from __future__ import annotations

import math

from .context import Context, axes_of, elem_type, reduce_node

__all__ = ["REDUCE_CONVERTERS"]


def _reduce(op_type: str, axes_input_since: int = 18):
    """``ReduceSum`` takes its axes as an input from opset 13, the others from opset 18."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        axes = axes_of(cx, cx.params.get("axes", cx.params.get("dim")))
        keep = int(bool(cx.params.get("keepdim", False)))
        if not axes:
            cx.bind(cx.node("Identity", [x]))
        elif cx.opset >= axes_input_since:
            cx.bind(cx.node(op_type, [x, cx.g.ints(axes)], keepdims=keep))
        else:
            cx.bind(cx.node(op_type, [x], axes=axes, keepdims=keep))

    convert.__doc__ = f"ONNX {op_type} over the axes, ``keepdims`` as ``keepdim``."
    return convert


def _dim_args(cx: Context) -> tuple:
    rest = list(cx.rec.inputs[1:])
    dim = rest[0] if rest else cx.params.get("dim", cx.params.get("other"))
    keepdim = rest[1] if len(rest) > 1 else cx.params.get("keepdim", False)
    return dim, int(bool(keepdim))


def _extreme(op_type: str, arg_type: str, pairwise: str):
    """``x.max()``, ``x.max(dim)`` (values and indices) and ``x.max(other)``."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        dim, keep = _dim_args(cx)
        if hasattr(dim, "shape"):
            cx.bind(cx.node(pairwise, [x, cx.g.value(dim)]))
            return
        if dim is None:
            cx.bind(cx.node(op_type, [x], keepdims=0))
            return
        dim = int(dim) % max(len(cx.shape(0)), 1)
        if cx.opset >= 18:
            values = cx.node(op_type, [x, cx.g.ints([dim])], keepdims=keep)
        else:
            values = cx.node(op_type, [x], axes=[dim], keepdims=keep)
        cx.bind([values, cx.node(arg_type, [x], axis=dim, keepdims=keep)])

    return convert


def _arg_extreme(arg_type: str):
    def convert(cx: Context) -> None:
        x = cx.input(0)
        dim, keep = _dim_args(cx)
        if dim is None:
            if keep:
                raise cx.refuse("argmax/argmin with keepdim=True and no dim")
            cx.bind(cx.node(arg_type, [cx.node("Reshape", [x, cx.g.ints([-1])])], axis=0, keepdims=0))
            return
        cx.bind(cx.node(arg_type, [x], axis=int(dim) % max(len(cx.shape(0)), 1), keepdims=keep))

    return convert


def _max_dim(op_type: str, arg_type: str):
    """``x.max(dim)``: values and indices."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        dim = int(cx.params["dim"]) % max(len(cx.shape(0)), 1)
        keep = int(bool(cx.params.get("keepdim", False)))
        vals = cx.node(op_type, [x, cx.g.ints([dim])], keepdims=keep) if cx.opset >= 18 else None
        if vals is None:
            vals = cx.node(op_type, [x], axes=[dim], keepdims=keep)
        outs = cx.out_arrays()
        if len(outs) == 1:
            cx.bind(vals)
            return
        cx.bind([vals, cx.node(arg_type, [x], axis=dim, keepdims=keep)])

    return convert


def _matmul(cx: Context) -> None:
    a, b = cx.input(0), cx.input(1)
    cx.bind(cx.node("MatMul", [a, b]))


def _addmm(cx: Context) -> None:
    """``bias + x @ w_t`` (what ``F.linear`` runs on 2-d inputs): ``Gemm``, or ``MatMul`` and ``Add``."""
    b, x, w = cx.input(0), cx.input(1), cx.input(2)
    if len(cx.shape(1)) == 2 and len(cx.shape(2)) == 2 and len(cx.shape(0)) <= 2:
        cx.bind(cx.node("Gemm", [x, w, b]))
    else:
        cx.bind(cx.node("Add", [cx.node("MatMul", [x, w]), b]))


def _logsumexp(cx: Context) -> None:
    axes = axes_of(cx, cx.params.get("dims"))
    cx.bind(reduce_node(cx, "ReduceLogSumExp", cx.input(0), axes, int(bool(cx.params.get("keepdim")))))


def _vector_norm(cx: Context) -> None:
    """``norm(x, p, dim)``: ``ReduceL2``, ``ReduceL1``, the largest or smallest ``|x|``, else
    ``(sum |x|^p)^(1/p)``."""
    x = cx.input(0)
    p = float(cx.params.get("p", 2))
    axes = axes_of(cx, cx.params.get("axes"))
    keep = int(bool(cx.params.get("keepdim")))
    if p == 2:
        cx.bind(reduce_node(cx, "ReduceL2", x, axes, keep))
    elif p == 1:
        cx.bind(reduce_node(cx, "ReduceL1", x, axes, keep))
    elif math.isinf(p):
        cx.bind(reduce_node(cx, "ReduceMax" if p > 0 else "ReduceMin", cx.node("Abs", [x]), axes, keep))
    elif p == 0:
        raise cx.refuse("the 0-norm (a count of nonzeros)")
    else:
        powered = cx.node("Pow", [cx.node("Abs", [x]), cx.const_like(p, x)])
        total = reduce_node(cx, "ReduceSum", powered, axes, keep, 13)
        cx.bind(cx.node("Pow", [total, cx.const_like(1 / p, x)]))


def _variance(root: bool):
    """``var``/``std`` over ``axes`` with ``correction``: the mean of squared deviations, divided by the count less
    the correction (the count from the run-time shape, so it follows dynamic axes)."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        axes = axes_of(cx, cx.params.get("axes"))
        keep = int(bool(cx.params.get("keepdim")))
        centered = cx.node("Sub", [x, reduce_node(cx, "ReduceMean", x, axes, 1)])
        total = reduce_node(cx, "ReduceSum", cx.node("Mul", [centered, centered]), axes, keep, 13)
        sizes = cx.node("Gather", [cx.node("Shape", [x]), cx.g.ints(axes)], axis=0)
        count = cx.node("Cast", [cx.node("ReduceProd", [sizes], keepdims=0)], to=elem_type(cx.dtype(x)))
        correction = cx.const_like(float(cx.params.get("correction", 1) or 0), x)
        out = cx.node("Div", [total, cx.node("Sub", [count, correction])])
        cx.bind(cx.node("Sqrt", [out]) if root else out)

    return convert


def _prod(cx: Context) -> None:
    x = cx.input(0)
    dim = cx.params.get("dim")
    if dim is None:
        cx.bind(cx.node("ReduceProd", [x], keepdims=0))
        return
    keep = int(bool(cx.params.get("keepdim")))
    cx.bind(reduce_node(cx, "ReduceProd", x, axes_of(cx, dim), keep))


def _top(cx: Context) -> None:
    """``x.topk(k, dim, largest)``, ``x.sort(dim, descending)`` and ``x.argsort(...)``: ``TopK``, over the whole
    dimension (its run-time length) for sort."""
    x = cx.input(0)
    name = cx.rec.target.__name__
    rank = max(len(cx.shape(0)), 1)
    if name == "topk":
        k = cx.arg(1, "k")
        dim, largest = cx.arg(2, "dim", -1), cx.arg(3, "largest", True)
        k = cx.g.ints([int(k)])
    else:
        dim, largest = cx.arg(1, "dim", -1), cx.arg(2, "descending", False)
        k = cx.node("Gather", [cx.node("Shape", [x]), cx.g.ints([int(dim) % rank])], axis=0)
    values, indices = cx.g.node("TopK", [x, k], outputs=2, axis=int(dim) % rank, largest=int(bool(largest)))
    cx.bind(indices if name == "argsort" else [values, indices])


REDUCE_CONVERTERS = {
    "tensor.topk": _top,
    "tensor.sort": _top,
    "tensor.argsort": _top,
    "activation.LogsumexpBackward0": _logsumexp,
    "norm.LinalgVectorNormBackward0": _vector_norm,
    "reduction.VarBackward0": _variance(False),
    "reduction.StdBackward0": _variance(True),
    "cumulative.ProdBackward0": _prod,
    "cumulative.ProdBackward1": _prod,
    "tensor.max": _extreme("ReduceMax", "ArgMax", "Max"),
    "tensor.min": _extreme("ReduceMin", "ArgMin", "Min"),
    "tensor.argmax": _arg_extreme("ArgMax"),
    "tensor.argmin": _arg_extreme("ArgMin"),
    "reduction.SumBackward0": _reduce("ReduceSum", 13),
    "reduction.SumBackward1": _reduce("ReduceSum", 13),
    "reduction.MeanBackward0": _reduce("ReduceMean"),
    "reduction.MeanBackward1": _reduce("ReduceMean"),
    "reduction.AmaxBackward0": _reduce("ReduceMax"),
    "reduction.AminBackward0": _reduce("ReduceMin"),
    "reduction.MaxBackward1": _reduce("ReduceMax"),
    "reduction.MinBackward1": _reduce("ReduceMin"),
    "reduction.MaxBackward0": _max_dim("ReduceMax", "ArgMax"),
    "reduction.MinBackward0": _max_dim("ReduceMin", "ArgMin"),
    "linalg.UnsafeViewBackward0": _matmul,
    "linalg.MmBackward0": _matmul,
    "linalg.MvBackward0": _matmul,
    "linalg.DotBackward0": _matmul,
    "linalg.BmmBackward0": _matmul,
    "linalg.SqueezeBackward4": _matmul,
    "linalg.CloneBackward0": _matmul,
    "linear.AddmmBackward0": _addmm,
}
