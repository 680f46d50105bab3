"""trainkit.autograd.graph: the text tree, saved bytes, DOT output and rendering."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trainkit
from trainkit.autograd.graph import Graph, graph


def _small():
    a = trainkit.tensor([1.0, 2.0], requires_grad=True)
    b = trainkit.tensor([3.0, 4.0], requires_grad=True)
    return a, b, (a * b + a.exp()).sum()


def test_text_of_a_small_graph():
    _, _, loss = _small()
    assert str(graph(loss)) == (
        "#0 SumBackward0\n"
        "#1 AddBackward0\n"
        "├── #2 MulBackward0  saved: (2,) float32 8 B, (2,) float32 8 B\n"
        "│   ├── #3 AccumulateGrad  leaf (2,) float32 requires_grad=True\n"
        "│   └── #4 AccumulateGrad  leaf (2,) float32 requires_grad=True\n"
        "└── #5 ExpBackward0  saved: (2,) float32 8 B\n"
        "    #3 AccumulateGrad (see above)\n"
        "total saved: 24 B in 3 distinct arrays"
    )
    assert graph(loss).text() == str(graph(loss))


def test_shared_subgraph_is_shown_once():
    x = trainkit.ones(3, requires_grad=True)
    h = (x * 2).exp()
    y = h.sin() + h.cos()
    g = graph(y)
    text = g.text()
    assert text.count("ExpBackward0") == 2
    assert text.count("ExpBackward0 (see above)") == 1
    assert text.count("MulBackward0") == 1
    assert sum(isinstance(n, trainkit.autograd.AccumulateGrad) for n in g.nodes) == 1
    assert len({id(n) for n in g.nodes}) == len(g.nodes) == 6


def test_saved_bytes():
    w = trainkit.ones(5, 7, dtype=trainkit.float64, requires_grad=True)
    x = trainkit.ones(3, 5, dtype=trainkit.float64)
    y = (x @ w).tanh()
    g = graph(y)
    # mm saves x (3*5*8 bytes), for w's gradient; tanh saves its output (3*7*8 bytes)
    assert g.saved_bytes == 3 * 5 * 8 + 3 * 7 * 8
    assert "(3, 5) float64 120 B" in g.text()
    assert "(3, 7) float64 168 B" in g.text()


def test_same_array_saved_twice_counts_once():
    a = trainkit.ones(4, requires_grad=True)
    g = graph(a * a)
    assert g.saved_bytes == 16
    assert Graph.saved(g.roots[0]) == [((4,), "float32", 16), ((4,), "float32", 16)]


def test_freed_after_backward():
    _, _, loss = _small()
    g = graph(loss)
    assert "freed" not in g.text()
    loss.backward()
    text = g.text()
    assert "#2 MulBackward0  saved: freed" in text
    assert "#5 ExpBackward0  saved: freed" in text
    assert g.saved_bytes == 0
    assert "saved: freed" in g.to_dot()


def test_retain_graph_keeps_saved():
    _, _, loss = _small()
    loss.backward(retain_graph=True)
    assert "freed" not in graph(loss).text()


def test_several_roots_and_leaf_root():
    a, b, loss = _small()
    g = graph([loss, a * 2])
    assert g.text().splitlines()[-2].endswith("#3 AccumulateGrad (see above)")
    assert graph(a).text().startswith("#0 AccumulateGrad  leaf (2,) float32 requires_grad=True")


def test_no_graph_errors():
    with pytest.raises(ValueError, match="does not require grad"):
        graph(trainkit.ones(2))
    with pytest.raises(TypeError, match="takes tensors"):
        graph([1.0])


def test_dot_structure():
    _, _, loss = _small()
    dot = graph(loss).to_dot()
    assert dot.startswith("digraph ") and dot.rstrip().endswith("}")
    nodes = re.findall(r"^\s*(n\d+) \[label=\"([^\"]*)\", shape=(\w+)", dot, flags=re.M)
    edges = re.findall(r"^\s*(n\d+) -> (n\d+);$", dot, flags=re.M)
    assert len(nodes) == 6
    assert len(edges) == 6  # sum->add, add->mul, add->exp, mul->a, mul->b, exp->a
    names = {n for n, _, _ in nodes}
    assert all(src in names and dst in names for src, dst in edges)
    boxes = [label for _, label, shape in nodes if shape == "box"]
    assert boxes == ["AccumulateGrad\\n(2,) float32"] * 2
    assert dot.count("{") == dot.count("}")


def test_render_without_graphviz(tmp_path, monkeypatch):
    _, _, loss = _small()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz is not installed") as info:
        graph(loss).render(tmp_path / "g.svg")
    dot = tmp_path / "g.dot"
    assert str(dot) in str(info.value)
    assert dot.read_text() == graph(loss).to_dot()
    assert not (tmp_path / "g.svg").exists()


def test_render_dot_only_needs_no_graphviz(tmp_path, monkeypatch):
    _, _, loss = _small()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    out = graph(loss).render(tmp_path / "g.dot")
    assert out == tmp_path / "g.dot" and out.read_text().startswith("digraph")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_render_with_graphviz(tmp_path):
    _, _, loss = _small()
    out = graph(loss).render(tmp_path / "g.svg")
    assert out == tmp_path / "g.svg" and "<svg" in out.read_text()
    assert (tmp_path / "g.dot").exists()


def test_long_chain_has_no_recursion_limit():
    x = trainkit.ones(2, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0001
    g = graph(y)
    assert len(g) == 100_001
    lines = g.text().splitlines()
    assert len(lines) == 100_002
    assert max(len(line) for line in lines) < 100
    assert g.to_dot().count("->") == 100_000


def test_graph_names_a_models_parameters(tmp_path):
    model = trainkit.nn.Sequential(trainkit.nn.Linear(2, 3), trainkit.nn.ReLU(), trainkit.nn.Linear(3, 1))
    loss = model(trainkit.ones(4, 2)).sum()
    text = graph(loss, params=dict(model.named_parameters())).text()
    for name, p in model.named_parameters():
        assert f"AccumulateGrad  {name} {tuple(p.shape)} float32" in text
    assert "leaf" not in text
    assert "leaf (1,) float32" in graph((trainkit.ones(1, requires_grad=True) * 2).sum()).text()


def test_graph_command_labels_parameters_by_name(tmp_path):
    config = Path(__file__).resolve().parents[1] / "configs" / "regression.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "graph", config, "--format", "dot", "--set", f"output_dir={tmp_path}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "AccumulateGrad  hidden.weight (10, 1) float32" in done.stdout
