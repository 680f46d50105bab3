"""cauchy_, log_normal_ and geometric_ draw PyTorch's numbers for the same seed on the CPU, leave the generator in
torch's state, record torch's nodes and refuse what torch refuses."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error

import trainkit

torch = pytest.importorskip("torch")

SAMPLERS = [("cauchy_", (0.5, 2.0)), ("log_normal_", (0.2, 0.7)), ("geometric_", (0.3,))]


def _state_equal() -> bool:
    return bool(torch.equal(torch.get_rng_state(), torch.tensor(trainkit.get_rng_state().numpy())))


@pytest.mark.parametrize(("name", "args"), SAMPLERS)
@pytest.mark.parametrize("n", [0, 1, 5, 16, 17, 33, 257])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", [0, 7])
def test_draws_equal_torch(name, args, n, dtype, seed):
    torch.manual_seed(seed)
    trainkit.manual_seed(seed)
    want = getattr(torch.empty(n, dtype=getattr(torch, dtype)), name)(*args).numpy()
    got = getattr(trainkit.empty(n, dtype=getattr(trainkit, dtype)), name)(*args).numpy()
    if name == "log_normal_" and dtype == "float64":  # exp of a fused multiply-add: one float64 ulp now and then
        np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)
    else:
        np.testing.assert_array_equal(got, want)
    assert _state_equal()


def test_geometric_fills_integers_and_log_normal_uses_the_cached_normal():
    torch.manual_seed(3)
    trainkit.manual_seed(3)
    want = torch.empty(2, 5, dtype=torch.int64).geometric_(0.2)
    got = trainkit.empty(2, 5, dtype=trainkit.int64).geometric_(0.2)
    assert got.tolist() == want.tolist() and got.dtype == trainkit.int64
    torch.empty(3, dtype=torch.float64).normal_()  # leaves a cached second normal behind
    trainkit.empty(3, dtype=trainkit.float64).normal_()
    np.testing.assert_array_equal(trainkit.empty(3).log_normal_().numpy(), torch.empty(3).log_normal_().numpy())


def test_views_fill_in_memory_order_and_generators_are_used():
    g, tg = trainkit.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = torch.empty(4, 3).t().cauchy_(generator=tg)
    got = trainkit.empty(4, 3).t().cauchy_(generator=g)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


NODES = {"cauchy_": "CauchyBackward0", "log_normal_": "LogNormalBackward0", "geometric_": "GeometricBackward0"}


@pytest.mark.parametrize(("name", "args", "node"), [(n, a, NODES[n]) for n, a in SAMPLERS])
def test_nodes_and_errors(name, args, node):
    x = trainkit.zeros(3, requires_grad=True) * 1
    assert type(getattr(x.clone(), name)(*args).grad_fn).__name__ == node
    for dtype in ("int64", "int32", "uint8", "bool"):
        if name != "geometric_":
            got, want = assert_same_error(
                torch, lambda lib, dev, d=dtype: getattr(lib.zeros(2, dtype=getattr(lib, d)), name)(*args)
            )
            assert str(got) == str(want)
    bad = {"cauchy_": (0.0, -1.0), "log_normal_": (1.0, 0.0), "geometric_": (1.0,)}[name]
    got, want = assert_same_error(torch, lambda lib, dev: getattr(lib.zeros(2), name)(*bad))
    assert str(got) == str(want)
