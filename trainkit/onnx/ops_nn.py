"""Converters of the neural-network ops traced one by one: activations, softmax, ``F.layer_norm``, ``F.embedding``,
``F.scaled_dot_product_attention`` and the bool masks of multi-head attention.
"""

from __future__ import annotations

import math

import numpy as np

from .context import Context, reduce_node, unary

__all__ = ["NN_CONVERTERS"]


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


def _layer_norm(cx: Context) -> None:
    """``LayerNormalization`` over the last ``ndim`` axes from opset 17; before it, the same from ``ReduceMean``:
    ``(x - mean) / sqrt(var + eps) * w + b``."""
    x = cx.input(0)
    shape = cx.shape(0)
    ndim = int(cx.params["ndim"])
    eps = float(cx.params["eps"])
    has_w, has_b = cx.rec.inputs[1] is not None, cx.rec.inputs[2] is not None
    if cx.opset >= 17:
        dtype = cx.dtype(x) or np.float32
        norm_shape = shape[len(shape) - ndim :]
        w = cx.input(1) if has_w else cx.g.const(np.ones(norm_shape, dtype))
        b = cx.input(2) if has_b else cx.g.const(np.zeros(norm_shape, dtype))
        cx.bind(cx.node("LayerNormalization", [x, w, b], axis=-ndim, epsilon=eps))
        return
    axes = list(range(len(shape) - ndim, len(shape)))
    centered = cx.node("Sub", [x, reduce_node(cx, "ReduceMean", x, axes, 1)])
    var = reduce_node(cx, "ReduceMean", cx.node("Mul", [centered, centered]), axes, 1)
    y = cx.node("Div", [centered, cx.node("Sqrt", [cx.node("Add", [var, cx.const_like(eps, x)])])])
    y = cx.node("Mul", [y, cx.input(1)]) if has_w else y
    cx.bind(cx.node("Add", [y, cx.input(2)]) if has_b else y)


def _hardswish(cx: Context) -> None:
    """``x * relu6(x + 3) / 6``: ONNX ``HardSwish`` from opset 14, ``HardSigmoid`` before."""
    x = cx.input(0)
    if cx.opset >= 14:
        cx.bind(cx.node("HardSwish", [x]))
    else:
        cx.bind(cx.node("Mul", [x, cx.node("HardSigmoid", [x], alpha=1 / 6, beta=0.5)]))


def _embedding(cx: Context) -> None:
    indices = cx.params["indices"] if "indices" in cx.params else cx.rec.inputs[1]
    cx.bind(cx.node("Gather", [cx.input(0), cx.g.value(indices)], axis=0))


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


def _canonical_mask(cx: Context) -> None:
    """A bool attention mask (True = masked out) as the float mask added to the scores: -inf and 0."""
    mask = cx.input(0)
    if cx.dtype(mask) != np.bool_:
        cx.bind(cx.node("Identity", [mask]))
        return
    dtype = np.dtype(cx.rec.inputs[4] if len(cx.rec.inputs) > 4 else cx.params["target_type"])
    inf, zero = cx.g.const(np.asarray(-np.inf, dtype)), cx.g.const(np.asarray(0, dtype))
    cx.bind(cx.node("Where", [mask, inf, zero]))


def _prelu(cx: Context) -> None:
    """``F.prelu(x, w)``: one slope per channel (dimension 1), or one for all."""
    x, w = cx.input(0), cx.input(1)
    rank = len(cx.shape(0))
    if cx.shape(1) and cx.shape(1)[0] > 1 and rank > 2:
        w = cx.node("Reshape", [w, cx.g.ints([-1] + [1] * (rank - 2))])
    cx.bind(cx.node("PRelu", [x, w]))


