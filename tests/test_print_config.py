"""``trainkit train C --print-config > my.yaml && trainkit train my.yaml`` from anywhere: the printed config holds the
files it reads absolute (and says so at its top), keeps ``output_dir`` the working directory's, and loads again
wherever it is saved; the run folder's config.yaml reads the same files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from trainkit.cli import config as cfg

MODEL = """from trainkit import nn


class MLP(nn.Module):
    def __init__(self, n_in: int = 2):
        super().__init__()
        self.fc = nn.Linear(n_in, 1)

    def forward(self, x):
        return self.fc(x)
"""

QUIET = "from trainkit.callbacks.base import Callback\n\n\nclass Quiet(Callback):\n    pass\n"

CONFIG = """name: demo
output_dir: runs
model:
  class_path: ../code/mymodel.py:MLP
  init_args: {n_in: 2}
data:
  kind: npz
  path: ../data/points.npz
optimizer: {name: SGD, lr: 0.1}
trainer: {epochs: 1, batch_size: 8, verbose: 0}
callbacks:
  - name: EarlyStopping
    monitor: loss
  - class_path: ../code/quiet.py:Quiet
"""


def trainkit(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture
def project(tmp_path) -> Path:
    """A project whose config names a model file, a callback file and a data file in sibling folders."""
    root = tmp_path / "project"
    for folder in ("code", "data", "configs"):
        (root / folder).mkdir(parents=True)
    (root / "code" / "mymodel.py").write_text(MODEL)
    (root / "code" / "quiet.py").write_text(QUIET)
    rng = np.random.default_rng(0)
    np.savez(root / "data" / "points.npz", x=rng.normal(size=(16, 2)), y=rng.normal(size=(16, 1)))
    (root / "configs" / "demo.yaml").write_text(CONFIG)
    return root


def test_the_printed_config_trains_from_another_folder(project, tmp_path):
    printed = trainkit("train", "configs/demo.yaml", "--print-config", cwd=project)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[0].startswith("#") and "absolute" in lines[0] and "any folder" in lines[0]
    assert lines[1].startswith("#") and "output_dir" in lines[1] and "working directory" in lines[1]
    keys = yaml.safe_load(printed.stdout)
    assert keys["model"]["class_path"] == f"{project / 'code' / 'mymodel.py'}:MLP"
    assert keys["data"]["path"] == str(project / "data" / "points.npz")
    assert keys["callbacks"][1] == {"class_path": f"{project / 'code' / 'quiet.py'}:Quiet"}
    assert keys["output_dir"] == "runs"  # the working directory's, as given

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "my.yaml").write_text(printed.stdout)
    work = tmp_path / "work"
    work.mkdir()
    run = trainkit("train", elsewhere / "my.yaml", cwd=work)
    assert run.returncode == 0, run.stderr
    assert (work / "runs" / "demo" / "version_0" / "checkpoints" / "last.npz").is_file()
    assert not (project / "runs").exists() and not (elsewhere / "runs").exists()


def test_before_a_relative_class_path_was_printed_unchanged_and_failed_elsewhere(project, tmp_path):
    # what the old output held: the same config with its paths as written, saved in another folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "my.yaml").write_text(CONFIG)
    old = trainkit("check", elsewhere / "my.yaml", cwd=elsewhere)
    assert old.returncode == 2 and "'data.path': no such file" in old.stderr  # read from the new file's folder
    printed = trainkit("train", project / "configs" / "demo.yaml", "--print-config", cwd=elsewhere)
    (elsewhere / "my.yaml").write_text(printed.stdout)
    now = trainkit("check", elsewhere / "my.yaml", cwd=elsewhere)
    assert now.returncode == 0, now.stderr
    assert "OK (MLP, 3 parameters, 16 samples" in now.stdout


def test_printing_a_printed_config_gives_it_back(project, tmp_path):
    first = trainkit("train", "configs/demo.yaml", "--print-config", cwd=project).stdout
    (tmp_path / "again.yaml").write_text(first)
    second = trainkit("train", tmp_path / "again.yaml", "--print-config", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first
    assert cfg.saved_form(cfg.load(tmp_path / "again.yaml")) == cfg.saved_form(
        cfg.portable(cfg.load(project / "configs" / "demo.yaml"))
    )


def test_an_absolute_output_dir_stays_and_a_dotted_class_path_is_left_to_python(project):
    config = project / "configs" / "demo.yaml"
    config.write_text(CONFIG.replace("../code/mymodel.py:MLP", "trainkit.nn.Linear").replace("{n_in: 2}", "{}"))
    printed = trainkit("train", config, "--print-config", "--set", f"output_dir={project / 'out'}", cwd=project)
    keys = yaml.safe_load(printed.stdout)
    assert keys["model"]["class_path"] == "trainkit.nn.Linear"
    assert keys["output_dir"] == str(project / "out")


def test_the_saved_run_config_reads_the_same_files_from_any_folder(project, tmp_path):
    done = trainkit("train", "configs/demo.yaml", cwd=project)
    assert done.returncode == 0, done.stderr
    saved = project / "runs" / "demo" / "version_0" / "config.yaml"
    text = saved.read_text()
    assert text.startswith("# The files this config reads")
    keys = yaml.safe_load(text)
    assert keys["model"]["class_path"] == f"{project / 'code' / 'mymodel.py'}:MLP"
    assert keys["data"]["path"] == str(project / "data" / "points.npz")
    check = trainkit("check", saved, cwd=tmp_path)
    assert check.returncode == 0, check.stderr


def test_a_rerun_of_the_saved_config_writes_under_the_folder_it_is_run_from(project, tmp_path):
    assert trainkit("train", "configs/demo.yaml", cwd=project).returncode == 0
    saved = project / "runs" / "demo" / "version_0" / "config.yaml"
    assert yaml.safe_load(saved.read_text())["output_dir"] == "runs"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rerun = trainkit("train", saved, cwd=elsewhere)
    assert rerun.returncode == 0, rerun.stderr
    assert (elsewhere / "runs" / "demo" / "version_0" / "checkpoints" / "last.npz").is_file()
    assert not (project / "runs" / "demo" / "version_1").exists()


def test_the_reference_says_where_paths_are_resolved():
    page = cfg.reference()
    assert "## Paths" in page
    assert "relative to the config's folder" in page and "relative to the working directory" in page
    assert "--print-config" in page
