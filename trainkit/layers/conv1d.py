"""1-d convolution and pooling layers over (N, C, L) or (C, L): Conv1d, ConvTranspose1d, MaxPool1d, AvgPool1d,
AdaptiveAvgPool1d and AdaptiveMaxPool1d, as in ``torch.nn``."""

from __future__ import annotations

from .. import functional as F
from ..autograd.creation import empty
from ..autograd.tensor import Tensor
from .conv import check_groups, check_padding_mode, conv_extra_repr, output_padding_for, reset_conv_parameters
from .module import Module
from .parameter import Parameter

__all__ = ["AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AvgPool1d", "Conv1d", "ConvTranspose1d", "MaxPool1d"]


def _single(value) -> tuple[int]:
    """PyTorch's ``_single``: an int as a 1-tuple, a sequence as a tuple."""
    if isinstance(value, (tuple, list)):
        return tuple(int(v) for v in value)  # type: ignore[return-value]
    return (int(value),)


class Conv1d(Module):
    """1-D convolution over (N, C, L) or (C, L) inputs, as ``torch.nn.Conv1d``.

    out[n, o, l] = bias[o] + sum over c, k of weight[o, c, k] * x[n, c, l * stride + k * dilation - padding].
    ``weight`` is (out_channels, in_channels / groups, kernel_size), ``bias`` (out_channels,); both start uniform in
    [-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups * kernel_size (kaiming_uniform_ with
    a = sqrt(5)). ``padding`` is an int, 'valid' or 'same'; ``padding_mode`` other than 'zeros' pads by reflecting,
    replicating or wrapping the input.

    >>> import trainkit
    >>> conv = Conv1d(3, 8, 5, padding="same", padding_mode="reflect")
    >>> conv(trainkit.ones(2, 3, 20)).shape
    trainkit.Size([2, 8, 20])
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
        self.kernel_size, self.stride, self.dilation = _single(kernel_size), _single(stride), _single(dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _single(padding)
        check_padding_mode(padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode = padding_mode
        self.transposed, self.output_padding = False, (0,)
        if isinstance(padding, str):  # 'same': the extra element of an odd total goes on the right
            total = self.dilation[0] * (self.kernel_size[0] - 1) if padding == "same" else 0
            self._reversed_padding_repeated_twice = (total // 2, total - total // 2)
        else:
            self._reversed_padding_repeated_twice = (self.padding[0], self.padding[0])
        self.weight = Parameter(
            empty((out_channels, in_channels // groups) + self.kernel_size, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight and bias uniform in +-1/sqrt(fan_in), as PyTorch initialises them."""
        reset_conv_parameters(self)

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv1d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


class ConvTranspose1d(Module):
    """1-D transposed convolution over (N, C, L) or (C, L) inputs, as ``torch.nn.ConvTranspose1d``.

    ``weight`` is (in_channels, out_channels / groups, kernel_size), ``bias`` (out_channels,), initialised as
    PyTorch does (fan_in from the weight's dimension 1: out_channels / groups * kernel_size). ``forward`` takes an
    optional ``output_size`` to pick among the lengths a stride greater than 1 allows.

    >>> import trainkit
    >>> up = ConvTranspose1d(8, 4, 3, stride=2, padding=1)
    >>> up(trainkit.ones(2, 8, 5)).shape
    trainkit.Size([2, 4, 9])
    >>> up(trainkit.ones(2, 8, 5), output_size=[10]).shape
    trainkit.Size([2, 4, 10])
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
        self.kernel_size, self.stride = _single(kernel_size), _single(stride)
        self.padding = padding if isinstance(padding, str) else _single(padding)
        self.dilation, self.output_padding = _single(dilation), _single(output_padding)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode, self.transposed = padding_mode, True
        self.weight = Parameter(
            empty((in_channels, out_channels // groups) + self.kernel_size, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight and bias uniform in +-1/sqrt(fan_in), as PyTorch initialises them."""
        reset_conv_parameters(self)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = output_padding_for(self, input, output_size)
        return F.conv_transpose1d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


class MaxPool1d(Module):
    """1-D max pooling, as ``torch.nn.MaxPool1d`` (``stride`` defaults to ``kernel_size``).

    >>> import trainkit
    >>> MaxPool1d(2)(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[3., 2.]])
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
        return F.max_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool1d(Module):
    """1-D average pooling, as ``torch.nn.AvgPool1d`` (``stride`` defaults to ``kernel_size``).

    >>> import trainkit
    >>> AvgPool1d(2)(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[2., 1.]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average pooling to a fixed output length, as ``torch.nn.AdaptiveAvgPool1d``.

    >>> import trainkit
    >>> AdaptiveAvgPool1d(2)(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[2., 1.]])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(Module):
    """Max pooling to a fixed output length, as ``torch.nn.AdaptiveMaxPool1d`` (``return_indices`` also gives
    each maximum's position along L).

    >>> import trainkit
    >>> AdaptiveMaxPool1d(2)(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[3., 2.]])
    """

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
