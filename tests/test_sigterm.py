"""SIGTERM (what schedulers, containers and ``kill`` send) does what Ctrl-C does: the interrupted state is saved, the
resume command printed, the run folder's lock released, and the process exits 143 (128 + SIGTERM)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"

# slow batches from the third epoch on, with a file saying so, so that the signal arrives in the middle of an epoch
SLOW = """
import time
from pathlib import Path

from trainkit.callbacks.base import Callback


class Slow(Callback):
    def __init__(self, flag):
        super().__init__()
        self.flag = Path(flag)

    def on_train_batch_begin(self, batch, logs=None):
        if self.trainer.epoch >= 2:
            self.flag.touch()
            time.sleep(0.05)
"""

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")


def _start(tmp_path: Path, out: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "slow.py").write_text(SLOW)
    flag = tmp_path / "in_epoch_3"
    command = [sys.executable, "-m", "trainkit", "train", str(CONFIG), "--set", f"output_dir={out}"]
    command += ["--set", f"callbacks=[{{class_path: {tmp_path / 'slow.py'}:Slow, flag: {flag}}}]", *extra]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never reached its third epoch"
        time.sleep(0.02)
    return process, flag


def test_sigterm_saves_the_interrupted_state_releases_the_lock_and_exits_143(tmp_path):
    out = tmp_path / "runs"
    process, _ = _start(tmp_path, out)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    run = out / "regression" / "version_0"
    assert (run / "checkpoints" / "interrupted.npz").is_file()
    assert f"resume with: trainkit train {run / 'config.yaml'} --resume {run}" in stderr
    assert "Traceback" not in stderr
    assert not (run / ".lock").exists() and not list(run.glob("*.lock"))
    # the printed command continues the run (no other process holds its folder)
    resumed = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", str(run / "config.yaml"), "--resume", str(run)]
        + ["--set", "callbacks=[]", "--set", "trainer.epochs=4"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from epoch 3 of 4" in resumed.stdout and "done: 4 epochs" in resumed.stdout


def test_sigint_still_exits_130(tmp_path):
    process, _ = _start(tmp_path, tmp_path / "runs")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "resume with: trainkit train" in stderr
    run = tmp_path / "runs" / "regression" / "version_0"
    assert (run / "checkpoints" / "interrupted.npz").is_file() and not (run / ".lock").exists()
