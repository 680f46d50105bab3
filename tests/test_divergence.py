"""A diverging run (NaN or infinite loss) stops by default, exits 3, and keeps its last good checkpoint, whose
weights are finite; with terminate_on_nan off it runs on but still exits 3 and never writes bad weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def train(tmp_path, *sets) -> subprocess.CompletedProcess:
    args = [
        "--set",
        "optimizer.lr=3",
        "--set",
        "trainer.epochs=12",
        "--set",
        f"output_dir={tmp_path}",
        "--set",
        "callbacks=[]",
    ] + [a for s in sets for a in ("--set", s)]
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "train", ROOT / "configs" / "regression.yaml", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.parametrize("stop", [True, False])
def test_a_diverging_run_exits_3_and_keeps_finite_weights(tmp_path, stop):
    done = train(tmp_path, f"trainer.terminate_on_nan={str(stop).lower()}")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "trainkit: diverged: the loss became non-finite" in done.stderr
    epochs = [line for line in done.stdout.splitlines() if line.startswith("Epoch ")]
    assert (len(epochs) < 12) == stop  # stopped early only when asked to
    last = tmp_path / "regression" / "version_0" / "checkpoints" / "last.npz"
    assert str(last) in done.stderr
    with np.load(last) as saved:
        arrays = [saved[k] for k in saved.files if saved[k].dtype.kind == "f"]
    assert arrays and all(np.isfinite(a).all() for a in arrays)


def test_the_trainer_stops_on_nan_only_when_asked():
    import trainkit
    from trainkit.callbacks import TerminateOnNaN
    from trainkit.trainer import Trainer

    model = trainkit.nn.Linear(1, 1)
    assert not any(isinstance(c, TerminateOnNaN) for c in Trainer(model, verbose=False).callbacks.callbacks)
    guarded = Trainer(model, verbose=False, terminate_on_nan=True).callbacks.callbacks
    assert sum(isinstance(c, TerminateOnNaN) for c in guarded) == 1
