"""The explorer's page in a real headless Chromium: it renders every node, names parameters, shows a node's saved
tensors and the engine's steps, and raises no script error.

Chromium is driven from the command line (``--dump-dom`` after the page's script ran, ``--screenshot``); the page
writes any script error into ``#errors`` and its outcome into ``#status``, since the console is not in the dump.
The tests skip, saying why, where Chromium is not installed (``apt-get install chromium``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from html import unescape
from pathlib import Path

import pytest

import trainkit as torch
from trainkit import nn
from trainkit.autograd.explore import collect, explore, record

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
if CHROMIUM is None:  # said in the warnings summary too, which pytest prints by default (skip reasons need -rs)
    warnings.warn("chromium not installed: the explorer's browser tests skip (apt-get install chromium)", stacklevel=1)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")


def chromium(tmp_path: Path, url: str, *args: str) -> str:
    """Run headless Chromium on ``url`` with its own profile folder; returns what it printed (the DOM)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--mute-audio",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *args,
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def dom(tmp_path: Path, page: Path, fragment: str = "") -> str:
    return chromium(tmp_path, page.as_uri() + fragment, "--dump-dom")


def status(html: str) -> dict:
    tag = re.search(r'<div id="status"([^>]*)>', html).group(1)
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', tag))


def errors(html: str) -> str:
    return re.search(r'<pre id="errors">(.*?)</pre>', html, re.S).group(1)


def mlp_page(tmp_path: Path) -> Path:
    """An MLP's loss (11 nodes: MeanBackward0, PowBackward0, two AddmmBackward0 with their TBackward0, one
    TanhBackward0 and four leaves), recorded through backward."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 10), nn.Tanh(), nn.Linear(10, 1))
    x = torch.randn(8, 3)
    h = net[0](x)
    h.retain_grad()
    loss = net[2](net[1](h)).pow(2).mean()
    with record() as rec:
        loss.backward()
    path = tmp_path / "mlp.html"
    explore(loss, net, path=path, trace=rec, title="mlp")
    return path


def test_the_page_renders_every_node_with_parameter_names(tmp_path):
    html = dom(tmp_path, mlp_page(tmp_path))
    assert errors(html).strip() == ""
    state = status(html)
    assert state["state"] == "ok" and state["nodes"] == "11" and state["edges"] == "10"
    assert len(re.findall(r'<g class="node ', html)) == 11
    labels = re.findall(r'<text x="8" y="14" class="label">([^<]*)</text>', html)
    assert {"0.weight", "0.bias", "2.weight", "2.bias", "MeanBackward0", "TanhBackward0"} <= set(labels)
    assert set(re.findall(r'data-module="([^"]*)"', html)) == {"0", "2"}
    assert re.search(r'class="edge ?[a-z ]*"', html) and "‖g‖" in html  # gradient norms on the edges


def test_a_node_in_the_fragment_shows_its_details(tmp_path):
    page = mlp_page(tmp_path)
    html = dom(tmp_path, page, "#node=2")  # the output layer's AddmmBackward0
    details = re.search(r'<section id="details" data-node="2">(.*?)</section>', html, re.S).group(1)
    assert 'id="detail-title">AddmmBackward0<' in details
    assert "next_functions" in details and "2.bias" in details and "saved tensors" in details
    assert "_version saved → now" in details


def test_a_stale_saved_tensor_is_drawn_in_red(tmp_path):
    x = torch.ones(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    page = tmp_path / "stale.html"
    explore(y.sum(), {"x": x}, path=page)
    html = dom(tmp_path, page, "#node=2")  # SumBackward0, AddBackward0 (the add_), ExpBackward0
    assert re.search(r'<g class="node op stale[^"]*"[^>]*data-name="ExpBackward0"', html)
    assert re.search(r'<tr class="stale">.*?0 → 1 STALE', html, re.S)
    assert errors(html).strip() == ""


def test_stepping_through_the_engine_order(tmp_path):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * 2 + w * 3).sum()
    with record() as rec:
        loss.backward()
    page = tmp_path / "steps.html"
    explore(loss, {"w": w}, path=page, trace=rec)
    html = dom(tmp_path, page, "#step=4")
    info = re.search(r'<p id="step-info" class="mono">(.*?)</p>', html, re.S).group(1)
    assert info.startswith("step 5 / 5") and "gradients summed here" in info
    assert len(re.findall(r'<g class="node [^"]*\bdone\b', html)) == 4
    assert len(re.findall(r'<g class="node [^"]*\bcurrent\b', html)) == 1


def test_a_page_of_1000_nodes_renders(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(200) for m in (nn.Linear(4, 4), nn.Tanh())])
    loss = net(torch.randn(2, 4)).sum()
    with record() as rec:
        loss.backward()
    page = tmp_path / "big.html"
    explore(loss, net, path=page, trace=rec)
    assert page.stat().st_size < 2_000_000
    html = dom(tmp_path, page)
    assert errors(html).strip() == "" and int(status(html)["nodes"]) >= 1000


def test_a_screenshot_shows_the_page(tmp_path):
    shot = tmp_path / "mlp.png"
    chromium(tmp_path, mlp_page(tmp_path).as_uri() + "#node=2", f"--screenshot={shot}", "--window-size=1400,900")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a drawn page, not a blank one


def small_cnn():
    """Two convolutions and a Linear in nested Sequentials, as examples/digits/model.py has them."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()
            )
            self.classify = nn.Sequential(nn.Flatten(), nn.Linear(8 * 2 * 2, 3))

        def forward(self, x):
            return self.classify(self.features(x))

    return Net(), torch.randn(2, 1, 4, 4)


