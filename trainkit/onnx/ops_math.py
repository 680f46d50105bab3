"""Converters of the arithmetic, activation, reduction, matrix and normalization ops: one row per op class,
keyed ``"<module>.<node name>"`` as ``Op`` subclasses are named (``math.MulBackward0``).
"""

from __future__ import annotations

import math

import numpy as np

from .context import Context

__all__ = ["MATH_CONVERTERS"]


def _unary(op_type: str, **attrs):
    def convert(cx: Context) -> None:
        cx.bind(cx.node(op_type, [cx.input(0)], **attrs))

    convert.__doc__ = f"ONNX {op_type}."
    return convert


def _binary(op_type: str, swap: bool = False):
    def convert(cx: Context) -> None:
        a, b = _operands(cx)
        cx.bind(cx.node(op_type, [b, a] if swap else [a, b]))

    convert.__doc__ = f"ONNX {op_type} of the two inputs (broadcasting as PyTorch does)."
    return convert


def _operands(cx: Context) -> tuple[str, str]:
    """The names of inputs 0 and 1; a number takes the dtype of the tensor beside it."""
    x = cx.rec.inputs[0]
    y = cx.arg(1, "y", cx.params.get("other"))
    if hasattr(x, "shape") or not hasattr(y, "shape"):
        a = cx.input(0)
        return a, cx.g.value(y, like=a)
    b = cx.g.value(y)
    return cx.input(0, like=b), b


def _scaled(cx: Context, name: str, alpha) -> str:
    return name if alpha in (None, 1) else cx.node("Mul", [name, cx.const_like(alpha, name)])


def _add(cx: Context) -> None:
    a, b = _operands(cx)
    cx.bind(cx.node("Add", [a, _scaled(cx, b, cx.params.get("alpha"))]))


def _sub(cx: Context) -> None:
    a, b = _operands(cx)
    cx.bind(cx.node("Sub", [a, _scaled(cx, b, cx.params.get("alpha"))]))


def _rsub(cx: Context) -> None:
    """``other - x`` (``torch.rsub``, ``2 - x``)."""
    a, b = _operands(cx)
    cx.bind(cx.node("Sub", [b, a]))


def _div_mode(cx: Context) -> None:
    a, b = _operands(cx)
    q = cx.node("Div", [a, b])
    mode = cx.params.get("mode")
    if mode == "floor":
        q = cx.node("Floor", [q])
    elif mode == "trunc":
        q = cx.node("Mul", [cx.node("Floor", [cx.node("Abs", [q])]), cx.node("Sign", [q])])
    cx.bind(q)


def _pow_scalar(cx: Context) -> None:
    x = cx.input(0)
    p = cx.params.get("p", cx.rec.inputs[1] if len(cx.rec.inputs) > 1 else None)
    if p == 2:
        cx.bind(cx.node("Mul", [x, x]))
    elif p == 0.5:
        cx.bind(cx.node("Sqrt", [x]))
    else:
        cx.bind(cx.node("Pow", [x, cx.const_like(p, x)]))


def _pow_base(cx: Context) -> None:
    """``base ** x`` with a number as the base."""
    x = cx.input(0)
    base = cx.params.get("base", cx.rec.inputs[1] if len(cx.rec.inputs) > 1 else None)
    cx.bind(cx.node("Pow", [cx.const_like(base, x), x]))


def _where(cx: Context) -> None:
    x = cx.input(0)
    y = cx.input(1, like=x)
    cx.bind(cx.node("Where", [cx.g.value(cx.arg(2, "cond")), x, y]))


