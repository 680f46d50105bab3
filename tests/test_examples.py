"""The shipped Python example runs and reaches the target it advertises."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "regression" / "train.py"


def test_regression_example_trains_below_the_target(capsys):
    history = runpy.run_path(str(EXAMPLE))["main"]()
    assert history["loss"][-1] < 0.01
    assert any(k.startswith("grad_norm/") for k in history) and any(k.startswith("act_grad_norm/") for k in history)
    assert "final train MSE" in capsys.readouterr().out
