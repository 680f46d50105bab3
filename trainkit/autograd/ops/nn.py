"""Neural-network ops with ``torch.nn.functional``'s signatures: activations, dropout, linear, batch norm,
embedding and the losses.

Where PyTorch has a node of its own for an op (``NativeBatchNormBackward0``, ``NllLossBackward0``, ...), the op is one
class here with that name, its forward and a hand-written backward side by side; the rest is composed from existing
ops. Fused ops (cross-entropy is log-softmax and NLL in one) keep only small per-row statistics and recompute the
rest in backward from the saved input. With ``create_graph`` each backward runs on Tensors: values that depend on an
input are then recomputed with differentiable ops, so that second derivatives come out right.

A loss's ``reduction`` is ``'mean'`` (the default), ``'sum'`` or ``'none'`` (one loss per element or sample).
"""

from __future__ import annotations

import math as _math
import warnings

import numpy as np

from .. import grad_mode
from ..backend import on_device, xp_of
from ..function import Op
from ..random import generator_for
from ..tensor import Tensor
from . import activation, dual, linalg
from . import math as tmath
from .inplace import apply_inplace
from .shape import index_into_zeros

sigmoid = activation.sigmoid
tanh = activation.tanh


# ------------------------------------------------------------------------------------------------------ helpers
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(reduction: str, size_average=None, reduce=None) -> str:
    """The reduction to use, from the legacy ``size_average``/``reduce`` flags when either is given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(
            f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
            stacklevel=3,
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction: str, count=None):
    """``loss`` (an array) summed, averaged over ``count`` (default: its size), or as it is."""
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    count = loss.size if count is None else count
    if count == 0:
        with np.errstate(invalid="ignore", divide="ignore"):  # nothing to average over gives nan, as in PyTorch
            return total / count
    return total / count


def _unreduce(g, reduction: str, count):
    """The gradient each term of the unreduced loss gets from ``g``, the gradient of the reduced one."""
    return g / count if reduction == "mean" else g


def _warn_if_broadcast(input: Tensor, target: Tensor) -> None:
    if target._data.shape != input._data.shape:
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


def _like(t: Tensor | None, input: Tensor) -> Tensor | None:
    """``t`` in ``input``'s floating dtype (a differentiable cast), or None."""
    if t is None or t.dtype == input.dtype:
        return t
    return t.to(input.dtype)


def _tanh(v):
    return activation.tanh(v) if isinstance(v, Tensor) else xp_of(v).tanh(v)


def _sigmoid(v):
    if isinstance(v, Tensor):
        return activation.sigmoid(v)
    xp = xp_of(v)
    e = xp.exp(-xp.abs(v))  # never overflows
    return xp.where(v >= 0, 1, e) / (1 + e)


def _softplus_neg(v):
    """log(1 + e^-v) = max(-v, 0) + log(1 + e^-|v|), without overflow."""
    if isinstance(v, Tensor):
        return (-v).clip(0, None) + dual.log(1 + dual.exp(-abs(v)))
    xp = xp_of(v)
    return xp.maximum(-v, 0) + xp.log1p(xp.exp(-xp.abs(v)))


# -------------------------------------------------------------------------------------------------- activations
def _leaky(x, slope: float):
    # max(x, slope x) is x for x > 0 and slope x below, for any slope <= 1 (min for steeper ones): no select needed
    xp = xp_of(x)
    return xp.maximum(x, x * slope) if slope <= 1 else xp.minimum(x, x * slope)


def _leaky_slope(positive, slope: float, dtype):
    """1 where ``positive``, else slope, as an array of ``dtype``."""
    out = positive.astype(dtype)
    out *= 1 - slope
    out += slope
    return out


class LeakyRelu(Op, name="LeakyReluBackward0"):
    """out = x where x > 0, else slope * x.   dx = g where x > 0, else slope * g."""

    save_inputs = (0,)

    def forward(self, x, slope):
        self.slope = slope
        return _leaky(x, slope)

    def backward(self, g):
        (x,) = self.saved_tensors
        x = dual.data(x)
        return g * _leaky_slope(x > 0, self.slope, x.dtype)


