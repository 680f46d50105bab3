"""Held-out data: data.test_split keeps the last share of the samples out of training and validation, and
``trainkit evaluate`` scores a named split (test by default when there is one) and names it in what it prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.cli import config as cfg
from trainkit.cli import run as run_module

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def trainkit(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_the_test_share_is_never_trained_or_validated_on():
    run = run_module.build(cfg.load(CONFIG, ["data.test_split=0.2", "data.validation_split=0.25"]))
    assert len(run.dataset) == 80 and len(run.test) == 20
    assert (len(run.split("train")), len(run.split("val")), len(run.split("all"))) == (60, 20, 100)
    assert run.default_split() == "test"
    train_x = {float(x) for x, _ in run.split("train")} | {float(x) for x, _ in run.split("val")}
    assert not train_x & {float(x) for x, _ in run.test}


def test_splits_that_leave_nothing_to_train_on_are_refused():
    with pytest.raises(cfg.ConfigError, match="'data.test_split' and validation_split"):
        cfg.load(CONFIG, ["data.test_split=0.5", "data.validation_split=0.5"])


def test_evaluate_names_the_split_it_scores(tmp_path):
    sets = ["--set", "data.test_split=0.2", "--set", "trainer.epochs=3", "--set", "callbacks=[]"]
    done = trainkit("train", CONFIG, *sets, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ckpt = tmp_path / "runs" / "regression" / "version_0" / "checkpoints" / "last.npz"
    scored = trainkit("evaluate", CONFIG, "--checkpoint", ckpt, *sets, cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout.startswith("test (20 samples): loss ")
    whole = trainkit("evaluate", CONFIG, "--checkpoint", ckpt, "--split", "all", *sets, cwd=tmp_path)
    assert whole.stdout.startswith("all (100 samples): loss ")
    missing = trainkit("evaluate", CONFIG, "--checkpoint", ckpt, "--split", "val", *sets, cwd=tmp_path)
    assert missing.returncode == 2 and "--split val: the config holds out no validation split" in missing.stderr
