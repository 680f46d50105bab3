"""Shared test fixtures: the devices to run on, and PyTorch as the reference when it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit

CUDA = trainkit.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no usable GPU"))]


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
