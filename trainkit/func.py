"""``trainkit.func`` (``torch.func``): ``functional_call``, a module run with the parameters and buffers given.

>>> import trainkit
>>> from trainkit import nn
>>> layer = nn.Linear(2, 1)
>>> params = {"weight": trainkit.ones(1, 2, requires_grad=True), "bias": trainkit.zeros(1)}
>>> out = functional_call(layer, params, (trainkit.ones(1, 2),))
>>> out.backward()
>>> params["weight"].grad.tolist(), layer.weight.grad is None
([[1.0, 1.0]], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .autograd.tensor import Tensor
from .layers.module import Module
from .nn.utils.stateless import stateless_call

__all__ = ["functional_call"]


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: dict[str, Tensor] | Sequence[dict[str, Tensor]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (dotted names; a dict or a
    sequence of dicts without repeated keys) in place of the module's own, which are back afterwards.

    ``args`` that is not a tuple is one argument. With ``tie_weights`` a tensor the module holds under several
    names (tied embeddings) takes a value given under one of them under all; different values for tied names are
    a ValueError. With ``strict`` the names must be exactly the module's parameters and buffers.

    >>> import trainkit
    >>> from trainkit import nn
    >>> dicts = ({"weight": trainkit.ones(1, 1)}, {"bias": trainkit.ones(1)})
    >>> functional_call(nn.Linear(1, 1), dicts, trainkit.ones(1))
    tensor([2.])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for key in d:
                counts[key] = counts.get(key, 0) + 1
        repeated = [key for key, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return stateless_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
