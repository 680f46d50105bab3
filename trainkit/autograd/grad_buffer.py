"""Where the gradients reaching a node are summed, and how a leaf's gradient lands in ``.grad``.

A node may receive several gradients for the same output (a tensor used twice). The engine sums them in a
``GradBuffer`` before the node runs. The first one is kept as it arrives, since the node that made it may have
handed the same array to others too; the sum of two is a new array the engine made itself, so later gradients are
added into it in place. A leaf then takes its gradient over as ``.grad`` without a copy when nothing else holds the
array (``ownership.owned``), as PyTorch's engine "steals" a gradient whose only user it is.

>>> import numpy as np
>>> buffer = GradBuffer(1)
>>> buffer.add(0, np.ones(2), create=False)
>>> buffer.add(0, np.ones(2), create=False)
>>> buffer.grads, buffer.owned
([array([2., 2.])], frozenset({0}))
"""

from __future__ import annotations

from .backend import dtype_of, sum_to
from .ownership import owned
from .tensor import Tensor

NOTHING_OWNED: frozenset = frozenset()  # shared by the buffers that have summed nothing yet, which is most of them


class GradBuffer:
    """What one node waits for in a backward pass: ``waiting``, the number of edges into it that have not delivered
    their gradient yet, and ``grads[nr]``, the sum of the gradients delivered for its output ``nr`` (``None`` while
    none came). ``owned`` holds the outputs whose sum is an array the engine made, which it may add into.

    >>> import numpy as np
    >>> buffer = GradBuffer(2)
    >>> buffer.add(1, np.zeros(3), create=False)
    >>> buffer.grads[0] is None, buffer.owned
    (True, frozenset())
    """

    __slots__ = ("waiting", "grads", "owned")

    def __init__(self, num_outputs: int):
        self.waiting = 0
        # a list display for the usual single output: repeating a list costs twice as much
        self.grads: list = [None] if num_outputs == 1 else [None] * num_outputs
        self.owned: frozenset = NOTHING_OWNED

    def add(self, nr: int, g, create: bool) -> None:
        """Add the gradient ``g`` (an array, or a Tensor with ``create``) to the sum for output ``nr``."""
        old = self.grads[nr]
        if old is None:
            self.grads[nr] = g  # not ours: whoever made it may have passed it to other nodes too
        elif nr in self.owned and old.size != 1:
            # ours to add into; but a new array is cheaper for one element, where NumPy's in-place add costs
            # twice as much
            old += g
        else:
            self.grads[nr] = old + g
            # a Tensor sum is part of the graph being built: adding into it in place would change that graph
            if not create and nr not in self.owned:
                self.owned = self.owned | {nr}


def fit_to_input(g, shape, dtype, create: bool):
    """``g`` summed back over broadcast dimensions to ``shape`` and cast to ``dtype``: the one place where
    broadcasting and casting are undone, so that no op has to.

    >>> import numpy as np
    >>> fit_to_input(np.ones((2, 3)), (3,), np.float32, create=False)
    array([2., 2., 2.], dtype=float32)
    """
    if g.shape != shape:
        g = g.sum_to_size(shape) if create else sum_to(g, shape)
    if g.dtype != dtype:
        g = g.to(dtype_of(dtype)) if create else g.astype(dtype)
    return g


def accumulate(leaf: Tensor, g, create: bool) -> None:
    """Add ``g`` into ``leaf.grad``; the first time, take the array over when nothing else holds it.

    >>> import numpy as np
    >>> leaf = Tensor._make(np.zeros(2, np.float32))
    >>> accumulate(leaf, np.ones(2, np.float32), create=False); leaf.grad
    tensor([1., 1.])
    """
    old = leaf._grad
    if create:
        leaf._grad = g if old is None else old + g
    elif old is None:
        # owned() counts references: only the caller's local, this parameter and owned's own hold g when it is ours
        leaf._grad = Tensor._make(g if owned(g) else g.copy())
    else:
        old._data += g
        old._version_counter[0] += 1
