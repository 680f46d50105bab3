"""How PyTorch records an in-place change through a view, and what a view's ``grad_fn`` becomes afterwards.

A view (of a view...) is the tensor that owns the storage (its root) seen through a chain of view ops. An in-place
op on the view gives the root one ``CopySlices`` node, however deep the chain: it holds the op's own node and
writes that node's gradient for the view back into the root's gradient. After any in-place change of the root or
of one of its views (the shared version counter moves), a view's ``grad_fn`` is made again on demand as an
``AsStridedBackward0`` of the root's current node, as PyTorch's is: gradients through an old view of a changed
base then follow the change.
"""

from __future__ import annotations

from .. import grad_mode, tensor
from ..backend import sum_to, xp_of
from ..engine import next_seq
from ..function import Op
from ..saved import SAME_AS_OUTPUT
from ..tensor import Tensor

__all__ = ["AsStrided", "CopySlices", "copy_slices", "view_chain"]


def view_chain(view: Tensor) -> tuple[Tensor, list | None]:
    """The root of ``view`` and the view ops from the root to it, ``[(op class, params), ...]``; None for the
    chain when a step is an output of a multi-view op (unbind, split), which has no single geometry to replay."""
    chain: list | None = []
    t = view
    while t._view is not None:
        base, cls, params = t._view
        if cls is None:
            chain = None
        elif chain is not None:
            chain.append((cls, params))
        t = base
    if chain is not None:
        chain.reverse()
    return t, chain


def replay(array, chain) -> tuple:
    """``array`` seen through ``chain``, and the steps that undo it for a gradient: ``(node, input shape)``."""
    steps = []
    for cls, params in chain:
        node = object.__new__(cls)
        shape = array.shape
        array = node.forward(array, **params)
        steps.append((node, shape))
    return array, steps


def region(array, chain):
    """The region of ``array`` the chain selects, writable (NumPy marks an expanded view read-only; an in-place
    op writes through one into the memory it shares)."""
    out = replay(array, chain)[0]
    if not getattr(out.flags, "writeable", True):
        out = out.view()
        out.flags.writeable = True
    return out


def unreplay(g, steps):
    """The gradient of the root from that of the view: each view op's backward, last step first (an expanded
    step's gradient summed back to its input's shape, as the engine would)."""
    for node, shape in reversed(steps):
        g = node.backward(g)
        if tuple(g.shape) != tuple(shape):
            g = g.sum_to_size(*shape) if isinstance(g, Tensor) else sum_to(g, shape)
    return g


class AsStrided(Op, name="AsStridedBackward0"):
    """out = the region of the root that a chain of view ops selects.   droot = zeros with g in that region."""

    def forward(self, root, chain):
        out, self.steps = replay(root, chain)
        return out

    def backward(self, g):
        return unreplay(g, self.steps)


class CopySlices(Op, name="CopySlices"):
    """The root after an in-place op ``fn`` on one of its views: out = root with the view's region replaced by
    ``fn(view, *others)``.   droot = g with the region replaced by fn's gradient for the view (from that region
    of g), dothers = fn's gradients for its other inputs. With no ``fn`` (an op made of several nodes), the new
    value is the second input: dvalue = the region of g."""

    def backward(self, g):
        xp = xp_of(g._data if isinstance(g, Tensor) else g)
        root_shape = tuple(g.shape)
        keep = xp.ones(root_shape, dtype=(g._data if isinstance(g, Tensor) else g).dtype)
        region(keep, self.chain)[...] = 0
        if isinstance(g, Tensor):
            part = AsStrided.apply(g, chain=self.chain)
        else:
            part = replay(g, self.chain)[0].astype(self.fn_dtype)  # a copy, in the dtype fn computed in
        if self.fn is None:
            grads = (None, part)
        else:
            out = self.fn.backward(part)
            grads = out if isinstance(out, tuple) else (out,)
        dview = grads[0]
        groot = g * keep
        if dview is not None:
            if tuple(dview.shape) != self.view_shape:
                dview = (
                    dview.sum_to_size(*self.view_shape) if isinstance(dview, Tensor) else sum_to(dview, self.view_shape)
                )
            groot = groot + unreplay(dview, replay(xp.empty(root_shape, dtype=keep.dtype), self.chain)[1])
        return (groot, *grads[1:])


def _edge(t: Tensor) -> tuple:
    return (t._grad_fn, t._output_nr) if t._requires_grad else (None, 0)


def copy_slices(root: Tensor, chain: list, view: Tensor, source: Tensor, new_value: Tensor) -> CopySlices:
    """The node the root takes after ``new_value`` (computed from ``source``, the view's old value) is written
    into ``view``: ``new_value``'s own node inside, when that node reads ``source`` as its first input."""
    node = object.__new__(CopySlices)
    node.chain, node.view_shape = chain, tuple(view._data.shape)
    fn = new_value._grad_fn
    out_meta = (new_value._data.shape, new_value._data.dtype)
    if fn.next_functions and fn.next_functions[0] == _edge(source) and fn.num_outputs == 1:
        node.fn, node.fn_dtype = fn, new_value._data.dtype
        others = fn.next_functions[1:]
        metas = tuple(out_meta if m is SAME_AS_OUTPUT else m for m in fn._input_meta[1:])
    else:
        node.fn, node.fn_dtype = None, new_value._data.dtype
        others = ((fn, new_value._output_nr),)
        metas = (out_meta,)
    root_edge = _edge(root)
    node.next_functions = (root_edge, *others)
    node._input_meta = (SAME_AS_OUTPUT if root_edge[0] is not None else None, *metas)
    node._seq = next_seq()
    return node


def refresh(view: Tensor) -> None:
    """Make ``view``'s grad_fn again after its root (or another view of it) changed in place: an
    ``AsStridedBackward0`` of the root's current node, as PyTorch does."""
    view._view_version = view._version_counter[0]
    if view._no_grad_view:
        return
    root, chain = view_chain(view)
    if chain is None or not root._requires_grad:
        return
    with grad_mode.enable_grad():
        fresh = AsStrided.apply(root, chain=chain)
    view._grad_fn, view._output_nr, view._requires_grad = fresh._grad_fn, 0, True


tensor.view_refresher = refresh
