"""docs/pytorch-surface.md lists exactly what the namespaces hold, so that it cannot drift from the code."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

import trainkit

DOC = (Path(__file__).resolve().parent.parent / "docs" / "pytorch-surface.md").read_text()


def _section(title: str) -> tuple[int, set[str]]:
    start = DOC.index(title)
    body = DOC[start : DOC.index("\n## ", start + 3)]
    count = int(re.search(r"\((\d+)", body.splitlines()[0]).group(1))
    first = body.split("\n", 1)[1].split("; `nn.init`")[0]
    return count, set(re.findall(r"`([A-Za-z_0-9]+)`", first))


@pytest.mark.parametrize(
    "title,names",
    [
        (
            "## `trainkit` (",
            lambda: {
                n
                for n in dir(trainkit)
                if not n.startswith("_") and not isinstance(getattr(trainkit, n), types.ModuleType)
            },
        ),
        (
            "## `Tensor` methods",
            lambda: {n for n in dir(trainkit.Tensor) if not n.startswith("_")} | {"__getitem__", "__setitem__"},
        ),
        ("## `trainkit.nn` (", lambda: set(trainkit.layers.__all__) - {"functional", "init"}),
        ("## `trainkit.nn.functional`", lambda: set(trainkit.nn.functional.__all__)),
    ],
    ids=["trainkit", "Tensor", "nn", "functional"],
)
def test_listed_names_are_the_namespace(title, names):
    count, listed = _section(title)
    actual = names()
    assert listed == actual, f"listed but missing: {sorted(listed - actual)}; not listed: {sorted(actual - listed)}"
    assert count == len(actual)
