"""The Trainer: fit / evaluate / predict, freezing, clipping, accumulation, metrics, reproducibility and resume."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit import nn, optim
from trainkit.callbacks.base import Callback
from trainkit.data import DataLoader, TensorDataset, regression_curve
from trainkit.trainer import Trainer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(1, 10)
        self.predict = nn.Linear(10, 1)

    def forward(self, x):
        return self.predict(self.hidden(x).relu())


def make(seed=0, **kwargs):
    trainkit.manual_seed(seed)
    net = Net()
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return Trainer(net, opt, nn.MSELoss(), metrics=["mae"], seed=seed, verbose=False, **kwargs)


def weights(trainer) -> dict:
    return {k: to_numpy(v).copy() for k, v in trainer.model.state_dict().items()}


def test_fit_reduces_the_loss_and_fills_the_history():
    trainer = make()
    history = trainer.fit(regression_curve(100, seed=0), epochs=60, batch_size=20)
    assert len(history.history["loss"]) == 60 and len(history.history["mae"]) == 60
    assert history.history["loss"][-1] < history.history["loss"][0] / 5


def test_same_seed_gives_bitwise_the_same_history_and_weights():
    a, b = make(), make()
    ha = a.fit(regression_curve(64, seed=1), epochs=5, batch_size=8)
    hb = b.fit(regression_curve(64, seed=1), epochs=5, batch_size=8)
    assert ha.history == hb.history
    for k, v in weights(a).items():
        assert np.array_equal(v, weights(b)[k])


def test_resume_equals_an_uninterrupted_run(tmp_path):
    data = regression_curve(64, seed=2)
    full = make(run_dir=tmp_path / "full")
    full.fit(data, epochs=6, batch_size=8)
    first = make(run_dir=tmp_path / "half")
    first.fit(data, epochs=3, batch_size=8)
    second = make(run_dir=tmp_path / "other")  # a fresh process would start like this
    second.fit(data, epochs=6, batch_size=8, resume_from=tmp_path / "half" / "checkpoints" / "last.npz")
    assert second.history == full.history
    for k, v in weights(full).items():
        assert np.array_equal(v, weights(second)[k]), k


def test_a_resumed_run_resumed_again_equals_an_uninterrupted_run(tmp_path):
    """The second checkpoint holds the random stream as it was when written, not the one the first resume read."""

    def run(name, epochs, resume=None):
        trainkit.manual_seed(0)
        model = nn.Sequential(nn.Linear(1, 16), nn.Dropout(0.5), nn.Linear(16, 1))  # dropout draws from the stream
        trainer = Trainer(
            model, optim.SGD(model.parameters(), lr=0.1), "mse", seed=0, verbose=False, run_dir=tmp_path / name
        )
        trainer.fit(
            regression_curve(16, seed=0),
            epochs=epochs,
            batch_size=4,
            resume_from=None if resume is None else tmp_path / resume / "checkpoints" / "last.npz",
        )
        return weights(trainer)

    full = run("full", 3)
    run("a", 1)
    run("b", 2, resume="a")
    third = run("c", 3, resume="b")
    for k, v in full.items():
        assert np.array_equal(v, third[k]), k


def test_evaluate_and_predict_build_no_graph_and_restore_train_mode():
    trainer = make()
    seen = []
    trainer.model.register_forward_hook(lambda m, args, out: seen.append((out.requires_grad, m.training)))
    trainer.model.train()
    result = trainer.evaluate(regression_curve(10, seed=0))
    out = trainer.predict(trainkit.ones(3, 1))
    assert set(result) == {"loss", "mae"}
    assert seen and all(not requires and not training for requires, training in seen)
    assert not out.requires_grad and out.shape == (3, 1)
    assert trainer.model.training


def test_frozen_layer_stays_unchanged_and_counts_are_reported(capsys):
    trainkit.manual_seed(0)
    net = Net()
    trainer = Trainer(net, optim.SGD(net.parameters(), lr=0.2), "mse", freeze=["hidden"], seed=0)
    before = to_numpy(net.hidden.weight).copy()
    trainer.fit(regression_curve(50, seed=0), epochs=20, batch_size=10)
    assert np.array_equal(to_numpy(net.hidden.weight), before)
    assert net.hidden.weight.grad is None
    assert "Trainable params: 11 | Frozen params: 20" in capsys.readouterr().out


def test_unknown_frozen_module_is_named():
    with pytest.raises(ValueError, match="no sub-module 'hiden'"):
        Trainer(Net(), freeze=["hiden"], verbose=False)


def test_unfreezing_from_a_callback_makes_the_layer_learn():
    class Unfreeze(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                self.trainer.model.hidden.requires_grad_(True)

    trainkit.manual_seed(0)
    net = Net()
    net.hidden.requires_grad_(False)
    trainer = Trainer(net, optim.SGD(net.parameters(), lr=0.2), "mse", callbacks=[Unfreeze()], verbose=False)
    before = to_numpy(net.hidden.weight).copy()
    trainer.fit(regression_curve(50, seed=0), epochs=4, batch_size=10)
    assert not np.array_equal(to_numpy(net.hidden.weight), before)


def test_gradient_accumulation_equals_one_big_batch():
    x, y = regression_curve(32, seed=3).tensors
    big, small = make(), make(accumulate_steps=4)
    big.fit(DataLoader(TensorDataset(x, y), batch_size=32), epochs=1)
    small.fit(DataLoader(TensorDataset(x, y), batch_size=8), epochs=1)
    for k, v in weights(big).items():
        np.testing.assert_allclose(weights(small)[k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_grad_clip_norm_limits_the_step():
    clipped = make(grad_clip_norm=1e-3)
    norms = []

    class Record(Callback):
        def on_before_optimizer_step(self, optimizer):
            total = sum(float((p.grad * p.grad).sum().item()) for p in clipped.model.parameters())
            norms.append(total**0.5)

    clipped.callbacks.append(Record())
    clipped.callbacks.set_trainer(clipped)
    clipped.fit(regression_curve(32, seed=0), epochs=1, batch_size=8)
    assert norms and max(norms) <= 1e-3 * (1 + 1e-4)


def test_hooks_are_called_in_order():
    order = []

    class Record(Callback):
        def __getattribute__(self, name):
            if name.startswith("on_"):
                order.append(name)
            return super().__getattribute__(name)

    trainer = make(callbacks=[Record()])
    trainer.fit(regression_curve(8, seed=0), val_data=regression_curve(4, seed=1), epochs=1, batch_size=8)
    assert order == [  # the validation pass is an evaluation: the test hooks, as in Keras 3
        "on_train_begin",
        "on_epoch_begin",
        "on_train_batch_begin",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_train_batch_end",
        "on_test_begin",
        "on_test_batch_begin",
        "on_test_batch_end",
        "on_test_end",
        "on_validation_end",
        "on_epoch_end",
        "on_train_end",
    ]


def test_accuracy_and_top_k_metrics():
    from trainkit.metrics import get_metric

    logits = trainkit.tensor([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4], [0.2, 0.3, 0.5]])
    target = trainkit.tensor([1, 2, 0])
    acc, top2 = get_metric("accuracy"), get_metric("top2_accuracy")
    acc.update(logits, target)
    top2.update(logits, target)
    assert acc.compute() == pytest.approx(1 / 3) and top2.compute() == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        get_metric("f1")
