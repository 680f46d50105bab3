"""The benchmark suite runs and its implementations agree (no timing is asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
suite = pytest.importorskip("benchmarks.suite")


@pytest.mark.parametrize("name", ["mlp_step", "tiny_ops", "regression_fit", "conv_big"])
def test_implementations_agree(name):
    work = next(w for w in suite.WORKLOADS if w.name == name)
    work.check("cpu")


def test_timing_reports_every_implementation():
    work = next(w for w in suite.WORKLOADS if w.name == "tiny_ops")
    stats = suite.summarize(suite.time_workload(work, "cpu", rounds=1), work)
    assert set(stats) == set(suite.IMPLS) and all(v[0] > 0 for v in stats.values())
