"""Activation layers: modules that apply ``relu``, ``leaky_relu``, ``sigmoid``, ``tanh``, ``gelu``, ``softmax`` or
``log_softmax`` to their input, with PyTorch's constructors and reprs."""

from __future__ import annotations

from .. import functional as F
from ..autograd.tensor import Tensor
from .module import Module


class ReLU(Module):
    """max(x, 0) element-wise (in the input's storage with ``inplace``).

    >>> import trainkit
    >>> ReLU()(trainkit.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x where x > 0, else ``negative_slope * x``.

    >>> LeakyReLU(0.2, inplace=True)
    LeakyReLU(negative_slope=0.2, inplace=True)
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    """1 / (1 + e^-x) element-wise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """tanh x element-wise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class GELU(Module):
    """x * Phi(x) (Phi: the standard normal CDF), or its tanh approximation with ``approximate='tanh'``.

    >>> GELU('tanh')
    GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """e^x / sum(e^x) along ``dim`` (None: PyTorch's legacy choice, with a warning).

    >>> import trainkit
    >>> Softmax(dim=1)(trainkit.zeros(1, 2))
    tensor([[0.5000, 0.5000]])
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``, computed stably."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
