"""``trainer.verbose`` in a config takes what Keras' ``fit(verbose=)`` takes: 0, 1, 2 or 'auto' (and true/false);
anything else is a config error naming the key and the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CONFIG = """model: {class_path: trainkit.nn.Linear, init_args: {in_features: 1, out_features: 1}}
data: {kind: regression_curve, n: 8}
"""


def trainkit(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize("value, read", [("0", 0), ("1", 1), ("2", 2), ("auto", "auto"), ("false", False)])
def test_keras_verbose_values_load(tmp_path, value, read):
    # before, only true/false loaded: "'trainer.verbose' must be true/false, got 2"
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + f"trainer: {{verbose: {value}}}\n")
    printed = trainkit("train", path, "--print-config", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert yaml.safe_load(printed.stdout)["trainer"]["verbose"] == read


@pytest.mark.parametrize("value, message", [("3", "got 3"), ("loud", "got 'loud'"), ("1.5", "got 1.5")])
def test_other_verbose_values_are_config_errors(tmp_path, value, message):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + f"trainer: {{verbose: {value}}}\n")
    result = trainkit("check", path, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"trainkit: config error: {path}: 'trainer.verbose' must be ")
    assert message in result.stderr
