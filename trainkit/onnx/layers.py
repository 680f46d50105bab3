"""Converters of whole layers, one row per layer class: a layer that is one ONNX op (``Conv``, ``MaxPool``,
``BatchNormalization``, ``LSTM``, ...) is written as that op from its attributes and parameters, rather than from
the ops its forward runs. Layers not listed here are traced op by op.
"""

from __future__ import annotations

import numpy as np

from .. import layers as nn
from .context import Context
from .graph import array_of
from .rnn import RNN_CONVERTERS

__all__ = ["LAYER_CONVERTERS"]


def _tuple(v, n: int) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)] * n


def _weight_t(cx: Context, w) -> str:
    """``W^T`` of a Linear's weight: a transposed initializer (or a ``Transpose`` when parameters are inputs)."""
    if cx.g.export_params:
        name = cx.g.param_names.get(id(array_of(w)), "weight")
        return cx.g.initializer(array_of(w).T, f"{name}.T")
    return cx.node("Transpose", [cx.g.value(w)], perm=[1, 0])


def _linear(cx: Context) -> None:
    """``x W^T + b``: ``Gemm`` on a matrix, ``MatMul`` and ``Add`` on any other rank."""
    m = cx.rec.module
    x = cx.input(0)
    if len(cx.shape(0)) == 2:
        args = [x, cx.g.value(m.weight)] + ([cx.g.value(m.bias)] if m.bias is not None else [])
        cx.bind(cx.node("Gemm", args, transB=1))
        return
    y = cx.node("MatMul", [x, _weight_t(cx, m.weight)])
    cx.bind(y if m.bias is None else cx.node("Add", [y, cx.g.value(m.bias)]))


def _conv_pads(cx: Context, m, n: int) -> list[int]:
    if getattr(m, "padding_mode", "zeros") != "zeros":
        raise cx.refuse(f"padding_mode={m.padding_mode!r} (only 'zeros' is exported)")
    if m.padding == "valid":
        return [0] * (2 * n)
    kernel, dilation = _tuple(m.kernel_size, n), _tuple(m.dilation, n)
    if m.padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    pads = _tuple(m.padding, n)
    return pads + pads


def _conv(cx: Context) -> None:
    m = cx.rec.module
    n = len(cx.shape(0)) - 2
    if n < 1:
        raise cx.refuse("unbatched convolution input (add the batch axis first)")
    args = [cx.input(0), cx.g.value(m.weight)] + ([cx.g.value(m.bias)] if m.bias is not None else [])
    attrs = dict(
        kernel_shape=_tuple(m.kernel_size, n),
        strides=_tuple(m.stride, n),
        dilations=_tuple(m.dilation, n),
        group=int(m.groups),
    )
    if isinstance(m, nn.ConvTranspose1d | nn.ConvTranspose2d):
        if len(cx.rec.inputs) > 1 or "output_size" in cx.params:
            raise cx.refuse("ConvTranspose with output_size")
        pads = _tuple(m.padding, n)
        cx.bind(cx.node("ConvTranspose", args, pads=pads + pads, output_padding=_tuple(m.output_padding, n), **attrs))
        return
    cx.bind(cx.node("Conv", args, pads=_conv_pads(cx, m, n), **attrs))


def _max_pool(cx: Context) -> None:
    m = cx.rec.module
    n = len(cx.shape(0)) - 2
    if m.return_indices:
        raise cx.refuse("return_indices=True")
    kernel = _tuple(m.kernel_size, n)
    stride = _tuple(m.stride if m.stride is not None else m.kernel_size, n)
    pads = _tuple(m.padding, n)
    cx.bind(
        cx.node(
            "MaxPool",
            [cx.input(0)],
            kernel_shape=kernel,
            strides=stride,
            pads=pads + pads,
            dilations=_tuple(m.dilation, n),
            ceil_mode=int(bool(m.ceil_mode)),
        )
    )


def _avg_pool(cx: Context) -> None:
    m = cx.rec.module
    n = len(cx.shape(0)) - 2
    if getattr(m, "divisor_override", None):
        raise cx.refuse("divisor_override")
    kernel = _tuple(m.kernel_size, n)
    stride = _tuple(m.stride if m.stride is not None else m.kernel_size, n)
    pads = _tuple(m.padding, n)
    cx.bind(
        cx.node(
            "AveragePool",
            [cx.input(0)],
            kernel_shape=kernel,
            strides=stride,
            pads=pads + pads,
            ceil_mode=int(bool(m.ceil_mode)),
            count_include_pad=int(bool(m.count_include_pad)),
        )
    )


