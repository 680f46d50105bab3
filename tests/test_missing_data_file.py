"""A data file that is not there is a config error naming the key that named it and the file (exit 2), in
``trainkit train``, ``evaluate`` and ``check``, instead of a ``FileNotFoundError`` with exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = "class_path: " + str(ROOT / "examples" / "regression" / "model.py") + ":Net"

CONFIG = f"""
name: files
output_dir: runs
model:
  {MODEL}
  init_args: {{n_feature: 1, n_hidden: 4, n_output: 1}}
data:
  kind: csv
  path: data/points.csv
  inputs: x
  targets: y
loss: mse
trainer:
  epochs: 1
  batch_size: 4
"""

OWN_DATA = """
import numpy as np

import trainkit
from trainkit.data import TensorDataset
from trainkit.registry import dataset_factory


@dataset_factory
def points(file):
    table = np.loadtxt(file, delimiter=",", skiprows=1, dtype=np.float32).reshape(-1, 2)
    return TensorDataset(trainkit.from_numpy(table[:, :1].copy()), trainkit.from_numpy(table[:, 1:].copy()))
"""


def run_all(commands, cwd) -> list[subprocess.CompletedProcess]:
    """The ``trainkit`` commands, side by side."""
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "trainkit", *map(str, c)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        for c in commands
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "files.yaml").write_text(CONFIG)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "weights.npz", unused=np.zeros(1))  # never read: the data fails first
    return tmp_path


def test_train_evaluate_and_check_name_data_path_and_the_file(folder):
    missing = folder / "data" / "points.csv"
    commands = [
        ("train", "files.yaml"),
        ("check", "files.yaml"),
        ("evaluate", "files.yaml", "--checkpoint", folder / "data" / "weights.npz"),
        ("train", "files.yaml", "--set", "data.kind=npz", "--set", "data.path=data/points.npz"),
        ("check", "files.yaml", "--set", "data.path=data"),
    ]
    train, check, evaluate, npz, directory = run_all(commands, folder)
    # before: "trainkit: error: FileNotFoundError: [Errno 2] No such file or directory: '.../points.csv'", exit 1
    for result in (train, check, evaluate):
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == f"trainkit: config error: files.yaml: 'data.path': no such file: {missing}"
    assert npz.returncode == 2
    assert npz.stderr.strip().endswith(f"'data.path': no such file: {folder / 'data' / 'points.npz'}")
    assert directory.returncode == 2
    assert directory.stderr.strip().endswith(f"'data.path': a folder, not a file: {folder / 'data'}")
    assert not (folder / "runs").exists()


def test_a_dataset_of_one_s_own_names_the_init_args_key(folder):
    (folder / "own.py").write_text(OWN_DATA)
    config = folder / "own.yaml"
    config.write_text(
        CONFIG.replace(
            "  kind: csv\n  path: data/points.csv\n  inputs: x\n  targets: y\n",
            "  kind: class_path\n  class_path: own.py:points\n  init_args: {file: data/absent.csv}\n",
        )
    )
    (result,) = run_all([("check", "own.yaml")], folder)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"trainkit: config error: own.yaml: 'data.init_args.file': no such file: {folder / 'data' / 'absent.csv'}"
    )
