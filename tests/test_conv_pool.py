"""Convolution and pooling against PyTorch: values, gradients, indices, node names, errors, layers and their init.

Trainkit runs on the ``device`` fixture, torch on the CPU, both on the same float32 inputs; float64 finite
differences check each function's first and second derivatives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit import functional as tkF
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional import conv
from trainkit.layers.conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, MaxPool2d

RTOL, ATOL = 1e-4, 1e-5


def _node_name(t) -> str | None:
    return None if t.grad_fn is None else t.grad_fn.name()


def _compare(torch, rng, device, tk_fn, th_fn, shapes, values=None):
    """Run both functions on the same float32 inputs (None stays None), then backward from the same upstream
    gradient; outputs, their dtype and node name, and every input's gradient must agree."""
    arrays = values or [None if s is None else rng.standard_normal(s).astype(np.float32) for s in shapes]
    tk_in = [None if a is None else trainkit.tensor(a, device=device, requires_grad=True) for a in arrays]
    th_in = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    tk_out, th_out = tk_fn(*tk_in), th_fn(*th_in)
    assert tuple(tk_out.shape) == tuple(th_out.shape)
    assert tk_out.dtype == trainkit.float32
    assert _node_name(tk_out) == _node_name(th_out)
    np.testing.assert_allclose(to_numpy(tk_out), to_numpy(th_out), rtol=RTOL, atol=ATOL)
    upstream = rng.standard_normal(tuple(th_out.shape)).astype(np.float32)
    tk_out.backward(trainkit.tensor(upstream, device=device))
    th_out.backward(torch.tensor(upstream))
    for i, (a, b) in enumerate(zip(tk_in, th_in)):
        if a is not None:
            assert a.grad.dtype == trainkit.float32, f"input {i}"
            np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), rtol=RTOL, atol=1e-4, err_msg=f"input {i}")
    return tk_out, th_out


# ----------------------------------------------------------------------------------------------------- conv2d
CONV_CASES = [
    # (input shape, weight shape, bias, keyword arguments)
    ((2, 3, 8, 8), (4, 3, 3, 3), True, {}),
    ((2, 3, 8, 8), (4, 3, 3, 3), False, {"padding": 1}),
    ((2, 3, 9, 7), (5, 3, 3, 2), True, {"stride": 2, "padding": (1, 2)}),
    ((1, 2, 7, 9), (3, 2, 2, 3), True, {"stride": (2, 3), "padding": (2, 0)}),
    ((2, 3, 8, 6), (4, 3, 3, 3), True, {"padding": "same"}),
    ((2, 3, 8, 6), (4, 3, 4, 2), False, {"padding": "same"}),  # even kernels: the extra padding goes last
    ((2, 3, 9, 9), (4, 3, 3, 3), True, {"padding": "same", "dilation": (2, 1)}),
    ((2, 3, 8, 6), (4, 3, 3, 3), True, {"padding": "valid"}),
    ((2, 3, 10, 9), (4, 3, 3, 2), True, {"dilation": 2, "padding": 1}),
    ((2, 4, 7, 7), (6, 2, 3, 3), True, {"groups": 2, "padding": 1}),
    ((2, 6, 7, 8), (6, 1, 3, 3), False, {"groups": 6, "stride": 2}),  # depthwise
    ((2, 4, 9, 8), (8, 2, 2, 3), True, {"groups": 2, "stride": (2, 1), "dilation": (1, 2), "padding": (1, 0)}),
    ((3, 5, 6, 6), (4, 5, 1, 1), True, {}),  # 1x1: the input's own layout is the column matrix
    ((2, 3, 5, 5), (4, 3, 5, 5), True, {}),  # kernel as large as the input: a 1x1 output
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")  # torch's own notice
@pytest.mark.parametrize("xs, ws, bias, kwargs", CONV_CASES, ids=[str(c[3]) + str(c[1]) for c in CONV_CASES])
def test_conv2d_values_and_grads_match_torch(xs, ws, bias, kwargs, device, torch, rng):
    bs = (ws[0],) if bias else None
    _compare(
        torch,
        rng,
        device,
        lambda x, w, b: tkF.conv2d(x, w, b, **kwargs),
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, **kwargs),
        [xs, ws, bs],
    )


