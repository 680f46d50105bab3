"""Anomaly mode: ``detect_anomaly`` checks every backward step for NaN and remembers where tensors change in place.

The in-place error of backward ("one of the variables needed for gradient computation has been modified by an
inplace operation") can name the node and the versions, but not the line that made the change: by then that call is
long gone. Under anomaly mode each in-place method of ``Tensor`` (``add_``, ``x[i] = v``, ``+=``, ...) is wrapped so
that when it bumps a version it notes the caller's file and line on the version counter itself (an extra element of
the one-element list, so views and ``detach()`` results, which share the counter, share the note, and the note dies
with the storage). The wrapping is installed when the first ``detect_anomaly`` is entered and removed when the last
one exits, so outside anomaly mode in-place methods cost nothing extra.
"""

from __future__ import annotations

import os
import sys
import threading
import types

from . import grad_mode
from .grad_mode import decorate
from .tensor import Tensor

__all__ = ["detect_anomaly", "is_anomaly_enabled"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # trainkit/: frames inside it are skipped
_AUGMENTED = (
    "__setitem__",
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
    "__ifloordiv__",
    "__imod__",
    "__ipow__",
    "__imatmul__",
    "__iand__",
    "__ior__",
    "__ixor__",
    "__ilshift__",
    "__irshift__",
)
_lock = threading.Lock()
_depth = 0  # how many detect_anomaly blocks are open, over all threads
_originals: dict = {}


def _caller() -> tuple[str, int]:
    """The file and line of the innermost frame outside the trainkit package: the user's in-place call."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0
    return frame.f_code.co_filename, frame.f_lineno


def _traced(name: str, method):
    def traced(self, *args, **kwargs):
        counter = self._version_counter
        before = counter[0]
        result = method(self, *args, **kwargs)
        counter = self._version_counter
        if counter[0] != before:
            where, line = _caller()
            del counter[1:]
            counter.append((where, line, name.strip("_") if name.startswith("__") else name, counter[0]))
        return result

    traced.__name__ = getattr(method, "__name__", name)
    traced.__doc__ = getattr(method, "__doc__", None)
    return traced


def _inplace_methods() -> list[str]:
    names = [
        n
        for n, v in vars(Tensor).items()
        if n.endswith("_") and not n.startswith("_") and isinstance(v, types.FunctionType)
    ]  # plain methods only: a wrapper takes self like they do
    return names + [n for n in _AUGMENTED if n in vars(Tensor)]


def _track(on: bool) -> None:
    """Open (``on``) or close one anomaly block; the first wraps Tensor's in-place methods, the last unwraps them."""
    global _depth
    with _lock:
        _depth += 1 if on else -1
        if on and _depth == 1:
            for name in _inplace_methods():
                _originals[name] = vars(Tensor)[name]
                setattr(Tensor, name, _traced(name, _originals[name]))
        elif not on and _depth == 0:
            for name, method in _originals.items():
                setattr(Tensor, name, method)
            _originals.clear()


class detect_anomaly:
    """Debug backward: check every backward step for NaN and name the node that produced it, and make the in-place
    error name the file and line of the in-place call that changed a saved tensor. Run the forward pass inside it
    too (that is where in-place changes happen). Slower: for debugging. Also a decorator.

    >>> import trainkit
    >>> x = trainkit.tensor([0.0, 1.0], requires_grad=True)
    >>> with detect_anomaly():
    ...     try:
    ...         (x / x).sum().backward()
    ...     except RuntimeError as err:
    ...         print(err)
    Function 'DivBackward0' returned nan values in its 1th output.
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = False
        self.prev_enabled = False

    def __enter__(self):
        self.prev, self.prev_enabled = grad_mode.state.anomaly, _enabled.on
        grad_mode.state.anomaly = self.check_nan
        _enabled.on = True
        _track(True)

    def __exit__(self, *exc):
        grad_mode.state.anomaly, _enabled.on = self.prev, self.prev_enabled
        _track(False)

    def clone(self) -> detect_anomaly:
        """A fresh guard with the same setting (each call of a decorated function enters its own)."""
        return detect_anomaly(self.check_nan)

    def __call__(self, fn):
        return decorate(self, fn)


class _Enabled(threading.local):
    on = False


_enabled = _Enabled()


def is_anomaly_enabled() -> bool:
    """True inside ``detect_anomaly`` (in this thread).

    >>> is_anomaly_enabled()
    False
    """
    return _enabled.on
