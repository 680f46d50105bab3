"""Under CPU autocast the losses run in float32 and scaled_dot_product_attention in bfloat16, as torch's lists say;
gradients reach the float32 weight as float32 with torch's values."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit


def losses(lib):
    F = lib.nn.functional
    x = lib.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))
    w = lib.tensor(np.linspace(-0.5, 0.5, 25, dtype=np.float32).reshape(5, 5), requires_grad=True)
    out = {}
    with lib.autocast("cpu"):
        y = F.linear(x, w)
        target = lib.tensor(np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)).to(lib.bfloat16)
        out["mse_loss"] = F.mse_loss(y, target)
        out["l1_loss"] = F.l1_loss(y, target)
        out["huber_loss"] = F.huber_loss(y, target)
        out["smooth_l1_loss"] = F.smooth_l1_loss(y, target)
        out["binary_cross_entropy"] = F.binary_cross_entropy(y.sigmoid(), target)
        out["binary_cross_entropy_with_logits"] = F.binary_cross_entropy_with_logits(y, target)
        out["kl_div"] = F.kl_div(y.log_softmax(-1), target.softmax(-1), reduction="batchmean")
        out["cross_entropy"] = F.cross_entropy(y, lib.tensor([0, 1, 2, 3]))
        out["nll_loss"] = F.nll_loss(y.log_softmax(-1), lib.tensor([0, 1, 2, 3]))
        q = y.float().reshape(1, 1, 4, 5)
        out["scaled_dot_product_attention"] = F.scaled_dot_product_attention(q, q, q)
    sum(v.float().sum() for v in out.values()).backward()
    return out, w.grad


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_losses_and_attention_take_torch_dtypes_under_autocast(torch):
    got, grad = losses(trainkit)
    expected, tgrad = losses(torch)
    for name, value in expected.items():
        assert str(got[name].dtype).split(".")[1] == str(value.dtype).split(".")[1], name
        np.testing.assert_allclose(to_numpy(got[name].float()), to_numpy(value.float()), rtol=2e-2, atol=1e-2)
    assert grad.dtype is trainkit.float32
    np.testing.assert_allclose(to_numpy(grad), to_numpy(tgrad), rtol=2e-2, atol=2e-3)


def test_bf16_true_trains_the_model_in_bfloat16():
    trainkit.manual_seed(0)
    model = trainkit.nn.Sequential(trainkit.nn.Linear(1, 10), trainkit.nn.ReLU(), trainkit.nn.Linear(10, 1))
    trainer = trainkit.Trainer(
        model, trainkit.optim.SGD(model.parameters(), lr=0.2), "mse", seed=0, verbose=False, precision="bf16-true"
    )
    x = trainkit.linspace(-1, 1, 100).unsqueeze(1)
    history = trainer.fit(x, x**2, epochs=10, batch_size=20)
    assert history.history["loss"][-1] < history.history["loss"][0] / 2
    assert all(p.dtype is trainkit.bfloat16 for p in model.parameters())
    assert trainer.predict(x[:2]).dtype is trainkit.bfloat16
