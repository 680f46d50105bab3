"""Every file of a run folder follows the user's umask, as every other program's files (and torch.save's) do: the
checkpoints are no longer 0600 beside a 0644 config.yaml and metrics.csv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def train_under(mask: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "trainkit", "train", str(CONFIG), "--set", f"output_dir={out}"]
        + ["--set", "trainer.epochs=2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: os.umask(mask),  # noqa: PLW1509  (the child alone; nothing else runs before exec)
    )


def modes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.is_file()}


def test_run_folder_files_follow_the_umask(tmp_path):
    runs = {mask: train_under(mask, tmp_path / oct(mask)) for mask in (0o022, 0o077, 0o002)}
    for mask, process in runs.items():
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        found = modes(tmp_path / oct(mask) / "regression")
        # before: checkpoints/*.npz 0600 whatever the umask, the other files 0666 & ~umask
        assert {"latest", "version_0/config.yaml", "version_0/checkpoints/last.npz"} <= set(found)
        assert found == dict.fromkeys(found, 0o666 & ~mask), oct(mask)
