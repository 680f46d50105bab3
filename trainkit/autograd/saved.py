"""What a node keeps for its backward: saved tensors with the version check that catches in-place changes, and
the shapes and dtypes of its inputs.

A node's ``_saved`` holds one entry per saved value, ``(tensor, array, version, counter)``: the tensor (or a
``SavedOutput`` marker for the node's own output, which it must not hold, since that would be a reference cycle),
its array, the version it had when saved, and its live version counter. Unpacking compares the two versions: a
tensor changed in place since would give a wrong gradient, so backward refuses it, as PyTorch does. ``None`` marks
a value no wanted gradient needs (not kept, not checked).

``node._input_meta`` holds, per input that needs a gradient, its ``(shape, dtype)``, or ``SAME_AS_OUTPUT``: from
them the engine sums a broadcast gradient back to the input's shape and casts it to its dtype.
"""

from __future__ import annotations

from . import grad_mode
from .tensor import Tensor

_modes = grad_mode.state  # read on every unpack: one attribute lookup fewer than through the module

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


class SavedOutput:
    """Stands in a node's saved values for one of its own outputs (which it must not hold: that is a cycle)."""

    __slots__ = ("nr",)

    def __init__(self, nr: int):
        self.nr = nr


OUTPUT0 = SavedOutput(0)


class _SameAsOutput:
    """The ``_input_meta`` entry of an input with the shape and dtype of the node's only output."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SAME_AS_OUTPUT"


# Most inputs of element-wise ops are shaped like the output. Recording that as one shared marker, rather than a
# (shape, dtype) pair per input, spares two tuples per edge that would live as long as the graph (and that the
# garbage collector would visit), and lets the engine pass an output's gradient on to such an input unchecked.
SAME_AS_OUTPUT = _SameAsOutput()
ALL_SAME = [(SAME_AS_OUTPUT,) * n for n in range(8)]  # ALL_SAME[n]: the _input_meta of n such inputs, shared


def unpack(node) -> tuple:
    """``node.saved_tensors``: the saved values, checked against in-place changes; arrays in the plain pass,
    Tensors with create_graph."""
    saved = node._saved
    if saved is None:
        if node._freed:
            raise RuntimeError(FREED_MESSAGE)
        return ()
    if not _modes.create_graph:
        arrays = []  # a plain loop: this runs once per node and pass, and a generator costs twice as much
        for entry in saved:
            if entry is None:
                arrays.append(None)
            elif entry[3][0] != entry[2]:
                raise_modified(node, entry)
            else:
                arrays.append(entry[1])
        return tuple(arrays)
    return tuple(None if entry is None else unpack_tensor(node, entry) for entry in saved)


def unpack_tensor(node, entry) -> Tensor:
    """One saved entry as a Tensor, after the version check."""
    tensor, array, version, counter = entry
    if counter[0] != version:
        raise_modified(node, entry)
    if type(tensor) is SavedOutput:
        # re-attached to this node only now, so that the node never holds its own outputs
        return Tensor._make(array, True, node, tensor.nr, counter)
    return tensor


def raise_modified(node, entry) -> None:
    _, array, version, counter = entry
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{array.dtype} tensor of shape {tuple(array.shape)}], saved by {node.name()}, "
        f"is at version {counter[0]}; expected version {version} instead. Hint: the tensor was "
        "changed in place after this op used it; change a clone() instead, or make the change "
        "out of place."
    )
