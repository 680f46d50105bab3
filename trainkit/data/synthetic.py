"""Small generated datasets for examples and tests."""

from __future__ import annotations

from ..autograd.creation import linspace, randn
from ..autograd.random import Generator
from .dataset import TensorDataset


def regression_curve(n: int = 100, noise: float = 0.1, seed: int | None = None) -> TensorDataset:
    """Points of y = x^2 plus Gaussian noise, x evenly spaced over [-1, 1]; both float32 of shape (n, 1).

    The classic first regression example. With ``seed`` the noise repeats exactly; without, it comes from the
    global stream (``trainkit.manual_seed``).

    >>> x, y = regression_curve(100, seed=0).tensors
    >>> x.shape, float(x[0, 0]), float(x[-1, 0])
    (trainkit.Size([100, 1]), -1.0, 1.0)
    """
    generator = None if seed is None else Generator().manual_seed(seed)
    x = linspace(-1, 1, n).unsqueeze(1)
    y = x**2 + noise * randn(n, 1, generator=generator)
    return TensorDataset(x, y)
