"""Callbacks: hook order, History/CSV contents, early stopping, checkpoints, NaN guard, gradient and activation
monitors, schedulers, progress output and plots; with a stub trainer driving the hooks and with the real Trainer."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit import nn, optim
from trainkit.callbacks import (
    ActivationGradientMonitor,
    Callback,
    CallbackList,
    CSVLogger,
    EarlyStopping,
    GradientMonitor,
    History,
    LRSchedulerCallback,
    ModelCheckpoint,
    PlotCallback,
    ProgressBar,
    TerminateOnNaN,
)
from trainkit.data import regression_curve
from trainkit.optim.lr_scheduler import ReduceLROnPlateau, StepLR
from trainkit.trainer import Trainer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(1, 10)
        self.predict = nn.Linear(10, 1)

    def forward(self, x):
        return self.predict(self.hidden(x).relu())


class StubTrainer:
    """The attributes of the Trainer contract, and a loop that calls the hooks in the contract's order."""

    def __init__(self, callbacks=(), run_dir=None, lr=0.1, loss_fn=None):
        trainkit.manual_seed(0)
        self.model = Net()
        self.optimizer = optim.SGD(self.model.parameters(), lr=lr)
        self.scheduler = None
        self.loss_fn = loss_fn or nn.MSELoss()
        self.stop_training = False
        self.epoch = 0
        self.global_step = 0
        self.run_dir = run_dir
        self.history: dict[str, list] = {}
        self.saved: list[Path] = []
        self.callbacks = CallbackList(callbacks)
        self.callbacks.set_trainer(self)

    def save_checkpoint(self, path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"callbacks": self.callbacks.state_dict(), "epoch": self.epoch}
        path.write_text(json.dumps(state))
        self.saved.append(path)
        return path

    def fit(self, epochs=2, batches=3, val=True):
        x, y = regression_curve(12, seed=0).tensors
        cbs, logs = self.callbacks, {}
        try:
            cbs.on_train_begin(logs)
            for epoch in range(epochs):
                self.epoch = epoch
                cbs.on_epoch_begin(epoch, {})
                losses = []
                for b in range(batches):
                    cbs.on_train_batch_begin(b, {})
                    loss = self.loss_fn(self.model(x), y)
                    loss.backward()
                    cbs.on_after_backward()
                    cbs.on_before_optimizer_step(self.optimizer)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.global_step += 1
                    losses.append(loss.item())
                    cbs.on_train_batch_end(b, {"loss": losses[-1], "step": self.global_step})
                    if self.stop_training:
                        break
                logs = {"loss": sum(losses) / len(losses)}
                if val:
                    cbs.on_test_begin({})
                    cbs.on_test_batch_begin(0, {})
                    with trainkit.no_grad():
                        test_logs = {"loss": self.loss_fn(self.model(x), y).item()}
                    cbs.on_test_batch_end(0, test_logs)
                    cbs.on_test_end(test_logs)
                    val_logs = {"val_loss": test_logs["loss"]}
                    cbs.on_validation_end(val_logs)
                    logs.update(val_logs)
                logs["lr"] = self.optimizer.param_groups[0]["lr"]
                cbs.on_epoch_end(epoch, logs)
                for key, value in logs.items():
                    self.history.setdefault(key, []).append(value)
                if self.stop_training:
                    break
            cbs.on_train_end(logs)
        except BaseException as exc:
            cbs.on_exception(exc)
            raise
        return self.history


def real_trainer(callbacks=(), seed=0, **kwargs):
    trainkit.manual_seed(seed)
    net = Net()
    return Trainer(
        net, optim.SGD(net.parameters(), lr=0.1), nn.MSELoss(), callbacks=callbacks, seed=seed, verbose=False, **kwargs
    )


class Recorder(Callback):
    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name.startswith("on_"):
            object.__getattribute__(self, "calls").append(name)
        return super().__getattribute__(name)


ONE_BATCH = ["on_train_batch_begin", "on_after_backward", "on_before_optimizer_step", "on_train_batch_end"]
# the validation pass is an evaluation: the test hooks around its batches, as in Keras 3
ONE_TEST_BATCH = ["on_test_batch_begin", "on_test_batch_end"]


