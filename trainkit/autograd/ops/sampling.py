"""Sampling indices from weights: ``multinomial``.

With replacement each draw inverts the row's cumulative distribution at a uniform number. Without replacement the
draws are an exponential race: category i finishes at E_i / w_i with E_i ~ Exp(1) independent, and the categories in
order of finishing are distributed exactly as draws one after another, each in proportion to the weights of the
categories not yet drawn (the first to finish is i with probability w_i / sum w, and the race of the others goes on
unchanged, since the exponential distribution has no memory). Zero weights never finish, so they come last, as in
PyTorch when a row has fewer positive weights than draws.
"""

from __future__ import annotations

import numpy as np

from .. import distributions as dist
from ..backend import kind_of, xp_of
from ..random import Generator, generator_for
from ..tensor import Tensor
from .random_fill import (
    bernoulli,
    bernoulli_,
    cauchy_,
    exponential_,
    geometric_,
    log_normal_,
    normal_,
    random_,
    uniform_,
)
from .type_names import scalar_name

# the fills are Tensor methods too: ``x.uniform_(-1, 1)``
__all__ = [
    "bernoulli",
    "bernoulli_",
    "cauchy_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "multinomial",
    "normal_",
    "random_",
    "uniform_",
]

_MAX_CATEGORIES = 1 << 24


def _check(input: Tensor, num_samples, replacement: bool, out) -> None:
    """PyTorch's checks, in its order: the argument types, ``out``'s dtype, the shape, then the numbers."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(
            f"multinomial(): argument 'num_samples' (position 2) must be int, not {type(num_samples).__name__}"
        )
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"multinomial(): argument 'out' must be Tensor, not {type(out).__name__}")
        if out._data.dtype != np.int64:
            raise RuntimeError(f"multinomial expects Long tensor out, got: {scalar_name(out)}")
    x = input._data
    if x.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if kind_of(x.dtype) != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {scalar_name(input)}")
    categories = x.shape[-1]
    if categories > _MAX_CATEGORIES:
        raise RuntimeError("number of categories cannot exceed 2^24")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")


def _check_values(weights) -> None:
    """Finite, non-negative weights with a positive sum in every row (weights: float64, (rows, categories))."""
    xp = xp_of(weights)
    if weights.shape[1] == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if not bool(xp.isfinite(weights).all()) or bool((weights < 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool((weights.sum(axis=1) <= 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def _with_replacement(rng, weights, n: int):
    """(rows, n) categories: for each draw, the first whose cumulative weight exceeds a uniform u * total."""
    xp = xp_of(weights)
    cdf = xp.cumsum(weights, axis=1)
    u = rng.random((weights.shape[0], n)) * cdf[:, -1:]
    # the last category with a positive weight: u * total may round up to the total itself
    last = weights.shape[1] - 1 - (weights[:, ::-1] > 0).argmax(axis=1)
    picks = xp.stack([xp.searchsorted(cdf[r], u[r], side="right") for r in range(weights.shape[0])])
    return xp.minimum(picks, last[:, None])


def _without_replacement(rng, weights, n: int):
    """(rows, n) distinct categories: the first n to finish the exponential race E_i / w_i."""
    xp = xp_of(weights)
    with np.errstate(divide="ignore"):  # a zero weight never finishes: its time is inf
        finish = rng.standard_exponential(weights.shape) / weights
    if n < weights.shape[1]:
        # the n earliest, found in linear time, then put in order
        first = xp.argpartition(finish, n - 1, axis=1)[:, :n]
        order = xp.argsort(xp.take_along_axis(finish, first, axis=1), axis=1, kind="stable")
        return xp.take_along_axis(first, order, axis=1)
    return xp.argsort(finish, axis=1, kind="stable")


def _torch_cdf(engine, rows: np.ndarray, n: int) -> np.ndarray:
    """PyTorch's CPU draws with replacement: per row, the cumulative weights in the input's precision divided by
    their total (the last set to 1), then for each of the n draws the first category whose cumulative share is
    at least a float64 uniform."""
    cdf = np.cumsum(rows, axis=1, dtype=rows.dtype)  # one after another, as PyTorch sums
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1
    u = dist.uniform_bits(engine, rows.shape[0] * n, np.float64).reshape(rows.shape[0], n)
    return np.stack([np.searchsorted(cdf[r].astype(np.float64), u[r], side="left") for r in range(rows.shape[0])])


def _torch_race(engine, rows: np.ndarray, n: int) -> np.ndarray:
    """PyTorch's CPU draws without replacement (and of a single sample): the n largest w_i / E_i with E_i ~ Exp(1)
    drawn in the input's precision, largest first (the exponential race of the module docstring)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        race = rows / dist.exponential(engine, rows.shape, rows.dtype)
    if n == 1:
        return race.argmax(axis=1)[:, None]
    return np.argsort(-race, axis=1, kind="stable")[:, :n]


def multinomial(
    input: Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Generator | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Category indices drawn in proportion to the weights in ``input``, as ``torch.multinomial``.

    ``input`` is a 1-d vector or a 2-d matrix with one distribution per row: non-negative, finite weights with a
    positive sum (they need not sum to 1). Each row gives ``num_samples`` int64 indices, in the order drawn. On the
    CPU the draws are PyTorch's for the same seed (an exponential race for ``replacement=False`` or one sample,
    the inverse of the cumulative weights otherwise).
    ``replacement=False`` draws distinct categories, each draw in proportion to the weights of those not drawn yet;
    ``replacement=True`` draws each index independently with P(i) = w_i / sum w. Draws come from ``generator`` or
    the default stream of the input's device (``trainkit.manual_seed``), so a seed repeats them.

    >>> import trainkit
    >>> g = trainkit.Generator().manual_seed(0)
    >>> multinomial(trainkit.tensor([0.0, 1.0, 0.0]), 2, replacement=True, generator=g)
    tensor([1, 1])
    >>> sorted(multinomial(trainkit.tensor([1.0, 2.0, 3.0]), 3, generator=g).tolist())
    [0, 1, 2]
    """
    _check(input, num_samples, replacement, out)
    x = input._data
    xp = xp_of(x)
    weights = xp.asarray(x, dtype=np.float64).reshape(x.shape[0] if x.ndim == 2 else 1, x.shape[-1])
    n = int(num_samples)
    if weights.shape[0] == 0:
        picks = xp.zeros((0, n), dtype=np.int64)
    else:
        _check_values(weights)
        stream = generator_for(input.device, generator)
        if stream.engine is not None:
            rows = xp.asarray(x).reshape(weights.shape)
            picks = (_torch_cdf if replacement and n > 1 else _torch_race)(stream.engine, rows, n)
        else:
            picks = (_with_replacement if replacement else _without_replacement)(stream.rng, weights, n)
    picks = picks.astype(np.int64, copy=False).reshape(x.shape[:-1] + (n,))
    if out is None:
        return Tensor._make(picks)
    if tuple(out._data.shape) == picks.shape:
        out._data[...] = picks
    else:  # resized to the result, as PyTorch resizes an out tensor of another shape
        out._data = picks
    out._version_counter[0] += 1
    return out
