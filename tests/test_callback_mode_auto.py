"""``mode='auto'`` on EarlyStopping and ModelCheckpoint, as in Keras 3: ``val_accuracy`` keeps the highest epoch,
``val_loss`` the lowest, a metric says its own direction, an unknown quantity warns once, a bad mode is refused."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import EarlyStopping, LRSchedulerCallback, ModelCheckpoint
from trainkit.metrics import Accuracy, MeanAbsoluteError, Metric, direction
from trainkit.optim.lr_scheduler import ReduceLROnPlateau
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


def blobs(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Three overlapping 2-d clusters: a linear model's validation accuracy goes up and down from epoch to epoch
    at a high learning rate, so the best epoch is neither the first nor the last."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [1.2, 0.0], [0.0, 1.2]])
    x = (centers[y] + rng.normal(scale=0.7, size=(n, 2))).astype(np.float32)
    return x, y.astype(np.int64)


def fit_blobs(callbacks, metrics=("accuracy",), epochs=8) -> Trainer:
    trainkit.manual_seed(0)
    model = nn.Linear(2, 3)
    trainer = Trainer(
        model,
        trainkit.optim.SGD(model.parameters(), lr=2.0),
        loss="cross_entropy",
        metrics=list(metrics),
        callbacks=callbacks,
        seed=0,
        verbose=False,
    )
    x, y = blobs()
    trainer.fit(x, y, epochs=epochs, batch_size=16, validation_split=0.3)
    return trainer


def test_val_accuracy_keeps_the_highest_epoch_and_val_loss_the_lowest(tmp_path):
    by_acc = ModelCheckpoint(tmp_path / "acc", monitor="val_accuracy", save_last=False)
    by_loss = ModelCheckpoint(tmp_path / "loss", monitor="val_loss", save_last=False)
    stopper = EarlyStopping(monitor="val_accuracy", patience=100, restore_best_weights=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both directions are known: no warning
        trainer = fit_blobs([by_acc, by_loss, stopper])
    acc, loss = trainer.history["val_accuracy"], trainer.history["val_loss"]
    assert int(np.argmax(acc)) not in (0, len(acc) - 1) and np.argmax(acc) != np.argmin(acc)  # the data fit
    assert (by_acc.mode, by_acc.resolved_mode, by_loss.resolved_mode) == ("auto", "max", "min")
    assert (by_acc.best_epoch, by_acc.best) == (int(np.argmax(acc)), max(acc))
    assert (by_loss.best_epoch, by_loss.best) == (int(np.argmin(loss)), min(loss))
    assert stopper.best_epoch == stopper.restored_epoch == int(np.argmax(acc))
    # the restored weights are those of the best epoch: evaluating them gives its accuracy
    x, y = blobs()
    held_out = trainer.evaluate(x[-90:], y[-90:])
    assert held_out["accuracy"] == pytest.approx(max(acc))


def test_early_stopping_on_accuracy_waits_for_it_to_stop_rising():
    class Bare:
        stop_training = False

    stopper = EarlyStopping(monitor="val_accuracy", patience=2)
    stopper.set_trainer(Bare())
    for epoch, value in enumerate([0.5, 0.6, 0.7, 0.65, 0.68, 0.9]):
        stopper.on_epoch_end(epoch, {"val_accuracy": value})
        if stopper.trainer.stop_training:
            break
    assert (stopper.best, stopper.best_epoch, stopper.stopped_epoch) == (0.7, 2, 4)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("loss", "min"),
        ("val_loss", "min"),
        ("val_reconstruction_loss", "min"),
        ("accuracy", "max"),
        ("val_accuracy", "max"),
        ("val_acc", "max"),
        ("top5_accuracy", "max"),
        ("val_top_3_accuracy", "max"),
        ("val_auc", "max"),
        ("precision", "max"),
        ("val_recall", "max"),
        ("f1_score", "max"),
        ("val_mae", "min"),
        ("rmse", "min"),
        ("val_perplexity", "min"),
        ("ppl", "min"),
        ("mean_squared_error", "min"),
        ("lr", None),
        ("grad_norm/global", None),
        ("val_something", None),
    ],
)
def test_direction_from_the_name(name, expected):
    assert direction(name) == expected


def test_metric_classes_declare_their_direction():
    assert Accuracy.higher_is_better is True and MeanAbsoluteError.higher_is_better is False
    assert Metric.higher_is_better is None


class Overlap(Metric):
    """A metric of the user's whose name says nothing; it declares that higher is better."""

    name = "overlap"
    higher_is_better = True

    def batch(self, output, target):
        return float((output.argmax(1) == target).sum().item()), len(target)


class Spread(Overlap):
    name = "spread"
    higher_is_better = False


