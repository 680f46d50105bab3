"""The Trainer's step methods (train_step, test_step, predict_step) as override points, the evaluation and
prediction hooks around them, and the run folder's resume point kept by a callback rather than by the Trainer."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import trainkit
from trainkit import nn, optim
from trainkit.callbacks import Callback
from trainkit.callbacks.resume_point import ResumePoint
from trainkit.data import regression_curve
from trainkit.trainer import Trainer
from trainkit.training.run_folder import RunFolder
from trainkit.training.strategy import DDPStrategy, Strategy


def make(cls=Trainer, seed=0, **kwargs):
    trainkit.manual_seed(seed)
    model = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    kwargs.setdefault("verbose", False)
    return cls(model, optim.SGD(model.parameters(), lr=0.1), "mse", seed=seed, **kwargs)


def weights(trainer):
    return [p.detach().numpy().copy() for p in trainer.model.parameters()]


class Hooks(Callback):
    """Records (hook, batch, logs) of the evaluation and prediction hooks, and the train batches' logs."""

    def __init__(self):
        super().__init__()
        self.calls, self.train_logs = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.train_logs.append(dict(logs))

    def on_test_begin(self, logs=None):
        self.calls.append(("on_test_begin", None, logs))

    def on_test_batch_begin(self, batch, logs=None):
        self.calls.append(("on_test_batch_begin", batch, logs))

    def on_test_batch_end(self, batch, logs=None):
        self.calls.append(("on_test_batch_end", batch, dict(logs)))

    def on_test_end(self, logs=None):
        self.calls.append(("on_test_end", None, dict(logs)))

    def on_predict_begin(self, logs=None):
        self.calls.append(("on_predict_begin", None, logs))

    def on_predict_batch_begin(self, batch, logs=None):
        self.calls.append(("on_predict_batch_begin", batch, logs))

    def on_predict_batch_end(self, batch, logs=None):
        self.calls.append(("on_predict_batch_end", batch, logs))

    def on_predict_end(self, logs=None):
        self.calls.append(("on_predict_end", None, logs))


# ------------------------------------------------------------------------------------------------- train_step
class ExtraKey(Trainer):
    def train_step(self, batch):
        logs = super().train_step(batch)
        logs["batch_size"] = len(batch[0])
        return logs


def test_an_overridden_train_step_logs_an_extra_key_and_trains_as_before():
    hooks = Hooks()
    plain, extra = make(), make(ExtraKey, callbacks=[hooks])
    got = extra.fit(regression_curve(20, seed=0), epochs=2, batch_size=8).history
    want = plain.fit(regression_curve(20, seed=0), epochs=2, batch_size=8).history
    assert got == want  # the extra key reaches the batch hooks, not the epoch logs
    assert [logs["batch_size"] for logs in hooks.train_logs] == [8, 8, 4] * 2
    assert [logs["step"] for logs in hooks.train_logs] == [1, 2, 3, 4, 5, 6]
    assert all(set(logs) == {"loss", "step", "batch_size"} for logs in hooks.train_logs)
    for a, b in zip(weights(plain), weights(extra)):
        np.testing.assert_array_equal(a, b)


class SkipSecond(Trainer):
    """Skips every second batch of an epoch: no forward, no optimizer step, no loss."""

    def train_step(self, batch):
        if self.current_batch.index % 2:
            return {"step": self.global_step}
        return super().train_step(batch)


def test_a_train_step_that_skips_batches_takes_fewer_steps_and_leaves_them_out_of_the_epoch_loss():
    hooks = Hooks()
    trainer = make(SkipSecond, callbacks=[hooks])
    history = trainer.fit(regression_curve(32, seed=0), epochs=1, batch_size=8, shuffle=False).history
    assert trainer.global_step == 2
    assert [logs["step"] for logs in hooks.train_logs] == [1, 1, 2, 2]
    losses = [logs["loss"] for logs in hooks.train_logs if "loss" in logs]
    assert len(losses) == 2 and history["loss"] == [pytest.approx(sum(losses) / 2)]


def test_train_step_called_by_hand_takes_one_optimizer_step():
    trainer = make()
    before = weights(trainer)
    x, y = regression_curve(6, seed=0).tensors
    logs = trainer.train_step((x, y))
    assert set(logs) == {"loss", "step"} and logs["step"] == 1 == trainer.global_step
    assert all(not np.array_equal(a, b) for a, b in zip(before, weights(trainer)))
    assert all(p.grad is None or not p.grad.any() for p in trainer.model.parameters())