def expected_calls(epochs, batches, val_batches=1):
    validation = ["on_test_begin", *ONE_TEST_BATCH * val_batches, "on_test_end", "on_validation_end"]
    epoch = ["on_epoch_begin", *ONE_BATCH * batches, *validation, "on_epoch_end"]
    return ["on_train_begin", *epoch * epochs, "on_train_end"]


def grad_figures(model):
    """Per-parameter statistics computed directly from ``.grad``."""
    out, total = {}, 0.0
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        g = to_numpy(p.grad).astype(np.float64)
        out[f"grad_norm/{name}"] = float(np.sqrt((g * g).sum()))
        out[f"grad_max/{name}"] = float(np.abs(g).max())
        out[f"grad_zero_frac/{name}"] = float((g == 0).mean())
        out[f"grad_nonfinite/{name}"] = int((~np.isfinite(g)).sum())
        total += float((g * g).sum())
    out["grad_norm/global"] = math.sqrt(total)
    return out


def assert_figures_equal(got, want):
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


# ------------------------------------------------------------------------------------------------------ hook order
def test_hooks_run_in_contract_order_with_a_stub_trainer():
    rec = Recorder()
    StubTrainer([rec]).fit(epochs=2, batches=3)
    assert rec.calls == expected_calls(2, 3)


def test_hooks_run_in_contract_order_with_the_trainer():
    rec = Recorder()
    trainer = real_trainer([rec])
    trainer.fit(regression_curve(12, seed=0), val_data=regression_curve(4, seed=1), epochs=2, batch_size=4)
    assert rec.calls == expected_calls(2, 3)
    assert rec.trainer is trainer


