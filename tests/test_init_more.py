"""nn.init.trunc_normal_ and nn.init.orthogonal_: statistics of their draws, shapes, dtypes, generators and errors,
against the truncated normal's formulas and against PyTorch."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.nn import init


def truncated_moments(mean, std, a, b):
    """Mean and standard deviation of N(mean, std^2) cut to [a, b]."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    m = (pdf(alpha) - pdf(beta)) / z
    var = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - m * m
    return mean + std * m, std * math.sqrt(var)


# (mean, std, a, b): the default; a cut narrower than the std; one side far away (drawn from the normal); an
# interval holding little mass, drawn uniformly and accepted by density (one beside the mean, one in the tail)
TRUNC_CASES = [
    (0.0, 1.0, -2.0, 2.0),
    (0.0, 0.02, -0.04, 0.04),
    (1.0, 2.0, 0.5, 10.0),
    (0.0, 1.0, 1.0, 3.0),
    (0.0, 1.0, 2.5, 4.0),
    (-3.0, 0.5, -3.2, -3.1),
]


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
@pytest.mark.parametrize("case", TRUNC_CASES, ids=str)
def test_trunc_normal_stays_in_range_with_the_truncated_moments(device, case):
    mean, std, a, b = case
    w = trainkit.empty(200_000, device=device)
    out = init.trunc_normal_(w, mean, std, a, b)
    assert out is w and w.dtype == trainkit.float32
    values = to_numpy(w).astype(np.float64)
    assert values.min() >= np.float32(a) and values.max() <= np.float32(b)
    want_mean, want_std = truncated_moments(mean, std, a, b)
    # the standard error of a mean of 200,000 draws is std / 447: five of them leave room for chance
    assert abs(values.mean() - want_mean) < 5 * want_std / 447 + 1e-7
    assert abs(values.std() - want_std) < 0.01 * want_std + 1e-7


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", TRUNC_CASES, ids=str)
def test_trunc_normal_draws_torchs_numbers_after_the_same_seed(torch, case, dtype):
    """The same draws in the same order as PyTorch (both ways of rejecting), so a seed gives PyTorch's values."""
    for shape in ((7,), (1000,), (64, 33)):
        torch.manual_seed(0)
        trainkit.manual_seed(0)
        theirs = torch.nn.init.trunc_normal_(torch.empty(*shape, dtype=getattr(torch, dtype)), *case)
        ours = init.trunc_normal_(trainkit.empty(*shape, dtype=getattr(trainkit, dtype)), *case)
        # float64 normals differ from torch's in the last bit now and then (its vectorised log and sqrt)
        np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=0, atol=0 if dtype == "float32" else 1e-15)


def test_orthogonal_draws_torchs_matrix_after_the_same_seed(torch):
    for shape in ((5, 3), (3, 5), (8, 8), (20, 4, 3)):
        torch.manual_seed(0)
        trainkit.manual_seed(0)
        theirs = torch.nn.init.orthogonal_(torch.empty(*shape), gain=1.5)
        ours = init.orthogonal_(trainkit.empty(*shape), gain=1.5)
        np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), atol=1e-6)  # QR by another LAPACK build


def test_trunc_normal_float64_and_shapes(device):
    w = trainkit.empty(4, 3, 50, 50, dtype=trainkit.float64, device=device)
    init.trunc_normal_(w, std=0.5, a=-0.1, b=0.3)
    values = to_numpy(w)
    assert values.dtype == np.float64 and values.shape == (4, 3, 50, 50)
    assert values.min() >= -0.1 and values.max() <= 0.3
    assert len(np.unique(values)) == values.size  # drawn, not filled


def test_trunc_normal_follows_the_generator_and_records_nothing():
    g1, g2 = trainkit.Generator().manual_seed(7), trainkit.Generator().manual_seed(7)
    p = trainkit.nn.Parameter(trainkit.empty(3, 4))
    init.trunc_normal_(p, generator=g1)
    q = init.trunc_normal_(trainkit.empty(3, 4), generator=g2)
    np.testing.assert_array_equal(to_numpy(p), to_numpy(q))
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert init.trunc_normal_(trainkit.empty(0, 3)).shape == (0, 3)


