"""Trainer(precision=...) and the config's trainer.precision: bf16-mixed runs forward and loss under autocast with
float32 weights, as a torch loop under torch.autocast does; the names Lightning takes; the refusals, from Python and
through the command (exit 2 naming the key and the file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import to_numpy

import trainkit
from trainkit.training.precision import Precision, canonical

ROOT = Path(__file__).resolve().parents[1]


class Recorder(trainkit.nn.Module):
    """Linear(2, 3) - ReLU - Linear(3, 1) that keeps the dtype of its hidden activation."""

    def __init__(self):
        super().__init__()
        self.hidden, self.out = trainkit.nn.Linear(2, 3), trainkit.nn.Linear(3, 1)
        self.seen = []

    def forward(self, x):
        h = self.hidden(x)
        self.seen.append(h.dtype)
        return self.out(h.relu())


def weights(lib, model):
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))


def test_bf16_mixed_step_matches_a_torch_autocast_step(torch):
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(8, 2)
    y = (x[:, :1] ** 2).astype(np.float32)

    model = Recorder()
    weights(trainkit, model)
    trainer = trainkit.Trainer(
        model, trainkit.optim.SGD(model.parameters(), lr=0.1), "mse", verbose=False, precision="bf16-mixed"
    )
    logs = trainer.train_step((trainkit.tensor(x), trainkit.tensor(y)))

    tmodel = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    weights(torch, tmodel)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = tmodel[0](torch.tensor(x))
        loss = torch.nn.functional.mse_loss(tmodel[2](hidden.relu()), torch.tensor(y))
    loss.backward()
    grads = [p.grad.dtype for p in tmodel.parameters()]
    topt.step()

    assert model.seen == [trainkit.bfloat16] and hidden.dtype == torch.bfloat16
    assert loss.dtype == torch.float32
    assert grads == [torch.float32] * 4
    assert all(p.dtype is trainkit.float32 for p in model.parameters())
    np.testing.assert_allclose(logs["loss"], loss.item(), rtol=2e-2)
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(to_numpy(p), to_numpy(tp), rtol=2e-2, atol=2e-3)


def test_bf16_mixed_trains_evaluates_and_predicts():
    trainkit.manual_seed(0)
    model = trainkit.nn.Sequential(trainkit.nn.Linear(1, 10), trainkit.nn.ReLU(), trainkit.nn.Linear(10, 1))
    trainer = trainkit.Trainer(
        model, trainkit.optim.SGD(model.parameters(), lr=0.2), "mse", seed=0, verbose=False, precision="bf16-mixed"
    )
    x = trainkit.linspace(-1, 1, 100).unsqueeze(1)
    history = trainer.fit(x, x**2, epochs=15, batch_size=20)
    assert history.history["loss"][-1] < history.history["loss"][0] / 3
    assert trainer.evaluate(x, x**2)["loss"] < 0.1
    assert trainer.predict(x[:4]).dtype is trainkit.bfloat16  # the forward ran under autocast, as in Lightning
    assert all(p.dtype is trainkit.float32 for p in model.parameters())


def test_64_true_puts_the_model_and_inputs_in_float64():
    model = trainkit.nn.Linear(2, 1)
    trainer = trainkit.Trainer(model, verbose=False, precision="64-true")
    assert model.weight.dtype is trainkit.float64
    trainer.train_step((trainkit.ones(4, 2), trainkit.zeros(4, 1)))
    assert model.weight.grad is None and model.weight.dtype is trainkit.float64  # the step zeroed the grads


@pytest.mark.parametrize(
    ("given", "name"), [(32, "32-true"), ("32", "32-true"), ("bf16", "bf16-mixed"), (16, "16-mixed"), (64, "64-true")]
)
def test_lightning_short_names(given, name):
    assert canonical(given) == name


def test_refusals_from_python():
    model = trainkit.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="AMP with float16 is not supported on the CPU: use 'bf16-mixed'"):
        trainkit.Trainer(model, precision="16-mixed")
    with pytest.raises(ValueError, match="precision='fp16' is not supported; choose one of '32-true'"):
        trainkit.Trainer(model, precision="fp16")
    with pytest.warns(UserWarning, match="historical reasons"):
        assert Precision("bf16").name == "bf16-mixed"


def trainkit_command(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def regression_config(folder: Path, precision) -> Path:
    config = yaml.safe_load((ROOT / "configs" / "regression.yaml").read_text())
    config["model"]["class_path"] = str(ROOT / "examples" / "regression" / "model.py") + ":Net"
    config["trainer"].update(epochs=20, precision=precision)
    config.pop("callbacks", None)
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_command_trains_with_bf16_mixed(tmp_path):
    config = regression_config(tmp_path, "bf16-mixed")
    result = trainkit_command("train", config, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "done: 20 epochs" in result.stdout
    run = tmp_path / "runs" / "regression" / "version_0"
    assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["precision"] == "bf16-mixed"
    assert (run / "checkpoints" / "last.npz").is_file()


@pytest.mark.parametrize(
    ("value", "words"),
    [("fp8", "must be one of 32-true, bf16-mixed"), ("16-mixed", "AMP with float16 is not supported on the CPU")],
)
def test_the_command_refuses_a_bad_precision(tmp_path, value, words):
    config = regression_config(tmp_path, value)
    result = trainkit_command("train", config, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "c.yaml: 'trainer.precision'" in result.stderr and words in result.stderr
    assert not (tmp_path / "runs").exists()