class LeakyReluInplace(Op, name="LeakyReluBackward1"):
    """In-place leaky ReLU: reads its output (the input is overwritten), so it needs slope >= 0, as in PyTorch."""

    save_output = True

    def forward(self, x, slope):
        self.slope = slope
        return _leaky(x, slope)

    def backward(self, g):
        if self.slope < 0:
            raise RuntimeError(
                "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
                "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
                "version instead."
            )
        (out,) = self.saved_tensors
        out = dual.data(out)
        return g * _leaky_slope(out > 0, self.slope, out.dtype)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0) element-wise (in ``input``'s storage with ``inplace``)."""
    return input.relu_() if inplace else activation.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``negative_slope * x``.

    >>> import trainkit
    >>> leaky_relu(trainkit.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    if inplace:
        return apply_inplace(input, LeakyReluInplace, slope=negative_slope)
    return LeakyRelu.apply(input, slope=negative_slope)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Softmax along ``dim``; without ``dim``, PyTorch's legacy choice (0 for 0-, 1- and 3-D inputs, else 1)."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim, _stacklevel)
    return activation.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably; without ``dim``, PyTorch's legacy choice as ``softmax``."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim, _stacklevel)
    return activation.log_softmax(input, dim, dtype)


def _implicit_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def erf(x):
    """The error function of an array, to within an ulp or two (fdlibm's rational approximations, vectorised).

    Each interval's formula runs only on the elements in that interval (gathered by index, which is much cheaper
    than evaluating every formula everywhere and selecting).

    >>> float(erf(np.array(0.5)))
    0.5204998778130465
    """
    xp = xp_of(x)
    a = xp.abs(x).reshape(-1)
    out = xp.ones_like(a)  # erf = 1 from |x| = 6 on, to double precision
    for lo, hi, formula in _ERF_PIECES:
        idx = xp.flatnonzero((a >= lo) & (a < hi))
        if idx.size:
            out[idx] = formula(a.take(idx))
    nan = xp.isnan(a)
    if nan.any():
        out[nan] = xp.nan
    return xp.copysign(out, x.reshape(-1)).reshape(x.shape)


def _erf_near_zero(v):
    z = v * v
    return v + v * (_poly(z, _ERF_PP) / _poly(z, _ERF_QQ))


def _erf_near_one(v):
    s = v - 1
    return _ERX + _poly(s, _ERF_PA) / _poly(s, _ERF_QA)


def _erf_tail(r: tuple, q: tuple):
    def formula(v):
        s = 1 / (v * v)
        return 1 - xp_of(v).exp(-v * v - 0.5625 + _poly(s, r) / _poly(s, q)) / v

    return formula


def _poly(z, coeffs: tuple):
    """sum_k coeffs[k] z^k by Horner's rule, in place."""
    out = z * coeffs[-1]
    out += coeffs[-2]
    for c in coeffs[-3::-1]:
        out *= z
        out += c
    return out


_ERX = 8.45062911510467529297e-01
_ERF_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
           -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_ERF_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
           1.32494738004321644526e-04, -3.96022827877536812320e-06)
_ERF_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
           3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03)
_ERF_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
           1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_ERF_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
           -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
           -8.12874355063065934246e01, -9.81432934416914548592e00)
_ERF_SA = (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
           6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
           6.57024977031928170135e00, -6.04244152148580987438e-02)
_ERF_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
           -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
           -4.83519191608651397019e02)
_ERF_SB = (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
           3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
           -2.24409524465858183362e01)

_ERF_PIECES = (
    (0.0, 0.84375, _erf_near_zero),
    (0.84375, 1.25, _erf_near_one),
    (1.25, 1 / 0.35, _erf_tail(_ERF_RA, _ERF_SA)),
    (1 / 0.35, 6.0, _erf_tail(_ERF_RB, _ERF_SB)),
)

_SQRT_HALF = _math.sqrt(0.5)
_INV_SQRT_2PI = 1 / _math.sqrt(2 * _math.pi)
_K = _math.sqrt(2 / _math.pi)  # the tanh approximation: gelu(x) ~ x/2 (1 + tanh(K (x + C x^3)))
_C = 0.044715


def _gelu_slope(x, approximate: str):
    """gelu'(x) of an array: Phi(x) + x phi(x), or the derivative of the tanh approximation."""
    xp = xp_of(x)
    if approximate == "tanh":
        x2 = x * x
        t = xp.tanh(_K * x * (1 + _C * x2))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (_K * (1 + 3 * _C * x2))
    return 0.5 * (1 + erf(x * _SQRT_HALF)) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _gelu_curvature(x, approximate: str):
    """gelu''(x), for arrays and Tensors: phi(x) (2 - x^2), or (1 - t^2)(u' - x t u'^2 + 3 K C x^2) with tanh."""
    x2 = x * x
    if approximate == "tanh":
        du = _K * (1 + 3 * _C * x2)
        t = _tanh(_K * x * (1 + _C * x2))
        return (1 - t * t) * (du - x * t * du * du + 3 * _K * _C * x2)
    return dual.exp(-0.5 * x2) * _INV_SQRT_2PI * (2 - x2)


def _gelu_grad(g, x, approximate: str):
    """g * gelu'(x); on Tensors an op of its own, whose gradient is known, since erf has no Tensor op."""
    if isinstance(g, Tensor) or isinstance(x, Tensor):
        return GeluBackward.apply(g, x, approximate=approximate)
    return g * _gelu_slope(x, approximate)


class Gelu(Op, name="GeluBackward0"):
    """out = x Phi(x) (Phi: the standard normal CDF), or x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with
    approximate='tanh'.   dx = g * gelu'(x)."""

    save_inputs = (0,)

    def forward(self, x, approximate):
        self.approximate = approximate
        if approximate == "tanh":
            return 0.5 * x * (1 + xp_of(x).tanh(_K * x * (1 + _C * x * x)))
        return 0.5 * x * (1 + erf(x * _SQRT_HALF))

    def backward(self, g):
        (x,) = self.saved_tensors
        return _gelu_grad(g, x, self.approximate)


