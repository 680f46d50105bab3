"""Callbacks in a config take their arguments inline or under ``init_args`` (as ``model`` and ``data`` do); an argument
given both ways, misspelt or missing is a config error naming it; docs/config.md documents every built-in callback's
arguments, read off its signature and docstring."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainkit.cli import config as cfg
from trainkit.cli.arguments import arguments, docstring_arguments
from trainkit.registry import CALLBACKS

BASE = """name: cb
model: {class_path: trainkit.nn.Linear, init_args: {in_features: 1, out_features: 1}}
data: {kind: regression_curve, n: 20}
trainer: {epochs: 2, batch_size: 10, verbose: 0}
"""

MARKER = """from pathlib import Path

from trainkit.callbacks.base import Callback


class Marker(Callback):
    def __init__(self, path: str, word: str = "hello"):
        super().__init__()
        self.path, self.word = path, word

    def on_train_end(self, logs=None):
        Path(self.path).write_text(self.word)
"""


def trainkit(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def config(tmp_path: Path, callbacks: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(BASE + "callbacks:\n" + callbacks)
    return path


def test_init_args_on_a_named_callback_before_failed_and_now_reach_it(tmp_path):
    path = config(tmp_path, "  - name: EarlyStopping\n    init_args: {patience: 3, monitor: loss}\n")
    printed = trainkit("train", path, "--print-config", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr  # before: unexpected keyword argument 'init_args' (exit 2)
    assert yaml.safe_load(printed.stdout)["callbacks"] == [{"name": "EarlyStopping", "patience": 3, "monitor": "loss"}]
    check = trainkit("check", path, cwd=tmp_path)
    assert check.returncode == 0, check.stderr


def test_init_args_on_your_own_callback_reach_its_class(tmp_path):
    (tmp_path / "marker.py").write_text(MARKER)
    out = tmp_path / "said.txt"
    path = config(tmp_path, f"  - class_path: marker.py:Marker\n    init_args: {{path: '{out}', word: hi}}\n")
    done = trainkit("train", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "hi"
    inline = config(tmp_path, f"  - class_path: marker.py:Marker\n    path: '{out}'\n")
    assert trainkit("train", inline, cwd=tmp_path).returncode == 0
    assert out.read_text() == "hello"


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "  - name: EarlyStopping\n    patience: 2\n    init_args: {patience: 3}\n",
            "'callbacks[0].init_args.patience' is given twice, as callbacks[0].patience too",
        ),
        (
            "  - {name: EarlyStopping, patiense: 2}\n",
            "'callbacks[0].patiense' is not an argument of EarlyStopping; did you mean 'patience'?",
        ),
        ("  - {name: CSVLogger}\n", "'callbacks[0].filename' is required by CSVLogger"),
        ("  - {name: EarlyStopping, init_args: 3}\n", "'callbacks[0].init_args' must be a mapping"),
        ("  - {name: EarlyStopping, class_path: x.py:Y}\n", "'callbacks[0].class_path' and name are both given"),
    ],
)
def test_a_wrong_callback_argument_is_a_config_error_naming_it(tmp_path, entry, message):
    path = config(tmp_path, entry)
    result = trainkit("check", path, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{path}: {message}" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_every_built_in_callback_and_argument_is_in_the_reference():
    page = cfg.reference()  # docs/config.md is this page (tests/test_config_schema.py keeps it in sync)
    for name in CALLBACKS:
        assert f"### `{name}`" in page, name
        section = page.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        for p in inspect.signature(CALLBACKS.get(name)).parameters.values():
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                assert f"| `{p.name}` |" in section, (name, p.name)
    early = page.split("### `EarlyStopping`", 1)[1].split("\n### ", 1)[0]
    assert "| `patience` | int | `0` |" in early


@pytest.mark.parametrize(
    "doc, expected",
    [
        (
            "Stops.\n\nArgs:\n    patience (int): epochs to wait. More words.\n    mode: 'min' or\n        'max'.\n\n"
            "Returns:\n    nothing: really.\n",
            {"patience": "epochs to wait.", "mode": "'min' or 'max'."},
        ),
        (
            "Stops.\n\nParameters\n----------\npatience : int\n    epochs to wait.\nmode : str\n    'min'.\n\n"
            "Returns\n-------\nnone : None\n    nothing.\n",
            {"patience": "epochs to wait.", "mode": "'min'."},
        ),
        (
            "Stops.\n\n:param patience: epochs to wait.\n:param int mode: 'min'.\n",
            {"patience": "epochs to wait.", "mode": "'min'."},
        ),
        ("Stops after ``patience`` epochs, e.g. 3.", {}),
        ("Args:\n", {}),
        (None, {}),
    ],
)
def test_argument_lines_come_from_any_usual_docstring_layout(doc, expected):
    assert docstring_arguments(doc) == expected


def test_a_docstring_naming_arguments_the_signature_lacks_changes_nothing_but_the_meaning():
    class Odd:
        """Odd.

        Args:
            gone: an argument that was removed.
            kept: kept one.
        """

        def __init__(self, kept: int = 1, new: str = "x", *rest, **more): ...

    found = arguments(Odd)
    assert [(a.name, a.default, a.help) for a in found] == [("kept", 1, "kept one."), ("new", "x", "")]