def _masked_fill(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Where", [cx.input(1), cx.input(2, like=x), x]))


def _clamp(cx: Context) -> None:
    x = cx.input(0)
    lo, hi = cx.arg(1, "lo"), cx.arg(2, "hi")
    if hasattr(lo, "shape") or hasattr(hi, "shape"):  # tensor bounds: Max and Min broadcast, Clip does not
        out = x if lo is None else cx.node("Max", [x, cx.g.value(lo, like=x)])
        cx.bind(out if hi is None else cx.node("Min", [out, cx.g.value(hi, like=x)]))
        return
    args = [x, "" if lo is None else cx.const_like(lo, x), "" if hi is None else cx.const_like(hi, x)]
    while args[-1] == "":
        args.pop()
    cx.bind(cx.node("Clip", args))


def _gelu(cx: Context) -> None:
    """Exact: ``x/2 (1 + erf(x/sqrt 2))``; ``approximate='tanh'``: ``x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))``
    (ONNX ``Gelu`` from opset 20)."""
    x = cx.input(0)
    approximate = cx.params.get("approximate", "none")
    if cx.opset >= 20:
        cx.bind(cx.node("Gelu", [x], approximate=approximate))
        return
    c = lambda v: cx.const_like(v, x)  # noqa: E731
    if approximate == "tanh":
        cube = cx.node("Mul", [cx.node("Mul", [x, x]), x])
        inner = cx.node("Mul", [cx.node("Add", [x, cx.node("Mul", [cube, c(0.044715)])]), c(math.sqrt(2 / math.pi))])
        t = cx.node("Tanh", [inner])
    else:
        t = cx.node("Erf", [cx.node("Mul", [x, c(1 / math.sqrt(2))])])
    cx.bind(cx.node("Mul", [cx.node("Mul", [x, c(0.5)]), cx.node("Add", [t, c(1.0)])]))


def _silu(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Mul", [x, cx.node("Sigmoid", [x])]))


def _mish(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Mul", [x, cx.node("Tanh", [cx.node("Softplus", [x])])]))


def _leaky_relu(cx: Context) -> None:
    cx.bind(cx.node("LeakyRelu", [cx.input(0)], alpha=float(cx.params["slope"])))


def _softplus(cx: Context) -> None:
    beta = cx.params.get("beta", 1.0)
    threshold = cx.params.get("threshold", 20.0)
    x = cx.input(0)
    if beta == 1 and threshold >= 20:
        cx.bind(cx.node("Softplus", [x]))
        return
    bx = cx.node("Mul", [x, cx.const_like(beta, x)])
    soft = cx.node("Div", [cx.node("Softplus", [bx]), cx.const_like(beta, x)])
    cx.bind(cx.node("Where", [cx.node("Greater", [bx, cx.const_like(threshold, x)]), x, soft]))


def _elu(cx: Context) -> None:
    alpha = cx.params.get("alpha", 1.0)
    scale = cx.params.get("scale", 1.0)
    input_scale = cx.params.get("input_scale", 1.0)
    if scale != 1 or input_scale != 1:
        raise cx.refuse("elu with scale or input_scale other than 1 (selu, celu)")
    cx.bind(cx.node("Elu", [cx.input(0)], alpha=float(alpha)))


def _softmax(op_type: str):
    def convert(cx: Context) -> None:
        cx.bind(cx.node(op_type, [cx.input(0)], axis=int(cx.params["dim"])))

    convert.__doc__ = f"ONNX {op_type} along ``dim`` (opset 13 and later: along one axis, as PyTorch)."
    return convert


def _axes(cx: Context, axes) -> list[int]:
    rank = len(cx.shape(0))
    if axes is None:
        return list(range(rank))
    axes = [axes] if isinstance(axes, int) else list(axes)
    return [a % rank if rank else 0 for a in axes]


def _reduce(op_type: str, axes_input_since: int = 18):
    """``ReduceSum`` takes its axes as an input from opset 13, the others from opset 18."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        axes = _axes(cx, cx.params.get("axes", cx.params.get("dim")))
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


def _to_copy(cx: Context) -> None:
    from onnx import helper

    dtype = cx.params.get("dtype")
    if dtype is None:
        cx.bind(cx.node("Identity", [cx.input(0)]))
        return
    cx.bind(cx.node("Cast", [cx.input(0)], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))))


def _layer_norm(cx: Context) -> None:
    """``LayerNormalization`` over the last ``ndim`` axes (opset 17)."""
    cx.need_opset(17, "LayerNormalization")
    x = cx.input(0)
    shape = cx.shape(0)
    ndim = int(cx.params["ndim"])
    norm_shape = shape[len(shape) - ndim :]
    dtype = cx.dtype(x) or np.float32
    w = cx.input(1) if cx.rec.inputs[1] is not None else cx.g.const(np.ones(norm_shape, dtype))
    b = cx.input(2) if cx.rec.inputs[2] is not None else cx.g.const(np.zeros(norm_shape, dtype))
    y = cx.node("LayerNormalization", [x, w, b], axis=-ndim, epsilon=float(cx.params["eps"]))
    cx.bind(y)


def _embedding(cx: Context) -> None:
    indices = cx.params["indices"] if "indices" in cx.params else cx.rec.inputs[1]
    cx.bind(cx.node("Gather", [cx.input(0), cx.g.value(indices)], axis=0))


def _trilu(upper: int):
    def convert(cx: Context) -> None:
        cx.need_opset(14, "Trilu")
        cx.bind(cx.node("Trilu", [cx.input(0), _k(cx)], upper=upper))

    return convert


def _k(cx: Context) -> str:
    return cx.g.const(np.asarray(int(cx.params.get("diagonal", 0)), dtype=np.int64))


def _cumsum(cx: Context) -> None:
    dim = cx.params.get("dim", cx.params.get("axis"))
    cx.bind(cx.node("CumSum", [cx.input(0), cx.g.const(np.asarray(int(dim), dtype=np.int64))]))


def _attention(cx: Context) -> None:
    """``softmax(q k^T * scale + mask) v`` from ``MatMul``, ``Softmax`` and, for ``is_causal``, a mask built
    at run time from the lengths (``Range``), so that it follows a dynamic sequence length."""
    q, k, v = cx.input(0), cx.input(1), cx.input(2)
    p = cx.params
    if p.get("k_groups", 1) != 1 or p.get("v_groups", 1) != 1:
        raise cx.refuse("grouped-query attention (enable_gqa) is not exported")
    rank = len(cx.shape(1))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = cx.node("MatMul", [q, cx.node("Transpose", [k], perm=perm)])
    scores = cx.node("Mul", [scores, cx.const_like(float(p["scale"]), q)])
    mask = cx.rec.inputs[3]
    if mask is not None:
        m = cx.input(3)
        if np.dtype(mask.dtype) == np.bool_:  # True: the key takes part
            scores = cx.node("Where", [m, scores, cx.const_like(-np.inf, q)])
        else:
            scores = cx.node("Add", [scores, m])
    if p.get("is_causal"):
        one = cx.g.const(np.asarray(1, dtype=np.int64))
        zero = cx.g.const(np.asarray(0, dtype=np.int64))
        shape_q, shape_k = cx.node("Shape", [q]), cx.node("Shape", [k])
        lq = cx.node("Squeeze", [cx.node("Gather", [shape_q, cx.g.ints([rank - 2])], axis=0)])
        lk = cx.node("Squeeze", [cx.node("Gather", [shape_k, cx.g.ints([rank - 2])], axis=0)])
        rows = cx.node("Unsqueeze", [cx.node("Range", [zero, lq, one]), cx.g.ints([1])])
        cols = cx.node("Range", [zero, lk, one])
        scores = cx.node("Where", [cx.node("Greater", [cols, rows]), cx.const_like(-np.inf, q), scores])
    cx.bind(cx.node("MatMul", [cx.node("Softmax", [scores], axis=-1), v]))


def _compare(op_type: str, negate: bool = False):
    def convert(cx: Context) -> None:
        a, b = _operands(cx)
        out = cx.node(op_type, [a, b])
        cx.bind(cx.node("Not", [out]) if negate else out)

    convert.__doc__ = f"ONNX {op_type} of two tensors (or a tensor and a number): a bool tensor."
    return convert


def _as_bool(cx: Context, name: str) -> str:
    if cx.dtype(name) == np.bool_:
        return name
    if cx.rec.target.__name__ in ("and", "or", "xor", "invert"):
        raise cx.refuse("a bitwise op on an integer tensor (only bool tensors are exported)")
    return cx.node("Cast", [name], to=9)  # logical ops: nonzero is True


def _logical(op_type: str):
    """``&``, ``|``, ``^`` of bool tensors, ``logical_and`` and the rest of any tensors."""

    def convert(cx: Context) -> None:
        a, b = _operands(cx)
        cx.bind(cx.node(op_type, [_as_bool(cx, a), _as_bool(cx, b)]))

    return convert


def _invert(cx: Context) -> None:
    cx.bind(cx.node("Not", [_as_bool(cx, cx.input(0))]))


def _canonical_mask(cx: Context) -> None:
    """A bool attention mask (True = masked out) as the float mask added to the scores: -inf and 0."""
    mask = cx.input(0)
    if cx.dtype(mask) != np.bool_:
        cx.bind(cx.node("Identity", [mask]))
        return
    dtype = np.dtype(cx.rec.inputs[4] if len(cx.rec.inputs) > 4 else cx.params["target_type"])
    inf, zero = cx.g.const(np.asarray(-np.inf, dtype)), cx.g.const(np.asarray(0, dtype))
    cx.bind(cx.node("Where", [mask, inf, zero]))


def _rsqrt(cx: Context) -> None:
    cx.bind(cx.node("Reciprocal", [cx.node("Sqrt", [cx.input(0)])]))


def _log1p(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Log", [cx.node("Add", [x, cx.const_like(1, x)])]))


def _expm1(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Sub", [cx.node("Exp", [x]), cx.const_like(1, x)]))


def _constant_pad(cx: Context) -> None:
    """``F.pad(x, widths, value=v)``: ``Pad`` with the amounts before and after each axis (negative crops)."""
    x = cx.input(0)
    widths = [(int(b), int(a)) for b, a in cx.params["widths"]]
    pads = [b for b, _ in widths] + [a for _, a in widths]
    cx.bind(cx.node("Pad", [x, cx.g.ints(pads), cx.const_like(cx.params.get("value", 0) or 0, x)], mode="constant"))


def _cast(cx: Context) -> None:
    """``x.to(dtype)``, ``x.bool()``, ``x.long()``, ...: ``Cast`` to the dtype of the result."""
    from onnx import helper

    x = cx.input(0)
    dtype = np.dtype(cx.out_arrays()[0].dtype)
    if cx.dtype(x) == dtype:
        cx.bind(cx.node("Identity", [x]))
        return
    cx.bind(cx.node("Cast", [x], to=helper.np_dtype_to_tensor_dtype(dtype)))


def _reduce_node(cx: Context, op_type: str, x: str, axes: list[int], keep: int, since: int = 18) -> str:
    """A reduction over ``axes`` (all when empty is not meant: callers pass the axes), the axes as an input from
    opset ``since`` and as an attribute before."""
    if cx.opset >= since:
        return cx.node(op_type, [x, cx.g.ints(axes)], keepdims=keep)
    return cx.node(op_type, [x], axes=axes, keepdims=keep)


def _logsumexp(cx: Context) -> None:
    axes = _axes(cx, cx.params.get("dims"))
    cx.bind(_reduce_node(cx, "ReduceLogSumExp", cx.input(0), axes, int(bool(cx.params.get("keepdim")))))


def _vector_norm(cx: Context) -> None:
    """``norm(x, p, dim)``: ``ReduceL2``, ``ReduceL1``, the largest or smallest ``|x|``, else
    ``(sum |x|^p)^(1/p)``."""
    x = cx.input(0)
    p = float(cx.params.get("p", 2))
    axes = _axes(cx, cx.params.get("axes"))
    keep = int(bool(cx.params.get("keepdim")))
    if p == 2:
        cx.bind(_reduce_node(cx, "ReduceL2", x, axes, keep))
    elif p == 1:
        cx.bind(_reduce_node(cx, "ReduceL1", x, axes, keep))
    elif math.isinf(p):
        cx.bind(_reduce_node(cx, "ReduceMax" if p > 0 else "ReduceMin", cx.node("Abs", [x]), axes, keep))
    elif p == 0:
        raise cx.refuse("the 0-norm (a count of nonzeros)")
    else:
        powered = cx.node("Pow", [cx.node("Abs", [x]), cx.const_like(p, x)])
        total = _reduce_node(cx, "ReduceSum", powered, axes, keep, 13)
        cx.bind(cx.node("Pow", [total, cx.const_like(1 / p, x)]))


def _variance(root: bool):
    """``var``/``std`` over ``axes`` with ``correction``: the mean of squared deviations, divided by the count less
    the correction (the count from the run-time shape, so it follows dynamic axes)."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        axes = _axes(cx, cx.params.get("axes"))
        keep = int(bool(cx.params.get("keepdim")))
        centered = cx.node("Sub", [x, _reduce_node(cx, "ReduceMean", x, axes, 1)])
        total = _reduce_node(cx, "ReduceSum", cx.node("Mul", [centered, centered]), axes, keep, 13)
        sizes = cx.node("Gather", [cx.node("Shape", [x]), cx.g.ints(axes)], axis=0)
        count = cx.node("Cast", [cx.node("ReduceProd", [sizes], keepdims=0)], to=_elem(cx.dtype(x)))
        correction = cx.const_like(float(cx.params.get("correction", 1) or 0), x)
        out = cx.node("Div", [total, cx.node("Sub", [count, correction])])
        cx.bind(cx.node("Sqrt", [out]) if root else out)

    return convert


def _elem(dtype) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype or np.float32))


def _prod(cx: Context) -> None:
    x = cx.input(0)
    dim = cx.params.get("dim")
    if dim is None:
        cx.bind(cx.node("ReduceProd", [x], keepdims=0))
        return
    keep = int(bool(cx.params.get("keepdim")))
    cx.bind(_reduce_node(cx, "ReduceProd", x, _axes(cx, dim), keep))


def _exp2(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Pow", [cx.const_like(2.0, x), x]))


def _log_base(base: float):
    def convert(cx: Context) -> None:
        x = cx.input(0)
        cx.bind(cx.node("Div", [cx.node("Log", [x]), cx.const_like(math.log(base), x)]))

    return convert


def _prelu(cx: Context) -> None:
    """``F.prelu(x, w)``: one slope per channel (dimension 1), or one for all."""
    x, w = cx.input(0), cx.input(1)
    rank = len(cx.shape(0))
    if cx.shape(1) and cx.shape(1)[0] > 1 and rank > 2:
        w = cx.node("Reshape", [w, cx.g.ints([-1] + [1] * (rank - 2))])
    cx.bind(cx.node("PRelu", [x, w]))


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


MATH_CONVERTERS = {
    "tensor.topk": _top,
    "tensor.sort": _top,
    "tensor.argsort": _top,
    "activation.LogsumexpBackward0": _logsumexp,
    "norm.LinalgVectorNormBackward0": _vector_norm,
    "reduction.VarBackward0": _variance(False),
    "reduction.StdBackward0": _variance(True),
    "cumulative.ProdBackward0": _prod,
    "cumulative.ProdBackward1": _prod,
    "elementwise.Exp2Backward0": _exp2,
    "elementwise.Log2Backward0": _log_base(2.0),
    "elementwise.Log10Backward0": _log_base(10.0),
    "rectifiers.PreluKernelBackward0": _prelu,
    "tensor.to": _cast,
    "tensor.max": _extreme("ReduceMax", "ArgMax", "Max"),
    "tensor.min": _extreme("ReduceMin", "ArgMin", "Min"),
    "tensor.argmax": _arg_extreme("ArgMax"),
    "tensor.argmin": _arg_extreme("ArgMin"),
    "elementwise.RsqrtBackward0": _rsqrt,
    "elementwise.Log1PBackward0": _log1p,
    "elementwise.Expm1Backward0": _expm1,
    "padding.ConstantPadNdBackward0": _constant_pad,
    "function.canonical_mask": _canonical_mask,
    "tensor.eq": _compare("Equal"),
    "tensor.ne": _compare("Equal", negate=True),
    "tensor.lt": _compare("Less"),
    "tensor.le": _compare("LessOrEqual"),
    "tensor.gt": _compare("Greater"),
    "tensor.ge": _compare("GreaterOrEqual"),
    "tensor.and": _logical("And"),
    "tensor.or": _logical("Or"),
    "tensor.xor": _logical("Xor"),
    "tensor.logical_and": _logical("And"),
    "tensor.logical_or": _logical("Or"),
    "tensor.logical_xor": _logical("Xor"),
    "tensor.invert": _invert,
    "tensor.logical_not": _invert,
    "tensor.isnan": _unary("IsNaN"),
    "math.AddBackward0": _add,
    "math.SubBackward0": _sub,
    "math.RsubBackward0": _rsub,
    "math.RsubBackward1": _rsub,
    "math.MulBackward0": _binary("Mul"),
    "math.DivBackward0": _binary("Div"),
    "math.DivBackward2": _binary("Div"),
    "division.DivBackward2": _div_mode,
    "classification.DivBackward1": _binary("Div"),
    "math.NegBackward0": _unary("Neg"),
    "math.ExpBackward0": _unary("Exp"),
    "math.LogBackward0": _unary("Log"),
    "math.SqrtBackward0": _unary("Sqrt"),
    "math.AbsBackward0": _unary("Abs"),
    "math.SignBackward0": _unary("Sign"),
    "math.ReciprocalBackward0": _unary("Reciprocal"),
    "math.WhereBackward0": _where,
    "elementwise.ErfBackward0": _unary("Erf"),
    "elementwise.FloorBackward0": _unary("Floor"),
    "elementwise.CeilBackward0": _unary("Ceil"),
    "elementwise.RoundBackward0": _unary("Round"),
    "trigonometric.SinBackward0": _unary("Sin"),
    "trigonometric.CosBackward0": _unary("Cos"),
    "trigonometric.TanBackward0": _unary("Tan"),
    "trigonometric.AsinBackward0": _unary("Asin"),
    "trigonometric.AcosBackward0": _unary("Acos"),
    "trigonometric.AtanBackward0": _unary("Atan"),
    "trigonometric.SinhBackward0": _unary("Sinh"),
    "trigonometric.CoshBackward0": _unary("Cosh"),
    "power.PowBackward0": _pow_scalar,
    "power.PowBackward1": _binary("Pow"),
    "power.PowBackward2": _pow_base,
    "clamp.ClampBackward0": _clamp,
    "clamp.ClampBackward1": _clamp,
    "clamp.ClampMinBackward0": _clamp,
    "clamp.ClampMinBackward1": _clamp,
    "clamp.ClampMaxBackward0": _clamp,
    "clamp.ClampMaxBackward1": _clamp,
    "clamp.MaximumBackward0": _binary("Max"),
    "clamp.MinimumBackward0": _binary("Min"),
    "masking.MaskedFillBackward0": _masked_fill,
    "masking.MaskedFillBackward1": _masked_fill,
    "activation.ReluBackward0": _unary("Relu"),
    "activation.SigmoidBackward0": _unary("Sigmoid"),
    "activation.TanhBackward0": _unary("Tanh"),
    "activation.GeluBackward0": _gelu,
    "activation.LeakyReluBackward0": _leaky_relu,
    "activation.LeakyReluBackward1": _leaky_relu,
    "activation.SoftplusBackward0": _softplus,
    "activation.SoftmaxBackward0": _softmax("Softmax"),
    "activation.LogSoftmaxBackward0": _softmax("LogSoftmax"),
    "self_gated.SiluBackward0": _silu,
    "self_gated.HardswishBackward0": _unary("HardSwish"),
    "self_gated.MishBackward0": _mish,
    "rectifiers.EluBackward0": _elu,
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
    "copy.CloneBackward0": _unary("Identity"),
    "copy.ToCopyBackward0": _to_copy,
    "normalization.NativeLayerNormBackward0": _layer_norm,
    "sparse.EmbeddingBackward0": _embedding,
    "triangular.TrilBackward0": _trilu(0),
    "triangular.TriuBackward0": _trilu(1),
    "cumulative.CumsumBackward0": _cumsum,
    "attention.ScaledDotProductFlashAttentionForCpuBackward0": _attention,
}