class GeluBackward(Op, name="GeluBackwardBackward0"):
    """out = g * gelu'(x).   dg = gg * gelu'(x),  dx = gg * g * gelu''(x)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1}

    def forward(self, g, x, approximate):
        self.approximate = approximate
        return g * _gelu_slope(x, approximate)

    def backward(self, gg):
        g, x = self.saved_tensors
        (fg, _), (fx, _) = self.next_functions
        dg = _gelu_grad(gg, x, self.approximate) if fg is not None else None
        dx = gg * g * _gelu_curvature(x, self.approximate) if fx is not None else None
        return dg, dx


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian Error Linear Unit: x * Phi(x), or its tanh approximation with ``approximate='tanh'``.

    >>> import trainkit
    >>> gelu(trainkit.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return Gelu.apply(input, approximate=approximate)


# ------------------------------------------------------------------------------------------------------ dropout
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p), so the expectation is unchanged.

    The mask comes from the seeded default generator of ``input``'s device. Outside training (or with p = 0) the
    input is returned as it is; p = 1 gives zeros.

    >>> import trainkit
    >>> y = dropout(trainkit.ones(1000), p=0.5)
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    data = input._data
    if p == 1.0:
        mask = xp_of(data).zeros(data.shape, dtype=data.dtype)
    else:
        draw_dtype = np.float64 if data.dtype == np.float64 else np.float32
        with on_device(input.device):
            u = generator_for(input.device).rng.random(data.shape, dtype=draw_dtype)
        mask = (u < 1 - p).astype(data.dtype)
        mask *= 1 / (1 - p)
    mask = Tensor._make(mask)
    return input.mul_(mask) if inplace else tmath.mul(input, mask)


# ------------------------------------------------------------------------------------------------------- linear
class Addmm(Op, name="AddmmBackward0"):
    """out = b + x @ wt.   db = g (summed over rows by the engine),  dx = g @ wt^T,  dwt = x^T @ g."""

    save_inputs = (1, 2)
    save_only_for = {1: 2, 2: 1}

    def forward(self, b, x, wt):
        self.row_bias = b.ndim < 2  # the same bias added to every row: its gradient is the sum of g's rows
        # wt = weight.t() of a C-ordered weight: wt's gradient is computed in that layout (see backward)
        self.wt_transposed = not wt.flags.c_contiguous and wt.flags.f_contiguous
        out = _mm(x, wt)
        out += b
        return out

    def backward(self, g):
        x, wt = self.saved_tensors
        (fb, _), (fx, _), (fw, _) = self.next_functions
        gb = None
        if fb is not None:
            gb = _sum_rows(g) if self.row_bias and not isinstance(g, Tensor) else g  # else summed by the engine
        gwt = None
        if fw is not None:
            if self.wt_transposed and not isinstance(g, Tensor):
                # (g^T x)^T: in wt's layout, so that the weight's gradient, its transpose, is C-ordered as the
                # weight and can be taken over without a copy
                gwt = _mm(g.swapaxes(0, 1), x).swapaxes(0, 1)
            else:
                gwt = _mm(x.swapaxes(0, 1), g)
        return gb, _mm(g, wt.swapaxes(0, 1)) if fx is not None else None, gwt


def _sum_rows(g):
    """The sum of the rows of the matrix ``g`` as a vector-matrix product with ones: NumPy's reduction along an
    axis has a fixed cost several times that of the sum itself on small matrices."""
    ones = xp_of(g).empty(g.shape[0], dtype=g.dtype)
    ones.fill(1)  # cheaper than xp.ones, a Python function
    return ones.dot(g)


def _mm(a, b):
    """``a @ b`` for matrices. On arrays it is the ``dot`` method: NumPy's ``matmul`` goes through the
    generalized-ufunc machinery, which on small matrices costs several times the product itself (both call BLAS on
    large ones)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return a @ b
    return a.dot(b)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight^T + bias, for inputs of shape (*, in_features) and weight (out_features, in_features).

    >>> import trainkit
    >>> linear(trainkit.ones(2, 3), trainkit.ones(4, 3), trainkit.zeros(4)).shape
    trainkit.Size([2, 4])
    """
    x, w = input._data, weight._data  # checked on the arrays: a Tensor's shape and dtype are built on each read
    if x.ndim == 0 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
        rows = input.numel() // input.shape[-1] if input.ndim and input.shape[-1] else 1
        in_shape = "x".join(map(str, (rows, input.shape[-1] if input.ndim else 1)))
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({in_shape} and "
            f"{'x'.join(map(str, tuple(weight.shape)[::-1]))})"
        )
    if x.dtype != w.dtype or (bias is not None and bias._data.dtype != x.dtype):
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {input.dtype} and {weight.dtype}")
    wt = weight.t()
    if bias is None:
        return linalg.matmul(input, wt)
    if x.ndim == 2:
        return Addmm.apply(bias, input, wt)
    # as PyTorch: other ranks go through a 2-D view
    out = Addmm.apply(bias, input.reshape(-1, input.shape[-1]), wt)
    return out.reshape(tuple(input.shape[:-1]) + (weight.shape[0],))


# -------------------------------------------------------------------------------------------------- batch norm
class BatchNorm(Op, name="NativeBatchNormBackward0"):
    """Per channel (dimension 1), over the other dimensions (n values):
    out = w * xhat + b, xhat = (x - mean) * invstd, invstd = 1 / sqrt(var + eps).
    Training: mean and (biased) var of the batch, and
        dx = w * invstd * (g - sum(g) / n - xhat * sum(g * xhat) / n).
    Evaluation: the running statistics, constants:  dx = g * w * invstd.
    Both:  dw = sum(g * xhat),  db = sum(g)."""

    save_inputs = (0, 1)

    def forward(self, x, weight, bias, running_mean, running_var, training, momentum, eps):
        xp = xp_of(x)
        self.axes = (0,) + tuple(range(2, x.ndim))
        self.shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        self.training, self.eps, self.n = training, eps, x.size // x.shape[1]
        if training:
            mean = x.mean(axis=self.axes, keepdims=True)
            xc = x - mean
            var = (xc * xc).mean(axis=self.axes)
            n = self.n
            if running_mean is not None:  # updated in place, with the unbiased variance, as PyTorch does
                running_mean *= 1 - momentum
                running_mean += momentum * mean.reshape(-1)
            if running_var is not None:
                running_var *= 1 - momentum
                running_var += (momentum * n / (n - 1)) * var
        else:
            mean = running_mean.reshape(self.shape).copy()  # copies: later updates must not reach this backward
            xc = x - mean
            var = running_var
        invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype, copy=False).reshape(self.shape)
        self.extra = (mean, invstd)
        out = xc  # a fresh array: normalise it in place
        out *= invstd
        if weight is not None:
            out *= weight.reshape(self.shape)
        if bias is not None:
            out += bias.reshape(self.shape)
        return out

    def backward(self, g):
        x, weight = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        axes, n = self.axes, self.n
        if self.training and isinstance(x, Tensor):
            # with create_graph the batch statistics are functions of x: recompute them differentiably
            mean = x.mean(axis=axes, keepdims=True)
            xc = x - mean
            invstd = ((xc * xc).mean(axis=axes, keepdims=True) + self.eps) ** -0.5
        else:
            mean, invstd = self.extra
            xc = None  # only needed for xhat
        batch_dx = fx is not None and self.training
        gsum = g.sum(axis=axes, keepdims=True) if fb is not None or batch_dx else None
        xhat = (x - mean if xc is None else xc) * invstd if fw is not None or batch_dx else None
        gxhat = (g * xhat).sum(axis=axes, keepdims=True) if xhat is not None else None
        dx = None
        if fx is not None:
            scale = invstd if weight is None else invstd * weight.reshape(self.shape)
            dx = (g - gsum / n - xhat * (gxhat / n)) * scale if self.training else g * scale
        return dx, (gxhat.reshape(-1) if fw is not None else None), (gsum.reshape(-1) if fb is not None else None)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dimension 1) of a (N, C, ...) input to zero mean and unit variance, then scale by
    ``weight`` and shift by ``bias``.

    In training the batch's statistics are used and the running ones updated in place:
    running = (1 - momentum) * running + momentum * batch (the unbiased variance for ``running_var``). Otherwise the
    running statistics normalise.

    >>> import trainkit
    >>> x = trainkit.tensor([[1.0], [3.0]])
    >>> mean, var = trainkit.zeros(1), trainkit.ones(1)
    >>> batch_norm(x, mean, var, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> mean, var
    (tensor([0.2000]), tensor([1.1000]))
    """
    if input.ndim < 2:
        raise ValueError(f"Expected 2D or higher input (got {input.ndim}D input)")
    channels = input.shape[1]
    if training and input.numel() // max(channels, 1) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.size()}")
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    out = BatchNorm.apply(
        input, weight, bias,
        running_mean=None if running_mean is None else running_mean._data,
        running_var=None if running_var is None else running_var._data,
        training=training, momentum=momentum, eps=eps,
    )
    if training:
        for t in (running_mean, running_var):
            if t is not None:
                t._version_counter[0] += 1
    return out


