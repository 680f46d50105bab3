"""Dropout: zeroes random elements (Dropout) or whole channels (Dropout1d, Dropout2d, Dropout3d) while training, passes
its input through in evaluation."""

from __future__ import annotations

from .. import functional as F
from ..autograd.tensor import Tensor
from .module import Module


class _DropoutNd(Module):
    """What the dropout layers share: the probability ``p`` (checked) and ``inplace``."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability ``p`` and scale the rest by 1 / (1 - p); in ``eval()``
    the identity. Masks come from the seeded default generator (``trainkit.manual_seed``).

    >>> import trainkit
    >>> layer = Dropout(0.5).eval()
    >>> layer(trainkit.ones(3))
    tensor([1., 1., 1.])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """In training, zero whole channels of a (N, C, L) or (C, L) input with probability ``p`` and scale the others
    by 1 / (1 - p); in ``eval()`` the identity. Masks come from the seeded default generator.

    >>> import trainkit
    >>> layer = Dropout1d(0.5)
    >>> layer
    Dropout1d(p=0.5, inplace=False)
    >>> y = layer(trainkit.ones(4, 3))
    >>> [sorted(set(row)) in ([0.0], [2.0]) for row in y.tolist()]
    [True, True, True, True]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """In training, zero whole channels of a (N, C, H, W) input with probability ``p`` and scale the others by
    1 / (1 - p); in ``eval()`` the identity. As in PyTorch, a 3-D input is taken as (N, C, L), with a warning.

    >>> import trainkit
    >>> layer = Dropout2d(0.25).eval()
    >>> layer
    Dropout2d(p=0.25, inplace=False)
    >>> layer(trainkit.ones(1, 2, 1, 1)).flatten()
    tensor([1., 1.])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """In training, zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability ``p`` and scale
    the others by 1 / (1 - p); in ``eval()`` the identity.

    >>> import trainkit
    >>> layer = Dropout3d(0.5)
    >>> layer
    Dropout3d(p=0.5, inplace=False)
    >>> layer.eval()(trainkit.ones(1, 2, 1, 1, 1)).flatten()
    tensor([1., 1.])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)
