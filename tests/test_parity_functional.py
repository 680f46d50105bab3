"""nn.functional calls against PyTorch at their edges: losses with every target ignored, integer inputs, pooling
of inf and nan, the activations without integer kernels. Each case compares outputs, node names, input gradients
or the exception class, with ``check`` from ``test_parity_reductions.py``."""

from __future__ import annotations

import numpy as np
import pytest
from test_parity_reductions import check

_rng = np.random.default_rng(0)
LOGITS = _rng.standard_normal((4, 3)).astype(np.float32)
TARGET = _rng.standard_normal((4, 3)).astype(np.float32)
IGNORED = np.full(4, -100, np.int64)
SOME_IGNORED = np.array([0, -100, 1, 2])
WEIGHT = np.array([1.0, 2.0, 0.5], np.float32)
INTS = np.array([[1, 2], [3, 4]], np.int64)
IMAGE = _rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
INF_IMAGE = IMAGE.copy()
INF_IMAGE[0, 0, 1, 1], INF_IMAGE[0, 1, 2, 3] = np.inf, -np.inf
NAN_IMAGE = IMAGE.copy()
NAN_IMAGE[0, 0, 0, 0] = np.nan


def F(lib):
    return lib.nn.functional


def _weighted(fn):
    """``fn`` with the class weights passed as a constant (torch refuses a weight that requires grad)."""
    return lambda L, x, t: fn(L, x, t, L.tensor(WEIGHT))


CASES = {
    # every target ignored: the mean is nan, the gradient zero
    "nll-all-ignored-mean": (lambda L, x, t: F(L).nll_loss(x, t), LOGITS, IGNORED),
    "nll-all-ignored-sum": (lambda L, x, t: F(L).nll_loss(x, t, reduction="sum"), LOGITS, IGNORED),
    "nll-all-ignored-weighted": (_weighted(lambda L, x, t, w: F(L).nll_loss(x, t, weight=w)), LOGITS, IGNORED),
    "ce-all-ignored-mean": (lambda L, x, t: F(L).cross_entropy(x, t), LOGITS, IGNORED),
    "ce-all-ignored-none": (lambda L, x, t: F(L).cross_entropy(x, t, reduction="none"), LOGITS, IGNORED),
    "ce-all-ignored-weighted": (_weighted(lambda L, x, t, w: F(L).cross_entropy(x, t, weight=w)), LOGITS, IGNORED),
    "ce-some-ignored-mean": (lambda L, x, t: F(L).cross_entropy(x, t), LOGITS, SOME_IGNORED),
    "ce-other-ignore-index": (lambda L, x, t: F(L).cross_entropy(x, t, ignore_index=2), LOGITS, np.full(4, 2)),
    "ce-4d-all-ignored": (
        lambda L, x, t: F(L).cross_entropy(x, t),
        IMAGE[:, :, :2, :2],
        np.full((1, 2, 2), -100, np.int64),
    ),
    # integer inputs: no kernel in torch
    "mse-int": (lambda L, x, t: F(L).mse_loss(x, t), INTS, INTS),
    "huber-int": (lambda L, x, t: F(L).huber_loss(x, t), INTS, INTS),
    "smooth-l1-int": (lambda L, x, t: F(L).smooth_l1_loss(x, t, beta=0.5), INTS, INTS),
    "ce-int-logits": (lambda L, x, t: F(L).cross_entropy(x, t), INTS, np.array([0, 1])),
    "leaky-relu-int": (lambda L, x: F(L).leaky_relu(x), INTS),
    "gelu-bool": (lambda L, x: F(L).gelu(x), np.array([True, False])),
    "softplus-int": (lambda L, x: F(L).softplus(x), INTS),
    # adaptive average pooling and 'area' interpolation: an inf stays in its own windows
    "adaptive-avg-inf": (lambda L, x: F(L).adaptive_avg_pool2d(x, 2), INF_IMAGE),
    "adaptive-avg-inf-overlap": (lambda L, x: F(L).adaptive_avg_pool2d(x, (3, 4)), INF_IMAGE),
    "adaptive-avg-inf-upsample": (lambda L, x: F(L).adaptive_avg_pool2d(x, 7), INF_IMAGE),
    "adaptive-avg-nan": (lambda L, x: F(L).adaptive_avg_pool2d(x, 3), NAN_IMAGE),
    "adaptive-avg-inf-unbatched": (lambda L, x: F(L).adaptive_avg_pool2d(x, (None, 2)), INF_IMAGE[0]),
    "area-inf-down": (lambda L, x: F(L).interpolate(x, scale_factor=0.5, mode="area"), INF_IMAGE),
    "area-nan-size": (lambda L, x: F(L).interpolate(x, size=(7, 4), mode="area"), NAN_IMAGE),
    "max-pool-inf": (lambda L, x: F(L).max_pool2d(x, 3, 2, 1, ceil_mode=True), INF_IMAGE),
    "avg-pool-inf": (lambda L, x: F(L).avg_pool2d(x, 3, 2, 1, count_include_pad=False), INF_IMAGE),
    # dropout of a 0-d tensor (times 0: the mask is random, its node and shape are what is compared)
    "dropout-0d": (lambda L, x: F(L).dropout(x, 0.5) * 0, np.array(2.5, np.float32)),
    "dropout-0d-p1": (lambda L, x: F(L).dropout(x, 1.0), np.array(2.5, np.float32)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, torch):
    fn, *arrays = CASES[name]
    check(torch, fn, *arrays)


def test_unbatched_unfold_and_fold_as_torch():
    import torch

    import trainkit

    x = np.random.default_rng(0).normal(size=(2, 5, 5)).astype(np.float32)
    outs = {}
    for lib in (trainkit, torch):
        t = lib.tensor(x, requires_grad=True)
        cols = lib.nn.functional.unfold(t, 2, padding=1)
        back = lib.nn.functional.fold(cols * 2, (5, 5), 2, padding=1)
        back.sum().backward()
        outs[lib.__name__] = (cols, back, t.grad)
        assert type(cols.grad_fn).__name__ == "Im2ColBackward0" and type(back.grad_fn).__name__ == "Col2ImBackward0"
    for a, b in zip(outs["trainkit"], outs["torch"]):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
