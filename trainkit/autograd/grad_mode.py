"""Grad mode: whether ops record a graph. Thread-local, as in PyTorch.

The guards are classes rather than ``@contextmanager`` generators: entering one costs a fraction as much, and they
sit on hot paths (every evaluation step, every optimizer update).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading


class _State(threading.local):
    enabled = True  # ops record a graph
    anomaly = False  # the engine checks every backward step for NaN (detect_anomaly)
    create_graph = False  # a backward pass in progress records a graph of itself (its gradients are Tensors)


state = _State()
# The idents of threads whose grad mode is off, kept beside the thread-local flag by every write of it: while the
# set is empty, grad mode is on everywhere, and an op tells so without reading the thread-local state (which costs
# as much as a few dozen bytecodes). set.add and discard are atomic, so threads may share it.
disabled_threads: set = set()


def _set_enabled(mode: bool) -> None:
    state.enabled = mode
    if mode:
        disabled_threads.discard(threading.get_ident())
    else:
        disabled_threads.add(threading.get_ident())


# One entry per backward pass with create_graph running, in any thread. Only such a pass sets state.create_graph,
# so while this is empty it is False everywhere, and the saved-tensor reads of every node can tell so without
# reading the thread-local state (a few times dearer). list.append and pop are atomic, so threads may share it.
creating_passes: list = []


def enter_backward(create_graph: bool) -> tuple:
    """Set the modes of a backward pass; returns what ``exit_backward`` restores."""
    prev = state.enabled, state.create_graph
    _set_enabled(create_graph)
    state.create_graph = create_graph
    if create_graph:
        creating_passes.append(None)
    return prev


def exit_backward(prev: tuple, create_graph: bool) -> None:
    _set_enabled(prev[0])
    state.create_graph = prev[1]
    if create_graph:
        creating_passes.pop()


def is_grad_enabled() -> bool:
    """True when ops record a graph for backward.

    >>> is_grad_enabled()
    True
    """
    return not disabled_threads or state.enabled


class _GradModeGuard:
    """Sets grad mode on entry and restores the previous mode on exit; also usable as a decorator."""

    mode = True

    def __init__(self):
        self.prev = True

    def __enter__(self):
        self.prev = state.enabled
        _set_enabled(self.mode)

    def __exit__(self, *exc):
        _set_enabled(self.prev)

    def clone(self):
        """A fresh guard with the same mode (each call of a decorated function enters its own)."""
        return self.__class__()

    def __call__(self, fn):
        return decorate(self, fn)


def decorate(guard, fn):
    """``fn`` run inside ``guard.clone()``; a generator function runs each resumption inside one, as in PyTorch,
    so that the mode holds while its body runs and not while the caller runs between two ``yield``."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with guard.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with guard.clone():
                            gen.close()
                        raise
                    except BaseException:
                        with guard.clone():
                            response = gen.throw(*sys.exc_info())
                    else:
                        with guard.clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with guard.clone():
            return fn(*args, **kwargs)

    return wrapper


class _BareDecoratorGuard(_GradModeGuard):
    """A guard that also works as a decorator without parentheses: ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func=None):
        super().__init__()


class no_grad(_BareDecoratorGuard):
    """Run code without recording a graph: results do not require grad.

    >>> import trainkit
    >>> x = trainkit.ones(2, requires_grad=True)
    >>> with trainkit.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    mode = False


class enable_grad(_BareDecoratorGuard):
    """Record a graph again inside a ``no_grad`` block.

    >>> import trainkit
    >>> with trainkit.no_grad(), trainkit.enable_grad():
    ...     trainkit.is_grad_enabled()
    True
    """

    mode = True


class inference_mode(_GradModeGuard):
    """Run code that will never be differentiated (here: the same as ``no_grad``, or nothing with mode=False).

    >>> import trainkit
    >>> with trainkit.inference_mode():
    ...     trainkit.is_grad_enabled()
    False
    """

    def __new__(cls, mode=True):
        if callable(mode):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        super().__init__()
        self.mode = not mode

    def clone(self):
        return inference_mode(not self.mode)


def check_finite(node, grads: tuple) -> None:
    """Under ``detect_anomaly``, after each backward step: name the node whose backward produced NaN."""
    for i, g in enumerate(grads):
        data = getattr(g, "_data", g)  # a Tensor with create_graph, else an array
        if g is not None and bool((data != data).any()):  # only NaN differs from itself
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


class set_grad_enabled(_GradModeGuard):
    """Set grad mode to ``mode`` at once (as a call) or for a block (as a context manager).

    >>> import trainkit
    >>> with trainkit.set_grad_enabled(False):
    ...     trainkit.is_grad_enabled()
    False
    """

    def __init__(self, mode: bool):
        self.prev = state.enabled
        self.mode = bool(mode)
        _set_enabled(self.mode)

    def __enter__(self):
        _set_enabled(self.mode)

    def clone(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        _set_enabled(self.prev)  # used as a decorator: the call above must not leak
        return decorate(self, fn)
