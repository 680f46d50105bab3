"""The benchmark suite runs and its implementations agree (no timing is asserted)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")
suite = pytest.importorskip("benchmarks.suite")
sequence_steps = pytest.importorskip("benchmarks.sequence_steps")


@pytest.mark.parametrize("name", ["mlp_step", "tiny_ops", "regression_fit", "conv_big", "gpt_step", "lstm_step"])
def test_implementations_agree(name):
    work = next(w for w in suite.WORKLOADS if w.name == name)
    work.check("cpu")


@pytest.mark.parametrize("name", ["gpt_step", "lstm_step"])
def test_sequence_workloads_build_and_step_in_every_implementation(name):
    """The full-size workload builds in each implementation, and its first step starts near the loss of a uniform
    guess (the check compares the steps that follow with torch's)."""
    work = next(w for w in suite.WORKLOADS if w.name == name)
    vocabulary = {"gpt_step": sequence_steps.GPT_VOCAB, "lstm_step": sequence_steps.LSTM_VOCAB}[name]
    for impl in suite.IMPLS:
        loss = sequence_steps.value(work.build(impl, "cpu")())
        assert abs(loss - math.log(vocabulary)) < 0.5, (impl, loss)


def test_the_compiled_lstm_step_replays_with_eager_losses():
    """W7 keeps its hidden state in a list of its closure and clips the gradients: compiled, it is replayed (after
    a second capture, once the state holds the region's own outputs) and gives eager mode's losses."""
    eager = sequence_steps.lstm_training("trainkit", "cpu", steps=5, batch=4)[0]
    compiled = sequence_steps.lstm_training("compiled", "cpu", steps=5, batch=4)[0]
    assert [eager().item() for _ in range(5)] == [compiled().item() for _ in range(5)]
    assert compiled.counts == {"captures": 2, "replays": 3, "eager": 0}, compiled.fallbacks


def test_the_products_of_the_mlp_step_are_recorded_and_replayed():
    products = pytest.importorskip("benchmarks.products")
    work = next(w for w in suite.WORKLOADS if w.name == "mlp_step")
    log = products.record(work)
    # forward: 3 layers; backward: each layer's weight gradient, and the input gradient of the two upper layers
    assert len(log) == 8 and {kind for kind, _, _ in log} == {"matmul"}
    shapes = sorted(tuple(layout[0] for layout in layouts) for _, _, layouts in log)
    assert ((256, 784), (784, 512)) in shapes and ((512, 256), (256, 784)) in shapes
    for lib in ("numpy", "torch"):
        products.products(log, lib)()


def test_timing_reports_every_implementation():
    work = next(w for w in suite.WORKLOADS if w.name == "tiny_ops")
    stats = suite.summarize(suite.time_workload(work, "cpu", rounds=1), work)
    assert set(stats) == set(suite.IMPLS) and all(v[0] > 0 for v in stats.values())


def test_a_new_run_keeps_the_sections_below_it():
    from benchmarks.__main__ import with_run

    old = "# Benchmarks\n\n| old run |\n\n## Data-parallel W1 over MPI\nddp\n\n## Targets\nnotes\n"
    assert with_run("# Benchmarks\n\n| new run |\n", old) == (
        "# Benchmarks\n\n| new run |\n\n## Data-parallel W1 over MPI\nddp\n\n## Targets\nnotes\n"
    )
    assert with_run("# Benchmarks\n", "") == "# Benchmarks\n"


@pytest.mark.parametrize("after", ["", "\n## Targets\nnotes\n"])
def test_the_data_parallel_section_is_replaced_where_it_stands(after):
    from benchmarks.ddp_step import SECTION, with_section

    text = f"# Benchmarks\n\n| run |\n\n{SECTION}\nold\n" + after
    assert with_section(text, f"{SECTION}\nnew\n") == f"# Benchmarks\n\n| run |\n\n{SECTION}\nnew\n" + after
    assert with_section("# Benchmarks\n", f"{SECTION}\nnew\n") == f"# Benchmarks\n\n{SECTION}\nnew\n"