def test_a_metric_of_the_trainer_decides_by_what_it_declares(tmp_path):
    up = ModelCheckpoint(tmp_path / "up", monitor="val_overlap", save_last=False)
    down = EarlyStopping(monitor="val_spread", patience=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer = fit_blobs([up, down], metrics=[Overlap(), Spread()])
    assert (up.resolved_mode, down.resolved_mode) == ("max", "min")
    values = trainer.history["val_overlap"]
    assert up.best_epoch == int(np.argmax(values)) and down.best_epoch == int(np.argmin(values))
    # outside a trainer the name alone cannot tell: a declared direction needs the metric
    assert direction("val_overlap") is None and direction("val_overlap", [Overlap()]) == "max"


def test_an_unknown_direction_warns_once_naming_the_monitor(tmp_path):
    stopper = EarlyStopping(monitor="lr", patience=100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_blobs([stopper], epochs=3)
    about = [str(w.message) for w in caught if "lower or a higher" in str(w.message)]
    assert len(about) == 1, about
    assert "'lr'" in about[0] and "mode='min' or mode='max'" in about[0] and "EarlyStopping" in about[0]
    assert stopper.resolved_mode == "min"  # as before: the lowest is kept
    for mode in ("min", "max"):  # a stated mode is obeyed without a word
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fit_blobs([EarlyStopping(monitor="lr", mode=mode, patience=100)], epochs=2)


@pytest.mark.parametrize("make", [EarlyStopping, ModelCheckpoint])
@pytest.mark.parametrize("mode", ["maximum", "MIN", "", None, 1])
def test_a_bad_mode_is_refused_naming_the_allowed_values(make, mode):
    with pytest.raises(ValueError) as err:
        make(mode=mode)
    assert str(err.value) == f"{make.__name__}: mode must be 'auto', 'min' or 'max', got {mode!r}"


def test_auto_is_the_default_and_shows_in_the_repr():
    assert "mode='auto'" in repr(EarlyStopping()) and "mode='auto'" in repr(ModelCheckpoint("x"))
    assert EarlyStopping(mode="max").resolve_mode() == "max"


# ------------------------------------------------------------------------------------------------- the command
def trainkit_command(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def blobs_config(folder: Path, callbacks: str) -> Path:
    x, y = blobs()
    np.savez(folder / "blobs.npz", x=x, y=y)
    config = folder / "blobs.yaml"
    config.write_text(
        "name: blobs\n"
        "model: {class_path: trainkit.nn.Linear, init_args: {in_features: 2, out_features: 3}}\n"
        "data: {kind: npz, path: blobs.npz, validation_split: 0.3}\n"
        "optimizer: {name: SGD, lr: 2.0}\n"
        "loss: cross_entropy\n"
        "metrics: [accuracy]\n"
        "trainer: {epochs: 8, batch_size: 16, seed: 0}\n"
        f"callbacks:\n{callbacks}"
    )
    return config


def test_the_command_keeps_the_epoch_of_the_highest_val_accuracy_as_best(tmp_path):
    config = blobs_config(tmp_path, "  - name: ModelCheckpoint\n    monitor: val_accuracy\n    save_last: false\n")
    done = trainkit_command("train", config, "--set", f"output_dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr
    run = tmp_path / "runs" / "blobs" / "version_0"
    rows = (run / "metrics.csv").read_text().splitlines()
    header, values = rows[0].split(","), [row.split(",") for row in rows[1:]]
    acc = [float(v[header.index("val_accuracy")]) for v in values]
    assert len(acc) == 8 and int(np.argmax(acc)) not in (0, 7) and min(acc) < max(acc)
    best = run / "checkpoints" / "best.npz"
    evaluated = trainkit_command("evaluate", config, "--checkpoint", best, "--split", "val", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    accuracy = float(evaluated.stdout.split("accuracy ")[1].split()[0].rstrip(","))
    assert accuracy == pytest.approx(max(acc), abs=1e-6)  # best.npz holds the highest epoch, not the lowest


def test_the_command_refuses_a_bad_mode_naming_the_callback_and_the_file(tmp_path):
    config = blobs_config(tmp_path, "  - name: EarlyStopping\n    monitor: val_accuracy\n    mode: maximum\n")
    done = trainkit_command("train", config, "--set", f"output_dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "callbacks[0]" in done.stderr and "blobs.yaml" in done.stderr
    assert "mode must be 'auto', 'min' or 'max', got 'maximum'" in done.stderr


def test_a_plateau_scheduler_whose_mode_contradicts_the_monitor_is_warned_about():
    def run(mode: str) -> list[str]:
        trainkit.manual_seed(0)
        model = nn.Linear(2, 3)
        optimizer = trainkit.optim.SGD(model.parameters(), lr=0.5)
        callback = LRSchedulerCallback(ReduceLROnPlateau(optimizer, mode=mode, patience=0), monitor="val_accuracy")
        trainer = Trainer(model, optimizer, "cross_entropy", ["accuracy"], [callback], seed=0, verbose=False)
        x, y = blobs()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.fit(x, y, epochs=3, batch_size=32, validation_split=0.3)
        return [str(w.message) for w in caught if "ReduceLROnPlateau" in str(w.message)]

    (message,) = run("min")  # PyTorch's default mode, on a quantity that should rise: said once
    assert "mode='min'" in message and "'val_accuracy'" in message and "mode='max'" in message
    assert run("max") == []
