"""Every key a data kind needs is required when the config loads (a config error naming the key and the file, exit 2,
in ``trainkit check`` too); keys left null take the defaults their loader really uses, shown by --print-config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

MODEL = "model: {class_path: trainkit.nn.Linear, init_args: {in_features: 2, out_features: 1}}\n"
TRAINER = "trainer: {epochs: 1, batch_size: 4, verbose: 0}\n"


def trainkit(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def config(folder: Path, data: str) -> Path:
    path = folder / "c.yaml"
    path.write_text(MODEL + f"data: {data}\n" + TRAINER + "output_dir: runs\n")
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    rows = "\n".join(f"{i},{2 * i},{i % 2}" for i in range(8))
    (tmp_path / "d.csv").write_text("a,b,label\n" + rows + "\n")
    np.savez(tmp_path / "d.npz", x=np.ones((8, 2)), y=np.zeros((8, 1)), features=np.ones((8, 2)))
    return tmp_path


@pytest.mark.parametrize(
    "data, key, what",
    [
        ("{kind: csv, path: d.csv, inputs: [a, b]}", "targets", "the target columns, e.g. targets: label"),
        ("{kind: csv, path: d.csv, targets: label}", "inputs", "the input columns, e.g. inputs: [a, b]"),
        ("{kind: csv, inputs: [a, b], targets: label}", "path", "the .csv file, relative to the config's folder"),
        ("{kind: npz}", "path", "the .npz file, relative to the config's folder"),
        ("{kind: text}", "path", "the UTF-8 text file, relative to the config's folder"),
        ("{kind: class_path}", "class_path", "a Dataset class or a @dataset_factory function"),
    ],
)
def test_a_key_the_kind_needs_is_a_config_error_naming_it(folder, data, key, what):
    path = config(folder, data)
    result = trainkit("check", path, cwd=folder)
    assert result.returncode == 2, result.stderr
    kind = yaml.safe_load(data)["kind"]
    assert result.stderr.startswith(f"trainkit: config error: {path}: 'data.{key}' is required for data.kind {kind}: ")
    assert what in result.stderr and "NoneType" not in result.stderr
    assert not (folder / "runs").exists()


def test_a_csv_without_targets_is_refused_before_training(folder):
    # before: it trained into "'NoneType' object has no attribute 'shape'" (exit 1)
    path = config(folder, "{kind: csv, path: d.csv, inputs: [a, b]}")
    result = trainkit("train", path, cwd=folder)
    assert result.returncode == 2 and f"{path}: 'data.targets' is required for data.kind csv" in result.stderr
    assert not (folder / "runs").exists()


def test_a_csv_with_its_keys_trains(folder):
    done = trainkit("train", config(folder, "{kind: csv, path: d.csv, inputs: [a, b], targets: [label]}"), cwd=folder)
    assert done.returncode == 0, done.stderr


def test_npz_arrays_default_to_the_loaders_names_and_print_them(folder):
    path = config(folder, "{kind: npz, path: d.npz, targets: null}")
    printed = trainkit("train", path, "--print-config", cwd=folder)
    assert printed.returncode == 0, printed.stderr
    data = yaml.safe_load(printed.stdout)["data"]
    assert (data["inputs"], data["targets"]) == ("x", "y")
    assert trainkit("check", path, cwd=folder).returncode == 0
    named = trainkit("check", config(folder, "{kind: npz, path: d.npz, inputs: features}"), cwd=folder)
    assert named.returncode == 0, named.stderr


def test_the_reference_says_which_keys_each_kind_needs():
    from trainkit.cli import config as cfg

    page = cfg.reference()
    assert "`csv` requires `path`, `inputs`, `targets`" in page
    assert "`npz` requires `path` and defaults `inputs` (`x`), `targets` (`y`)" in page
