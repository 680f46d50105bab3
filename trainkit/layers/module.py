"""Module: the base class of layers and models, with PyTorch's registration, traversal, state and hooks."""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

from ..autograd import grad_mode
from ..autograd.creation import zeros_like
from ..autograd.function import Function
from ..autograd.hooks import HookDict, RemovableHandle, add_hook
from ..autograd.ops.copy import parse_to
from ..autograd.tensor import Tensor
from .parameter import Buffer, Parameter
from .summary import summary as _summary

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class BackwardHookFunction(Function):
    """Identity on its tensor arguments: a place in the graph where module backward hooks can see gradients."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return grads


class Module:
    """Base class for layers and models: subclass it, assign layers and Parameters in ``__init__``, write ``forward``.

    >>> import trainkit
    >>> from trainkit import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.hidden = nn.Linear(1, 10)
    ...         self.predict = nn.Linear(10, 1)
    ...     def forward(self, x):
    ...         return self.predict(self.hidden(x).relu())
    >>> [name for name, _ in Net().named_parameters()]
    ['hidden.weight', 'hidden.bias', 'predict.weight', 'predict.bias']
    """

    training: bool
    _ids = itertools.count()

    def __init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", OrderedDict())
        setattr_(self, "_buffers", OrderedDict())
        setattr_(self, "_non_persistent_buffers", set())
        setattr_(self, "_modules", OrderedDict())
        setattr_(self, "_forward_pre_hooks", HookDict())
        setattr_(self, "_forward_hooks", HookDict())
        setattr_(self, "_backward_hooks", HookDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # -------------------------------------------------------------------------------------------- registration
    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params, modules, buffers = d.get("_parameters"), d.get("_modules"), d.get("_buffers")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._forget(name, keep="_parameters")  # a reassigned parameter keeps its place in the order
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' (trainkit.nn.Parameter or None "
                    "expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._check_init("child modules")
            self._forget(name, keep="_modules")
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None expected)"
                )
            modules[name] = None
        elif isinstance(value, Buffer):
            self.register_buffer(name, Tensor._make(value._data), persistent=value.persistent)
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Remove ``name`` from the other places it may be registered, before it is registered in ``keep``."""
        self.__dict__.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                self.__dict__[registry].pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(registry, ()):
                del self.__dict__[registry][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f'{kind} name can\'t be empty or contain ".", got: {name!r}')
        if hasattr(self, name) and name not in self.__dict__.get(f"_{kind}s", {}):
            if kind != "module" or name not in self._modules:
                raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under ``name``."""
        self._check_init("parameters")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(trainkit.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is part of the module's state but not a parameter (running statistics, say).

        Non-persistent buffers are left out of ``state_dict``.
        """
        self._check_init("buffers")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)"
            )
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_init("child modules")
        self._check_name(name, "module")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` ('' is this module)."""
        module = self
        for part in target.split(".") if target else ():
            if part not in module._modules:
                raise AttributeError(f"{module._get_name()} has no attribute `{part}`")
            module = module._modules[part]
        return module

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters:
            raise AttributeError(f"{module._get_name()} has no parameter `{name}`")
        return module._parameters[name]

    # ----------------------------------------------------------------------------------------------- traversal
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """This module and all below it, with dotted names; each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(dotted name, parameter)`` pairs, each shared parameter once: ``hidden.weight``, ``0.bias``."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------------------------------- modes and grads
    def train(self, mode: bool = True) -> Module:
        """Switch this module and all below it to training (or, with False, evaluation) behaviour."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Evaluation behaviour: Dropout passes through, BatchNorm uses its running statistics."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze every parameter: frozen ones get no ``.grad`` and optimizers skip them."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the ``.grad`` of every parameter: to None (the default), or to zeros in place."""
        for p in self.parameters():
            if p._grad is None:
                continue
            if set_to_none:
                p._grad = None
            else:
                p._grad._data[...] = 0

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every child module (recursively), then on this one; for custom initialisation."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # --------------------------------------------------------------------------------------- devices and dtypes
    def _apply(self, convert: Callable[[Tensor], Tensor]) -> Module:
        """Convert every parameter, gradient and buffer in place, keeping the Parameter objects."""
        with grad_mode.no_grad():
            for module in self.modules():
                for p in module._parameters.values():
                    if p is None:
                        continue
                    p._data = convert(p)._data
                    if p._grad is not None:
                        p._grad = Tensor._make(convert(p._grad)._data)
                for name, b in module._buffers.items():
                    if b is not None:
                        module._buffers[name] = convert(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move to a device and/or cast floating parameters and buffers to a dtype: ``model.to('cuda')``."""
        dev, dt, _ = parse_to(*args, **kwargs)
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dt}")

        def convert(t: Tensor) -> Tensor:
            if dev is not None:
                t = t.to(dev)
            if dt is not None and t.is_floating_point():
                t = t.to(dt)
            return t

        return self._apply(convert)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: int | str | None = None) -> Module:
        return self.to(device if isinstance(device, str) else f"cuda:{device or 0}")

    def float(self) -> Module:
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> Module:
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> Module:
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> Module:
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # ----------------------------------------------------------------------------------------------------- state
    def state_dict(self, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (detached, sharing storage, unless ``keep_vars``)."""
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers (in place).

        With ``strict`` (the default), missing and unexpected keys are errors; a shape mismatch always is. The
        error names every offending key. Nothing is copied unless everything matches.
        """
        state_dict = self._run_load_state_dict_pre_hooks(state_dict, strict)
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = self._unexpected_keys(state_dict)
        problems = []
        for key, value in state_dict.items():
            if key in own:
                if not isinstance(value, Tensor):
                    problems.append(
                        f'While copying the parameter named "{key}", expected a Tensor in the state_dict, '
                        f"got {type(value).__name__}."
                    )
                elif tuple(value.shape) != tuple(own[key].shape):
                    problems.append(
                        f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                        f"the shape in current model is {own[key].shape}."
                    )
        if strict:
            if unexpected:
                problems.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                problems.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(problems))
        with grad_mode.no_grad():
            for key, value in state_dict.items():
                if key not in own:
                    continue
                target = own[key]
                if assign:
                    target._data = value._data
                else:
                    target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    def register_load_state_dict_pre_hook(self, hook) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``
        before ``load_state_dict`` reads the keys under ``prefix``: it may rename or convert entries of
        ``state_dict`` (a copy of the caller's), as weight_norm does for files with ``weight_g``/``weight_v``."""
        if "_load_state_dict_pre_hooks" not in self.__dict__:
            object.__setattr__(self, "_load_state_dict_pre_hooks", HookDict())
        return _register(self._load_state_dict_pre_hooks, hook, False)

    def _run_load_state_dict_pre_hooks(self, state_dict, strict: bool):
        hooked = [(p, m) for p, m in self.named_modules() if m.__dict__.get("_load_state_dict_pre_hooks")]
        if not hooked:
            return state_dict
        state_dict = OrderedDict(state_dict)
        for prefix, module in hooked:
            for hook in tuple(module._load_state_dict_pre_hooks.values()):
                hook(module, state_dict, f"{prefix}." if prefix else "", {}, strict, [], [], [])
        return state_dict

    def _unexpected_keys(self, state_dict) -> list:
        """Keys no module claims, listed module by module from the root, as PyTorch reports them."""
        unexpected = []
        for prefix, module in self.named_modules():
            prefix = prefix + "." if prefix else ""
            local = set(module._parameters) | {b for b in module._buffers if b not in module._non_persistent_buffers}
            for key in state_dict:
                if key.startswith(prefix):
                    first = key[len(prefix) :].split(".", 1)[0]
                    if first not in module._modules and (first not in local or "." in key[len(prefix) :]):
                        unexpected.append(key)
        return unexpected

    # ------------------------------------------------------------------------------------------------- calling
    def register_forward_pre_hook(self, hook, *, prepend: bool = False) -> RemovableHandle:
        """``hook(module, args)`` before ``forward``; a returned value replaces the positional arguments."""
        return _register(self._forward_pre_hooks, hook, prepend)

    def register_forward_hook(self, hook, *, prepend: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` after ``forward``; a returned value replaces the output."""
        return _register(self._forward_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` once the gradients of the module's inputs are computed; a
        returned tuple replaces ``grad_input``."""
        return _register(self._backward_hooks, hook, prepend)

    def __call__(self, *args, **kwargs):
        # each hook loop sits behind a test that its dict is not empty: most calls have no hooks, and copying an
        # empty dict's values costs a good part of a small layer's call
        if self._forward_pre_hooks:
            for hook in tuple(self._forward_pre_hooks.values()):
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if self._backward_hooks and grad_mode.state.enabled:
            return self._call_with_backward_hooks(args, kwargs)
        output = self.forward(*args, **kwargs)
        if self._forward_hooks:
            for hook in tuple(self._forward_hooks.values()):
                result = hook(self, args, output)
                if result is not None:
                    output = result
        return output

    def _call_with_backward_hooks(self, args: tuple, kwargs: dict):
        """Route the module's tensor inputs and outputs through identity nodes whose pre-hooks see their grads."""
        grad_output: list = [None]
        module_ref = weakref.ref(self)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]

        def call_hooks(grads: tuple):
            """Run the hooks with one grad_input slot per positional argument, as PyTorch: the grads of the
            inputs that require one, zeros for other tensors, None for non-tensors (all None when no input
            requires grad)."""
            module = module_ref()
            if module is None:
                return None
            wanted = dict(zip(positions, grads))
            grad_input = tuple(
                wanted[i] if i in wanted else (zeros_like(a) if positions and isinstance(a, Tensor) else None)
                for i, a in enumerate(args)
            )
            for hook in tuple(module._backward_hooks.values()):
                result = hook(module, grad_input, grad_output[0])
                if result is not None:
                    grad_input = tuple(result)
            return tuple(grad_input[i] for i in positions)

        if positions:
            wrapped = BackwardHookFunction.apply(*(args[i] for i in positions))
            args = list(args)
            for i, t in zip(positions, wrapped):
                args[i] = t
            args = tuple(args)
            wrapped[0].grad_fn.register_prehook(call_hooks)
        output = self.forward(*args, **kwargs)
        for hook in tuple(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        outs = output if isinstance(output, tuple) else (output,)
        out_positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not out_positions:
            return output
        wrapped_out = BackwardHookFunction.apply(*(outs[i] for i in out_positions))

        def store_grad_output(grads: tuple):
            grad_output[0] = grads
            if not positions:  # no input wants a gradient: the hooks run now
                call_hooks(())
            return None

        wrapped_out[0].grad_fn.register_prehook(store_grad_output)
        outs = list(outs)
        for i, t in zip(out_positions, wrapped_out):
            outs[i] = t
        return tuple(outs) if isinstance(output, tuple) else outs[0]

    # ---------------------------------------------------------------------------------------------------- repr
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (a layer's settings)."""
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, module in self._modules.items():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        if not lines:
            return f"{self._get_name()}()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"

    def summary(self, input_shape=None, **kwargs) -> str:
        """Keras-style table of layers, output shapes and parameter counts (see ``trainkit.summary``)."""
        return _summary(self, input_shape, **kwargs)


def _register(hooks: HookDict, hook, prepend: bool) -> RemovableHandle:
    handle = add_hook(hooks, hook)
    if prepend:
        items = [(handle.id, hooks.pop(handle.id))] + list(hooks.items())
        hooks.clear()
        hooks.update(items)
    return handle


def swap_registered_tensor(module: Module, name: str, value: Tensor | None) -> tuple[bool, Tensor | None]:
    """Put ``value`` (any Tensor, not necessarily a Parameter) where ``module``'s own parameter or buffer ``name``
    is, keeping its place and kind; return ``(True, the tensor it held)``, or ``(False, None)`` when ``name`` is
    neither. ``functional_call`` runs a module on other tensors so, and puts the originals back the same way.

    >>> import trainkit
    >>> from trainkit import nn
    >>> layer = nn.Linear(2, 2)
    >>> found, old = swap_registered_tensor(layer, "bias", trainkit.zeros(2))
    >>> found, layer.bias.tolist(), swap_registered_tensor(layer, "bias", old)[1].tolist()
    (True, [0.0, 0.0], [0.0, 0.0])
    """
    for registry in (module._parameters, module._buffers):
        if name in registry:
            old = registry[name]
            registry[name] = value
            return True, old
    return False, None
