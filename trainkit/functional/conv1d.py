"""1-d convolution and transposed convolution over (N, C, L) or (C, L): ``conv1d`` and ``conv_transpose1d``.

A sequence of length L is an image of height 1: the 1-d ops run the 2-d ops' kernels (``conv.Convolution``,
``conv_transpose.ConvolutionTranspose``) on (N, C, 1, L) views of their arrays with a kernel of height 1, so they share
their speed and their differentiable backward (double backward included). The nodes themselves take and give 3-d
arrays, so a result's ``grad_fn`` is ``ConvolutionBackward0`` as in PyTorch, not a reshape.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.ops.type_names import legacy_type_name, scalar_name
from ..autograd.saved import unpack
from ..autograd.tensor import Tensor
from .conv import Convolution
from .conv_transpose import ConvolutionTranspose
from .im2col import Geometry, geometry

__all__ = ["conv1d", "conv_transpose1d"]


def _as_2d(a):
    """(N, C, L) -> (N, C, 1, L), for arrays and Tensors alike (a view, no copy)."""
    return None if a is None else a.reshape(tuple(a.shape[:2]) + (1,) + tuple(a.shape[2:]))


def _as_1d(a):
    """(N, C, 1, L) -> (N, C, L)."""
    return None if a is None else a.reshape(tuple(a.shape[:2]) + tuple(a.shape[3:]))


class Convolution1d(Convolution, name="ConvolutionBackward0"):
    """out[n, o, l] = b[o] + sum over c, k of w[o, c, k] * x_padded[n, c, l*s + k*d]: ``Convolution`` on the
    (N, C, 1, L) view of x and the (OC, C, 1, K) view of w. dx, dw, db are its gradients, viewed back in 3-d."""

    @property
    def saved_tensors(self) -> tuple:
        x, w = unpack(self)
        return _as_2d(x), _as_2d(w)

    def forward(self, x, w, b, geom, groups, keep_col):
        return _as_1d(super().forward(_as_2d(x), _as_2d(w), b, geom, groups, keep_col))

    def backward(self, g):
        gx, gw, gb = super().backward(_as_2d(g))
        return _as_1d(gx), _as_1d(gw), gb


class ConvolutionTranspose1d(ConvolutionTranspose, name="ConvolutionBackward0"):
    """out = the adjoint of a 1-d convolution applied to x, plus b: ``ConvolutionTranspose`` on (N, C, 1, L) views
    of x and of the (C_in, C_out / groups, 1, K) weight. Its gradients are viewed back in 3-d."""

    @property
    def saved_tensors(self) -> tuple:
        x, w = unpack(self)
        return _as_2d(x), _as_2d(w)

    def forward(self, x, w, b, geom, groups, out_hw):
        return _as_1d(super().forward(_as_2d(x), _as_2d(w), b, geom, groups, out_hw))

    def backward(self, g):
        gx, gw, gb = super().backward(_as_2d(g))
        return _as_1d(gx), _as_1d(gw), gb


def _single(value, name: str) -> int:
    """An int or a sequence of one int, with PyTorch's message for other lengths."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (tuple, list)) and len(value) == 1:
        return int(value[0])
    shown = list(value) if isinstance(value, (tuple, list)) else value
    raise RuntimeError(
        f"expected {name} to be a single integer value or a list of 1 values to match the convolution dimensions, "
        f"but got {name}={shown}"
    )


def _check_weight_dims(input: Tensor, weight: Tensor) -> None:
    w = weight._data
    if w.ndim < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if w.ndim != 3:
        raise RuntimeError(
            f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight {list(w.shape)}, but got "
            f"3-dimensional input of size {list(input.shape)} instead"
        )


def _check_dtypes(input: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's dtype checks: float32 input names legacy types, other inputs the scalar type; bias names C types."""
    x, w = input._data, weight._data
    if w.dtype != x.dtype:
        if x.dtype == np.float32:
            raise RuntimeError(
                f"Input type ({legacy_type_name(input)}) and weight type ({legacy_type_name(weight)}) should be the "
                "same or input should be a MKLDNN tensor and weight is a dense tensor"
            )
        raise RuntimeError(f"expected scalar type {scalar_name(x.dtype)} but found {scalar_name(w.dtype)}")
    if bias is not None and bias._data.dtype != x.dtype:
        raise RuntimeError(
            f"Input type ({_c_name(x.dtype)}) and bias type ({_c_name(bias._data.dtype)}) should be the same"
        )


def _c_name(dtype) -> str:
    return {"float32": "float", "float64": "double", "float16": "c10::Half"}.get(np.dtype(dtype).name, str(dtype))


def _check_groups(weight: Tensor, groups: int, at_least: int) -> None:
    w = weight._data
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if w.shape[0] < at_least:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be at least {at_least} at dimension 0, but got weight of size "
            f"{list(w.shape)} instead"
        )
    if w.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of "
            f"size [{list(w.shape)}] instead"
        )


