"""The rectifiers beyond relu and leaky_relu, with ``torch.nn.functional``'s signatures: elu (an exponential
negative side, with ``inplace``) and prelu (a learnt slope, one for all channels or one per channel).

Their gradients under ``create_graph`` are nodes of their own (``EluBackwardBackward0``,
``PreluKernelBackwardBackward0``) with PyTorch's double-backward formulas, which treat the kink at 0 as PyTorch's
do: its second derivatives agree there too.
"""

from __future__ import annotations

from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import bfloat16_result, xp_of
from ..autograd.function import Op
from ..autograd.ops import dual
from ..autograd.ops.inplace import apply_inplace
from ..autograd.ops.kernels import quiet_all
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .activation import floating_only

__all__ = ["elu", "prelu"]


def _elu(x, alpha: float):
    xp = xp_of(x)
    with quiet_all(xp):  # expm1 of the large x that where() then drops may overflow
        return bfloat16_result(xp.where(x > 0, x, alpha * xp.expm1(x)), x)


def _elu_grad(g, v, alpha: float, from_output: bool):
    """g * elu'(x), from the input x or (``from_output``) the output: 1 where v > 0, else alpha e^x = out + alpha.

    The exponential branch wherever v > 0 fails: at 0 the slope is alpha, and nan gives nan, as PyTorch's
    vectorised kernel does (its scalar loop, for the last few elements, passes g through at nan). On Tensors
    (create_graph) it is a node of its own, as in PyTorch, whose gradient is known."""
    if isinstance(g, Tensor) or isinstance(v, Tensor):
        return EluGrad.apply(g, v, alpha=alpha, from_output=from_output)
    positive = v > 0
    if from_output:
        return xp_of(v).where(positive, g, g * (v + alpha))
    xp = xp_of(v)
    # e^x of the negative part only: e^x of a large x would overflow in the branch where() drops
    return xp.where(positive, g, g * alpha * xp.exp(xp.where(positive, 0, v)))


class Elu(Op, name="EluBackward0"):
    """out = x where x > 0, else alpha (e^x - 1).   dx = g where x > 0, else g alpha e^x."""

    save_inputs = (0,)

    def forward(self, x, alpha):
        self.alpha = alpha
        return _elu(x, alpha)

    def backward(self, g):
        (x,) = self.saved_tensors
        return _elu_grad(g, x, self.alpha, False)


class EluInplace(Op, name="EluBackward1"):
    """In-place ELU: reads its output (the input is overwritten), alpha e^x = out + alpha, so it needs alpha >= 0,
    as in PyTorch.   dx = g where out > 0, else g (out + alpha)."""

    save_output = True

    def forward(self, x, alpha):
        self.alpha = alpha
        return _elu(x, alpha)

    def backward(self, g):
        if self.alpha < 0:
            raise RuntimeError(
                "In-place elu backward calculation is triggered with a negative slope which is not supported. This "
                "is caused by calling in-place forward function with a negative slope, please call out-of-place "
                "version instead."
            )
        (out,) = self.saved_tensors
        return _elu_grad(g, out, self.alpha, True)


class EluGrad(Op, name="EluBackwardBackward0"):
    """out = g * elu'(v), v the input x or the output.   dg = gg * elu'(v),  dv = gg * g * elu''(v) where v < 0
    (alpha e^x from the input, 1 from the output), else 0, as PyTorch's ``elu_double_backward``."""

    save_inputs = (0, 1)
    save_only_for = {0: 1}

    def forward(self, g, v, alpha, from_output):
        self.alpha, self.from_output = alpha, from_output
        return _elu_grad(g, v, alpha, from_output)

    def backward(self, gg):
        g, v = self.saved_tensors
        (fg, _), (fv, _) = self.next_functions
        dg = _elu_grad(gg, v, self.alpha, self.from_output) if fg is not None else None
        dv = None
        if fv is not None:
            vd = dual.data(v)
            negative = (vd < 0).astype(vd.dtype)
            dv = gg * g * negative if self.from_output else _elu_grad(gg * g, v, self.alpha, False) * negative
        return dg, dv


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Exponential Linear Unit: x where x > 0, else ``alpha * (e^x - 1)`` (in ``input``'s storage with ``inplace``).

    >>> import trainkit
    >>> elu(trainkit.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.6321,  0.0000,  2.0000])
    """
    floating_only("elu_cpu", input)
    if inplace:
        return apply_inplace(input, EluInplace, alpha=alpha)
    return Elu.apply(input, alpha=alpha)


def _sum_to(v, shape: tuple):
    """``v`` summed over the dimensions where ``shape`` (of as many dimensions) has 1, as the weight's gradient."""
    axes = tuple(i for i, (n, m) in enumerate(zip(v.shape, shape)) if m == 1 and n != 1)
    return v.sum(axis=axes, keepdims=True) if axes else v


