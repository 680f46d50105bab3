"""``cdist``: the p-norm distance between every row of one batch of row vectors and every row of another."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import api, grad_mode
from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.ops.shape import cat
from ..autograd.tensor import Tensor

__all__ = ["cdist"]

COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
DTYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    r"""``out[..., i, j]`` :math:`= \lVert x_1[..., i, :] - x_2[..., j, :] \rVert_p` for ``x1`` of shape
    ``(B..., P, M)`` and ``x2`` of shape ``(B..., R, M)`` (batch dimensions broadcast): shape ``(B..., P, R)``.

    ``p`` is any value >= 0: ``p = 0`` counts the differing coordinates (its gradient is zero), ``p = inf`` is the
    largest coordinate difference (its gradient goes to every coordinate that reaches it, as torch's). The
    gradient with respect to either input is
    :math:`\partial d / \partial x_1 = \mathrm{sign}(\delta)\,|\delta|^{p-1} / d^{p-1}` with
    :math:`\delta = x_1 - x_2`, and zero where the distance is zero. ``compute_mode`` is accepted (trainkit always
    takes the differences directly, the most precise of torch's ways).

    >>> import trainkit
    >>> cdist(trainkit.tensor([[0.0, 0.0], [1.0, 1.0]]), trainkit.tensor([[3.0, 4.0]]))
    tensor([[5.0000],
            [3.6056]])
    """
    if compute_mode not in COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.dim()}D")
        if not x.is_floating_point():
            kind = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte"}
            raise RuntimeError(
                f"cdist only supports floating-point dtypes, {name} got: {kind.get(x.dtype.name, x.dtype.name)}"
            )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype != x2.dtype:
        raise RuntimeError(
            f"expected scalar type {DTYPE_NAMES.get(x1.dtype.name, x1.dtype.name)} but found "
            f"{DTYPE_NAMES.get(x2.dtype.name, x2.dtype.name)}"
        )
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    p = float(p)
    uses_mm = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == COMPUTE_MODES[0] and (x1.shape[-2] > 25 or x2.shape[-2] > 25)
    )
    if p == 2.0 and uses_mm:
        return _euclidean_by_products(x1, x2)
    return Cdist.apply(x1, x2, p=p)


class Cdist(Op, name="CdistBackward0"):
    r"""out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, from the differences d = x1_i - x2_j.

    dx1_i = sum_j g_ij w(d_ij),  dx2_j = -sum_i g_ij w(d_ij),  with w = 0 for p = 0, sign(d) for p = 1,
    d / out for p = 2, sign(d) [|d| = out] for p = inf, sign(d) |d|^(p-1) / out^(p-1) otherwise (PyTorch's
    kernel: 0 where out = 0, and where d = 0 for p < 1).
    """

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x1, x2, p):
        self.p = p
        xp = xp_of(x1)
        diff = x1[..., :, None, :] - x2[..., None, :, :]
        if p == 0:
            return (diff != 0).sum(axis=-1).astype(x1.dtype)
        size = xp.abs(diff)
        if p == 1:
            return size.sum(axis=-1)
        if p == 2:
            return xp.sqrt(xp.einsum("...m,...m->...", diff, diff))
        if math.isinf(p):
            return size.max(axis=-1) if size.shape[-1] else size.sum(axis=-1)
        return (size**p).sum(axis=-1) ** (1 / p)

    def backward(self, g):
        x1, x2, out = self.saved_tensors
        if isinstance(g, Tensor):  # create_graph: the gradient as a function of the inputs, by the ops
            return _recompute_backward(g, x1, x2, self.p, self.next_functions)
        p, xp = self.p, xp_of(g)
        diff = x1[..., :, None, :] - x2[..., None, :, :]
        dist = out[..., None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if p == 0:
                w = xp.zeros_like(diff)
            elif p == 1:
                w = xp.sign(diff)
            elif p == 2:
                w = xp.where(dist == 0, 0, diff / dist)
            elif math.isinf(p):
                w = xp.sign(diff) * (xp.abs(diff) == dist)
            elif p < 2:
                skip = (dist == 0) | ((diff == 0) & (p < 1))
                w = xp.where(skip, 0, xp.sign(diff) * xp.abs(diff) ** (p - 1) / dist ** (p - 1))
            else:
                w = xp.where(dist == 0, 0, diff * xp.abs(diff) ** (p - 2) / dist ** (p - 1))
        gw = g[..., None] * w.astype(g.dtype, copy=False)
        (f1, _), (f2, _) = self.next_functions
        return (gw.sum(axis=-2) if f1 is not None else None), (-gw.sum(axis=-3) if f2 is not None else None)


def _recompute_backward(g, x1, x2, p, next_functions):
    wanted = [(i, x) for i, (x, (fn, _)) in enumerate(zip((x1, x2), next_functions)) if fn is not None]
    with grad_mode.enable_grad():
        out = _cdist_with_ops(x1, x2, p)
        grads = api.grad(out, [x for _, x in wanted], g, create_graph=True, allow_unused=True)
    result = [None, None]
    for (i, x), gi in zip(wanted, grads):
        result[i] = gi if gi is not None else x * 0
    return tuple(result)


def _euclidean_by_products(x1: Tensor, x2: Tensor) -> Tensor:
    """PyTorch's matrix-product form of the p = 2 distance for many rows: sqrt(|a|^2 + |b|^2 - 2 a.b), clamped
    at 1e-30 before the root, made of ops (its graph ends in a view, as PyTorch's)."""
    batch = np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    x1 = x1.expand(*batch, *x1.shape[-2:])
    x2 = x2.expand(*batch, *x2.shape[-2:])
    n1 = x1.pow(2).sum(-1, keepdim=True)
    n2 = x2.pow(2).sum(-1, keepdim=True)
    a = cat([x1 * -2, n1, n1 * 0 + 1], -1)
    b = cat([x2, n2 * 0 + 1, n2], -1)
    out = (a @ b.transpose(-2, -1)).clamp_min(1e-30).sqrt()
    return out.view(*batch, x1.shape[-2], x2.shape[-2])


def _cdist_with_ops(x1: Tensor, x2: Tensor, p: float) -> Tensor:
    """The distances made of differentiable ops (for second derivatives)."""
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (B..., P, R, M)
    if p == 0:
        count = (diff != 0).sum(-1).to(x1.dtype)
        return count + (diff * 0).sum(-1)  # no gradient, but a node, as torch's
    if math.isinf(p):
        size = diff.abs()
        largest = size.detach().amax(-1)
        reaches = size.detach() == largest.unsqueeze(-1)
        # the value is the largest difference; the gradient is sign(diff) at every coordinate reaching it
        return largest + ((size - size.detach()) * reaches).sum(-1)
    return diff.norm(p=p, dim=-1)
