"""Warnings name the user's line, monitored keys suggest the nearest one, and a restore of the best weights says so.

Callbacks warn from deep inside ``Trainer.fit``; the warning must point at the ``fit`` call in the user's file (this
one), not at a line of trainkit.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

import trainkit
from trainkit import nn
from trainkit.callbacks import EarlyStopping, ModelCheckpoint
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


def _classifier_fit(callbacks, **fit) -> list[warnings.WarningMessage]:
    trainkit.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    trainer = Trainer(nn.Linear(2, 2), loss="cross_entropy", metrics=["accuracy"], callbacks=callbacks, verbose=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(x, y, epochs=2, batch_size=10, validation_split=0.25, **fit)
    return caught


def test_a_missing_monitored_key_points_at_the_fit_call_and_suggests_the_nearest(tmp_path):
    caught = _classifier_fit([EarlyStopping(monitor="val_acc"), ModelCheckpoint(tmp_path, monitor="val_acc")])
    messages = [w for w in caught if "val_acc'" in str(w.message)]
    assert len(messages) == 2
    for w in messages:
        assert "did you mean 'val_accuracy'?" in str(w.message)
        assert w.filename == __file__, f"the warning points at {w.filename}:{w.lineno}"


def test_restoring_the_best_weights_is_reported(capsys):
    stopper = EarlyStopping(monitor="val_loss", restore_best_weights=True)
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    trainer = Trainer(nn.Linear(1, 1), loss="mse", callbacks=[stopper], verbose=True)
    trainer.fit(x, x * 3, epochs=3, batch_size=10, validation_split=0.25)
    assert stopper.restored_epoch == stopper.best_epoch
    out = capsys.readouterr().out
    assert f"EarlyStopping: restored the weights of epoch {stopper.best_epoch + 1}, the best val_loss" in out


def test_the_done_line_says_which_epochs_weights_the_model_holds(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        f"model: {{class_path: {ROOT / 'examples/regression/model.py'}:Net}}\n"
        "trainer: {epochs: 3, batch_size: 20}\n"
        "callbacks: [{name: EarlyStopping, monitor: loss, restore_best_weights: true}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", config], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("done: 3 epochs") and "(last epoch); weights of epoch" in last and "restored" in last


def test_the_command_prints_warnings_as_its_own_lines(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        f"model: {{class_path: {ROOT / 'examples/regression/model.py'}:Net}}\n"
        "trainer: {epochs: 2, batch_size: 20}\n"
        "callbacks: [{name: EarlyStopping, monitor: val_acc}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", config], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "trainkit: UserWarning: EarlyStopping monitors 'val_acc', which the epoch logs lack" in done.stderr
    assert "runpy" not in done.stderr
