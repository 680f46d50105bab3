"""Training end to end: frozen layers stay frozen, and a small model trains exactly as PyTorch's does."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(1, 10)
        self.predict = nn.Linear(10, 1)

    def forward(self, x):
        return self.predict(self.hidden(x).relu())


def curve(n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.linspace(-1, 1, n, dtype=np.float32).reshape(-1, 1)
    y = (x**2 + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)
    return x, y


def test_frozen_layer_stays_bitwise_unchanged_and_gets_no_grad(device):
    trainkit.manual_seed(0)
    net = Net().to(device)
    net.hidden.requires_grad_(False)
    before = {k: to_numpy(v).copy() for k, v in net.hidden.state_dict().items()}
    predict_before = to_numpy(net.predict.weight).copy()
    opt = trainkit.optim.SGD(net.parameters(), lr=0.2)
    xa, ya = curve()
    x, y = trainkit.tensor(xa, device=device), trainkit.tensor(ya, device=device)
    for _ in range(100):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        assert net.hidden.weight.grad is None and net.hidden.bias.grad is None
    for k, v in net.hidden.state_dict().items():
        assert np.array_equal(to_numpy(v), before[k]), f"frozen hidden.{k} changed"
    assert not np.allclose(to_numpy(net.predict.weight), predict_before), "the trainable layer did not move"
    assert all(p not in opt.state for p in net.hidden.parameters()), "the optimizer kept state for frozen weights"


def test_output_of_frozen_parameters_is_a_leaf_that_needs_no_grad():
    net = Net()
    net.requires_grad_(False)
    out = net(trainkit.ones(3, 1))
    assert not out.requires_grad and out.is_leaf and out.grad_fn is None


def test_training_matches_torch_step_for_step(torch):
    """Same initial weights and data: 50 SGD-with-momentum steps give the same losses and weights as PyTorch."""
    trainkit.manual_seed(0)
    ours = Net()

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.nn.Linear(1, 10)
            self.predict = torch.nn.Linear(10, 1)

        def forward(self, x):
            return self.predict(torch.relu(self.hidden(x)))

    theirs = TorchNet()
    with torch.no_grad():
        for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            q.copy_(torch.from_numpy(to_numpy(p).copy()))
    xa, ya = curve()
    opt_a = trainkit.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    opt_b = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for step in range(50):
        opt_a.zero_grad()
        loss_a = nn.MSELoss()(ours(trainkit.tensor(xa)), trainkit.tensor(ya))
        loss_a.backward()
        opt_a.step()
        opt_b.zero_grad()
        loss_b = torch.nn.MSELoss()(theirs(torch.tensor(xa)), torch.tensor(ya))
        loss_b.backward()
        opt_b.step()
        assert loss_a.item() == pytest.approx(loss_b.item(), rel=1e-4, abs=1e-6), f"step {step}"
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(to_numpy(p), q.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert loss_a.dtype == trainkit.float32 and ours.hidden.weight.grad.dtype == trainkit.float32
