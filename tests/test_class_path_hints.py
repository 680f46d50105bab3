"""A ``class_path`` that does not load says what to write instead: the nearest names of that file or module (in any
case), the ``file.py:Class`` form for a module that is a file beside the config, where Python looked for one that is
neither, and the nearest file for a missing one; each is one config error line naming the file and the key (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.registry import ClassPathError, resolve_class

MODEL = """from trainkit import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1, 1)

    def forward(self, x):
        return self.fc(x)
"""


def check(folder: Path, class_path: str) -> subprocess.CompletedProcess:
    """``trainkit check`` of a config naming ``class_path``, beside mymodel.py, run from another folder (``python -m``
    puts the working directory on the Python path, the ``trainkit`` script does not: neither is the config's)."""
    (folder / "mymodel.py").write_text(MODEL)
    config = folder / "c.yaml"
    config.write_text(f"model: {{class_path: '{class_path}'}}\ntrainer: {{verbose: 0}}\n")
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "check", str(config)],
        capture_output=True,
        text=True,
        cwd=folder.parent,
        timeout=300,
    )


def one_config_error(result: subprocess.CompletedProcess, folder: Path) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trainkit: config error: {folder / 'c.yaml'}: 'model.class_path'")
    return lines[0]


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def test_the_right_spelling_loads(project):
    assert check(project, "mymodel.py:MLP").returncode == 0


def test_a_class_name_in_another_case_suggests_the_one_in_the_file(project):
    # before: "module '_trainkit_user_mymodel' has no attribute 'Mlp'", no suggestion
    line = one_config_error(check(project, "mymodel.py:Mlp"), project)
    assert line.endswith("mymodel.py has no 'Mlp'; did you mean 'mymodel.py:MLP'?")
    assert "_trainkit_user_" not in line


def test_a_name_nothing_is_near_lists_the_classes_the_file_defines(project):
    line = one_config_error(check(project, "mymodel.py:Transformer"), project)
    assert line.endswith("mymodel.py has no 'Transformer' (it defines MLP)")


def test_a_module_that_is_a_file_beside_the_config_is_told_the_file_form(project):
    # before: a bare "No module named 'mymodel'"
    line = one_config_error(check(project, "mymodel.MLP"), project)
    assert "No module named 'mymodel'; mymodel.py beside the config is a file: write 'mymodel.py:MLP'" in line


def test_a_module_found_nowhere_says_where_it_was_looked_for(project):
    line = one_config_error(check(project, "nosuchmodule_xyz.MLP"), project)
    assert "No module named 'nosuchmodule_xyz' in the Python path (" in line
    assert f"nor is nosuchmodule_xyz.py a file beside the config in {project.resolve()}" in line
    assert "file.py:Class" in line


def test_a_misspelt_file_suggests_the_nearest_python_file(project):
    line = one_config_error(check(project, "mymodl.py:MLP"), project)
    assert line.endswith(f"no file {project.resolve() / 'mymodl.py'}; did you mean 'mymodel.py:MLP'?")


def test_a_misspelt_name_in_a_package_suggests_the_nearest(project):
    line = one_config_error(check(project, "trainkit.nn.linear"), project)
    assert line.endswith("module 'trainkit.nn' has no attribute 'linear'; did you mean 'trainkit.nn.Linear'?")


def test_an_import_failing_inside_the_module_keeps_its_own_message(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "__init__.py").write_text("import not_installed_anywhere_xyz\n")
    with pytest.raises(ClassPathError, match=r"^No module named 'not_installed_anywhere_xyz'$"):
        sys.path.insert(0, str(tmp_path))
        try:
            resolve_class("broken.Net", tmp_path)
        finally:
            sys.path.remove(str(tmp_path))
