"""``import torch`` as trainkit: an import hook that makes every ``torch.X.Y`` the module ``trainkit.X.Y``.

``install()`` puts a finder at the front of ``sys.meta_path``. From then on ``import torch`` returns the
``trainkit`` package and ``import torch.nn.modules.rnn`` returns ``trainkit.nn.modules.rnn``: the very same module
objects, registered under both names (``sys.modules["torch.nn"] is sys.modules["trainkit.nn"]``), so ``isinstance``
checks and pickled class paths hold whichever name a program uses. What trainkit lacks fails with the PyTorch name
and a pointer to ``docs/pytorch-surface.md``: a missing module as ``TorchModuleNotFoundError`` (a
``ModuleNotFoundError``), ``from torch.X import name`` as ``TorchImportError`` (an ``ImportError``), a missing
attribute of an aliased module as ``TorchAttributeError`` (an ``AttributeError``), so ``try: import ...`` and
``hasattr`` work as programs expect.

>>> from trainkit import torch_alias
>>> torch_alias.install()  # doctest: +SKIP
>>> import torch.nn  # doctest: +SKIP
>>> torch.nn is sys.modules["trainkit.nn"]  # doctest: +SKIP
True
>>> torch_alias.trainkit_name("torch.nn.modules.rnn")
'trainkit.nn.modules.rnn'
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

SURFACE_DOC = "docs/pytorch-surface.md"
TORCH = "torch"
TRAINKIT = "trainkit"

__all__ = [
    "SURFACE_DOC",
    "TorchAliasFinder",
    "TorchAttributeError",
    "TorchImportError",
    "TorchModuleNotFoundError",
    "install",
    "installed",
    "torch_name",
    "trainkit_name",
    "uninstall",
]


class TorchModuleNotFoundError(ModuleNotFoundError):
    """A ``torch.X`` module that trainkit does not provide (``except ImportError`` catches it).

    >>> str(TorchModuleNotFoundError.of("torch.distributions")).startswith("No module named 'torch.distributions'")
    True
    """

    @classmethod
    def of(cls, name: str) -> TorchModuleNotFoundError:
        """The error for the PyTorch module ``name``."""
        return cls(
            f"No module named '{name}': trainkit does not provide PyTorch's {name} "
            f"(see {SURFACE_DOC} for the parts of PyTorch trainkit provides)",
            name=name,
        )


class TorchAttributeError(AttributeError):
    """A name that an aliased trainkit module lacks, reported under PyTorch's name (``hasattr`` sees False).

    >>> hasattr(TorchAttributeError("x"), "args")
    True
    """


class TorchImportError(ImportError):
    """``from torch.X import name`` where trainkit's ``X`` has no ``name`` (``except ImportError`` catches it).

    >>> issubclass(TorchImportError, ImportError)
    True
    """


class TorchModule(types.ModuleType):
    """The class aliased modules take: a missing attribute names ``torch.X.name`` and the surface document."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):  # protocol probes (__wrapped__, __path__...): plain error
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        module = torch_name(self.__name__)
        raise TorchAttributeError(
            f"module {module!r} has no attribute {name!r}: trainkit does not provide {module}.{name} "
            f"(see {SURFACE_DOC} for the parts of PyTorch trainkit provides)",
            name=name,
            obj=self,
        )


def trainkit_name(name: str) -> str:
    """The trainkit module behind a PyTorch module name.

    >>> trainkit_name("torch.nn.modules.rnn")
    'trainkit.nn.modules.rnn'
    """
    return TRAINKIT + name[len(TORCH) :]


def torch_name(name: str) -> str:
    """The PyTorch name of a trainkit module.

    >>> torch_name("trainkit.utils.data")
    'torch.utils.data'
    """
    return TORCH + name[len(TRAINKIT) :] if is_under(name, TRAINKIT) else name


def is_under(name: str, package: str) -> bool:
    """True when ``name`` is ``package`` or one of its submodules (``torchvision`` is not under ``torch``).

    >>> is_under("torch.nn", "torch"), is_under("torchvision", "torch")
    (True, False)
    """
    return name == package or name.startswith(package + ".")


