"""Hooks: where they are kept, the handles that remove them, and how the engine runs them.

A leaf keeps its tensor hooks in ``tensor._hooks`` (shared with its ``AccumulateGrad``); a non-leaf's live on its
``grad_fn``, keyed by output number, beside the ``retain_grad`` marks and the node's own pre- and post-hooks
(``NodeHooks``). Hooks always see Tensors. In the plain backward pass gradients are arrays, so the engine hands the
runners a ``wrap`` (array -> Tensor) and an ``unwrap`` (Tensor -> array); with ``create_graph`` gradients are Tensors
already and both are the identity.
"""

from __future__ import annotations

import itertools
import weakref


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook (safe to call twice, or from the hook).

    >>> hooks = HookDict()
    >>> handle = add_hook(hooks, print)
    >>> len(hooks), handle.remove(), len(hooks)
    (1, None, 0)
    """

    __slots__ = ("_hooks_ref", "id")
    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self._hooks_ref = weakref.ref(hooks)
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        hooks = self._hooks_ref()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class HookDict(dict):
    """Hooks by handle id, in registration order (a dict subclass, so that handles can refer to it weakly)."""


def add_hook(hooks: HookDict, fn) -> RemovableHandle:
    """Register ``fn`` in ``hooks``; the handle removes it."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class NodeHooks:
    """The hooks one node carries. ``tensor`` and ``retain`` are keyed by output number."""

    __slots__ = ("tensor", "retain", "pre", "post")

    def __init__(self):
        self.tensor: dict[int, HookDict] = {}
        self.retain: dict[int, weakref.ref] = {}
        self.pre = HookDict()
        self.post = HookDict()


class NodeHookMethods:
    """The hook methods of a graph node, as PyTorch's ``Node`` has them (``engine.Node`` takes them over)."""

    _hooks: NodeHooks | None = None

    def _hooks_or_new(self) -> NodeHooks:
        if self._hooks is None:
            self._hooks = NodeHooks()
        return self._hooks

    def register_hook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_inputs, grad_outputs)`` after this node runs; a returned tuple replaces grad_inputs."""
        return add_hook(self._hooks_or_new().post, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_outputs)`` before this node runs; a returned tuple replaces grad_outputs."""
        return add_hook(self._hooks_or_new().pre, fn)


def _call_tensor_hooks(hooks: dict, g, wrap, unwrap):
    """Run tensor hooks in registration order, each on the previous one's result."""
    for fn in tuple(hooks.values()):
        t = wrap(g)
        result = fn(t)
        if result is None:
            continue
        if not isinstance(result, type(t)):
            raise TypeError(f"a tensor hook must return None or a Tensor, got {type(result).__name__}")
        if tuple(result.shape) != tuple(t.shape):
            raise RuntimeError(
                f"hook '{getattr(fn, '__name__', fn)}' has changed the size of value: "
                f"expected {tuple(t.shape)}, got {tuple(result.shape)}"
            )
        if result.dtype != t.dtype:
            raise RuntimeError(
                f"hook '{getattr(fn, '__name__', fn)}' has changed the type of value "
                f"(was {t.dtype}, got {result.dtype}); return a gradient of the tensor's own dtype"
            )
        g = unwrap(result)
    return g


def _retain(ref: weakref.ref, g, wrap, unwrap) -> None:
    """``retain_grad``: the gradient passing through a non-leaf is added into its ``.grad``."""
    tensor = ref()
    if tensor is not None:
        tensor._grad = wrap(g) if tensor._grad is None else wrap(unwrap(tensor._grad) + g)


def run_pre_hooks(hooks: NodeHooks, grads: list, n: int, wrap, unwrap) -> list:
    """Before a node runs: its outputs' tensor hooks, then ``retain_grad``, then the node's pre-hooks."""
    for nr, tensor_hooks in hooks.tensor.items():
        if tensor_hooks and grads[nr] is not None:
            grads[nr] = _call_tensor_hooks(tensor_hooks, grads[nr], wrap, unwrap)
    for nr, ref in hooks.retain.items():
        if grads[nr] is not None:
            _retain(ref, grads[nr], wrap, unwrap)
    for fn in tuple(hooks.pre.values()):
        result = fn(tuple(None if g is None else wrap(g) for g in grads[:n]))
        if result is not None:
            grads[:n] = [None if r is None else unwrap(r) for r in result]
    return grads


def run_post_hooks(hooks: NodeHooks, grad_inputs: tuple, grad_outputs: list, wrap, unwrap) -> tuple:
    """After a node ran: ``fn(grad_inputs, grad_outputs)``; a returned tuple replaces grad_inputs."""
    for fn in tuple(hooks.post.values()):
        result = fn(
            tuple(None if g is None else wrap(g) for g in grad_inputs),
            tuple(None if g is None else wrap(g) for g in grad_outputs),
        )
        if result is not None:
            grad_inputs = tuple(None if r is None else unwrap(r) for r in result)
    return grad_inputs