@pytest.mark.parametrize("cache_bytes", [1, 3000])  # one image at a time, and slices of two with a shorter last
def test_conv2d_input_grad_in_slices_of_the_batch_matches_torch(cache_bytes, monkeypatch, device, torch, rng):
    monkeypatch.setattr(conv, "_CACHE_BYTES", cache_bytes)
    _compare(
        torch,
        rng,
        device,
        lambda x, w, b: tkF.conv2d(x, w, b, stride=2, padding=1),
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=2, padding=1),
        [(5, 3, 7, 6), (4, 3, 3, 3), (4,)],
    )


def test_conv2d_unbatched_input_is_squeezed_back_as_in_torch(device, torch, rng):
    out, _ = _compare(
        torch,
        rng,
        device,
        lambda x, w, b: tkF.conv2d(x, w, b, padding=1),
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding=1),
        [(3, 6, 5), (4, 3, 3, 3), (4,)],
    )
    assert _node_name(out) == "SqueezeBackward1"


def test_conv2d_node_lists_a_missing_bias_as_torch_does(torch):
    x = trainkit.randn(1, 2, 4, 4, requires_grad=True)
    w = trainkit.randn(3, 2, 3, 3, requires_grad=True)
    out = tkF.conv2d(x, w)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    assert len(out.grad_fn.next_functions) == 3 and out.grad_fn.next_functions[2] == (None, 0)
    assert [fn is not None for fn, _ in out.grad_fn.next_functions] == [True, True, False]


def test_conv2d_gives_only_the_wanted_gradients(torch, rng):
    x = trainkit.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    w = trainkit.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    tkF.conv2d(x, w).sum().backward()
    assert x.grad is None and w.grad is not None
    xt = torch.tensor(x.numpy())
    wt = torch.tensor(w.detach().numpy(), requires_grad=True)
    torch.nn.functional.conv2d(xt, wt).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=RTOL, atol=1e-4)


@pytest.mark.parametrize("channels", [1, 3, 8, 9])  # up to 8 channels of 3x3: the weight's gradient image by image
@pytest.mark.parametrize("kwargs", [{"padding": 1}, {"stride": 2}, {"padding": 2, "dilation": 2}])
def test_conv2d_first_layer_weight_and_bias_grads_match_torch(channels, kwargs, torch, rng):
    x = rng.standard_normal((5, channels, 11, 9)).astype(np.float32)
    w = rng.standard_normal((6, channels, 3, 3)).astype(np.float32)
    g = rng.standard_normal(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **kwargs).shape)
    g = g.astype(np.float32)
    if "padding" not in kwargs:  # with zero padding im2col's 0 * inf is nan (docs/pytorch-surface.md)
        g[1, 2, 0, 3] = np.inf  # inf and nan patterns as torch's too
    grads = []
    for lib, conv2d in ((trainkit, tkF.conv2d), (torch, torch.nn.functional.conv2d)):
        wt, bt = lib.tensor(w, requires_grad=True), lib.zeros(6, requires_grad=True)
        conv2d(lib.tensor(x), wt, bt, **kwargs).backward(lib.tensor(g))
        grads.append((wt.grad.numpy(), bt.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs))
        np.testing.assert_array_equal(np.isinf(mine), np.isinf(theirs))
        ok = np.isfinite(theirs)
        np.testing.assert_allclose(mine[ok], theirs[ok], rtol=RTOL, atol=1e-4)


def test_conv2d_without_grad_mode_records_nothing():
    x = trainkit.randn(1, 2, 5, 5, requires_grad=True)
    w = trainkit.randn(3, 2, 3, 3, requires_grad=True)
    with trainkit.no_grad():
        out = tkF.conv2d(x, w)
    assert out.grad_fn is None and not out.requires_grad


def test_conv2d_sees_its_input_changed_in_place():
    x = trainkit.randn(1, 2, 5, 5)
    w = trainkit.randn(3, 2, 3, 3, requires_grad=True)
    out = tkF.conv2d(x, w)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_conv2d_keeps_float64_and_integers_as_torch(torch):
    x = trainkit.ones(1, 1, 4, 4, dtype=trainkit.float64)
    assert tkF.conv2d(x, trainkit.ones(1, 1, 3, 3, dtype=trainkit.float64)).dtype == trainkit.float64
    xi = np.arange(32).reshape(1, 2, 4, 4)
    wi = np.arange(18).reshape(1, 2, 3, 3)
    got = tkF.conv2d(trainkit.tensor(xi), trainkit.tensor(wi))
    expected = torch.nn.functional.conv2d(torch.tensor(xi), torch.tensor(wi))
    assert got.dtype == trainkit.int64
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


