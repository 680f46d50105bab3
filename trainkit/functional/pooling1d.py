"""Pooling along the last dimension of (N, C, L) or (C, L) sequences: ``max_pool1d``, ``avg_pool1d``,
``adaptive_avg_pool1d`` and ``adaptive_max_pool1d``.

As in PyTorch, a sequence is pooled as an image of height 1: the input gets a dimension of size 1 before its last
one, the 2-d pool of ``pooling.py`` runs with a window of height 1, and the result is squeezed back (so its
``grad_fn`` is ``SqueezeBackward1``). Adaptive max pooling, which has no 2-d form here, is an op of its own on the
same (..., 1, L) layout.
"""

from __future__ import annotations

import numpy as np

from ..autograd.backend import kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.shape import index_into_zeros
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "avg_pool1d",
    "max_pool1d",
    "max_pool1d_with_indices",
]


def _one(value, fn: str, name: str) -> int:
    """An int or a sequence of one int (PyTorch's argument parser's rule for the 1-d pools)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (tuple, list)) and len(value) == 1:
        return int(value[0])
    if isinstance(value, (tuple, list)):
        raise RuntimeError(f"{fn}() argument '{name}' should contain one int (got {len(value)})")
    raise TypeError(f"{fn}(): argument '{name}' must be tuple of ints, not {type(value).__name__}")


def _check_dims(input: Tensor, fn: str) -> None:
    ndim = input._data.ndim
    if ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {ndim}-dimensional tensor for argument #1 'self' (while checking "
            f"arguments for {fn})"
        )


def _max_pool1d_checks(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool) -> tuple:
    """PyTorch's own checks of max_pool1d (without indices), in its order; (kernel, stride, padding, dilation)."""
    shape = tuple(input._data.shape)
    if len(shape) not in (2, 3) or any(n == 0 for n in shape[-2 if len(shape) == 2 else 1 :]):
        raise RuntimeError(
            f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:"
            f"{list(shape)}"
        )
    for value, name, allowed, kinds in (
        (kernel_size, "kernel_size", (1,), "an int, list of ints or tuple of ints"),
        (stride, "stride", (0, 1), "None, an int, list of ints, or tuple of ints"),
        (padding, "padding", (1,), "an int, list of ints, or tuple of ints"),
        (dilation, "dilation", (1,), "an int, list of ints or tuple of ints"),
    ):
        if isinstance(value, (tuple, list)) and len(value) not in allowed:
            raise RuntimeError(f"max_pool1d() {name} must be {kinds} of size 1 but got size {len(value)}")
    k = _one(kernel_size, "max_pool1d", "kernel_size")
    s = k if stride is None or stride in ((), []) else _one(stride, "max_pool1d", "stride")
    p, d = _one(padding, "max_pool1d", "padding"), _one(dilation, "max_pool1d", "dilation")
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(
            f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and kernel_size={k}"
        )
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    span = shape[-1] + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= shape[-1] + p:
        out -= 1
    if out < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    if kind_of(input._data.dtype) != "f":
        raise NotImplementedError(f"\"max_pool1d_impl\" not implemented for '{scalar_name(input)}'")
    return k, s, p, d


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """``max_pool1d`` that always returns ``(values, indices)``, as ``torch.nn.functional.max_pool1d_with_indices``.

    >>> import trainkit
    >>> max_pool1d_with_indices(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)[1]
    tensor([[1, 2]])
    """
    _check_dims(input, "max_pool1d")
    k = _one(kernel_size, "max_pool1d", "kernel_size")
    s = k if stride is None or stride in ((), []) else _one(stride, "max_pool1d", "stride")
    p, d = _one(padding, "max_pool1d", "padding"), _one(dilation, "max_pool1d", "dilation")
    if p < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    out, indices = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode, True)
    return out.squeeze(-2), indices.squeeze(-2)


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """1-D max pooling over (N, C, L) or (C, L), as ``torch.nn.functional.max_pool1d``.

    out[.., l] = max over k of x[.., l * stride + k * dilation - padding] (the padding never wins). ``stride``
    defaults to ``kernel_size``; ``ceil_mode`` keeps a last, partial window; ``return_indices`` also returns each
    maximum's position along L (int64). The gradient goes to that one element.

    >>> import trainkit
    >>> max_pool1d(trainkit.tensor([[1.0, 3.0, 2.0, 0.0, 5.0]]), 2, ceil_mode=True)
    tensor([[3., 2., 5.]])
    """
    if return_indices:
        return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    k, s, p, d = _max_pool1d_checks(input, kernel_size, stride, padding, dilation, ceil_mode)
    return max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode).squeeze(-2)


def avg_pool1d(
    input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True
) -> Tensor:
    """1-D average pooling over (N, C, L) or (C, L), as ``torch.nn.functional.avg_pool1d``.

    out[.., l] = sum of x over the window / divisor, zeros padding the input; the divisor is the window's size
    counting the padding (``count_include_pad``, the default) or not. ``stride`` defaults to ``kernel_size``.

    >>> import trainkit
    >>> avg_pool1d(trainkit.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[2., 1.]])
    """
    _check_dims(input, "avg_pool1d")
    k = _one(kernel_size, "avg_pool1d", "kernel_size")
    s = k if stride is None or stride in ((), []) else _one(stride, "avg_pool1d", "stride")
    p = _one(padding, "avg_pool1d", "padding")
    if p < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    out = avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    return out.squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """1-D average pooling to a given output length, as ``torch.nn.functional.adaptive_avg_pool1d``.

    Output position o of ``output_size`` averages x over [floor(o * L / out), ceil((o + 1) * L / out)); windows
    overlap when ``output_size`` does not divide L.

    >>> import trainkit
    >>> adaptive_avg_pool1d(trainkit.tensor([[0.0, 3.0, 6.0]]), 2)
    tensor([[1.5000, 4.5000]])
    """
    _check_dims(input, "adaptive_avg_pool1d")
    size = _one(output_size, "adaptive_avg_pool1d", "output_size")
    shape = tuple(input.shape[:-1]) + (1, input.shape[-1])  # PyTorch names the (..., 1, L) shape it pools
    for dim in range(1 if len(shape) == 4 else 0, len(shape)):
        if shape[dim] == 0:
            raise RuntimeError(
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                f"sizes {list(shape)} with dimension {dim} being empty"
            )
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


