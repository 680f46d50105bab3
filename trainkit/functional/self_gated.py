"""Self-gated activations with ``torch.nn.functional``'s signatures: x times a gate computed from x itself.

silu (swish) gates with sigmoid(x), mish with tanh(softplus(x)), hardswish with the piecewise-linear
relu6(x + 3) / 6. Each takes ``inplace=True`` as PyTorch's does: the result is written into ``input``, and the
node saves a copy of the old values, which its backward reads (the nodes are the same as out of place).
"""

from __future__ import annotations

from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.ops import activation, dual, kernels
from ..autograd.ops.inplace import apply_inplace
from ..autograd.ops.table import elementwise
from ..autograd.tensor import Tensor
from .activation import Softplus, dual_sigmoid, floating_only

__all__ = ["hardswish", "mish", "silu"]


def _dual_tanh_softplus(v):
    """tanh(log(1 + e^v)) of an array or, under create_graph, of a Tensor; log(1 + e^v) never overflows."""
    if isinstance(v, Tensor):
        return activation.tanh(Softplus.apply(v, beta=1, threshold=20))
    xp = xp_of(v)
    return xp.tanh(xp.logaddexp(0, v))


def _quiet(v):
    # inf * 0 at x = +-inf gives nan, as in PyTorch, where NumPy would also warn
    return kernels.quiet_all(xp_of(dual.data(v)))


class Silu(Op, name="SiluBackward0"):
    """out = x sigmoid(x).   dx = g s (1 + x (1 - s)), with s = sigmoid(x)."""

    save_inputs = (0,)

    def forward(self, x):
        with _quiet(x):
            return x * kernels.sigmoid(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        with _quiet(x):
            s = dual_sigmoid(x)
            return g * s * (1 + x * dual.one_minus(s))


class Mish(Op, name="MishBackward0"):
    """out = x tanh(softplus(x)).   dx = g (t + x sigmoid(x) (1 - t^2)), with t = tanh(softplus(x))."""

    save_inputs = (0,)

    def forward(self, x):
        with _quiet(x):
            return x * _dual_tanh_softplus(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        with _quiet(x):
            t = _dual_tanh_softplus(x)
            return g * (t + x * dual_sigmoid(x) * dual.one_minus(t * t))


# PyTorch's gradient is 0 at x = -3 and g at x = 3 (the outer pieces own the corners); a nan input gives nan
Hardswish, _ = elementwise(
    "hardswish",
    "HardswishBackward0",
    "x",
    "x * xp.clip(x + 3, 0, 6) / 6",
    "where(data(x) >= 3, g, where(data(x) <= -3, 0, g * (x / 3 + 0.5)))",
    quiet=("forward",),
)


def _gated(op, kernel: str, input: Tensor, inplace: bool) -> Tensor:
    floating_only(kernel, input)
    if inplace:
        return apply_inplace(input, op)
    return op.apply(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """The Sigmoid Linear Unit (swish): x * sigmoid(x) element-wise (in ``input``'s storage with ``inplace``).

    >>> import trainkit
    >>> silu(trainkit.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.2689,  0.0000,  1.7616])
    """
    return _gated(Silu, "silu_cpu", input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """Mish: x * tanh(softplus(x)) element-wise (in ``input``'s storage with ``inplace``).

    >>> import trainkit
    >>> mish(trainkit.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.3034,  0.0000,  1.9440])
    """
    return _gated(Mish, "mish_cpu", input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """Hard swish (MobileNetV3): 0 for x <= -3, x for x >= 3, x (x + 3) / 6 between.

    >>> import trainkit
    >>> hardswish(trainkit.tensor([-4.0, 1.0, 4.0]))
    tensor([-0.0000,  0.6667,  4.0000])
    """
    return _gated(Hardswish, "hardswish_cpu", input, inplace)
