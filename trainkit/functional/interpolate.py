"""Resizing, as ``torch.nn.functional.interpolate``: modes 'nearest' (1-D, 2-D and 3-D), 'linear', 'bilinear',
'trilinear' and 'bicubic', and 'area' for 2-D images.

Every implemented mode is separable: along each spatial axis, output position o reads one input position (nearest)
or two neighbours with weights that add up to 1 (linear), or four (cubic). Those *taps* are computed once per call
on the host, with PyTorch's formulas in PyTorch's precision (float32 for float32 and float16 inputs), so that the
chosen positions and weights, and hence the values, agree with PyTorch's CPU kernels bit for bit or to the last
rounding. The forward gathers along the last axis first, then the ones before it, as PyTorch's kernels nest their
loops; the backward adds the gradient back along the same taps, one vectorised addition per group of outputs that
read distinct inputs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd.backend import kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .pooling import adaptive_avg_pool2d


# ---------------------------------------------------------------------------------------------------- taps
def _opmath(dtype) -> type:
    """The precision PyTorch computes source positions and weights in for a given input dtype."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _scale(n_in: int, n_out: int, align_corners: bool, scale: float | None, ft: type):
    """PyTorch's area_pixel_compute_scale: the step in input positions per output position."""
    if align_corners:
        return ft(n_in - 1) / ft(n_out - 1) if n_out > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)  # the reciprocal in double, then rounded, as PyTorch does
    return ft(n_in) / ft(n_out)


def _floor(real: np.ndarray) -> np.ndarray:
    """PyTorch floors source positions with floorf, so a double position is rounded to float first."""
    return np.floor(real.astype(np.float32)).astype(np.int64)


def _nearest_taps(n_in: int, n_out: int, scale: float | None, ft: type):
    """The forward map of PyTorch's generic 'nearest' CPU kernel: floor(o * scale), clamped, with no special cases
    (so a scale factor that keeps the size need not copy)."""
    real = _scale(n_in, n_out, False, scale, ft) * np.arange(n_out).astype(ft)
    index = np.minimum(_floor(real), n_in - 1)
    return None if np.array_equal(index, np.arange(n_in)) else ((index, None),)


def _nearest_backward_taps(n_in: int, n_out: int, scale: float | None):
    """The map PyTorch's nearest backward (and its vectorised forward) uses: the identity when the sizes agree,
    o >> 1 when the output is twice the input, else floor(o * scale) in float32. It differs from the generic
    forward's map in rare cases (a scale factor that rounds to the input size, say); the gradient then follows
    PyTorch's, not the forward's, map."""
    o = np.arange(n_out)
    if n_out == n_in:
        return None
    if n_out == 2 * n_in:
        return ((o >> 1, None),)
    step = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n_in) / np.float32(n_out)
    return ((np.minimum(np.floor(o.astype(np.float32) * step).astype(np.int64), n_in - 1), None),)


def _nearest_exact_taps(n_in: int, n_out: int, scale: float | None):
    """PyTorch's 'nearest-exact' map, forward and backward alike: floor((o + 0.5) * scale) in float32, clamped."""
    step = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n_in) / np.float32(n_out)
    index = np.minimum(np.floor((np.arange(n_out).astype(np.float32) + np.float32(0.5)) * step), n_in - 1)
    index = index.astype(np.int64)
    return None if np.array_equal(index, np.arange(n_in)) else ((index, None),)


def _linear_taps(n_in: int, n_out: int, align_corners: bool, scale: float | None, ft: type):
    """PyTorch's two neighbours and weights per output position (compute_source_index_and_lambda)."""
    if n_out == n_in:
        return None
    step = _scale(n_in, n_out, align_corners, scale, ft)
    o = np.arange(n_out).astype(ft)
    if align_corners:
        real = step * o
    else:
        # PyTorch's kernel is compiled with fused multiply-adds: one rounding for step * (o + 0.5) - 0.5. In float32
        # the product is exact in double, so computing there and rounding once gives the same bits
        real = (np.float64(step) * (o + ft(0.5)).astype(np.float64) - 0.5).astype(ft)
        real = np.where(real < 0, ft(0), real).astype(ft)
    i0 = np.minimum(_floor(real), n_in - 1)
    w1 = np.minimum(np.maximum(real - i0.astype(ft), ft(0)), ft(1)).astype(ft)
    i1 = i0 + (i0 < n_in - 1)
    return ((i0, ft(1) - w1), (i1, w1))


_A = -0.75  # the cubic convolution kernel's free parameter, as PyTorch chooses it