def test_on_exception_is_called_when_training_raises():
    rec = Recorder()

    class Boom(Callback):
        def on_train_batch_end(self, batch, logs=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        real_trainer([Boom(), rec]).fit(regression_curve(8, seed=0), epochs=1, batch_size=4)
    assert rec.calls[-1] == "on_exception" and "on_train_end" not in rec.calls


def test_callback_list_runs_epoch_end_writers_after_producers_and_checkpoints_last():
    seen = []

    class Producer(Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["extra"] = 1.0

    class Saver(Callback):
        order = Callback.CHECKPOINT

        def on_epoch_end(self, epoch, logs=None):
            seen.append(("saver", dict(logs)))

    history = History()
    cbs = CallbackList([Saver(), history, Producer()])
    cbs.on_epoch_end(0, {"loss": 1.0})
    assert history.history["extra"] == [1.0]
    assert seen == [("saver", {"loss": 1.0, "extra": 1.0})]


def test_callback_list_state_round_trip_keys_repeated_classes_apart():
    a, b = EarlyStopping(patience=3), EarlyStopping(patience=3)
    a.wait, b.wait = 1, 2
    state = json.loads(json.dumps(CallbackList([a, b, Callback()]).state_dict()))
    assert set(state) == {"EarlyStopping", "EarlyStopping#2"}
    c, d = EarlyStopping(), EarlyStopping()
    CallbackList([c, d]).load_state_dict(state)
    assert (c.wait, d.wait) == (1, 2)


# ---------------------------------------------------------------------------------------------------- history, csv
def test_history_records_each_epoch_and_pads_late_keys():
    h = History()
    h.on_epoch_end(0, {"loss": 2.0})
    h.on_epoch_end(1, {"loss": 1.0, "val_loss": 1.5})
    h.on_epoch_end(2, {"val_loss": 1.2})
    assert h.history == {"epoch": [0, 1, 2], "loss": [2.0, 1.0, None], "val_loss": [None, 1.5, 1.2]}
    restored = History()
    restored.load_state_dict(json.loads(json.dumps(h.state_dict())))
    assert restored.history == h.history


def test_history_with_the_trainer_matches_the_trainers_history():
    h = History()
    trainer = real_trainer([h])
    trainer.fit(regression_curve(12, seed=0), val_data=regression_curve(4, seed=1), epochs=3, batch_size=4)
    assert h.history["epoch"] == [0, 1, 2]
    for key, values in trainer.history.items():
        assert h.history[key] == values


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_csv_logger_writes_one_row_per_epoch_and_widens_the_header(tmp_path):
    path = tmp_path / "log.csv"
    logger = CSVLogger(path)
    logger.on_train_begin()
    logger.on_epoch_end(0, {"loss": 1.0})
    logger.on_epoch_end(1, {"loss": 0.5, "val_loss": 0.75})
    rows = read_csv(path)
    assert path.read_text().splitlines()[0] == "epoch,loss,val_loss"
    assert rows == [{"epoch": "0", "loss": "1.0", "val_loss": ""}, {"epoch": "1", "loss": "0.5", "val_loss": "0.75"}]


def test_csv_logger_append_keeps_rows_and_a_new_file_starts_afresh(tmp_path):
    path = tmp_path / "log.csv"
    for append, expected in [(False, ["0"]), (True, ["0", "0"]), (False, ["0"])]:
        logger = CSVLogger(path, append=append)
        logger.on_train_begin()
        logger.on_epoch_end(0, {"loss": 1.0})
        assert [r["epoch"] for r in read_csv(path)] == expected


def test_csv_logger_in_run_dir_with_the_trainer_and_grad_keys(tmp_path):
    trainer = real_trainer([CSVLogger("log.csv"), GradientMonitor(file=io.StringIO())], run_dir=tmp_path)
    trainer.fit(regression_curve(12, seed=0), val_data=regression_curve(4, seed=1), epochs=2, batch_size=4)
    rows = read_csv(tmp_path / "log.csv")
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert {"loss", "val_loss", "lr", "grad_norm/global", "grad_norm/hidden.weight"} <= set(rows[0])
    assert float(rows[1]["loss"]) == pytest.approx(trainer.history["loss"][1])


def test_csv_logger_resume_drops_rows_after_the_checkpoint(tmp_path):
    path = tmp_path / "log.csv"
    logger = CSVLogger(path)
    logger.on_train_begin()
    logger.on_epoch_end(0, {"loss": 1.0})
    state = logger.state_dict()
    logger.on_epoch_end(1, {"loss": 0.9})  # written, then the run died before checkpointing epoch 1
    resumed = CSVLogger(path)
    resumed.load_state_dict(state)
    resumed.on_train_begin()
    resumed.on_epoch_end(1, {"loss": 0.8})
    assert [(r["epoch"], r["loss"]) for r in read_csv(path)] == [("0", "1.0"), ("1", "0.8")]


# --------------------------------------------------------------------------------------------------- early stopping
class Bare:
    stop_training = False
    model = None


def run_stopper(stopper, values, trainer=None):
    trainer = trainer or Bare()
    stopper.set_trainer(trainer)
    stopped_at = None
    for epoch, value in enumerate(values):
        stopper.on_epoch_end(epoch, {"val_loss": value, "val_acc": value})
        if trainer.stop_training:
            stopped_at = epoch
            break
    return stopped_at


def test_early_stopping_patience():
    assert run_stopper(EarlyStopping(patience=0), [1.0, 0.9, 0.95, 0.8]) == 2
    assert run_stopper(EarlyStopping(patience=1), [1.0, 0.9, 0.95, 0.8]) == 2
    assert run_stopper(EarlyStopping(patience=2), [1.0, 0.9, 0.95, 0.92, 0.91, 0.5]) == 3
    assert run_stopper(EarlyStopping(patience=2), [1.0, 0.9, 0.95, 0.85, 0.91, 0.92]) == 5
    assert run_stopper(EarlyStopping(patience=3), [1.0, 0.9, 0.95, 0.85, 0.91, 0.92]) is None


def test_early_stopping_min_delta_and_mode_max():
    # 0.95 beats 1.0 by 0.05, not by more than min_delta=0.1: no improvement
    assert run_stopper(EarlyStopping(min_delta=0.1, patience=2), [1.0, 0.95, 0.92]) == 2
    assert run_stopper(EarlyStopping(min_delta=0.01, patience=2), [1.0, 0.95, 0.92]) is None
    stopper = EarlyStopping(monitor="val_acc", mode="max", patience=0)
    assert run_stopper(stopper, [0.5, 0.6, 0.55]) == 2
    assert (stopper.best, stopper.best_epoch) == (0.6, 1)


def test_early_stopping_warns_once_about_a_missing_key():
    stopper = EarlyStopping(monitor="val_acc")
    stopper.set_trainer(Bare())
    with pytest.warns(UserWarning, match="val_acc") as caught:
        stopper.on_epoch_end(0, {"loss": 1.0})
        stopper.on_epoch_end(1, {"loss": 1.0})
    assert len(caught) == 1 and not stopper.trainer.stop_training


def test_early_stopping_restores_the_best_weights():
    stopper = EarlyStopping(patience=2, restore_best_weights=True)
    trainer = StubTrainer([stopper])
    snapshots = {}

    class Snap(Callback):
        def on_epoch_end(self, epoch, logs=None):
            snapshots[epoch] = {k: to_numpy(v).copy() for k, v in trainer.model.state_dict().items()}
            logs["val_loss"] = [3.0, 1.0, 2.0, 2.5, 0.1][epoch]  # best at epoch 1

    trainer.callbacks.callbacks.insert(0, Snap())
    trainer.callbacks.set_trainer(trainer)
    trainer.fit(epochs=5)
    assert stopper.stopped_epoch == 3 and stopper.best_epoch == 1
    for key, value in trainer.model.state_dict().items():
        np.testing.assert_array_equal(to_numpy(value), snapshots[1][key])
    assert not np.array_equal(snapshots[1]["hidden.weight"], snapshots[3]["hidden.weight"])


def test_early_stopping_state_round_trip_continues_counting():
    first = EarlyStopping(patience=3)
    run_stopper(first, [1.0, 0.9, 0.95])
    state = json.loads(json.dumps(first.state_dict()))
    assert state == {"best": 0.9, "best_epoch": 1, "wait": 1, "stopped_epoch": None}
    resumed = EarlyStopping(patience=3)
    resumed.load_state_dict(state)
    trainer = Bare()
    resumed.set_trainer(trainer)
    resumed.on_epoch_end(3, {"val_loss": 0.93})
    assert not trainer.stop_training
    resumed.on_epoch_end(4, {"val_loss": 0.94})
    assert trainer.stop_training and resumed.stopped_epoch == 4


# ------------------------------------------------------------------------------------------------------ checkpoints
def test_model_checkpoint_best_and_last_decisions(tmp_path):
    ckpt = ModelCheckpoint(tmp_path)
    trainer = StubTrainer([ckpt])
    ckpt.on_train_begin()
    for epoch, val in enumerate([1.0, 0.8, 0.9, 0.7]):
        trainer.epoch = epoch
        ckpt.on_epoch_end(epoch, {"loss": 1.0, "val_loss": val})
    names = [p.name for p in trainer.saved]
    assert names == ["best.npz", "last.npz", "best.npz", "last.npz", "last.npz", "best.npz", "last.npz"]
    assert (ckpt.best, ckpt.best_epoch) == (0.7, 3)
    # the checkpoint holds the callback's state as of that epoch, including the new best
    assert json.loads((tmp_path / "best.npz").read_text())["callbacks"]["ModelCheckpoint"]["best"] == 0.7


def test_model_checkpoint_mode_max_only_last_and_missing_monitor(tmp_path):
    ckpt = ModelCheckpoint(tmp_path, monitor="val_acc", mode="max", save_last=False)
    trainer = StubTrainer([ckpt])
    for epoch, acc in enumerate([0.5, 0.4, 0.6]):
        ckpt.on_epoch_end(epoch, {"loss": 1.0, "val_acc": acc})
    assert [p.name for p in trainer.saved] == ["best.npz", "best.npz"] and ckpt.best_epoch == 2
    only_last = ModelCheckpoint(tmp_path / "b")
    trainer = StubTrainer([only_last])
    with pytest.warns(UserWarning, match="val_loss"):
        only_last.on_epoch_end(0, {"loss": 1.0})
    assert [p.name for p in trainer.saved] == ["last.npz"]


def test_model_checkpoint_needs_a_directory():
    ckpt = ModelCheckpoint()
    StubTrainer([ckpt])
    with pytest.raises(ValueError, match="dirpath"):
        ckpt.on_train_begin()


def test_model_checkpoint_with_the_trainer_writes_loadable_files_and_resumes(tmp_path):
    ckpt, stopper = ModelCheckpoint(), EarlyStopping(patience=5)
    trainer = real_trainer([ckpt, stopper], run_dir=tmp_path)
    trainer.fit(regression_curve(12, seed=0), val_data=regression_curve(4, seed=1), epochs=3, batch_size=4)
    assert (tmp_path / "checkpoints" / "best.npz").exists() and (tmp_path / "checkpoints" / "last.npz").exists()
    ckpt2, stopper2 = ModelCheckpoint(), EarlyStopping(patience=5)
    resumed = real_trainer([ckpt2, stopper2], run_dir=tmp_path)
    resumed.load_checkpoint(tmp_path / "checkpoints" / "last.npz")
    assert ckpt2.state_dict() == ckpt.state_dict()
    assert stopper2.state_dict() == stopper.state_dict()


# --------------------------------------------------------------------------------------------------- terminate on nan
def test_terminate_on_nan_stops_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    calls = {"n": 0}

    def loss_fn(output, target):
        calls["n"] += 1
        loss = nn.functional.mse_loss(output, target)
        # the 5th call: epoch 0 made 3 batches and a validation; this is epoch 1's first batch, the 4th step
        return loss * float("nan") if calls["n"] == 5 else loss

    guard, ckpt = TerminateOnNaN(), ModelCheckpoint(tmp_path)
    trainer = StubTrainer([guard, ckpt], loss_fn=loss_fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(epochs=4, batches=3)
    messages = [str(w.message) for w in caught]
    assert any("TerminateOnNaN" in m and "at step 4 (epoch 2, batch 1)" in m for m in messages)
    assert any("no checkpoint written" in m for m in messages)
    assert guard.stopped_step == 4 and trainer.epoch == 1 and trainer.global_step == 4
    # only epoch 0 was saved: its files stay, nothing from the poisoned epoch 1
    state = json.loads((tmp_path / "last.npz").read_text())
    assert state["epoch"] == 0 and [p.name for p in trainer.saved] == ["best.npz", "last.npz"]


def test_terminate_on_nan_with_the_trainer(tmp_path):
    calls = {"n": 0}

    def loss_fn(output, target):
        calls["n"] += 1
        loss = nn.functional.mse_loss(output, target)
        return loss * float("inf") if calls["n"] == 2 else loss

    guard = TerminateOnNaN()
    trainer = real_trainer([guard, ModelCheckpoint(tmp_path)])
    trainer.loss_fn = loss_fn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(regression_curve(12, seed=0), epochs=3, batch_size=4, shuffle=False)
    assert guard.stopped_step == 2 and trainer.global_step == 2
    assert any("step 2" in str(w.message) for w in caught)
    assert not (tmp_path / "last.npz").exists()


# --------------------------------------------------------------------------------------------------- gradient monitor
def monitored_stub(**kwargs):
    monitor = GradientMonitor(file=io.StringIO(), **kwargs)
    trainer = StubTrainer([monitor])
    return monitor, trainer


def one_step(trainer, batch=0):
    """One training step driven by hand, stopping before optimizer.step(): the .grad of each parameter is there."""
    x, y = regression_curve(12, seed=0).tensors
    trainer.callbacks.on_train_batch_begin(batch, {})
    trainer.loss_fn(trainer.model(x), y).backward()
    trainer.callbacks.on_after_backward()
    trainer.callbacks.on_before_optimizer_step(trainer.optimizer)


def test_gradient_monitor_figures_equal_norms_from_grad():
    monitor, trainer = monitored_stub()
    with trainkit.no_grad():  # three dead relu units: rows of zeros in the hidden layer's gradient
        trainer.model.hidden.weight[:3] = 0.0
        trainer.model.hidden.bias[:3] = -1.0
    trainer.callbacks.on_train_begin({})
    trainer.callbacks.on_epoch_begin(0, {})
    one_step(trainer)
    want = grad_figures(trainer.model)
    assert_figures_equal(monitor.last, want)
    # those three, and units 4, 8 and 9, which seed 0 (PyTorch's numbers) leaves dead on x in [-1, 1]
    assert want["grad_zero_frac/hidden.weight"] == pytest.approx(0.6)
    logs = {"loss": 1.0}
    trainer.callbacks.on_train_batch_end(0, {"loss": 1.0, "step": 1})
    trainer.callbacks.on_epoch_end(0, logs)
    assert_figures_equal({k: v for k, v in logs.items() if k.startswith("grad_")}, want)
    trainer.callbacks.on_train_end({})


def test_gradient_monitor_with_the_trainer_matches_grad_every_step():
    checked = []

    class Check(Callback):
        def on_before_optimizer_step(self, optimizer):
            assert_figures_equal(monitor.last, grad_figures(self.trainer.model))
            checked.append(self.trainer.global_step)

    monitor = GradientMonitor(file=io.StringIO())
    trainer = real_trainer([monitor, Check()])
    trainer.fit(regression_curve(12, seed=0), epochs=2, batch_size=4)
    assert checked == [0, 1, 2, 3, 4, 5]
    assert len(trainer.history["grad_norm/global"]) == 2
    table = monitor.file.getvalue().splitlines()  # printed at train end
    assert table[0].split()[:2] == ["parameter", "steps"] and table[2].split()[:2] == ["hidden.weight", "6"]


def test_gradient_monitor_records_optimizer_steps_under_gradient_accumulation():
    monitor = GradientMonitor(file=io.StringIO())
    trainer = real_trainer([monitor], accumulate_steps=2)
    trainer.fit(regression_curve(16, seed=0), epochs=1, batch_size=4)
    assert trainer.global_step == 2 and monitor.summary["global"]["steps"] == 2


def test_gradient_monitor_epoch_logs_aggregate_the_logged_steps():
    monitor, trainer = monitored_stub(log_every=2)
    norms = []

    class Grab(Callback):
        def on_before_optimizer_step(self, optimizer):
            norms.append(grad_figures(self.trainer.model)["grad_norm/global"])

    trainer.callbacks.append(Grab())
    trainer.callbacks.set_trainer(trainer)
    trainer.fit(epochs=1, batches=4)
    # steps 0 and 2 are logged (global_step % 2 == 0 at batch begin)
    assert trainer.history["grad_norm/global"][0] == pytest.approx((norms[0] + norms[2]) / 2, rel=1e-5)
    assert monitor.summary["global"]["logged"] == 2 and monitor.summary["global"]["steps"] == 4


def test_gradient_monitor_keeps_no_gradient_alive():
    monitor, trainer = monitored_stub()
    trainer.callbacks.on_train_begin({})
    p = trainer.model.hidden.weight
    refs = []
    handle = p.register_hook(lambda g: refs.append(weakref.ref(g)))  # after the monitor's hook: the same grad
    one_step(trainer)
    assert refs and monitor.last
    trainer.optimizer.zero_grad()  # .grad = None: the last reference outside the monitor, if .grad is that tensor
    assert refs[0]() is None
    handle.remove()
    trainer.callbacks.on_train_end({})


def test_gradient_monitor_removes_its_hooks_at_train_end():
    monitor, trainer = monitored_stub()
    trainer.fit(epochs=1, batches=2)
    assert monitor.handles == {}
    monitor._active = True  # even if it were recording, no hook is left to feed it
    x, y = regression_curve(12, seed=0).tensors
    trainer.loss_fn(trainer.model(x), y).backward()
    assert monitor._pending == {}


def test_gradient_monitor_follows_freezing_and_unfreezing():
    monitor, trainer = monitored_stub()
    trainer.model.hidden.requires_grad_(False)

    class Toggle(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                self.trainer.model.hidden.requires_grad_(True)
            if epoch == 2:
                self.trainer.model.predict.requires_grad_(False)

    trainer.callbacks.callbacks.insert(0, Toggle())
    trainer.callbacks.set_trainer(trainer)
    seen = []

    class Look(Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(sorted(monitor.handles))

    trainer.callbacks.append(Look())
    trainer.callbacks.set_trainer(trainer)
    history = trainer.fit(epochs=3, batches=1)
    assert seen == [
        ["predict.bias", "predict.weight"],
        ["hidden.bias", "hidden.weight", "predict.bias", "predict.weight"],
        ["hidden.bias", "hidden.weight"],
    ]
    # the stub trainer appends the keys of each epoch: hidden from epoch 1 on, predict in epochs 0 and 1
    assert len(history["grad_norm/hidden.weight"]) == 2 and len(history["grad_norm/predict.weight"]) == 2
    assert len(history["grad_norm/global"]) == 3
    assert monitor.handles == {}


def test_gradient_monitor_warns_about_vanishing_exploding_and_nonfinite():
    monitor, trainer = monitored_stub(vanishing=1e-30, exploding=1e-3)
    trainer.callbacks.on_train_begin({})
    with pytest.warns(RuntimeWarning, match="exploding") as caught:
        one_step(trainer)
        trainer.optimizer.zero_grad()
        one_step(trainer)  # the same parameters again: no second warning
    assert len(caught) == len(list(trainer.model.parameters()))
    monitor2, trainer2 = monitored_stub(vanishing=1e9)
    trainer2.callbacks.on_train_begin({})
    with pytest.warns(RuntimeWarning, match="vanishing"):
        one_step(trainer2)
    monitor3 = GradientMonitor(file=io.StringIO())
    trainer3 = StubTrainer([monitor3], loss_fn=lambda out, y: (out * float("nan")).sum())
    trainer3.callbacks.on_train_begin({})
    with pytest.warns(RuntimeWarning, match="NaN/Inf"):
        one_step(trainer3)
    assert monitor3.last["grad_nonfinite/predict.weight"] == 10
    assert "non-finite" in monitor3.table()


# ---------------------------------------------------------------------------------------------- activation monitor
def test_activation_monitor_norms_equal_the_retained_grads(capsys):
    monitor = ActivationGradientMonitor(["hidden", "predict"])
    trainer = StubTrainer([monitor])
    outputs = {}
    trainer.callbacks.on_train_begin({})
    assert "retain_grad" in capsys.readouterr().out
    for name in ("hidden", "predict"):
        trainer.model.get_submodule(name).register_forward_hook(
            lambda m, a, out, name=name: outputs.__setitem__(name, out)
        )
    x, y = regression_curve(12, seed=0).tensors
    trainer.callbacks.on_train_batch_begin(0, {})
    trainer.loss_fn(trainer.model(x), y).backward()
    trainer.callbacks.on_after_backward()
    for name, out in outputs.items():
        assert out.retains_grad
        want = float(np.sqrt((to_numpy(out.grad).astype(np.float64) ** 2).sum()))
        assert monitor.last[f"act_grad_norm/{name}"] == pytest.approx(want, rel=1e-5)
    assert monitor.outputs == {}  # it let go of the outputs once read
    trainer.callbacks.on_train_end({})
    assert monitor.handles == []


def test_activation_monitor_with_the_trainer_adds_epoch_logs_and_skips_validation(capsys):
    monitor = ActivationGradientMonitor(["hidden"])
    trainer = real_trainer([monitor])
    trainer.fit(regression_curve(12, seed=0), val_data=regression_curve(4, seed=1), epochs=2, batch_size=4)
    assert len(trainer.history["act_grad_norm/hidden"]) == 2
    assert "memory" in ActivationGradientMonitor.__doc__.lower() and "retain_grad" in capsys.readouterr().out
    with pytest.raises(ValueError, match="hiden"):
        real_trainer([ActivationGradientMonitor(["hiden"])]).fit(regression_curve(4, seed=0), epochs=1)


# ------------------------------------------------------------------------------------------------ lr scheduler
def test_lr_scheduler_callback_per_epoch_and_per_step():
    per_epoch = StubTrainer(lr=1.0)
    per_epoch.callbacks.append(LRSchedulerCallback(StepLR(per_epoch.optimizer, step_size=1, gamma=0.5)))
    per_epoch.callbacks.set_trainer(per_epoch)
    per_epoch.fit(epochs=2, batches=3)
    assert per_epoch.optimizer.param_groups[0]["lr"] == 0.25
    per_step = StubTrainer(lr=1.0)
    per_step.callbacks.append(LRSchedulerCallback(StepLR(per_step.optimizer, step_size=1, gamma=0.5), "step"))
    per_step.callbacks.set_trainer(per_step)
    per_step.fit(epochs=2, batches=3)
    assert per_step.optimizer.param_groups[0]["lr"] == 0.5**6


def test_lr_scheduler_callback_feeds_plateau_the_monitored_value_and_round_trips():
    trainer = StubTrainer(lr=1.0)
    sched = ReduceLROnPlateau(trainer.optimizer, mode="max", factor=0.5, patience=0)
    cb = LRSchedulerCallback(sched, monitor="val_acc")
    cb.set_trainer(trainer)
    for epoch, acc in enumerate([0.5, 0.5, 0.4]):
        cb.on_epoch_end(epoch, {"val_acc": acc})
    assert sched.best == 0.5 and trainer.optimizer.param_groups[0]["lr"] == 0.25
    state = json.loads(json.dumps(cb.state_dict()))
    other = LRSchedulerCallback(ReduceLROnPlateau(StubTrainer(lr=1.0).optimizer, mode="max"), monitor="val_acc")
    other.load_state_dict(state)
    assert other.scheduler.num_bad_epochs == sched.num_bad_epochs and other.scheduler.best == 0.5
    with pytest.warns(UserWarning, match="val_acc"):
        cb.on_epoch_end(3, {"loss": 1.0})


# --------------------------------------------------------------------------------------------- progress and plots
class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_prints_one_line_per_epoch_when_not_a_terminal():
    out = io.StringIO()
    StubTrainer([ProgressBar(file=out), GradientMonitor(file=io.StringIO())]).fit(epochs=3, batches=2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("Epoch 1 - ") and "val_loss: " in lines[2]
    assert "grad_norm" not in out.getvalue()


def test_progress_bar_draws_a_bar_on_a_terminal():
    out = FakeTerminal()
    bar = ProgressBar(file=out)
    StubTrainer([bar]).fit(epochs=2, batches=3)
    text = out.getvalue()
    assert "\r" in text and "Epoch 2" in text and "val_loss=" not in text and "val_loss: " in text
    assert bar.bar is None


def test_plot_callback_without_matplotlib_warns_once_and_training_goes_on(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    plot = PlotCallback()
    trainer = real_trainer([plot], run_dir=tmp_path)
    with pytest.warns(UserWarning, match="pip install matplotlib") as caught:
        trainer.fit(regression_curve(8, seed=0), epochs=2, batch_size=4)
    assert len([w for w in caught if "matplotlib" in str(w.message)]) == 1
    assert len(trainer.history["loss"]) == 2 and not (tmp_path / "curves.png").exists()


def test_plot_callback_panels_pair_metrics_and_group_grad_norms():
    plot = PlotCallback()
    plot.on_epoch_end(
        0,
        {
            "loss": 1.0,
            "val_loss": 1.1,
            "mae": 0.5,
            "val_mae": 0.6,
            "lr": 0.1,
            "grad_norm/global": 2.0,
            "grad_norm/hidden.weight": 1.0,
            "grad_max/hidden.weight": 3.0,
        },
    )
    assert plot.panels() == [
        ("loss", ["loss", "val_loss"]),
        ("mae", ["mae", "val_mae"]),
        ("lr", ["lr"]),
        ("gradient norm", ["grad_norm/global", "grad_norm/hidden.weight"]),
    ]


def test_plot_callback_writes_the_image_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    trainer = real_trainer([PlotCallback(), GradientMonitor(file=io.StringIO())], run_dir=tmp_path)
    trainer.fit(regression_curve(8, seed=0), val_data=regression_curve(4, seed=1), epochs=2, batch_size=4)
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
