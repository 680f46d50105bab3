"""``cdist``: the p-norm distance between every row of one batch of row vectors and every row of another."""

from __future__ import annotations

import math

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
