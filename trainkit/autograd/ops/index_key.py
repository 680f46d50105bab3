"""Reading a user's index as PyTorch does: which parts are tensors, in what order the dimensions come out, and
whether the indexing is basic (a view) or advanced (a copy)."""

from __future__ import annotations

import operator

import numpy as np

from ..backend import device_of, to_device, xp_of
from ..tensor import Tensor

__all__ = ["ALL", "normalize_index"]

ALL = slice(None)

_SEQUENCE_PARTS = (Tensor, list, tuple, range, np.ndarray, slice, str)


def _as_tuple(key: list) -> bool:
    """PyTorch reads a list holding a sequence, tensor, slice, None or Ellipsis as a tuple of indices."""
    if len(key) >= 32:
        return False
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, _SEQUENCE_PARTS):
            return True
    return False


def _int_bounds(k: slice) -> slice:
    """The slice with its bounds as ints: Python reads a bound through ``__index__``, so a 0-d integer tensor or a
    NumPy integer is one (``data[i : i + 8]`` for ``i`` taken from a tensor), and a float tensor is refused."""
    if (type(k.start) is int or k.start is None) and (type(k.stop) is int or k.stop is None):
        if type(k.step) is int or k.step is None:
            return k
    return slice(*(None if b is None else operator.index(b) for b in (k.start, k.stop, k.step)))


def _bad_step(k: slice):
    if k.step == 0:
        raise ValueError("slice step cannot be zero")
    raise ValueError("step must be greater than zero")


def normalize_index(key, data):
    """A user's index with tensors and lists turned into arrays on ``data``'s device.

    Returns ``(index, kind)``: kind is 'select' (one integer), 'slice' (basic indexing), 'mask' (boolean
    advanced indexing: no repeats) or 'index' (integer advanced indexing: repeats possible); 'view-mask' and
    'view-index' when integers, slices or new axes come with the advanced index (PyTorch indexes a view of the
    tensor then). Integers combined with tensor indices select first, as in PyTorch, so the dimensions come out
    in PyTorch's order.
    """
    if type(key) is int:
        return key, "select"
    if type(key) is slice:
        key = _int_bounds(key)
        if key.step is not None and key.step <= 0:
            _bad_step(key)
        return key, "slice"
    if isinstance(key, list) and _as_tuple(key):
        key = tuple(key)
    parts = key if isinstance(key, tuple) else (key,)
    out, kind, ints = [], "slice", False
    for k in parts:
        if type(k) is int:  # the common parts first, without the checks below
            ints = True
            if kind == "slice":
                kind = "select"
            out.append(k)
            continue
        if type(k) is slice or k is None or k is Ellipsis:
            if type(k) is slice:
                k = _int_bounds(k)
            if k is not None and k is not Ellipsis and k.step is not None and k.step <= 0:
                _bad_step(k)
            out.append(k)
            continue
        if isinstance(k, Tensor):
            k = k._data
        elif type(k) is list or type(k) is range or (isinstance(k, np.ndarray) and xp_of(data) is not np):
            k = np.asarray(k)
            if k.size == 0:
                k = k.astype(np.int64)
        elif isinstance(k, (bool, np.bool_)):
            k = np.asarray(k)
        elif isinstance(k, str):
            raise TypeError(f"new(): invalid data type '{type(k).__name__}'")
        dt = getattr(k, "dtype", None)
        if dt is not None and hasattr(k, "ndim"):
            code = dt.kind
            if code not in "biu":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors, got " + str(dt))
            if k.ndim == 0 and code != "b":
                ints = True  # a 0-dim integer tensor selects, as a Python int does
                if kind == "slice":
                    kind = "select"
                out.append(int(k))
                continue
            if code == "u" and dt.itemsize == 1:  # PyTorch reads a uint8 index as a mask
                k = k.astype(np.bool_)
                code = "b"
            if type(k) is not np.ndarray or type(data) is not np.ndarray:
                k = to_device(k, device_of(data))
            kind = "mask" if code == "b" and kind != "index" else "index"
        elif isinstance(k, (int, np.integer)):
            if kind == "slice":
                kind = "select"
            ints = True
            k = int(k)
        elif not (k is None or k is Ellipsis or isinstance(k, slice)):
            raise IndexError(
                f"only integers, slices, None, Ellipsis and integer or boolean tensors are valid "
                f"indices (got {type(k).__name__})"
            )
        out.append(k)
    if kind != "slice" and kind != "select":
        for p in out:
            if p is None or type(p) is int or (type(p) is slice and p != ALL):
                kind = "view-" + kind
                break  # PyTorch indexes a view here: an assignment records CopySlices
        if ints:
            return tuple(_torch_order(out, data)), kind
    return (out[0] if len(out) == 1 and not isinstance(key, tuple) else tuple(out)), kind


