"""Transposed 2-D convolution, as ``torch.nn.functional.conv_transpose2d``.

A transposed convolution is the adjoint of ``conv2d``: read with the same kernel, stride, padding and dilation, the
convolution maps an image of the transposed convolution's *output* size to one of its *input* size, and the transposed
convolution runs that map backwards. So its forward is a convolution's input gradient, ``col2im(W2d^T @ x)``, and its
input gradient is a convolution, ``W2d @ im2col(g)``, both with the im2col / col2im helpers of ``functional.im2col``.
"""

from __future__ import annotations

import numpy as np

from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import bfloat16_result, kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.type_names import legacy_type_name, scalar_name
from ..autograd.tensor import Tensor
from .im2col import Geometry, Im2Col, col2im, im2col


class ConvolutionTranspose(Op, name="ConvolutionBackward0"):
    """out = col2im(W2d^T @ x) + b, per group, with W2d = w reshaped to (C_in, C_out/groups * KH * KW) and ``geom``
    the convolution that reads an output-sized image into an input-sized one.

    dx = W2d @ im2col(g),  dw = sum over n of x @ im2col(g)^T,  db = g summed over n, oh, ow.
    With ``create_graph`` the same formulas run on Tensors (Im2Col and matmul), so they differentiate again.
    """

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 0}

    def forward(self, x, w, b, geom, groups, out_hw):
        self.geom, self.groups, self.x_shape, self.w_shape = geom, groups, x.shape, w.shape
        n, cin, h, wd = x.shape
        cout = w.shape[1] * groups
        kh, kw = geom.kernel
        rows = w.shape[1] * kh * kw  # one group's rows of the column matrix
        wg = w.reshape(groups, cin // groups, rows).swapaxes(-1, -2)
        col = (wg @ x.reshape(n, groups, cin // groups, h * wd)).reshape(n, cout * kh * kw, h * wd)
        out = col2im(col, (n, cout) + out_hw, geom)
        if b is not None:
            out = out + b.reshape(cout, 1, 1)  # a fresh, contiguous array, where col2im may hand back a cropped view
        # bfloat16's product ran in float32 (NumPy's matmul gives it): rounded once, as PyTorch's kernel
        return bfloat16_result(xp_of(out).ascontiguousarray(out), x)

    def backward(self, g):
        x, w = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        groups, geom = self.groups, self.geom
        n, cin, h, wd = self.x_shape
        kh, kw = geom.kernel
        rows = self.w_shape[1] * kh * kw
        gx = gw = gb = None
        if fx is not None or fw is not None:
            if isinstance(g, Tensor):
                col = Im2Col.apply(g, geom=geom)  # differentiable in g, for second derivatives
            else:
                # a gradient broadcast from a sum has zero strides; one copy puts it back on the BLAS path
                col = im2col(xp_of(g).ascontiguousarray(g), geom)
            col = col.reshape((n, groups, rows, h * wd))
            if fx is not None:
                gx = (w.reshape((groups, cin // groups, rows)) @ col).reshape(self.x_shape)
            if fw is not None:
                xg = x.reshape((n, groups, cin // groups, h * wd))
                gw = (xg @ col.swapaxes(-1, -2)).sum(axis=0).reshape(self.w_shape)
        if fb is not None:
            gb = g.sum(axis=(0, 2, 3))
        return gx, gw, gb


def _param(value, name: str) -> tuple[int, int]:
    """An int or a sequence of one or two ints as (h, w), with PyTorch's message for other lengths."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) in (1, 2):
        return int(value[0]), int(value[-1])
    shown = list(value) if isinstance(value, (tuple, list)) else value
    raise RuntimeError(
        f"expected {name} to be a single integer value or a list of 2 values to match the convolution dimensions, "
        f"but got {name}={shown}"
    )


def _check(
    input: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride, padding, output_padding, dilation
) -> None:
    """PyTorch's checks of a transposed convolution's arguments, in its order."""
    x, w = input._data, weight._data
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(output_padding) < 0:
        raise RuntimeError("negative output_padding is not supported")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    if w.ndim != 4:
        raise RuntimeError(
            f"Expected 4-dimensional weight for conv_transpose2d, but got weight of size {list(w.shape)}"
        )
    if w.shape[0] < groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got weight of size "
            f"{list(w.shape)} instead"
        )
    if w.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of "
            f"size [{list(w.shape)}] instead"
        )
    if x.shape[1] != w.shape[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(w.shape)}, expected input{list(x.shape)} to have {w.shape[0]} "
            f"channels, but got {x.shape[1]} channels instead"
        )
    cout = w.shape[1] * groups
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != cout):
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be 1-dimensional with {cout} "
            f"elements, but got bias of size {list(bias.shape)} instead"
        )
    if 0 in x.shape[2:]:
        raise RuntimeError(
            f"Only zero batch or zero channel inputs are supported, but got input shape: {list(x.shape)}"
        )
    if x.dtype == np.float32:  # PyTorch's float32 kernel checks both; its kernel for other types the weight only
        for other, what in ((weight, "weight"), (bias, "bias")):
            if other is not None and other._data.dtype != x.dtype:
                raise RuntimeError(
                    f"Input type ({legacy_type_name(input)}) and {what} type ({legacy_type_name(other)}) should be the "
                    f"same or input should be a MKLDNN tensor and {what} is a dense tensor"
                )
    elif w.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {scalar_name(x.dtype)} but found {scalar_name(w.dtype)}")
    if kind_of(x.dtype) != "f":
        raise NotImplementedError(f"\"slow_conv_transpose2d_out_cpu\" not implemented for '{scalar_name(x.dtype)}'")
    (oph, opw), (sh, sw), (dh, dw) = output_padding, stride, dilation
    if not (oph < sh or oph < dh) or not (opw < sw or opw < dw):
        raise RuntimeError(
            f"output padding must be smaller than either stride or dilation, but got output_padding_height: {oph} "
            f"output_padding_width: {opw} stride_height: {sh} stride_width: {sw} dilation_height: {dh} "
            f"dilation_width: {dw}"
        )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """2-D transposed convolution ("deconvolution"), as ``torch.nn.functional.conv_transpose2d``.

    Each input pixel x[n, c, h, w] adds ``x * weight[c, o]`` into the output window that starts at
    (h * sh - ph, w * sw - pw), taps spaced by the dilation. ``input`` is (N, C_in, H, W) or (C_in, H, W);
    ``weight`` is (C_in, C_out / groups, KH, KW). The output is
    OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + output_padding_h + 1 (and so for OW): ``output_padding`` adds rows
    and columns on one side, to pick among the input sizes a strided ``conv2d`` maps onto the same output size.

    >>> import trainkit
    >>> conv_transpose2d(trainkit.ones(1, 1, 2, 2), trainkit.ones(1, 1, 2, 2))[0, 0]
    tensor([[1., 2., 1.],
            [2., 4., 2.],
            [1., 2., 1.]])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, weight, bias = autocast_inputs("conv_transpose2d", input, weight, bias)
    ndim = input._data.ndim
    if ndim not in (3, 4):
        raise RuntimeError(
            "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of size: "
            f"{list(input.shape)}"
        )
    if isinstance(padding, str):
        raise TypeError("conv_transpose2d(): argument 'padding' must be tuple of ints, not str")
    stride, padding = _param(stride, "stride"), _param(padding, "padding")
    output_padding, dilation = _param(output_padding, "output_padding"), _param(dilation, "dilation")
    if ndim == 3:  # as PyTorch: a batch of one, squeezed back (the result's grad_fn is SqueezeBackward1)
        out = conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups, dilation)
        return out.squeeze(0)
    _check(input, weight, bias, groups, stride, padding, output_padding, dilation)
    if bias is not None and bias.dtype != input.dtype:  # as PyTorch's kernel for types other than float32
        bias = bias.to(input.dtype)
    h, w = input._data.shape[2:]
    kernel = tuple(int(k) for k in weight._data.shape[2:])
    out_hw = tuple(
        (n - 1) * s - 2 * p + d * (k - 1) + op + 1
        for n, s, p, d, k, op in zip((h, w), stride, padding, dilation, kernel, output_padding)
    )
    if min(out_hw) <= 0:
        raise RuntimeError(
            f"Given input size per channel: ({h} x {w}). Calculated output size per channel: "
            f"({out_hw[0]} x {out_hw[1]}). Output size is too small"
        )
    (ph, pw), pads = padding, (padding[0], padding[0], padding[1], padding[1])
    if kernel == (1, 1) and stride == (1, 1) and (ph, pw) == (0, 0) and out_hw != (h, w):
        # im2col / col2im treat a 1x1, stride-1, unpadded geometry as a plain reshape, which output padding (allowed
        # here through the dilation) breaks; one row and column of padding takes them off that path
        pads = (0, 1, 0, 1)
    geom = Geometry(kernel, stride, dilation, pads, (h, w))
    return ConvolutionTranspose.apply(input, weight, bias, geom=geom, groups=groups, out_hw=out_hw)


__all__ = ["conv_transpose2d"]
