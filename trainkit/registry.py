"""Registries: the names a config or a call may use for optimizers, schedulers, losses, callbacks and data kinds.

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

``DATA_KINDS`` maps a config's ``data.kind`` to a function making the dataset, and ``resolve_class`` turns a
``class_path`` (``package.module.Class`` or ``file.py:Class``) into the class it names. Both raise plain exceptions;
``trainkit.cli.config`` and ``trainkit.cli.run`` add the config file and the key to the message.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import callbacks as _callbacks
from . import data as _data
from . import optim as _optim
from .layers import loss as _loss
from .layers.module import Module
from .optim import lr_scheduler as _lr_scheduler


class UnknownNameError(LookupError):
    """A name that no registry entry has; the message suggests the nearest one and lists them."""

    def __str__(self) -> str:  # LookupError's str() would quote the message
        return str(self.args[0])


class Registry:
    """Names to classes (or functions) of one kind (``kind`` is used in messages: 'optimizer', 'loss', ...)."""

    def __init__(self, kind: str, entries: dict[str, Callable] | None = None):
        self.kind = kind
        self._entries: dict[str, Callable] = dict(entries or {})

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
LOSSES = Registry(
    "loss",
    _with_aliases(
        _public_subclasses(_loss, _loss._Loss, exclude=(_loss._WeightedLoss,)),
        {
            "mse": "MSELoss",
            "l1": "L1Loss",
            "mae": "L1Loss",
            "huber": "HuberLoss",
            "smooth_l1": "SmoothL1Loss",
            "cross_entropy": "CrossEntropyLoss",
            "nll": "NLLLoss",
            "kl_div": "KLDivLoss",
            "bce": "BCELoss",
            "bce_with_logits": "BCEWithLogitsLoss",
        },
    ),
)
CALLBACKS = Registry(
    "callback", _public_subclasses(_callbacks, _callbacks.Callback, exclude=(_callbacks.CallbackList,))
)


def build(registry: Registry, name: str, **kwargs) -> object:
    """``registry.get(name)(**kwargs)``: the one way the Trainer and the config make a named object.

    >>> build(LOSSES, "huber", delta=2.0)
    HuberLoss()
    """
    cls: Callable = registry.get(name)
    return cls(**kwargs)


class ClassPathError(ImportError):
    """A ``class_path`` that cannot be loaded (no such file, module or name, or its module fails to import); an
    ``ImportError``, so that it reads as ``from m import X`` would fail, yet apart from one the class itself raises."""


def resolve_class(spec: str, base_dir: str | Path = ".", kind: str | None = None) -> Any:
    """``package.module.Class`` or ``path/to/file.py:Class`` (relative to ``base_dir``) -> the class it names.

    Anything that cannot be loaded raises ``ClassPathError``, saying what to write instead where it can tell: the
    names of that file or module nearest to a misspelt one (in any case), the ``file.py:Class`` form for a module
    that is not importable but is a file in ``base_dir``, the Python files of ``base_dir`` nearest to a missing
    one. A file is loaded as module ``_trainkit_user_<its stem>``. With ``kind`` (a key of ``CLASS_PATH_KINDS``:
    ``model``, ``data``, ``optimizer``, ``callbacks``), what it names must be of that kind (``check_kind``).

    >>> resolve_class("trainkit.nn.Linear").__name__
    'Linear'
    >>> resolve_class("trainkit.nn.linaer")
    Traceback (most recent call last):
    ...
    trainkit.registry.ClassPathError: module 'trainkit.nn' has no attribute 'linaer'; did you mean 'trainkit.nn.Linear'?
    """
    if ":" in spec:
        module_file, _, name = spec.partition(":")
        module_path = (Path(base_dir) / module_file).resolve()
        if not module_path.is_file():
            raise ClassPathError(
                f"no file {module_path}{_near_file(module_file, module_path, name)}", path=str(module_path)
            )
        module_name = f"_trainkit_user_{module_path.stem}"
        module_spec = importlib.util.spec_from_file_location(module_name, module_path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except ImportError as err:  # the file imports what is not there
            raise ClassPathError(str(err), name=err.name) from err
        where, prefix = f"{module_file} has no", f"{module_file}:"
    else:
        module_name, _, name = spec.rpartition(".")
        if not module_name:
            raise ClassPathError(f"{spec!r} names no module: write package.module.Class or file.py:Class")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            missing = err.name is not None and (module_name == err.name or module_name.startswith(err.name + "."))
            reason = f"{err}{_module_hint(module_name, name, Path(base_dir))}" if missing else str(err)
            raise ClassPathError(reason, name=err.name, path=err.path) from err
        where, prefix = f"module {module_name!r} has no attribute", f"{module_name}."
    try:
        found = getattr(module, name)
    except AttributeError:
        raise ClassPathError(f"{where} {name!r}{_near_names(module, name, prefix)}", name=module_name) from None
    if kind is not None:
        check_kind(found, spec, kind)
    return found


def _near_names(module: Any, name: str, prefix: str) -> str:
    """'; did you mean ...?' with the callables of ``module`` nearest to ``name`` in any case, or the classes it
    defines when none is near."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    callables = [n for n in names if callable(getattr(module, n, None))]
    by_lower = {}
    for n in callables:
        by_lower.setdefault(n.lower(), n)
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    if near:
        return "; did you mean " + " or ".join(f"'{prefix}{by_lower[n]}'" for n in near) + "?"
    own = [
        n
        for n in callables
        if isinstance(getattr(module, n), type) and getattr(module, n).__module__ == module.__name__
    ]
    return f" (it defines {', '.join(own)})" if own else ""