def test_trunc_normal_warns_like_torch_when_the_mean_is_far(torch):
    for lib in (trainkit, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.init.trunc_normal_(lib.empty(100), mean=5.0, std=1.0, a=-1.0, b=1.0)
        assert [str(w.message) for w in caught] == [
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may be incorrect."
        ]
        if lib is trainkit:  # at the call (torch's points into its own init.py)
            assert caught[0].filename == __file__


def test_trunc_normal_signature_matches_torch(torch):
    import inspect

    ours = inspect.signature(init.trunc_normal_).parameters
    theirs = inspect.signature(torch.nn.init.trunc_normal_).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]
    ours = inspect.signature(init.orthogonal_).parameters
    theirs = inspect.signature(torch.nn.init.orthogonal_).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (6, 2, 3, 3), (20, 2, 2), (1, 7), (7, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_orthogonal_rows_or_columns_are_orthonormal(device, shape, dtype):
    w = trainkit.empty(*shape, dtype=getattr(trainkit, dtype), device=device)
    assert init.orthogonal_(w) is w
    assert tuple(w.shape) == shape and w.dtype == getattr(trainkit, dtype)
    m = to_numpy(w).reshape(shape[0], -1).astype(np.float64)
    rows, cols = m.shape
    gram = m @ m.T if rows <= cols else m.T @ m
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(gram, np.eye(min(rows, cols)), atol=tol)


def test_orthogonal_gain_scales_the_matrix(device):
    w = init.orthogonal_(trainkit.empty(6, 4, device=device), gain=2.5)
    m = to_numpy(w).astype(np.float64)
    np.testing.assert_allclose(m.T @ m, 6.25 * np.eye(4), atol=1e-4)
    w = init.orthogonal_(trainkit.empty(3, 8, dtype=trainkit.float64, device=device), gain=init.calculate_gain("relu"))
    m = to_numpy(w)
    np.testing.assert_allclose(m @ m.T, 2 * np.eye(3), atol=1e-12)


def test_orthogonal_is_uniform_over_orthogonal_matrices():
    """Without the sign correction, QR's Q leans one way (R's diagonal has one sign); with it, every entry averages
    to 0 and has variance 1/n, as for a Haar-distributed matrix."""
    g = trainkit.Generator().manual_seed(0)
    draws = np.stack([to_numpy(init.orthogonal_(trainkit.empty(3, 3), generator=g)) for _ in range(3000)])
    assert np.abs(draws.mean(axis=0)).max() < 0.05
    np.testing.assert_allclose(draws.var(axis=0), 1 / 3, atol=0.03)
    dets = np.linalg.det(draws.astype(np.float64))
    assert 0.4 < (dets > 0).mean() < 0.6  # rotations and reflections alike


def test_orthogonal_follows_the_generator_and_keeps_parameters():
    p = trainkit.nn.Parameter(trainkit.empty(4, 6))
    init.orthogonal_(p, generator=trainkit.Generator().manual_seed(3))
    q = init.orthogonal_(trainkit.empty(4, 6), generator=trainkit.Generator().manual_seed(3))
    np.testing.assert_array_equal(to_numpy(p), to_numpy(q))
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert init.orthogonal_(trainkit.empty(0, 4)).shape == (0, 4)


@pytest.mark.parametrize("shape", [(5,), ()], ids=str)
def test_orthogonal_of_fewer_than_two_dimensions_raises_like_torch(torch, shape):
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.init.orthogonal_(lib.zeros(shape)),
        "Only tensors with 2 or more dimensions are supported",
    )


def test_the_layers_take_them(torch):
    """The usual calls from a model's init: a Linear's weight, an LSTM's recurrent weights."""
    linear = trainkit.nn.Linear(16, 8)
    init.orthogonal_(linear.weight)
    w = to_numpy(linear.weight).astype(np.float64)
    np.testing.assert_allclose(w @ w.T, np.eye(8), atol=1e-5)
    lstm = trainkit.nn.LSTM(4, 5)
    for name, p in lstm.named_parameters():
        if "weight_hh" in name:
            init.orthogonal_(p)
        elif "bias" in name:
            init.trunc_normal_(p, std=0.01, a=-0.02, b=0.02)
    assert float(lstm.bias_ih_l0.abs().max()) <= 0.02