def _cubic_taps(n_in: int, n_out: int, align_corners: bool, scale: float | None, ft: type):
    """PyTorch's four neighbours i0 - 1 .. i0 + 2 (clamped to the input) and cubic convolution weights per output
    position. Unlike the linear source position, the cubic one is not clamped at 0, and an unchanged size still
    interpolates (a weight of 0 times an inf is nan there, as in PyTorch)."""
    step = _scale(n_in, n_out, align_corners, scale, ft)
    o = np.arange(n_out).astype(ft)
    if align_corners:
        real = (step * o).astype(ft)
    else:  # one rounding, as PyTorch's fused multiply-add gives (see _linear_taps)
        real = (np.float64(step) * (o + ft(0.5)).astype(np.float64) - 0.5).astype(ft)
    i0 = np.minimum(_floor(real), n_in - 1)
    t = np.minimum(np.maximum(real - i0.astype(ft), ft(0)), ft(1)).astype(ft)
    a, one = ft(_A), ft(1)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = (far(t + one), near(t), near(one - t), far(one - t + one))
    return tuple((np.clip(i0 + k - 1, 0, n_in - 1), w.astype(ft)) for k, w in enumerate(weights))


def _aa_taps(n_in: int, n_out: int, align_corners: bool, scale: float | None, ft: type, kind: str):
    """PyTorch's antialiased taps (``antialias=True``): when shrinking by ``s``, the kernel is stretched ``s`` times,
    so every input under it counts. Output o centred at c = s * (o + 0.5) reads inputs xmin .. xmin + size - 1
    around c, weighted by filter((i - c + 0.5) / s) and normalised to sum 1; the filter is the triangle (linear) or
    the cubic kernel with a = -0.5 (Keys', where plain 'bicubic' uses -0.75). Every output gets as many taps as
    the widest needs: the extra ones weigh 0. An axis whose size does not change is left alone, as PyTorch does."""
    if n_out == n_in:
        return None
    width = 2 if kind == "linear" else 4
    step = _scale(n_in, n_out, align_corners, scale, ft)
    support = ft(width * 0.5 * step) if step >= 1 else ft(width * 0.5)
    invscale = ft(1) / step if step >= 1 else ft(1)
    center = step * (np.arange(n_out).astype(ft) + ft(0.5))
    xmin = np.maximum((center - support + ft(0.5)).astype(np.int64), 0)  # C's truncation toward zero
    xsize = np.minimum((center + support + ft(0.5)).astype(np.int64), n_in) - xmin
    a = ft(-0.5)

    def kernel(x):
        x = np.abs(x)
        if kind == "linear":
            return np.where(x < 1, ft(1) - x, ft(0)).astype(ft)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1, near, np.where(x < 2, far, ft(0))).astype(ft)

    taps_needed = int(xsize.max(initial=0))
    weights, total = [], np.zeros(n_out, dtype=ft)
    for j in range(taps_needed):
        # (j + xmin - c) in the kernel's float type, + 0.5 and * 1/s in double, as PyTorch's expression promotes
        offset = ((j + xmin).astype(ft) - center).astype(np.float64) + 0.5
        w = np.where(j < xsize, kernel((offset * np.float64(invscale)).astype(ft)), ft(0)).astype(ft)
        weights.append(w)
        total = (total + w).astype(ft)
    safe = np.where(total != 0, total, ft(1))
    return tuple((np.minimum(xmin + j, n_in - 1), (w / safe).astype(ft)) for j, w in enumerate(weights))


