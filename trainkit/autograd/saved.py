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
_creating = grad_mode.creating_passes

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
            raise RuntimeError(freed_message(node))
        return ()
    if not (_creating and _modes.create_graph):
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


def freed_message(node) -> str:
    """PyTorch's message for a node whose saved tensors were freed, naming the node."""
    return (
        f"{FREED_MESSAGE} Here {node.name()} already ran in an earlier backward, which freed what it saved: "
        "call the first backward as loss.backward(retain_graph=True), or recompute the forward pass."
    )


def raise_modified(node, entry) -> None:
    """PyTorch's in-place error, naming the node that saved the tensor, the versions, and how to fix it; under
    ``detect_anomaly`` also the line that changed it (the version counter carries it, see ``anomaly``)."""
    tensor, array, version, counter = entry
    role = f"output {tensor.nr} of {node.name()}" if type(tensor) is SavedOutput else f"saved by {node.name()}"
    if len(counter) > 1:
        where, line, method = counter[1][:3]
        found = f" It was changed in place by {method}() at {where}:{line}."
    else:
        found = " To see the line that changed it, run the forward pass under trainkit.autograd.detect_anomaly()."
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{array.dtype} tensor of shape {tuple(array.shape)}], {role}, is at version {counter[0]}; "
        f"expected version {version} instead.{found} Hint: {node.name()} needs the value the tensor had when it "
        "was saved; change a clone() instead (y = x.clone(); y.add_(1)), or make the change out of place "
        "(x = x + 1 rather than x += 1)."
    )