def deep_mlp():
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)), torch.randn(5, 3)


@pytest.mark.parametrize("build", [deep_mlp, small_cnn])
def test_each_module_is_one_box_clear_of_its_siblings(tmp_path, build):
    torch.manual_seed(0)
    net, x = build()
    loss = net(x).sum()
    page = tmp_path / "boxes.html"
    explore(loss, net, path=page)
    html = dom(tmp_path, page)
    assert errors(html).strip() == ""
    data = collect(loss, net)
    groups = re.findall(r'<g class="module-group" data-module="([^"]*)" data-parent="([^"]*)" data-box="([^"]*)"', html)
    names = [g[0] for g in groups]
    modules = {nd["module"] for nd in data["nodes"] if nd["module"]}
    assert modules and all(names.count(m) == 1 for m in modules)
    box = {name: tuple(map(float, b.split())) for name, _, b in groups}
    parent = {name: p for name, p, _ in groups}
    for a in box:  # boxes of one parent (the page, or a module around them) do not touch
        for b in box:
            if a < b and parent[a] == parent[b]:
                (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = box[a], box[b]
                assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, (a, b, box[a], box[b])
        if parent[a]:  # and a module inside another is drawn inside its box
            (x0, y0, x1, y1), (px0, py0, px1, py1) = box[a], box[parent[a]]
            assert px0 <= x0 and py0 <= y0 and x1 <= px1 and y1 <= py1
    places = re.findall(
        r'<g class="node [^"]*" data-id="(\d+)"[^>]*transform="translate\(([-\d.e]+),([-\d.e]+)\)">'
        r'<rect width="([\d.]+)" height="([\d.]+)"',
        html,
    )
    assert len(places) == len(data["nodes"])
    for i, nx, ny, w, h in places:  # every node inside its module's box, and inside no box of another module
        nx, ny, w, h = float(nx), float(ny), float(w), float(h)
        module = data["nodes"][int(i)]["module"]
        for name, (x0, y0, x1, y1) in box.items():
            inside = x0 <= nx and nx + w <= x1 and y0 <= ny and ny + h <= y1
            apart = nx + w <= x0 or x1 <= nx or ny + h <= y0 or y1 <= ny
            if module is not None and (module == name or module.startswith(name + ".")):
                assert inside, (data["nodes"][int(i)]["label"], name)
            elif module is not None or (name in modules and name not in parent.values()):
                assert apart, (data["nodes"][int(i)]["label"], name)  # an op of no module stays out of a Linear's box


NASTY = ["<!--<script>", "</script><script>alert(1)</script>", "]]><!--", "a&amp;b<b>", "\u2028line", "-->"]


def test_hostile_names_render_as_text_and_the_page_loads(tmp_path):
    """HTML's escaped-script parsing: a name holding ``<!--<script>`` once left the page stuck at loading."""
    torch.manual_seed(0)
    layers = {name: nn.Linear(2, 2) for name in NASTY}
    x = torch.randn(3, 2)
    loss = sum(layer(x).sum() for layer in layers.values())
    params = {f"{name}.{p}": t for name, layer in layers.items() for p, t in layer.named_parameters()}
    path = tmp_path / "nasty.html"
    explore(loss, params, path=path, title="<!--<script>")
    html = dom(tmp_path, path)
    assert errors(html).strip() == "" and status(html)["state"] == "ok"
    labels = set(re.findall(r'<text x="8" y="14" class="label">([^<]*)</text>', html))
    shown = {unescape(label) for label in labels}
    assert {f"{name}.weight" for name in NASTY} <= shown