CONV_ERRORS = [
    ((2, 4, 8, 8), (6, 3, 3, 3), {}, ("weight of size [6, 3, 3, 3]", "input[2, 4, 8, 8]", "3 channels")),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"groups": 3}, ("groups=3", "12 channels")),
    ((2, 4, 8, 8), (5, 2, 3, 3), {"groups": 2}, ("divisible by 2", "[5, 2, 3, 3]")),
    ((2, 4, 8, 8), (6, 4, 9, 9), {}, ("(8 x 8)", "(9 x 9)", "Kernel size can't be greater")),
    ((2, 4, 4, 4), (6, 4, 3, 3), {"dilation": 2}, ("(4 x 4)", "(5 x 5)")),
    ((8, 8), (6, 4, 3, 3), {}, ("Expected 3D (unbatched) or 4D (batched) input", "[8, 8]")),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"padding": "same", "stride": 2}, ("not supported for strided",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"padding": "full"}, ("Invalid padding string",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"padding": -1}, ("negative padding",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"stride": 0}, ("non-positive stride",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"dilation": 0}, ("non-positive dilation",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"groups": 0}, ("non-positive groups",)),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"stride": (1, 2, 3)}, ("stride", "[1, 2, 3]")),
]


@pytest.mark.parametrize("xs, ws, kwargs, words", CONV_ERRORS, ids=[str(e[3][0]) for e in CONV_ERRORS])
def test_conv2d_errors_match_torch(xs, ws, kwargs, words, torch):
    def fn(lib, dev):
        return (
            lib.nn.functional.conv2d(lib.ones(*xs), lib.ones(*ws), **kwargs)
            if lib is torch
            else tkF.conv2d(trainkit.ones(*xs), trainkit.ones(*ws), **kwargs)
        )

    assert_same_error(torch, fn, *words)


def test_conv2d_bias_and_dtype_errors_match_torch(torch):
    def bad_bias(lib, dev):
        conv = torch.nn.functional.conv2d if lib is torch else tkF.conv2d
        return conv(lib.ones(2, 4, 8, 8), lib.ones(6, 4, 3, 3), lib.ones(5))

    assert_same_error(torch, bad_bias, "expected bias to be 1-dimensional with 6 elements", "[5]")

    def mixed(lib, dev):
        conv = torch.nn.functional.conv2d if lib is torch else tkF.conv2d
        return conv(lib.ones(1, 1, 4, 4), lib.ones(1, 1, 3, 3, dtype=lib.float64))

    assert_same_error(torch, mixed, "float")


# ---------------------------------------------------------------------------------------------- max pooling
MAX_CASES = [
    ((2, 3, 8, 8), {"kernel_size": 2}),
    ((2, 3, 9, 7), {"kernel_size": 3, "stride": 2}),
    ((2, 3, 7, 7), {"kernel_size": 3, "stride": 1}),  # overlapping windows
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 2, 8, 8), {"kernel_size": 2, "stride": 3, "ceil_mode": True}),
    ((2, 2, 9, 10), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1), "dilation": (2, 1)}),
    ((2, 2, 11, 11), {"kernel_size": 3, "stride": 2, "dilation": 2, "padding": 1, "ceil_mode": True}),
    ((3, 7, 6), {"kernel_size": 2, "stride": (1, 2)}),  # unbatched
]


