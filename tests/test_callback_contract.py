"""The callback contract: what the Trainer hands every callback (set_model, set_params, set_run_dir) before training,
and the ProgressBar that sizes its bar from it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import trainkit
from trainkit import nn, optim
from trainkit.callbacks import Callback, CallbackList, ProgressBar
from trainkit.data import regression_curve
from trainkit.trainer import Trainer


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def make_trainer(callbacks, **kwargs):
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    return Trainer(
        model, optim.SGD(model.parameters(), lr=0.1), "mse", callbacks=callbacks, seed=0, verbose=False, **kwargs
    )


class Seen(Callback):
    """Records what the contract gave it when training begins."""

    def on_train_begin(self, logs=None):
        self.at_begin = {"model": self.model, "params": dict(self.params), "run_dir": self.run_dir}


def test_fit_hands_every_callback_its_params_before_training():
    seen = Seen()
    trainer = make_trainer([seen])
    trainer.fit(regression_curve(12, seed=0), epochs=3, batch_size=4)
    assert seen.at_begin["params"] == {"epochs": 3, "steps_per_epoch": 3, "verbose": False}
    assert seen.at_begin["model"] is trainer.model
    trainer.fit(regression_curve(10, seed=0), epochs=5, batch_size=4)  # a later fit brings its own figures
    assert seen.params == {"epochs": 5, "steps_per_epoch": 3, "verbose": False}


def test_steps_per_epoch_counts_batches_not_optimizer_steps():
    seen = Seen()
    make_trainer([seen], accumulate_steps=2).fit(regression_curve(16, seed=0), epochs=1, batch_size=4)
    assert seen.params["steps_per_epoch"] == 4


def test_fit_hands_the_run_dir(tmp_path):
    seen, without = Seen(), Seen()
    make_trainer([seen], run_dir=str(tmp_path)).fit(regression_curve(8, seed=0), epochs=1, batch_size=4)
    make_trainer([without]).fit(regression_curve(8, seed=0), epochs=1, batch_size=4)
    assert seen.at_begin["run_dir"] == tmp_path and isinstance(seen.at_begin["run_dir"], Path)
    assert without.at_begin["run_dir"] is None


def test_the_progress_bar_knows_the_number_of_batches():
    totals = []

    class Spy(ProgressBar):
        def on_epoch_begin(self, epoch, logs=None):
            super().on_epoch_begin(epoch, logs)
            totals.append((self.bar.total, self.bar.desc))

    out = FakeTerminal()
    make_trainer([Spy(file=out)]).fit(regression_curve(10, seed=0), epochs=2, batch_size=4)
    assert totals == [(3, "Epoch 1/2"), (3, "Epoch 2/2")]
    assert "3/3" in out.getvalue()


def test_a_subclass_without_super_init_still_gets_the_contract(tmp_path):
    class NoInit(Callback):
        def __init__(self, tag):  # no super().__init__(): the class-level defaults stand in
            self.tag = tag

        def on_train_begin(self, logs=None):
            self.at_begin = (self.model, dict(self.params), self.run_dir)

    bare = NoInit("x")
    assert (bare.trainer, bare.model, dict(bare.params), bare.run_dir) == (None, None, {}, None)
    trainer = make_trainer([bare], run_dir=tmp_path)
    trainer.fit(regression_curve(8, seed=0), epochs=2, batch_size=4)
    assert bare.at_begin == (trainer.model, {"epochs": 2, "steps_per_epoch": 2, "verbose": False}, tmp_path)
    assert Callback.params == {} and NoInit("y").params == {}  # nothing leaked into the class default


def test_callback_list_forwards_the_contract():
    a, b = Seen(), Seen()
    group = CallbackList([a, b])
    model = nn.Linear(1, 1)
    group.set_model(model)
    group.set_params({"epochs": 1, "steps_per_epoch": None, "verbose": True})
    group.set_run_dir("runs/x")
    for cb in (a, b):
        assert cb.model is model and cb.params["steps_per_epoch"] is None and cb.run_dir == Path("runs/x")


def test_set_trainer_alone_gives_a_hand_written_loop_model_and_run_dir(tmp_path):
    class Loop:
        model = nn.Linear(1, 1)
        run_dir = tmp_path

    cb = Seen()
    cb.set_trainer(Loop())
    assert cb.model is Loop.model and cb.run_dir == tmp_path


def test_params_are_a_copy():
    params = {"epochs": 2, "steps_per_epoch": 5, "verbose": False}
    cb = Callback()
    cb.set_params(params)
    params["epochs"] = 9
    assert cb.params["epochs"] == 2
    with pytest.raises(TypeError):
        Callback.params["epochs"] = 1  # the shared default cannot be written to
