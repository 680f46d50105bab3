"""The optimizer base class: parameter groups, per-parameter state, and PyTorch's state-dict layout.

An optimizer holds ``param_groups`` (a list of dicts, each with its ``params`` and its own options, missing options
taken from ``defaults``) and ``state`` (a dict per parameter, filled lazily by ``step``). Subclasses implement
``_update_group(group, params)``, called by ``step`` under ``no_grad`` with the parameters of one group whose
``.grad`` is not None. Updates write the parameters' arrays in place with NumPy/CuPy ufuncs (``out=``), so the
dtype and storage of a parameter never change, no graph is built, and each write bumps the parameter's version as
the in-place op PyTorch uses for it would.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..autograd.backend import xp_of
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user


class _RequiredParameter:
    """Marks a default that every parameter group must give itself."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj: Any) -> str:
    if isinstance(obj, Tensor):
        return "trainkit.Tensor"
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ in ("", "builtins") else f"{cls.__module__}.{cls.__qualname__}"


def bump_version(t: Tensor) -> None:
    """Record one in-place change of ``t`` (what saved tensors check against)."""
    t._version_counter[0] += 1


def hyper(x: Any) -> float:
    """A hyper-parameter as a Python float: a one-element Tensor learning rate is read at each step."""
    return float(x.item()) if isinstance(x, Tensor) else x


def check_tensor_hyper(name: str, value: Any) -> None:
    if isinstance(value, Tensor) and value.numel() != 1:
        raise ValueError(f"Tensor {name} must be 1-element")


# Array helpers for the updates: each writes its first argument in place, in the parameter's dtype, computing in the
# order PyTorch's kernel of the same name does (scalars are cast to the array's dtype first, as PyTorch casts them).
def lerp_(a, end, weight: float) -> None:
    """``a += weight * (end - a)``; for weights of 0.5 and more PyTorch uses ``end - (end - a) * (1 - weight)``."""
    xp = xp_of(a)
    w = a.dtype.type(weight)
    diff = xp.subtract(end, a)
    if abs(weight) < 0.5:
        xp.multiply(diff, w, out=diff)
        xp.add(a, diff, out=a)
    else:
        xp.multiply(diff, a.dtype.type(1) - w, out=diff)
        xp.subtract(end, diff, out=a)


def addcmul_(a, t1, t2, value: float) -> None:
    """``a += value * t1 * t2``."""
    xp = xp_of(a)
    tmp = xp.multiply(t1, a.dtype.type(value))
    xp.multiply(tmp, t2, out=tmp)
    xp.add(a, tmp, out=a)


def addcdiv_(a, t1, t2, value: float = 1.0) -> None:
    """``a += value * t1 / t2``."""
    xp = xp_of(a)
    tmp = xp.multiply(t1, a.dtype.type(value)) if value != 1 else t1.copy()
    xp.divide(tmp, t2, out=tmp)
    xp.add(a, tmp, out=a)


_BLOCK = 1 << 15  # elements: a temporary this small stays in the cache and comes from blocks malloc keeps


def add_(a, other, alpha: float = 1.0) -> None:
    """``a += alpha * other``. A Python float is taken in the array's dtype (NumPy's rule for Python scalars), which
    is the cast above without the cost of making a NumPy scalar: more than the update of a small parameter.

    A large NumPy array goes a block at a time: a temporary as large as a big parameter would be a fresh mapping,
    page-faulted in and given back to the OS at every step.
    """
    if alpha == 1:
        a += other
        return
    alpha = float(alpha)
    for a_part, other_part in blocks(a, other):
        a_part += other_part * alpha