def _groups(index: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The map split into (outputs, inputs) groups in which no input repeats: the k-th group holds each input's k-th
    reader. Within a group ``out[inputs] += g[outputs]`` is then one exact vectorised addition."""
    order = np.argsort(index, kind="stable")
    ranked = index[order]
    rank = np.empty_like(index)
    rank[order] = np.arange(len(index)) - np.searchsorted(ranked, ranked, side="left")
    return [(np.nonzero(rank == r)[0], index[rank == r]) for r in range(int(rank.max(initial=-1)) + 1)]


_MAX_PIECES = 16


def _pieces(outputs: np.ndarray, inputs: np.ndarray) -> list[tuple[slice, slice]] | None:
    """A group cut into pieces along which both positions advance by constant steps, as pairs of slices: strided
    views add up in one pass, where indexing by arrays gathers, adds and scatters. None for irregular maps (a
    scale factor with no small period), which keep the index arrays."""
    if len(outputs) == 1:
        return [(slice(int(outputs[0]), int(outputs[0]) + 1), slice(int(inputs[0]), int(inputs[0]) + 1))]
    steps = np.stack([np.diff(outputs), np.diff(inputs)], axis=1)
    if (steps <= 0).any():
        return None
    starts = np.nonzero((steps[1:] != steps[:-1]).any(axis=1))[0] + 1  # where the steps change
    if len(starts) >= _MAX_PIECES:
        return None
    pieces, first = [], 0
    for last in starts.tolist() + [len(outputs) - 1]:
        so, si = (int(steps[first, 0]), int(steps[first, 1])) if first < last else (1, 1)
        pieces.append(
            (
                slice(int(outputs[first]), int(outputs[last]) + 1, so),
                slice(int(inputs[first]), int(inputs[last]) + 1, si),
            )
        )
        first = last + 1
    return pieces


def _shaped(weight, axis: int, ndim: int, xp, dtype):
    """A per-position weight shaped to broadcast along ``axis`` of an ``ndim``-dimensional array."""
    return xp.asarray(weight, dtype=dtype).reshape((-1,) + (1,) * (ndim - axis - 1))


def _gather(x, plan):
    """Each output reads its taps of x along each planned axis, the last axis first."""
    if x.dtype == np.float16:  # PyTorch computes half in float
        return _gather(x.astype(np.float32), plan).astype(np.float16)
    xp = xp_of(x)
    out = x
    for axis, taps in reversed(plan):
        total = None
        for index, weight in taps:
            part = xp.take(out, xp.asarray(index), axis=axis)
            if weight is not None:
                part *= _shaped(weight, axis, out.ndim, xp, part.dtype)
            if total is None:
                total = part
            else:
                total += part
        out = total
    return x.copy() if out is x else out


def _scatter(g, plan, sizes):
    """The adjoint of ``_gather``: each output's gradient, weighted, added back to the inputs it read."""
    if g.dtype == np.float16:
        return _scatter(g.astype(np.float32), plan, sizes).astype(np.float16)
    xp = xp_of(g)
    for (axis, taps), n in zip(plan, sizes):
        lead = (slice(None),) * axis
        out = xp.zeros(g.shape[:axis] + (n,) + g.shape[axis + 1 :], dtype=g.dtype)
        for index, weight in taps:
            w = None if weight is None else _shaped(weight, axis, g.ndim, xp, g.dtype)
            for outputs, inputs in _groups(index):
                pieces = _pieces(outputs, inputs)
                if pieces is None:
                    pieces = [(xp.asarray(outputs), xp.asarray(inputs))]
                for src, dst in pieces:
                    part = g[lead + (src,)]
                    out[lead + (dst,)] += part if w is None else part * w[src]
        g = out
    return g


# ------------------------------------------------------------------------------------------------------ ops
class Resample(Op):
    """out = x read through per-axis taps (index and weight per output position).
    dx = g added back through the backward taps (the same ones, but for PyTorch's nearest edge cases).
    Subclasses carry PyTorch's node names."""

    adjoint: type

    def forward(self, x, plan, back, sizes):
        self.back, self.sizes = back, sizes
        return _gather(x, plan)

    def backward(self, g):
        if isinstance(g, Tensor):  # the scatter as an op of its own, whose backward gathers again
            return self.adjoint.apply(g, plan=self.back, sizes=self.sizes)
        return _scatter(g, self.back, self.sizes)


class ResampleAdjoint(Op):
    """out = x added back through the taps (Resample's backward).   dx = g read through the taps again."""

    adjoint: type

    def forward(self, x, plan, sizes):
        self.plan, self.sizes = plan, sizes
        return _scatter(x, plan, sizes)

    def backward(self, g):
        if isinstance(g, Tensor):
            return self.adjoint.apply(g, plan=self.plan, back=self.plan, sizes=self.sizes)
        return _gather(g, self.plan)


def _resample_op(name: str) -> type:
    fwd = type(f"{name}Backward0", (Resample,), {"__module__": __name__})
    adj = type(f"{name}BackwardBackward0", (ResampleAdjoint,), {"__module__": __name__})
    fwd.adjoint, adj.adjoint = adj, fwd
    return fwd


_OPS = {
    ("nearest", 1): _resample_op("UpsampleNearest1D"),
    ("nearest", 2): _resample_op("UpsampleNearest2D"),
    ("nearest", 3): _resample_op("UpsampleNearest3D"),
    ("nearest-exact", 1): _resample_op("UpsampleNearestExact1D"),
    ("nearest-exact", 2): _resample_op("UpsampleNearestExact2D"),
    ("nearest-exact", 3): _resample_op("UpsampleNearestExact3D"),
    ("linear", 1): _resample_op("UpsampleLinear1D"),
    ("linear", 2): _resample_op("UpsampleBilinear2D"),
    ("linear", 3): _resample_op("UpsampleTrilinear3D"),
    ("cubic", 2): _resample_op("UpsampleBicubic2D"),
    ("linear-aa", 2): _resample_op("UpsampleBilinear2DAa"),
    ("cubic-aa", 2): _resample_op("UpsampleBicubic2DAa"),
}


# ------------------------------------------------------------------------------------------------ checks
def _is_integer(value) -> bool:
    return isinstance(value, (int, np.integer)) or (isinstance(value, Tensor) and value._data.dtype.kind in "iu")


def _to_int64(value: float) -> int:
    if not math.isfinite(value) or abs(value) >= 2.0**63:
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return int(value)


def _check_sizes(shape: tuple, out: list[int], kind: str) -> None:
    """PyTorch's checks of the kernels' input and output sizes."""
    spatial = shape[2:]
    if len(spatial) == 1:
        if spatial[0] <= 0 or out[0] <= 0:
            raise RuntimeError(
                f"Input and output sizes should be greater than 0, but got input (W: {spatial[0]}) and output "
                f"(W: {out[0]})"
            )
    elif min(spatial) <= 0 or min(out) <= 0:
        letters = "DHW"[3 - len(spatial) :]
        have = ", ".join(f"{c}: {n}" for c, n in zip(letters, spatial))
        want = ", ".join(f"{c}: {n}" for c, n in zip(letters, out))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({have}) output ({want})")
    if shape[1] == 0:  # an empty batch is fine; empty channels are not
        raise RuntimeError(f"Non-empty {len(shape)}D data tensor expected but got a tensor with sizes {list(shape)}")


def _channels_last(x) -> bool:
    """Is ``x`` laid out channels-last (channels fastest, then W, H, D, then batch), as PyTorch tests it (dimensions
    of size 1 do not count, so a contiguous (N, C, 1, 1) array is both)?"""
    expected = 1
    for d in (1,) + tuple(range(x.ndim - 1, 1, -1)) + (0,):
        if x.shape[d] != 1:
            if x.strides[d] != expected * x.itemsize:
                return False
            expected *= x.shape[d]
    return True


def _resample(input: Tensor, kind: str, out: list[int], scales: list | None, align_corners: bool) -> Tensor:
    shape = tuple(input._data.shape)
    _check_sizes(shape, out, kind)
    dtype = input._data.dtype
    if kind.endswith("-aa") and dtype not in (np.float32, np.float64):
        if dtype == np.uint8:  # PyTorch has a uint8 path of its own, with its own rounding
            raise NotImplementedError("interpolate: uint8 input with antialias=True is not supported yet")
        raise NotImplementedError(f"\"compute_index_ranges_weights\" not implemented for '{scalar_name(dtype)}'")
    if kind_of(dtype) != "f" and not (kind.startswith("nearest") and dtype == np.uint8):
        raise NotImplementedError(f"\"compute_indices_weights_{kind}\" not implemented for '{scalar_name(dtype)}'")
    ft = _opmath(dtype)
    # PyTorch's CPU forward picks its kernel by layout and size, and its two nearest kernels map positions
    # differently in rare cases: the vectorised one as the backward does, the generic one by its own formula
    x = input._data
    wide = len(out) > 1 and shape[1] > 3 and _channels_last(x)
    vectorized = wide or (len(out) == 2 and sum(out) <= 128)
    plan, back = [], []
    for i, (n_in, n_out) in enumerate(zip(shape[2:], out)):
        scale = None if scales is None else scales[i]
        if kind == "nearest":
            back_taps = _nearest_backward_taps(n_in, n_out, scale)
            taps = back_taps if vectorized else _nearest_taps(n_in, n_out, scale, ft)
        elif kind == "nearest-exact":
            taps = back_taps = _nearest_exact_taps(n_in, n_out, scale)
        elif kind.endswith("-aa"):
            taps = back_taps = _aa_taps(n_in, n_out, align_corners, scale, ft, kind[:-3])
        elif kind == "cubic":
            taps = back_taps = _cubic_taps(n_in, n_out, align_corners, scale, ft)
        else:
            taps = back_taps = _linear_taps(n_in, n_out, align_corners, scale, ft)
        if taps is not None:
            plan.append((i + 2, taps))
        if back_taps is not None:
            back.append((i + 2, back_taps, n_in))
    sizes = tuple(n for _, _, n in back)
    back_plan = tuple((axis, taps) for axis, taps, _ in back)
    return _OPS[kind, len(out)].apply(input, plan=tuple(plan), back=back_plan, sizes=sizes)


# ---------------------------------------------------------------------------------------------- functions
def interpolate(
    input: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dimensions of (N, C, W), (N, C, H, W) or (N, C, D, H, W) input, as
    ``torch.nn.functional.interpolate``.

    Give either ``size`` (an int or one per spatial dimension) or ``scale_factor`` (the output size is then the
    input size times it, rounded down). 'nearest' copies input position floor(o * in / out) (with a scale factor:
    floor(o / scale_factor), unless ``recompute_scale_factor``); 'linear' (3-D input), 'bilinear' (4-D) and
    'trilinear' (5-D) blend the two neighbouring inputs, with the corner pixels' centres aligned when
    ``align_corners`` and their outer edges aligned otherwise; 'area' (4-D) averages, as ``adaptive_avg_pool2d``.
    'nearest-exact' picks floor((o + 0.5) * scale). 'bicubic' (4-D) blends four neighbours along each axis with
    the cubic convolution kernel (a = -0.75), repeating the border pixels beyond the edges. ``antialias=True``
    ('bilinear', 'bicubic') widens the kernel by the shrink factor so that every input under it counts. 'lanczos'
    and 3-D 'area' raise NotImplementedError.

    >>> import trainkit
    >>> x = trainkit.tensor([[[1.0, 2.0, 4.0]]])
    >>> interpolate(x, scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0, 4.0, 4.0]]]
    >>> interpolate(x, size=5, mode="linear", align_corners=True).tolist()
    [[[1.0, 1.5, 2.0, 3.0, 4.0]]]
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                "trilinear"
            )
    elif align_corners is None:
        align_corners = False
    ndim = input.ndim
    dim = ndim - 2
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got input with spatial "
                    f"dimensions of {spatial} and output size of {size}. Please provide input tensor in (N, C, d1, "
                    "d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                )
            sizes = list(size)
        else:
            sizes = [size] * dim
        if not all(_is_integer(s) for s in sizes):
            raise TypeError(
                "expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], but got "
                f"size with types {[type(s) for s in sizes]}"
            )
        out = [int(s) for s in sizes]
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {spatial} and scale_factor of shape {scale_factor}. Please provide input "
                    "tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format."
                )
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out = None
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        out, scales = [_to_int64(n * s) for n, s in zip(spatial, scales)], None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if out is None:  # the kernels' own rounding of input size times scale factor
        out = [_to_int64(n * s) for n, s in zip(spatial, scales)]
    if mode in ("nearest", "nearest-exact") and dim in (1, 2, 3):
        return _resample(input, mode, out, scales, False)
    if {"linear": 1, "bilinear": 2, "trilinear": 3}.get(mode) == dim:
        return _resample(input, "linear-aa" if antialias else "linear", out, scales, bool(align_corners))
    if mode == "bicubic" and dim == 2:
        return _resample(input, "cubic-aa" if antialias else "cubic", out, scales, bool(align_corners))
    if mode == "area" and dim == 2:  # as PyTorch: adaptive average pooling to the output size
        return adaptive_avg_pool2d(input, out)
    if mode == "area" and dim == 1:  # adaptive_avg_pool1d: the 2-D pool of a (N, C, 1, L) view, squeezed back
        return adaptive_avg_pool2d(input.unsqueeze(-2), (1, out[0])).squeeze(-2)
    if (mode == "area" and dim == 3) or (mode == "lanczos" and dim == 2):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported for {ndim}D input")
    needs = {"linear": 3, "bilinear": 4, "trilinear": 5}
    if mode in needs and ndim in (3, 4, 5):
        raise NotImplementedError(f"Got {ndim}D input, but {mode} mode needs {needs[mode]}D input")
    raise NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {ndim}D) for the modes: nearest | linear | "
        f"bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"
    )


def upsample(
    input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None
) -> Tensor:
    """Deprecated alias of ``interpolate`` (it warns), as ``torch.nn.functional.upsample``.

    >>> import trainkit
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     upsample(trainkit.ones(1, 1, 2), scale_factor=2).shape
    trainkit.Size([1, 1, 4])
    """
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='nearest')`` (it warns), as ``torch.nn.functional.upsample_nearest``.

    >>> import trainkit
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     upsample_nearest(trainkit.ones(1, 1, 2, 2), 3).shape
    trainkit.Size([1, 1, 3, 3])
    """
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)`` (it warns), as
    ``torch.nn.functional.upsample_bilinear``.

    >>> import trainkit
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     upsample_bilinear(trainkit.ones(1, 1, 2, 2), scale_factor=2).shape
    trainkit.Size([1, 1, 4, 4])
    """
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


__all__ = ["interpolate", "upsample", "upsample_bilinear", "upsample_nearest"]
