"""Padding in its four modes (``F.pad``).

'constant' fills a border with a value (negative amounts crop). 'reflect', 'replicate' and 'circular' fill it from
the input itself: each output position along a padded axis reads one input position, given by an index map built
once on the host. The forward gathers along each axis with that map; the backward adds the gradient back along it,
one slice addition per run of consecutive (or repeated) positions, so a few passes per axis and no scattered writes.
"""

from __future__ import annotations

import numpy as np

from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.ops.shape import index_into_zeros
from ..autograd.tensor import Tensor


class ConstantPad(Op, name="ConstantPadNdBackward0"):
    """out = x with ``value`` added around the last dimensions (negative amounts crop).   dx = the matching slice
    of g."""

    def forward(self, x, widths, value):
        self.in_shape = x.shape
        grow = [(max(b, 0), max(a, 0)) for b, a in widths]
        crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(widths, x.shape))
        out = xp_of(x).pad(x[crop], grow, mode="constant", constant_values=value)
        self.inner = tuple(slice(max(b, 0), max(b, 0) + (s.stop - s.start)) for (b, _), s in zip(widths, crop))
        self.crop = crop
        return out

    def backward(self, g):
        inner = g[self.inner]
        if all(s.start == 0 and s.stop == n for s, n in zip(self.crop, self.in_shape)):
            return inner
        return index_into_zeros(inner, self.in_shape, self.crop, False)


