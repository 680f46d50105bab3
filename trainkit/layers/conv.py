"""Convolution and pooling layers: Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, as in
``torch.nn``."""

from __future__ import annotations

import math

from .. import functional as F
from ..autograd.creation import empty
from ..autograd.tensor import Size, Tensor
from . import init
from .module import Module
from .parameter import Parameter

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _pair(value) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        return (int(value[0]), int(value[-1]))
    return (int(value), int(value))


def check_groups(in_channels: int, out_channels: int, groups: int) -> None:
    """PyTorch's checks of a convolution layer's ``groups`` against its channels (ValueError)."""
    if groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups != 0:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups != 0:
        raise ValueError("out_channels must be divisible by groups")


def check_padding_mode(padding_mode: str) -> None:
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode='{padding_mode}'")


def reset_conv_parameters(module: Module) -> None:
    """PyTorch's default for every convolution: weight and bias uniform in +-1/sqrt(fan_in), drawn from trainkit's
    seeded stream (fan_in from the weight's dimension 1, so out_channels / groups * kernel for a transposed one)."""
    init.kaiming_uniform_(module.weight, a=math.sqrt(5))  # gain sqrt(1/3) * sqrt(3 / fan_in) = 1 / sqrt(fan_in)
    if module.bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(module.weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(module.bias, -bound, bound)


def conv_extra_repr(m: Module) -> str:
    """A convolution layer's ``extra_repr`` as PyTorch writes it: arguments left at their defaults are omitted.

    >>> conv_extra_repr(Conv2d(3, 8, 3, padding=1, bias=False))
    '3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False'
    """
    s = f"{m.in_channels}, {m.out_channels}, kernel_size={m.kernel_size}, stride={m.stride}"
    if m.padding != (0,) * len(m.padding):
        s += f", padding={m.padding}"
    if m.dilation != (1,) * len(m.dilation):
        s += f", dilation={m.dilation}"
    if m.output_padding != (0,) * len(m.output_padding):
        s += f", output_padding={m.output_padding}"
    if m.groups != 1:
        s += f", groups={m.groups}"
    if m.bias is None:
        s += ", bias=False"
    if m.padding_mode != "zeros":
        s += f", padding_mode={m.padding_mode}"
    return s


def output_padding_for(m: Module, input: Tensor, output_size) -> tuple[int, ...]:
    """The output padding with which transposed convolution ``m`` gives ``output_size`` (the spatial sizes, or with
    the leading dimensions), as PyTorch picks it; ``m.output_padding`` when no size is asked for."""
    if output_size is None:
        return m.output_padding
    spatial = len(m.kernel_size)
    output_size = list(output_size.tolist() if isinstance(output_size, Tensor) else output_size)
    leading = 2 if input.ndim == spatial + 2 else 1
    if len(output_size) == leading + spatial:
        output_size = output_size[leading:]
    if len(output_size) != spatial:
        raise ValueError(
            f"ConvTranspose{spatial}D: for {input.ndim}D input, output_size must have {spatial} or "
            f"{leading + spatial} elements (got {len(output_size)})"
        )
    min_sizes = [
        (input.shape[d + leading] - 1) * m.stride[d] - 2 * m.padding[d] + m.dilation[d] * (m.kernel_size[d] - 1) + 1
        for d in range(spatial)
    ]
    max_sizes = [low + s - 1 for low, s in zip(min_sizes, m.stride)]
    for size, low, high in zip(output_size, min_sizes, max_sizes):
        if size < low or size > high:
            raise ValueError(
                f"requested an output size of {output_size}, but valid sizes range from {min_sizes} to "
                f"{max_sizes} (for an input of {Size(input.size()[2:])})"
            )
    return tuple(int(size) - low for size, low in zip(output_size, min_sizes))


class Conv2d(Module):
    """2-D convolution over (N, C, H, W) or (C, H, W) inputs, as ``torch.nn.Conv2d``.

    ``weight`` is (out_channels, in_channels / groups, KH, KW), ``bias`` (out_channels,). Both start uniform in
    [-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups * KH * KW (PyTorch's kaiming_uniform_ with
    a = sqrt(5)). ``padding_mode`` other than 'zeros' pads by reflecting, replicating or wrapping the input.

    >>> import trainkit
    >>> conv = Conv2d(3, 8, 3, padding=1)
    >>> conv(trainkit.ones(2, 3, 5, 5)).shape
    trainkit.Size([2, 8, 5, 5])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_groups(in_channels, out_channels, groups)
        self.kernel_size, self.stride, self.dilation = _pair(kernel_size), _pair(stride), _pair(dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _pair(padding)
        check_padding_mode(padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode = padding_mode
        self.transposed, self.output_padding = False, (0, 0)
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: weight and bias uniform in +-1/sqrt(fan_in), drawn from trainkit's seeded stream."""
        reset_conv_parameters(self)

    def _edge_pads(self) -> tuple[int, int, int, int]:
        """(top, bottom, left, right) for padding modes other than zeros."""
        if self.padding == "valid":
            return (0, 0, 0, 0)
        if self.padding == "same":
            th, tw = (d * (k - 1) for d, k in zip(self.dilation, self.kernel_size))
            return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
        ph, pw = self.padding
        return (ph, ph, pw, pw)

    def _pad_edges(self, x: Tensor) -> Tensor:
        t, b, l, r = self._edge_pads()
        return F.pad(x, (l, r, t, b), mode=self.padding_mode)

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode != "zeros":
            return F.conv2d(self._pad_edges(input), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


class ConvTranspose2d(Module):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) inputs, as ``torch.nn.ConvTranspose2d``.

    ``weight`` is (in_channels, out_channels / groups, KH, KW), ``bias`` (out_channels,). Both start uniform in
    [-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in computed from the weight as PyTorch does, i.e.
    out_channels / groups * KH * KW (PyTorch's kaiming_uniform_ with a = sqrt(5)). ``forward`` takes an optional
    ``output_size`` to pick among the output sizes a stride greater than 1 allows; only ``padding_mode='zeros'``
    is supported, as in PyTorch.

    >>> import trainkit
    >>> up = ConvTranspose2d(8, 4, 3, stride=2, padding=1)
    >>> up(trainkit.ones(2, 8, 5, 5)).shape
    trainkit.Size([2, 4, 9, 9])
    >>> up(trainkit.ones(2, 8, 5, 5), output_size=[10, 10]).shape
    trainkit.Size([2, 4, 10, 10])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        check_groups(in_channels, out_channels, groups)
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), _pair(stride), _pair(padding)
        self.dilation, self.output_padding = _pair(dilation), _pair(output_padding)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode, self.transposed = padding_mode, True
        shape = (in_channels, out_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: weight and bias uniform in +-1/sqrt(fan_in), drawn from trainkit's seeded stream."""
        reset_conv_parameters(self)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = output_padding_for(self, input, output_size)
        return F.conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


class MaxPool2d(Module):
    """2-D max pooling, as ``torch.nn.MaxPool2d`` (``stride`` defaults to ``kernel_size``).

    >>> import trainkit
    >>> MaxPool2d(2)(trainkit.ones(1, 4, 4)).shape
    trainkit.Size([1, 2, 2])
    """

    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode: bool = False
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor):
        return F.max_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    """2-D average pooling, as ``torch.nn.AvgPool2d`` (``stride`` defaults to ``kernel_size``).

    >>> import trainkit
    >>> AvgPool2d(2)(trainkit.ones(1, 4, 4))
    tensor([[[1., 1.],
             [1., 1.]]])
    """

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size, as ``torch.nn.AdaptiveAvgPool2d`` (None keeps that input size).

    >>> import trainkit
    >>> AdaptiveAvgPool2d((1, None))(trainkit.ones(2, 3, 5, 4)).shape
    trainkit.Size([2, 3, 1, 4])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
