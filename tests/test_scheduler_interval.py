"""A config's scheduler steps per epoch (the default) or after every optimizer step (``scheduler.interval: step``, what
OneCycleLR expects); stepped per step, a resumed run ends at the learning rate of an uninterrupted one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"
ONE_CYCLE = ["--set", "scheduler.name=OneCycleLR", "--set", "scheduler.options={max_lr: 0.5, total_steps: 50}"]
PER_STEP = [*ONE_CYCLE, "--set", "scheduler.interval=step"]


def train(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "train", str(CONFIG), "--set", f"output_dir={out}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def final_lr(result: subprocess.CompletedProcess) -> float:
    assert result.returncode == 0, result.stderr
    done = [line for line in result.stdout.splitlines() if line.startswith("done:")][-1]
    return float(done.split(" lr ")[1].split(";")[0])


def test_one_cycle_stepped_per_step_ends_its_cycle_as_torch_does(tmp_path):
    torch = pytest.importorskip("torch")
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=50)
    for _ in range(50):  # the regression config: 10 batches an epoch, 5 epochs, a step after each batch
        opt.step()
        schedule.step()
    stepped = final_lr(train(tmp_path / "a", "--set", "trainer.epochs=5", *PER_STEP))
    assert stepped == pytest.approx(schedule.get_last_lr()[0], rel=1e-5)
    per_epoch = final_lr(train(tmp_path / "b", "--set", "trainer.epochs=5", *ONE_CYCLE))
    assert per_epoch > 10 * stepped  # five steps of fifty: still near the top of the cycle


def test_a_resumed_run_continues_the_cycle(tmp_path):
    whole = final_lr(train(tmp_path / "a", "--set", "trainer.epochs=5", *PER_STEP))
    first = train(tmp_path / "b", "--set", "trainer.epochs=2", *PER_STEP)
    assert first.returncode == 0, first.stderr
    run = tmp_path / "b" / "regression" / "version_0"
    again = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", str(run / "config.yaml"), "--resume", str(run)]
        + ["--set", "trainer.epochs=5"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert final_lr(again) == pytest.approx(whole, rel=1e-6)


def test_an_unknown_interval_is_a_config_error(tmp_path):
    result = train(tmp_path, *ONE_CYCLE, "--set", "scheduler.interval=batch")
    assert result.returncode == 2 and "scheduler.interval" in result.stderr and "'batch'" in result.stderr
