"""Converters of the ops that move elements without arithmetic: views and reshapes, transposes, expand, basic and
integer indexing, cat, stack, split and unbind. Sizes that follow a dynamic axis become run-time values
(:mod:`trainkit.onnx.shapes`).
"""

from __future__ import annotations

import numpy as np

from .context import Context, elem_type
from .shapes import INT64_MAX

__all__ = ["SHAPE_CONVERTERS"]


def _reshape(cx: Context) -> None:
    """Every view that only changes the shape (view, reshape, flatten, squeeze, unsqueeze): ``Reshape``."""
    x = cx.input(0)
    shape = cx.vector_for("shape", "Reshape", x)
    cx.bind(cx.node("Reshape", [x, shape]))


def _transpose(cx: Context) -> None:
    rank = len(cx.shape(0))
    if "d0" not in cx.params:  # a transpose of a 0-d or 1-d tensor: nothing moves
        cx.bind(cx.node("Identity", [cx.input(0)]))
        return
    perm = list(range(rank))
    d0, d1 = cx.params["d0"] % rank, cx.params["d1"] % rank
    perm[d0], perm[d1] = perm[d1], perm[d0]
    cx.bind(cx.node("Transpose", [cx.input(0)], perm=perm))


def _permute(cx: Context) -> None:
    rank = len(cx.shape(0))
    cx.bind(cx.node("Transpose", [cx.input(0)], perm=[d % rank for d in cx.params["dims"]]))


