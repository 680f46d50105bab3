"""A config names code, but only code of the kind each key is for: a class_path naming any other callable
(``os.system``, ``subprocess.run``) is a config error before anything is called, and nothing runs or is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.cli import config as cfg
from trainkit.registry import ClassPathError, check_kind, dataset_factory

ROOT = Path(__file__).resolve().parents[1]
MODEL = "model: {class_path: trainkit.nn.Linear, init_args: {in_features: 1, out_features: 1}}\n"


def run(command: str, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", command, config],
        capture_output=True,
        text=True,
        cwd=config.parent,
        timeout=300,
    )


@pytest.mark.parametrize("command", ["check", "train"])
@pytest.mark.parametrize(
    "text,key",
    [
        ("model: {class_path: os.system, init_args: {command: 'touch {marker}'}}\n", "model.class_path"),
        (
            MODEL + "data: {kind: class_path, class_path: subprocess.run, init_args: {args: [touch, '{marker}']}}\n",
            "data.class_path",
        ),
        (MODEL + "callbacks: [{class_path: subprocess.getoutput, cmd: 'touch {marker}'}]\n", "callbacks[0].class_path"),
        (MODEL + "optimizer: {class_path: os.system, options: {command: 'touch {marker}'}}\n", "optimizer.class_path"),
    ],
)
def test_a_class_path_to_any_other_callable_is_refused_and_nothing_runs(tmp_path, command, text, key):
    marker = tmp_path / "pwned"
    config = tmp_path / "c.yaml"
    config.write_text(text.replace("{marker}", str(marker)))
    done = run(command, config)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"'{key}'" in done.stderr and "a config names only code of the kind its key is for" in done.stderr
    assert not marker.exists()
    assert not (tmp_path / "runs").exists()


def test_the_kinds_each_key_accepts(tmp_path):
    import trainkit

    check_kind(trainkit.nn.Linear, "trainkit.nn.Linear", "model")
    check_kind(trainkit.data.TensorDataset, "trainkit.data.TensorDataset", "data")
    check_kind(trainkit.data.digits, "trainkit.data.digits", "data")  # trainkit's own dataset function
    check_kind(trainkit.optim.Adam, "trainkit.optim.Adam", "optimizer")
    check_kind(trainkit.callbacks.EarlyStopping, "trainkit.callbacks.EarlyStopping", "callbacks")
    check_kind(dataset_factory(lambda: None), "f", "data")
    for obj, kind in ((trainkit.optim.Adam, "model"), (trainkit.nn.Linear, "data"), (len, "callbacks")):
        with pytest.raises(ClassPathError, match="a config names only code of the kind its key is for"):
            check_kind(obj, "x", kind)


def test_the_reference_page_says_a_config_is_code():
    assert "A config names code" in (ROOT / "docs" / "config.md").read_text()
    assert "A config names code" in cfg.reference()


@pytest.mark.parametrize("value", ["!!python/object/apply:os.system ['true']", "[unclosed", "{a: 1"])
def test_a_set_value_that_is_not_plain_yaml_is_a_config_error(tmp_path, value):
    config = tmp_path / "c.yaml"
    config.write_text(MODEL)
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "check", config, "--set", f"trainer.device={value}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert f"{config}: --set trainer.device: the value is not valid YAML" in done.stderr
    assert "Traceback" not in done.stderr
