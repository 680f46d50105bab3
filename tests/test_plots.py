"""PlotCallback's figure: no panel for a constant series, the best epoch marked, activation-gradient norms drawn,
and a figure written when training is interrupted too (needs matplotlib, a test dependency)."""

from __future__ import annotations

import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import ActivationGradientMonitor, Callback, PlotCallback
from trainkit.trainer import Trainer

pytest.importorskip("matplotlib")


def _fit(tmp_path, callbacks, epochs=4):
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    model = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
    trainer = Trainer(model, loss="mse", callbacks=callbacks, run_dir=tmp_path, verbose=False)
    trainer.fit(x, x * x, epochs=epochs, batch_size=10, validation_split=0.25)
    return trainer


def test_a_constant_lr_gets_no_panel_and_activation_gradients_get_one(tmp_path):
    plot = PlotCallback()
    _fit(tmp_path, [ActivationGradientMonitor(["0", "2"]), plot])
    titles = [title for title, _ in plot.panels()]
    assert "lr" not in titles and plot.constants() == {"lr": 0.01}
    assert "activation gradient norm" in titles and "loss" in titles
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_the_best_epoch_is_the_lowest_validation_loss(tmp_path):
    plot = PlotCallback()
    trainer = _fit(tmp_path, [plot])
    losses = trainer.history["val_loss"]
    assert plot.best_epoch() == losses.index(min(losses)) + 1


def test_an_interrupted_run_still_writes_its_figure(tmp_path):
    class Interrupt(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise KeyboardInterrupt

    plot = PlotCallback()
    with pytest.raises(KeyboardInterrupt):
        _fit(tmp_path, [plot, Interrupt()])
    assert plot.records["epoch"] == [0, 1] and (tmp_path / "curves.png").is_file()