@pytest.mark.parametrize("shape, kwargs", MAX_CASES, ids=[str(c[1]) for c in MAX_CASES])
def test_max_pool2d_values_indices_and_grads_match_torch(shape, kwargs, device, torch, rng):
    _compare(
        torch,
        rng,
        device,
        lambda x: tkF.max_pool2d(x, **kwargs),
        lambda x: torch.nn.functional.max_pool2d(x, **kwargs),
        [shape],
    )
    x = rng.standard_normal(shape).astype(np.float32)
    _, tk_idx = tkF.max_pool2d(trainkit.tensor(x, device=device), return_indices=True, **kwargs)
    _, th_idx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
    assert tk_idx.dtype == trainkit.int64
    np.testing.assert_array_equal(to_numpy(tk_idx), th_idx.numpy())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 1, "padding": 1},
        {"kernel_size": 2, "stride": 1, "ceil_mode": True},
    ],
)
def test_max_pool2d_ties_pick_the_same_element_as_torch(kwargs, device, torch, rng):
    # few distinct values: many windows hold their maximum more than once, and overlapping windows share it
    x = rng.integers(0, 3, (2, 2, 6, 6)).astype(np.float32)
    _compare(
        torch,
        rng,
        device,
        lambda t: tkF.max_pool2d(t, **kwargs),
        lambda t: torch.nn.functional.max_pool2d(t, **kwargs),
        None,
        values=[x],
    )
    _, tk_idx = tkF.max_pool2d(trainkit.tensor(x, device=device), return_indices=True, **kwargs)
    _, th_idx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
    np.testing.assert_array_equal(to_numpy(tk_idx), th_idx.numpy())


def test_max_pool2d_windows_of_minus_inf_and_nan_as_torch(torch):
    x = np.full((1, 1, 3, 3), -np.inf, dtype=np.float32)
    x[0, 0, 2, 2] = np.nan
    for kwargs in ({"kernel_size": 2, "stride": 2, "padding": 1}, {"kernel_size": 2, "stride": 1}):
        tk_out, tk_idx = tkF.max_pool2d(trainkit.tensor(x), return_indices=True, **kwargs)
        th_out, th_idx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
        np.testing.assert_array_equal(tk_out.numpy(), th_out.numpy())
        np.testing.assert_array_equal(tk_idx.numpy(), th_idx.numpy())
    y = np.array([[[[1.0, np.nan], [np.nan, 1.0]]]], dtype=np.float32)
    _, tk_idx = tkF.max_pool2d(trainkit.tensor(y), 2, return_indices=True)
    _, th_idx = torch.nn.functional.max_pool2d(torch.tensor(y), 2, return_indices=True)
    assert tk_idx.numpy().item() == th_idx.numpy().item()


def test_max_pool2d_on_integers_matches_torch(torch):
    x = np.arange(-20, 28).reshape(1, 3, 4, 4)[:, :, ::-1].copy()
    got = tkF.max_pool2d(trainkit.tensor(x), 3, stride=1, padding=1)
    assert got.dtype == trainkit.int64
    np.testing.assert_array_equal(got.numpy(), torch.nn.functional.max_pool2d(torch.tensor(x), 3, 1, 1).numpy())


POOL_ERRORS = [
    ("max_pool2d", (2, 4, 8, 8), (3,), {"padding": 2}, ("pad should be at most half",)),
    ("max_pool2d", (2, 4, 8, 8), (9,), {}, ("Output size is too small", "(4x8x8)")),
    ("max_pool2d", (2, 4, 9, 9), (3,), {"padding": 2, "dilation": 2}, ("pad should be smaller than or equal",)),
    ("max_pool2d", (2, 4, 8, 8), (2,), {"dilation": 0}, ("dilation should be greater than zero",)),
    ("max_pool2d", (2, 4, 8, 8), (0,), {}, ("stride should not be zero",)),
    ("max_pool2d", (2, 4, 8, 8), (0,), {"stride": 1}, ("kernel size should be greater than zero",)),
    ("max_pool2d", (2, 4, 8, 8), ((2, 2, 2),), {}, ("kernel_size must either be a single int",)),
    ("max_pool2d", (2, 0, 8, 8), (2,), {}, ("3D or 4D", "[2, 0, 8, 8]")),
    ("avg_pool2d", (2, 4, 8, 8), (3,), {"padding": 2}, ("pad should be at most half",)),
    ("avg_pool2d", (2, 4, 8, 8), (9,), {}, ("Output size is too small",)),
]


@pytest.mark.parametrize("name, shape, args, kwargs, words", POOL_ERRORS, ids=[e[4][0] for e in POOL_ERRORS])
def test_pooling_errors_match_torch(name, shape, args, kwargs, words, torch):
    def fn(lib, dev):
        pool = getattr(torch.nn.functional if lib is torch else tkF, name)
        return pool(lib.ones(*shape), *args, **kwargs)

    assert_same_error(torch, fn, *words)


