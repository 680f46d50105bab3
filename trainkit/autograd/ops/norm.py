"""Norms: norm (vector p-norms, and the matrix norms torch.norm passes on) and dist."""

from __future__ import annotations

import numpy as np

from ..backend import float32_for_bfloat16, kind_of, to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .linalg import svdvals
from .math import promote
from .rearrange import movedim
from .reduction import sum as tsum
from .reduction import unique_dims
from .type_names import scalar_name

__all__ = ["dist", "norm"]


def _norm_forward(x, p, axes, keepdim):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # inf and 0 results are as PyTorch's
        return _vector_norm(x, p, axes, keepdim)


def _vector_norm(x, p, axes, keepdim):
    xp = xp_of(x)
    a = xp.abs(x)
    if p == float("inf"):
        if a.size == 0:
            raise RuntimeError(
                "linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation does not "
                "have an identity"
            )
        return a.max(axis=axes, keepdims=keepdim)
    if p == -float("inf"):
        return a.min(axis=axes, keepdims=keepdim)
    if p == 0:
        return (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    if p == 1:
        return a.sum(axis=axes, keepdims=keepdim)
    if p == 2:
        return xp.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    return (a**p).sum(axis=axes, keepdims=keepdim) ** (1.0 / p)


def _norm_backward(g, x, out, p, in_shape, axes, keepdim):
    """d||x||_p / dx times g, on arrays or Tensors (x and out as saved), by PyTorch's formula for each p, so that
    zeros, infinities, overflow and nan give what they give there."""
    xd = dual.data(x)
    xp = xp_of(xd)
    g = dual.keep_dims(g, in_shape, axes, keepdim)
    out = dual.keep_dims(out, in_shape, axes, keepdim)
    od = dual.data(out)
    sign = xp.sign(xd)
    nan = xp.isnan(xd)
    if nan.any():  # PyTorch's sign of nan is 0
        sign = xp.where(nan, 0, sign)
    zero = od == 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if p == 1:
            return g * sign
        if p == 2:  # x / out first: g * x could overflow where x / out is finite
            return g * dual.where(zero, 0, x / out)
        if abs(p) == float("inf"):  # the gradient is shared among the extremes, and any nan takes a share
            hit = (xp.abs(xd) == od) | nan
            return sign * (g / hit.sum(axis=axes, keepdims=True).astype(xd.dtype) * hit.astype(xd.dtype))
        absx = x * sign
        if p < 1:
            return sign * dual.where(xd == 0, 0, absx ** (p - 1)) * g * out ** (1 - p)
        scale = dual.where(zero, 0, g / out ** (p - 1))
        if p < 2:
            return sign * absx ** (p - 1) * scale
        return x * absx ** (p - 2) * scale


class VectorNorm(Op, name="LinalgVectorNormBackward0"):
    """out = (sum |x|^p)^(1/p) over ``axes`` (max |x| for p = inf).

    dx = g x / out (p = 2),  g sign(x) (p = 1),  g sign(x) shared among the maxima (p = inf),
    g sign(x) |x|^(p-1) / out^(p-1) otherwise; 0 where out is 0.
    """

    save_inputs = (0,)
    save_output = True

    @float32_for_bfloat16
    def forward(self, x, p, axes, keepdim):
        self.p, self.axes, self.keepdim, self.in_shape = p, axes, keepdim, x.shape
        return _norm_forward(x, p, axes, keepdim)

    def backward(self, g):
        if self.p == 0:  # a count of nonzeros: PyTorch gives no gradient at all (the input's .grad stays None)
            return None
        x, out = self.saved_tensors
        return _norm_backward(g, x, out, self.p, self.in_shape, self.axes, self.keepdim)


class Dist(Op, name="DistBackward0"):
    """out = ||x - y||_p.   dx = the norm's gradient at x - y,  dy = its negative."""

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x, y, p):
        self.p = p
        with np.errstate(invalid="ignore"):  # inf - inf is nan, silently as in PyTorch
            diff = x - y
        self.in_shape = diff.shape
        return _norm_forward(diff, p, None, False)

    def backward(self, g):
        if self.p == 0:
            if self.next_functions[1][0] is not None:  # PyTorch negates the missing gradient of input for other's
                raise RuntimeError(
                    "Expected a proper Tensor but got None (or an undefined Tensor in C++) for argument #0 'self': "
                    "dist with p=0 has no gradient; detach other or use another p"
                )
            return None, None
        x, y, out = self.saved_tensors
        with np.errstate(invalid="ignore"):
            diff = x - y
        gd = _norm_backward(g, diff, out, self.p, self.in_shape, None, False)
        return gd, -gd


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The p-norm of ``input`` over ``dim`` (all dimensions when None), as ``torch.norm``.

    ``p`` is a number (2, 1, inf, -inf, 0, any other) for the vector norm of the elements; 'fro' is the same as 2
    (over at most two dimensions); 'nuc' is the nuclear norm, the sum of the singular values of the matrices over
    the two dimensions ``dim`` (the last two of a 2-D input when None).

    >>> import trainkit
    >>> trainkit.norm(trainkit.tensor([[3.0, 0.0], [0.0, -4.0]]), 'nuc')
    tensor(7.)
    >>> trainkit.norm(trainkit.tensor([[3.0, 4.0], [0.0, 0.0]]), 'fro', dim=1)
    tensor([5., 0.])
    """
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            p = 2.0
        else:
            return _matrix_norm(input, p, dim, keepdim, dtype)
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got " + scalar_name(input)
        )
    if dtype is not None:
        target = to_dtype(dtype)
        if not target.is_floating_point:
            raise RuntimeError(
                f"linalg.vector_norm: dtype should be floating point or complex, but got {scalar_name(target.np)}"
            )
        input = input.to(target)
    pv = 2.0 if p is None else float(p)
    if dim is None:
        axes = None
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = tuple(sorted(unique_dims(input, dims))) or None
    if input._data.ndim == 0:
        axes = None
    return VectorNorm.apply(input, p=pv, axes=axes, keepdim=bool(keepdim))


def _matrix_norm(input: Tensor, order: str, dim, keepdim: bool, dtype) -> Tensor:
    """``linalg.matrix_norm`` for the orders ``torch.norm`` passes on to it: 'nuc', and 'fro' over more than two
    dimensions (which is an error there too)."""
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(
            "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got " + scalar_name(input)
        )
    if order not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {order} not supported.")
    if input._data.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims = list(range(input._data.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if len(dims) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got " + " ".join(str(d) for d in dims))
    d0, d1 = input._dim(dims[0]), input._dim(dims[1])
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if dtype is not None:
        input = input.to(dtype)
    nd = input._data.ndim
    matrices = input if (d0, d1) == (nd - 2, nd - 1) else movedim(input, (d0, d1), (-2, -1))
    if not keepdim:
        return tsum(svdvals(matrices), -1)
    return movedim(tsum(svdvals(matrices), -1, keepdim=True).unsqueeze(-1), (nd - 2, nd - 1), (d0, d1))


def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The p-norm of ``input - other`` (the two broadcast); both floating, as in PyTorch."""
    input, other = promote(input, other)
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {scalar_name(input)} instead."
        )
    return Dist.apply(input, other, p=float(p))
