"""When the engine may keep a gradient array as a leaf's ``.grad`` without copying it.

PyTorch's engine "steals" a gradient that nothing else refers to. Python tells us the same through reference
counts: an array held only by the engine's local and the call chain into ``owned`` can be taken over. The counts a
sole owner shows depend on the Python version, so they are measured once, at import, through a chain of frames
shaped like the engine's.
"""

from __future__ import annotations

import sys

from .backend import as_array


def owned(g) -> bool:
    """Whether ``g``, held only by the engine's local and passed on through ``accumulate``, is ours to keep: an
    array that owns its memory, or a C-contiguous view of the whole of an array that nothing else holds (the
    transpose of a transposed product)."""
    if sys.getrefcount(g) > _SOLE_REFS[0]:
        return False
    flags = g.flags
    if not getattr(flags, "writeable", True):  # a broadcast view, or an array its maker froze
        return False
    base = g.base
    if base is None:
        return True
    # the base must own its memory: one made over a buffer (frombuffer, another library's array) belongs elsewhere
    return (
        type(base) is type(g)
        and base.size == g.size
        and flags.c_contiguous
        and base.flags.owndata
        and sys.getrefcount(base) <= _SOLE_REFS[1]
    )


def _refcounts(g) -> tuple[int, int]:
    """What ``owned`` sees of ``g`` and of its base, from a frame like its own."""
    base = g.base
    return sys.getrefcount(g), sys.getrefcount(base)


def _sole_refcounts() -> tuple[int, int]:
    """The counts ``owned`` sees when nothing else holds the array: a local here, a parameter in
    ``accumulate``'s stand-in, as in the engine."""

    def through_accumulate(g):
        return _refcounts(g)

    view = as_array(0.0).copy().reshape(1)  # held by this local only, and its base by the view only
    return through_accumulate(view)


_SOLE_REFS = _sole_refcounts()