# ---------------------------------------------------------------------------------------------- avg pooling
AVG_CASES = [
    ((2, 3, 8, 8), {"kernel_size": 2}),
    ((2, 3, 7, 7), {"kernel_size": 3, "stride": 1}),
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((2, 3, 8, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ((2, 3, 9, 10), {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 1), "divisor_override": 5}),
    ((3, 7, 6), {"kernel_size": 2, "stride": 1}),
]


@pytest.mark.parametrize("shape, kwargs", AVG_CASES, ids=[str(c[1]) for c in AVG_CASES])
def test_avg_pool2d_values_and_grads_match_torch(shape, kwargs, device, torch, rng):
    _compare(
        torch,
        rng,
        device,
        lambda x: tkF.avg_pool2d(x, **kwargs),
        lambda x: torch.nn.functional.avg_pool2d(x, **kwargs),
        [shape],
    )


def test_avg_pool2d_on_integers_truncates_as_torch(torch):
    x = np.array([[[[-7, 3, 5], [2, 9, -1], [4, 4, 4]]]])
    got = tkF.avg_pool2d(trainkit.tensor(x), 2, stride=1)
    assert got.dtype == trainkit.int64
    np.testing.assert_array_equal(got.numpy(), torch.nn.functional.avg_pool2d(torch.tensor(x), 2, 1).numpy())


# ------------------------------------------------------------------------------------- adaptive avg pooling
ADAPTIVE_CASES = [
    ((2, 3, 8, 8), 4),  # divisible
    ((2, 3, 9, 7), (4, 3)),  # not divisible: windows overlap
    ((2, 3, 5, 6), (7, 8)),  # larger than the input
    ((2, 3, 9, 7), (5, None)),
    ((3, 10, 6), (3, 2)),  # unbatched
    ((2, 3, 9, 7), 1),  # a plain mean in torch
    ((2, 3, 9, 7), (1, 3)),
]


@pytest.mark.parametrize("shape, size", ADAPTIVE_CASES, ids=[str(c[1]) for c in ADAPTIVE_CASES])
def test_adaptive_avg_pool2d_values_and_grads_match_torch(shape, size, device, torch, rng):
    _compare(
        torch,
        rng,
        device,
        lambda x: tkF.adaptive_avg_pool2d(x, size),
        lambda x: torch.nn.functional.adaptive_avg_pool2d(x, size),
        [shape],
    )


def test_adaptive_avg_pool2d_errors_match_torch(torch):
    def flat(lib, dev):
        pool = torch.nn.functional.adaptive_avg_pool2d if lib is torch else tkF.adaptive_avg_pool2d
        return pool(lib.ones(8, 8), 2)

    assert_same_error(torch, flat, "Expected 3D or 4D tensor", "[8, 8]")

    def three(lib, dev):
        pool = torch.nn.functional.adaptive_avg_pool2d if lib is torch else tkF.adaptive_avg_pool2d
        return pool(lib.ones(1, 2, 8, 8), (2, 2, 2))

    assert_same_error(torch, three, "output_size must be 2")


# ------------------------------------------------------------------------------------------- unfold / fold
def test_unfold_and_fold_match_torch(device, torch, rng):
    kwargs = {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}
    _compare(
        torch,
        rng,
        device,
        lambda x: tkF.unfold(x, **kwargs),
        lambda x: torch.nn.functional.unfold(x, **kwargs),
        [(2, 3, 7, 8)],
    )
    cols = torch.nn.functional.unfold(torch.zeros(2, 3, 7, 8), **kwargs).shape
    _compare(
        torch,
        rng,
        device,
        lambda x: tkF.fold(x, (7, 8), **kwargs),
        lambda x: torch.nn.functional.fold(x, (7, 8), **kwargs),
        [tuple(cols)],
    )


# ------------------------------------------------------------------------- finite differences (float64)
def _f64(rng, device, *shape, distinct=False):
    if distinct:  # no two values within 0.2: max pooling stays away from ties under the finite differences
        n = math.prod(shape)
        values = ((rng.permutation(n) - n / 2) * 0.25).reshape(shape)
    else:
        values = rng.standard_normal(shape)
    return trainkit.tensor(values, dtype=trainkit.float64, device=device, requires_grad=True)


GRADCHECK_CASES = {
    "conv2d": (
        lambda x, w, b: tkF.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
        [(2, 4, 5, 4), (4, 2, 3, 2), (4,)],
    ),
    "conv2d_same": (lambda x, w: tkF.conv2d(x, w, padding="same"), [(1, 2, 4, 5), (3, 2, 2, 3)]),
    "max_pool2d": (lambda x: tkF.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), [(2, 2, 6, 5)]),
    "max_pool2d_overlap": (lambda x: tkF.max_pool2d(x, 2, stride=1, dilation=(1, 2)), [(1, 2, 4, 5)]),
    "avg_pool2d": (
        lambda x: tkF.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        [(2, 2, 6, 5)],
    ),
    "adaptive_avg_pool2d": (lambda x: tkF.adaptive_avg_pool2d(x, (4, 3)), [(2, 2, 6, 5)]),
    "unfold": (lambda x: tkF.unfold(x, 2, padding=1, stride=(1, 2)), [(1, 2, 4, 5)]),
    "fold": (lambda x: tkF.fold(x, (4, 5), 2, padding=1), [(1, 8, 30)]),
}


