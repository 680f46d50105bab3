"""multinomial and Tensor.multinomial: the distribution of the draws (chi-square checks with fixed seeds and
generous bounds), distinctness without replacement, seeding, dtypes, ``out=`` and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd.ops.sampling import multinomial

# A chi-square statistic with a handful of degrees of freedom exceeds 40 with probability below 1e-6: a test that
# fails here has a wrong distribution, not bad luck.
BOUND = 40.0


def _chi_square(counts, expected) -> float:
    counts, expected = np.asarray(counts, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    keep = expected > 0
    assert counts[~keep].sum() == 0, "a category of probability 0 was drawn"
    return float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())


def _gen(seed: int = 0):
    return trainkit.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [trainkit.float16, trainkit.float32, trainkit.float64])
def test_with_replacement_frequencies(dtype):
    w = np.array([1.0, 2.0, 0.0, 3.0, 4.0])
    n = 40000
    out = multinomial(trainkit.tensor(w, dtype=dtype), n, True, generator=_gen())
    assert out.dtype == trainkit.int64 and tuple(out.shape) == (n,)
    counts = np.bincount(to_numpy(out), minlength=5)
    assert _chi_square(counts, n * w / w.sum()) < BOUND


def test_rows_are_separate_distributions():
    w = np.array([[1.0, 0.0, 1.0], [0.0, 5.0, 1.0], [3.0, 2.0, 1.0]], dtype=np.float32)
    n = 20000
    out = to_numpy(trainkit.tensor(w).multinomial(n, replacement=True, generator=_gen(1)))
    assert out.shape == (3, n)
    for row, weights in zip(out, w):
        assert _chi_square(np.bincount(row, minlength=3), n * weights / weights.sum()) < BOUND


def test_without_replacement_draws_in_order_of_weight():
    """The first two draws of [1, 2, 3, 4]: P(i then j) = w_i / S * w_j / (S - w_i), over all 12 ordered pairs."""
    w = np.array([1.0, 2.0, 3.0, 4.0])
    rows = 20000
    out = to_numpy(multinomial(trainkit.tensor(np.tile(w, (rows, 1))), 2, generator=_gen(2)))
    assert (out[:, 0] != out[:, 1]).all()
    counts = np.zeros((4, 4))
    np.add.at(counts, (out[:, 0], out[:, 1]), 1)
    s = w.sum()
    expected = np.array([[0.0 if i == j else w[i] / s * w[j] / (s - w[i]) for j in range(4)] for i in range(4)])
    assert _chi_square(counts.ravel(), rows * expected.ravel()) < BOUND


def test_without_replacement_gives_distinct_categories():
    w = trainkit.rand(50, 7, generator=_gen(3)) + 0.01
    out = to_numpy(w.multinomial(7, generator=_gen(4)))
    assert (np.sort(out, axis=1) == np.arange(7)).all()
    out = to_numpy(multinomial(w, 4, generator=_gen(5)))
    assert all(len(set(row)) == 4 for row in out)


def test_zero_weights_come_last_without_replacement(torch):
    w = [0.0, 1.0, 0.0, 2.0]
    out = to_numpy(multinomial(trainkit.tensor([w] * 200), 4, generator=_gen(6)))
    assert set(out[:, :2].ravel()) == {1, 3} and set(out[:, 2:].ravel()) == {0, 2}
    theirs = to_numpy(torch.multinomial(torch.tensor([w] * 20), 4))
    assert set(theirs[:, :2].ravel()) == {1, 3}


def test_seeds_repeat_the_draws():
    w = trainkit.tensor([0.2, 0.3, 0.5])
    a = multinomial(w, 10, True, generator=_gen(7))
    b = multinomial(w, 10, True, generator=_gen(7))
    assert (a == b).all()
    trainkit.manual_seed(11)
    c = w.multinomial(3)
    trainkit.manual_seed(11)
    assert (w.multinomial(3) == c).all()


def test_result_is_not_differentiable_and_keeps_shape():
    w = trainkit.ones(3, requires_grad=True)
    out = multinomial(w, 2)
    assert not out.requires_grad and out.grad_fn is None
    assert tuple(multinomial(trainkit.ones(0, 3), 2).shape) == (0, 2)
    assert tuple(trainkit.ones(1, 3).multinomial(1).shape) == (1, 1)


def test_out_keyword(torch):
    out = trainkit.empty(2, dtype=trainkit.int64)
    assert multinomial(trainkit.tensor([0.0, 1.0]), 2, True, out=out) is out
    assert out.tolist() == [1, 1]
    resized = trainkit.empty(5, dtype=trainkit.int64)
    multinomial(trainkit.ones(2, 3), 2, out=resized)
    assert tuple(resized.shape) == (2, 2)
    assert_same_error(
        torch,
        lambda lib, dev: _function(lib)(lib.ones(3), 2, out=lib.empty(2)),
        "multinomial expects Long tensor out, got: Float",
    )


def _function(lib):
    """torch.multinomial, or ours (until trainkit exports it at the top level)."""
    return getattr(lib, "multinomial", multinomial)


ERRORS = [
    (lambda lib: lib.tensor([0.1, 0.2, 0.7]).multinomial(0), ("cannot sample n_sample <= 0 samples",)),
    (lambda lib: lib.tensor([0.1, 0.2, 0.7]).multinomial(-1), ("cannot sample n_sample <= 0 samples",)),
    (lambda lib: lib.tensor([0.1, 0.2, 0.7]).multinomial(4), ("without replacement",)),
    (lambda lib: lib.tensor([1.0, -1.0]).multinomial(1), ("`inf`, `nan` or element < 0",)),
    (lambda lib: lib.tensor([1.0, float("inf")]).multinomial(1, True), ("`inf`, `nan` or element < 0",)),
    (lambda lib: lib.tensor([1.0, float("nan")]).multinomial(1), ("`inf`, `nan` or element < 0",)),
    (lambda lib: lib.tensor([0.0, 0.0]).multinomial(1), ("sum of probabilities <= 0",)),
    (lambda lib: lib.tensor([[1.0, 0.0], [0.0, 0.0]]).multinomial(1, True), ("sum of probabilities <= 0",)),
    (lambda lib: lib.ones(2, 2, 2).multinomial(1), ("prob_dist must be 1 or 2 dim",)),
    (lambda lib: lib.tensor(1.0).multinomial(1), ("prob_dist must be 1 or 2 dim",)),
    (lambda lib: lib.tensor([1, 2]).multinomial(1), ("floating-point dtypes", "got: Long")),
    (lambda lib: lib.ones(3).multinomial(2.0), ("must be int, not float",)),
    (lambda lib: lib.ones(3).multinomial(True), ("must be int, not bool",)),
    (lambda lib: lib.ones(0).multinomial(1), ("without replacement",)),
    (lambda lib: lib.ones(3, 0).multinomial(1, True), ("aminmax",)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(torch, case):
    fn, words = ERRORS[case]
    assert_same_error(torch, lambda lib, dev: fn(lib), *words)


def test_on_device(device):
    w = np.array([[1.0, 0.0, 3.0], [0.0, 2.0, 2.0]])
    n = 20000
    out = trainkit.tensor(w, device=device).multinomial(n, True)
    assert out.dtype == trainkit.int64 and out.device.type == device
    for row, weights in zip(to_numpy(out), w):
        assert _chi_square(np.bincount(row, minlength=3), n * weights / weights.sum()) < BOUND
    drawn = to_numpy(multinomial(trainkit.tensor(w, device=device), 2))
    assert (np.sort(drawn, axis=1) == [[0, 2], [1, 2]]).all()