def test_accumulation_through_train_step_matches_one_batch_of_the_whole():
    data = regression_curve(32, seed=0)
    accumulated = make(accumulate_steps=2)
    whole = make()
    accumulated.fit(data, epochs=1, batch_size=4, shuffle=False)
    whole.fit(data, epochs=1, batch_size=8, shuffle=False)
    assert accumulated.global_step == whole.global_step == 4
    for a, b in zip(weights(accumulated), weights(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_odd_last_batch_still_steps_under_accumulation():
    trainer = make(accumulate_steps=2)
    trainer.fit(regression_curve(24, seed=0), epochs=1, batch_size=8)  # 3 batches: steps after 2 and after 3
    assert trainer.global_step == 2


def test_ddp_in_a_world_of_one_trains_an_overridden_step_as_a_single_device_does():
    single = make(ExtraKey, strategy=Strategy())
    ddp = make(ExtraKey, strategy=DDPStrategy())
    want = single.fit(regression_curve(20, seed=0), epochs=2, batch_size=8).history
    got = ddp.fit(regression_curve(20, seed=0), epochs=2, batch_size=8).history
    assert got == want
    for a, b in zip(weights(single), weights(ddp)):
        np.testing.assert_array_equal(a, b)


def test_each_rank_seeds_once_from_the_trainers_seed():
    assert Strategy().process_seed(5) == 5 and Strategy().process_seed(None) is None
    ddp = DDPStrategy()
    assert ddp.process_seed(5) == 5  # rank 0 keeps the stream a single process has
    ddp.rank = 2
    assert ddp.process_seed(5) == 7


# ----------------------------------------------------------------------------------------- evaluate / predict
def test_evaluate_calls_the_test_hooks_in_order_with_each_batch_and_the_result():
    hooks = Hooks()
    trainer = make(callbacks=[hooks])
    x, y = regression_curve(10, seed=1).tensors
    result = trainer.evaluate(x, y, batch_size=4)
    names = [name for name, _, _ in hooks.calls]
    assert names == ["on_test_begin", *["on_test_batch_begin", "on_test_batch_end"] * 3, "on_test_end"]
    assert [batch for name, batch, _ in hooks.calls if name.startswith("on_test_batch")] == [0, 0, 1, 1, 2, 2]
    batch_losses = [logs["loss"] for name, _, logs in hooks.calls if name == "on_test_batch_end"]
    with trainkit.no_grad():
        want = [trainer.loss_fn(trainer.model(x[i : i + 4]), y[i : i + 4]).item() for i in (0, 4, 8)]
    assert batch_losses == pytest.approx(want)
    assert result["loss"] == pytest.approx((4 * want[0] + 4 * want[1] + 2 * want[2]) / 10)
    assert hooks.calls[-1][2] == result


def test_fits_validation_pass_calls_the_test_hooks_with_unprefixed_logs():
    hooks = Hooks()
    trainer = make(callbacks=[hooks])
    history = trainer.fit(regression_curve(8, seed=0), val_data=regression_curve(6, seed=1), epochs=2, batch_size=4)
    ends = [logs for name, _, logs in hooks.calls if name == "on_test_end"]
    assert [logs["loss"] for logs in ends] == history.history["val_loss"]


def test_predict_calls_the_predict_hooks_in_order_with_each_batchs_outputs():
    hooks = Hooks()
    trainer = make(callbacks=[hooks])
    x = trainkit.linspace(-1, 1, 7).unsqueeze(1)
    out = trainer.predict(x, batch_size=3)
    names = [name for name, _, _ in hooks.calls]
    assert names == ["on_predict_begin", *["on_predict_batch_begin", "on_predict_batch_end"] * 3, "on_predict_end"]
    outputs = [logs["outputs"] for name, _, logs in hooks.calls if name == "on_predict_batch_end"]
    assert [len(o) for o in outputs] == [3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([o.numpy() for o in outputs]), out.numpy())


class DoubledLoss(Trainer):
    def test_step(self, batch):
        logs = super().test_step(batch)
        return {"loss": 2 * logs["loss"]}


def test_a_test_step_override_changes_evaluates_figures_and_fits_val_loss():
    data, val = regression_curve(8, seed=0), regression_curve(6, seed=1)
    plain, doubled = make(), make(DoubledLoss)
    assert doubled.evaluate(val)["loss"] == pytest.approx(2 * plain.evaluate(val)["loss"])
    got = doubled.fit(data, val_data=val, epochs=1, batch_size=4).history
    want = plain.fit(data, val_data=val, epochs=1, batch_size=4).history
    assert got["loss"] == want["loss"] and got["val_loss"] == [pytest.approx(2 * want["val_loss"][0])]


def test_a_predict_step_override_changes_predicts_outputs():
    class Negated(Trainer):
        def predict_step(self, batch):
            return -super().predict_step(batch)

    plain, negated = make(), make(Negated)
    x = trainkit.linspace(-1, 1, 5).unsqueeze(1)
    np.testing.assert_array_equal(negated.predict(x).numpy(), -plain.predict(x).numpy())
    assert plain.predict(x[:0]).dtype == trainkit.float32


# ------------------------------------------------------------------------------------------------ resume point
def test_the_trainer_itself_writes_no_file(tmp_path):
    class Silent(ResumePoint):  # one of the kind: the default is not added, and this one writes nothing
        def on_train_begin(self, logs=None):
            pass

        def on_epoch_end(self, epoch, logs=None):
            pass

    trainer = make(run_dir=tmp_path, callbacks=[Silent()])
    trainer.fit(regression_curve(8, seed=0), epochs=2, batch_size=4)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["checkpoints/best.npz", "metrics.csv"]  # ModelCheckpoint's and CSVLogger's alone


def test_a_process_that_does_not_write_gets_no_file_writing_callback(tmp_path):
    class Worker(Strategy):
        rank = 1

    trainer = make(run_dir=tmp_path, strategy=Worker())
    trainer.fit(regression_curve(8, seed=0), epochs=2, batch_size=4)
    assert list(tmp_path.iterdir()) == [] and len(trainer.callbacks) == 0


def test_the_resume_point_writes_history_rows_and_last_after_every_other_callback(tmp_path):
    trainer = make(run_dir=tmp_path)
    trainer.fit(regression_curve(8, seed=0), epochs=2, batch_size=4)
    kinds = [type(cb).__name__ for cb in trainer.callbacks]
    assert kinds == ["CSVLogger", "ModelCheckpoint", "ResumePoint"]
    assert max(cb.order for cb in trainer.callbacks) == ResumePoint.order
    run = RunFolder(tmp_path)
    rows = [json.loads(line) for line in run.history.read_text().splitlines()]
    assert rows == trainer.history_rows and [r["epoch"] for r in rows] == [0, 1]
    state = trainkit.training.checkpoint.load(run.last)
    assert state["history"]["epochs"] == 2 and state["epochs_done"] == 2
    assert state["callbacks"]["ModelCheckpoint"]["best_epoch"] is not None


class FailAtBatch(Callback):
    def on_train_batch_begin(self, batch, logs=None):
        raise RuntimeError("failed")


def test_a_resume_that_fails_before_its_first_epoch_ends_keeps_the_history_file(tmp_path):
    data = regression_curve(8, seed=0)
    run = RunFolder(tmp_path)
    make(run_dir=tmp_path).fit(data, epochs=2, batch_size=4)
    early = shutil.copy(run.last, tmp_path / "early.npz")  # covers two epochs
    make(run_dir=tmp_path).fit(data, epochs=4, batch_size=4, resume_from=run.last)
    four = run.history.read_text()
    assert len(four.splitlines()) == 4
    failing = make(run_dir=tmp_path, callbacks=[FailAtBatch()])
    with pytest.raises(RuntimeError, match="failed"):
        failing.fit(data, epochs=4, batch_size=4, resume_from=early)
    assert run.history.read_text() == four  # nothing trained: the file is as it was
    resumed = make(run_dir=tmp_path)
    resumed.fit(data, epochs=3, batch_size=4, resume_from=early)
    rows = [json.loads(line) for line in run.history.read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [0, 1, 2] and rows == resumed.history_rows
    assert rows[:2] == [json.loads(line) for line in four.splitlines()[:2]]


# ------------------------------------------------------------------------------------ public names strategies use
class TwoRanks:
    """A world of two seen from rank 0, enough for the strategy's loader sharding (no collective runs)."""

    rank, size, local_rank = 0, 2, 0


def test_sharding_wraps_collate_only_where_batches_are_not_sliced_from_tensors():
    from trainkit.data import DataLoader, TensorDataset

    ddp = DDPStrategy(group=TwoRanks())
    data = TensorDataset(trainkit.arange(5.0).unsqueeze(1))
    sliced = ddp.shard_loader(DataLoader(data, batch_size=4))
    assert sliced.slices_tensors and [len(b[0]) for b in sliced] == [2, 1]
    collated = ddp.shard_loader(DataLoader(data, batch_size=4, collate_fn=lambda samples: len(samples)))
    assert not collated.slices_tensors
    assert list(collated) == [2, 1] and collated.collate_fn([]) is None  # an empty share collates to nothing


def test_a_wrapped_model_hands_its_reduction_to_the_caller():
    from trainkit.distributed import DistributedDataParallel

    model = DistributedDataParallel(nn.Linear(2, 1))
    assert model.manual_reduction is False and model.reducer is not None
    model.manual_reduction = True
    assert model.manual_reduction is True
    model(trainkit.ones(3, 2)).sum().backward()
    model.reducer.reduce()
    assert model.module.bias.grad.tolist() == [3.0]
