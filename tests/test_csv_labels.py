"""Label columns of class names (cat, dog) through the command: training numbers them in sorted order and keeps the
names in the run folder's classes.json; evaluate and a resume number a test file's names the same way; a name the
run never saw is an error naming it, the file and the line; a config without data.targets says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit.cli.config import ConfigError, load
from trainkit.cli.run import build
from trainkit.data.files import classes_of, load_csv, load_npz
from trainkit.training import checkpoint

MODEL = """
from trainkit import nn


class Net(nn.Module):
    def __init__(self, n_in=2, n_out=3):
        super().__init__()
        self.hidden = nn.Linear(n_in, 8)
        self.out = nn.Linear(8, n_out)

    def forward(self, x):
        return self.out(self.hidden(x).relu())
"""

CONFIG = """
name: pets
output_dir: runs
model:
  class_path: model.py:Net
data:
  kind: csv
  path: pets.csv
  inputs: [a, b]
  targets: label
loss: cross_entropy
trainer:
  epochs: 2
  batch_size: 8
  seed: 0
"""

NAMES = ("dog", "cat", "bird")  # first seen: dog; sorted: bird, cat, dog


def trainkit_cmd(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def write_csv(path: Path, labels, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    rows = [f"{rng.normal() + i % 3:.4f},{rng.normal():.4f},{label}" for i, label in enumerate(labels)]
    path.write_text("a,b,label\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pets")
    (folder / "model.py").write_text(MODEL)
    (folder / "pets.yaml").write_text(CONFIG)
    write_csv(folder / "pets.csv", [NAMES[i % 3] for i in range(30)])
    result = trainkit_cmd("train", "pets.yaml", cwd=folder)
    return folder, result


def test_training_on_class_names_numbers_them_in_sorted_order_and_saves_them(trained):
    folder, result = trained
    # before: "pets.csv, line 2, column 'label': 'dog' is not a number", exit 1
    assert result.returncode == 0, result.stderr
    run = folder / "runs" / "pets" / "version_0"
    assert json.loads((run / "classes.json").read_text()) == {"classes": ["bird", "cat", "dog"]}


def test_evaluate_numbers_a_test_file_as_the_run_did(trained):
    folder, _ = trained
    write_csv(folder / "dogs.csv", ["dog"] * 5, seed=1)  # one name only: alone it would be class 0
    run = folder / "runs" / "pets" / "version_0"
    result = trainkit_cmd("evaluate", "pets.yaml", "--checkpoint", run, "--set", "data.path=dogs.csv", cwd=folder)
    assert result.returncode == 0, result.stderr
    loss = float(result.stdout.split("loss ")[1].split(",")[0])

    import importlib.util

    spec = importlib.util.spec_from_file_location("pets_model", folder / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Net()
    model.load_state_dict(checkpoint.load(run / "checkpoints" / "last.npz")["model"])
    x = load_csv(folder / "dogs.csv", ["a", "b"], "label", classes=["bird", "cat", "dog"]).tensors[0]
    with trainkit.no_grad():
        expected = trainkit.nn.functional.cross_entropy(model(x), trainkit.full((5,), 2)).item()  # dog is class 2
    assert loss == pytest.approx(expected, rel=1e-5)


def test_a_name_the_run_never_saw_names_the_label_file_and_line(trained):
    folder, _ = trained
    write_csv(folder / "zoo.csv", ["cat", "dog", "fish", "cat"])
    run = folder / "runs" / "pets" / "version_0"
    result = trainkit_cmd("evaluate", "pets.yaml", "--checkpoint", run, "--set", "data.path=zoo.csv", cwd=folder)
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "\n" not in line
    assert f"{folder / 'zoo.csv'}, line 4, column 'label': label 'fish' is not one of the 3 known classes" in line
    assert "'bird', 'cat', 'dog'" in line


def test_a_resume_keeps_the_run_s_numbering(trained):
    folder, _ = trained
    run = folder / "runs" / "pets" / "version_0"
    write_csv(folder / "more.csv", ["dog", "cat"] * 10, seed=2)  # no bird: alone, cat and dog would be 0 and 1
    result = trainkit_cmd(
        "train", "pets.yaml", "--resume", run, "--set", "trainer.epochs=3", "--set", "data.path=more.csv", cwd=folder
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((run / "classes.json").read_text()) == {"classes": ["bird", "cat", "dog"]}


def test_the_loader_numbers_names_in_sorted_order_whatever_their_order_in_the_file(tmp_path):
    one = load_csv(write_csv(tmp_path / "one.csv", ["dog", "cat", "bird", "cat"]), ["a", "b"], "label")
    two = load_csv(write_csv(tmp_path / "two.csv", ["bird", "cat", "dog", "cat"]), ["a", "b"], "label")
    assert one.classes == two.classes == ["bird", "cat", "dog"]
    assert one.tensors[1].tolist() == [2, 1, 0, 1] and one.tensors[1].dtype == trainkit.int64
    assert one.class_to_idx == {"bird": 0, "cat": 1, "dog": 2}
    assert classes_of(trainkit.utils.data.Subset(one, [0])) == ["bird", "cat", "dog"]
    with pytest.raises(ValueError, match=r"line 2, column 'label': 'bird' is not a number; .*classification"):
        load_csv(tmp_path / "two.csv", ["a", "b"], "label", task="regression")
    with pytest.raises(ValueError, match=r"line 4, column 'label': no label"):
        load_csv(write_csv(tmp_path / "gap.csv", ["cat", "dog", " "]), ["a", "b"], "label")
    np.savez(tmp_path / "d.npz", x=np.zeros((3, 2)), y=np.array(["dog", "cat", "dog"]))
    data = load_npz(tmp_path / "d.npz")
    assert data.tensors[1].tolist() == [1, 0, 1] and data.classes == ["cat", "dog"]
    with pytest.raises(ValueError, match=r"d.npz, array 'y', row 0: label 'dog' is not one of the 2 known"):
        load_npz(tmp_path / "d.npz", classes=["bird", "cat"])


def test_a_config_without_targets_names_the_key_and_the_file(trained, tmp_path):
    folder, _ = trained
    config = load(folder / "pets.yaml")
    config.data.targets = None  # past the schema's own check: the loader still refuses, naming the key
    with pytest.raises(ConfigError) as err:
        build(config)
    message = str(err.value)
    # before: AttributeError: 'NoneType' object has no attribute 'shape' at the first step
    assert "pets.yaml: 'data.targets' is not set" in message
    assert str(folder / "pets.csv") in message and "'a', 'b', 'label'" in message