def _near_file(module_file: str, module_path: Path, name: str) -> str:
    """'; did you mean ...?' with the Python file of that folder nearest to a missing one (``mymodel`` for
    ``mymodel.py`` included)."""
    folder = module_path.parent
    if not folder.is_dir():
        return ""
    files = sorted(p.name for p in folder.glob("*.py"))
    near = difflib.get_close_matches(module_path.name, files, n=1, cutoff=0.6)
    if not near:
        return ""
    written = str(Path(module_file).parent / near[0]) if Path(module_file).parent != Path(".") else near[0]
    return f"; did you mean '{written}:{name}'?"


def _module_hint(module_name: str, name: str, base_dir: Path) -> str:
    """What to write for a module Python cannot import: the ``file.py:Class`` form when the module is a file in
    ``base_dir`` (the config's folder, which is not on the Python path), else where it was looked for."""
    relative = module_name.replace(".", "/") + ".py"
    if (base_dir / relative).is_file():
        return f"; {relative} beside the config is a file: write '{relative}:{name}' (the file.py:Class form)"
    searched = ", ".join(dict.fromkeys(p or str(Path.cwd()) for p in sys.path))
    return (
        f" in the Python path ({searched}), nor is {relative} a file beside the config in {base_dir.resolve()}: "
        "an installed module is named package.module.Class, a file of your own file.py:Class"
    )


# What a class_path may name, by the key it is given for: a config names code, but only code of the kind its key is
# for, so that `model.class_path: os.system` is refused before anything is called.
CLASS_PATH_KINDS: dict[str, type] = {
    "model": Module,
    "data": _data.Dataset,
    "optimizer": _optim.Optimizer,
    "callbacks": _callbacks.Callback,
}
_DATASET_FACTORIES = {_data.digits, _data.regression_curve}  # trainkit's own functions that return a Dataset


def dataset_factory(fn: Callable) -> Callable:
    """Mark ``fn``, a function returning a Dataset, as one a config may name as ``data.class_path``.

    >>> @dataset_factory
    ... def squares(n: int = 4):
    ...     x = _data.regression_curve(n).tensors[0]
    ...     return _data.TensorDataset(x, x * x)
    >>> is_dataset_factory(squares), is_dataset_factory(print)
    (True, False)
    """
    fn.trainkit_dataset_factory = True
    return fn