# ---------------------------------------------------------------------------------------------------- embedding
class Embedding(Op, name="EmbeddingBackward0"):
    """out = weight[indices] (rows of weight).   dweight[r] = the sum of g over the positions whose index is r
    (divided by their count with ``scale_grad_by_freq``); the ``padding_idx`` row gets none."""

    def forward(self, weight, indices, padding_idx, scale_grad_by_freq):
        self.extra = indices
        self.weight_shape, self.padding_idx, self.scale = weight.shape, padding_idx, scale_grad_by_freq
        return xp_of(weight).take(weight, indices, axis=0)

    def backward(self, g):
        xp = xp_of(dual.data(g))
        flat = self.extra.reshape(-1)
        dim = self.weight_shape[1]
        g = g.reshape(-1, dim)
        # the sort behind unique groups repeated indices; one bincount then adds each group's rows, column by column
        rows, inverse, counts = xp.unique(flat, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        if isinstance(g, Tensor):  # create_graph: build the sum with differentiable ops
            if self.scale:
                g = g / counts[inverse].reshape(-1, 1).astype(g._data.dtype)
            if self.padding_idx is not None:
                g = dual.where((flat != self.padding_idx).reshape(-1, 1), g, 0)
            return index_into_zeros(g, self.weight_shape, flat, True)
        slots = (inverse.reshape(-1, 1) * dim + xp.arange(dim)).reshape(-1)
        sums = xp.bincount(slots, weights=g.reshape(-1), minlength=rows.size * dim).reshape(rows.size, dim)
        if self.scale:
            sums /= counts.reshape(-1, 1)
        out = xp.zeros(self.weight_shape, dtype=g.dtype)
        out[rows] = sums
        if self.padding_idx is not None:
            out[self.padding_idx] = 0
        return out


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by the integer tensor ``input``.

    Repeated indices add their gradients up; the ``padding_idx`` row gets no gradient. With ``max_norm``, the rows
    looked up are first rescaled in place so that their ``norm_type``-norm is at most ``max_norm``.

    >>> import trainkit
    >>> w = trainkit.arange(6.0).reshape(3, 2)
    >>> embedding(trainkit.tensor([2, 0]), w)
    tensor([[4., 5.],
            [0., 1.]])
    """
    if sparse:
        raise NotImplementedError("sparse gradients are not supported: trainkit has no sparse tensors")
    indices = input._data
    if indices.dtype.kind not in "iu":
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
            f"{input.dtype} instead (while checking arguments for embedding)"
        )
    num = weight.shape[0]
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= num):
        raise IndexError("index out of range in self")
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= num
    if max_norm is not None:
        _renorm_rows(weight, indices, max_norm, norm_type)
    return Embedding.apply(weight, indices=indices, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)


def _renorm_rows(weight: Tensor, indices, max_norm: float, norm_type: float) -> None:
    """Scale the looked-up rows whose norm exceeds ``max_norm`` down to it, in place and unrecorded (as PyTorch)."""
    xp = xp_of(weight._data)
    rows = xp.unique(indices.reshape(-1))
    picked = weight._data[rows]
    norms = (xp.abs(picked) ** norm_type).sum(axis=1) ** (1 / norm_type)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1).astype(picked.dtype)
    weight._data[rows] = picked * scale.reshape(-1, 1)
    weight._version_counter[0] += 1


# ------------------------------------------------------------------------------------------- regression losses
class PointwiseLoss(Op):
    """Base of the losses of d = input - target, element by element: ``loss(d)``, reduced, and its ``slope(d)``.
    dinput = slope(d) * g,  dtarget = -dinput."""

    save_inputs = (0, 1)

    def forward(self, x, y, reduction, param):
        self.reduction, self.param = reduction, param
        d = x - y
        self.count = d.size
        return _reduce(self.loss(d, param), reduction)

    def backward(self, g):
        x, y = self.saved_tensors
        gd = self.slope(x - y, self.param) * _unreduce(g, self.reduction, self.count)
        (fx, _), (fy, _) = self.next_functions
        return (gd if fx is not None else None), (-gd if fy is not None else None)


class MseLoss(PointwiseLoss, name="MseLossBackward0"):
    """loss = d^2.   slope = 2 d."""

    @staticmethod
    def loss(d, param):
        return d * d

    @staticmethod
    def slope(d, param):
        return 2 * d


class HuberLoss(PointwiseLoss, name="HuberLossBackward0"):
    """loss = d^2 / 2 where |d| < delta, else delta (|d| - delta / 2).   slope = d clipped to [-delta, delta]."""

    @staticmethod
    def loss(d, delta):
        a = xp_of(d).abs(d)
        return xp_of(d).where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))

    @staticmethod
    def slope(d, delta):
        return d.clip(-delta, delta)


class SmoothL1Loss(PointwiseLoss, name="SmoothL1LossBackward0"):
    """loss = d^2 / (2 beta) where |d| < beta, else |d| - beta / 2.   slope = d / beta clipped to [-1, 1]."""

    @staticmethod
    def loss(d, beta):
        a = xp_of(d).abs(d)
        return xp_of(d).where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)

    @staticmethod
    def slope(d, beta):
        return (d / beta).clip(-1, 1)


def _pointwise(cls, input: Tensor, target: Tensor, reduction: str, param=None) -> Tensor:
    _warn_if_broadcast(input, target)
    x, y = tmath.promote(input, target)
    return cls.apply(x, y, reduction=reduction, param=param)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Squared error (input - target)^2, averaged (or summed, or per element).

    >>> import trainkit
    >>> mse_loss(trainkit.tensor([1.0, 2.0]), trainkit.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    return _pointwise(MseLoss, input, target, _reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Absolute error |input - target|, averaged (or summed, or per element); composed of sub, abs and mean/sum.

    >>> import trainkit
    >>> l1_loss(trainkit.tensor([1.0, -3.0]), trainkit.zeros(2))
    tensor(2.)
    """
    reduction = _reduction(reduction, size_average, reduce)
    _warn_if_broadcast(input, target)
    loss = tmath.abs(tmath.sub(input, target))
    return loss if reduction == "none" else (loss.mean() if reduction == "mean" else loss.sum())


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Squared error for |d| < delta, delta-scaled absolute error beyond (d = input - target).

    >>> import trainkit
    >>> huber_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise(HuberLoss, input, target, _reduction(reduction), delta)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Squared error divided by 2 beta for |d| < beta, absolute error minus beta/2 beyond; beta = 0 is L1.

    >>> import trainkit
    >>> smooth_l1_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    reduction = _reduction(reduction, size_average, reduce)
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise(SmoothL1Loss, input, target, reduction, beta)


# --------------------------------------------------------------------------------------- classification losses
def _to_rows(x):
    """(N, C, d1, ...) as (N * d1 * ..., C), classes last; (N, C) as it is; (C,) as (1, C)."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    moved = dual.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,))
    return moved.reshape(-1, x.shape[1])


def _from_rows(rows, shape: tuple):
    """The inverse of ``_to_rows`` for an input of ``shape``."""
    if len(shape) <= 2:
        return rows.reshape(shape)
    moved = rows.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return dual.permute(moved, (0, len(shape) - 1) + tuple(range(1, len(shape) - 1)))


def _logsumexp_rows(rows):
    """log(sum(e^x)) of each row, kept as a column."""
    xp = xp_of(rows)
    m = rows.max(axis=1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    return xp.log(xp.exp(rows - m).sum(axis=1, keepdims=True)) + m


def _row_scale(g, reduction: str, count):
    """The gradient of each row's loss, as a column (or a scalar for 'mean' and 'sum')."""
    s = _unreduce(g, reduction, count)
    return s.reshape(-1, 1) if reduction == "none" else s


class NllLoss(Op, name="NllLossBackward0"):
    """loss_i = -w[t_i] x[i, t_i] (0 where t_i = ignore_index); 'mean' divides the sum by sum_i w[t_i].
    dx[i, t_i] = -w[t_i] * g_i (g_i: row i's share of the output gradient), 0 elsewhere."""

    def forward(self, x, target, weight, ignore_index, reduction):
        xp = xp_of(x)
        rows = _to_rows(x)
        t, wt = _picked(target, weight, ignore_index, rows.shape[1], x.dtype)
        self.in_shape, self.reduction, self.count = x.shape, reduction, wt.sum()
        self.extra = (t, wt)
        loss = -wt * rows[xp.arange(rows.shape[0]), t]
        return _reduce(loss.reshape(target.shape), reduction, self.count)

    def backward(self, g):
        t, wt = self.extra
        m, c = len(t), self.in_shape[1] if len(self.in_shape) > 1 else self.in_shape[0]
        xp = xp_of(t)
        values = -wt * _unreduce(g, self.reduction, self.count).reshape(-1)
        if isinstance(values, Tensor):
            rows = index_into_zeros(values, (m, c), (xp.arange(m), t), False)
        else:
            rows = xp.zeros((m, c), dtype=values.dtype)
            rows[xp.arange(m), t] = values
        return _from_rows(rows, self.in_shape)


class NllLoss2d(NllLoss, name="NllLoss2DBackward0"):
    pass


def _picked(target, weight, ignore_index: int, classes: int, dtype):
    """Each row's target class (0 where ignored) and the weight w[t_i] of its term (0 where ignored)."""
    xp = xp_of(target)
    t = target.reshape(-1)
    valid = t != ignore_index
    t = xp.where(valid, t, 0)
    w = xp.ones(classes, dtype=dtype) if weight is None else weight
    return t, xp.where(valid, w[t], 0).astype(dtype, copy=False)


class CrossEntropy(Op, name="NllLossBackward0"):
    """Cross-entropy with class-index targets, log-softmax fused in. With logp = log_softmax(x) over the classes
    and label smoothing e:
        loss_i = -sum_c q_ic logp_ic,   q_ic = (1 - e) w[t_i] [c = t_i] + (e / C) w_c   (q_i = 0 where ignored),
    'mean' divides the sum by sum_i w[t_i].   dx_i = g_i (softmax(x_i) sum_c q_ic - q_i)."""

    save_inputs = (0,)

    def forward(self, x, target, weight, ignore_index, reduction, smoothing):
        xp = xp_of(x)
        rows = _to_rows(x)
        m, c = rows.shape
        t, wt = _picked(target, weight, ignore_index, c, x.dtype)
        lse = _logsumexp_rows(rows)
        loss = wt * (lse[:, 0] - rows[xp.arange(m), t])
        if smoothing:
            w = xp.ones(c, dtype=x.dtype) if weight is None else weight
            # sum_c w_c (lse - x_c) over the kept rows: no full log-softmax array needed
            smooth = (lse[:, 0] * w.sum() - rows @ w) * (target.reshape(-1) != ignore_index)
            loss = (1 - smoothing) * loss + (smoothing / c) * smooth
        self.in_shape, self.reduction, self.smoothing, self.count = x.shape, reduction, smoothing, wt.sum()
        self.extra = (t, wt, lse, weight, target.reshape(-1) != ignore_index)
        return _reduce(loss.reshape(target.shape), reduction, self.count)

    def backward(self, g):
        (x,) = self.saved_tensors
        t, wt, lse, weight, valid = self.extra
        rows = _to_rows(x)
        m, c = rows.shape
        xp = xp_of(t)
        p = activation.softmax(rows, 1) if isinstance(rows, Tensor) else xp.exp(rows - lse)
        s = _row_scale(g, self.reduction, self.count)
        e = self.smoothing
        w = xp.ones(c, dtype=wt.dtype) if weight is None else weight
        qsum = ((1 - e) * wt + (e / c) * w.sum() * valid).reshape(-1, 1)
        if isinstance(p, Tensor) or e:
            q = xp.zeros((m, c), dtype=wt.dtype)
            q[xp.arange(m), t] = (1 - e) * wt
            if e:
                q += (e / c) * w * valid.reshape(-1, 1)
            dx = (p * qsum - q) * s
        else:  # the common case in place: subtract the target's weight from its column only
            p *= qsum * s
            p[xp.arange(m), t] -= wt * (s.reshape(-1) if self.reduction == "none" else s)
            dx = p
        return _from_rows(dx, self.in_shape)


class CrossEntropy2d(CrossEntropy, name="NllLoss2DBackward0"):
    pass


class CrossEntropySmooth(CrossEntropy, name="CrossEntropyLossBackward0"):
    """Class-index targets with label smoothing (PyTorch composes it of several nodes; here it is one)."""


class CrossEntropyProbs(Op, name="CrossEntropyLossBackward0"):
    """Cross-entropy with class-probability targets P, log-softmax fused in. With P' = P (1 - e) + e / C:
        loss_i = -sum_c w_c P'_ic logp_ic,   'mean' divides by the number of rows.
    dx_i = g_i (softmax(x_i) sum_c q_ic - q_i) with q = w P',   dP_ic = -g_i (1 - e) w_c logp_ic,
    dw_c = -sum_i g_i P'_ic logp_ic."""

    save_inputs = (0, 1, 2)

    def forward(self, x, target, weight, reduction, smoothing):
        rows = _to_rows(x)
        lse = _logsumexp_rows(rows)
        q = self._smoothed(_to_rows(target), smoothing, rows.shape[1])
        if weight is not None:
            q = q * weight
        loss = -(q * (rows - lse)).sum(axis=1)
        self.in_shape, self.reduction, self.smoothing, self.count = x.shape, reduction, smoothing, rows.shape[0]
        self.extra = lse
        return _reduce(loss.reshape(x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()), reduction)

    @staticmethod
    def _smoothed(target_rows, smoothing: float, classes: int):
        return target_rows * (1 - smoothing) + smoothing / classes if smoothing else target_rows

    def backward(self, g):
        x, target, weight = self.saved_tensors
        rows = _to_rows(x)
        logp = activation.log_softmax(rows, 1) if isinstance(rows, Tensor) else rows - self.extra
        s = _row_scale(g, self.reduction, self.count)
        (fx, _), (ft, _), (fw, _) = self.next_functions
        dx = dt = dw = None
        if fx is not None or fw is not None:
            smoothed = self._smoothed(_to_rows(target), self.smoothing, rows.shape[1])
        if fx is not None:
            q = smoothed if weight is None else smoothed * weight
            dx = _from_rows((dual.exp(logp) * q.sum(axis=1, keepdims=True) - q) * s, self.in_shape)
        if ft is not None:
            dlogp = logp if weight is None else logp * weight
            dt = _from_rows(dlogp * (s * -(1 - self.smoothing)), self.in_shape)
        if fw is not None:
            dw = -(smoothed * logp * s).sum(axis=0)
        return dx, dt, dw


def _check_class_target(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int):
    """Validate class-index targets as PyTorch's nll_loss does."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim != 1 and (target.ndim == 0 or input.shape[0] != target.shape[0]):
        got = target.shape[0] if target.ndim else 1
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({got}).")
    if input.ndim <= 2 and target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    expected = tuple(input.shape[:1]) + tuple(input.shape[2:])
    if input.ndim > 2 and tuple(target.shape) != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    if target._data.dtype.kind not in "iu":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype}")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got weight tensor "
            f"of shape: {list(weight.shape)}"
        )
    t = target._data
    bad = ((t < 0) | (t >= classes)) & (t != ignore_index)
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")


def _class_weight(weight: Tensor | None, input: Tensor, fn: str):
    if weight is None:
        return None
    if weight.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument 'weight'. This input cannot have "
            "requires_grad True."
        )
    return weight._data.astype(input._data.dtype, copy=False)


def _by_rank(cls_1d, cls_2d, input: Tensor, target: Tensor, reduction: str, **params) -> Tensor:
    """Run a class-index loss op as PyTorch's nll_loss_nd does: up to 2-D directly, 4-D as 2-D (spatial), and
    other ranks through a (N, C, 1, -1) view whose output is viewed back."""
    if input.ndim <= 2:
        return cls_1d.apply(input, target=target._data, reduction=reduction, **params)
    if input.ndim == 4:
        return cls_2d.apply(input, target=target._data, reduction=reduction, **params)
    n, c = input.shape[0], input.shape[1]
    out = cls_2d.apply(input.reshape(n, c, 1, -1), target=target._data.reshape(n, 1, -1), reduction=reduction,
                       **params)
    return out.reshape(tuple(target.shape)) if reduction == "none" else out


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class-index targets from log-probabilities ``input`` of shape (N, C), (C,) or
    (N, C, d1, ...): -w[t] * input[t], averaged over the total weight of the counted targets.

    >>> import trainkit
    >>> logp = trainkit.tensor([[-0.5, -1.0], [-2.0, -0.1]])
    >>> nll_loss(logp, trainkit.tensor([0, 1]))
    tensor(0.3000)
    """
    reduction = _reduction(reduction, size_average, reduce)
    _check_class_target(input, target, weight, ignore_index)
    weight = _class_weight(weight, input, "nll_loss_forward")
    return _by_rank(NllLoss, NllLoss2d, input, target, reduction, weight=weight, ignore_index=ignore_index)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between the softmax of logits ``input`` (N, C), (C,) or (N, C, d1, ...) and ``target``.

    ``target`` holds class indices (shape (N,) or (N, d1, ...), integers) or class probabilities (the shape of
    ``input``, floats). One fused op computes log-softmax and the loss, stably (no exp overflows) and without keeping
    a log-probability array alive. ``label_smoothing`` e mixes the target with the uniform distribution:
    (1 - e) * target + e / C.

    >>> import trainkit
    >>> logits = trainkit.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> cross_entropy(logits, trainkit.tensor([0, 2]))
    tensor(0.6691)
    """
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim >= 1 and tuple(input.shape) == tuple(target.shape):
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    _check_class_target(input, target, weight, ignore_index)
    weight = _class_weight(weight, input, "nll_loss_forward")
    params = dict(weight=weight, ignore_index=ignore_index, smoothing=label_smoothing)
    if label_smoothing:
        return _by_rank(CrossEntropySmooth, CrossEntropySmooth, input, target, reduction, **params)
    return _by_rank(CrossEntropy, CrossEntropy2d, input, target, reduction, **params)


def _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing) -> Tensor:
    if not target.is_floating_point():
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got weight tensor "
            f"of shape: {list(weight.shape)}"
        )
    x, target = tmath.promote(input, target)
    return CrossEntropyProbs.apply(x, target, _like(weight, x), reduction=reduction, smoothing=label_smoothing)


def _constant_weight(name: str, t: Tensor | None, input: Tensor, fn: str):
    """A weight PyTorch does not differentiate: its array in ``input``'s dtype, after checking its shape."""
    if t is None:
        return None
    if t.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument '{name}'. This input cannot have "
            "requires_grad True."
        )
    try:
        shape = np.broadcast_shapes(tuple(t.shape), tuple(input.shape))
    except ValueError:
        shape = None
    if shape != tuple(input.shape):
        raise RuntimeError(
            f"{name} of shape {list(t.shape)} does not broadcast to the input's shape {list(input.shape)}"
        )
    return t._data.astype(input._data.dtype, copy=False)


