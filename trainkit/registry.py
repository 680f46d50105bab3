"""Registries: the names a config or a call may use for optimizers, schedulers, losses and callbacks.

Each registry maps a name to a class. The built-in entries are the public classes of their package, found by base
class, so a new optimizer, scheduler, loss or callback is registered by exporting it; short loss names (``mse``,
``cross_entropy``) are aliases. Your own classes join with ``register``:

>>> from trainkit import nn
>>> from trainkit.registry import LOSSES
>>> LOSSES.get("mse")
<class 'trainkit.layers.loss.MSELoss'>
>>> @LOSSES.register("my_loss")
... class MyLoss(nn.MSELoss):
...     pass
>>> LOSSES.get("my_loss") is MyLoss
True
>>> _ = LOSSES.unregister("my_loss")
>>> LOSSES.get("mes")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
trainkit.registry.UnknownNameError: unknown loss 'mes'; did you mean 'mse'? (known: BCELoss, ...)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

from . import callbacks as _callbacks
from . import optim as _optim
from .layers import loss as _loss
from .optim import lr_scheduler as _lr_scheduler


class UnknownNameError(LookupError):
    """A name that no registry entry has; the message suggests the nearest one and lists them."""

    def __str__(self) -> str:  # LookupError's str() would quote the message
        return str(self.args[0])


class Registry:
    """Names to classes of one kind (``kind`` is used in messages: 'optimizer', 'loss', ...)."""

    def __init__(self, kind: str, entries: dict[str, type] | None = None):
        self.kind = kind
        self._entries: dict[str, type] = dict(entries or {})

    def register(self, name: str | None = None, cls: type | None = None):
        """Add ``cls`` under ``name`` (its class name when omitted); usable as a decorator."""

        def add(klass: type) -> type:
            key = name or klass.__name__
            if key in self._entries and self._entries[key] is not klass:
                raise ValueError(f"a {self.kind} named {key!r} is registered already ({self._entries[key]!r})")
            self._entries[key] = klass
            return klass

        return add(cls) if cls is not None else add

    def unregister(self, name: str) -> type:
        """Remove and return the entry ``name``."""
        return self._entries.pop(name)

    def get(self, name: str) -> type:
        """The class registered as ``name``; an ``UnknownNameError`` naming the nearest entry otherwise."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.unknown(name)) from None

    def unknown(self, name) -> str:
        """The message for a name that is not here."""
        names = self.names()
        near = difflib.get_close_matches(str(name), names, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(names)})"

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def _public_subclasses(module, base: type, exclude: Iterable[type] = ()) -> dict[str, type]:
    """The classes a module exports (its ``__all__``, else its public names) that derive from ``base``."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    found = {}
    for name in names:
        obj = getattr(module, name, None)
        if isinstance(obj, type) and issubclass(obj, base) and obj is not base and obj not in exclude:
            found[name] = obj
    return found


def _with_aliases(entries: dict[str, type], aliases: dict[str, str]) -> dict[str, type]:
    return {**entries, **{alias: entries[target] for alias, target in aliases.items()}}


OPTIMIZERS = Registry("optimizer", _public_subclasses(_optim, _optim.Optimizer))
SCHEDULERS = Registry("scheduler", _public_subclasses(_lr_scheduler, _lr_scheduler.LRScheduler))
# Short names, as in Keras' loss="mse"; class names work too.
LOSSES = Registry("loss", _with_aliases(_public_subclasses(_loss, _loss._Loss, exclude=(_loss._WeightedLoss,)), {
    "mse": "MSELoss", "l1": "L1Loss", "mae": "L1Loss", "huber": "HuberLoss", "smooth_l1": "SmoothL1Loss",
    "cross_entropy": "CrossEntropyLoss", "nll": "NLLLoss", "bce": "BCELoss", "bce_with_logits": "BCEWithLogitsLoss",
}))
CALLBACKS = Registry("callback", _public_subclasses(
    _callbacks, _callbacks.Callback, exclude=(_callbacks.CallbackList,)))

__all__ = ["CALLBACKS", "LOSSES", "OPTIMIZERS", "SCHEDULERS", "Registry", "UnknownNameError"]


def build(registry: Registry, name: str, **kwargs) -> object:
    """``registry.get(name)(**kwargs)``: the one way the Trainer and the config make a named object."""
    cls: Callable = registry.get(name)
    return cls(**kwargs)