def _adaptive_pool(global_op: str, op: str):
    """Output size 1 everywhere: ``Global...Pool``; an output size that divides the input: a plain pool with
    kernel = stride = input / output (the windows adaptive pooling takes then)."""

    def convert(cx: Context) -> None:
        m = cx.rec.module
        shape = cx.shape(0)
        n = len(shape) - 2
        out = [s if o is None else int(o) for o, s in zip(_tuple_or_none(m.output_size, n), shape[2:])]
        if getattr(m, "return_indices", False):
            raise cx.refuse("return_indices=True")
        x = cx.input(0)
        if all(o == 1 for o in out):
            cx.bind(cx.node(global_op, [x]))
            return
        if any(s % o for s, o in zip(shape[2:], out)) or (cx.rec2 is not None and cx.shape(0)[2:] != cx.shape2(0)[2:]):
            raise cx.refuse(f"output size {tuple(out)} does not divide the input's {tuple(shape[2:])}")
        kernel = [s // o for s, o in zip(shape[2:], out)]
        cx.bind(cx.node(op, [x], kernel_shape=kernel, strides=kernel))

    return convert


def _tuple_or_none(v, n: int) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v] * n


def _batch_norm(cx: Context) -> None:
    """Evaluation-mode batch norm with the running statistics: ``BatchNormalization``."""
    m = cx.rec.module
    if m.running_mean is None:
        raise cx.refuse("track_running_stats=False (it normalizes by the batch's statistics even in eval mode)")
    c = int(m.num_features)
    dtype = cx.g.dtype(cx.input(0)) or np.float32
    scale = cx.g.value(m.weight) if m.weight is not None else cx.g.const(np.ones(c, dtype))
    bias = cx.g.value(m.bias) if m.bias is not None else cx.g.const(np.zeros(c, dtype))
    args = [cx.input(0), scale, bias, cx.g.value(m.running_mean), cx.g.value(m.running_var)]
    cx.bind(cx.node("BatchNormalization", args, epsilon=float(m.eps)))


RESIZE_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "trilinear": "linear"}


def _upsample(cx: Context) -> None:
    """``nn.Upsample``: ``Resize`` with PyTorch's pixel mapping (nearest: ``asymmetric`` and ``floor``; linear:
    ``pytorch_half_pixel``, or ``align_corners``; bicubic: ``cubic_coeff_a=-0.75``)."""
    m = cx.rec.module
    x = cx.input(0)
    n = len(cx.shape(0)) - 2
    if m.mode not in RESIZE_MODES and m.mode != "bicubic":
        raise cx.refuse(f"mode={m.mode!r} (nearest, linear, bilinear, trilinear and bicubic are exported)")
    attrs: dict = {"mode": RESIZE_MODES.get(m.mode, "cubic")}
    if m.mode == "nearest":
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        attrs["coordinate_transformation_mode"] = "align_corners" if m.align_corners else "pytorch_half_pixel"
        if m.mode == "bicubic":
            attrs["cubic_coeff_a"] = -0.75
    if m.size is not None or m.recompute_scale_factor:
        out = cx.out_arrays()[0].shape
        if cx.rec2 is not None and cx.shape(0)[2:] != cx.shape2(0)[2:] and m.size is None:
            raise cx.refuse("recompute_scale_factor=True with spatial axes that change")
        batch_channels = cx.node("Slice", [cx.node("Shape", [x]), cx.g.ints([0]), cx.g.ints([2])])
        sizes = cx.node("Concat", [batch_channels, cx.g.ints(out[2:])], axis=0)
        cx.bind(cx.node("Resize", [x, "", "", sizes], **attrs))
        return
    factors = m.scale_factor if isinstance(m.scale_factor, tuple) else (m.scale_factor,) * n
    scales = cx.g.const(np.asarray([1.0, 1.0, *factors], dtype=np.float32))
    cx.bind(cx.node("Resize", [x, "", scales], **attrs))


def _identity(cx: Context) -> None:
    cx.bind(cx.node("Identity", [cx.input(0)]))


LAYER_CONVERTERS = {
    nn.Linear: _linear,
    nn.Conv1d: _conv,
    nn.Conv2d: _conv,
    nn.ConvTranspose1d: _conv,
    nn.ConvTranspose2d: _conv,
    nn.MaxPool1d: _max_pool,
    nn.MaxPool2d: _max_pool,
    nn.AvgPool1d: _avg_pool,
    nn.AvgPool2d: _avg_pool,
    nn.AdaptiveAvgPool1d: _adaptive_pool("GlobalAveragePool", "AveragePool"),
    nn.AdaptiveAvgPool2d: _adaptive_pool("GlobalAveragePool", "AveragePool"),
    nn.AdaptiveMaxPool1d: _adaptive_pool("GlobalMaxPool", "MaxPool"),
    nn.BatchNorm1d: _batch_norm,
    nn.BatchNorm2d: _batch_norm,
    nn.Upsample: _upsample,
    nn.Dropout: _identity,
    nn.Identity: _identity,
    **RNN_CONVERTERS,
}
