"""Pooling over the last two dimensions of (N, C, H, W) images: ``max_pool2d``, ``avg_pool2d`` and
``adaptive_avg_pool2d``. The pools read the input through the taps of ``im2col`` and combine them element-wise (max,
sum) instead of gathering them.
"""

from __future__ import annotations

import numpy as np

from ..autograd import workspace
from ..autograd.backend import kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.shape import index_into_zeros
from ..autograd.tensor import Tensor
from .im2col import Geometry, constant_like, crop_border, geometry, pad_border, pair

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "max_pool2d"]


def _pool_geometry(input: Tensor, fn: str, kernel_size, stride, padding, dilation, ceil_mode: bool) -> Geometry:
    """PyTorch's checks of a 2-D pooling's input and settings, and the geometry they give."""
    shape = tuple(input._data.shape)
    if len(shape) not in (3, 4) or any(n == 0 for n in shape[1:]) or (len(shape) == 3 and shape[0] == 0):
        raise RuntimeError(
            f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:{list(shape)}"
        )
    kernel = pair(kernel_size, "kernel_size", fn)
    stride = kernel if stride is None or stride == () or stride == [] else pair(stride, "stride", fn)
    (ph, pw), dilation = pair(padding, "padding", fn), pair(dilation, "dilation", fn)
    if 0 in stride:
        raise RuntimeError("stride should not be zero")
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if min(stride) < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(
            f"dilation should be greater than zero, but got dilationH: {dilation[0]} dilationW: {dilation[1]}"
        )
    for p, k, d in ((ph, kernel[0], dilation[0]), (pw, kernel[1], dilation[1])):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and "
                f"dilation={d}"
            )
    if ph > kernel[0] // 2 or pw > kernel[1] // 2:  # PyTorch's stricter check when the input requires grad
        raise RuntimeError(
            f"pad should be smaller than or equal to half of kernel size, but got padW = {pw}, padH = {ph}, "
            f"kW = {kernel[1]}, kH = {kernel[0]}"
        )
    c, h, w = shape[-3:]
    geom = geometry(h, w, kernel, stride, dilation, (ph, ph, pw, pw), ceil_mode)
    oh, ow = geom.out
    if oh < 1 or ow < 1:
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{oh}x{ow}). Output size is too small"
        )
    return geom


def _tap_inside(xp, geom: Geometry, i: int, j: int, h: int, w: int):
    """(OH, OW): does tap (i, j) of each window fall inside the (h, w) input (not in the padding)?"""
    (sh, sw), (dh, dw), (oh, ow) = geom.stride, geom.dilation, geom.out
    t, _, l, _ = geom.pads
    rows = xp.arange(oh) * sh - t + i * dh
    cols = xp.arange(ow) * sw - l + j * dw
    return ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))[None, :]


def max_pool_scan(x, geom: Geometry):
    """For x (P, H, W): each window's maximum, and which tap (i * KW + j) holds it, as PyTorch picks it.

    Taps are visited in row-major order and a value replaces the current maximum only when larger, so ties go to
    the first; a NaN always replaces it (the last NaN wins, and the output is NaN). Each window starts at its
    first tap inside the input, at -inf, so the padding never wins. Tracking tap numbers (one byte each) instead
    of flat indices keeps the scan light; ``tap_to_index`` converts them.
    """
    xp = xp_of(x)
    p, h, w = x.shape
    floating = kind_of(x.dtype) == "f"
    lowest = -np.inf if floating else np.iinfo(x.dtype).min
    padded = pad_border(x, geom, lowest)
    taps = list(geom.taps())
    kind = np.uint8 if len(taps) <= 256 else np.int32
    views = [padded[(slice(None),) + geom.tap(i, j)] for i, j in taps]
    if not any(geom.pads):  # every tap is inside the input: each window starts at its first tap
        start = 1
        arg = xp.zeros((p,) + geom.out, dtype=kind)
        best = workspace.empty((p,) + geom.out, x.dtype, xp)
        best[...] = views[0]
    else:
        start = 0
        first = xp.full(geom.out, -1, dtype=np.int32)  # each window's first tap inside the input
        for k in range(len(taps) - 1, -1, -1):
            first = xp.where(_tap_inside(xp, geom, *taps[k], h, w), k, first)
        arg = xp.broadcast_to(first.astype(kind), (p,) + geom.out).copy()
        best = xp.full((p,) + geom.out, lowest, dtype=x.dtype)
    larger = xp.empty(best.shape, dtype=bool)
    for k, v in enumerate(views[start:], start):
        xp.greater(v, best, out=larger)
        # arg = k where larger, by arithmetic (wrapping integers are exact): masked writes are much slower
        arg += larger * (kind(k) - arg)
        xp.maximum(best, v, out=best)  # NaN propagates: once a window holds one, its maximum stays NaN
    if floating and xp.isnan(best).any():  # rare: point those windows at their last NaN
        for k, v in enumerate(views):
            xp.copyto(arg, kind(k), where=xp.isnan(v))
    return best, arg