class BinaryCrossEntropy(Op, name="BinaryCrossEntropyBackward0"):
    """loss = -w (t log x + (1 - t) log(1 - x)), each log clamped at -100 (as PyTorch).
    dx = g w (x - t) / max(x (1 - x), 1e-12),  dt = g w (log(1 - x) - log x)."""

    save_inputs = (0, 1)

    def forward(self, x, t, weight, reduction):
        xp = xp_of(x)
        with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped
            loss = -(t * xp.maximum(xp.log(x), -100) + (1 - t) * xp.maximum(xp.log1p(-x), -100))
        if weight is not None:
            loss *= weight
        self.reduction, self.count, self.weight = reduction, loss.size, weight
        return _reduce(loss, reduction)

    def backward(self, g):
        x, t = self.saved_tensors
        (fx, _), (ft, _) = self.next_functions
        s = _unreduce(g, self.reduction, self.count)
        if self.weight is not None:
            s = s * self.weight
        dx = s * (x - t) / (x * (1 - x)).clip(1e-12, None) if fx is not None else None
        with np.errstate(divide="ignore"):
            dt = s * (dual.log(1 - x) - dual.log(x)) if ft is not None else None
        return dx, dt


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target`` (in [0, 1]), optionally
    weighted element by element (``weight`` broadcasts; it gets no gradient, as in PyTorch).

    >>> import trainkit
    >>> binary_cross_entropy(trainkit.tensor([0.5, 1.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    x, t = tmath.promote(input, target)
    weight = _constant_weight("weight", weight, x, "binary_cross_entropy")
    for name, v in (("input", x), ("target", t)):
        if bool(((v._data < 0) | (v._data > 1)).any()):
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    return BinaryCrossEntropy.apply(x, t, weight=weight, reduction=reduction)


class BinaryCrossEntropyWithLogits(Op, name="BinaryCrossEntropyWithLogitsBackward0"):
    """With sp = softplus(-x) = log(1 + e^-x) and l = 1 + (pw - 1) t (l = 1 without pos_weight pw):
    loss = w ((1 - t) x + l sp), which is binary cross-entropy of sigmoid(x), computed without overflow.
    dx = g w (l sigmoid(x) - pw t),  dt = g w ((pw - 1) sp - x)."""

    save_inputs = (0, 1)

    def forward(self, x, t, weight, pos_weight, reduction):
        sp = _softplus_neg(x)
        loss = (1 - t) * x + (sp if pos_weight is None else (1 + (pos_weight - 1) * t) * sp)
        if weight is not None:
            loss *= weight
        self.reduction, self.count, self.weight, self.pos_weight = reduction, loss.size, weight, pos_weight
        return _reduce(loss, reduction)

    def backward(self, g):
        x, t = self.saved_tensors
        (fx, _), (ft, _) = self.next_functions
        s = _unreduce(g, self.reduction, self.count)
        if self.weight is not None:
            s = s * self.weight
        pw = self.pos_weight
        dx = dt = None
        if fx is not None:
            dx = s * (_sigmoid(x) - t) if pw is None else s * ((1 + (pw - 1) * t) * _sigmoid(x) - pw * t)
        if ft is not None:
            dt = -s * x if pw is None else s * ((pw - 1) * _softplus_neg(x) - x)
        return dx, dt


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of sigmoid(input) against ``target``, in one numerically stable op.

    ``pos_weight`` (broadcast against the input, usually one per class) weighs the positive term; neither it nor
    ``weight`` gets a gradient, as in PyTorch.

    >>> import trainkit
    >>> binary_cross_entropy_with_logits(trainkit.tensor([0.0, 100.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    x, t = tmath.promote(input, target)
    fn = "binary_cross_entropy_with_logits"
    weight = _constant_weight("weight", weight, x, fn)
    pos_weight = _constant_weight("pos_weight", pos_weight, x, fn)
    return BinaryCrossEntropyWithLogits.apply(x, t, weight=weight, pos_weight=pos_weight, reduction=reduction)
