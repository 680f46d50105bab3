"""``trainkit.nn.utils.stateless`` (``torch.nn.utils.stateless``): call a module with other parameters and buffers.

``functional_call(module, {"weight": w}, (x,))`` runs ``module(x)`` as if its ``weight`` were ``w``, then puts
the module's own tensors back: gradients flow to ``w``, not to the module's parameters. ``trainkit.func
.functional_call`` is the same without the deprecation warning, and also takes a tuple of dicts.

>>> import warnings
>>> import trainkit
>>> from trainkit import nn
>>> layer = nn.Linear(2, 1)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", FutureWarning)
...     out = functional_call(layer, {"weight": trainkit.ones(1, 2), "bias": trainkit.zeros(1)}, trainkit.ones(1, 2))
>>> out.tolist()
[[2.0]]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...autograd.tensor import Tensor
from ...autograd.user_warnings import warn_user
from ...layers.module import Module, swap_registered_tensor

__all__ = ["functional_call", "reparametrize_module", "stateless_call"]

MISSING = object()  # what a name the module does not have swaps back to: removal


def tensors_by_name(module: Module) -> dict[str, Tensor]:
    """Every parameter and buffer by dotted name, a tied tensor under each of its names."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def untie(module: Module, given: dict[str, Tensor]) -> dict[str, Tensor]:
    """``given``, with each value also under the other names of a tensor the module ties to it."""
    names_of: dict[int, set] = {}
    for name, tensor in tensors_by_name(module).items():
        names_of.setdefault(id(tensor), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    given_tied = [name for name in given if name in tied]
    for name in given_tied:
        names = tied[name]
        if len(names & set(given_tied)) > 1 and len({id(given[n]) for n in names if n in given}) != 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(names)}, which are tied. Consider using "
                "tie_weights=False"
            )
    untied = dict(given)
    for name in given_tied:
        for other in tied[name]:
            untied[other] = given[name]
    return untied


def swap(root: Module, dotted: str, value) -> Any:
    """Put ``value`` (``MISSING``: remove) at ``root``'s tensor ``dotted``; return what was there (``MISSING``:
    nothing)."""
    prefix, _, name = dotted.rpartition(".")
    module = root.get_submodule(prefix)
    if not name:
        raise KeyError('tensor name can\'t be empty string ""')
    if value is not MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of trainkit.Tensor")
    if value is not MISSING:
        found, old = swap_registered_tensor(module, name, value)
        if found:
            return old
    old = getattr(module, name) if hasattr(module, name) else MISSING
    if old is not MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{name}`: {old} is not an instance of trainkit.Tensor")
    if value is not MISSING:
        setattr(module, name, value)
    elif hasattr(module, name):
        delattr(module, name)
    return old


@contextmanager
def reparametrize_module(
    module: Module, parameters_and_buffers: dict[str, Tensor], tie_weights: bool = False, strict: bool = False
) -> Iterator[None]:
    """Inside the block ``module`` holds the given tensors in place of its own (see ``functional_call``)."""
    given = untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = set(tensors_by_name(module))
        missing, unexpected = sorted(valid - set(given)), sorted(set(given) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(errors))
    originals: dict[str, Any] = {}
    try:
        for name, tensor in given.items():
            originals[name] = swap(module, name, tensor)
        yield
    finally:
        # what the module holds now goes back to the caller's dict: a buffer the call replaced (BatchNorm's
        # running statistics) is seen there, as in PyTorch
        held = {name: swap(module, name, tensor) for name, tensor in reversed(list(originals.items()))}
        parameters_and_buffers.update({k: held[k] for k in parameters_and_buffers if k in held})


def stateless_call(
    module: Module,
    parameters_and_buffers: dict[str, Tensor],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """``module(*args, **kwargs)`` with ``parameters_and_buffers`` in place of the module's own tensors.

    >>> import trainkit
    >>> from trainkit import nn
    >>> stateless_call(nn.Identity(), {}, trainkit.ones(1)).tolist()
    [1.0]
    """
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **(kwargs or {}))


def functional_call(
    module: Module,
    parameters_and_buffers: dict[str, Tensor],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """Call ``module`` with ``parameters_and_buffers`` (dotted names) in place of its own tensors; deprecated in
    PyTorch 2.0 in favour of ``torch.func.functional_call`` (``trainkit.func.functional_call``), and so here.

    ``args`` that is not a tuple is one argument. With ``tie_weights`` a tensor the module holds under several
    names takes the given value under all of them; ``strict`` requires exactly the module's names.

    >>> import warnings
    >>> import trainkit
    >>> from trainkit import nn
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = functional_call(nn.Identity(), {}, trainkit.ones(1))
    >>> caught[0].category.__name__
    'FutureWarning'
    """
    warn_user(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a future "
        "version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in replacement.",
        FutureWarning,
    )
    return stateless_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
