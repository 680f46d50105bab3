"""Trainer.fit from Python as a Keras user expects: verbose 0/1/2 with Keras' meaning, and the command's default
callbacks (progress; metrics.csv and the best checkpoint when a run folder is given) without wiring them by hand."""

from __future__ import annotations

import io
import sys

import trainkit
from trainkit import nn
from trainkit.callbacks import CSVLogger, ProgressBar
from trainkit.trainer import Trainer


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fit(monkeypatch, verbose, **trainer_kwargs):
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 20).unsqueeze(1)
    trainer = Trainer(nn.Linear(1, 1), **trainer_kwargs)
    trainer.fit(x, 2 * x, epochs=2, batch_size=5, verbose=verbose)
    return trainer, out.getvalue()


def test_verbose_0_prints_nothing(monkeypatch):
    _, text = _fit(monkeypatch, 0)
    assert text == ""


def test_verbose_1_draws_a_bar_with_its_total_on_a_terminal(monkeypatch):
    trainer, text = _fit(monkeypatch, 1)
    assert "Trainable params: 2" in text and "4/4" in text  # tqdm's count of the epoch's 4 batches
    assert sum(isinstance(c, ProgressBar) for c in trainer.callbacks) == 1


def test_verbose_2_prints_one_line_per_epoch_even_on_a_terminal(monkeypatch):
    _, text = _fit(monkeypatch, 2)
    lines = [line for line in text.splitlines() if line.startswith("Epoch ")]
    assert [line.split(" - ")[0] for line in lines] == ["Epoch 1/2", "Epoch 2/2"] and "4/4" not in text


def test_a_run_folder_gets_metrics_and_the_best_checkpoint(monkeypatch, tmp_path):
    trainer, _ = _fit(monkeypatch, 0, run_dir=tmp_path)
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,loss") and len(rows) == 3
    assert (tmp_path / "checkpoints" / "best.npz").is_file() and (tmp_path / "checkpoints" / "last.npz").is_file()


def test_callbacks_given_are_not_doubled(monkeypatch, tmp_path):
    mine = CSVLogger("mine.csv")
    trainer, _ = _fit(monkeypatch, 0, run_dir=tmp_path, callbacks=[mine])
    assert [c for c in trainer.callbacks if isinstance(c, CSVLogger)] == [mine]
    assert (tmp_path / "mine.csv").is_file() and not (tmp_path / "metrics.csv").exists()
