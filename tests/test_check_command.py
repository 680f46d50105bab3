"""``trainkit check`` runs one batch of the real data through the model, the loss and backward, and names the layer
that fails with the shapes and dtypes it was given, so a config whose parts do not fit fails before training."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.cli.dry_run import BatchCheckError, one_batch
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


def check(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "check", config],
        capture_output=True,
        text=True,
        cwd=config.parent,
        timeout=300,
    )


def test_a_config_that_fits_reports_its_batch():
    done = check(ROOT / "configs" / "regression.yaml")
    assert done.returncode == 0, done.stderr
    assert "OK (Net, 31 parameters, 100 samples; one batch: inputs (10, 1) float32" in done.stdout


def test_inputs_that_do_not_fit_the_first_layer_name_it_with_a_hint(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.zeros((8, 3), np.float32), y=np.zeros((8, 1), np.float32))
    config = tmp_path / "c.yaml"
    config.write_text(
        f"model: {{class_path: {ROOT / 'examples/regression/model.py'}:Net}}\ndata: {{kind: npz, path: d.npz}}\n"
    )
    done = check(config)
    assert done.returncode == 2
    assert "forward (train mode) failed in layer 'hidden' (Linear), given (8, 3) float32" in done.stderr
    assert "hint: the layer takes 1 features and the batch has 3" in done.stderr


def test_labels_beyond_the_models_classes_are_reported_at_the_loss():
    trainer = Trainer(nn.Linear(2, 3), loss="cross_entropy", verbose=False)
    data = trainkit.utils.data.TensorDataset(trainkit.zeros(4, 2), trainkit.tensor([0, 1, 2, 7]))
    with pytest.raises(
        BatchCheckError,
        match=r"the loss failed on the model's output \(4, 3\) float32 and the "
        r"targets \(4,\) int64",
    ):
        one_batch(trainer, data, 4)


def test_one_batch_takes_no_step_and_leaves_no_gradients():
    model = nn.Linear(1, 1)
    before = model.weight.detach().clone()
    trainer = Trainer(model, verbose=False)
    one_batch(trainer, trainkit.utils.data.TensorDataset(trainkit.ones(4, 1), trainkit.ones(4, 1)), 4)
    assert model.weight.grad is None and bool((model.weight.detach() == before).all()) and model.training
