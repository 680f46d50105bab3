"""The graph explorer's data side (trainkit.autograd.explore), its errors that teach, its command and its examples;
the page in a real browser is tests/test_explorer_browser.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import trainkit as torch
from trainkit import nn
from trainkit.autograd import engine
from trainkit.autograd.explore import collect, explore, record
from trainkit.autograd.graph import graph

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "autograd").glob("*.py"))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(3, 10)
        self.out = nn.Linear(10, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def mlp_loss():
    torch.manual_seed(0)
    net = Net()
    loss = ((net(torch.randn(8, 3)) - torch.randn(8, 1)) ** 2).mean()
    return net, loss


def deep_loss(layers: int = 200):
    """About five nodes per layer: 200 layers make a graph of 1,000 nodes."""
    torch.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(4, 4), nn.Tanh())])
    return net, net(torch.randn(2, 4)).sum()


def by_name(data: dict, name: str) -> list:
    return [n for n in data["nodes"] if n["name"] == name]


# ------------------------------------------------------------------------------------------------------ the graph
def test_nodes_and_edges_match_the_graph():
    net, loss = mlp_loss()
    data = collect(loss, net)
    assert len(data["nodes"]) == len(graph(loss)) == data["totals"]["nodes"] == 12
    assert data["totals"]["ops"] == 8 and data["totals"]["leaves"] == 4
    assert [n["name"] for n in data["nodes"][:4]] == ["MeanBackward0", "PowBackward0", "SubBackward0", "AddmmBackward0"]
    assert sum(1 for n in data["nodes"] for e in n["next"] if e is not None) == len(data["edges"])
    addmm = data["nodes"][3]
    assert addmm["next"][0] == [4, 0] and data["nodes"][4]["label"] == "out.bias"
    assert data["nodes"][0]["root"] and not addmm["root"]


def test_parameters_are_named_and_grouped_by_module():
    net, loss = mlp_loss()
    for params in (net, dict(net.named_parameters())):
        data = collect(loss, params)
        leaves = {n["label"]: n for n in data["nodes"] if n["kind"] == "leaf"}
        assert set(leaves) == {"hidden.weight", "hidden.bias", "out.weight", "out.bias"}
        assert {leaves[k]["module"] for k in leaves} == {"hidden", "out"}
        modules = {n["module"] for n in by_name(data, "AddmmBackward0")}
        assert modules == {"hidden", "out"}  # each Linear's op belongs to its module, through the weight's TBackward0
        assert by_name(data, "TanhBackward0")[0]["module"] is None
    unnamed = collect(loss)
    assert {n["label"] for n in unnamed["nodes"] if n["kind"] == "leaf"} == {
        "leaf (10, 3)",
        "leaf (10,)",
        "leaf (1, 10)",
        "leaf (1,)",
    }


def test_a_module_called_several_times_owns_the_ops_of_every_call():
    cell = nn.Linear(4, 4)
    h = torch.randn(2, 4)
    for _ in range(3):
        h = torch.tanh(cell(h))
    data = collect(h.sum(), {"cell." + k: v for k, v in cell.named_parameters()})
    assert {n["module"] for n in by_name(data, "TBackward0") + by_name(data, "AddmmBackward0")} == {"cell"}
    assert {n["module"] for n in by_name(data, "TanhBackward0")} == {None}


def test_saved_tensors_and_totals_by_module():
    net, loss = mlp_loss()
    data = collect(loss, net)
    totals = data["totals"]
    assert totals["saved_bytes"] == graph(loss).saved_bytes
    assert sum(totals["saved_by_module"].values()) == totals["saved_bytes"]
    assert totals["saved_by_module"]["hidden"] == 8 * 3 * 4  # the input, saved by hidden's addmm
    tanh = by_name(data, "TanhBackward0")[0]
    assert tanh["saved"] == [
        {
            "shape": [8, 10],
            "dtype": "float32",
            "bytes": 320,
            "saved_version": 0,
            "version": 0,
            "stale": False,
            "freed": False,
            "what": "output 0 of this node",
        }
    ]


def test_a_stale_saved_tensor_is_marked_with_both_versions():
    x = torch.ones(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    data = collect(y.sum())
    exp = by_name(data, "ExpBackward0")[0]
    assert exp["saved"][0]["stale"] and (exp["saved"][0]["saved_version"], exp["saved"][0]["version"]) == (0, 1)
    assert data["totals"]["stale_saved"] == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_retain_grad_costs_bytes_and_a_hook_costs_none():
    x = torch.ones(4, 5, requires_grad=True)
    y = x.exp()
    y.retain_grad()
    z = y * 2
    z.register_hook(lambda g: None)
    loss = z.sum()
    before = collect(loss)["totals"]
    assert (before["retain_grad_count"], before["retain_grad_bytes"]) == (1, 80)  # what it will keep
    assert (before["hook_count"], before["hook_bytes"]) == (1, 0)
    loss.backward()
    data = collect(loss)
    exp = by_name(data, "ExpBackward0")[0]
    assert exp["hooks"]["retain_grad"] == [{"output_nr": 0, "tensor": exp["hooks"]["retain_grad"][0]["tensor"]}]
    kept = data["tensors"][exp["hooks"]["retain_grad"][0]["tensor"]]
    assert kept["retains_grad"] and kept["grad"] and kept["grad_bytes"] == 80 and not kept["is_leaf"]
    assert by_name(data, "MulBackward0")[0]["hooks"]["tensor_hooks"] == 1
    assert data["totals"]["retain_grad_bytes"] == 80 and data["totals"]["hook_bytes"] == 0


def test_tensors_say_whether_they_share_storage():
    x = torch.ones(2, 3, requires_grad=True)
    d = x.detach()
    v = x.view(6)
    loss = (x * d).sum() + (v * v).sum()  # MulBackward0 saves its inputs, the view among them
    data = collect(loss, {"x": x, "d": d})
    tensors = {t["name"]: t for t in data["tensors"] if t["name"]}
    assert "detach() result or a view" in tensors["d"]["storage"] and not tensors["d"]["requires_grad"]
    assert tensors["d"]["is_leaf"] and tensors["x"]["is_leaf"] and tensors["x"]["requires_grad"]
    view = [t for t in data["tensors"] if t["storage"].startswith("a view")]
    assert len(view) == 1 and view[0]["shape"] == [6]


def test_frozen_parameters_are_listed_outside_the_graph():
    net, _ = mlp_loss()
    net.hidden.requires_grad_(False)
    loss = net(torch.randn(8, 3)).sum()
    data = collect(loss, net)
    assert {o["name"] for o in data["outside"]} == {"hidden.weight", "hidden.bias"}
    assert all("frozen" in o["why"] for o in data["outside"])
    assert {n["label"] for n in data["nodes"] if n["kind"] == "leaf"} == {"out.weight", "out.bias"}


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="does not require grad"):
        collect(torch.ones(2))
    with pytest.raises(TypeError, match="named_parameters"):
        collect(torch.ones(2, requires_grad=True).sum(), params=[1, 2])
    with pytest.raises(TypeError, match="takes tensors"):
        collect([1.0])


# -------------------------------------------------------------------------------------------------- the recorder
def test_the_recorder_gives_the_engine_order_and_where_gradients_were_summed():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = w * 2, w * 3
    loss = (a + b).sum()
    order = []
    for node in graph(loss).nodes:
        node.register_prehook(lambda g, n=node: order.append(n.name()))
    with record() as rec:
        loss.backward()
    data = collect(loss, {"w": w}, trace=rec)
    names = [data["nodes"][s["node"]]["name"] for s in data["steps"]]
    assert names == order and names[0] == "SumBackward0" and names[-1] == "AccumulateGrad"
    last = data["steps"][-1]
    assert last["summed"] and len(last["incoming"]) == 2
    assert sorted(c["norm"] for c in last["incoming"]) == pytest.approx([2 * 2**0.5, 3 * 2**0.5])
    assert last["norms"][0] == pytest.approx(5 * 2**0.5)  # the sum the engine passed on
    assert data["steps"][0]["incoming"] == [{"from": None, "output_nr": 0, "norm": 1.0}]
    leaf = data["tensors"][by_name(data, "AccumulateGrad")[0]["tensor"]]
    assert leaf["grad_norm"] == pytest.approx(5 * 2**0.5)
    assert all(e["norm"] is not None for e in data["edges"])


def test_the_recorder_works_after_an_ordinary_backward_and_leaves_nothing_behind():
    net, loss = mlp_loss()
    with record() as rec:
        assert engine.observers == [rec._observe]
        loss.backward()
    assert engine.observers == []
    assert all(node._hooks is None for node in graph(loss).nodes if node.name() != "AccumulateGrad")
    data = collect(loss, net, trace=rec)
    tanh = by_name(data, "TanhBackward0")[0]
    assert tanh["freed"] and tanh["saved"][0]["shape"] == [8, 10] and tanh["saved"][0]["freed"]
    assert sum(data["totals"]["saved_by_module"].values()) == data["totals"]["saved_bytes"] > 0
    assert len(data["steps"]) == 12
    # the page is the same after the recorder: the graph still runs backward without it
    loss2 = net(torch.ones(1, 3)).sum()
    loss2.backward()


def test_vanishing_and_exploding_norms_are_recorded_as_they_are():
    w = torch.ones(3, requires_grad=True)
    loss = (w * 1e-9).sum() + (w * 1e5).sum()
    with record() as rec:
        loss.backward()
    data = collect(loss, trace=rec)
    norms = sorted(e["norm"] for e in data["edges"] if e["from"] != 0)
    assert norms[0] < data["thresholds"]["vanishing"] and norms[-1] > data["thresholds"]["exploding"]


def test_infinite_norms_travel_as_strings():
    w = torch.ones(2, requires_grad=True)
    loss = (w * float("inf")).sum()
    with record() as rec:
        loss.backward()
    data = collect(loss, trace=rec)
    json.dumps(data, allow_nan=False)
    assert "inf" in [e["norm"] for e in data["edges"]] or "nan" in [e["norm"] for e in data["edges"]]


# ------------------------------------------------------------------------------------------------------ the page
def test_the_page_embeds_escaped_json_and_is_written(tmp_path):
    w = torch.ones(2, requires_grad=True)
    name = "</script><script>alert(1)</script>"
    html = explore((w * w).sum(), {name: w}, path=tmp_path / "sub" / "g.html", title="<b>title</b>")
    assert (tmp_path / "sub" / "g.html").read_text(encoding="utf-8") == html
    assert "alert(1)</script>" not in html and "&lt;b&gt;title&lt;/b&gt;" in html
    payload = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', html, re.S).group(1)
    data = json.loads(payload)
    assert data["nodes"][-1]["label"] == name
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        '"http://www.w3.org/2000/svg"', ""
    )  # nothing fetched at view time
    assert "<script src" not in html and "<link" not in html


def test_the_page_template_is_package_data():
    assert resources.files("trainkit.autograd").joinpath("explore_page.html").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    assert '"trainkit.autograd" = ["explore_page.html"]' in text


def test_a_graph_of_1000_nodes_makes_a_page_under_2_mb():
    net, loss = deep_loss()
    with record() as rec:
        loss.backward()
    data = collect(loss, net, trace=rec)
    assert len(data["nodes"]) >= 1000
    assert len(explore(loss, net, trace=rec).encode()) < 2_000_000


def test_the_graph_command_writes_the_page(tmp_path, monkeypatch, capsys):
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    target = tmp_path / "graph.html"
    assert main(["graph", str(ROOT / "configs" / "regression.yaml"), "--html", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    html = target.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="graph-data">(.*?)</script>', html, re.S).group(1))
    assert any(n["label"].endswith(".weight") for n in data["nodes"]) and data["steps"]


# ---------------------------------------------------------------------------------------------- errors that teach
def test_the_inplace_error_names_node_versions_and_fix():
    x = torch.ones(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError) as err:
        y.sum().backward()
    text = str(err.value)
    assert text.startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation"
    )
    for part in ("ExpBackward0", "is at version 1; expected version 0", "clone()", "out of place", "detect_anomaly"):
        assert part in text


def test_anomaly_mode_names_the_line_of_the_inplace_change():
    x = torch.ones(3, requires_grad=True)
    with torch.autograd.detect_anomaly():
        y = x * 2
        z = y.exp()
        z += 1
        line = sys._getframe().f_lineno - 1  # the line above
        with pytest.raises(RuntimeError) as err:
            z.sum().backward()
        data = collect(z.sum())
    assert f"{Path(__file__).name}:{line}" in str(err.value) and "iadd()" in str(err.value)
    assert any(s.get("changed_at", "").startswith(__file__) for n in data["nodes"] for s in n["saved"])
    # outside anomaly mode the methods are the plain ones again
    assert torch.Tensor.add_.__module__ != "trainkit.autograd.anomaly"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0 / 0, on purpose
def test_detect_anomaly_is_a_decorator_too():
    from trainkit.autograd.anomaly import is_anomaly_enabled

    @torch.autograd.detect_anomaly()
    def inside():
        return is_anomaly_enabled()

    assert inside() and not is_anomaly_enabled()
    x = torch.tensor([0.0, 1.0], requires_grad=True)

    @torch.autograd.detect_anomaly()
    def nan_backward():
        (x / x).sum().backward()

    with pytest.raises(RuntimeError, match="DivBackward0"):
        nan_backward()


def test_the_second_backward_says_to_retain_the_graph():
    w = torch.ones(2, requires_grad=True)
    loss = w.exp().sum()
    loss.backward()
    with pytest.raises(RuntimeError) as err:
        loss.backward()
    assert str(err.value).startswith("Trying to backward through the graph a second time")
    assert "retain_graph=True" in str(err.value) and "ExpBackward0" in str(err.value)


# ------------------------------------------------------------------------------------------------------ examples
def test_every_concept_has_an_example():
    names = {p.stem for p in EXAMPLES}
    assert {"leaf_vs_nonleaf", "retain_grad", "hooks", "detach", "no_grad", "inplace_version", "frozen_layers"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_write_their_page_into_the_given_folder(example, tmp_path):
    result = subprocess.run(
        [sys.executable, str(example), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pages = list(tmp_path.glob("*.html"))
    assert pages and all(p.stat().st_size > 5000 for p in pages)
    assert str(tmp_path) in result.stdout


def test_array_norms_survive_tiny_values():
    from trainkit.autograd.explore import _norm

    assert _norm(np.full(4, 1e-30, dtype=np.float32)) == pytest.approx(2e-30)


def test_the_recorder_does_not_keep_saved_activations_alive():
    import gc
    import weakref

    w = torch.ones(1000, requires_grad=True)
    x = torch.ones(1000) * 2  # saved by MulBackward0 for w's gradient
    alive = weakref.ref(x)
    loss = (w * x).sum()
    del x
    with record() as rec:
        loss.backward()
    gc.collect()
    assert alive() is None  # backward freed it, and the recorder did not hold on to it
    mul = by_name(collect(loss, trace=rec), "MulBackward0")[0]
    assert mul["saved"][0]["shape"] == [1000] and mul["saved"][0]["what"] == "an input, since freed"


def test_the_embedded_data_holds_no_markup_characters():
    """No "<" in the inlined JSON at all: "<!--" and "<script" inside a script element change how HTML parses it."""
    w = torch.ones(2, requires_grad=True)
    names = ["<!--<script>", "</script>", "a&b>c", "<![CDATA["]
    html = explore((w * w).sum() * 2, {n: w for n in names[:1]}, title="t")
    start = html.index('<script type="application/json" id="graph-data">') + len(
        '<script type="application/json" id="graph-data">'
    )
    payload = html[start : html.index("</script>", start)]
    assert not set("<>&") & set(payload)
    assert json.loads(payload)["nodes"][-1]["label"] == names[0]