def _same_pads(padding, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """(left, right) for an int, 'valid' or 'same' (an odd total puts the extra element on the right, as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if stride != 1:
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        total = dilation * (kernel - 1)
        return total // 2, total - total // 2
    p = _single(padding, "padding")
    if p < 0:
        raise RuntimeError("negative padding is not supported")
    return p, p


def conv1d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1
) -> Tensor:
    """1-D cross-correlation, as ``torch.nn.functional.conv1d``.

    out[n, o, l] = bias[o] + sum over c, k of weight[o, c, k] * x[n, c, l*stride + k*dilation - pad_left], zeros
    outside x. ``input`` is (N, C, L) or (C, L); ``weight`` is (OC, C / groups, K). ``padding`` is an int,
    ``'valid'`` (none) or ``'same'`` (output as long as the input, stride 1 only; an odd total padding
    dilation * (K - 1) puts the extra element on the right). L_out = (L + pads - dilation * (K - 1) - 1) // stride + 1.

    >>> import trainkit
    >>> conv1d(trainkit.ones(1, 1, 5), trainkit.ones(1, 1, 3), padding=1)
    tensor([[[2., 3., 3., 3., 2.]]])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, weight, bias = autocast_inputs("conv1d", input, weight, bias)
    ndim = input._data.ndim
    if ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: {list(input.shape)}"
        )
    if ndim == 2:  # as PyTorch: a batch of one, squeezed back (the result's grad_fn is SqueezeBackward1)
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    stride, dilation = _single(stride, "stride"), _single(dilation, "dilation")
    _check_weight_dims(input, weight)
    x, w = input._data, weight._data
    _check_groups(weight, groups, 1)
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(w.shape)}, expected input{list(x.shape)} to have "
            f"{w.shape[1] * groups} channels, but got {x.shape[1]} channels instead"
        )
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != w.shape[0]):
        raise RuntimeError(
            f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {w.shape[0]} elements, "
            f"but got bias of size {list(bias.shape)} instead"
        )
    if stride <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if dilation <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    kernel = int(w.shape[2])
    left, right = _same_pads(padding, kernel, stride, dilation)
    length = int(x.shape[2])
    padded, effective = length + left + right, (kernel - 1) * dilation + 1
    if effective > padded:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({padded}). Kernel size: ({effective}). Kernel size can't be "
            "greater than actual input size"
        )
    _check_dtypes(input, weight, bias)
    geom = geometry(1, length, (1, kernel), (1, stride), (1, dilation), (0, 0, left, right))
    keep_col = weight._requires_grad and grad_mode.is_grad_enabled()
    return Convolution1d.apply(input, weight, bias, geom=geom, groups=groups, keep_col=keep_col)


def _check_transpose(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    groups: int,
    stride: int,
    padding: int,
    output_padding: int,
    dilation: int,
) -> None:
    """PyTorch's checks of a transposed convolution's arguments, in its order."""
    x, w = input._data, weight._data
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if padding < 0:
        raise RuntimeError("negative padding is not supported")
    if output_padding < 0:
        raise RuntimeError("negative output_padding is not supported")
    if stride <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if dilation <= 0:
        raise RuntimeError("dilation should be greater than zero")
    _check_weight_dims(input, weight)
    _check_groups(weight, groups, groups)
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
    if x.shape[2] == 0:  # PyTorch reports the (N, C, 1, L) shape it works on
        raise RuntimeError(
            f"Only zero batch or zero channel inputs are supported, but got input shape: {list(_as_2d(x).shape)}"
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
    if not (output_padding < stride or output_padding < dilation):
        raise RuntimeError(  # PyTorch runs the 1-d case as 2-d and names both dimensions
            f"output padding must be smaller than either stride or dilation, but got output_padding_height: 0 "
            f"output_padding_width: {output_padding} stride_height: 1 stride_width: {stride} dilation_height: 1 "
            f"dilation_width: {dilation}"
        )


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``: the adjoint of ``conv1d``.

    Each input element x[n, c, l] adds ``x * weight[c, o, k]`` at output position l * stride - padding + k * dilation.
    ``input`` is (N, C_in, L) or (C_in, L); ``weight`` is (C_in, C_out / groups, K). The output has
    L_out = (L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1 elements.

    >>> import trainkit
    >>> conv_transpose1d(trainkit.ones(1, 1, 3), trainkit.ones(1, 1, 2))
    tensor([[[1., 2., 2., 1.]]])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, weight, bias = autocast_inputs("conv_transpose1d", input, weight, bias)
    ndim = input._data.ndim
    if ndim not in (2, 3):
        raise RuntimeError(
            "Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input of size: "
            f"{list(input.shape)}"
        )
    if isinstance(padding, str):
        raise TypeError("conv_transpose1d(): argument 'padding' must be tuple of ints, not str")
    stride, padding = _single(stride, "stride"), _single(padding, "padding")
    output_padding, dilation = _single(output_padding, "output_padding"), _single(dilation, "dilation")
    if ndim == 2:  # as PyTorch: a batch of one, squeezed back (the result's grad_fn is SqueezeBackward1)
        out = conv_transpose1d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups, dilation)
        return out.squeeze(0)
    _check_transpose(input, weight, bias, groups, stride, padding, output_padding, dilation)
    if bias is not None and bias.dtype != input.dtype:  # as PyTorch's kernel for types other than float32
        bias = bias.to(input.dtype)
    length, kernel = int(input._data.shape[2]), int(weight._data.shape[2])
    out_len = (length - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    if out_len <= 0:
        raise RuntimeError(
            f"Given input size per channel: (1 x {length}). Calculated output size per channel: (1 x {out_len}). "
            "Output size is too small"
        )
    pads = (0, 0, padding, padding)
    if kernel == 1 and stride == 1 and padding == 0 and out_len != length:
        # im2col / col2im treat a 1-wide, stride-1, unpadded geometry as a plain reshape, which output padding
        # (allowed here through the dilation) breaks; one column of padding takes them off that path
        pads = (0, 1, 0, 1)
    geom = Geometry((1, kernel), (1, stride), (1, dilation), pads, (1, length))
    return ConvolutionTranspose1d.apply(input, weight, bias, geom=geom, groups=groups, out_hw=(1, out_len))
