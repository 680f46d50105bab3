"""Winograd convolution against PyTorch: values and both gradients with the Winograd path forced, finite
differences in float64, double backward (which runs the im2col formulas), and the rule that picks the algorithm."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import trainkit
from trainkit import functional as tkF
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional import parallel, winograd
from trainkit.functional.im2col import geometry

RTOL, ATOL = 1e-4, 1e-5  # the suite's float32 tolerances (tests/test_conv_pool.py)


@pytest.fixture
def forced():
    """Winograd wherever it applies, whatever the size; the counter of algorithms starts from zero."""
    winograd.set_algorithm("winograd")
    winograd.ALGORITHMS_RUN.clear()
    yield winograd.ALGORITHMS_RUN
    winograd.set_algorithm(None)


def _both(torch, x, w, b, padding, upstream):
    """Output and (dx, dw, db) from trainkit and from torch for the same arrays."""
    tk = [None if a is None else trainkit.tensor(a, requires_grad=True) for a in (x, w, b)]
    th = [None if a is None else torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out_tk = tkF.conv2d(*tk, padding=padding)
    out_th = torch.nn.functional.conv2d(*th, padding=padding)
    out_tk.backward(trainkit.tensor(upstream))
    out_th.backward(torch.tensor(upstream))
    grads = [(None if a is None else a.grad.numpy(), None if c is None else c.grad.numpy()) for a, c in zip(tk, th)]
    return (out_tk.detach().numpy(), out_th.detach().numpy()), grads


SHAPES = [
    # (N, C, OC, H, W, padding): odd and even sides, sides not a multiple of the tile, a 1x1 output
    (2, 3, 4, 8, 8, 1),
    (2, 3, 5, 9, 11, 0),
    (1, 1, 1, 7, 5, 2),
    (3, 4, 2, 13, 6, 1),
    (1, 2, 3, 3, 3, 0),
    (2, 5, 3, 10, 10, 2),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_winograd_matches_torch(shape, bias, dtype, forced, torch, rng):
    n, c, oc, h, w, pad = shape
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((oc, c, 3, 3)).astype(dtype)
    b = rng.standard_normal(oc).astype(dtype) if bias else None
    upstream = rng.standard_normal((n, oc, h + 2 * pad - 2, w + 2 * pad - 2)).astype(dtype)
    (got, want), grads = _both(torch, x, wt, b, pad, upstream)
    assert forced["winograd"] == 1 and forced["im2col"] == 0
    assert got.dtype == dtype
    rtol, atol = (RTOL, ATOL) if dtype == np.float32 else (1e-10, 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    for name, (mine, theirs) in zip(("input", "weight", "bias"), grads):
        if theirs is not None:
            assert mine.dtype == dtype
            np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=10 * atol, err_msg=name)


def test_winograd_in_slices_of_the_batch_matches_torch(forced, monkeypatch, torch, rng):
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 1)  # one image per slice
    x = rng.standard_normal((3, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    upstream = rng.standard_normal((3, 6, 9, 9)).astype(np.float32)
    (got, want), grads = _both(torch, x, w, None, 1, upstream)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    for mine, theirs in grads[:2]:
        np.testing.assert_allclose(mine, theirs, rtol=RTOL, atol=10 * ATOL)


def test_the_kept_transformed_input_serves_the_weight_gradient(forced, monkeypatch, rng):
    """The forward keeps each slice's V for the weight's gradient; a backward that slices the batch differently
    (another thread count) transforms the input again; both give the same numbers as transforming it anew."""
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 1)  # one image per slice
    x = rng.standard_normal((4, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((4, 5, 9, 9)).astype(np.float32)
    geom = geometry(9, 9, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    fresh = winograd.backward(g, x, w, x.shape, geom, True, True, True)
    kept: dict = {}
    winograd.forward(x, w, None, geom, kept)
    assert sorted(kept) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    reused = winograd.backward(g, x, w, x.shape, geom, True, True, True, kept=kept)
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 2 * (16 * 8 * 25 * 4))  # two images per slice: none of the keys
    regrouped = winograd.backward(g, x, w, x.shape, geom, True, True, True, kept=kept)
    for a, b, c in zip(fresh, reused, regrouped):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-4)  # summed in other groups


def test_the_layer_keeps_the_transformed_input_only_for_the_weight_gradient(forced, rng):
    x = trainkit.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    w = trainkit.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    out = tkF.conv2d(x, w, padding=1)
    assert isinstance(out.grad_fn.extra, dict) and out.grad_fn.extra
    out.sum().backward()
    assert out.grad_fn.extra is None  # freed with the graph's saved values
    frozen = tkF.conv2d(x, w.detach(), padding=1)
    assert frozen.grad_fn.extra is None


def test_a_non_finite_gradient_after_a_winograd_forward_runs_im2col(forced, torch, rng):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    g[1, 2, 3, 4] = np.nan
    (_, _), grads = _both(torch, x, w, None, 1, g)
    for mine, theirs in grads[:2]:
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs))
        ok = ~np.isnan(theirs)
        np.testing.assert_allclose(mine[ok], theirs[ok], rtol=RTOL, atol=10 * ATOL)


def test_winograd_gives_only_the_wanted_gradients(forced, rng):
    x = trainkit.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32), requires_grad=True)
    w = trainkit.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    tkF.conv2d(x, w, padding=1).sum().backward()
    assert x.grad is not None and w.grad is None
    x2 = x.detach()
    w.requires_grad_()
    tkF.conv2d(x2, w, padding=1).sum().backward()
    assert x2.grad is None and w.grad is not None


def _error_to_scale(got, want):
    """The largest error as a share of the suite's tolerance, its atol taken relative to the values' RMS."""
    scale = np.sqrt(np.mean(want**2))
    return float(np.max(np.abs(got - want) / (ATOL * scale + RTOL * np.abs(want))))


def test_winograd_float32_error_on_a_realistic_layer_is_within_tolerance(forced, torch, rng):
    """Random normal inputs and He-initialised weights, compared with float64: F(2x2)'s rounding stays well inside
    the tolerance, as PyTorch's own float32 result does."""
    x = rng.standard_normal((4, 32, 12, 12))
    w = rng.standard_normal((48, 32, 3, 3)) * np.sqrt(2 / (32 * 9))
    upstream = rng.standard_normal((4, 48, 12, 12))
    (got, _), grads = _both(torch, *(a.astype(np.float32) for a in (x, w)), None, 1, upstream.astype(np.float32))
    (_, exact), exact_grads = _both(torch, x, w, None, 1, upstream)
    assert _error_to_scale(got, exact) < 0.5
    for (mine, _), (_, theirs) in zip(grads[:2], exact_grads[:2]):
        assert _error_to_scale(mine, theirs) < 0.5


