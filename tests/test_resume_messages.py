"""A resume that explains itself: where it starts, why it cannot when nothing is left, and after Ctrl-C the exact
command that continues, using checkpoints/interrupted.npz when that is the newer checkpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import trainkit
from trainkit import nn
from trainkit.data import regression_curve
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"

STOP = """
from trainkit.callbacks.base import Callback


class Stop(Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if self.trainer.epoch == 2 and batch == 3:
            raise KeyboardInterrupt
"""


def trainkit_cmd(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


def make(run_dir, verbose=True):
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Linear(4, 1))
    return Trainer(model, seed=0, verbose=verbose, run_dir=run_dir, callbacks=[])


def test_a_resume_says_where_it_starts(tmp_path, capsys):
    data = regression_curve(16, seed=0)
    make(tmp_path / "a", verbose=False).fit(data, epochs=3, batch_size=8)
    make(tmp_path / "b").fit(data, epochs=5, batch_size=8, resume_from=tmp_path / "a" / "checkpoints" / "last.npz")
    assert f"resuming from epoch 4 of 5: 3 done, from {tmp_path / 'a' / 'checkpoints' / 'last.npz'}" in (
        capsys.readouterr().out
    )


def test_resuming_with_no_epochs_left_is_an_error_that_says_how_to_train_more(tmp_path):
    data = regression_curve(16, seed=0)
    make(tmp_path / "a", verbose=False).fit(data, epochs=3, batch_size=8)
    with pytest.raises(ValueError, match=r"has done 3 epoch\(s\) already, and epochs=3 counts those"):
        make(tmp_path / "b").fit(data, epochs=3, batch_size=8, resume_from=tmp_path / "a" / "checkpoints" / "last.npz")
    out = tmp_path / "runs"
    assert trainkit_cmd("train", CONFIG, "--set", f"output_dir={out}", "--set", "trainer.epochs=2").returncode == 0
    again = trainkit_cmd(
        "train", CONFIG, "--set", f"output_dir={out}", "--set", "trainer.epochs=2", "--resume", out / "regression"
    )
    assert again.returncode == 2
    assert "has done 2 epoch(s) already" in again.stderr and "--set trainer.epochs=4" in again.stderr


def test_ctrl_c_prints_the_resume_command_and_it_continues_from_interrupted_npz(tmp_path):
    (tmp_path / "stop.py").write_text(STOP)
    out = tmp_path / "runs"
    stopped = trainkit_cmd(
        "train",
        CONFIG,
        "--set",
        f"output_dir={out}",
        "--set",
        "trainer.epochs=5",
        "--set",
        f"callbacks=[{{class_path: {tmp_path / 'stop.py'}:Stop}}]",
    )
    assert stopped.returncode == 130, stopped.stderr
    run = out / "regression" / "version_0"
    command = f"trainkit train {run / 'config.yaml'} --resume {run}"
    assert f"resume with: {command}" in stopped.stderr
    interrupted = run / "checkpoints" / "interrupted.npz"
    assert interrupted.stat().st_mtime_ns > (run / "checkpoints" / "last.npz").stat().st_mtime_ns
    # the printed command, minus the callback that stops it again
    resumed = trainkit_cmd(*command.split()[1:], "--set", "callbacks=[]", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from epoch 3 of 5: 2 done, from {interrupted} (written inside epoch 3, which starts over)" in (
        resumed.stdout
    )
    assert "done: 5 epochs" in resumed.stdout


def test_ctrl_c_in_the_first_epoch_leaves_no_folder(tmp_path):
    (tmp_path / "stop.py").write_text(STOP.replace("epoch == 2", "epoch == 0"))
    out = tmp_path / "runs"
    stopped = trainkit_cmd(
        "train",
        CONFIG,
        "--set",
        f"output_dir={out}",
        "--set",
        f"callbacks=[{{class_path: {tmp_path / 'stop.py'}:Stop}}]",
    )
    assert stopped.returncode == 130 and "nothing saved" in stopped.stderr
    assert not (out / "regression").exists()