@pytest.mark.parametrize("name", list(GRADCHECK_CASES))
def test_gradcheck_and_gradgradcheck(name, device, rng):
    fn, shapes = GRADCHECK_CASES[name]
    inputs = tuple(_f64(rng, device, *s, distinct=name.startswith("max")) for s in shapes)
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)  # the backward formulas are differentiable: create_graph works


def test_double_backward_through_conv2d_matches_torch(torch, rng):
    x0 = rng.standard_normal((2, 3, 5, 5))
    w0 = rng.standard_normal((4, 3, 3, 3))

    def gradient_penalty(lib, x, w):
        out = (lib.nn.functional.conv2d if lib is torch else tkF.conv2d)(x, w, padding=1, stride=2)
        (gx,) = lib.autograd.grad((out * out).sum(), x, create_graph=True)
        return (gx * gx).sum()

    tk_x, tk_w = (trainkit.tensor(a, requires_grad=True) for a in (x0, w0))
    th_x, th_w = (torch.tensor(a, requires_grad=True) for a in (x0, w0))
    gradient_penalty(trainkit, tk_x, tk_w).backward()
    gradient_penalty(torch, th_x, th_w).backward()
    np.testing.assert_allclose(tk_x.grad.numpy(), th_x.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tk_w.grad.numpy(), th_w.grad.numpy(), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------- layers
LAYER_CASES = [
    ("Conv2d", (3, 8, 3), {}),
    ("Conv2d", (4, 8, (3, 5)), {"stride": 2, "padding": (1, 2), "dilation": 2, "groups": 2, "bias": False}),
    ("Conv2d", (4, 6, 3), {"padding": "same", "padding_mode": "reflect"}),
    ("Conv2d", (4, 6, (2, 3)), {"padding": "valid"}),
    ("Conv2d", (4, 6, 3), {"padding": 2, "padding_mode": "circular", "stride": 2}),
    ("Conv2d", (4, 6, 3), {"padding": (1, 2), "padding_mode": "replicate"}),
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", ((2, 3),), {"stride": 1, "padding": 1, "dilation": 2, "ceil_mode": True}),
    ("AvgPool2d", (2,), {}),
    ("AvgPool2d", ((2, 3),), {"stride": 1, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("AdaptiveAvgPool2d", ((5, None),), {}),
    ("AdaptiveAvgPool2d", (1,), {}),
]
LAYERS = {"Conv2d": Conv2d, "MaxPool2d": MaxPool2d, "AvgPool2d": AvgPool2d, "AdaptiveAvgPool2d": AdaptiveAvgPool2d}


@pytest.mark.parametrize("name, args, kwargs", LAYER_CASES, ids=[f"{c[0]}{c[1]}{c[2]}" for c in LAYER_CASES])
def test_layers_repr_and_forward_match_torch(name, args, kwargs, device, torch, rng):
    tk_layer = LAYERS[name](*args, **kwargs)
    th_layer = getattr(torch.nn, name)(*args, **kwargs)
    assert repr(tk_layer) == repr(th_layer)
    with torch.no_grad():  # the same weights in both
        for (_, p), (_, q) in zip(tk_layer.named_parameters(), th_layer.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    params = list(tk_layer.parameters())
    tk_layer.to(device)
    channels = args[0] if name == "Conv2d" else 3
    _compare(torch, rng, device, tk_layer, th_layer, [(2, channels, 9, 8)])
    for p, q in zip(params, th_layer.parameters()):
        np.testing.assert_allclose(to_numpy(p.grad), q.grad.numpy(), rtol=RTOL, atol=1e-4)


def test_max_pool_layer_returns_indices():
    out, idx = MaxPool2d(2, return_indices=True)(trainkit.arange(16.0).reshape(1, 1, 4, 4))
    assert idx.tolist() == [[[[5, 7], [13, 15]]]]
    assert out.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]


def test_conv2d_default_init_follows_torch_bounds(torch):
    trainkit.manual_seed(0)
    layer = Conv2d(16, 32, 3)
    reference = torch.nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    # torch's own draw lies within the same bound: kaiming_uniform_(a=sqrt(5)) gives 1/sqrt(fan_in)
    assert np.abs(reference.weight.detach().numpy()).max() <= bound
    assert np.abs(reference.bias.detach().numpy()).max() <= bound
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.98 * bound  # 4608 draws come close to the bound
    assert abs(w.mean()) < 0.05 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound  # uniform: std = bound / sqrt(3)
    assert layer.weight.dtype == trainkit.float32 and layer.weight.requires_grad and layer.weight.is_leaf
    grouped = Conv2d(8, 4, (3, 2), groups=4, bias=False)
    assert tuple(grouped.weight.shape) == (4, 2, 3, 2) and grouped.bias is None
    assert np.abs(grouped.weight.detach().numpy()).max() <= 1 / math.sqrt(2 * 3 * 2)


def test_conv2d_init_draws_from_trainkit_seeded_stream():
    trainkit.manual_seed(7)
    first = Conv2d(3, 4, 3).weight.detach().numpy()
    trainkit.manual_seed(7)
    again = Conv2d(3, 4, 3).weight.detach().numpy()
    np.testing.assert_array_equal(first, again)
    assert Conv2d(3, 4, 3, dtype=trainkit.float64).weight.dtype == trainkit.float64


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"groups": 0}, "groups must be a positive integer"),
        ({"groups": 3}, "in_channels must be divisible by groups"),
        ({"padding": "full"}, "Invalid padding string"),
        ({"padding": "same", "stride": 2}, "not supported for strided"),
        ({"padding_mode": "mirror"}, "padding_mode must be one of"),
    ],
)
def test_conv2d_layer_errors_match_torch(kwargs, message, torch):
    assert_same_error(torch, lambda lib, dev: (torch.nn.Conv2d if lib is torch else Conv2d)(4, 6, 3, **kwargs), message)


def test_conv2d_of_an_empty_batch_has_empty_and_zero_grads_as_torch(torch):
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    x, tw = trainkit.zeros(0, 3, 5, 5, requires_grad=True), trainkit.tensor(w, requires_grad=True)
    tkF.conv2d(x, tw, padding=1).sum().backward()
    xt, wt = torch.zeros(0, 3, 5, 5, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(xt, wt, padding=1).sum().backward()
    assert tuple(x.grad.shape) == tuple(xt.grad.shape)
    np.testing.assert_array_equal(tw.grad.numpy(), wt.grad.numpy())


@pytest.mark.parametrize(
    "kwargs", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2}, {"kernel_size": 2, "padding": 1}]
)
def test_max_pool2d_backward_of_inf_and_nan_grads_matches_torch(kwargs, torch):
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    ours = trainkit.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    out, tout = tkF.max_pool2d(ours, **kwargs), torch.nn.functional.max_pool2d(theirs, **kwargs)
    g = np.ones(tuple(tout.shape), dtype=np.float32)
    g[0, 0, 0, 0], g[0, 1, 1, 1], g[0, 1, 0, 1] = np.inf, np.nan, -np.inf
    out.backward(trainkit.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
