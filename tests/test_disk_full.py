"""A full disk, for real: the run folder's parent is a small tmpfs mounted in a private mount namespace
(``unshare -rm``), where ``trainkit train`` runs out of space at its start or in the middle of training. The error is
one line naming the file it could not write; a run that could not start leaves no version folder; a run that
stopped keeps its last good checkpoint, releases its lock, and resumes once there is space again."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.training import checkpoint

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def _namespaces_allowed() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=8k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_allowed(), reason="needs unshare -rm and tmpfs mounts")


def _in_small_disk(tmp_path: Path, size: str, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` (sh) with ``tmp_path/disk`` a tmpfs of ``size``; $TRAIN runs trainkit train on it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    train = f"{sys.executable} -m trainkit train {CONFIG} --set output_dir={disk}"
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size={size} tmpfs {disk} && {script}"],
        env={"TRAIN": train, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_that_cannot_start_leaves_no_folder_and_names_the_file(tmp_path):
    result = _in_small_disk(tmp_path, "8k", f"rc=0; $TRAIN || rc=$?; find {tmp_path / 'disk'} -mindepth 1; exit $rc")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device: '" in lines[0] and str(tmp_path / "disk") in lines[0], lines
    assert result.stdout.strip() == ""  # nothing left on the disk: no version folder, no lock, no latest


def _blocks(size: int) -> int:
    return -(-size // 4096) * 4096


def test_a_full_disk_mid_run_keeps_the_last_checkpoint_and_the_run_resumes_when_there_is_space(tmp_path):
    # a disk just large enough for the first epoch's files and the temporary copy of a checkpoint being replaced:
    # a later epoch fills it when history.jsonl or metrics.csv needs one more block
    probe = tmp_path / "probe"
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", str(CONFIG), "--set", f"output_dir={probe}"]
        + ["--set", "trainer.epochs=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    files = [p for p in probe.rglob("*") if p.is_file()]
    size = sum(_blocks(p.stat().st_size) for p in files) + max(_blocks(p.stat().st_size) for p in files) + 4096
    run = tmp_path / "disk" / "regression" / "version_0"
    script = (
        "rc=0; $TRAIN --set trainer.epochs=60 || rc=$?; echo first=$rc; "
        f"ls -a {run}; "
        f"mount -o remount,size=16m {tmp_path / 'disk'} && "
        f"cp -r {run} {tmp_path / 'kept'} && "
        f"$TRAIN --set trainer.epochs=60 --resume {run}; echo second=$?"
    )
    result = _in_small_disk(tmp_path, f"{size // 1024}k", script)
    assert "first=1" in result.stdout, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("trainkit: error")]
    assert len(errors) == 1 and "No space left on device: '" in errors[0] and str(run) in errors[0], errors
    assert ".lock" not in result.stdout.split("first=1")[1].split("second=")[0]
    kept = checkpoint.load(tmp_path / "kept" / "checkpoints" / "last.npz")
    assert kept["epoch"] >= 0 and "model" in kept
    assert "second=0" in result.stdout and "done: 60 epochs" in result.stdout, result.stdout + result.stderr