def _prelu_grads(g, x, w) -> tuple:
    """(g where x > 0 else w g,  x g where x <= 0 summed to w's shape); on Tensors (create_graph) a node of its
    own, as in PyTorch, whose gradient is known."""
    if isinstance(g, Tensor) or isinstance(x, Tensor) or isinstance(w, Tensor):
        return PreluGrad.apply(g, x, w)
    xp = xp_of(x)
    positive = x > 0
    with quiet_all(xp):  # the weight's gradient over x = -inf and inf is nan, silently as in PyTorch
        return xp.where(positive, g, w * g), _sum_to(xp.where(positive, 0, x * g), w.shape)


class Prelu(Op, name="PreluKernelBackward0"):
    """out = x where x > 0, else w x (w broadcast over the channels).
    dx = g where x > 0, else w g;  dw = 0 where x > 0, else x g (summed over all but the channels)."""

    save_inputs = (0, 1)

    def forward(self, x, w):
        return xp_of(x).where(x > 0, x, w * x)

    def backward(self, g):
        x, w = self.saved_tensors
        (fx, _), (fw, _) = self.next_functions
        dx, dw = _prelu_grads(g, x, w)
        return (dx if fx is not None else None), (dw if fw is not None else None)


class PreluGrad(Op, name="PreluKernelBackwardBackward0"):
    """outs = PReLU's (dx, dw) from (g, x, w).   With ggx, ggw their gradients, and PyTorch's x >= 0 here:
    dg = ggx where x >= 0, else w ggx + x ggw;  dx = 0 where x >= 0, else g ggw;  dw = 0 where x >= 0, else g ggx
    (summed to w's shape)."""

    multi_output = fresh_outputs = True
    save_inputs = (0, 1, 2)

    def forward(self, g, x, w):
        return _prelu_grads(g, x, w)

    def backward(self, ggx, ggw):
        g, x, w = self.saved_tensors
        (fg, _), (fx, _), (fw, _) = self.next_functions
        nonnegative = dual.data(x) >= 0
        dg = dual.where(nonnegative, ggx, ggx * w + ggw * x) if fg is not None else None
        dx = dual.where(nonnegative, 0, g * ggw) if fx is not None else None
        dw = _sum_to(dual.where(nonnegative, 0, g * ggx), tuple(w.shape)) if fw is not None else None
        return dg, dx, dw


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """Parametric ReLU: x where x > 0, else ``weight * x``, with one weight for all or one per channel (dim 1).

    ``weight`` is a single value or a 1-D tensor of ``input.shape[1]`` values (1 for inputs of fewer than 2
    dimensions), of the input's dtype; it gets a gradient.

    >>> import trainkit
    >>> prelu(trainkit.tensor([[-2.0, -2.0], [4.0, 4.0]]), trainkit.tensor([0.5, 0.25]))
    tensor([[-1.0000, -0.5000],
            [ 4.0000,  4.0000]])
    """
    for position, (arg, v) in enumerate((("input", input), ("weight", weight)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"prelu(): argument '{arg}' (position {position}) must be Tensor, not {type(v).__name__}")
    if enabled_threads:  # only while some thread has autocast on
        input, weight = autocast_inputs("prelu", input, weight)
    if input._data.dtype != weight._data.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {scalar_name(input)} and {scalar_name(weight)}: give the "
            f"weight the input's dtype (weight.to({input.dtype}))"
        )
    ndim, count = input._data.ndim, weight._data.size
    if count != 1:
        if ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input._data.shape[1] if ndim > 1 else 1
        if channels != count:
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{count} and channel size = {channels}."
            )
    if weight._data.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight._data.ndim}")
    floating_only("prelu_cpu", input)
    if ndim != weight._data.ndim:  # one weight per channel, broadcast over the other dimensions
        weight = weight.reshape(tuple(count if d == 1 else 1 for d in range(ndim)))
    return Prelu.apply(input, weight)
