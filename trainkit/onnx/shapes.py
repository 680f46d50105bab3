"""Sizes that follow the dynamic axes: which numbers in an op's arguments are a dynamic size, and the ONNX values
that compute them at run time.

With ``dynamic_axes`` the model runs twice, the second time with every dynamic axis a little longer or shorter
(each named axis by its own step). A number in an op's arguments that is the same in both runs is a constant; one
that changed is a size: the input's own axis of that size (``Shape`` then ``Gather``), a dynamic axis of a model
input, or, once per shape, ``-1`` for ``Reshape`` to work out. A size that is none of these is refused with the
op's and the module's names, rather than written as a number that would be wrong at another size.
"""

from __future__ import annotations

import numpy as np

from .graph import GraphBuilder, OnnxExporterError

__all__ = ["Dims"]

INT64_MAX = np.iinfo(np.int64).max


class Dims:
    """Run-time sizes of a graph's dynamic axes.

    ``sources``: ``(size in the first run, size in the second, input value name, axis)`` per dynamic axis.

    >>> import numpy as np
    >>> g = GraphBuilder(18)
    >>> x = g.input_value(np.zeros((2, 3), "float32"), "x")
    >>> d = Dims(g, [(2, 3, x, 0)])
    >>> d.vector((2, 3), (3, 3), "Reshape", x, (2, 3), (3, 3))  # the first axis is copied: 0
    'const_0'
    """

    def __init__(self, g: GraphBuilder, sources: list):
        self.g = g
        self.sources = sources
        self.cache: dict = {}

    def shape_of(self, x: str) -> str:
        key = ("shape", x)
        if key not in self.cache:
            self.cache[key] = self.g.node("Shape", [x])
        return self.cache[key]

    def axis_size(self, x: str, axis: int) -> str:
        """A 1-element int64 value: the run-time size of ``x``'s ``axis``."""
        key = ("axis", x, axis)
        if key not in self.cache:
            self.cache[key] = self.g.node("Gather", [self.shape_of(x), self.g.ints([axis])], axis=0)
        return self.cache[key]

    def size(self, v1: int, v2: int, x: str | None = None, s1: tuple = (), s2: tuple = ()) -> str | None:
        """The value computing a size that was ``v1`` in the first run and ``v2`` in the second: an axis of ``x``
        (shapes ``s1``/``s2`` in the two runs), else a dynamic axis of an input; None when it is neither."""
        if x is not None:
            for j, (a, b) in enumerate(zip(s1, s2)):
                if a == v1 and b == v2:
                    return self.axis_size(x, j)
        for a, b, name, axis in self.sources:
            if a == v1 and b == v2:
                return self.axis_size(name, axis)
        return None

    def concat(self, pieces: list) -> str:
        """One 1-d int64 value from pieces that are lists of numbers or 1-element values."""
        merged: list = []
        for p in pieces:
            if isinstance(p, list) and merged and isinstance(merged[-1], list):
                merged[-1] = merged[-1] + p
            else:
                merged.append(p)
        names = [self.g.ints(p) if isinstance(p, list) else p for p in merged]
        return names[0] if len(names) == 1 else self.g.node("Concat", names, axis=0)

    def vector(self, t1, t2, what: str, x: str, s1: tuple, s2: tuple | None) -> str:
        """The shape argument of ``Reshape`` (``what='Reshape'``: an axis kept in place is 0, one unknown size
        -1) or ``Expand`` (an axis the input already has is 1)."""
        t1 = tuple(int(v) for v in t1)
        if t2 is None or tuple(t2) == t1:
            return self.g.ints(t1)
        t2 = tuple(int(v) for v in t2)
        pieces: list = []
        minus_one = -1 in t1
        offset = len(t1) - len(s1)
        for i, (a, b) in enumerate(zip(t1, t2)):
            if a == b:
                pieces.append([a])
                continue
            if what == "Reshape" and i < len(s1) and s1[i] == a and s2[i] == b:
                pieces.append([0])
                continue
            if what == "Expand" and 0 <= i - offset < len(s1) and s1[i - offset] == a and s2[i - offset] == b:
                pieces.append([1])
                continue
            found = self.size(a, b, x, s1, s2)
            if found is not None:
                pieces.append(found)
            elif what == "Reshape" and not minus_one:
                minus_one = True
                pieces.append([-1])
            else:
                raise OnnxExporterError(f"size {a} of {what} changes with the dynamic axes in a way not traced")
        return self.concat(pieces)

    def made(self, a, b) -> str | None:
        """A tensor made inside forward whose shape follows the dynamic axes, as a run-time value when it is one
        value everywhere (``filled``) or a 1-d range with the same start and step in both runs
        (``torch.arange(T)``: ``Range``); None otherwise."""
        return self.filled(a, b) or self.arange(a, b)

    def arange(self, a, b) -> str | None:
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != 1 or b.ndim != 1 or a.size < 2 or b.size < 2 or a.dtype.kind not in "iuf":
            return None
        start, step = a[0], a[1] - a[0]
        for v in (a, b):
            if v[0] != start or not np.array_equal(v, (start + step * np.arange(v.size)).astype(v.dtype)):
                return None
        n = self.size(int(a.size), int(b.size))
        if n is None:
            return None
        g = self.g
        length = g.node("Cast", [g.node("Squeeze", [n, g.ints([0])])], to=_elem(a.dtype))
        first, delta = g.const(np.asarray(start, a.dtype)), g.const(np.asarray(step, a.dtype))
        limit = g.node("Add", [first, g.node("Mul", [length, delta])])
        return g.node("Range", [first, limit, delta])

    def filled(self, a, b) -> str | None:
        """A tensor made inside forward, filled with one value, whose shape follows the dynamic axes
        (``zeros_like(x)``, ``torch.ones(T, T)``): ``Expand`` of the value to the run-time shape. None when the
        tensor is not one value or a size is not an axis of an input."""
        a, b = np.asarray(a), np.asarray(b)
        if not a.size or not b.size or a.ndim != b.ndim:
            return None
        first = a.reshape(-1)[0]
        if not (a == first).all() or not (b == first).all():
            return None
        pieces: list = []
        for v1, v2 in zip(a.shape, b.shape):
            found = [int(v1)] if v1 == v2 else self.size(int(v1), int(v2))
            if found is None:
                return None
            pieces.append(found)
        return self.g.node("Expand", [self.g.const(np.asarray(first, a.dtype)), self.concat(pieces)])


def _elem(dtype) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
