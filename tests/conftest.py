"""Shared test fixtures: the devices to run on, and PyTorch as the reference when it is installed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import trainkit

CUDA = trainkit.cuda.is_available()
# TRAINKIT_TEST_DEVICES=cpu (or cuda, or cpu,cuda) picks the devices; by default the GPU joins when usable.
_CHOSEN = [d.strip() for d in os.environ.get("TRAINKIT_TEST_DEVICES", "cpu,cuda").split(",") if d.strip()]
DEVICES = [d for d in ("cpu",) if d in _CHOSEN] + [
    pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no usable GPU")) for d in ("cuda",) if d in _CHOSEN
]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    """Each test that takes ``device`` runs on the CPU, and on the GPU when one is usable."""
    return request.param


@pytest.fixture
def torch():
    """PyTorch, the reference implementation; tests that compare against it skip without it."""
    return pytest.importorskip("torch")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def to_numpy(t) -> np.ndarray:
    """A trainkit or torch tensor's values as a NumPy array on the host."""
    if hasattr(t, "detach"):
        t = t.detach()
    if hasattr(t, "cpu"):
        t = t.cpu()
    return np.asarray(t.numpy())


def run_both(torch, fn, device="cpu"):
    """``fn(lib, dev)`` on trainkit (on ``device``) and on torch (on the CPU)."""
    return fn(trainkit, device), fn(torch, "cpu")


def error_of(fn, lib, dev="cpu"):
    """The exception ``fn(lib, dev)`` raises, or None."""
    try:
        fn(lib, dev)
    except Exception as err:  # noqa: BLE001  (the type is compared by the caller)
        return err
    return None


def assert_same_error(torch, fn, *words, device="cpu"):
    """Both libraries raise the same kind of exception, and both messages contain ``words``."""
    expected = error_of(fn, torch)
    got = error_of(fn, trainkit, device)
    assert expected is not None, "the reference raised nothing: the snippet does not test an error"
    assert got is not None, f"trainkit raised nothing; torch raised {type(expected).__name__}: {expected}"
    names = {cls.__name__ for cls in type(got).__mro__}
    assert type(expected).__name__ in names, f"trainkit raised {type(got).__name__}: {got}; torch: {expected!r}"
    for word in words:
        assert word.lower() in str(expected).lower(), f"torch's message lacks {word!r}: {expected}"
        assert word.lower() in str(got).lower(), f"trainkit's message lacks {word!r}: {got}"
    return got, expected


def require_reference(torch, version: str, why: str) -> None:
    """Skip when the reference PyTorch is older than ``version`` (GPU machines may carry an older one)."""
    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    want = tuple(int(p) for p in version.split(".")[:2])
    if have < want:
        pytest.skip(f"the reference torch {torch.__version__} predates {version}: {why}")


def doc_blocks(title: str, doc: str = "ecosystem.md") -> list[str]:
    """The ```python blocks of one ``##`` section of a page in docs/, to run as a user would."""
    text = (Path(__file__).resolve().parent.parent / "docs" / doc).read_text()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
