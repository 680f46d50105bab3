"""Saved tensors: what a node keeps for its backward, and the version check that catches in-place changes.

A node's ``_saved`` holds one entry per saved value, ``(tensor, array, version, counter)``: the tensor (or a
``SavedOutput`` marker for the node's own output, which it must not hold, since that would be a reference cycle),
its array, the version it had when saved, and its live version counter. Unpacking compares the two versions: a
tensor changed in place since would give a wrong gradient, so backward refuses it, as PyTorch does. ``None`` marks
a value no wanted gradient needs (not kept, not checked).
"""

from __future__ import annotations

from . import grad_mode
from .tensor import Tensor

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


def unpack(node) -> tuple:
    """``node.saved_tensors``: the saved values, checked against in-place changes; arrays in the plain pass,
    Tensors with create_graph."""
    saved = node._saved
    if saved is None:
        if node._freed:
            raise RuntimeError(FREED_MESSAGE)
        return ()
    if not grad_mode.state.create_graph:
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
