"""Similarity layers: CosineSimilarity, which calls ``functional.cosine_similarity``."""

from __future__ import annotations

from .. import functional as F
from ..autograd.tensor import Tensor
from .module import Module


class CosineSimilarity(Module):
    """The cosine of the angle between the vectors of ``x1`` and ``x2`` along ``dim``, each norm at least ``eps``;
    the inputs broadcast against each other. PyTorch's repr shows neither setting.

    >>> import trainkit
    >>> CosineSimilarity(dim=0)(trainkit.tensor([1.0, 1.0]), trainkit.tensor([2.0, 0.0]))
    tensor(0.7071)
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
