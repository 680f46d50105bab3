"""F.pad, F.one_hot, nn.Unflatten and Module.half() compared with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck

PADS = [(1, 2), (1, 2, 0, 1), (0, 0, 2, 0, 1, 1), (-1, 0), (1, -1, -1, 2)]


@pytest.mark.parametrize("pads", PADS, ids=str)
def test_pad_matches_torch(torch, device, pads, rng):
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    up = None
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        x = lib.tensor(data, device=dev, requires_grad=True)
        y = lib.nn.functional.pad(x, pads, value=0.5)
        if up is None:
            up = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * lib.tensor(up, device=dev)).sum().backward()
        results.append((to_numpy(y), to_numpy(x.grad), type(y.grad_fn).__name__))
    (y1, g1, n1), (y2, g2, n2) = results
    np.testing.assert_allclose(y1, y2)
    np.testing.assert_allclose(g1, g2)
    assert n1 == n2


def test_pad_gradcheck(rng):
    x = trainkit.tensor(rng.standard_normal((2, 3)), dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: trainkit.nn.functional.pad(t, (1, -1, 2, 0)), (x,))


def test_pad_errors_match_torch(torch):
    assert_same_error(torch, lambda lib, dev: lib.nn.functional.pad(lib.ones(2, 3), (1,)), "divisible by 2")


def test_one_hot_matches_torch(torch):
    for args in (([0, 2], 4), ([1, 0, 3], -1), ([[0, 1], [2, 2]], 3)):
        ours = trainkit.nn.functional.one_hot(trainkit.tensor(args[0]), args[1])
        theirs = torch.nn.functional.one_hot(torch.tensor(args[0]), args[1])
        assert ours.dtype == trainkit.int64
        np.testing.assert_array_equal(to_numpy(ours), theirs.numpy())
    assert_same_error(torch, lambda lib, dev: lib.nn.functional.one_hot(lib.tensor([0, 5]), 4), "smaller than")


def test_unflatten_and_half(torch):
    for lib in (trainkit, torch):
        layer = lib.nn.Unflatten(1, (2, 3))
        assert tuple(layer(lib.ones(4, 6)).shape) == (4, 2, 3)
    assert repr(trainkit.nn.Unflatten(1, (2, 3))) == repr(torch.nn.Unflatten(1, (2, 3)))
    model = trainkit.nn.Linear(2, 2).half()
    assert model.weight.dtype == trainkit.float16 and isinstance(model.weight, trainkit.nn.Parameter)
