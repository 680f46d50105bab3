"""``trainkit.nn.utils.parametrize`` (``torch.nn.utils.parametrize``): a module's tensor computed from others.

``register_parametrization(module, "weight", P)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` and gives the module a generated subclass whose property ``weight``
returns ``P(original)`` on each access. With ``P.right_inverse`` returning several tensors they are stored as
``original0``, ``original1``, ... State dict keys are PyTorch's, so files move between the two libraries.

>>> import trainkit
>>> from trainkit import nn
>>> class Symmetric(nn.Module):
...     def forward(self, x):
...         return x.triu() + x.triu(1).transpose(-1, -2)
>>> layer = register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
>>> type(layer).__name__, bool((layer.weight == layer.weight.T).all())
('ParametrizedLinear', True)
>>> list(layer.state_dict())
['bias', 'parametrizations.weight.original']
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ...autograd import grad_mode
from ...autograd.tensor import Tensor
from ...layers.container import ModuleDict, ModuleList
from ...layers.module import Module
from ...layers.parameter import Parameter

__all__ = [
    "cached",
    "ParametrizationList",
    "register_parametrization",
    "is_parametrized",
    "remove_parametrizations",
    "type_before_parametrizations",
    "transfer_parametrizations_and_params",
]


class CacheState:
    """How many ``cached()`` blocks are open, and the tensors computed inside them by ``(id(module), name)``."""

    depth = 0
    values: dict = {}


@contextmanager
def cached() -> Iterator[None]:
    """Compute each parametrized tensor once inside the block and reuse it (a weight used at every step of an RNN).

    >>> import trainkit
    >>> from trainkit import nn
    >>> layer = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
    >>> with cached():
    ...     layer.weight is layer.weight
    True
    """
    CacheState.depth += 1
    try:
        yield
    finally:
        CacheState.depth -= 1
        if not CacheState.depth:
            CacheState.values = {}


def own_tensors(module: Module) -> tuple[dict, dict]:
    """The parameters and buffers registered on ``module`` itself, by name."""
    return dict(module.named_parameters(recurse=False)), dict(module.named_buffers(recurse=False))


def register_tensor(module: Module, name: str, tensor: Tensor) -> None:
    """Register ``tensor`` as a parameter if it is one, else as a buffer."""
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def assign_in_place(dest: Tensor, src: Tensor) -> None:
    """Make ``dest`` hold ``src``'s values and shape, keeping the ``dest`` object (what ``Tensor.set_`` does)."""
    dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, in order, and the original tensor(s) they are computed from.

    ``original`` holds the tensor when the first parametrization's ``right_inverse`` returns one tensor (or when
    it has none); ``original0``, ``original1``, ... when it returns several.

    >>> import trainkit
    >>> from trainkit import nn
    >>> chain = ParametrizationList([nn.Identity()], nn.Parameter(trainkit.ones(2)))
    >>> chain().tolist(), chain.is_tensor
    ([1.0, 1.0], True)
    """

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with grad_mode.no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {dtype}\nright_inverse(original).dtype: {new.dtype}"
                )
            if new.device != original.device:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the device.\n"
                    f"original.device: {original.device}\nright_inverse(original).device: {new.device}"
                )
            if new is not original:
                assign_in_place(original, new)
            register_tensor(self, "original", original)
        else:
            for i, tensor in enumerate(new):
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                        f"Got element {i} of the sequence with type {type(tensor).__name__}."
                    )
                if isinstance(original, Parameter):
                    tensor = Parameter(tensor, original.requires_grad)
                tensor.requires_grad_(original.requires_grad)
                register_tensor(self, f"original{i}", tensor)
        if not self.unsafe:
            value = self()
            if not isinstance(value, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
            if value.dtype != dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` flag is "
                    f"enabled.\nunparametrized dtype: {dtype}\nparametrized dtype: {value.dtype}"
                )
            if value.shape != shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, unless `unsafe` flag is "
                    f"enabled.\nunparametrized shape: {shape}\nparametrized shape: {value.shape}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Store ``value`` through the parametrizations' ``right_inverse`` methods, last registered first."""
        with grad_mode.no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} while `original` has dtype "
                        f"{self.original.dtype}"
                    )
                assign_in_place(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. Got a sequence "
                    f"of length {len(value)}."
                )
            for i, tensor in enumerate(value):
                original = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        f"'right_inverse' must return a sequence of tensors. Got element {i} of type "
                        f"{type(tensor).__name__}."
                    )
                if original.dtype != tensor.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} while `original{i}` has "
                        f"dtype {original.dtype}"
                    )
                assign_in_place(original, tensor)

    def __repr__(self) -> str:
        return "ParametrizationList" + super().__repr__()[len("ModuleList") :]

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def parametrized_deepcopy(self, memo):
    """``copy.deepcopy`` of a parametrized module: a new object of the same generated class, its state copied."""
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = self.__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def refuse_pickle(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
    )


