"""Parameter: the tensors a Module learns."""

from __future__ import annotations

from ..autograd.creation import empty
from ..autograd.tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers as a parameter when assigned to one of its attributes.

    It shares storage with the tensor it is made from and requires grad unless told otherwise.

    >>> import trainkit
    >>> p = Parameter(trainkit.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        self = Tensor.__new__(cls)
        Tensor.__init__(self, 0)
        self._data = data._data
        self.requires_grad_(requires_grad)
        return self

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass  # everything happened in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (Tensor._make(self._data).__reduce_ex__(protocol), self._requires_grad))


def _rebuild_parameter(tensor_reduce, requires_grad: bool) -> Parameter:
    rebuild, args = tensor_reduce
    return Parameter(rebuild(*args), requires_grad)


class Buffer(Tensor):
    """Marks a tensor to register as a buffer when assigned to a Module attribute (``self.x = Buffer(t)``)."""

    def __new__(cls, data: Tensor, *, persistent: bool = True):
        self = Tensor.__new__(cls)
        Tensor.__init__(self, 0)
        self._data = data._data
        self.persistent = persistent
        return self

    def __init__(self, data: Tensor, *, persistent: bool = True):
        pass
