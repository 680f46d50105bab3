"""Configs built to hurt, and plain mistakes in a config's bytes: each is a config error (exit 2) naming the file,
found before anything large is allocated; none is a traceback, a RecursionError or a process that never ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.cli import config as cfg
from trainkit.cli.settings import MAX_YAML_DEPTH, read_yaml

ROOT = Path(__file__).resolve().parent.parent
GOOD = (
    (ROOT / "configs" / "regression.yaml")
    .read_text()
    .replace("../examples/regression/model.py", str(ROOT / "examples" / "regression" / "model.py"))
)


def _laughs(levels: int) -> str:
    """Anchors that multiply by nine per level: 9**levels values from a few hundred bytes."""
    lines = ["model:", "  class_path: trainkit.nn.Identity", "  init_args:", "    l0: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    for i in range(1, levels + 1):
        lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


CASES = {
    "aliases": (_laughs(9).encode(), "anchors and aliases expand to more than"),
    "duplicate": ((GOOD + "\nname: again\nname: twice\n").encode(), "the key 'name' appears twice"),
    "deep": (("model: " + "[" * 10_000 + "]" * 10_000 + "\n").encode(), "nested deeper than"),
    "utf16": (GOOD.encode("utf-16"), "not UTF-8 text"),
    "latin1": ((GOOD + "\n# r\xe9glage\n").encode("latin-1"), "not UTF-8 text"),
    "huge": ((GOOD + "\n" + "# padding\n" * 200_000).encode(), "too large for a config"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_command_refuses_it_as_a_config_error(tmp_path, name):
    data, words = CASES[name]
    path = tmp_path / "bad.yaml"
    path.write_bytes(data)
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "train", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and words in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_check_refuses_the_same(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(CASES["duplicate"][0])
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "check", str(path)], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "appears twice" in result.stderr


def test_what_real_configs_use_still_reads():
    text = "base: &b {lr: 0.1, momentum: 0.9}\nopt: {<<: *b, lr: 0.01}\nlist: &l [1, 2]\nagain: *l\n"
    assert read_yaml(text) == {
        "base": {"lr": 0.1, "momentum": 0.9},
        "opt": {"lr": 0.01, "momentum": 0.9},
        "list": [1, 2],
        "again": [1, 2],
    }
    assert read_yaml("a: " + "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1)) is not None
    assert read_yaml("# only a comment\n") is None


def test_a_utf8_file_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(GOOD.encode("utf-8-sig"))
    assert cfg.load(path).name == "regression"


def test_set_values_are_held_to_the_same_rules(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    with pytest.raises(cfg.ConfigError, match="appears twice"):
        cfg.load(path, ["model.init_args={a: 1, a: 2}"])
