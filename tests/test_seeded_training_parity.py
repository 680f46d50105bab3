"""A model built and trained with the same seed as in PyTorch follows PyTorch step by step on the CPU: the same
initial weights, the same shuffled batches and the same dropout masks, so the same losses."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit


def run(lib, seed: int, steps: int = 20, dtype: str = "float32") -> list[float]:
    """Linear-Dropout-Linear regression with SGD on a shuffled DataLoader; every random draw from ``lib``."""
    lib.manual_seed(seed)
    dt = getattr(lib, dtype)
    x = lib.randn(64, 5, dtype=dt)
    y = (x[:, :1] * 2 - x[:, 1:2]).sin() + 0.1 * lib.randn(64, 1, dtype=dt)
    model = lib.nn.Sequential(lib.nn.Linear(5, 32), lib.nn.ReLU(), lib.nn.Dropout(0.3), lib.nn.Linear(32, 1)).to(dt)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
    losses = []
    while len(losses) < steps:
        for xb, yb in data:
            optimizer.zero_grad()
            loss = lib.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_losses_follow_torch_step_by_step(torch, seed, dtype):
    ours, theirs = run(trainkit, seed, dtype=dtype), run(torch, seed, dtype=dtype)
    assert len(ours) == len(theirs) == 20
    # float arithmetic in another order (BLAS, reductions) only, and the layers' float32 initial weights, which
    # nn.init may round once more than PyTorch (one float32 ulp): no step may drift away
    np.testing.assert_allclose(ours, theirs, rtol=1e-4 if dtype == "float32" else 1e-6)


def test_dropout_masks_and_batches_stay_in_step(torch):
    """After a pass over the data in training mode both streams are at the same place."""
    run(trainkit, 1, steps=8)
    run(torch, 1, steps=8)
    np.testing.assert_array_equal(to_numpy(trainkit.autograd.random.get_rng_state()), to_numpy(torch.get_rng_state()))