def is_dataset_factory(obj: Any) -> bool:
    return obj in _DATASET_FACTORIES or getattr(obj, "trainkit_dataset_factory", False) is True


def check_kind(obj: Any, spec: str, kind: str) -> None:
    """Refuse (``ClassPathError``) what is not a subclass of the kind's base, or, for data, a marked factory.

    >>> check_kind(print, "builtins.print", "model")
    Traceback (most recent call last):
    ...
    trainkit.registry.ClassPathError: 'builtins.print' names a builtin_function_or_method, not a Module subclass; \
a config names only code of the kind its key is for
    """
    base = CLASS_PATH_KINDS[kind]
    if (isinstance(obj, type) and issubclass(obj, base)) or (kind == "data" and is_dataset_factory(obj)):
        return
    what = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
    also = " or a function marked with @trainkit.registry.dataset_factory" if kind == "data" else ""
    raise ClassPathError(
        f"{spec!r} names {what}, not a {base.__name__} subclass{also}; a config names only code of "
        "the kind its key is for"
    )


def by_name(settings: dict, func: Callable, skip: Iterable[str] = ()) -> dict:
    """The ``settings`` that ``func`` takes as keyword arguments, null ones left out (so its own defaults apply).

    >>> by_name({"n": 10, "noise": None, "path": "x"}, _data.regression_curve)
    {'n': 10}
    """
    params = inspect.signature(func).parameters
    return {k: v for k, v in settings.items() if k in params and k not in skip and v is not None}


# ------------------------------------------------------------------------------------------------------ data kinds
# A data kind is a function (the data section, the config's folder) -> Dataset. It takes the data keys its loader
# takes by name and raises what the loader raises: KeyError or TypeError for keys that do not fit it,
# ClassPathError for a class_path that cannot be loaded.
def _regression_curve(spec: dict, base_dir: Path) -> _data.Dataset:
    return _data.regression_curve(**by_name(spec, _data.regression_curve))


def _file_loader(loader: Callable) -> Callable[[dict, Path], _data.Dataset]:
    def load(spec: dict, base_dir: Path) -> _data.Dataset:
        return loader(Path(base_dir) / spec["path"], **by_name(spec, loader, skip=("path",)))

    load.__name__ = loader.__name__
    return load


def _text(spec: dict, base_dir: Path) -> _data.Dataset:
    # the vocabulary file, like the text, is relative to the config's folder; max_mb null means no limit
    vocabulary = spec.get("vocabulary")
    settings = by_name(spec, _data.load_text, skip=("path", "vocabulary", "max_mb"))
    if "max_mb" in spec:
        settings["max_mb"] = spec["max_mb"]
    return _data.load_text(
        Path(base_dir) / spec["path"],
        **settings,
        vocabulary=None if vocabulary is None else Path(base_dir) / vocabulary,
    )


def _class_path(spec: dict, base_dir: Path) -> _data.Dataset:
    return resolve_class(spec["class_path"], base_dir, "data")(**spec["init_args"])


# data.kind -> its dataset function; register your own to use it from configs
DATA_KINDS = Registry(
    "data kind",
    {
        "regression_curve": _regression_curve,
        "npz": _file_loader(_data.load_npz),
        "csv": _file_loader(_data.load_csv),
        "text": _text,
        "class_path": _class_path,
    },
)

__all__ = [
    "CALLBACKS",
    "CLASS_PATH_KINDS",
    "DATA_KINDS",
    "LOSSES",
    "OPTIMIZERS",
    "SCHEDULERS",
    "ClassPathError",
    "Registry",
    "UnknownNameError",
    "build",
    "by_name",
    "check_kind",
    "dataset_factory",
    "is_dataset_factory",
    "resolve_class",
]
