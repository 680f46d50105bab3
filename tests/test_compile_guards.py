"""trainkit.compile's guards and fallbacks: each change of what a plan assumed captures again or runs eagerly, as
stated, and never gives other numbers than eager mode."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.compiler import CompileError


def _model():
    trainkit.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def _same(a, b):
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_shape_and_dtype_changes_capture_a_plan_each():
    model = _model()
    compiled = trainkit.compile(model)
    for shape in [(5, 4), (5, 4), (7, 4), (7, 4), (5, 4)]:
        x = trainkit.randn(*shape)
        _same(compiled(x), model(x))
    model.double()
    x = trainkit.randn(5, 4, dtype=trainkit.float64)
    out = compiled(x)
    assert out.dtype == trainkit.float64
    _same(out, model(x))
    counts = compiled.compiled.counts
    assert counts["captures"] == 3 and counts["replays"] == 3, compiled.compiled.fallbacks
    model.float()[0].weight = nn.Parameter(trainkit.randn(8, 4, dtype=trainkit.float64))
    with pytest.raises(RuntimeError):  # float32 input, float64 weight: eager mode's own error
        compiled(trainkit.randn(5, 4))
    assert any("Linear.weight was replaced" in f for f in compiled.compiled.fallbacks)


def test_train_and_eval_each_get_their_plan():
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x)
    model.eval()
    _same(compiled(x), model(x))
    assert any("training is now False" in f for f in compiled.compiled.fallbacks)
    _same(compiled(x), model(x))
    model.train()
    compiled(x)
    assert compiled.compiled.counts["captures"] == 3


def test_no_grad_gets_its_own_plan_without_a_graph():
    model = _model().eval()
    compiled = trainkit.compile(model)
    x = trainkit.randn(3, 4)
    assert compiled(x).requires_grad
    with trainkit.no_grad():
        out = compiled(x)
        out = compiled(x)
    assert not out.requires_grad and out.grad_fn is None
    assert compiled.compiled.counts == {"captures": 2, "replays": 1, "eager": 0}


def test_a_hook_added_after_capture_runs_eagerly_and_is_called():
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x)
    seen = []
    model[3].register_forward_hook(lambda m, args, out: seen.append(out.shape))
    compiled(x)
    compiled(x)
    assert len(seen) == 2
    assert any("hook" in f for f in compiled.compiled.fallbacks)


def test_a_gradient_hook_on_a_parameter_is_honoured():
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x).sum().backward()
    calls = []
    model[0].weight.register_hook(lambda g: calls.append(1))
    compiled(x).sum().backward()
    assert calls == [1]


def test_a_replaced_parameter_is_used():
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x)
    model[3].weight = nn.Parameter(trainkit.zeros(2, 8))
    model[3].bias = nn.Parameter(trainkit.ones(2))
    np.testing.assert_array_equal(compiled(x).detach().numpy(), np.ones((6, 2), np.float32))
    assert any("was replaced" in f for f in compiled.compiled.fallbacks)


def test_inputs_changed_in_place_between_calls_are_read_anew():
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x)
    with trainkit.no_grad():
        x.mul_(3)
        model[0].weight.add_(1)
    _same(compiled(x), model(x))


def test_an_input_changed_in_place_before_backward_is_refused_as_eagerly(torch):
    model = _model()
    compiled = trainkit.compile(model)
    compiled(trainkit.randn(6, 4))
    for net in (model, compiled):
        x = trainkit.randn(6, 4)
        out = net(x)
        with trainkit.no_grad():
            model[3].weight.add_(1)  # saved (through its transpose) for the gradient of the hidden activations
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_data_dependent_python_runs_eagerly_and_fullgraph_names_it():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * 3

    compiled = trainkit.compile(f)
    for sign in (1, -1, 1, -1):
        x = trainkit.ones(3) * sign
        _same(compiled(x), f(x))
    assert compiled.counts["replays"] == 0
    assert "bool(tensor) reads a value inside the region" in compiled.fallbacks[0]
    with pytest.raises(CompileError, match=r"bool\(tensor\) reads a value"):
        trainkit.compile(f, fullgraph=True)(trainkit.ones(3))
    with pytest.raises(CompileError, match=r"tensor.item\(\) reads a value"):
        trainkit.compile(lambda x: x * x.sum().item(), fullgraph=True)(trainkit.ones(3))


def test_dropout_runs_eagerly_in_training_and_is_replayed_in_eval():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    compiled = trainkit.compile(model)
    x = trainkit.ones(8, 4)
    trainkit.manual_seed(1)
    a = compiled(x)
    b = compiled(x)
    assert not np.array_equal(a.detach().numpy(), b.detach().numpy())  # fresh masks each call
    assert "made outside the ops by trainkit.functional.dropout" in compiled.compiled.fallbacks[0]
    model.eval()
    compiled(x)
    _same(compiled(x), model(x))
    with pytest.raises(CompileError, match="dropout"):
        trainkit.compile(nn.Dropout(0.5), fullgraph=True)(x)
    with pytest.raises(CompileError, match="random numbers were drawn"):
        trainkit.compile(lambda x: x + trainkit.randn(4), fullgraph=True)(x)


def test_anomaly_mode_runs_eagerly():
    compiled = trainkit.compile(lambda x: (x * 2).sum())
    x = trainkit.ones(2, requires_grad=True)
    compiled(x)
    with trainkit.autograd.detect_anomaly():
        compiled(x).backward()
    assert any("anomaly" in f for f in compiled.fallbacks)


def test_create_graph_through_a_compiled_forward_falls_back_to_eager():
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    compiled = trainkit.compile(model)
    x = trainkit.randn(5, 3)
    compiled(x)
    results = []
    for net in (compiled, model):
        xi = x.detach().requires_grad_()
        (g,) = trainkit.autograd.grad(net(xi).sum(), xi, create_graph=True)
        (gg,) = trainkit.autograd.grad(g.pow(2).sum(), xi)
        results.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5)


def test_a_step_output_cannot_be_backwarded_twice():
    w = trainkit.ones(3, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    compiled = trainkit.compile(step)
    for _ in range(3):
        loss = compiled(trainkit.ones(3))
    assert w.grad.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_tiny_ops_region_accumulates_like_eager():
    def run(x0, w, b):
        x = x0
        for _ in range(20):
            x = x + (x * w + b).tanh()
        x.sum().backward()
        return x

    leaves = [trainkit.tensor([v], requires_grad=True) for v in (0.1, 0.5, 0.2)]
    eager = [trainkit.tensor([v], requires_grad=True) for v in (0.1, 0.5, 0.2)]
    compiled = trainkit.compile(run)
    for _ in range(3):
        _same(compiled(*leaves), run(*eager))
    for a, b in zip(leaves, eager):
        _same(a.grad, b.grad)


def test_memory_stays_flat_over_a_thousand_replays():
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = trainkit.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    @trainkit.compile
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = trainkit.randn(4, 8), trainkit.randn(4, 2)
    for _ in range(20):
        step(x, y)
    tracemalloc.start()
    for _ in range(100):
        step(x, y)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        step(x, y)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after - before < 4_000, after - before
    assert step.counts["replays"] == 1119


def test_the_cache_keeps_eight_plans():
    compiled = trainkit.compile(lambda x: x * 2)
    for n in range(1, 11):
        compiled(trainkit.ones(n))
    assert len(compiled.entries) == 8
    assert any("more than 8" in f for f in compiled.fallbacks)


def test_explain_lists_kernels_buffers_guards_and_fallbacks(capsys):
    model = _model()
    compiled = trainkit.compile(model)
    x = trainkit.randn(6, 4)
    compiled(x)
    compiled(x)
    text = compiled.explain()
    assert capsys.readouterr().out.strip() == text.strip()
    assert "1 plan, 1 capture, 1 replays" in text
    assert "AddmmBackward0" in text and "bytes of op results" in text
    assert "BatchNorm1d: training=True" in text
    text = trainkit.compiler.explain(lambda x: x * x.sum().item(), trainkit.ones(2))
    assert "runs eagerly: tensor.item() reads a value" in text


def test_other_arguments_must_be_the_same_objects():
    def f(x, data):
        return x * trainkit.tensor(data)

    compiled = trainkit.compile(f)
    x = trainkit.ones(2)
    for value in (1.0, 2.0, 3.0):
        data = np.full(2, value, np.float32)  # a new array each call, maybe at a freed one's address
        assert compiled(x, data).tolist() == [value, value]
    assert compiled.counts["replays"] == 0


def test_a_call_from_inside_a_replay_runs_eagerly():
    calls = []

    def inner(x):
        return x * 2

    compiled_inner = trainkit.compile(inner)

    def outer(x):
        calls.append(1)
        return compiled_inner(x) + 1

    for _ in range(3):
        compiled_inner(trainkit.ones(2))
    entry = compiled_inner.entries[0]
    assert entry.lock.acquire(blocking=False)  # as while a replay runs
    try:
        assert outer(trainkit.ones(2)).tolist() == [3.0, 3.0]
    finally:
        entry.lock.release()
    assert compiled_inner.counts["eager"] == 1


def test_state_kept_in_a_new_place_runs_eagerly():
    """A tensor the region makes and keeps where nothing was before it ran (appended to a list, an attribute its
    first call sets) is state a replay could not keep in step: such a region runs eagerly, with the reason."""
    rnn = nn.RNN(3, 4, batch_first=True)
    history = []

    def step(x):
        out, h = rnn(x)
        history.append(h.detach())
        return out.sum()

    compiled = trainkit.compile(step)
    x = trainkit.randn(2, 5, 3)
    results = [compiled(x).item() for _ in range(3)]
    assert len(history) == 3
    assert results == [step(x).item() for _ in range(3)]
    assert "kept outside what it returns" in compiled.fallbacks[0]

    class Remember(nn.Linear):
        def forward(self, x):
            self.last = super().forward(x)
            return self.last * 2

    with pytest.raises(CompileError, match="kept outside what it returns"):
        trainkit.compile(Remember(2, 2), fullgraph=True)(trainkit.ones(1, 2))


def test_a_tensor_found_by_name_and_replaced_is_seen():
    scale = [trainkit.tensor(2.0)]
    model = nn.Linear(2, 2)
    model.offset = trainkit.ones(2)

    def f(x):
        return model(x) * scale[0] + model.offset

    compiled = trainkit.compile(f)
    x = trainkit.ones(1, 2)
    compiled(x)
    compiled(x)
    scale[0] = trainkit.tensor(3.0)
    _same(compiled(x), f(x))
    model.offset = trainkit.zeros(2)
    _same(compiled(x), f(x))
    assert sum("is another one" in r for r in compiled.fallbacks) == 2
