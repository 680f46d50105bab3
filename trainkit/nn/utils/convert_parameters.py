"""``trainkit.nn.utils.convert_parameters`` (``torch.nn.utils.convert_parameters``): all parameters as one flat
vector and back (for second-order methods, evolution strategies, line searches).

>>> import trainkit
>>> from trainkit import nn
>>> layer = nn.Linear(2, 1)
>>> vec = parameters_to_vector(layer.parameters())
>>> vector_to_parameters(trainkit.zeros_like(vec), layer.parameters())
>>> vec.shape, layer.weight.tolist()
(trainkit.Size([3]), [[0.0, 0.0]])
"""

from __future__ import annotations

from collections.abc import Iterable

from ...autograd.ops.join import cat
from ...autograd.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def check_same_device(param: Tensor, device) -> object:
    """The device of the first parameter; a TypeError when a later one is elsewhere."""
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters, flattened and joined in order into one vector (differentiable: gradients reach them).

    >>> import trainkit
    >>> parameters_to_vector([trainkit.ones(2, 2), trainkit.zeros(1)]).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    device, pieces = None, []
    for param in parameters:
        device = check_same_device(param, device)
        pieces.append(param.view(-1))
    return cat(pieces)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give each parameter, in order, its slice of ``vec`` as its new data (the slices are views of ``vec``).

    >>> import trainkit
    >>> p = trainkit.nn.Parameter(trainkit.zeros(2))
    >>> vector_to_parameters(trainkit.tensor([1.0, 2.0]), [p])
    >>> p.tolist()
    [1.0, 2.0]
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, pointer = None, 0
    for param in parameters:
        device = check_same_device(param, device)
        count = param.numel()
        param.data = vec[pointer : pointer + count].view(param.shape).data
        pointer += count