class AdaptiveMax(Op, name="AdaptiveMaxPool2DBackward0"):
    """out[.., 0, o] = max of x[.., 0, i] over window o, i in [floor(o * L / out), ceil((o + 1) * L / out)), on
    the (..., 1, L) layout that PyTorch pools a sequence in. ``found`` holds the maxima's positions along L.
    dx = g added at each maximum's position (a position that is the maximum of overlapping windows gets each one's)."""

    def forward(self, x, found, out_len):
        self.in_shape, self.extra = x.shape, found
        values = found[0]
        return values.reshape(x.shape[:-1] + (out_len,))

    def backward(self, g):
        shape = tuple(g.shape)
        for dim in range(1 if len(shape) == 4 else 0, len(shape)):
            if shape[dim] == 0:  # PyTorch's kernel refuses to spread an empty gradient
                raise RuntimeError(
                    "adaptive_max_pool2d_backward(): Expected grad_output to have non-zero size for non-batch "
                    f"dimensions, but grad_output has sizes {list(shape)} with dimension {dim} being empty"
                )
        index = self.extra[1]  # (P, out)
        p, length = index.shape[0], self.in_shape[-1]
        xp = xp_of(index)
        rows = xp.broadcast_to(xp.arange(p)[:, None], index.shape)
        gx = index_into_zeros(g.reshape((p, index.shape[1])), (p, length), (rows, index), True)
        return gx.reshape(self.in_shape)


def adaptive_max_scan(x, out_len: int):
    """For x (P, L): each adaptive window's maximum and its position along L, as PyTorch picks them (the first
    maximum; a NaN wins, the last one of the window)."""
    xp = xp_of(x)
    p, length = x.shape
    o = xp.arange(out_len)
    start, end = (o * length) // out_len, -((-(o + 1) * length) // out_len)
    widest = int((end - start).max()) if out_len else 0
    # each window's positions, its last one repeated to the common width (a repeat never changes the max or the
    # first position that holds it)
    index = xp.minimum(start[:, None] + xp.arange(widest)[None, :], (end - 1)[:, None])
    taps = x[:, index]  # (P, out, widest)
    arg = taps.argmax(axis=-1) if widest else xp.zeros((p, out_len), dtype=np.int64)
    if kind_of(x.dtype) == "f" and widest:
        nan = xp.isnan(taps)
        if nan.any():
            last = widest - 1 - nan[..., ::-1].argmax(axis=-1)
            arg = xp.where(nan.any(axis=-1), last, arg)
    positions = xp.take_along_axis(xp.broadcast_to(index, (p,) + index.shape), arg[..., None], axis=-1)[..., 0]
    values = xp.take_along_axis(taps, arg[..., None], axis=-1)[..., 0]
    return values, positions.astype(np.int64)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False) -> tuple:
    """``adaptive_max_pool1d`` that always returns ``(values, indices)``, as PyTorch's function of that name.

    >>> import trainkit
    >>> adaptive_max_pool1d_with_indices(trainkit.tensor([[1.0, 3.0, 2.0]]), 2)[1]
    tensor([[1, 1]])
    """
    _check_dims(input, "adaptive_max_pool1d")
    size = _one(output_size, "adaptive_max_pool1d", "output_size")
    shape = tuple(input._data.shape)
    for dim in range(1 if len(shape) == 3 else 0, len(shape)):
        if shape[dim] == 0:
            raise RuntimeError(
                "adaptive_max_pool1d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                f"sizes {list(shape)} with dimension {dim} being empty"
            )
    if size < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {size}: {list(shape[:-1]) + [1, size]}")
    x = input._data
    if kind_of(x.dtype) != "f":
        raise NotImplementedError(f"\"adaptive_max_pool2d\" not implemented for '{scalar_name(input)}'")
    found = adaptive_max_scan(x.reshape(int(np.prod(shape[:-1])), shape[-1]), size)
    out = AdaptiveMax.apply(input.unsqueeze(-2), found=found, out_len=size).squeeze(-2)
    return out, Tensor._make(found[1].reshape(shape[:-1] + (size,)))


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """1-D max pooling to a given output length, as ``torch.nn.functional.adaptive_max_pool1d``.

    Output position o takes the maximum of x over [floor(o * L / out), ceil((o + 1) * L / out));
    ``return_indices`` also returns each maximum's position along L (int64).

    >>> import trainkit
    >>> adaptive_max_pool1d(trainkit.tensor([[1.0, 3.0, 2.0, 0.0, 5.0]]), 2)
    tensor([[3., 5.]])
    """
    out, indices = adaptive_max_pool1d_with_indices(input, output_size)
    return (out, indices) if return_indices else out
