"""``trainkit.nn.utils.weight_norm`` (``torch.nn.utils.weight_norm``): the older, hook-based weight normalization.

``weight_norm(module)`` replaces the parameter ``weight`` by ``weight_g`` (magnitude) and ``weight_v``
(direction) and recomputes ``module.weight = g · v / ‖v‖`` before each forward. It warns, as PyTorch does, that
``trainkit.nn.utils.parametrizations.weight_norm`` replaces it.

>>> import warnings
>>> from trainkit import nn
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", FutureWarning)
...     layer = weight_norm(nn.Linear(20, 40))
>>> tuple(layer.weight_g.shape), tuple(layer.weight_v.shape)
((40, 1), (40, 20))
"""

from __future__ import annotations

import weakref

from ...autograd.user_warnings import warn_user
from ...layers.module import Module
from ...layers.parameter import Parameter
from .parametrizations import norm_except_dim, weight_norm_value

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "legacy_hooks"]


def legacy_hooks(module: Module) -> dict:
    """The hook objects of the legacy ``weight_norm`` and ``spectral_norm`` on ``module``, by ``(kind, name)``."""
    return vars(module).setdefault("_legacy_norm_hooks", {})


class LegacyNormHook:
    """A forward pre-hook that recomputes one tensor of a module before each call, and can be taken off again."""

    kind = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.active = True
        self.handle = None
        self.owner = None

    def attach(self, module: Module) -> None:
        """Register as ``module``'s forward pre-hook and in its list of legacy hooks."""
        self.handle = module.register_forward_pre_hook(self)
        self.owner = weakref.ref(module)
        legacy_hooks(module)[(self.kind, self.name)] = self

    def detach(self, module: Module) -> None:
        """Stop recomputing. A deep copy of the module holds a copy of this hook whose handle still points at the
        original module's hooks: there the hook only turns itself off."""
        self.active = False
        if self.owner is not None and self.owner() is module:
            self.handle.remove()
        del legacy_hooks(module)[(self.kind, self.name)]


class WeightNorm(LegacyNormHook):
    """The hook of ``weight_norm``: ``module.<name> = g · v / ‖v‖`` before each forward."""

    kind = "weight_norm"

    def __init__(self, name: str, dim: int | None) -> None:
        super().__init__(name)
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module):
        return weight_norm_value(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        if ("weight_norm", name) in legacy_hooks(module):
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        delattr(module, name)
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        fn.attach(module)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        delattr(module, self.name + "_g")
        delattr(module, self.name + "_v")
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        if self.active:
            setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace ``module.<name>`` by ``<name>_g`` and ``<name>_v`` and recompute it as ``g · v / ‖v‖`` before each
    forward (deprecated in PyTorch, and so here: prefer ``parametrizations.weight_norm``).

    >>> import warnings
    >>> from trainkit import nn
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     layer = weight_norm(nn.Linear(2, 2))
    >>> caught[0].category.__name__
    'FutureWarning'
    """
    warn_user(
        "`torch.nn.utils.weight_norm` is deprecated in favor of `torch.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
    )
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Turn ``module.<name>`` back into one parameter holding its current value.

    >>> import warnings
    >>> from trainkit import nn
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FutureWarning)
    ...     layer = remove_weight_norm(weight_norm(nn.Linear(2, 2)))
    >>> [name for name, _ in layer.named_parameters()]
    ['bias', 'weight']
    """
    hook = legacy_hooks(module).get(("weight_norm", name))
    if hook is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach(module)
    return module