def blocks(*arrays):
    """The arrays as they are, or, for large C-ordered NumPy arrays of one shape, their flat slices of ``_BLOCK``
    elements side by side: an element-wise update run on each slice in turn makes temporaries of a block, which
    stay in the cache and come from blocks malloc keeps, where whole-array ones would be fresh mappings that are
    page-faulted in and given back to the OS at every step.

    >>> import numpy as np
    >>> [len(a) for a, b in blocks(np.zeros(70000), np.ones(70000))]
    [32768, 32768, 4464]
    """
    first = arrays[0]
    if first.size <= _BLOCK or any(
        type(a) is not np.ndarray or a.shape != first.shape or not a.flags.c_contiguous for a in arrays
    ):
        yield arrays
        return
    flat = [a.reshape(-1) for a in arrays]
    for start in range(0, first.size, _BLOCK):
        yield tuple(f[start : start + _BLOCK] for f in flat)


def added(a, other, alpha: float):
    """A new array ``a + alpha * other``."""
    xp = xp_of(a)
    out = xp.multiply(other, a.dtype.type(alpha))
    xp.add(a, out, out=out)
    return out


class Optimizer:
    r"""Base class of all optimizers.

    ``params`` is an iterable of tensors, or of dicts (parameter groups) each holding ``params`` and any options
    that override ``defaults`` for that group. ``step()`` applies, in place and for each parameter :math:`\theta`
    whose gradient :math:`g` is not None, the subclass's rule
    :math:`\theta_t = U(\theta_{t-1}, g_t, \text{state}_{t-1}, \text{group})`, updating ``state[p]`` with it.

    >>> import trainkit
    >>> from trainkit.optim import SGD
    >>> w, b = trainkit.ones(2, requires_grad=True), trainkit.zeros(1, requires_grad=True)
    >>> opt = SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.1, 0.5]
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                + _typename(params)
            )
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # pickling keeps what defines the optimizer, not the step wrapper a scheduler may have put on the instance
    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    # ----------------------------------------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (e.g. to unfreeze layers while training)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of tensors in "
                "sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        param_group["params"] = params
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in params:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        # sets by id: Tensor's == is elementwise, so tensors must not be compared by value
        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warn_user(
                "optimizer contains a parameter group with duplicate parameters; in future, this will cause an "
                "error; see github.com/pytorch/pytorch/issues/40967 for more information",
            )
        seen: set[int] = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {which} to the optimizer"
                )
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------------------------------------ steps
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients (``set_to_none=True``) or fill them with zeros, keeping the tensors."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = p._grad  # parameters are leaves: no warning to give
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if grad.grad_fn is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                    grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; ``closure`` re-evaluates the loss (run with grad enabled)
        and its value is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p._grad is not None]
                if params:
                    self._update_group(group, params)
        return loss

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------- state dict
    def state_dict(self) -> dict[str, Any]:
        """``{'state': {id: {...}}, 'param_groups': [{..., 'params': [ids]}]}``: parameters are replaced by integer
        ids, numbered in group order, as PyTorch does. The state tensors are the optimizer's own, not copies."""
        mapping: dict[int, int] = {}
        start = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": param_groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load what ``state_dict()`` returned. State tensors but ``step`` are copied onto each parameter's device
        and dtype; the loaded optimizer shares no tensor with ``state_dict``."""
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        id_map = {saved: p for s, g in zip(saved_groups, groups) for saved, p in zip(s["params"], g["params"])}
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _cast(id_map[k], v)
            else:
                state[k] = v
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
        self.state = state
        self.param_groups = saved_groups


def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
    """A deep copy of ``value`` with its tensors moved to ``param``'s device and dtype (the step count stays)."""
    if isinstance(value, Tensor):
        if key == "step":  # the step count stays where it was (a CPU tensor), as in PyTorch
            out = value
        elif param.is_floating_point():
            out = value.to(device=param.device, dtype=param.dtype)
        else:
            out = value.to(device=param.device)
        return Tensor._make(out._data.copy()) if out is value else out
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not isinstance(value, (str, bytes)):
        return type(value)(_cast(param, v) for v in value)
    return copy.deepcopy(value)


__all__ = ["Optimizer", "required"]
