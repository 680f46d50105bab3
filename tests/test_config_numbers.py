"""Numbers in configs as a person writes them: ``1e-3``, ``1e6`` and ``.5`` are numbers, in files and in ``--set``.

YAML 1.1 (PyYAML's ``safe_load``) reads ``1e-3`` as a string, which made ``lr: 1e-3`` a config error. Also: the
command runs as ``python -m trainkit``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.cli import config as cfg

ROOT = Path(__file__).resolve().parents[1]
MODEL = "model: {class_path: trainkit.nn.Linear, init_args: {in_features: 1, out_features: 1}}\n"


def trainkit(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "written,value",
    [("1e-3", 1e-3), ("1E-3", 1e-3), ("2.5e-4", 2.5e-4), ("1e+1", 10.0), (".5", 0.5), ("0.01", 0.01), ("1", 1)],
)
def test_a_learning_rate_as_written(tmp_path, written, value):
    path = tmp_path / "c.yaml"
    path.write_text(MODEL + f"optimizer: {{name: Adam, lr: {written}}}\n")
    assert cfg.load(path).optimizer.lr == value
    assert cfg.load(path, [f"optimizer.lr={written}"]).optimizer.lr == value


def test_the_command_takes_1e_minus_3_from_the_file_and_from_set(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(MODEL + "optimizer: {name: SGD, lr: 1e-3}\ntrainer: {epochs: 1}\n")
    done = trainkit("train", path, "--set", "optimizer.lr=1e-4", "--print-config", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lr: 0.0001" in done.stdout
    checked = trainkit("check", path, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_quoted_numbers_stay_strings_and_python_tags_stay_refused(tmp_path):
    assert cfg.read_yaml("a: '1e-3'\nb: 1e\nc: 1_000") == {"a": "1e-3", "b": "1e", "c": 1000}
    path = tmp_path / "c.yaml"
    path.write_text(MODEL + "name: !!python/object/apply:os.getcwd []\n")
    done = trainkit("check", path, cwd=tmp_path)
    assert done.returncode == 2 and "not valid YAML" in done.stderr


def test_python_dash_m_trainkit_is_the_command(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "check", ROOT / "configs" / "regression.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "trainkit", "check", tmp_path / "missing.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert bad.returncode == 2 and "no such config file" in bad.stderr
