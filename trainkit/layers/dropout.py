"""Dropout: zeroes random elements while training, passes its input through in evaluation."""

from __future__ import annotations

from ..autograd.ops import nn as F
from ..autograd.tensor import Tensor
from .module import Module


class Dropout(Module):
    """In training, zero each element with probability ``p`` and scale the rest by 1 / (1 - p); in ``eval()``
    the identity. Masks come from the seeded default generator (``trainkit.manual_seed``).

    >>> import trainkit
    >>> layer = Dropout(0.5).eval()
    >>> layer(trainkit.ones(3))
    tensor([1., 1., 1.])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
