"""The graph explorer's module boxes: with ``explore.record(model)`` around the forward, every module is a box around
the nodes its call made (parameter-free ReLU, Dropout, MaxPool2d and Flatten too), boxes nest as the modules do,
and no hook stays on the model; the page in headless Chromium draws each box around its own nodes."""

from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

import trainkit as torch
from trainkit import nn
from trainkit.autograd.explore import collect, explore, record

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")


class Net(nn.Module):
    """Convolutions with parameter-free layers between them, in two Sequentials, and an op of the model's own."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.5))
        self.classify = nn.Sequential(nn.Flatten(), nn.Linear(4 * 2 * 2, 3))

    def forward(self, x):
        return torch.tanh(self.classify(self.features(x)))


def recorded(net=None, x=None):
    torch.manual_seed(0)
    net = net if net is not None else Net()
    x = x if x is not None else torch.randn(2, 1, 4, 4)
    with record(net) as rec:
        loss = net(x).pow(2).mean()
        loss.backward()
    return net, loss, rec


def modules_of(data: dict, name: str) -> set:
    return {n["module"] for n in data["nodes"] if n["name"] == name}


def hooks_on(net) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in net.modules())


def test_parameter_free_modules_own_the_nodes_their_forward_made():
    net, loss, rec = recorded()
    data = collect(loss, net, trace=rec)
    assert modules_of(data, "ConvolutionBackward0") == {"features.0"}
    assert modules_of(data, "ReluBackward0") == {"features.1"}
    assert modules_of(data, "MaxPool2DWithIndicesBackward0") == {"features.2"}
    assert modules_of(data, "MulBackward0") == {"features.3"}  # the dropout mask
    assert modules_of(data, "ViewBackward0") == {"classify.0"}  # Flatten
    assert modules_of(data, "AddmmBackward0") == modules_of(data, "TBackward0") == {"classify.1"}
    # the model's own tanh and the loss were made outside every child: on the page, outside every box
    assert modules_of(data, "TanhBackward0") == modules_of(data, "MeanBackward0") == {None}
    leaves = {n["label"]: n["module"] for n in data["nodes"] if n["kind"] == "leaf"}
    assert leaves == {
        "features.0.weight": "features.0",
        "features.0.bias": "features.0",
        "classify.1.weight": "classify.1",
        "classify.1.bias": "classify.1",
    }
    boxes = {b["name"]: (b["type"], b["parent"]) for b in data["modules"]}
    assert boxes == {
        "features": ("Sequential", ""),
        "features.0": ("Conv2d", "features"),
        "features.1": ("ReLU", "features"),
        "features.2": ("MaxPool2d", "features"),
        "features.3": ("Dropout", "features"),
        "classify": ("Sequential", ""),
        "classify.0": ("Flatten", "classify"),
        "classify.1": ("Linear", "classify"),
    }
    saved = data["totals"]["saved_by_module"]
    assert saved["features.1"] > 0 and sum(saved.values()) == data["totals"]["saved_bytes"]


def test_no_hook_stays_on_the_model_even_when_its_forward_raises():
    net = Net()
    before = hooks_on(net)
    recorded(net)
    assert hooks_on(net) == before == 0
    with pytest.raises(RuntimeError), record(net):
        net(torch.randn(2, 3, 4, 4))  # 3 channels where the convolution wants 1
    assert hooks_on(net) == 0
    kept = net.features[1].register_forward_hook(lambda m, a, o: None)  # the user's own hooks stay
    recorded(net)
    assert hooks_on(net) == 1
    kept.remove()


def test_nested_modules_nest_their_boxes():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3), nn.GELU())

        def forward(self, x):
            return x + self.body(x)  # the residual add is the block's own op

    net = nn.Sequential(Block(), nn.ReLU(), Block())
    _, loss, rec = recorded(net, torch.randn(4, 3))
    data = collect(loss, net, trace=rec)
    parents = {b["name"]: b["parent"] for b in data["modules"]}
    assert parents == {"0": "", "0.body": "0", "0.body.0": "0.body", "0.body.1": "0.body", "1": ""} | {
        "2": "",
        "2.body": "2",
        "2.body.0": "2.body",
        "2.body.1": "2.body",
    }
    assert modules_of(data, "AddBackward0") == {"0", "2"}
    assert modules_of(data, "GeluBackward0") == {"0.body.1", "2.body.1"}


def test_a_module_called_several_times_owns_every_call_and_record_can_be_entered_twice():
    cell = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    rec = record(cell)
    h = torch.randn(2, 4)
    with rec:  # the forward here, the backward in a second block
        for _ in range(3):
            h = cell(h)
        loss = h.sum()
    with rec:
        loss.backward()
    data = collect(loss, cell, trace=rec)
    assert modules_of(data, "TanhBackward0") == {"1"} and len([n for n in data["nodes"] if n["module"] == "1"]) == 3
    assert modules_of(data, "AddmmBackward0") == {"0"}
    assert len(data["steps"]) == len(data["nodes"])
    assert hooks_on(cell) == 0


def test_without_a_recorded_forward_the_parameters_decide_as_before():
    net, loss, _ = recorded()
    data = collect(loss, net)
    assert data["modules"] is None
    assert modules_of(data, "ReluBackward0") == {None} and modules_of(data, "AddmmBackward0") == {"classify.1"}
    with record() as rec:  # a recorder without a model records the backward only
        pass
    assert collect(loss, net, trace=rec)["modules"] is None


def test_modules_that_made_no_node_are_listed_instead_of_boxed():
    net = nn.Sequential(nn.Linear(3, 3), nn.Identity(), nn.Dropout(0.5), nn.ReLU())
    net[2].eval()  # passes its input through
    _, loss, rec = recorded(net, torch.randn(2, 3))
    data = collect(loss, net, trace=rec)
    assert [b["name"] for b in data["modules"]] == ["0", "3"]
    assert [(m["name"], m["type"]) for m in data["idle_modules"]] == [("1", "Identity"), ("2", "Dropout")]
    assert "Dropout in eval mode" in data["idle_modules"][1]["why"]
    assert collect(loss, net)["idle_modules"] == []


def test_record_names_what_it_wants_for_a_model():
    with pytest.raises(TypeError, match=r"record\(model\): model must be a Module .* got dict"):
        record({"w": torch.ones(1)})


# ---------------------------------------------------------------------------------------------------- the page
def dom(tmp_path: Path, page: Path) -> str:
    command = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--mute-audio",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    html = result.stdout
    assert re.search(r'<pre id="errors">(.*?)</pre>', html, re.S).group(1).strip() == ""
    return html


@needs_chromium
def test_the_page_draws_each_module_box_around_its_own_nodes(tmp_path):
    net, loss, rec = recorded()
    page = tmp_path / "cnn.html"
    explore(loss, net, path=page, trace=rec)
    html = dom(tmp_path, page)
    data = collect(loss, net, trace=rec)
    groups = re.findall(r'<g class="module-group" data-module="([^"]*)" data-parent="([^"]*)" data-box="([^"]*)"', html)
    assert sorted(g[0] for g in groups) == sorted(b["name"] for b in data["modules"])
    assert {g[0]: g[1] for g in groups} == {b["name"]: b["parent"] for b in data["modules"]}
    titles = set(re.findall(r'<text class="group-label"[^>]*>([^<]*)</text>', html))
    assert {"features.1: ReLU", "features.3: Dropout", "classify.0: Flatten", "features: Sequential"} <= titles
    box = {name: tuple(map(float, b.split())) for name, _, b in groups}
    for name, parent, _ in groups:  # an inner box inside its outer one
        if parent:
            (x0, y0, x1, y1), (px0, py0, px1, py1) = box[name], box[parent]
            assert px0 <= x0 and py0 <= y0 and x1 <= px1 and y1 <= py1
    places = re.findall(
        r'<g class="node [^"]*" data-id="(\d+)"[^>]*transform="translate\(([-\d.e]+),([-\d.e]+)\)">'
        r'<rect width="([\d.]+)" height="([\d.]+)"',
        html,
    )
    assert len(places) == len(data["nodes"])
    for i, nx, ny, w, h in places:
        nx, ny, w, h = float(nx), float(ny), float(w), float(h)
        module = data["nodes"][int(i)]["module"]
        for name, (x0, y0, x1, y1) in box.items():
            inside = x0 <= nx and nx + w <= x1 and y0 <= ny and ny + h <= y1
            apart = nx + w <= x0 or x1 <= nx or ny + h <= y0 or y1 <= ny
            if module is not None and (module == name or module.startswith(name + ".")):
                assert inside, (data["nodes"][int(i)]["label"], name)
            else:
                assert apart, (data["nodes"][int(i)]["label"], name)


@needs_chromium
def test_hostile_module_names_stay_text(tmp_path):
    names = ["<!--<script>", "</script><script>alert(1)</script>", "a&amp;b<b>", "-->"]
    net = nn.ModuleDict({name: nn.Sequential(nn.Linear(2, 2), nn.ReLU()) for name in names})
    x = torch.randn(3, 2)
    with record(net) as rec:
        loss = sum(net[name](x).sum() for name in names)
    page = tmp_path / "nasty.html"
    explore(loss, net, path=page, trace=rec, title="<!--<script>")
    html = dom(tmp_path, page)
    assert 'data-state="ok"' in html
    titles = {unescape(t) for t in re.findall(r'<text class="group-label"[^>]*>([^<]*)</text>', html)}
    assert {f"{name}: Sequential" for name in names} <= titles
    assert {f"{name}.1: ReLU" for name in names} <= titles


@needs_chromium
def test_the_page_lists_modules_that_made_no_node(tmp_path):
    net = nn.Sequential(nn.Linear(3, 3), nn.Identity(), nn.ReLU())
    _, loss, rec = recorded(net, torch.randn(2, 3))
    page = tmp_path / "idle.html"
    explore(loss, net, path=page, trace=rec)
    html = dom(tmp_path, page)
    idle = re.search(r'<table id="idle-table">(.*?)</table>', html, re.S).group(1)
    assert "<code>1</code>" in idle and "Identity" in idle
    assert set(re.findall(r'data-module="([^"]*)"', html)) == {"0", "2"}
