"""``trainkit train`` whose first step fails names the layer, the shapes and the fix in one line, as ``trainkit check``
does, instead of the bare ``mat1 and mat2 shapes cannot be multiplied``; a failure one batch does not reproduce keeps
its own message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"

LATE = """
from trainkit import nn


class Late(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1, 1)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("the third batch went wrong")
        return self.linear(x)
"""


def trainkit_cmd(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


def test_train_names_the_layer_as_check_does(tmp_path):
    wrong = ["--set", "model.init_args.n_feature=3", "--set", f"output_dir={tmp_path}"]
    train = trainkit_cmd("train", CONFIG, *wrong)
    check = trainkit_cmd("check", CONFIG, *wrong)
    assert check.returncode == 2
    assert train.returncode == 1
    # before: "trainkit: error: RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x1 and 3x10)"
    line = train.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"trainkit: error: {CONFIG}: forward (train mode) failed in layer 'hidden' (Linear)")
    assert "mat1 and mat2 shapes cannot be multiplied" in line
    assert "hint: the layer takes 3 features and the batch has 1" in line
    assert line.removeprefix("trainkit: error: ") == check.stderr.strip().removeprefix("trainkit: config error: ")
    assert not (tmp_path / "regression").exists()  # no epoch ended: no run folder left behind


def test_a_later_failure_keeps_its_own_message(tmp_path):
    (tmp_path / "late.py").write_text(LATE)
    config = tmp_path / "late.yaml"
    config.write_text(
        CONFIG.read_text()
        .replace("../examples/regression/model.py:Net", "late.py:Late")
        .replace("init_args: {n_feature: 1, n_hidden: 10, n_output: 1}", "init_args: {}")
    )
    result = trainkit_cmd("train", config, "--set", f"output_dir={tmp_path}", "--set", "trainer.epochs=1")
    assert result.returncode == 1
    assert result.stderr.strip() == "trainkit: error: RuntimeError: the third batch went wrong"
