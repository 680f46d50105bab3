"""A resume that fails before it has finished an epoch changes nothing in the run folder: its history.jsonl and
metrics.csv keep every row, and the folder resumes from its own last checkpoint afterwards."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trainkit
import trainkit.training.checkpoint

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "regression.yaml"


def _train(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trainkit.cli", "train", str(CONFIG), "--set", "trainer.verbose=false", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def _epochs(run: Path) -> tuple[list[int], list[str]]:
    history = [json.loads(line)["epoch"] for line in (run / "history.jsonl").read_text().splitlines()]
    csv_epochs = [line.split(",")[0] for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    return history, csv_epochs


def test_a_resume_failing_in_its_first_batch_keeps_history_and_metrics(tmp_path):
    assert _train(tmp_path, "--set", "trainer.epochs=3").returncode == 0
    run = tmp_path / "runs" / "regression" / "version_0"
    shutil.copy(run / "checkpoints" / "last.npz", run / "checkpoints" / "epoch3.npz")
    assert _train(tmp_path, "--resume", str(run), "--set", "trainer.epochs=6").returncode == 0
    before = (run / "history.jsonl").read_bytes(), (run / "metrics.csv").read_bytes()
    assert _epochs(run) == ([0, 1, 2, 3, 4, 5], ["0", "1", "2", "3", "4", "5"])

    # from the older checkpoint, with a loss that cannot take the data: it fails in the first batch
    failed = _train(
        tmp_path, "--resume", str(run / "checkpoints" / "epoch3.npz"), "--set", "trainer.epochs=8", "--set", "loss=nll"
    )
    assert failed.returncode == 1 and "target" in failed.stderr
    assert ((run / "history.jsonl").read_bytes(), (run / "metrics.csv").read_bytes()) == before

    resumed = _train(tmp_path, "--resume", str(run), "--set", "trainer.epochs=7")
    assert resumed.returncode == 0, resumed.stderr
    assert _epochs(run) == ([0, 1, 2, 3, 4, 5, 6], ["0", "1", "2", "3", "4", "5", "6"])


def test_a_resume_from_an_older_checkpoint_rewrites_the_rows_once_an_epoch_ends(tmp_path):
    assert _train(tmp_path, "--set", "trainer.epochs=2").returncode == 0
    run = tmp_path / "runs" / "regression" / "version_0"
    shutil.copy(run / "checkpoints" / "last.npz", run / "checkpoints" / "epoch2.npz")
    assert _train(tmp_path, "--resume", str(run), "--set", "trainer.epochs=4").returncode == 0
    again = _train(tmp_path, "--resume", str(run / "checkpoints" / "epoch2.npz"), "--set", "trainer.epochs=3")
    assert again.returncode == 0, again.stderr
    # the rows of epochs 2 and 3 of the first run belong to epochs this run trained again: epoch 2 replaced them
    assert _epochs(run) == ([0, 1, 2], ["0", "1", "2"])


def test_a_copied_run_folder_reads_its_own_history(tmp_path):
    assert _train(tmp_path, "--set", "trainer.epochs=3").returncode == 0
    original = tmp_path / "runs" / "regression" / "version_0"
    copy = tmp_path / "copy" / "version_0"
    shutil.copytree(original, copy)
    rows = [json.loads(line) for line in (original / "history.jsonl").read_text().splitlines()]
    # the original folder goes on to other things; the copy must not notice
    (original / "history.jsonl").write_text("".join(json.dumps({**r, "loss": 999.0}) + "\n" for r in rows))
    resumed = _train(tmp_path, "--resume", str(copy), "--set", "trainer.epochs=4")
    assert resumed.returncode == 0, resumed.stderr
    kept = [json.loads(line) for line in (copy / "history.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in kept[:3]] == [r["loss"] for r in rows] and len(kept) == 4


def _trained(tmp_path: Path, epochs: int = 2) -> Path:
    assert _train(tmp_path, "--set", f"trainer.epochs={epochs}").returncode == 0
    return tmp_path / "runs" / "regression" / "version_0"


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda text: text.replace("}\n", "\n", 1), ":1: not a JSON line"),
        (
            lambda text: "[1, 2]\n" + text.split("\n", 1)[1],
            ":1: a line holds one epoch's logs as a JSON object, not list",
        ),
        (lambda text: re.sub(r'"loss": [^,]*', '"loss": "abc"', text, count=1), ":1: 'loss' is 'abc'"),
    ],
)
def test_a_damaged_history_line_is_named_with_its_file_and_line(tmp_path, damage, words):
    run = _trained(tmp_path)
    history = run / "history.jsonl"
    history.write_text(damage(history.read_text()))
    resumed = _train(tmp_path, "--resume", str(run), "--set", "trainer.epochs=3")
    assert resumed.returncode == 2 and f"{history}{words}" in resumed.stderr, resumed.stderr
    assert "Traceback" not in resumed.stderr and len(resumed.stderr.strip().splitlines()) == 1


def test_a_weights_file_given_as_a_checkpoint_says_what_it_is(tmp_path):
    run = _trained(tmp_path)
    weights = tmp_path / "weights.pt"
    state = trainkit.training.checkpoint.load(run / "checkpoints" / "last.npz")["model"]
    trainkit.save(state, weights)
    resumed = _train(tmp_path, "--resume", str(weights), "--set", "trainer.epochs=3")
    assert resumed.returncode == 2 and f"{weights}: not a training checkpoint (no 'model'" in resumed.stderr
    assert "KeyError" not in resumed.stderr


def test_another_optimizers_checkpoint_names_the_optimizer(tmp_path):
    run = _trained(tmp_path)
    resumed = _train(tmp_path, "--resume", str(run), "--set", "trainer.epochs=3", "--set", "optimizer.name=Adam")
    assert resumed.returncode == 2, resumed.stderr
    assert "its optimizer state does not fit this run's Adam" in resumed.stderr and "KeyError" not in resumed.stderr
