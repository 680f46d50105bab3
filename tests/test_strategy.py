"""The Trainer's strategies (trainkit.training.strategy) and the small public pieces of trainkit.trainer: eval_mode,
make_loader, unpack_batch, DEFAULT_OPTIMIZER and loss names from the registry."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from trainkit import nn, optim
from trainkit.data import regression_curve
from trainkit.trainer import DEFAULT_OPTIMIZER, Trainer, eval_mode
from trainkit.training.strategy import DDPStrategy, Strategy, resolve


def test_resolve_names_and_instances():
    assert type(resolve("single_device")) is Strategy and type(resolve("ddp")) is DDPStrategy
    assert type(resolve("auto")) is Strategy  # no launcher
    mine = Strategy()
    assert resolve(mine) is mine
    with pytest.raises(ValueError, match="strategy must be 'auto', 'ddp' or 'single_device', got 'dp'"):
        resolve("dp")


def test_trainer_takes_a_strategy_instance_and_calls_its_hooks():
    calls = []

    class Counting(Strategy):
        name = "counting"

        def setup(self, trainer):
            calls.append("setup")

        def shard_loader(self, loader):
            calls.append("shard_loader")
            return loader

        def after_backward(self, step_now):
            calls.append("after_backward")

        def call_epoch_end(self, callbacks, epoch, logs):
            calls.append("call_epoch_end")
            super().call_epoch_end(callbacks, epoch, logs)

    trainkit.manual_seed(0)
    trainer = Trainer(nn.Linear(1, 1), strategy=Counting(), verbose=False)
    assert trainer.strategy == "counting" and isinstance(trainer.distribute_strategy, Counting)
    assert (trainer.world, trainer.rank, trainer.world_size) == (None, 0, 1)
    trainer.fit(regression_curve(8, seed=0), epochs=1, batch_size=4)
    assert calls == ["setup", "shard_loader", "after_backward", "after_backward", "call_epoch_end"]


def test_eval_mode_restores_each_flag_and_builds_no_graph():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.BatchNorm1d(2))
    net[2].eval()  # a frozen BatchNorm stays in eval mode afterwards
    with eval_mode(net) as model:
        assert model is net and not any(m.training for m in net.modules())
        assert not net(trainkit.ones(3, 2)).requires_grad
    assert [m.training for m in net.modules()] == [True, True, True, False]
    with pytest.raises(RuntimeError), eval_mode(net):
        raise RuntimeError("restored even so")
    assert net.training and not net[2].training


def test_evaluate_and_predict_leave_the_modes_as_they_were():
    trainkit.manual_seed(0)
    net = nn.Sequential(nn.Linear(1, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    trainer = Trainer(net, loss="mse", verbose=False)
    net[1].eval()
    x, y = regression_curve(6, seed=0).tensors
    trainer.evaluate(x, y)
    assert trainer.predict(x).shape == (6, 1)
    assert [m.training for m in net.modules()] == [True, True, False, True]


def test_make_loader_and_unpack_batch():
    trainer = Trainer(nn.Linear(1, 1), verbose=False)
    x, y = np.zeros((5, 1), np.float32), np.ones((5, 1), np.float32)
    batches = list(trainer.make_loader(x, y, batch_size=2))
    assert [len(b[0]) for b in batches] == [2, 2, 1]
    inputs, target = trainer.unpack_batch(batches[0])
    assert inputs.tolist() == [[0.0], [0.0]] and target.tolist() == [[1.0], [1.0]]
    assert trainer.unpack_batch(batches[0][0])[1] is None
    with pytest.raises(ValueError, match="no data"):
        trainer.make_loader(None)


def test_default_optimizer_is_built_from_the_public_constant():
    assert DEFAULT_OPTIMIZER == {"name": "SGD", "lr": 0.01}
    trainer = Trainer(nn.Linear(1, 1), verbose=False)
    assert isinstance(trainer.optimizer, optim.SGD) and trainer.optimizer.param_groups[0]["lr"] == 0.01
    assert DEFAULT_OPTIMIZER == {"name": "SGD", "lr": 0.01}  # left as it was


def test_loss_names_come_from_the_registry():
    assert isinstance(Trainer(nn.Linear(1, 1), loss="cross_entropy", verbose=False).loss_fn, nn.CrossEntropyLoss)
    assert isinstance(Trainer(nn.Linear(1, 1), loss="HuberLoss", verbose=False).loss_fn, nn.HuberLoss)
    with pytest.raises(ValueError, match=r"unknown loss 'mes'; did you mean 'mse'\?"):
        Trainer(nn.Linear(1, 1), loss="mes", verbose=False)
    with pytest.raises(TypeError, match="loss must be"):
        Trainer(nn.Linear(1, 1), loss=None, verbose=False)
