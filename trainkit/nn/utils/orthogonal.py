"""``orthogonal``: a matrix (or each matrix of a batch) kept orthogonal, as a parametrization; PyTorch's
``torch.nn.utils.parametrizations.orthogonal``, with the ``matrix_exp`` and ``householder`` maps.

With ``use_trivialization`` (the default) the registered value is kept in the buffer ``base`` and the parameter
``original`` starts at the point that maps to it; the optimizer then moves ``original`` and ``base @ map(original)``
stays orthogonal.

>>> import trainkit
>>> from trainkit import nn
>>> layer = orthogonal(nn.Linear(4, 4))
>>> w = layer.weight
>>> bool(trainkit.allclose(w @ w.T, trainkit.eye(4), atol=1e-5))
True
"""

from __future__ import annotations

import math

import numpy as np

from ...autograd import grad_mode
from ...autograd.creation import eye, tensor, zeros
from ...autograd.ops.join import cat
from ...autograd.tensor import Tensor
from ...layers.module import Module
from . import parametrize

__all__ = ["orthogonal", "householder_product", "matrix_exp"]

MAPS = ("matrix_exp", "cayley", "householder")


def matrix_exp(a: Tensor) -> Tensor:
    """``exp(A) = Σ Aᵏ/k!`` of a square matrix (or batch), by scaling and squaring: ``exp(A) = exp(A/2ˢ)^(2ˢ)`` with
    ``‖A/2ˢ‖ ≤ 1/2`` and the series to degree 18. Written with matmuls, so gradients flow through it.

    >>> import trainkit
    >>> matrix_exp(trainkit.zeros(2, 2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    n = a.shape[-1]
    norm = float(a.detach().abs().sum(-2).max()) if a.numel() else 0.0
    squarings = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    a = a / float(2**squarings)
    identity = eye(n, dtype=a.dtype, device=a.device)
    result, term = identity + a, a
    for k in range(2, 19):
        term = (term @ a) / k
        result = result + term
    for _ in range(squarings):
        result = result @ result
    return result


def householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H₁ H₂ ⋯ H_k``, ``Hᵢ = I − τᵢ vᵢ vᵢᵀ``, ``vᵢ`` being column ``i`` of ``a`` below
    the diagonal with a 1 on it (``torch.linalg.householder_product``); differentiable in ``a`` and ``tau``.

    >>> import trainkit
    >>> householder_product(trainkit.zeros(2, 2), trainkit.tensor([2.0, 0.0])).tolist()
    [[-1.0, 0.0], [0.0, 1.0]]
    """
    n, k = a.shape[-2], a.shape[-1]
    q = eye(n, dtype=a.dtype, device=a.device)
    positions = np.arange(n)
    for i in range(k):
        below = tensor((positions > i).astype(np.float64), dtype=a.dtype, device=a.device)
        unit = tensor((positions == i).astype(np.float64), dtype=a.dtype, device=a.device)
        v = a[..., :, i] * below + unit
        q = q - tau[..., i].unsqueeze(-1).unsqueeze(-1) * ((q @ v.unsqueeze(-1)) @ v.unsqueeze(-2))
    return q[..., :, :k]


def is_orthogonal(q: np.ndarray) -> bool:
    """Whether the columns of ``q`` are orthonormal, to ``10 n ε``."""
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * np.finfo(q.dtype).eps
    return bool(np.allclose(np.swapaxes(q, -1, -2) @ q, np.eye(k, dtype=q.dtype), atol=eps))


def make_orthogonal(a: np.ndarray) -> np.ndarray:
    """The ``Q`` of ``A = QR`` (``A`` tall) with ``R``'s diagonal made non-negative."""
    q, r = np.linalg.qr(a)
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


class _Orthogonal(Module):
    """``base @ map(X)``: ``matrix_exp`` of the skew-symmetric part of ``X``'s lower triangle, or the product of the
    Householder reflectors stored below ``X``'s diagonal; tall or wide matrices through their tall form."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        self.use_trivialization = use_trivialization
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x, n, k = x.mT, k, n
        if self.orthogonal_map == "householder":
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = householder_product(a, tau) * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            x = x.tril()
            if n != k:
                x = cat([x, zeros(*x.shape[:-2], n, n - k, dtype=x.dtype, device=x.device)], -1)
            q = matrix_exp(x - x.mT)
            if n != k:
                q = q[..., :k]
        if self.use_trivialization:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        if q.shape != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape {q.shape}."
            )
        with grad_mode.no_grad():
            values = q.detach().cpu().numpy()
            n, k = values.shape[-2], values.shape[-1]
            transpose = n < k
            if transpose:
                values, n, k = np.swapaxes(values, -1, -2), k, n
            if not self.use_trivialization:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley parametrizations when "
                        "use_trivialization=False."
                    )
                h, tau = np.linalg.qr(values, mode="raw")
                a = np.swapaxes(h, -1, -2).copy()
                diagonal = np.sign(np.diagonal(a, axis1=-2, axis2=-1)) * np.where(tau == 0.0, -1.0, 1.0)
                index = np.arange(k)
                a[..., index, index] = diagonal
                a = np.swapaxes(a, -1, -2) if transpose else a
                return tensor(np.ascontiguousarray(a), dtype=q.dtype, device=q.device)
            if n == k:
                base = values.copy() if is_orthogonal(values) else make_orthogonal(values)
            else:
                extra = randn_like_torch(q, values.shape[:-2] + (n, n - k))
                base = make_orthogonal(np.concatenate([values, extra], axis=-1))
            self.base = tensor(np.ascontiguousarray(base), dtype=q.dtype, device=q.device)
            neg_identity = np.zeros(tuple(q.shape))
            index = np.arange(min(q.shape[-2], q.shape[-1]))
            neg_identity[..., index, index] = -1.0
            return tensor(neg_identity, dtype=q.dtype, device=q.device)


def randn_like_torch(q: Tensor, shape: tuple) -> np.ndarray:
    """Standard normal values drawn from the global generator, as ``torch.randn(shape)`` draws them."""
    return q.new_empty(shape).normal_(0, 1).cpu().numpy()


def orthogonal(
    module: Module, name: str = "weight", orthogonal_map: str | None = None, *, use_trivialization: bool = True
) -> Module:
    """Keep ``module.<name>`` orthogonal (its rows or columns orthonormal, whichever are fewer), for each matrix of
    a batch too. ``orthogonal_map`` is ``"matrix_exp"`` (the default for square matrices) or ``"householder"``
    (for the others); ``"cayley"`` needs a linear solve trainkit does not have yet.

    >>> from trainkit import nn
    >>> list(orthogonal(nn.Linear(3, 5), orthogonal_map="householder").state_dict())
    ['bias', 'parametrizations.weight.original', 'parametrizations.weight.0.base']
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in MAPS:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    if orthogonal_map == "cayley":
        raise NotImplementedError(
            "orthogonal_map='cayley' needs torch.linalg.solve, which trainkit does not have yet: use 'matrix_exp' or "
            "'householder'"
        )
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization), unsafe=True
    )
    return module
