"""Activation layers: modules that apply ``relu``, ``leaky_relu``, ``elu``, ``prelu`` (with its learnt weight),
``sigmoid``, ``tanh``, ``gelu``, ``silu``, ``mish``, ``hardswish``, ``softplus``, ``softmax`` or ``log_softmax`` to
their input, with PyTorch's constructors and reprs."""

from __future__ import annotations

from .. import functional as F
from ..autograd.creation import empty
from ..autograd.tensor import Tensor
from .init import constant_
from .module import Module
from .parameter import Parameter


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


class ELU(Module):
    """x where x > 0, else ``alpha * (e^x - 1)`` (in the input's storage with ``inplace``).

    >>> ELU(alpha=0.5, inplace=True)
    ELU(alpha=0.5, inplace=True)
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """x where x > 0, else ``weight * x``, with a learnt slope ``weight`` of ``num_parameters`` values: one for all
    channels, or one per channel (dimension 1 of the input), each starting at ``init``.

    >>> import trainkit
    >>> layer = PReLU(3)
    >>> layer, layer.weight.shape
    (PReLU(num_parameters=3), trainkit.Size([3]))
    >>> layer(-trainkit.ones(2, 3)).sum()
    tensor(-1.5000, grad_fn=<SumBackward0>)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int):
            # PyTorch's TypeError comes from empty(); ours names the argument
            raise TypeError(
                f"PReLU(): num_parameters must be an int (1, or the number of channels), not "
                f"{type(num_parameters).__name__}"
            )
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every slope back to ``init``."""
        constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


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


class SiLU(Module):
    """x * sigmoid(x) element-wise, also called swish (in the input's storage with ``inplace``).

    >>> import trainkit
    >>> SiLU()(trainkit.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Mish(Module):
    """x * tanh(softplus(x)) element-wise (in the input's storage with ``inplace``).

    >>> Mish(inplace=True)
    Mish(inplace=True)
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardswish(Module):
    """0 for x <= -3, x for x >= 3, x (x + 3) / 6 between (in the input's storage with ``inplace``, which PyTorch's
    repr does not show).

    >>> Hardswish(inplace=True)
    Hardswish()
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, self.inplace)


class Softplus(Module):
    """log(1 + e^(beta x)) / beta element-wise, and x itself where beta x > threshold (a smooth ReLU).

    >>> import trainkit
    >>> Softplus(beta=2)(trainkit.tensor([0.0, 30.0]))
    tensor([ 0.3466, 30.0000])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


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