# ------------------------------------------------------------------------------ reflect, replicate, circular
def _index_map(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of a padded axis, the input position it reads (a host array; negative amounts crop)."""
    if mode == "circular":
        # as PyTorch: crop first, then wrap the cropped axis around (its left border repeats the cropped end)
        core = np.arange(max(-before, 0), n - max(-after, 0))
        left, right = max(before, 0), max(after, 0)
        return np.concatenate([core[len(core) - left :], core, core[:right]])
    pos = np.arange(-before, n + after)
    if mode == "replicate":
        return np.clip(pos, 0, n - 1)
    pos = np.abs(pos)  # reflect about the edge, which is not repeated: -1 -> 1, n -> n - 2
    return np.where(pos >= n, 2 * (n - 1) - pos, pos)


def _runs(index: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The map cut into maximal runs (start, stop, first, step) whose input positions move by the same step, one of
    -1, 0 or +1: within a run the positions are distinct (or all one), so each run is one slice addition."""
    runs = []
    values = index.tolist()
    start = 0
    while start < len(values):
        stop, step = start + 1, 1
        if stop < len(values) and abs(values[stop] - values[start]) <= 1:
            step = values[stop] - values[start]
            while stop < len(values) and values[stop] - values[stop - 1] == step:
                stop += 1
        runs.append((start, stop, values[start], step))
        start = stop
    return runs


def _gather(x, maps):
    """``x`` read through each axis's index map."""
    xp = xp_of(x)
    if not maps:
        return x.copy()
    for axis, index, _ in maps:
        x = xp.take(x, xp.asarray(index), axis=axis)
    return x


def _add_back(g, maps):
    """The adjoint of ``_gather``: each element of ``g`` added to the input position it was read from."""
    xp = xp_of(g)
    for axis, index, n in maps:
        lead = (slice(None),) * axis
        shape = g.shape[:axis] + (n,) + g.shape[axis + 1 :]
        out = xp.zeros(shape, dtype=g.dtype)
        for start, stop, first, step in _runs(index):
            part = g[lead + (slice(start, stop),)]
            if step == 1:
                out[lead + (slice(first, first + stop - start),)] += part
            elif step == -1:
                out[lead + (slice(first - (stop - start) + 1, first + 1),)] += part[lead + (slice(None, None, -1),)]
            else:
                out[lead + (slice(first, first + 1),)] += part.sum(axis=axis, keepdims=True)
        g = out
    return g


class EdgePad(Op):
    """out = x read through an index map along each padded axis (reflect, replicate or circular).
    dx = g added back along the same maps. Subclasses carry PyTorch's node names."""

    adjoint: type

    def forward(self, x, maps):
        self.maps = maps
        return _gather(x, maps)

    def backward(self, g):
        if isinstance(g, Tensor):  # the scatter as an op of its own, whose backward gathers again
            return self.adjoint.apply(g, maps=self.maps)
        return _add_back(g, self.maps)


class EdgePadAdjoint(Op):
    """out = x added back along the index maps (EdgePad's backward).   dx = g read through the maps again."""

    adjoint: type

    def forward(self, x, maps):
        self.maps = maps
        return _add_back(x, maps)

    def backward(self, g):
        if isinstance(g, Tensor):
            return self.adjoint.apply(g, maps=self.maps)
        return _gather(g, self.maps)


def _edge_ops(forward_name: str, backward_name: str) -> type:
    fwd = type(forward_name, (EdgePad,), {"__module__": __name__})
    adj = type(backward_name, (EdgePadAdjoint,), {"__module__": __name__})
    fwd.adjoint, adj.adjoint = adj, fwd
    return fwd


# PyTorch's node names: one per mode and number of padded dimensions; circular padding is slice copies there
_EDGE_OPS = {
    (mode, k): _edge_ops(f"{base}{k}DBackward0", f"{base}{k}DBackwardBackward0")
    for mode, base in (("reflect", "ReflectionPad"), ("replicate", "ReplicationPad"))
    for k in (1, 2, 3)
}
_EDGE_OPS.update({("circular", k): _edge_ops("CopySlices", "SliceBackwardBackward0") for k in (1, 2, 3)})
_KERNELS = {"reflect": "reflection_pad", "replicate": "replication_pad"}


def _check_edge(shape: tuple, pairs: list, mode: str) -> None:
    """PyTorch's checks for reflect / replicate / circular padding; ``pairs`` go last dimension first."""
    k, ndim = len(pairs), len(shape)
    sizes = shape[-k:][::-1]  # last dimension first, as the pairs
    outs = [n + b + a for n, (b, a) in zip(sizes, pairs)]
    if mode == "circular":
        for n, (b, a), o in list(zip(sizes, pairs, outs))[::-1]:
            if b > n or a > n:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if o < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
        for n, (b, a) in zip(sizes, pairs):
            core = n - max(-b, 0) - max(-a, 0)
            if b > core or a > core:  # the border would copy from itself
                raise RuntimeError(
                    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                    "single memory location. Please clone() the tensor before performing the operation."
                )
        return
    if any(n == 0 for n in shape[ndim - k - 1 :]):  # only a batch dimension may be empty
        raise RuntimeError(
            f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and other non-zero "
            f"dimensions for input, but got: {list(shape)}"
        )
    if mode == "reflect":
        for i, (n, (b, a)) in enumerate(zip(sizes, pairs)):
            if b >= n or a >= n:
                raise RuntimeError(
                    f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input dimension, but "
                    f"got: padding ({b}, {a}) at dimension {ndim - 1 - i} of input {list(shape)}"
                )
    if k == 1 and outs[0] < 1:
        raise RuntimeError(f"input (W: {sizes[0]}) is too small. Calculated output W: {outs[0]}")
    if max(outs) < 1:
        if k == 2:
            gap = " " if mode == "replicate" else ""
            raise RuntimeError(
                f"input (H: {sizes[1]}, W: {sizes[0]}{gap}) is too small. Calculated output H: {outs[1]} W: {outs[0]}"
            )
        raise RuntimeError(
            f"input (D: {sizes[2]} H: {sizes[1]}, W: {sizes[0]}) is too small. Calculated output D: {outs[2]} "
            f"H: {outs[1]} W: {outs[0]}"
        )
    if min(outs) < 0:
        out_shape = list(shape[:-k]) + outs[::-1]
        negative = next(o for o in out_shape if o < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative}: {out_shape}")


def _edge_pad(input: Tensor, pairs: list, mode: str) -> Tensor:
    shape = tuple(input._data.shape)
    k, ndim = len(pairs), len(shape)
    if k not in (1, 2, 3) or ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {2 * k} is not supported for {ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    _check_edge(shape, pairs, mode)
    if mode != "circular" and input._data.dtype == np.bool_:
        raise NotImplementedError(f"\"{_KERNELS[mode]}{k}d\" not implemented for 'Bool'")
    maps = tuple(
        (ndim - 1 - i, _index_map(shape[ndim - 1 - i], b, a, mode), shape[ndim - 1 - i])
        for i, (b, a) in enumerate(pairs)
        if (b, a) != (0, 0)
    )
    return _EDGE_OPS[mode, k].apply(input, maps=maps)


_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: tuple, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dimensions: ``pad = (left, right, top, bottom, ...)``, last dimension first.

    ``mode`` is 'constant' (a border of ``value``, default 0; negative amounts crop), 'reflect' (mirrored about the
    edge, which is not repeated), 'replicate' (the edge repeated) or 'circular' (wrapped around). The last three
    pad the last 1, 2 or 3 dimensions of an input with one or two more dimensions (an optional batch and channels).

    >>> import trainkit
    >>> pad(trainkit.ones(1, 2), (1, 1)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    >>> x = trainkit.tensor([[1.0, 2.0, 3.0]])
    >>> pad(x, (2, 1), mode="reflect").tolist(), pad(x, (2, 1), mode="replicate").tolist()
    ([[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]], [[1.0, 1.0, 1.0, 2.0, 3.0, 3.0]])
    >>> pad(x, (2, 1), mode="circular").tolist()
    [[2.0, 3.0, 1.0, 2.0, 3.0, 1.0]]
    """
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            f"Padding length should be less than or equal to two times the input dimension but got "
            f"padding length {len(pad)} and input of dimension {input.ndim}"
        )
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)]
    if mode != "constant":
        if value is not None and value != 0:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        return _edge_pad(input, pairs, mode)
    widths = [(0, 0)] * (input.ndim - len(pairs)) + pairs[::-1]
    return ConstantPad.apply(input, widths=tuple(widths), value=0 if value is None else value)


__all__ = ["pad"]