def inject_class(module: Module) -> None:
    """Give ``module`` a class of its own, ``Parametrized<Class>``, that the properties can be added to."""
    cls = type(module)

    def refuse_parameter(self, name: str, value) -> None:
        # a Parameter assigned to a parametrized name would be registered beside the property and hidden by it
        if isinstance(value, Parameter) and isinstance(getattr(type(self), name, None), property):
            raise KeyError(f"attribute '{name}' already exists")
        cls.__setattr__(self, name, value)

    namespace = {"__getstate__": refuse_pickle, "__setattr__": refuse_parameter}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = parametrized_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def inject_property(module: Module, tensor_name: str) -> None:
    """Add the property ``tensor_name`` to the module's generated class: computed on read, ``right_inverse`` on
    assignment."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not CacheState.depth:
            return parametrization()
        key = (id(self), tensor_name)
        tensor = CacheState.values.get(key)
        if tensor is None:
            tensor = CacheState.values[key] = parametrization()
        return tensor

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get_parametrized, set_original))


def check_added_parametrization(module: Module, tensor_name: str, parametrization: Module) -> None:
    """A parametrization stacked on an already parametrized tensor keeps its dtype and shape (unless unsafe)."""
    y = getattr(module, tensor_name)
    x = parametrization(y)
    if not isinstance(x, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
    if x.dtype != y.dtype:
        raise ValueError(
            "Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` flag is "
            f"enabled.\nmodule.{tensor_name}.dtype: {y.dtype}\nparametrization(module.{tensor_name}).dtype: {x.dtype}"
        )
    if x.shape != y.shape:
        raise ValueError(
            "Registering a parametrization may not change the shape of the tensor, unless the `unsafe` flag is "
            f"enabled.\nmodule.{tensor_name}.shape: {y.shape}\nparametrization(module.{tensor_name}).shape: {x.shape}"
        )
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        z = parametrization.right_inverse(x)
    except NotImplementedError:
        return
    if not isinstance(z, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(z).__name__}")
    for what, got, want in (("dtype", z.dtype, y.dtype), ("shape", z.shape, y.shape)):
        if got != want:
            raise ValueError(
                f"The tensor returned by parametrization.right_inverse must have the same {what} as "
                f"module.{tensor_name}, unless the `unsafe` flag is enabled.\nmodule.{tensor_name}.{what}: {want}\n"
                f"returned {what}: {got}"
            )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the original tensor.

    The original moves to ``module.parametrizations[tensor_name].original`` (or ``original0``, ``original1``, ...
    when ``parametrization.right_inverse`` returns several tensors); registering again on the same name chains the
    parametrizations. Unless ``unsafe``, the parametrized tensor must keep the original's shape and dtype.

    >>> import trainkit
    >>> from trainkit import nn
    >>> class Doubled(nn.Module):
    ...     def forward(self, x):
    ...         return 2 * x
    ...     def right_inverse(self, y):
    ...         return y / 2
    >>> layer = register_parametrization(nn.Linear(2, 2), "weight", Doubled())
    >>> layer.weight = trainkit.full((2, 2), 3.0)
    >>> layer.weight.tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            check_added_parametrization(module, tensor_name, parametrization)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
        return module
    params, buffers = own_tensors(module)
    if tensor_name not in params and tensor_name not in buffers:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
            f"'{tensor_name}'"
        )
    original = getattr(module, tensor_name)
    parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        inject_class(module)
        module.parametrizations = ModuleDict()
    inject_property(module, tensor_name)
    module.parametrizations[tensor_name] = parametrizations
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization on ``tensor_name`` (on any tensor when None).

    >>> from trainkit import nn
    >>> is_parametrized(nn.Linear(2, 2))
    False
    """
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo ``register_parametrization`` on ``tensor_name``: the tensor becomes a parameter (or buffer) again.

    With ``leave_parametrized`` it keeps its current, parametrized value, else the original's (possible only when
    the original is one tensor). The module gets its own class back once nothing of it is parametrized.

    >>> from trainkit import nn
    >>> layer = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
    >>> type(remove_parametrizations(layer, "weight")).__name__
    'Linear'
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with grad_mode.no_grad():
                assign_in_place(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value
    else:
        raise ValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in terms of a "
            "sequence of tensors."
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization (its own class when it has none).

    >>> from trainkit import nn
    >>> layer = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
    >>> type_before_parametrizations(layer) is nn.Linear
    True
    """
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module`` and share their
    original tensors with it.

    >>> from trainkit import nn
    >>> a = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
    >>> b = transfer_parametrizations_and_params(a, nn.Linear(2, 2))
    >>> b.parametrizations.weight.original is a.parametrizations.weight.original
    True
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            for i in range(source.ntensors):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
    return to_module
