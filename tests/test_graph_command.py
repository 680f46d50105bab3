"""``trainkit graph CONFIG --html PATH`` run as a user runs it: in a subprocess, from a temporary folder, with a
good config, a broken one and a path that cannot be written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def graph(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "graph", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_page_is_written_where_asked_with_its_folders(tmp_path):
    done = graph(ROOT / "configs" / "regression.yaml", "--html", "pages/reg/graph.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "pages" / "reg" / "graph.html"
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "hidden.weight" in html and "AddmmBackward0" in html
    # self-contained: no script, style or image fetched at view time (the SVG namespace is a name, not a fetch)
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html) and "<link" not in html
    assert f"wrote {Path('pages/reg/graph.html')}" in done.stdout
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["graph.html"]  # no run folder


def test_a_broken_config_is_a_config_error_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {class_path: nope}\n")
    done = graph(bad, "--html", "graph.html", cwd=tmp_path)
    assert done.returncode == 2
    assert f"config error: {bad}: 'model.class_path'" in done.stderr
    assert not (tmp_path / "graph.html").exists()


def test_a_folder_as_the_page_path_is_refused_in_one_line(tmp_path):
    done = graph(ROOT / "configs" / "regression.yaml", "--html", tmp_path, cwd=tmp_path)
    assert done.returncode != 0
    assert "IsADirectoryError" in done.stderr and "Traceback" not in done.stderr
