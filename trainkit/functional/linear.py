"""The affine map ``linear``: input @ weight^T + bias, one ``AddmmBackward0`` node for 2-D inputs."""

from __future__ import annotations

import numpy as np

from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import BFLOAT16_NP, FLOAT32_NP, xp_of
from ..autograd.function import Op
from ..autograd.ops import linalg
from ..autograd.tensor import Tensor

__all__ = ["linear"]


class Addmm(Op, name="AddmmBackward0"):
    """out = b + x @ wt.   db = g (summed over rows by the engine),  dx = g @ wt^T,  dwt = x^T @ g."""

    save_inputs = (1, 2)
    save_only_for = {1: 2, 2: 1}

    def forward(self, b, x, wt):
        self.row_bias = b.ndim < 2  # the same bias added to every row: its gradient is the sum of g's rows
        # wt = weight.t() of a C-ordered weight: wt's gradient is computed in that layout (see backward)
        self.wt_transposed = not wt.flags.c_contiguous and wt.flags.f_contiguous
        # accumulate in float32 and round once, as PyTorch's CPU kernel does
        if x.dtype is not FLOAT32_NP and x.dtype == BFLOAT16_NP:
            return (_mm(x.astype(np.float32), wt.astype(np.float32)) + b.astype(np.float32)).astype(x.dtype)
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
    # NumPy's bfloat16 dot rounds every partial sum: accumulate in float32
    if a.dtype is not FLOAT32_NP and a.dtype == BFLOAT16_NP:
        return a.astype(np.float32).dot(b.astype(np.float32)).astype(a.dtype)
    return a.dot(b)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight^T + bias, for inputs of shape (*, in_features) and weight (out_features, in_features).

    >>> import trainkit
    >>> linear(trainkit.ones(2, 3), trainkit.ones(4, 3), trainkit.zeros(4)).shape
    trainkit.Size([2, 4])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, weight, bias = autocast_inputs("linear", input, weight, bias)
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
