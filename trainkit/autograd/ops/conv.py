"""Convolution and pooling over the last two dimensions of images laid out as (N, C, H, W).

Every op here reads the input through *taps*: for kernel position (i, j), the strided slice of the (padded) input
that holds, for every output position (oh, ow), the element ``x[oh * sh + i * dh, ow * sw + j * dw]``.

- ``conv2d`` gathers the taps once into ``col`` of shape (N, C*KH*KW, OH*OW) (im2col), so that the whole
  convolution is one batched matrix product ``W2d @ col`` -> (N, OC, OH*OW), already in the output's layout.
  Its input gradient scatters ``W2d^T @ g`` back with one strided slice addition per tap (col2im); no ``add.at``.
- The pools combine the taps element-wise (max, sum) instead of gathering them.

With ``create_graph`` the backward formulas run on Tensors and are made of differentiable ops themselves:
``unfold`` / ``fold`` (im2col / col2im, each the other's adjoint), matrix products, and indexing. So double
backward works through every function here.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import grad_mode
from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from .shape import index_into_zeros


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
def _pair(value, name: str, fn: str) -> tuple[int, int]:
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


def _geometry(h: int, w: int, kernel, stride, dilation, pads, ceil_mode: bool = False) -> Geometry:
    """The geometry for an (h, w) input; the bottom/right padding grows so that ceil_mode's last taps exist."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    t, b, l, r = pads
    oh = _out_len(h, kh, sh, dh, t, b, ceil_mode)
    ow = _out_len(w, kw, sw, dw, l, r, ceil_mode)
    b = max(b, (oh - 1) * sh + (kh - 1) * dh + 1 - h - t)
    r = max(r, (ow - 1) * sw + (kw - 1) * dw + 1 - w - l)
    return Geometry(kernel, stride, dilation, (t, b, l, r), (oh, ow))


def _pad(x, geom: Geometry, value=0):
    """``x`` (..., H, W) inside a border of ``value``; ``x`` itself when there is no border."""
    t, b, l, r = geom.pads
    if not (t or b or l or r):
        return x
    h, w = x.shape[-2:]
    out = xp_of(x).full(x.shape[:-2] + geom.padded(h, w), value, dtype=x.dtype)
    out[..., t : t + h, l : l + w] = x
    return out


def _crop(x, geom: Geometry, h: int, w: int):
    """The inverse of ``_pad``: the (h, w) interior of a padded array."""
    t, _, l, _ = geom.pads
    return x[..., t : t + h, l : l + w]


def _const(like, array):
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
    padded = _pad(x, geom)
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
    return _crop(out, geom, h, w)


# A size that fits in the last-level cache of common CPUs with room to spare: slices of an intermediate this large
# are consumed while still cached.
_CACHE_BYTES = 8 << 20


def _im2col_batch(x, geom: Geometry):
    """(N, C, H, W) -> (C*KH*KW, N*OH*OW): ``im2col`` with the images side by side, so that a convolution of the
    whole batch is one matrix product (a single large BLAS call instead of one small one per image)."""
    n, c = x.shape[:2]
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    xp = xp_of(x)
    padded = _pad(x, geom)
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    s = padded.strides
    windows = xp.lib.stride_tricks.as_strided(
        padded, (c, kh, kw, n, oh, ow), (s[1], s[2] * dh, s[3] * dw, s[0], s[2] * sh, s[3] * sw)
    )
    return xp.ascontiguousarray(windows).reshape(c * kh * kw, n * oh * ow)


def _col2im_batch(col, shape: tuple, geom: Geometry, out=None):
    """The adjoint of ``_im2col_batch``: (C*KH*KW, N*OH*OW) -> (N, C, H, W), written into ``out`` when given."""
    n, c, h, w = shape
    (kh, kw), (oh, ow) = geom.kernel, geom.out
    xp = xp_of(col)
    padded = xp.zeros((c, n) + geom.padded(h, w), dtype=col.dtype)
    taps = col.reshape(c, kh, kw, n, oh, ow)
    for i, j in geom.taps():  # one strided slice addition per tap, as in col2im
        rows, cols = geom.tap(i, j)
        padded[:, :, rows, cols] += taps[:, i, j]
    if out is None:
        return xp.ascontiguousarray(_crop(padded, geom, h, w).transpose(1, 0, 2, 3))
    out[...] = _crop(padded, geom, h, w).transpose(1, 0, 2, 3)
    return out