def tap_to_index(arg, geom: Geometry, w: int):
    """Tap numbers (.., OH, OW) -> flat int64 indices (row * w + col) into the unpadded H x W plane."""
    xp = xp_of(arg)
    (_, kw), (sh, sw), (dh, dw), (oh, ow) = geom.kernel, geom.stride, geom.dilation, geom.out
    t, _, l, _ = geom.pads
    tap = arg.astype(np.int64)
    rows = (xp.arange(oh) * sh - t)[:, None] + (tap // kw) * dh
    cols = (xp.arange(ow) * sw - l)[None, :] + (tap % kw) * dw
    return rows * w + cols


class MaxPool2DWithIndices(Op, name="MaxPool2DWithIndicesBackward0"):
    """out = each window's maximum, found with the tap that holds it by ``max_pool_scan`` (passed in as ``found``
    so that the scan also serves ``return_indices``).
    dx = g added at each maximum's place (an element that is the max of several overlapping windows gets all
    their gradients)."""

    def forward(self, x, found, geom):
        self.in_shape, self.geom = x.shape, geom
        out, self.extra = found
        return out.reshape(x.shape[:-2] + geom.out)

    def backward(self, g):
        arg, geom = self.extra, self.geom
        h, w = self.in_shape[-2:]
        oh, ow = geom.out
        p = arg.shape[0]
        if isinstance(g, Tensor):  # a scatter-add that is itself differentiable (its backward gathers)
            xp = xp_of(arg)
            where = (xp.arange(p)[:, None], tap_to_index(arg, geom, w).reshape(p, oh * ow))
            gx = index_into_zeros(g.reshape((p, oh * ow)), (p, h * w), where, True)
            return gx.reshape(self.in_shape)
        xp = xp_of(g)
        g3 = g.reshape(p, oh, ow)
        hit = xp.empty(arg.shape, dtype=bool)
        # g * hit is g where hit and 0 elsewhere, unless g holds an inf or a nan (inf * 0 is nan): a finite sum
        # rules that out, else the slower where() keeps torch's zeros
        with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf, or a sum past float32's range
            finite = bool(xp.isfinite(g3.sum()))
        zero = g3.dtype.type(0)

        def pick(out):
            if finite:
                xp.multiply(g3, hit, out=out)
            else:
                out[...] = xp.where(hit, g3, zero)
            return out

        (kh, kw), (sh, sw) = geom.kernel, geom.stride
        if (sh, sw) == (kh, kw) and geom.dilation == (1, 1) and not any(geom.pads):
            # windows side by side (MaxPool2d(k)): each tap writes its own elements, with no sum; when the windows
            # cover the whole input nothing is left to zero beforehand
            covered = (oh * kh, ow * kw) == (h, w)
            gx = workspace.empty((p, h, w), g.dtype, xp)
            if not covered:
                gx.fill(0)
            for k, (i, j) in enumerate(geom.taps()):
                rows, cols = geom.tap(i, j)
                xp.equal(arg, k, out=hit)
                pick(gx[:, rows, cols])
            return gx.reshape(self.in_shape)
        gx = workspace.empty((p,) + geom.padded(h, w), g.dtype, xp)
        gx.fill(0)
        share = workspace.empty(g3.shape, g.dtype, xp)
        for k, (i, j) in enumerate(geom.taps()):  # one masked slice addition per tap, no scattered writes
            rows, cols = geom.tap(i, j)
            xp.equal(arg, k, out=hit)
            gx[:, rows, cols] += pick(share)
        return crop_border(gx, geom, h, w).reshape(self.in_shape)


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """2-D max pooling over (N, C, H, W) or (C, H, W), as ``torch.nn.functional.max_pool2d``.

    out[.., oh, ow] = max over i, j of x[.., oh*sh + i*dh - ph, ow*sw + j*dw - pw] (padding never wins).
    ``stride`` defaults to ``kernel_size``; ``ceil_mode`` keeps a last, partial window; ``return_indices`` also
    returns each maximum's flat index into its H x W plane (int64). The gradient goes to that one element.

    >>> import trainkit
    >>> max_pool2d(trainkit.arange(16.0).reshape(1, 4, 4), 2)
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """
    geom = _pool_geometry(input, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode)
    x = input._data
    h, w = x.shape[-2:]
    found = max_pool_scan(x.reshape(int(np.prod(x.shape[:-2])), h, w), geom)
    out = MaxPool2DWithIndices.apply(input, found=found, geom=geom)
    if not return_indices:
        return out
    return out, Tensor._make(tap_to_index(found[1], geom, w).reshape(x.shape[:-2] + geom.out))


def _window_bounds(xp, n: int, k: int, s: int, pad: int, out: int, count_include_pad: bool):
    """Per output position along one axis: the clipped window [start, end) and the divisor's factor, as PyTorch's
    avg_pool2d computes them (the padded count stops at the right padding; ceil_mode's overhang does not count)."""
    start = xp.arange(out) * s - pad
    end = xp.minimum(start + k, n + pad)
    size = end - start
    start, end = xp.maximum(start, 0), xp.minimum(end, n)
    return start, end, (size if count_include_pad else end - start)


def _window_matrix(xp, start, end, n: int, dtype):
    """(len(start), n) with ones where start <= column < end: sums each window along one axis."""
    cols = xp.arange(n)
    return ((cols[None, :] >= start[:, None]) & (cols[None, :] < end[:, None])).astype(dtype)


def _sandwich(x, rows, cols):
    """rows @ x @ cols^T over the last two dimensions of x (..., H, W), for rows (OH, H) and cols (OW, W).

    Works on arrays and on Tensors (then rows and cols are Tensors too); each product is one 2-D matmul.
    """
    lead = tuple(x.shape[:-2])
    h, w = x.shape[-2:]
    oh, ow = rows.shape[0], cols.shape[0]
    p = int(np.prod(lead))  # explicit: a -1 cannot be inferred when a size is 0
    y = x.reshape((p * h, w)) @ cols.swapaxes(0, 1)
    y = y.reshape((p, h, ow)).swapaxes(1, 2).reshape((p * ow, h)) @ rows.swapaxes(0, 1)
    return y.reshape((p, ow, oh)).swapaxes(1, 2).reshape(lead + (oh, ow))


class AvgPool2D(Op, name="AvgPool2DBackward0"):
    """out[.., oh, ow] = (sum of x over window (oh, ow)) / divisor[oh, ow].
    dx = g / divisor spread evenly back over each window (overlaps add up)."""

    def forward(self, x, geom, divisor, bounds):
        self.in_shape, self.geom, self.divisor, self.bounds = x.shape, geom, divisor, bounds
        padded = pad_border(x, geom)
        taps = [padded[..., rows, cols] for rows, cols in (geom.tap(i, j) for i, j in geom.taps())]
        total = taps[0].copy()
        for v in taps[1:]:
            total += v
        if kind_of(x.dtype) != "f":  # integers divide with truncation, as in PyTorch
            return (total / divisor).astype(x.dtype)
        total /= divisor
        return total

    def backward(self, g):
        h, w = self.in_shape[-2:]
        if isinstance(g, Tensor):  # the same linear map as matrix products, differentiable again
            xp = xp_of(g._data)
            (hs, he), (ws, we) = self.bounds
            rows = _window_matrix(xp, hs, he, h, g._data.dtype)
            cols = _window_matrix(xp, ws, we, w, g._data.dtype)
            return _sandwich(g / constant_like(g, self.divisor), constant_like(g, rows.T), constant_like(g, cols.T))
        xp, geom = xp_of(g), self.geom
        share = g / self.divisor
        gx = xp.zeros(self.in_shape[:-2] + geom.padded(h, w), dtype=g.dtype)
        for i, j in geom.taps():
            rows, cols = geom.tap(i, j)
            gx[..., rows, cols] += share
        return crop_border(gx, geom, h, w)


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling over (N, C, H, W) or (C, H, W), as ``torch.nn.functional.avg_pool2d``.

    out[.., oh, ow] = sum of x over the window / divisor, zeros padding the input. The divisor is the window's size
    counting padding (``count_include_pad``, the default) or not, or ``divisor_override``.

    >>> import trainkit
    >>> avg_pool2d(trainkit.arange(16.0).reshape(1, 4, 4), 2)
    tensor([[[ 2.5000,  4.5000],
             [10.5000, 12.5000]]])
    """
    geom = _pool_geometry(input, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x = input._data
    xp = xp_of(x)
    h, w = x.shape[-2:]
    (kh, kw), (sh, sw), (t, _, l, _) = geom.kernel, geom.stride, geom.pads
    hs, he, fh = _window_bounds(xp, h, kh, sh, t, geom.out[0], count_include_pad)
    ws, we, fw = _window_bounds(xp, w, kw, sw, l, geom.out[1], count_include_pad)
    if divisor_override is not None:
        divisor = xp.full(geom.out, divisor_override)
    else:
        divisor = xp.maximum(fh[:, None] * fw[None, :], 1)  # an empty window sums to 0: any divisor will do
    divisor = divisor.astype(x.dtype if kind_of(x.dtype) == "f" else np.float64)
    return AvgPool2D.apply(input, geom=geom, divisor=divisor, bounds=((hs, he), (ws, we)))


def _adaptive_bounds(xp, n: int, out: int):
    """PyTorch's adaptive windows along one axis: [floor(o * n / out), ceil((o + 1) * n / out))."""
    o = xp.arange(out)
    return (o * n) // out, -((-(o + 1) * n) // out)


def _window_sums(x, hs, he, ws, we):
    """The sum of x over each window [hs, he) x [ws, we), by slices: exact where x holds inf or nan."""
    xp = xp_of(x)
    across = xp.stack([x[..., int(a) : int(b)].sum(axis=-1) for a, b in zip(ws, we)], axis=-1)
    return xp.stack([across[..., int(a) : int(b), :].sum(axis=-2) for a, b in zip(hs, he)], axis=-2)


class AdaptiveAvgPool2D(Op, name="AdaptiveAvgPool2DBackward0"):
    """out = rows @ x @ cols^T / (window heights x window widths), rows and cols marking each window's extent.
    dx = rows^T @ (g / sizes) @ cols."""

    def forward(self, x, rows, cols, sizes, bounds):
        self.rows, self.cols, self.sizes = rows, cols, sizes
        out = _sandwich(x, rows, cols) / sizes
        if not xp_of(out).isfinite(out).all():  # an inf in x: 0 * inf would put nan into windows without it
            out = _window_sums(x, *bounds) / sizes
        return out

    def backward(self, g):
        shape = tuple(g.shape)
        for dim in range(1, len(shape)):  # PyTorch's backward refuses an empty output (its forward allows it)
            if shape[dim] == 0:
                raise RuntimeError(
                    "adaptive_avg_pool2d_backward(): Expected grad_output to have non-zero size for non-batch "
                    f"dimensions, but grad_output has sizes {list(shape)} with dimension {dim} being empty: an output "
                    "size of 0 has no gradient, pool to at least 1"
                )
        rows, cols = constant_like(g, self.rows.T), constant_like(g, self.cols.T)
        return _sandwich(g / constant_like(g, self.sizes), rows, cols)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """2-D average pooling to a given output size, as ``torch.nn.functional.adaptive_avg_pool2d``.

    Output position o along an axis of n elements averages [floor(o * n / out), ceil((o + 1) * n / out)); windows
    may overlap when out does not divide n. ``output_size`` is an int or a pair (None keeps the input's size).

    >>> import trainkit
    >>> adaptive_avg_pool2d(trainkit.arange(9.0).reshape(1, 3, 3), 2)
    tensor([[[2., 3.],
             [5., 6.]]])
    """
    shape = tuple(input._data.shape)
    if len(shape) not in (3, 4) or any(n == 0 for n in shape[-2:]):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(shape)}")
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size, output_size)
    if len(output_size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    h, w = shape[-2:]
    oh, ow = (n if o is None else int(o) for o, n in zip(output_size, (h, w)))
    if oh < 0 or ow < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{oh}, {ow}}}"
        )
    x = input._data
    if kind_of(x.dtype) != "f":
        raise NotImplementedError(f"\"adaptive_avg_pool2d\" not implemented for '{input.dtype}'")
    if (oh, ow) == (1, 1):  # as PyTorch: a plain mean (its grad_fn is MeanBackward1)
        return input.mean(dim=(-2, -1), keepdim=True)
    xp = xp_of(x)
    hs, he = _adaptive_bounds(xp, h, oh)
    ws, we = _adaptive_bounds(xp, w, ow)
    rows, cols = _window_matrix(xp, hs, he, h, x.dtype), _window_matrix(xp, ws, we, w, x.dtype)
    sizes = ((he - hs)[:, None] * (we - ws)[None, :]).astype(x.dtype)
    return AdaptiveAvgPool2D.apply(input, rows=rows, cols=cols, sizes=sizes, bounds=(hs, he, ws, we))