class AliasLoader(importlib.abc.Loader):
    """Hands the import system the trainkit module already loaded; keeps that module's own ``__spec__``."""

    def __init__(self, module: types.ModuleType):
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        # the import system stamps the alias's spec onto the module: the module keeps its real one
        module.__spec__ = self.spec


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and ``torch.*`` as the trainkit module of the same path.

    >>> TorchAliasFinder().find_spec("torchvision", None) is None
    True
    """

    def find_spec(self, fullname: str, path=None, target=None):
        if not is_under(fullname, TORCH):
            return None
        module = import_trainkit(fullname)
        alias(fullname, module)
        is_package = hasattr(module, "__path__")
        return importlib.machinery.ModuleSpec(fullname, AliasLoader(module), is_package=is_package)


def import_trainkit(fullname: str) -> types.ModuleType:
    """The trainkit module for the PyTorch module ``fullname``; ``TorchModuleNotFoundError`` when there is none."""
    target = trainkit_name(fullname)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        # only when the missing module is the one asked for (or a parent of it): an optional package that a
        # trainkit module needs (scipy, ...) keeps its own error
        if err.name and is_under(target, err.name) and is_under(err.name, TRAINKIT):
            raise TorchModuleNotFoundError.of(fullname) from None
        raise


def alias(fullname: str, module: types.ModuleType) -> None:
    """Registers ``module`` under its PyTorch name too, and gives it the class that names PyTorch's attributes."""
    sys.modules.setdefault(fullname, module)
    if type(module) is types.ModuleType:
        module.__class__ = TorchModule


FINDER = TorchAliasFinder()
PYTHON_IMPORT = builtins.__import__


def torch_import(name: str, globals=None, locals=None, fromlist=(), level: int = 0):  # noqa: A002
    """``__import__`` that names PyTorch's module when ``from torch.X import name`` finds no ``name`` (Python's own
    message would name ``trainkit.X``); every other import is Python's.

    >>> torch_import("os").__name__
    'os'
    """
    module = PYTHON_IMPORT(name, globals, locals, fromlist, level)
    if fromlist and level == 0 and is_under(name, TORCH) and is_under(getattr(module, "__name__", ""), TRAINKIT):
        for attr in fromlist:
            if attr != "*" and not hasattr(module, attr):
                raise TorchImportError(
                    f"cannot import name {attr!r} from {name!r}: trainkit does not provide {name}.{attr} "
                    f"(see {SURFACE_DOC} for the parts of PyTorch trainkit provides)",
                    name=name,
                    path=getattr(module, "__file__", None),
                )
    return module


def install() -> None:
    """Makes ``torch`` and every ``torch.X.Y`` import as trainkit's module of the same path (idempotent).

    The trainkit modules loaded already are registered under their PyTorch names at once, the others when first
    imported under either name and asked for under PyTorch's.

    >>> install(); installed()  # doctest: +SKIP
    True
    """
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)
    builtins.__import__ = torch_import
    for name, module in list(sys.modules.items()):
        if is_under(name, TRAINKIT) and isinstance(module, types.ModuleType):
            alias(torch_name(name), module)


def installed() -> bool:
    """True while ``import torch`` gives trainkit.

    >>> installed()
    False
    """
    return FINDER in sys.meta_path


def uninstall() -> None:
    """Removes the finder and the ``torch.*`` names it registered; the modules keep working as trainkit's.

    >>> uninstall(); installed()  # doctest: +SKIP
    False
    """
    while FINDER in sys.meta_path:
        sys.meta_path.remove(FINDER)
    if builtins.__import__ is torch_import:
        builtins.__import__ = PYTHON_IMPORT
    for name, module in list(sys.modules.items()):
        if is_under(name, TORCH) and getattr(module, "__name__", "").startswith(TRAINKIT):
            del sys.modules[name]
        if is_under(getattr(module, "__name__", ""), TRAINKIT) and type(module) is TorchModule:
            module.__class__ = types.ModuleType
