"""TensorBoard logging with PyTorch's names: SummaryWriter and the TensorBoard callback (also from a config) write
event files that TensorBoard's own reader reads back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import GradientMonitor, TensorBoard
from trainkit.trainer import Trainer
from trainkit.utils.tensorboard import SummaryWriter

pytest.importorskip("tensorboardX")
accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
ROOT = Path(__file__).resolve().parents[1]


def read(log_dir) -> accumulator.EventAccumulator:
    events = accumulator.EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    return events


def test_summary_writer_writes_what_tensorboard_reads(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalar("loss", trainkit.tensor(1.0 / (step + 1)), step)
        writer.add_scalars("lr", {"group0": 0.1, "group1": trainkit.tensor([0.01])}, 0)
        writer.add_histogram("weights", trainkit.randn(1000), 0)
        writer.add_image("image", trainkit.rand(3, 8, 8), 0)
        writer.add_text("note", "hello", 0)
    events = read(tmp_path)
    assert [round(e.value, 6) for e in events.Scalars("loss")] == [1.0, 0.5, 0.333333]
    assert "weights" in events.Tags()["histograms"] and "image" in events.Tags()["images"]


def test_the_callback_logs_every_epoch_and_the_gradient_norms(tmp_path):
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 32).unsqueeze(1)
    trainer = Trainer(
        nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1)),
        loss="mse",
        verbose=False,
        callbacks=[GradientMonitor(), TensorBoard(histogram_freq=2)],
        run_dir=tmp_path,
    )
    trainer.fit(x, x * x, epochs=4, batch_size=8, validation_split=0.25)
    events = read(tmp_path / "tensorboard")
    tags = events.Tags()["scalars"]
    assert {"loss", "val_loss", "lr", "grad_norm/global", "grad_norm/0.weight"} <= set(tags)
    losses = events.Scalars("loss")
    assert [e.step for e in losses] == [0, 1, 2, 3]
    np.testing.assert_allclose([e.value for e in losses], trainer.history["loss"], rtol=1e-6)
    assert [h.step for h in events.Histograms("0.weight")] == [0, 2]


def test_the_callback_from_a_config_writes_into_the_run_folder(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainkit",
            "train",
            ROOT / "configs" / "regression.yaml",
            "--set",
            "trainer.epochs=3",
            "--set",
            "callbacks=[TensorBoard]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    events = read(tmp_path / "runs" / "regression" / "version_0" / "tensorboard")
    assert len(events.Scalars("loss")) == 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.encoder(x)) * 2 + 1


def test_add_graph_writes_the_modules_as_scopes_that_tensorboard_reads(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(Net(), trainkit.ones(4, 2))
    graph = {node.name: node for node in read(tmp_path).Graph().node}
    assert graph["Net/Sequential[encoder]/Linear[0]/weight"].op == "Parameter"
    linear = graph["Net/Sequential[encoder]/Linear[0]/AddmmBackward0"]
    assert "input/input_0" in linear.input and "Net/Sequential[encoder]/Linear[0]/bias" in linear.input
    assert graph["Net/Sequential[encoder]/ReLU[1]/ReluBackward0"].input == [linear.name]
    assert graph["Net/Linear[head]/AddmmBackward0"].input[1] == "Net/Sequential[encoder]/ReLU[1]/ReluBackward0"
    assert graph["Net/MulBackward0"].input == ["Net/Linear[head]/AddmmBackward0"]  # the model's own ops: its scope
    assert graph["output/output_0"].input == ["Net/AddBackward0"]
    assert graph["input/input_0"].attr["shape"].s == b"(4, 2)"


def test_add_graph_of_a_model_without_a_graph_says_why(tmp_path):
    model = nn.Embedding(5, 2).requires_grad_(False)
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="output of Embedding does not require"):
        writer.add_graph(model, trainkit.tensor([[1, 2]]))
