"""One epoch numbering, Keras': files and TensorBoard steps count epochs from 0 (the ``epoch`` callbacks get), what is
printed for a person counts from 1 (``Epoch 1/3``); a resumed run continues both."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import EarlyStopping, ModelCheckpoint, TensorBoard, TerminateOnNaN
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def train(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "train", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def tensorboard_steps(log_dir: Path, tag: str) -> list[int]:
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = accumulator.EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    kind = events.Histograms if tag.endswith("weight") else events.Scalars
    return [event.step for event in kind(tag)]


def test_files_count_from_zero_and_the_console_from_one_also_after_a_resume(tmp_path):
    pytest.importorskip("tensorboardX")
    first = train(tmp_path, str(CONFIG), "--set", "trainer.epochs=3", "--set", "callbacks=[TensorBoard]")
    assert first.returncode == 0, first.stderr
    assert [line.split(" - ")[0] for line in first.stdout.splitlines() if line.startswith("Epoch ")] == [
        "Epoch 1/3",
        "Epoch 2/3",
        "Epoch 3/3",
    ]
    run = tmp_path / "runs" / "regression" / "version_0"
    resumed = train(tmp_path, str(run / "config.yaml"), "--resume", str(run), "--set", "trainer.epochs=5")
    assert resumed.returncode == 0, resumed.stderr
    assert [line.split(" - ")[0] for line in resumed.stdout.splitlines() if line.startswith("Epoch ")] == [
        "Epoch 4/5",
        "Epoch 5/5",
    ]
    with open(run / "metrics.csv", newline="") as f:
        assert [int(row["epoch"]) for row in csv.DictReader(f)] == [0, 1, 2, 3, 4]
    rows = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1, 2, 3, 4]
    assert tensorboard_steps(run / "tensorboard", "loss") == [0, 1, 2, 3, 4]


def test_tensorboard_steps_and_histograms_as_keras_writes_them(tmp_path):
    pytest.importorskip("tensorboardX")
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 32).unsqueeze(1)
    model = nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1))
    trainer = Trainer(model, loss="mse", verbose=False, callbacks=[TensorBoard(histogram_freq=2)], run_dir=tmp_path)
    trainer.fit(x, x * x, epochs=5, batch_size=8)
    assert tensorboard_steps(tmp_path / "tensorboard", "loss") == [0, 1, 2, 3, 4]
    assert tensorboard_steps(tmp_path / "tensorboard", "0.weight") == [0, 2, 4]  # epoch % 2 == 0, the first too


def test_warnings_name_the_epoch_as_the_console_does(tmp_path):
    calls = {"n": 0}

    def loss_fn(output, target):
        calls["n"] += 1
        loss = nn.functional.mse_loss(output, target)
        return loss * float("nan") if calls["n"] == 4 else loss  # epoch 0 has 2 batches and 1 validation batch

    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    guard = TerminateOnNaN()
    model = nn.Linear(1, 1)
    trainer = Trainer(model, loss=loss_fn, verbose=False, callbacks=[guard, ModelCheckpoint(tmp_path)], seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(x, x * 2, epochs=3, batch_size=16, shuffle=False, validation_split=0.2)
    messages = [str(w.message) for w in caught]
    assert guard.stopped_epoch == 1  # the attribute counts as the callbacks do
    assert any("TerminateOnNaN: loss is nan at step 3 (epoch 2, batch 1)" in m for m in messages), messages
    assert any("ModelCheckpoint: epoch 2 ended with a non-finite loss" in m for m in messages), messages


def test_a_restore_that_cannot_be_done_names_the_epoch_as_the_console_does():
    stopper = EarlyStopping(patience=5, restore_best_weights=True)
    stopper.load_state_dict({"best": 0.5, "best_epoch": 2, "wait": 0})  # seen before a resume: no weights kept
    stopper.set_model(nn.Linear(1, 1))
    with pytest.warns(UserWarning, match="cannot restore the weights of epoch 3: they were seen before"):
        stopper.on_train_end()