def test_winograd_f4_is_exact_in_float64(forced, monkeypatch, torch, rng):
    monkeypatch.setattr(winograd, "TRANSFORM", winograd.F4)
    x = rng.standard_normal((2, 3, 11, 9))
    w = rng.standard_normal((4, 3, 3, 3))
    upstream = rng.standard_normal((2, 4, 11, 9))
    (got, want), grads = _both(torch, x, w, rng.standard_normal(4), 1, upstream)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for mine, theirs in grads:
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-11)


def test_winograd_gradcheck_and_double_backward(forced, rng):
    x = trainkit.tensor(rng.standard_normal((2, 2, 5, 6)), requires_grad=True)
    w = trainkit.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    b = trainkit.tensor(rng.standard_normal(3), requires_grad=True)

    def fn(x, w, b):
        return tkF.conv2d(x, w, b, padding=1)

    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    assert forced["winograd"] > 0


def test_winograd_double_backward_matches_torch(forced, torch, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 7, 7), (4, 3, 3, 3))]
    results = []
    for lib in (trainkit, torch):
        x, w = (lib.tensor(a, requires_grad=True) for a in arrays)
        conv = tkF.conv2d if lib is trainkit else torch.nn.functional.conv2d
        out = conv(x, w, padding=1)
        (gx,) = lib.autograd.grad((out**2).sum(), x, create_graph=True)
        (gx**2).sum().backward()
        results.append([gx.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------------------------------------- the rule
def _choice(x_shape, w_shape, stride=1, dilation=1, padding=1, groups=1, dtype=np.float32):
    h, w = x_shape[2:]
    geom = geometry(h, w, w_shape[2:], (stride, stride), (dilation, dilation), (padding,) * 4)
    return winograd.choose(np.zeros(x_shape, dtype), w_shape, geom, groups)


def test_the_rule_takes_winograd_for_large_stride_1_3x3_layers(monkeypatch):
    monkeypatch.delenv("TRAINKIT_CONV_ALGO", raising=False)
    assert _choice((32, 64, 32, 32), (128, 64, 3, 3)) == "winograd"  # benchmark W5: 75 MB of columns
    assert _choice((32, 128, 32, 32), (64, 128, 3, 3)) == "winograd"
    assert _choice((64, 16, 14, 14), (32, 16, 3, 3)) == "im2col"  # W2's second convolution: 7 MB of columns
    assert _choice((64, 1, 28, 28), (16, 1, 3, 3)) == "im2col"  # W2's first: one input channel
    assert _choice((32, 32, 32, 32), (64, 32, 3, 3)) == "im2col"  # 38 MB of columns
    assert _choice((512, 8, 32, 32), (32, 8, 3, 3)) == "im2col"  # 151 MB of columns, but too few input channels
    assert _choice((512, 32, 32, 32), (8, 32, 3, 3)) == "im2col"  # too few output channels
    assert _choice((16, 64, 32, 32), (64, 64, 3, 3), dtype=np.float64) == "winograd"  # 8-byte columns: 75 MB


@pytest.mark.parametrize(
    "kwargs", [{"stride": 2}, {"dilation": 2, "padding": 2}, {"groups": 2}, {"dtype": np.float16}, {"dtype": np.int64}]
)
def test_the_rule_keeps_im2col_where_winograd_does_not_apply(kwargs, forced):
    w_shape = (64, 32 if kwargs.get("groups") else 64, 3, 3)
    assert _choice((8, 64, 16, 16), w_shape, **kwargs) == "im2col"
    assert _choice((8, 64, 16, 16), (64, 64, 5, 5)) == "im2col"
    assert _choice((0, 64, 16, 16), (64, 64, 3, 3)) == "im2col"  # an empty batch


def test_the_rule_is_overridden_by_the_environment_and_by_set_algorithm(monkeypatch):
    monkeypatch.setenv("TRAINKIT_CONV_ALGO", "im2col")
    assert _choice((32, 64, 32, 32), (128, 64, 3, 3)) == "im2col"
    monkeypatch.setenv("TRAINKIT_CONV_ALGO", "winograd")
    assert _choice((1, 1, 4, 4), (1, 1, 3, 3)) == "winograd"
    try:
        winograd.set_algorithm("auto")  # the setting comes before the environment
        assert _choice((1, 1, 4, 4), (1, 1, 3, 3)) == "im2col"
    finally:
        winograd.set_algorithm(None)
    monkeypatch.setenv("TRAINKIT_CONV_ALGO", "fft")
    with pytest.raises(ValueError, match="TRAINKIT_CONV_ALGO='fft'.*auto, im2col, winograd"):
        _choice((1, 1, 4, 4), (1, 1, 3, 3))
    with pytest.raises(ValueError, match="unknown convolution algorithm 'fast'"):
        winograd.set_algorithm("fast")


def test_the_layer_uses_the_rule(monkeypatch, rng):
    monkeypatch.delenv("TRAINKIT_CONV_ALGO", raising=False)
    monkeypatch.setattr(winograd, "MIN_COLUMN_BYTES", 2 * 32 * 9 * 8 * 8 * 4)  # the first layer's columns, exactly
    winograd.ALGORITHMS_RUN.clear()
    layer = trainkit.nn.Conv2d(32, 32, 3, padding=1)
    layer(trainkit.tensor(rng.standard_normal((2, 32, 8, 8)).astype(np.float32))).sum().backward()
    trainkit.nn.Conv2d(32, 32, 3, stride=2)(trainkit.zeros(1, 32, 8, 8))
    assert winograd.ALGORITHMS_RUN == {"winograd": 1, "im2col": 1}


def test_the_benchmarks_report_the_algorithms_a_workload_ran(monkeypatch):
    monkeypatch.delenv("TRAINKIT_CONV_ALGO", raising=False)
    suite = pytest.importorskip("benchmarks.suite")
    works = {w.name: w for w in suite.WORKLOADS}
    assert suite.conv_algorithms(works["cnn_step"], "cpu") == "im2col 2"
    assert suite.conv_algorithms(works["conv_big"], "cpu") == "winograd 1"
    assert suite.conv_algorithms(works["mlp_step"], "cpu") == ""


def test_winograd_on_one_thread_matches_torch(forced, monkeypatch, torch, rng):
    monkeypatch.setattr(parallel, "THREADS", 1)
    x = rng.standard_normal((4, 3, 10, 7)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    (got, want), grads = _both(torch, x, w, b, 1, rng.standard_normal((4, 5, 10, 7)).astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    for mine, theirs in grads:
        np.testing.assert_allclose(mine, theirs, rtol=RTOL, atol=10 * ATOL)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_threads(forced, rng):
    import os

    x = trainkit.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    w = trainkit.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    want = tkF.conv2d(x, w, padding=1).numpy()  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when the convolution finishes and agrees
        ok = False
        try:
            ok = np.allclose(tkF.conv2d(x, w, padding=1).numpy(), want)
        finally:
            os._exit(0 if ok else 1)
    for _ in range(600):  # a child waiting on the parent's threads would never finish
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the convolution in the forked child did not finish in 60 s")
    assert os.waitstatus_to_exitcode(status) == 0


# an inf weight meets the zero padding in im2col (inf * 0 = nan) where torch's kernel skips the padding: unpadded
@pytest.mark.parametrize("where, padding", [("input", 1), ("weight", 0), ("gradient", 1)])
def test_an_inf_anywhere_gives_torch_s_inf_and_nan_pattern(where, padding, forced, torch, rng):
    """One inf would spread nan over a whole Winograd tile: such calls run im2col, as torch computes them."""
    x = rng.standard_normal((2, 16, 10, 10)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((2, 16, 10 - 2 + 2 * padding, 10 - 2 + 2 * padding)).astype(np.float32)
    {"input": x, "weight": w, "gradient": g}[where].flat[37] = np.inf
    xt, wt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    torch.nn.functional.conv2d(xt, wt, padding=padding).backward(torch.from_numpy(g))
    xk, wk = trainkit.from_numpy(x).requires_grad_(), trainkit.from_numpy(w).requires_grad_()
    out = tkF.conv2d(xk, wk, padding=padding)
    out.backward(trainkit.from_numpy(g))
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=padding).numpy()
    for got, ref in (
        (out.detach().numpy(), want),
        (xk.grad.numpy(), xt.grad.numpy()),
        (wk.grad.numpy(), wt.grad.numpy()),
    ):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))


def test_the_environment_keeps_convolutions_on_the_calling_thread():
    code = (
        "import threading, numpy as np, trainkit, trainkit.nn.functional as F\n"
        "from trainkit.functional import parallel, winograd\n"
        "winograd.set_algorithm('winograd')\n"
        "x = trainkit.randn(8, 32, 32, 32, requires_grad=True)\n"
        "F.conv2d(x, trainkit.randn(32, 32, 3, 3), padding=1).sum().backward()\n"
        "F.unfold(trainkit.randn(8, 32, 32, 32), 3, padding=1)\n"
        "print(parallel.THREADS, sum(t.name.startswith('trainkit-conv') for t in threading.enumerate()))\n"
    )
    for value, threads in (("1", "0"), ("2", "2")):
        env = dict(os.environ, TRAINKIT_CONV_THREADS=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == [value, threads]


@pytest.mark.parametrize("value", ["two", "0", "-1", "1.5"])
def test_a_bad_thread_count_in_the_environment_is_named(value):
    env = dict(os.environ, TRAINKIT_CONV_THREADS=value)
    out = subprocess.run([sys.executable, "-c", "import trainkit"], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert f"TRAINKIT_CONV_THREADS={value!r} is not a thread count" in out.stderr
