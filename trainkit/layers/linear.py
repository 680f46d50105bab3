"""Linear (a fully connected layer), Identity and Flatten."""

from __future__ import annotations

import math

from .. import functional as F
from ..autograd.creation import empty
from ..autograd.ops.shape import flatten
from ..autograd.tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter


class Identity(Module):
    """Returns its input; takes (and ignores) any constructor arguments, as PyTorch's does."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight^T + bias, for x of shape (*, in_features).

    ``weight`` (out_features, in_features) starts as kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)),
    and ``bias`` (out_features) as U(-1/sqrt(in), 1/sqrt(in)), as in PyTorch.

    >>> import trainkit
    >>> layer = Linear(3, 2)
    >>> layer
    Linear(in_features=3, out_features=2, bias=True)
    >>> layer(trainkit.ones(5, 3)).shape
    trainkit.Size([5, 2])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias anew from the default distributions."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        # Read from the registry itself: ``self.weight`` finds it only after a failed normal lookup, through
        # Module.__getattr__, which costs as much as the rest of the call on a small input. A weight that is no
        # longer a registered parameter (a reparametrization) is still found the usual way.
        params = self._parameters
        weight = params["weight"] if "weight" in params else self.weight
        bias = params["bias"] if "bias" in params else self.bias
        return F.linear(input, weight, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size``: the inverse of Flatten.

    >>> import trainkit
    >>> Unflatten(1, (2, 3))(trainkit.ones(4, 6)).shape
    trainkit.Size([4, 2, 3])
    """

    def __init__(self, dim: int, unflattened_size: tuple) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        d = input._dim(self.dim)
        shape = tuple(input.shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Flatten(Module):
    """Merge dimensions ``start_dim`` .. ``end_dim`` into one (by default all but the batch dimension).

    >>> import trainkit
    >>> Flatten()(trainkit.zeros(2, 3, 4)).shape
    trainkit.Size([2, 12])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