def _group_norm(cx: Context) -> None:
    """``F.group_norm``: ``(x - mean) / sqrt(var + eps)`` over each group of channels and all positions, then the
    per-channel affine, written with ``Reshape`` and ``ReduceMean`` (ONNX's GroupNormalization changed meaning in
    opset 21)."""
    x = cx.input(0)
    rank = len(cx.shape(0))
    grouped = cx.node("Reshape", [x, cx.g.ints([0, int(cx.arg(3, "groups")), -1])])
    centered = cx.node("Sub", [grouped, reduce_node(cx, "ReduceMean", grouped, [2], 1)])
    var = reduce_node(cx, "ReduceMean", cx.node("Mul", [centered, centered]), [2], 1)
    std = cx.node("Sqrt", [cx.node("Add", [var, cx.const_like(float(cx.arg(4, "eps")), x)])])
    y = cx.node("Reshape", [cx.node("Div", [centered, std]), cx.node("Shape", [x])])
    per_channel = cx.g.ints([-1] + [1] * (rank - 2))
    if cx.rec.inputs[1] is not None:
        y = cx.node("Mul", [y, cx.node("Reshape", [cx.input(1), per_channel])])
    if cx.rec.inputs[2] is not None:
        y = cx.node("Add", [y, cx.node("Reshape", [cx.input(2), per_channel])])
    cx.bind(y)


def _batch_norm(cx: Context) -> None:
    """``F.batch_norm`` on running statistics: ``BatchNormalization``."""
    if cx.params.get("training") or cx.params.get("running_mean") is None:
        raise cx.refuse("batch norm on the batch's own statistics (training=True or no running statistics)")
    x = cx.input(0)
    c = cx.shape(0)[1]
    dtype = cx.dtype(x) or np.float32
    scale = cx.input(1) if cx.rec.inputs[1] is not None else cx.g.const(np.ones(c, dtype))
    bias = cx.input(2) if cx.rec.inputs[2] is not None else cx.g.const(np.zeros(c, dtype))
    stats = [cx.g.value(cx.params["running_mean"]), cx.g.value(cx.params["running_var"])]
    cx.bind(cx.node("BatchNormalization", [x, scale, bias, *stats], epsilon=float(cx.params["eps"])))


def _convolution(cx: Context) -> None:
    """``F.conv1d`` and ``F.conv2d`` (their layers are converted whole): ``Conv`` from the op's geometry, whose
    pads are top, bottom, left, right; a 1-d convolution runs as a 2-d one of height 1."""
    if "geom" not in cx.params or "out_hw" in cx.params:
        raise cx.refuse("a transposed convolution called as a function (nn.ConvTranspose1d/2d export)")
    geom = cx.params["geom"]
    one_d = len(cx.shape(0)) == 3
    top, bottom, left, right = geom.pads
    attrs = dict(kernel_shape=list(geom.kernel), strides=list(geom.stride), dilations=list(geom.dilation))
    attrs["pads"] = [top, left, bottom, right]
    if one_d:
        attrs = {k: v[1:] if k != "pads" else [left, right] for k, v in attrs.items()}
    args = [cx.input(0), cx.input(1)] + ([cx.input(2)] if cx.rec.inputs[2] is not None else [])
    cx.bind(cx.node("Conv", args, group=int(cx.params.get("groups", 1)), **attrs))


NN_CONVERTERS = {
    "normalization.NativeGroupNormBackward0": _group_norm,
    "normalization.NativeBatchNormBackward0": _batch_norm,
    "conv.ConvolutionBackward0": _convolution,
    "conv1d.ConvolutionBackward0": _convolution,
    "rectifiers.PreluKernelBackward0": _prelu,
    "function.canonical_mask": _canonical_mask,
    "activation.ReluBackward0": unary("Relu"),
    "activation.SigmoidBackward0": unary("Sigmoid"),
    "activation.TanhBackward0": unary("Tanh"),
    "activation.GeluBackward0": _gelu,
    "activation.LeakyReluBackward0": _leaky_relu,
    "activation.LeakyReluBackward1": _leaky_relu,
    "activation.SoftplusBackward0": _softplus,
    "activation.SoftmaxBackward0": _softmax("Softmax"),
    "activation.LogSoftmaxBackward0": _softmax("LogSoftmax"),
    "self_gated.SiluBackward0": _silu,
    "self_gated.HardswishBackward0": _hardswish,
    "self_gated.MishBackward0": _mish,
    "rectifiers.EluBackward0": _elu,
    "normalization.NativeLayerNormBackward0": _layer_norm,
    "sparse.EmbeddingBackward0": _embedding,
    "attention.ScaledDotProductFlashAttentionForCpuBackward0": _attention,
}
