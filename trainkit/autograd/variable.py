"""``torch.autograd.Variable``: the wrapper PyTorch tensors needed before 0.4, kept because old programs still call it.

Since tensors record their own history, ``Variable(t)`` is ``t`` under a new name: a tensor sharing its data,
detached from its graph, with ``requires_grad`` as asked; ``isinstance(t, Variable)`` is True for every tensor.
"""

from __future__ import annotations

from .creation import tensor
from .tensor import Tensor
from .user_warnings import warn_user

__all__ = ["Variable"]


class VariableMeta(type):
    """Makes ``isinstance(x, Variable)`` true for every tensor, as torch's ``VariableMeta`` does."""

    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)``: a tensor sharing ``data``'s values, detached from
    its graph (a leaf), requiring grad when asked; ``Variable()`` is an empty float tensor. ``volatile`` has no
    effect (use ``trainkit.no_grad()``), as in torch.

    >>> import trainkit
    >>> x = trainkit.ones(2)
    >>> v = Variable(x, requires_grad=True)
    >>> v, v.is_leaf, isinstance(x, Variable)
    (tensor([1., 1.], requires_grad=True), True, True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if volatile:
            warn_user("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.")
        if data is None:
            return tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(bool(requires_grad))