class Im2Col(Op, name="Im2ColBackward0"):
    """out = im2col(x): every window of x as a column.   dx = col2im(g)."""

    def forward(self, x, geom):
        self.in_shape, self.geom = x.shape, geom
        return im2col(x, geom)

    def backward(self, g):
        if isinstance(g, Tensor):
            return Col2Im.apply(g, shape=self.in_shape, geom=self.geom)
        return col2im(g, self.in_shape, self.geom)


class Col2Im(Op, name="Col2ImBackward0"):
    """out = col2im(x): columns summed back into their windows' places.   dx = im2col(g)."""

    def forward(self, x, shape, geom):
        self.geom = geom
        return col2im(x, shape, geom)

    def backward(self, g):
        if isinstance(g, Tensor):
            return Im2Col.apply(g, geom=self.geom)
        return im2col(g, self.geom)


# ---------------------------------------------------------------------------------------------- convolution
class Convolution(Op, name="ConvolutionBackward0"):
    """out[n, o] = b[o] + sum over c, i, j of w[o, c, i, j] * x_padded[n, c, oh*sh + i*dh, ow*sw + j*dw].

    As matrices, per group: out = W2d @ col with col = im2col(x) and W2d = w reshaped to (OC, C*KH*KW).
    dx = col2im(W2d^T @ g),  dw = sum over n of g @ col^T,  db = g summed over n, oh, ow.
    Without groups, col holds the whole batch side by side (``_im2col_batch``) and g is laid out to match, so each
    of the three products is one large matrix product.
    """

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 0}

    def forward(self, x, w, b, geom, groups, keep_col):
        self.geom, self.groups, self.x_shape, self.w_shape = geom, groups, x.shape, w.shape
        n, oc = x.shape[0], w.shape[0]
        oh, ow = geom.out
        if groups == 1:
            col = _im2col_batch(x, geom)
            out2d = w.reshape(oc, -1) @ col  # (OC, N*OH*OW)
            # laid out as (N, OC, OH, OW) by the one pass that also adds the bias
            by_image = out2d.reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)
            out = xp_of(x).empty((n, oc, oh, ow), dtype=out2d.dtype)
            if b is not None:
                xp_of(x).add(by_image, b.reshape(oc, 1, 1), out=out)
            else:
                out[...] = by_image
        else:  # one batched product per group: (G, OC/G, CKK/G) @ (N, G, CKK/G, L)
            col = im2col(x, geom)
            out = w.reshape(groups, oc // groups, -1) @ col.reshape(n, groups, col.shape[1] // groups, oh * ow)
            out = out.reshape(n, oc, oh, ow)
            if b is not None:
                out += b.reshape(oc, 1, 1)
        self.extra = col if keep_col else None  # the weight gradient needs it; rebuilding it costs a pass
        return out

    def backward(self, g):
        x, w = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        n, oc, oh, ow = g.shape
        groups, geom = self.groups, self.geom
        kh, kw = geom.kernel
        if groups == 1 and not isinstance(g, Tensor):
            return self._backward_batch(g, x, w, fx is not None, fw is not None, fb is not None)
        if not isinstance(g, Tensor):
            # a gradient broadcast from a sum has zero strides, which matmul would take off its BLAS path
            g = xp_of(g).ascontiguousarray(g)
        g4 = g.reshape((n, groups, oc // groups, oh * ow))
        gx = gw = gb = None
        if fx is not None:
            wg = w.reshape((groups, oc // groups, -1)).swapaxes(-1, -2)
            gcol = (wg @ g4).reshape((n, self.x_shape[1] * kh * kw, oh * ow))  # no -1: n may be 0
            if isinstance(g, Tensor):
                gx = Col2Im.apply(gcol, shape=self.x_shape, geom=geom)
            else:
                gx = col2im(gcol, self.x_shape, geom)
        if fw is not None:
            if isinstance(g, Tensor):
                col = Im2Col.apply(x, geom=geom)  # differentiable in x, for second derivatives
            else:
                col = self.extra if self.extra is not None else im2col(x, geom)
            col = col.reshape((n, groups, self.w_shape[1] * kh * kw, oh * ow)).swapaxes(-1, -2)
            gw = (g4 @ col).sum(axis=0).reshape(self.w_shape)
        if fb is not None:
            gb = g.sum(axis=(0, 2, 3))
        return gx, gw, gb

    def _backward_batch(self, g, x, w, want_x: bool, want_w: bool, want_b: bool):
        """The plain backward without groups, on the layout of ``_im2col_batch``."""
        oc = g.shape[1]
        g2d = xp_of(g).ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(oc, -1)  # (OC, N*OH*OW), as col
        gx = gw = gb = None
        if want_x:
            gx = self._input_grad(g2d, w.reshape(oc, -1).T)
        if want_w:
            col = self.extra if self.extra is not None else _im2col_batch(x, self.geom)
            gw = (g2d @ col.T).reshape(self.w_shape)
        if want_b:
            gb = g2d.sum(axis=1)
        return gx, gw, gb

    def _input_grad(self, g2d, w2d_t):
        """col2im(W2d^T @ g), a few images at a time: each slice of the column gradient is summed into the input's
        gradient while it is still in the cache, and the whole (C*KH*KW, N*OH*OW) matrix never exists at once."""
        n = self.x_shape[0]
        per_image = w2d_t.shape[0] * (g2d.shape[1] // max(n, 1)) * g2d.itemsize
        step = max(1, _CACHE_BYTES // max(per_image, 1))
        if step >= n:  # the whole batch at once (an empty one included)
            return _col2im_batch(w2d_t @ g2d, self.x_shape, self.geom)
        gx = xp_of(g2d).empty(self.x_shape, dtype=g2d.dtype)
        width = g2d.shape[1] // n
        for start in range(0, n, step):
            stop = min(n, start + step)
            cols = w2d_t @ g2d[:, start * width : stop * width]
            _col2im_batch(cols, (stop - start,) + self.x_shape[1:], self.geom, gx[start:stop])
        return gx


def _conv_pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) in (1, 2):
        return int(value[0]), int(value[-1])
    raise RuntimeError(
        f"expected {name} to be a single integer value or a list of 2 values to match the convolution "
        f"dimensions, but got {name}={list(value) if isinstance(value, (tuple, list)) else value}"
    )


def _conv_pads(padding, kernel, stride, dilation) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for an int, a pair, 'valid' or 'same' (odd totals: the extra goes last)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if stride != (1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        th, tw = (d * (k - 1) for d, k in zip(dilation, kernel))
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    ph, pw = _conv_pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise RuntimeError("negative padding is not supported")
    return (ph, ph, pw, pw)


def _check_conv(input: Tensor, weight: Tensor, bias, groups: int) -> None:
    x, w = input._data, weight._data
    if w.ndim != 4:
        raise RuntimeError(f"Expected 4D weight for conv2d, but got weight of size {list(w.shape)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    oc = w.shape[0]
    if oc == 0:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be at least 1 at dimension 0, but got weight of size "
            f"{list(w.shape)} instead"
        )
    if oc % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of "
            f"size [{list(w.shape)}] instead"
        )
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(w.shape)}, expected input{list(x.shape)} to have "
            f"{w.shape[1] * groups} channels, but got {x.shape[1]} channels instead"
        )
    if x.dtype != w.dtype:
        raise RuntimeError(f"Input type ({x.dtype}) and weight type ({w.dtype}) should be the same")
    if bias is not None:
        b = bias._data
        if b.ndim != 1 or b.shape[0] != oc:
            raise RuntimeError(
                f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {oc} elements, but "
                f"got bias of size {list(b.shape)} instead"
            )
        if b.dtype != x.dtype:
            raise RuntimeError(f"Input type ({x.dtype}) and bias type ({b.dtype}) should be the same")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``.

    out[n, o, oh, ow] = bias[o] + sum over c, i, j of weight[o, c, i, j] * x[n, c, oh*sh + i*dh - ph, ow*sw + j*dw - pw]
    with zeros outside x. ``input`` is (N, C, H, W) or (C, H, W); ``weight`` is (OC, C / groups, KH, KW); each of
    the ``groups`` channel groups of the input meets its own OC / groups filters. ``padding`` is an int, a pair,
    ``'valid'`` (none) or ``'same'`` (output as large as the input; stride 1 only).

    >>> import trainkit
    >>> x = trainkit.ones(1, 1, 4, 4)
    >>> conv2d(x, trainkit.ones(1, 1, 3, 3), padding=1)[0, 0]
    tensor([[4., 6., 6., 4.],
            [6., 9., 9., 6.],
            [6., 9., 9., 6.],
            [4., 6., 6., 4.]])
    """
    ndim = input._data.ndim
    if ndim not in (3, 4):
        raise RuntimeError(
            f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: {list(input.shape)}"
        )
    if ndim == 3:  # as PyTorch: a batch of one, squeezed back (the result's grad_fn is SqueezeBackward1)
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    _check_conv(input, weight, bias, groups)
    stride, dilation = _conv_pair(stride, "stride"), _conv_pair(dilation, "dilation")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    kernel = tuple(weight._data.shape[2:])
    pads = _conv_pads(padding, kernel, stride, dilation)
    h, w = input._data.shape[2:]
    hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
    ekh, ekw = ((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    if ekh > hp or ekw > wp:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({hp} x {wp}). Kernel size: ({ekh} x {ekw}). Kernel size "
            "can't be greater than actual input size"
        )
    geom = _geometry(h, w, kernel, stride, dilation, pads)
    keep_col = weight._requires_grad and grad_mode.is_grad_enabled()
    return Convolution.apply(input, weight, bias, geom=geom, groups=groups, keep_col=keep_col)


def _unfold_geometry(h: int, w: int, kernel_size, dilation, padding, stride, fn: str) -> Geometry:
    kernel, dilation = _pair(kernel_size, "kernel_size", fn), _pair(dilation, "dilation", fn)
    (ph, pw), stride = _pair(padding, "padding", fn), _pair(stride, "stride", fn)
    if min(kernel) <= 0 or min(dilation) <= 0 or min(stride) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"{fn}: kernel_size, dilation and stride must be positive and padding non-negative")
    return _geometry(h, w, kernel, stride, dilation, (ph, ph, pw, pw))


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The sliding windows of a (N, C, H, W) input as columns: (N, C*KH*KW, L), as ``torch.nn.functional.unfold``.

    >>> import trainkit
    >>> unfold(trainkit.ones(2, 3, 4, 4), 2).shape
    trainkit.Size([2, 12, 9])
    """
    if input._data.ndim != 4:
        raise RuntimeError(f"unfold: expected a 4D (batched) input, but got input of size: {list(input.shape)}")
    h, w = input._data.shape[2:]
    geom = _unfold_geometry(h, w, kernel_size, dilation, padding, stride, "unfold")
    if min(geom.out) <= 0:
        raise RuntimeError(
            f"Given input with spatial size ({h}, {w}), kernel_size={geom.kernel}, dilation={geom.dilation}, "
            f"padding={geom.pads[::2]}, calculated shape of the array of sliding blocks as {geom.out}, but its "
            "components must be at least one."
        )
    return Im2Col.apply(input, geom=geom)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Columns (N, C*KH*KW, L) summed back into a (N, C, H, W) image, as ``torch.nn.functional.fold``.

    The adjoint of ``unfold``: overlapping windows add up.

    >>> import trainkit
    >>> fold(trainkit.ones(1, 4, 4), (3, 3), 2)[0, 0]
    tensor([[1., 2., 1.],
            [2., 4., 2.],
            [1., 2., 1.]])
    """
    if input._data.ndim != 3:
        raise RuntimeError(f"fold: expected a 3D (batched) input, but got input of size: {list(input.shape)}")
    h, w = _pair(output_size, "output_size", "fold")
    geom = _unfold_geometry(h, w, kernel_size, dilation, padding, stride, "fold")
    n, ckk, length = input._data.shape
    kh, kw = geom.kernel
    if ckk % (kh * kw) or length != geom.out[0] * geom.out[1]:
        raise RuntimeError(
            f"fold: expected input of size [N, C * {kh * kw}, {geom.out[0] * geom.out[1]}] for output_size "
            f"{(h, w)} and kernel_size {geom.kernel}, but got input of size {list(input.shape)}"
        )
    return Col2Im.apply(input, shape=(n, ckk // (kh * kw), h, w), geom=geom)


# ---------------------------------------------------------------------------------------------------- pooling
def _pool_geometry(input: Tensor, fn: str, kernel_size, stride, padding, dilation, ceil_mode: bool) -> Geometry:
    """PyTorch's checks of a 2-D pooling's input and settings, and the geometry they give."""
    shape = tuple(input._data.shape)
    if len(shape) not in (3, 4) or any(n == 0 for n in shape[1:]) or (len(shape) == 3 and shape[0] == 0):
        raise RuntimeError(
            f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:{list(shape)}"
        )
    kernel = _pair(kernel_size, "kernel_size", fn)
    stride = kernel if stride is None or stride == () or stride == [] else _pair(stride, "stride", fn)
    (ph, pw), dilation = _pair(padding, "padding", fn), _pair(dilation, "dilation", fn)
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
    geom = _geometry(h, w, kernel, stride, dilation, (ph, ph, pw, pw), ceil_mode)
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
    floating = x.dtype.kind == "f"
    lowest = -np.inf if floating else np.iinfo(x.dtype).min
    padded = _pad(x, geom, lowest)
    taps = list(geom.taps())
    kind = np.uint8 if len(taps) <= 256 else np.int32
    views = [padded[(slice(None),) + geom.tap(i, j)] for i, j in taps]
    if not any(geom.pads):  # every tap is inside the input: each window starts at its first tap
        start = 1
        arg = xp.zeros((p,) + geom.out, dtype=kind)
        best = views[0].copy()
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
            gx = (xp.empty if covered else xp.zeros)((p, h, w), dtype=g.dtype)
            for k, (i, j) in enumerate(geom.taps()):
                rows, cols = geom.tap(i, j)
                xp.equal(arg, k, out=hit)
                pick(gx[:, rows, cols])
            return gx.reshape(self.in_shape)
        gx = xp.zeros((p,) + geom.padded(h, w), dtype=g.dtype)
        share = xp.empty(g3.shape, dtype=g.dtype)
        for k, (i, j) in enumerate(geom.taps()):  # one masked slice addition per tap, no scattered writes
            rows, cols = geom.tap(i, j)
            xp.equal(arg, k, out=hit)
            gx[:, rows, cols] += pick(share)
        return _crop(gx, geom, h, w).reshape(self.in_shape)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
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
        padded = _pad(x, geom)
        taps = [padded[..., rows, cols] for rows, cols in (geom.tap(i, j) for i, j in geom.taps())]
        total = taps[0].copy()
        for v in taps[1:]:
            total += v
        if x.dtype.kind != "f":  # integers divide with truncation, as in PyTorch
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
            return _sandwich(g / _const(g, self.divisor), _const(g, rows.T), _const(g, cols.T))
        xp, geom = xp_of(g), self.geom
        share = g / self.divisor
        gx = xp.zeros(self.in_shape[:-2] + geom.padded(h, w), dtype=g.dtype)
        for i, j in geom.taps():
            rows, cols = geom.tap(i, j)
            gx[..., rows, cols] += share
        return _crop(gx, geom, h, w)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
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
    divisor = divisor.astype(x.dtype if x.dtype.kind == "f" else np.float64)
    return AvgPool2D.apply(input, geom=geom, divisor=divisor, bounds=((hs, he), (ws, we)))


def _adaptive_bounds(xp, n: int, out: int):
    """PyTorch's adaptive windows along one axis: [floor(o * n / out), ceil((o + 1) * n / out))."""
    o = xp.arange(out)
    return (o * n) // out, -((-(o + 1) * n) // out)


class AdaptiveAvgPool2D(Op, name="AdaptiveAvgPool2DBackward0"):
    """out = rows @ x @ cols^T / (window heights x window widths), rows and cols marking each window's extent.
    dx = rows^T @ (g / sizes) @ cols."""

    def forward(self, x, rows, cols, sizes):
        self.rows, self.cols, self.sizes = rows, cols, sizes
        return _sandwich(x, rows, cols) / sizes

    def backward(self, g):
        rows, cols = _const(g, self.rows.T), _const(g, self.cols.T)
        return _sandwich(g / _const(g, self.sizes), rows, cols)


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
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"adaptive_avg_pool2d" not implemented for \'{input.dtype}\'')
    if (oh, ow) == (1, 1):  # as PyTorch: a plain mean (its grad_fn is MeanBackward1)
        return input.mean(dim=(-2, -1), keepdim=True)
    xp = xp_of(x)
    hs, he = _adaptive_bounds(xp, h, oh)
    ws, we = _adaptive_bounds(xp, w, ow)
    rows, cols = _window_matrix(xp, hs, he, h, x.dtype), _window_matrix(xp, ws, we, w, x.dtype)
    sizes = ((he - hs)[:, None] * (we - ws)[None, :]).astype(x.dtype)
    return AdaptiveAvgPool2D.apply(input, rows=rows, cols=cols, sizes=sizes)
