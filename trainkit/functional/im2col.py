"""The im2col machinery of the convolutions and pools, over the last two dimensions of images laid out as
(N, C, H, W): their geometry, padding, and im2col / col2im (each the other's adjoint) with their ops.

Every op reads the input through *taps*: for kernel position (i, j), the strided slice of the (padded) input that
holds, for every output position (oh, ow), the element ``x[oh * sh + i * dh, ow * sw + j * dw]``. im2col gathers the
taps into ``col`` of shape (N, C*KH*KW, OH*OW); col2im adds them back with one strided slice addition per tap (no
``add.at``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..autograd import workspace
from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.tensor import Tensor
from . import parallel


class Geometry(NamedTuple):
    """Where the taps of a sliding window fall: the kernel, its steps, and the padding around the input."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, bottom, left, right
    out: tuple[int, int]  # OH, OW

    def tap(self, i: int, j: int) -> tuple[slice, slice]:
        """The slices of the padded input that tap (i, j) reads, one element per output position."""
        (sh, sw), (dh, dw), (oh, ow) = self.stride, self.dilation, self.out
        return (slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))

    def taps(self):
        kh, kw = self.kernel
        return ((i, j) for i in range(kh) for j in range(kw))

    def padded(self, h: int, w: int) -> tuple[int, int]:
        t, b, l, r = self.pads
        return h + t + b, w + l + r


