"""Long runs: a checkpoint holds state, not the growing history, so an epoch costs the same at epoch 5 and 5,000;
the history lives in the run folder's history.jsonl and a resume rebuilds it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trainkit
import trainkit.training.checkpoint
from trainkit import nn, optim
from trainkit.data import regression_curve
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def make(run_dir):
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1))
    return Trainer(
        model, optim.SGD(model.parameters(), lr=0.1), "mse", metrics=["mae"], seed=0, verbose=False, run_dir=run_dir
    )


def test_the_checkpoint_does_not_grow_with_the_epochs(tmp_path):
    data = regression_curve(32, seed=0)
    make(tmp_path / "short").fit(data, epochs=3, batch_size=8)
    make(tmp_path / "long").fit(data, epochs=60, batch_size=8)
    short, long = (tmp_path / name / "checkpoints" / "last.npz" for name in ("short", "long"))
    assert abs(long.stat().st_size - short.stat().st_size) < 64, "last.npz grew with the epoch count"
    state = trainkit.training.checkpoint.load(long)
    assert state["history"]["epochs"] == 60 and "rows" not in state["history"]
    lines = (tmp_path / "long" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 60 and json.loads(lines[-1])["epoch"] == 59


def test_fit_after_a_resume_returns_the_history_of_every_epoch(tmp_path):
    data = regression_curve(32, seed=0)
    full = make(tmp_path / "full").fit(data, epochs=6, batch_size=8)
    make(tmp_path / "half").fit(data, epochs=2, batch_size=8)
    resumed = make(tmp_path / "again").fit(
        data, epochs=6, batch_size=8, resume_from=tmp_path / "half" / "checkpoints" / "last.npz"
    )
    assert resumed.history == full.history and len(resumed.history["loss"]) == 6
    assert len((tmp_path / "again" / "history.jsonl").read_text().splitlines()) == 6


def test_a_resume_in_the_same_folder_drops_the_epochs_after_its_checkpoint(tmp_path):
    data = regression_curve(32, seed=0)
    trainer = make(tmp_path / "run")
    trainer.fit(data, epochs=2, batch_size=8)
    trainer.save_checkpoint(tmp_path / "at2.npz")
    trainer.fit(data, epochs=4, batch_size=8, resume_from=tmp_path / "run" / "checkpoints" / "last.npz")
    again = make(tmp_path / "run").fit(data, epochs=3, batch_size=8, resume_from=tmp_path / "at2.npz")
    rows = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [0, 1, 2] and len(again.history["loss"]) == 3


def test_without_a_run_folder_the_checkpoint_keeps_its_rows(tmp_path):
    trainer = make(None)
    trainer.fit(regression_curve(16, seed=0), epochs=2, batch_size=8)
    trainer.save_checkpoint(tmp_path / "c.npz")
    other = make(None)
    other.load_checkpoint(tmp_path / "c.npz")
    assert other.history == trainer.history and other.epochs_done == 2


def test_the_long_run_benchmark_prints_both_figures():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_run.py"), "--epochs", "30", "--window", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "epoch 30:" in done.stdout and "ms/epoch" in done.stdout and "last.npz" in done.stdout
