"""2-D convolution (``conv2d``) and its building blocks ``unfold`` / ``fold`` (im2col / col2im as functions).

``conv2d`` gathers the taps of ``im2col`` once into ``col`` of shape (N, C*KH*KW, OH*OW), so that the whole
convolution is one batched matrix product ``W2d @ col`` -> (N, OC, OH*OW), already in the output's layout. Its input
gradient scatters ``W2d^T @ g`` back with col2im.

With ``create_graph`` the backward formulas run on Tensors and are made of differentiable ops themselves:
``unfold`` / ``fold`` (each the other's adjoint), matrix products, and indexing. So double backward works through
every function here.

Stride-1 3x3 convolutions of large enough layers take Winograd's algorithm instead (``winograd.py``, chosen by
``winograd.choose``); their backward with ``create_graph`` still runs the differentiable im2col formulas.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode, workspace
from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import xp_of
from ..autograd.engine import AccumulateGrad
from ..autograd.function import Op
from ..autograd.tensor import Tensor
from . import winograd
from .im2col import Col2Im, Geometry, Im2Col, col2im, col2im_batch, geometry, im2col, im2col_batch, pair

__all__ = ["conv2d", "fold", "unfold"]


# Rows of the column matrix (C*KH*KW) up to which a convolution without an input gradient takes its weight's
# gradient image by image (measured in ``_backward_batch``): 72 is 8 channels of a 3x3 kernel.
_FEW_ROWS = 72

# A size that fits in the last-level cache of common CPUs with room to spare: slices of an intermediate this large
# are consumed while still cached.
_CACHE_BYTES = 8 << 20


# ---------------------------------------------------------------------------------------------- convolution
def _finite(a) -> bool:
    """Whether an array holds no inf or nan, from its sum (one read, no temporary; an overflowing sum of finite
    values only sends the call to im2col). Winograd's transforms subtract neighbouring values, so one inf would
    make a whole tile nan where direct convolution, and PyTorch, give inf only under the windows that cover it."""
    return bool(np.isfinite(a.sum()))


class Convolution(Op, name="ConvolutionBackward0"):
    """out[n, o] = b[o] + sum over c, i, j of w[o, c, i, j] * x_padded[n, c, oh*sh + i*dh, ow*sw + j*dw].

    As matrices, per group: out = W2d @ col with col = im2col(x) and W2d = w reshaped to (OC, C*KH*KW).
    dx = col2im(W2d^T @ g),  dw = sum over n of g @ col^T,  db = g summed over n, oh, ow.
    Without groups, col holds the whole batch side by side (``im2col_batch``) and g is laid out to match, so each
    of the three products is one large matrix product.
    """

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 0}

    def forward(self, x, w, b, geom, groups, keep_col):
        self.geom, self.groups, self.x_shape, self.w_shape = geom, groups, x.shape, w.shape
        n, oc = x.shape[0], w.shape[0]
        oh, ow = geom.out
        self.algorithm = winograd.choose(x, w.shape, geom, groups)
        if self.algorithm == "winograd" and not (_finite(x) and _finite(w)):
            self.algorithm = "im2col"
        winograd.ALGORITHMS_RUN[self.algorithm] += 1
        if self.algorithm == "winograd":
            self.extra = {} if keep_col else None  # the transformed input, for the weight's gradient
            return winograd.forward(x, w, b, geom, self.extra)
        if groups == 1:
            xp = xp_of(x)
            col = im2col_batch(x, geom)
            out2d = xp.matmul(w.reshape(oc, -1), col, out=workspace.empty((oc, col.shape[1]), col.dtype, xp))
            # laid out as (N, OC, OH, OW) by the one pass that also adds the bias
            by_image = out2d.reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)
            out = workspace.empty((n, oc, oh, ow), out2d.dtype, xp)
            if b is not None:
                xp.add(by_image, b.reshape(oc, 1, 1), out=out)
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
        # A leaf's gradient becomes its .grad, taken over without a copy only when the workspace pool does not
        # hold it too: the pool serves the input's gradient of layers in the middle of a network.
        pooled = type(fx) is not AccumulateGrad
        if self.algorithm == "winograd" and not isinstance(g, Tensor) and _finite(g):
            return winograd.backward(
                xp_of(g).ascontiguousarray(g),
                x,
                w,
                self.x_shape,
                geom,
                fx is not None,
                fw is not None,
                fb is not None,
                pooled,
                self.extra,
            )
        if groups == 1 and not isinstance(g, Tensor):
            return self._backward_batch(g, x, w, fx is not None, fw is not None, fb is not None, pooled)
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
                col = self.extra if self.algorithm == "im2col" and self.extra is not None else im2col(x, geom)
            col = col.reshape((n, groups, self.w_shape[1] * kh * kw, oh * ow)).swapaxes(-1, -2)
            gw = (g4 @ col).sum(axis=0).reshape(self.w_shape)
        if fb is not None:
            gb = g.sum(axis=(0, 2, 3))
        return gx, gw, gb

    def _backward_batch(self, g, x, w, want_x: bool, want_w: bool, want_b: bool, pooled: bool):
        """The plain backward without groups, on the layout of ``im2col_batch``."""
        n, oc = g.shape[:2]
        xp = xp_of(g)
        # Winograd's calls come here when the gradient holds an inf or nan; their extra is not a column matrix
        col = self.extra if self.algorithm == "im2col" and self.extra is not None else None
        rows = self.w_shape[1] * self.geom.kernel[0] * self.geom.kernel[1]
        if not want_x and rows <= _FEW_ROWS:
            # A first layer (no input gradient) over few channels: one product per image from g as it is laid out
            # beats transposing g for one long product with a handful of output columns (W2's first layer:
            # 0.83 -> 0.34 ms; 8 channels: 2.8 -> 1.8 ms; 16 channels loses, 1.0 -> 1.5 ms).
            length = g.shape[2] * g.shape[3]
            gw = gb = None
            if want_w:
                col = im2col_batch(x, self.geom) if col is None else col
                per_image = xp.matmul(g.reshape(n, oc, length), col.reshape(rows, n, length).transpose(1, 2, 0))
                gw = per_image.sum(axis=0).reshape(self.w_shape)
            if want_b:
                gb = g.sum(axis=(0, 2, 3))
            return None, gw, gb
        g2d = workspace.empty((oc, g.shape[0]) + g.shape[2:], g.dtype, xp)
        g2d[...] = g.transpose(1, 0, 2, 3)
        g2d = g2d.reshape(oc, -1)  # (OC, N*OH*OW), as col
        gx = gw = gb = None
        if want_x:
            gx = self._input_grad(g2d, w.reshape(oc, -1).T, pooled)
        if want_w:
            col = im2col_batch(x, self.geom) if col is None else col
            gw = (g2d @ col.T).reshape(self.w_shape)
        if want_b:
            gb = g2d.sum(axis=1)
        return gx, gw, gb

    def _input_grad(self, g2d, w2d_t, pooled: bool):
        """col2im(W2d^T @ g), a few images at a time: each slice of the column gradient is summed into the input's
        gradient while it is still in the cache, and the whole (C*KH*KW, N*OH*OW) matrix never exists at once."""
        n = self.x_shape[0]
        per_image = w2d_t.shape[0] * (g2d.shape[1] // max(n, 1)) * g2d.itemsize
        step = max(1, _CACHE_BYTES // max(per_image, 1))
        xp = xp_of(g2d)
        gx = workspace.empty(self.x_shape, g2d.dtype, xp) if pooled else xp.empty(self.x_shape, dtype=g2d.dtype)
        if step >= n:  # the whole batch at once (an empty one included)
            cols = xp.matmul(w2d_t, g2d, out=workspace.empty((w2d_t.shape[0], g2d.shape[1]), g2d.dtype, xp))
            return col2im_batch(cols, self.x_shape, self.geom, gx)
        width = g2d.shape[1] // n
        for start in range(0, n, step):
            stop = min(n, start + step)
            cols = w2d_t @ g2d[:, start * width : stop * width]
            col2im_batch(cols, (stop - start,) + self.x_shape[1:], self.geom, gx[start:stop])
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


def conv2d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1
) -> Tensor:
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
    if enabled_threads:  # only while some thread has autocast on
        input, weight, bias = autocast_inputs("conv2d", input, weight, bias)
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
    geom = geometry(h, w, kernel, stride, dilation, pads)
    keep_col = weight._requires_grad and grad_mode.is_grad_enabled()
    return Convolution.apply(input, weight, bias, geom=geom, groups=groups, keep_col=keep_col)


def _unfold_geometry(h: int, w: int, kernel_size, dilation, padding, stride, fn: str) -> Geometry:
    kernel, dilation = pair(kernel_size, "kernel_size", fn), pair(dilation, "dilation", fn)
    (ph, pw), stride = pair(padding, "padding", fn), pair(stride, "stride", fn)
    if min(kernel) <= 0 or min(dilation) <= 0 or min(stride) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"{fn}: kernel_size, dilation and stride must be positive and padding non-negative")
    return geometry(h, w, kernel, stride, dilation, (ph, ph, pw, pw))


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The sliding windows of a (N, C, H, W) input as columns: (N, C*KH*KW, L), as ``torch.nn.functional.unfold``;
    an unbatched (C, H, W) input gives (C*KH*KW, L).

    >>> import trainkit
    >>> unfold(trainkit.ones(2, 3, 4, 4), 2).shape
    trainkit.Size([2, 12, 9])
    """
    if input._data.ndim not in (3, 4):
        raise RuntimeError(
            f"unfold: expected a 3D (unbatched) or 4D (batched) input, but got input of size: {list(input.shape)}"
        )
    h, w = input._data.shape[-2:]
    geom = _unfold_geometry(h, w, kernel_size, dilation, padding, stride, "unfold")
    if min(geom.out) <= 0:
        raise RuntimeError(
            f"Given input with spatial size ({h}, {w}), kernel_size={geom.kernel}, dilation={geom.dilation}, "
            f"padding={geom.pads[::2]}, calculated shape of the array of sliding blocks as {geom.out}, but its "
            "components must be at least one."
        )
    return Im2Col.apply(input, geom=geom)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Columns (N, C*KH*KW, L) summed back into a (N, C, H, W) image, as ``torch.nn.functional.fold``; unbatched
    columns (C*KH*KW, L) give (C, H, W).

    The adjoint of ``unfold``: overlapping windows add up.

    >>> import trainkit
    >>> fold(trainkit.ones(1, 4, 4), (3, 3), 2)[0, 0]
    tensor([[1., 2., 1.],
            [2., 4., 2.],
            [1., 2., 1.]])
    """
    if input._data.ndim not in (2, 3):
        raise RuntimeError(
            f"fold: expected a 2D (unbatched) or 3D (batched) input, but got input of size: {list(input.shape)}"
        )
    h, w = pair(output_size, "output_size", "fold")
    geom = _unfold_geometry(h, w, kernel_size, dilation, padding, stride, "fold")
    ckk, length = input._data.shape[-2:]
    kh, kw = geom.kernel
    if ckk % (kh * kw) or length != geom.out[0] * geom.out[1]:
        raise RuntimeError(
            f"fold: expected input of size [N, C * {kh * kw}, {geom.out[0] * geom.out[1]}] for output_size "
            f"{(h, w)} and kernel_size {geom.kernel}, but got input of size {list(input.shape)}"
        )
    channels = ckk // (kh * kw)
    shape = (input._data.shape[0], channels, h, w) if input._data.ndim == 3 else (channels, h, w)
    return Col2Im.apply(input, shape=shape, geom=geom)