# ------------------------------------------------------------------------------------------------ helpers
def pair(value, name: str, fn: str) -> tuple[int, int]:
    """An int or a sequence of one or two ints as (h, w)."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) in (1, 2):
        if all(isinstance(v, (int, np.integer)) for v in value):
            return int(value[0]), int(value[-1])
    raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of two ints, got {value!r}")


def _out_len(n: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool = False) -> int:
    """Number of window positions along one axis (PyTorch's pooling_output_shape when ceil_mode)."""
    span = n + lo + hi - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= n + lo:  # the last window would start in the right padding: drop it
        out -= 1
    return out


def geometry(h: int, w: int, kernel, stride, dilation, pads, ceil_mode: bool = False) -> Geometry:
    """The geometry for an (h, w) input; the bottom/right padding grows so that ceil_mode's last taps exist."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    t, b, l, r = pads
    oh = _out_len(h, kh, sh, dh, t, b, ceil_mode)
    ow = _out_len(w, kw, sw, dw, l, r, ceil_mode)
    b = max(b, (oh - 1) * sh + (kh - 1) * dh + 1 - h - t)
    r = max(r, (ow - 1) * sw + (kw - 1) * dw + 1 - w - l)
    return Geometry(kernel, stride, dilation, (t, b, l, r), (oh, ow))


def pad_border(x, geom: Geometry, value=0):
    """``x`` (..., H, W) inside a border of ``value``; ``x`` itself when there is no border."""
    t, b, l, r = geom.pads
    if not (t or b or l or r):
        return x
    h, w = x.shape[-2:]
    out = workspace.empty(x.shape[:-2] + geom.padded(h, w), x.dtype, xp_of(x))
    # the border strips, then the interior: each element written once
    out[..., :t, :] = value
    out[..., t + h :, :] = value
    out[..., t : t + h, :l] = value
    out[..., t : t + h, l + w :] = value
    out[..., t : t + h, l : l + w] = x
    return out


def crop_border(x, geom: Geometry, h: int, w: int):
    """The inverse of ``pad_border``: the (h, w) interior of a padded array."""
    t, _, l, _ = geom.pads
    return x[..., t : t + h, l : l + w]


def constant_like(like, array):
    """A constant for a backward formula: a Tensor when ``like`` is one (create_graph), else the array."""
    return Tensor._make(array) if isinstance(like, Tensor) else array


# ------------------------------------------------------------------------------------------ im2col / col2im
def im2col(x, geom: Geometry):
    """(N, C, H, W) -> (N, C*KH*KW, OH*OW): column l holds the window of output position l, channel-major."""
    n, c = x.shape[:2]
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    if geom.kernel == (1, 1) and geom.stride == (1, 1) and not any(geom.pads):
        return x.reshape(n, c, oh * ow)  # every window is one pixel: a view when x is contiguous
    xp = xp_of(x)
    padded = pad_border(x, geom)
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    s = padded.strides
    # all windows as one strided view (N, C, KH, KW, OH, OW); one copy lays them out for the matmul
    windows = xp.lib.stride_tricks.as_strided(
        padded, (n, c, kh, kw, oh, ow), (s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw)
    )
    return xp.ascontiguousarray(windows).reshape(n, c * kh * kw, oh * ow)


def col2im(col, shape: tuple, geom: Geometry):
    """The adjoint of ``im2col``: (N, C*KH*KW, OH*OW) -> (N, C, H, W), overlapping windows adding up."""
    n, c, h, w = shape
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    if geom.kernel == (1, 1) and geom.stride == (1, 1) and not any(geom.pads):
        return col.reshape(shape)
    xp = xp_of(col)
    out = xp.zeros((n, c) + geom.padded(h, w), dtype=col.dtype)
    taps = col.reshape(n, c, kh, kw, oh, ow)
    for i, j in geom.taps():  # one strided slice addition per tap: KH*KW passes, no scattered writes
        sh, sw = geom.tap(i, j)
        out[:, :, sh, sw] += taps[:, :, i, j]
    return crop_border(out, geom, h, w)


def im2col_batch(x, geom: Geometry):
    """(N, C, H, W) -> (C*KH*KW, N*OH*OW): ``im2col`` with the images side by side, so that a convolution of the
    whole batch is one matrix product (a single large BLAS call instead of one small one per image)."""
    n, c = x.shape[:2]
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    xp = xp_of(x)
    padded = pad_border(x, geom)
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    s = padded.strides
    windows = xp.lib.stride_tricks.as_strided(
        padded, (c, kh, kw, n, oh, ow), (s[1], s[2] * dh, s[3] * dw, s[0], s[2] * sh, s[3] * sw)
    )
    col = workspace.empty((c, kh, kw, n, oh, ow), x.dtype, xp)
    if c > 1:
        _in_parts(xp, col.nbytes, c, lambda part: col.__setitem__(part, windows[part]))
    else:  # one channel: the kernel rows make the parts
        _in_parts(xp, col.nbytes, kh, lambda part: col.__setitem__((0, part), windows[0, part]))
    return col.reshape(c * kh * kw, n * oh * ow)


def col2im_batch(col, shape: tuple, geom: Geometry, out=None):
    """The adjoint of ``im2col_batch``: (C*KH*KW, N*OH*OW) -> (N, C, H, W), written into ``out`` when given."""
    n, c, h, w = shape
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    xp = xp_of(col)
    padded = workspace.empty((c, n) + geom.padded(h, w), col.dtype, xp)
    taps = col.reshape(c, kh, kw, n, oh, ow)
    if out is None:
        out = workspace.empty(shape, col.dtype, xp)

    def add(part):  # the channels of ``part``, each independent of the others
        mine = padded[part]
        mine.fill(0)
        for i, j in geom.taps():  # one strided slice addition per tap, as in col2im
            rows, cols = geom.tap(i, j)
            mine[:, :, rows, cols] += taps[part, i, j]
        out[:, part] = crop_border(mine, geom, h, w).transpose(1, 0, 2, 3)

    _in_parts(xp, padded.nbytes, c, add)
    return out


def _in_parts(xp, nbytes: int, n: int, work) -> None:
    """``work(part)`` over slices of ``range(n)``: on both cores when the pass is over NumPy arrays large enough
    to pay for the hand-over (``parallel``), else at once on this thread."""
    if xp is np and nbytes >= parallel.MIN_BYTES:
        parallel.split(work, n)
    else:
        work(slice(0, n))


class Im2Col(Op, name="Im2ColBackward0"):
    """out = im2col(x): every window of x as a column.   dx = col2im(g)."""

    def forward(self, x, geom):
        self.in_shape, self.geom = x.shape, geom
        return im2col(x, geom) if x.ndim == 4 else im2col(x[None], geom)[0]  # unbatched (C, H, W), as torch takes

    def backward(self, g):
        if isinstance(g, Tensor):
            return Col2Im.apply(g, shape=self.in_shape, geom=self.geom)
        if g.ndim == 3:
            return col2im(g, self.in_shape, self.geom)
        return col2im(g[None], (1,) + tuple(self.in_shape), self.geom)[0]


class Col2Im(Op, name="Col2ImBackward0"):
    """out = col2im(x): columns summed back into their windows' places.   dx = im2col(g)."""

    def forward(self, x, shape, geom):
        self.geom = geom
        return col2im(x, shape, geom) if x.ndim == 3 else col2im(x[None], (1,) + tuple(shape), geom)[0]

    def backward(self, g):
        if isinstance(g, Tensor):
            return Im2Col.apply(g, geom=self.geom)
        return im2col(g, self.geom) if g.ndim == 4 else im2col(g[None], self.geom)[0]
