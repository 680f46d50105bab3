"""1-d pooling against PyTorch: max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d and their modules
(values, gradients, indices along L, graph nodes, errors, gradcheck and gradgradcheck)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.nn as nn
import trainkit.nn.functional as F
from trainkit.autograd import gradcheck, gradgradcheck

DTYPES = [np.float32, np.float64]


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _compare(torch, name, shape, dtype, args, kw):
    data = _data(shape, dtype, seed=len(args) + sum(shape))
    x, tx = trainkit.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    out, expected = getattr(F, name)(x, *args, **kw), getattr(torch.nn.functional, name)(tx, *args, **kw)
    if isinstance(expected, tuple):
        np.testing.assert_array_equal(to_numpy(out[1]), to_numpy(expected[1]))
        assert out[1].dtype == trainkit.int64
        out, expected = out[0], expected[0]
    assert tuple(out.shape) == tuple(expected.shape)
    assert out.dtype == x.dtype
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), rtol=1e-6, atol=1e-6)
    g = _data(tuple(expected.shape), dtype, seed=1)
    out.backward(trainkit.tensor(g))
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(tx.grad), rtol=1e-6, atol=1e-6)
    assert out.grad_fn.name() == type(expected.grad_fn).__name__
    assert out.grad_fn.next_functions[0][0].name() == type(expected.grad_fn.next_functions[0][0]).__name__


CASES = [
    ("max_pool1d", (2, 3, 11), (3,), {}),
    ("max_pool1d", (2, 3, 11), (3, 2, 1), dict(ceil_mode=True)),
    ("max_pool1d", (3, 11), (4, 2, 2), dict(dilation=2)),
    ("max_pool1d", (2, 3, 10), (2,), dict(return_indices=True)),
    ("max_pool1d", (3, 12), (3, 2, 1), dict(dilation=2, ceil_mode=True, return_indices=True)),
    ("max_pool1d", (2, 3, 9), ([2], [1]), {}),
    ("avg_pool1d", (2, 3, 11), (3,), {}),
    ("avg_pool1d", (2, 3, 11), (3, 2, 1), dict(ceil_mode=True)),
    ("avg_pool1d", (2, 3, 11), (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ("avg_pool1d", (3, 10), (4, 3, 2), dict(count_include_pad=False)),
    ("adaptive_avg_pool1d", (2, 3, 11), (4,), {}),
    ("adaptive_avg_pool1d", (3, 7), (5,), {}),
    ("adaptive_avg_pool1d", (2, 3, 7), (1,), {}),
    ("adaptive_avg_pool1d", (2, 3, 5), (9,), {}),
    ("adaptive_max_pool1d", (2, 3, 11), (4,), {}),
    ("adaptive_max_pool1d", (3, 7), (5,), dict(return_indices=True)),
    ("adaptive_max_pool1d", (2, 3, 5), (9,), dict(return_indices=True)),
    ("adaptive_max_pool1d", (2, 3, 8), ([1],), {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, shape, args, kw", CASES)
def test_pool_matches_torch(torch, dtype, name, shape, args, kw):
    _compare(torch, name, shape, dtype, args, kw)


def test_ties_and_nan_pick_as_torch(torch):
    data = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, np.nan, 0.0, 5.0, 5.0]], dtype=np.float32)
    for fn, args in (("max_pool1d", (3, 2, 1)), ("adaptive_max_pool1d", (4,))):
        out, idx = getattr(F, fn)(trainkit.tensor(data), *args, return_indices=True)
        expected, expected_idx = getattr(torch.nn.functional, fn)(torch.tensor(data), *args, return_indices=True)
        np.testing.assert_array_equal(to_numpy(out), to_numpy(expected))
        np.testing.assert_array_equal(to_numpy(idx), to_numpy(expected_idx))


def test_with_indices_functions(torch):
    data = _data((2, 3, 9), np.float32)
    for name, args in (("max_pool1d_with_indices", (3, 2)), ("adaptive_max_pool1d_with_indices", (4,))):
        out, idx = getattr(F, name)(trainkit.tensor(data), *args)
        expected, expected_idx = getattr(torch.nn.functional, name)(torch.tensor(data), *args)
        np.testing.assert_array_equal(to_numpy(out), to_numpy(expected))
        np.testing.assert_array_equal(to_numpy(idx), to_numpy(expected_idx))


def test_empty_batch(torch):
    for name, args in (
        ("max_pool1d", (2,)),
        ("avg_pool1d", (2,)),
        ("adaptive_avg_pool1d", (2,)),
        ("adaptive_max_pool1d", (2,)),
    ):
        out = getattr(F, name)(trainkit.ones(0, 3, 10), *args)
        assert tuple(out.shape) == tuple(getattr(torch.nn.functional, name)(torch.ones(0, 3, 10), *args).shape)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.max_pool1d(x, 3, 2, 1),
        lambda x: F.max_pool1d(x, 2, 1, 1, dilation=2, ceil_mode=True),
        lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda x: F.adaptive_avg_pool1d(x, 4),
        lambda x: F.adaptive_max_pool1d(x, 4),
        lambda x: F.adaptive_max_pool1d(x[0], 3),
    ],
)
def test_gradcheck_and_gradgradcheck(fn):
    # distinct values, spaced wider than gradcheck's step, so that no maximum changes under it
    x = trainkit.tensor(
        np.random.default_rng(4).permutation(18).reshape(2, 1, 9) / 3.0, dtype=trainkit.float64, requires_grad=True
    )
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


@pytest.mark.parametrize(
    "make, tmake",
    [
        (lambda: nn.MaxPool1d(3, 2, 1, ceil_mode=True), lambda t: t.nn.MaxPool1d(3, 2, 1, ceil_mode=True)),
        (lambda: nn.MaxPool1d(2, return_indices=True), lambda t: t.nn.MaxPool1d(2, return_indices=True)),
        (
            lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False),
            lambda t: t.nn.AvgPool1d(3, 2, 1, count_include_pad=False),
        ),
        (lambda: nn.AvgPool1d((3,)), lambda t: t.nn.AvgPool1d((3,))),
        (lambda: nn.AdaptiveAvgPool1d(4), lambda t: t.nn.AdaptiveAvgPool1d(4)),
        (lambda: nn.AdaptiveMaxPool1d(4, True), lambda t: t.nn.AdaptiveMaxPool1d(4, True)),
    ],
)
def test_modules_as_torch(torch, make, tmake):
    ours, theirs = make(), tmake(torch)
    assert repr(ours) == repr(theirs)
    for shape in ((2, 3, 11), (3, 11)):
        data = _data(shape, np.float32)
        out, expected = ours(trainkit.tensor(data)), theirs(torch.tensor(data))
        if isinstance(expected, tuple):
            np.testing.assert_array_equal(to_numpy(out[1]), to_numpy(expected[1]))
            out, expected = out[0], expected[0]
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), rtol=1e-6)


ERRORS = [
    (lambda F, x: F.max_pool1d(x, 0), ("kernel_size must be greater than zero",)),
    (lambda F, x: F.max_pool1d(x, 3, padding=2), ("padding should be at most half of kernel size",)),
    (lambda F, x: F.max_pool1d(x, 20), ("Invalid computed output size: 0",)),
    (lambda F, x: F.max_pool1d(x.reshape(80), 2), ("but got:[80]",)),
    (lambda F, x: F.max_pool1d(x, (2, 2)), ("kernel_size must be an int", "size 2")),
    (lambda F, x: F.max_pool1d(x, 2, stride=(1, 1)), ("stride must be None",)),
    (lambda F, x: F.max_pool1d(x, 2, padding=(1, 1)), ("padding must be an int",)),
    (lambda F, x: F.max_pool1d(x, 2, dilation=(1, 1)), ("dilation must be an int",)),
    (lambda F, x: F.max_pool1d(x, 2, stride=0), ("stride must be greater than zero",)),
    (lambda F, x: F.max_pool1d(x, 2, dilation=0), ("dilation must be greater than zero",)),
    (lambda F, x: F.max_pool1d(x, 2, padding=-1), ("padding must be non-negative",)),
    (lambda F, x: F.max_pool1d(x[:, :, :0], 2), ("[2, 4, 0]",)),
    (lambda F, x: F.max_pool1d(x, 20, return_indices=True), ("Output size is too small",)),
    (lambda F, x: F.max_pool1d(x, 3, padding=2, return_indices=True), ("pad should be at most half",)),
    (lambda F, x: F.max_pool1d(x.reshape(80), 2, return_indices=True), ("Expected 2 to 3 dimensions",)),
    (lambda F, x: F.max_pool1d(x, (2, 2), return_indices=True), ("should contain one int (got 2)",)),
    (lambda F, x: F.max_pool1d(x, 2, padding=-1, return_indices=True), ("pad must be non-negative",)),
    (lambda F, x: F.avg_pool1d(x, 0), ("stride should not be zero",)),
    (lambda F, x: F.avg_pool1d(x, 3, padding=2), ("pad should be at most half",)),
    (lambda F, x: F.avg_pool1d(x, 20), ("(4x1x10)", "Output size is too small")),
    (lambda F, x: F.avg_pool1d(x.reshape(80), 2), ("Expected 2 to 3 dimensions", "avg_pool1d")),
    (lambda F, x: F.avg_pool1d(x, (2, 2)), ("'kernel_size' should contain one int (got 2)",)),
    (lambda F, x: F.avg_pool1d(x, 2, stride=(1, 1)), ("'stride' should contain one int",)),
    (lambda F, x: F.avg_pool1d(x, 2, padding=-1), ("pad must be non-negative",)),
    (lambda F, x: F.adaptive_avg_pool1d(x, (2, 2)), ("'output_size' should contain one int (got 2)",)),
    (lambda F, x: F.adaptive_avg_pool1d(x.reshape(80), 2), ("adaptive_avg_pool1d",)),
    (lambda F, x: F.adaptive_avg_pool1d(x, -1), ("greater than or equal to 0",)),
    (lambda F, x: F.adaptive_avg_pool1d(x[:, :, :0], 2), ("sizes [2, 4, 1, 0] with dimension 3 being empty",)),
    (lambda F, x: F.adaptive_avg_pool1d(x, None), ("must be tuple of ints, not NoneType",)),
    (lambda F, x: F.adaptive_max_pool1d(x, (2, 2)), ("should contain one int (got 2)",)),
    (lambda F, x: F.adaptive_max_pool1d(x.reshape(80), 2), ("adaptive_max_pool1d",)),
    (lambda F, x: F.adaptive_max_pool1d(x, -1), ("negative dimension -1: [2, 4, 1, -1]",)),
    (lambda F, x: F.adaptive_max_pool1d(x[:, :, :0], 2), ("dimension 2 being empty",)),
    (lambda F, x: F.adaptive_max_pool1d(x, None), ("must be tuple of ints, not NoneType",)),
    (lambda F, x: F.max_pool1d(x.long(), 2), ("not implemented for 'Long'",)),
    (lambda F, x: F.adaptive_max_pool1d(x.long(), 2), ("not implemented for 'Long'",)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(torch, case):
    fn, words = ERRORS[case]
    data = _data((2, 4, 10), np.float32)
    assert_same_error(torch, lambda lib, dev: fn(lib.nn.functional, lib.tensor(data)), *words)


def test_on_device_as_on_cpu(device):
    data = np.random.default_rng(6).permutation(54).reshape(2, 3, 9).astype(np.float32)
    results = []
    for dev in ("cpu", device):
        x = trainkit.tensor(data, device=dev, requires_grad=True)
        values, indices = F.adaptive_max_pool1d(x, 4, return_indices=True)
        out = (
            F.max_pool1d(x, 3, 2, 1, ceil_mode=True).sum()
            + F.avg_pool1d(x, 3, 2, 1).square().sum()
            + F.adaptive_avg_pool1d(x, 4).square().sum()
            + values.square().sum()
        )
        out.backward()
        results.append([to_numpy(out), to_numpy(x.grad), to_numpy(indices)])
    for a, c in zip(*results):
        np.testing.assert_allclose(a, c, rtol=1e-5)
