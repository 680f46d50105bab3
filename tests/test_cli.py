"""The ``trainkit`` command end to end, in a subprocess: exit codes, run folders, bad configs, interruption."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainkit.training import checkpoint

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def trainkit(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    result = trainkit("train", CONFIG, "--set", f"output_dir={out}")
    return result, out / "regression" / "version_0"


def test_train_writes_the_run_folder_and_reaches_the_target(regression_run):
    result, run = regression_run
    assert result.returncode == 0, result.stderr
    assert "done: 200 epochs" in result.stdout
    for name in ("config.yaml", "metrics.csv", "checkpoints/last.npz", "checkpoints/best.npz"):
        assert (run / name).is_file(), name
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == 200
    assert float(rows[-1]["loss"]) < 0.01
    assert "grad_norm/global" in rows[-1]


def test_evaluate_a_checkpoint(regression_run):
    _, run = regression_run
    result = trainkit("evaluate", CONFIG, "--checkpoint", run / "checkpoints" / "last.npz")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("all (100 samples): loss ")  # no split held out: every sample, named so
    assert float(result.stdout.split("loss ")[1].split(",")[0]) < 0.01


def test_check_and_print_config():
    result = trainkit("check", CONFIG)
    assert result.returncode == 0 and "OK (Net, 31 parameters, 100 samples; one batch:" in result.stdout
    result = trainkit("train", CONFIG, "--set", "trainer.epochs=7", "--print-config")
    assert result.returncode == 0 and "epochs: 7" in result.stdout


def test_frozen_config_keeps_hidden_unchanged(tmp_path):
    result = trainkit(
        "train",
        ROOT / "configs" / "regression_frozen.yaml",
        "--set",
        f"output_dir={tmp_path}",
        "--set",
        "trainer.epochs=20",
    )
    assert result.returncode == 0, result.stderr
    assert "Trainable params: 11 | Frozen params: 20" in result.stdout
    state = checkpoint.load(tmp_path / "regression_frozen" / "version_0" / "checkpoints" / "last.npz")["model"]
    import trainkit as tk

    sys.path.insert(0, str(ROOT / "examples" / "regression"))
    from model import Net

    tk.manual_seed(0)
    initial = Net().state_dict()
    assert np.array_equal(state["hidden.weight"].numpy(), initial["hidden.weight"].numpy())
    assert not np.array_equal(state["predict.weight"].numpy(), initial["predict.weight"].numpy())


@pytest.mark.parametrize(
    "edit, words",
    [
        (("trainer:", "trainer:\n  epoch: 3"), ["unknown key 'trainer.epoch'", "did you mean 'epochs'"]),
        (("  batch_size: 10\n", "  batch_size: many\n"), ["'trainer.batch_size' must be an integer"]),
        (("optimizer:\n  name: SGD", "optimizer:\n  name: SDG"), ["'optimizer.name'", "did you mean 'SGD'"]),
        (("  kind: regression_curve", "  kind: regresion_curve"), ["'data.kind'", "did you mean 'regression_curve'"]),
        (("model.py:Net", "model.py:Nett"), ["'model.class_path'", "Nett"]),
    ],
)
def test_bad_configs_fail_before_training_naming_file_and_key(tmp_path, edit, words):
    original = CONFIG.read_text()
    assert edit[0] in original, f"the edit {edit[0]!r} no longer applies to {CONFIG.name}"
    text = original.replace(*edit, 1).replace("../examples", str(ROOT / "examples"))
    bad = write(tmp_path / "bad.yaml", text)
    result = trainkit("train", bad, "--set", f"output_dir={tmp_path}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert str(bad) in result.stderr
    for word in words:
        assert word in result.stderr
    assert not (tmp_path / "bad").exists(), "nothing may be written for a bad config"


def test_missing_config_file_is_a_config_error(tmp_path):
    result = trainkit("train", tmp_path / "nope.yaml")
    assert result.returncode == 2 and "no such config file" in result.stderr


STOPPER = """
from trainkit.callbacks.base import Callback


class Stop(Callback):
    def __init__(self, at: int, error: str = "KeyboardInterrupt"):
        super().__init__()
        self.at, self.error = at, error

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.at:
            raise {"KeyboardInterrupt": KeyboardInterrupt, "RuntimeError": RuntimeError}[self.error]("stop here")
"""


def _config_with_stopper(tmp_path, error: str) -> Path:
    write(tmp_path / "stopper.py", STOPPER)
    text = CONFIG.read_text().replace("../examples", str(ROOT / "examples"))
    text += f"  - class_path: stopper.py:Stop\n    at: 3\n    error: {error}\n"
    return write(tmp_path / "stopping.yaml", text)


def test_interrupted_run_exits_130_and_leaves_loadable_checkpoints(tmp_path):
    result = trainkit("train", _config_with_stopper(tmp_path, "KeyboardInterrupt"), "--set", f"output_dir={tmp_path}")
    assert result.returncode == 130, result.stderr
    run = tmp_path / "regression"  # the config keeps the name of the one it was copied from
    last = checkpoint.load(run / "version_0" / "checkpoints" / "last.npz")
    assert last["epoch"] == 2
    assert "model" in checkpoint.load(run / "version_0" / "checkpoints" / "interrupted.npz")
    resumed = trainkit(
        "train",
        tmp_path / "stopping.yaml",
        "--set",
        f"output_dir={tmp_path}",
        "--set",
        "callbacks=[]",
        "--set",
        "trainer.epochs=5",
        "--resume",
        run,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "done: 5 epochs" in resumed.stdout


def test_a_failing_run_exits_1_with_one_line(tmp_path):
    result = trainkit("train", _config_with_stopper(tmp_path, "RuntimeError"), "--set", f"output_dir={tmp_path}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["trainkit: error: RuntimeError: stop here"]
    debug = trainkit("--debug", "train", tmp_path / "stopping.yaml", "--set", f"output_dir={tmp_path}")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_digits_classification_config(tmp_path):
    pytest.importorskip("sklearn")
    result = trainkit(
        "train", ROOT / "configs" / "digits.yaml", "--set", f"output_dir={tmp_path}", "--set", "trainer.epochs=4"
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((tmp_path / "digits" / "version_0" / "metrics.csv").open()))
    assert len(rows) == 4 and float(rows[-1]["val_accuracy"]) > 0.7
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib" in result.stderr  # the plot is skipped with a message; training went on
    else:
        assert (tmp_path / "digits" / "version_0" / "curves.png").is_file()


def test_graph_command_prints_the_tree_and_writes_dot(tmp_path):
    result = trainkit("graph", CONFIG, "--set", f"output_dir={tmp_path}", "--format", "dot")
    assert result.returncode == 0, result.stderr
    assert "MseLossBackward0" in result.stdout and "AccumulateGrad" in result.stdout
    assert "total saved" in result.stdout
    assert (tmp_path / "regression" / "graph.dot").read_text().startswith("digraph")


def test_bench_runs_the_suite_of_the_checkout(tmp_path):
    pytest.importorskip("torch")
    result = trainkit("bench", "--only", "tiny_ops", "--rounds", "1", "--skip-check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "| W3 tiny_ops" in result.stdout and "us/op" in result.stdout
    usage = trainkit("bench", "--help", cwd=tmp_path)
    assert usage.returncode == 0 and "--keep-freed-memory" in usage.stdout


def test_unknown_options_of_other_commands_are_still_refused():
    result = trainkit("check", CONFIG, "--bogus")
    assert result.returncode == 2 and "unrecognized arguments: --bogus" in result.stderr