def _expand(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Expand", [x, cx.vector_for("shape", "Expand", x)]))


def _parts(index, rank: int) -> list:
    """The index as a list of ints, slices and None, with the Ellipsis (or the missing tail) as full slices."""
    parts = list(index) if type(index) is tuple else [index]
    used = sum(1 for p in parts if p is not None and p is not Ellipsis)
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts[at : at + 1] = [slice(None)] * (rank - used)
    else:
        parts += [slice(None)] * (rank - used)
    return parts


def _bound(cx: Context, v1, v2, dim1: int, dim2: int, default: int, x: str):
    """A slice bound as a number or a 1-element value: a number that moved with the axis's length by the same
    amount counts from the end (``x[:, :T]`` is ``x[:, :]``, ``x[:, T - 1]`` is ``x[:, -1]``)."""
    if v1 is None:
        return default
    v1 = int(v1)
    if v2 is None or int(v2) == v1:
        return v1
    v2 = int(v2)
    if v1 - dim1 == v2 - dim2:
        return v1 - dim1 if v1 - dim1 < 0 else INT64_MAX
    found = cx.dims.size(v1, v2, x, cx.shape(0), cx.shape2(0))
    if found is None:
        raise cx.refuse(f"index {v1} changes with the dynamic axes in a way the exporter cannot follow")
    return found


def _basic_index(cx: Context) -> None:
    """``x[1:, None, -1]``: one ``Slice`` over the sliced axes, ``Squeeze`` of the integer ones, ``Unsqueeze``
    for the new ones."""
    x = cx.input(0)
    shape, shape2 = cx.shape(0), cx.shape2(0)
    parts = _parts(cx.params["index"], len(shape))
    parts2 = _parts(cx.params2["index"], len(shape2)) if cx.rec2 is not None else [None] * len(parts)
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    axis = out_pos = 0
    for p, p2 in zip(parts, parts2):
        if p is None:
            unsqueeze.append(out_pos)
            out_pos += 1
            continue
        d1, d2 = shape[axis], shape2[axis]
        if isinstance(p, slice):
            if p != slice(None):
                starts.append(_bound(cx, p.start, getattr(p2, "start", None), d1, d2, 0, x))
                ends.append(_bound(cx, p.stop, getattr(p2, "stop", None), d1, d2, INT64_MAX, x))
                axes.append(axis)
                steps.append(1 if p.step is None else int(p.step))
            out_pos += 1
        else:
            i = _bound(cx, p, p2, d1, d2, 0, x)
            end = INT64_MAX if i == -1 else (i + 1 if isinstance(i, int) else cx.node("Add", [i, cx.g.ints([1])]))
            starts.append(i)
            ends.append(end)
            axes.append(axis)
            steps.append(1)
            squeeze.append(axis)
        axis += 1
    out = x
    if axes:
        pieces = [cx.dims.concat([[v] if isinstance(v, int) else v for v in vals]) for vals in (starts, ends)]
        out = cx.node("Slice", [out, pieces[0], pieces[1], cx.g.ints(axes), cx.g.ints(steps)])
    if squeeze:
        out = cx.node("Squeeze", [out, cx.g.ints(squeeze)])
    if unsqueeze:
        out = cx.node("Unsqueeze", [out, cx.g.ints(unsqueeze)])
    cx.bind(out if out != x else cx.node("Identity", [x]))


def _advanced_index(cx: Context) -> None:
    """``x[idx]`` or ``x[:, idx]`` with one integer array (or list): ``Gather`` on that axis."""
    x = cx.input(0)
    index = cx.params["index"]
    parts = list(index) if type(index) is tuple else [index]
    arrays = [i for i, p in enumerate(parts) if hasattr(p, "dtype")]
    rest = [p for i, p in enumerate(parts) if i not in arrays]
    if len(arrays) != 1 or any(p != slice(None) for p in rest) or parts[arrays[0]].dtype == np.bool_:
        raise cx.refuse("only indexing by one integer tensor on one axis (x[idx], x[:, idx]) is exported")
    cx.bind(cx.node("Gather", [x, cx.g.value(parts[arrays[0]])], axis=arrays[0]))


def _cat(cx: Context) -> None:
    names = [cx.input(i) for i in range(len(cx.rec.inputs))]
    keep = [n for n, a in zip(names, cx.rec.inputs) if a.size or len(a.shape) != 1]  # torch.cat skips empty 1-d
    cx.bind(cx.node("Concat", keep, axis=int(cx.params["dim"]) % max(len(cx.shape(0)), 1)))


def _stack(cx: Context) -> None:
    rank = len(cx.shape(0)) + 1
    dim = int(cx.params["dim"]) % rank
    names = [cx.node("Unsqueeze", [cx.input(i), cx.g.ints([dim])]) for i in range(len(cx.rec.inputs))]
    cx.bind(cx.node("Concat", names, axis=dim))


def _split(cx: Context) -> None:
    x = cx.input(0)
    dim = int(cx.params["dim"]) % len(cx.shape(0))
    outs = cx.out_arrays()
    sizes = [a.shape[dim] for a in outs]
    if cx.rec2 is not None and [a.shape[dim] for a in cx.rec2_outputs()] != sizes:
        raise cx.refuse("a split whose sizes change with the dynamic axes")
    names = cx.g.node("Split", [x, cx.g.ints(sizes)], outputs=len(outs), axis=dim)
    cx.bind(names if isinstance(names, list) else [names])


def _unbind(cx: Context) -> None:
    x = cx.input(0)
    dim = int(cx.params["dim"]) % len(cx.shape(0))
    n = len(cx.out_arrays())
    names = cx.g.node("Split", [x, cx.g.ints([1] * n)], outputs=n, axis=dim)
    names = names if isinstance(names, list) else [names]
    cx.bind([cx.node("Squeeze", [name, cx.g.ints([dim])]) for name in names])


def _repeat(cx: Context) -> None:
    """``x.repeat(*sizes)``: ``Tile``, after new leading axes when there are more sizes than axes."""
    x = cx.input(0)
    repeats = [int(r) for r in cx.params["repeats"]]
    extra = len(repeats) - len(cx.shape(0))
    if extra > 0:
        x = cx.node("Unsqueeze", [x, cx.g.ints(range(extra))])
    cx.bind(cx.node("Tile", [x, cx.g.ints(repeats)]))


def _flip(cx: Context) -> None:
    rank = len(cx.shape(0))
    dims = [int(d) % rank for d in cx.params["dims"]]
    n = len(dims)
    ends = cx.g.ints([-INT64_MAX - 1] * n)
    cx.bind(cx.node("Slice", [cx.input(0), cx.g.ints([-1] * n), ends, cx.g.ints(dims), cx.g.ints([-1] * n)]))


def _roll(cx: Context) -> None:
    """``x.roll(shifts, dims)``: per dimension, the last ``shift`` elements moved to the front (``Slice`` and
    ``Concat``; the shift counts from the end, so it holds at any length larger than the shift)."""
    dims = cx.params.get("dims")
    if dims is None or not len(dims):
        raise cx.refuse("roll without dims (over the flattened tensor)")
    out = cx.input(0)
    shape = cx.shape(0)
    for shift, dim in zip(cx.params["shifts"], dims):
        dim = int(dim) % len(shape)
        shift = int(shift) % shape[dim] if shape[dim] else 0
        if not shift:
            continue
        axis = cx.g.ints([dim])
        tail = cx.node("Slice", [out, cx.g.ints([-shift]), cx.g.ints([INT64_MAX]), axis])
        head = cx.node("Slice", [out, cx.g.ints([0]), cx.g.ints([-shift]), axis])
        out = cx.node("Concat", [tail, head], axis=dim)
    cx.bind(out if out != cx.input(0) else cx.node("Identity", [out]))


def _axis_mask(cx: Context, x: str, axis: int, rank: int, part, size: int, changes: bool) -> str | None:
    """A bool vector along ``axis`` (shaped to broadcast against x) that is True where ``part`` (an int or a
    slice) selects; None for a full slice. On an axis that follows a dynamic axis only positions counted from the
    start are exported (``x[:, 0]``, ``x[:, 2:]``)."""
    if isinstance(part, slice) and part == slice(None):
        return None
    if isinstance(part, slice):
        start, stop, step = part.indices(size)
        upper = None if part.stop is None else stop
        counted_from_end = any(v is not None and v < 0 for v in (part.start, part.stop))
    else:
        start, step, upper = int(part) % size, 1, int(part) % size + 1
        counted_from_end = int(part) < 0
    if changes and (counted_from_end or (isinstance(part, slice) and part.stop is not None)):
        raise cx.refuse("x[...] = v with a position counted from the end on an axis that follows a dynamic axis")
    g = cx.g
    n = cx.node("Squeeze", [cx.dims.axis_size(x, axis), g.ints([0])])
    zero, one = g.const(np.asarray(0, np.int64)), g.const(np.asarray(1, np.int64))
    r = cx.node("Range", [zero, n, one])
    inside = cx.node("GreaterOrEqual", [r, g.const(np.asarray(start, np.int64))])
    if upper is not None:
        inside = cx.node("And", [inside, cx.node("Less", [r, g.const(np.asarray(upper, np.int64))])])
    if step != 1:
        offset = cx.node("Sub", [r, g.const(np.asarray(start, np.int64))])
        on_step = cx.node("Equal", [cx.node("Mod", [offset, g.const(np.asarray(step, np.int64))]), zero])
        inside = cx.node("And", [inside, on_step])
    others = [k for k in range(rank) if k != axis]
    return cx.node("Unsqueeze", [inside, g.ints(others)]) if others else inside


def _placed(cx: Context, x: str, parts: list, value) -> str:
    """``value`` broadcast over the region ``x[parts]`` selects and padded with zeros to x's shape, so that it
    sits where the region is (``Expand``, then ``Pad`` by the region's offsets)."""
    shape = cx.shape(0)
    g = cx.g
    starts, ends, lost = [], [], []
    for axis, part in enumerate(parts):
        if isinstance(part, slice):
            start, stop, _ = part.indices(shape[axis])
            starts.append(start)
            ends.append(INT64_MAX if part.stop is None else stop)
        else:
            i = int(part) % shape[axis]
            starts.append(i)
            ends.append(i + 1)
            lost.append(axis)
    v = g.value(value)
    if value.dtype != cx.dtype(x):
        v = cx.node("Cast", [v], to=elem_type(cx.dtype(x)))
    kept = len(parts) - len(lost)
    if value.ndim < kept:
        v = cx.node("Unsqueeze", [v, g.ints(range(kept - value.ndim))])
    if lost:
        v = cx.node("Unsqueeze", [v, g.ints(lost)])
    sizes = iter((1,) * (kept - value.ndim) + tuple(value.shape))
    spread = [1 if axis in lost else next(sizes) for axis in range(len(parts))]
    if all(n == 1 for axis, n in enumerate(spread) if parts[axis] != slice(None)):
        return v  # one value along every selected axis: it broadcasts over x as it is
    if any(isinstance(p, slice) and (p.step or 1) != 1 for p in parts):
        raise cx.refuse("x[a:b:step] = tensor with several values along the stepped axis")
    region = cx.node("Slice", [x, g.ints(starts), g.ints(ends), g.ints(range(len(parts)))])
    region_shape = cx.node("Shape", [region])
    v = cx.node("Expand", [v, region_shape])
    begin = g.ints(starts)
    after = cx.node("Sub", [cx.node("Sub", [cx.node("Shape", [x]), region_shape]), begin])
    return cx.node("Pad", [v, cx.node("Concat", [begin, after], axis=0)], mode="constant")


def _setitem(cx: Context) -> None:
    """``x[key] = value``: ``Where`` of a mask of the positions the key selects, for a bool mask key (of x's shape
    or its leading axes) with a number, or ints and slices with a number or a tensor that broadcasts over the
    selection."""
    x = cx.input(0)
    key, value = cx.rec.inputs[1], cx.rec.inputs[2]
    shape = cx.shape(0)
    rank = len(shape)
    if hasattr(key, "dtype") and key.dtype == np.bool_:
        mask = cx.g.value(key)
        if key.ndim < rank:
            mask = cx.node("Unsqueeze", [mask, cx.g.ints(range(key.ndim, rank))])
        if hasattr(value, "shape") and value.size != 1:
            raise cx.refuse("x[mask] = tensor (only a number or a one-element tensor is exported)")
    else:
        parts = _parts(key, rank) if not hasattr(key, "dtype") else None
        if parts is None or any(p is None or hasattr(p, "dtype") for p in parts):
            raise cx.refuse("x[index] = v with an index tensor or None (ints, slices and bool masks are exported)")
        masks = []
        for axis, part in enumerate(parts):
            changes = cx.rec2 is not None and cx.shape(0)[axis] != cx.shape2(0)[axis]
            m = _axis_mask(cx, x, axis, rank, part, shape[axis], changes)
            if m is not None:
                masks.append(m)
        if not masks:
            mask = cx.g.const(np.asarray(True))
        else:
            mask = masks[0]
            for m in masks[1:]:
                mask = cx.node("And", [mask, m])
        if hasattr(value, "shape") and value.ndim:
            cx.bind(cx.node("Where", [mask, _placed(cx, x, parts, value), x]))
            return
    v = cx.g.value(value, like=x) if not hasattr(value, "shape") else cx.g.value(value)
    if hasattr(value, "dtype") and value.dtype != cx.dtype(x):
        v = cx.node("Cast", [v], to=elem_type(cx.dtype(x)))
    cx.bind(cx.node("Where", [mask, v, x]))


SHAPE_CONVERTERS = {
    "tensor.setitem": _setitem,
    "rearrange.RepeatBackward0": _repeat,
    "rearrange.FlipBackward0": _flip,
    "rearrange.RollBackward0": _roll,
    "gather_scatter.IndexSelectBackward0": _advanced_index,
    "shape.ViewBackward0": _reshape,
    "shape.UnsafeViewBackward0": _reshape,
    "shape.ReshapeAliasBackward0": _reshape,
    "shape.SqueezeBackward0": _reshape,
    "shape.SqueezeBackward1": _reshape,
    "shape.SqueezeBackward2": _reshape,
    "shape.UnsqueezeBackward0": lambda cx: (_basic_index if "index" in cx.params else _reshape)(cx),
    "shape.TransposeBackward0": _transpose,
    "shape.TBackward0": _transpose,
    "shape.PermuteBackward0": _permute,
    "shape.ExpandBackward0": _expand,
    "shape.SliceBackward0": _basic_index,
    "shape.SelectBackward0": _basic_index,
    "shape.AliasBackward0": _basic_index,
    "shape.IndexBackward0": _advanced_index,
    "join.CatBackward0": _cat,
    "join.StackBackward0": _stack,
    "join.SplitBackward0": _split,
    "join.SplitWithSizesBackward0": _split,
    "join.UnbindBackward0": _unbind,
}
