"""Trainer(compile=True) and the config's trainer.compile: the steps call the model's compiled forward, and the
run's numbers are the eager run's, from Python and through the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

import trainkit

ROOT = Path(__file__).resolve().parents[1]


def fit(compile: bool) -> tuple[list, np.ndarray, dict]:
    trainkit.manual_seed(0)
    model = trainkit.nn.Sequential(trainkit.nn.Linear(3, 16), trainkit.nn.Tanh(), trainkit.nn.Linear(16, 1))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32)).astype(np.float32)
    trainer = trainkit.Trainer(model, loss="mse", verbose=0, seed=0, compile=compile)
    history = trainer.fit(x, y, epochs=6, batch_size=16, validation_split=0.25)
    prediction = trainkit.Tensor.numpy(trainer.predict(x[:5]))
    return history.history["loss"] + history.history["val_loss"], prediction, trainer.evaluate(x, y)


def test_compiled_fit_evaluate_and_predict_equal_eager():
    eager, compiled = fit(False), fit(True)
    assert compiled[0] == eager[0]  # every epoch's training and validation loss, bit for bit
    np.testing.assert_array_equal(compiled[1], eager[1])
    assert compiled[2] == eager[2]


def test_the_trainer_calls_the_compiled_forward():
    model = trainkit.nn.Linear(2, 1)
    trainer = trainkit.Trainer(model, loss="mse", verbose=0, compile=True)
    assert trainer.forward is not model
    trainer.fit(np.ones((8, 2), np.float32), np.ones((8, 1), np.float32), epochs=2, batch_size=4)
    report = trainer.forward.explain()
    assert "1 capture, 3 replays, 0 eager calls" in report  # 2 epochs of 2 batches: captured once, replayed
    assert list(trainer.model.state_dict()) == ["weight", "bias"]  # checkpoints keep the model's own keys


def run_command(folder: Path, compile: bool) -> list:
    config = yaml.safe_load((ROOT / "configs" / "regression.yaml").read_text())
    config["model"]["class_path"] = str(ROOT / "examples" / "regression" / "model.py") + ":Net"
    config["trainer"].update(epochs=5, compile=compile)
    config.pop("callbacks", None)
    path = folder / f"c{int(compile)}.yaml"
    config["name"] = f"c{int(compile)}"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "train", path], capture_output=True, text=True, cwd=folder, timeout=300
    )
    assert result.returncode == 0, result.stderr
    run = folder / "runs" / config["name"] / "version_0"
    assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["compile"] is compile
    return [json.loads(line)["loss"] for line in (run / "history.jsonl").read_text().splitlines()]


def test_the_command_with_trainer_compile_matches_its_eager_run(tmp_path):
    assert run_command(tmp_path, True) == run_command(tmp_path, False)
