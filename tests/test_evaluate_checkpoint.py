"""``trainkit evaluate --checkpoint`` takes what ``--resume`` takes (a run folder, a version folder, a checkpoint
file) and weights files (state dicts in .npz, .pt/.pth and .safetensors, from trainkit.save or torch.save), scoring
the same weights each time; a file that is neither says so in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import trainkit
from trainkit.training import checkpoint

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def trainkit_cmd(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


def evaluate(where) -> subprocess.CompletedProcess:
    return trainkit_cmd("evaluate", CONFIG, "--checkpoint", where)


def evaluate_all(places) -> list[subprocess.CompletedProcess]:
    """``evaluate`` of each place, the commands running side by side."""
    command = [sys.executable, "-m", "trainkit", "evaluate", str(CONFIG), "--checkpoint"]
    running = [
        subprocess.Popen([*command, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        for p in places
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def figures(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    result = trainkit_cmd("train", CONFIG, "--set", f"output_dir={out}", "--set", "trainer.epochs=3")
    assert result.returncode == 0, result.stderr
    return out / "regression" / "version_0"


def test_folders_as_resume_takes_them(run):
    expected = figures(evaluate(run / "checkpoints" / "last.npz"))
    assert expected.startswith("all (100 samples): loss ")
    # before: FileNotFoundError: no checkpoint at .../version_0 (exit 1)
    places = (run, run.parent, run / "checkpoints")
    for where, result in zip(places, evaluate_all(places)):
        assert figures(result) == expected, where
        assert result.stdout.startswith(f"checkpoint {run / 'checkpoints' / 'last.npz'}\n")


def test_weights_files_score_the_same_weights(run, tmp_path, torch):
    expected = figures(evaluate(run / "checkpoints" / "last.npz"))
    weights = checkpoint.load(run / "checkpoints" / "last.npz")["model"]
    files = []
    for name in ("w.npz", "w.pt", "w.safetensors"):
        if name.endswith(".safetensors"):
            pytest.importorskip("safetensors")
        trainkit.save(weights, tmp_path / name)
        files.append(tmp_path / name)
    torch.save({k: torch.from_numpy(v.numpy().copy()) for k, v in weights.items()}, tmp_path / "torch.pt")
    nested = {"epoch": 3, "model_state_dict": {k: torch.from_numpy(v.numpy().copy()) for k, v in weights.items()}}
    torch.save(nested, tmp_path / "nested.pth")
    # before: "not a training checkpoint (no 'model'; ...)" (exit 1), KeyError: 'model' for best.safetensors
    places = [*files, tmp_path / "torch.pt", tmp_path / "nested.pth"]
    for path, result in zip(places, evaluate_all(places)):
        assert figures(result) == expected, path.name


def test_a_file_that_is_neither_says_so_in_one_line(tmp_path):
    (tmp_path / "notes.npz").write_text("not weights")
    trainkit.save({"lr": 0.1, "steps": [1, 2]}, tmp_path / "settings.npz")
    trainkit.save(trainkit.nn.Linear(3, 2).state_dict(), tmp_path / "other.pt")
    names = ("notes.npz", "settings.npz", "other.pt", "absent")
    text, settings, other, absent = evaluate_all([tmp_path / name for name in names])
    for result in (text, settings, other, absent):
        assert result.returncode == 2 and "\n" not in result.stderr.strip()  # the user's input: exit 2

    assert text.stderr.startswith(f"trainkit: error: {tmp_path / 'notes.npz'}: not a training checkpoint")
    assert "or a state dict (.npz, .pt/.pth, .safetensors)" in text.stderr
    assert "neither a training checkpoint (RUN/checkpoints/*.npz) nor a state dict" in settings.stderr
    assert "it holds keys 'lr', 'steps'" in settings.stderr
    assert f"{tmp_path / 'other.pt'}: its weights do not fit the config's model: " in other.stderr
    assert "Missing key(s)" in other.stderr
    assert absent.stderr.strip() == (
        f"trainkit: error: --checkpoint {tmp_path / 'absent'}: no such run folder, checkpoint or weights file"
    )