def _torch_order(parts: list, data) -> list:
    """An index equivalent to ``parts`` under NumPy's rules that gives PyTorch's order of dimensions.

    PyTorch applies integers first (as ``select``), so a tensor index separated from an integer by a slice keeps
    its place, where NumPy would move the indexed dimensions to the front. When the two differ, the slices (and
    new axes) before the tensor indices become broadcast ``arange`` indices, which NumPy places first too.
    """
    if any(
        getattr(p, "ndim", 1) == 0
        for p in parts
        if not isinstance(p, (int, slice)) and p is not None and p is not Ellipsis
    ):
        return parts  # a 0-d boolean index: left to NumPy
    xp = xp_of(data)
    at = next((i for i, p in enumerate(parts) if p is Ellipsis), None)
    if at is not None:
        used = sum(
            1
            if isinstance(p, (int, slice))
            else (p.ndim if hasattr(p, "ndim") and p.dtype.kind == "b" else (0 if p is None or p is Ellipsis else 1))
            for p in parts
        )
        parts = parts[:at] + [slice(None)] * (data.ndim - used) + parts[at + 1 :]
    flat, dim = [], 0
    for p in parts:
        if hasattr(p, "ndim") and p.dtype.kind == "b":
            if tuple(p.shape) != tuple(data.shape[dim : dim + p.ndim]):
                raise IndexError(
                    f"The shape of the mask {list(p.shape)} at index {dim} does not match the shape of "
                    f"the indexed tensor {list(data.shape)} at index {dim}"
                )
            flat.extend(p.nonzero())
            dim += p.ndim
        else:
            flat.append(p)
            dim += p is not None
    arrays = [i for i, p in enumerate(flat) if hasattr(p, "ndim")]
    group = [i for i, p in enumerate(flat) if hasattr(p, "ndim") or isinstance(p, int)]
    rest = [i for i, p in enumerate(flat) if not isinstance(p, int)]
    run = [rest.index(i) for i in arrays]
    before = [p for p in flat[: arrays[0]] if not isinstance(p, int)]
    if group == list(range(group[0], group[-1] + 1)) or run != list(range(run[0], run[-1] + 1)) or not before:
        return flat  # NumPy and PyTorch agree
    try:
        bshape = np.broadcast_shapes(*(flat[i].shape for i in arrays))
    except ValueError:
        shapes = ", ".join(str(list(flat[i].shape)) for i in arrays)
        raise IndexError(
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
        ) from None
    lead = len(before)
    out, dim, b = [], 0, 0
    for i, p in enumerate(flat):
        if i < arrays[0] and not isinstance(p, int):
            if p is not None:
                n = len(range(*p.indices(data.shape[dim])))
                shape = (1,) * b + (n,) + (1,) * (lead - b - 1 + len(bshape))
                out.append(xp.arange(*p.indices(data.shape[dim])).reshape(shape))
                dim += 1
            b += 1
            continue
        if hasattr(p, "ndim"):
            p = p.reshape((1,) * (lead + len(bshape) - p.ndim) + p.shape)
        if p is not None:
            dim += 1
        out.append(p)
    return out
