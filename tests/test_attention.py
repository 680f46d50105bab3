"""F.scaled_dot_product_attention against PyTorch: values and gradients, masks, causal, scale, grouped-query heads,
dropout; gradcheck and gradgradcheck of the fused op; errors; one node that frees what it saved."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.nn.functional as F
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.autograd.graph import graph

NODE = "ScaledDotProductFlashAttentionForCpuBackward0"
TOL = {np.float32: dict(rtol=1e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


def _pair(torch, rng, shapes, dtype, mask=None, mask_grad=False, **kw):
    """The outputs and input gradients of both libraries on the same inputs and output gradient."""
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    results = []
    g = None
    for lib in (trainkit, torch):
        ins = [lib.tensor(a, requires_grad=True) for a in arrays]
        m = None
        if mask is not None:
            m = lib.tensor(mask, requires_grad=mask_grad)
        out = lib.nn.functional.scaled_dot_product_attention(*ins, attn_mask=m, **kw)
        if g is None:
            g = rng.standard_normal(tuple(out.shape)).astype(dtype)
        out.backward(lib.tensor(g))
        grads = [to_numpy(x.grad) for x in ins] + ([to_numpy(m.grad)] if mask_grad else [])
        results.append((out, grads))
    return results


CASES = [
    ("4d", ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)), {}),
    ("3d Ev != E", ((3, 4, 8), (3, 5, 8), (3, 5, 6)), {}),
    ("2d", ((4, 8), (5, 8), (5, 6)), {}),
    ("broadcast batch", ((3, 1, 4, 8), (1, 2, 5, 8), (2, 5, 6)), {}),
    ("causal L < S", ((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)), {"is_causal": True}),
    ("causal L > S", ((2, 2, 6, 8), (2, 2, 4, 8), (2, 2, 4, 3)), {"is_causal": True}),
    ("scale", ((2, 4, 8), (2, 5, 8), (2, 5, 8)), {"scale": 0.3}),
    ("gqa", ((2, 6, 4, 8), (2, 3, 5, 8), (2, 2, 5, 6)), {"enable_gqa": True}),
    ("gqa causal one kv head", ((2, 4, 5, 8), (2, 1, 5, 8), (2, 1, 5, 8)), {"enable_gqa": True, "is_causal": True}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(torch, name, shapes, kw, dtype):
    rng = np.random.default_rng(0)
    (out, grads), (ref, ref_grads) = _pair(torch, rng, shapes, dtype, **kw)
    assert out.dtype == getattr(trainkit, np.dtype(dtype).name)
    assert out.grad_fn.name() == ref.grad_fn.name()  # the fused node where PyTorch runs its kernel, its ops elsewhere
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref), **TOL[dtype])
    for a, b in zip(grads, ref_grads):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])


MASKS = [
    ("bool (L, S)", lambda r: r.random((4, 5)) > 0.4),
    ("bool broadcast (H, 1, S)", lambda r: r.random((3, 1, 5)) > 0.3),
    ("bool fully masked row", lambda r: np.eye(4, 5, dtype=bool) | (np.arange(4)[:, None] == 1) & False),
    ("float (L, S)", lambda r: r.standard_normal((4, 5))),
    ("float broadcast (2, 1, 4, 5)", lambda r: r.standard_normal((2, 1, 4, 5))),
    ("float with -inf", lambda r: np.where(r.random((4, 5)) > 0.5, -np.inf, r.standard_normal((4, 5)))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,make", MASKS, ids=[m[0] for m in MASKS])
def test_masks_match_torch(torch, name, make, dtype):
    rng = np.random.default_rng(1)
    mask = make(rng)
    if mask.dtype != bool:
        mask = mask.astype(dtype)
    if name.startswith("bool fully"):
        mask = mask.copy()
        mask[2] = False  # query 2 sees no key: PyTorch gives zeros (and zero gradients) there
    shapes = ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6))
    (out, grads), (ref, ref_grads) = _pair(torch, rng, shapes, dtype, mask=mask)
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref), **TOL[dtype])
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, **TOL[dtype])


@pytest.mark.parametrize("boolean", [True, False])
def test_mask_with_causal_on_4d_inputs_applies_both_as_torch(torch, boolean):
    # PyTorch's CPU kernel for 4-D inputs takes both and applies both
    rng = np.random.default_rng(8)
    mask = rng.random((4, 5)) > 0.3 if boolean else rng.standard_normal((2, 3, 4, 5))
    shapes = ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))
    (out, grads), (ref, ref_grads) = _pair(torch, rng, shapes, np.float64, mask=mask, is_causal=True)
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref), **TOL[np.float64])
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, **TOL[np.float64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mask_gradient_matches_torch(torch, dtype):
    rng = np.random.default_rng(2)
    mask = rng.standard_normal((3, 1, 5)).astype(dtype)  # broadcast over the batch and the queries
    shapes = ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6))
    (out, grads), (ref, ref_grads) = _pair(torch, rng, shapes, dtype, mask=mask, mask_grad=True)
    assert grads[-1].shape == (3, 1, 5)
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, **TOL[dtype])


def test_fully_masked_rows_give_zeros_not_nan():
    q, k, v = (trainkit.randn(2, 3, 4, requires_grad=True) for _ in range(3))
    mask = trainkit.ones(3, 3, dtype=trainkit.bool)
    mask[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.sum().backward()
    assert np.isfinite(to_numpy(out)).all() and (to_numpy(out)[:, 1] == 0).all()
    assert np.isfinite(to_numpy(q.grad)).all() and (to_numpy(q.grad)[:, 1] == 0).all()


def _t(rng, *shape):
    return trainkit.tensor(rng.standard_normal(shape), requires_grad=True)


def test_gradcheck_with_mask_gradient():
    rng = np.random.default_rng(3)
    q, k, v, m = _t(rng, 2, 4, 3), _t(rng, 2, 5, 3), _t(rng, 2, 5, 2), _t(rng, 4, 5)
    assert gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, m))


@pytest.mark.parametrize("kw", [{"is_causal": True}, {"scale": 0.7}, {"enable_gqa": True}], ids=str)
def test_gradcheck_variants(kw):
    rng = np.random.default_rng(4)
    q, k, v = _t(rng, 1, 4, 3, 3), _t(rng, 1, 2, 4, 3), _t(rng, 1, 2, 4, 2)
    if not kw.get("enable_gqa"):
        k, v = _t(rng, 1, 4, 4, 3), _t(rng, 1, 4, 4, 2)
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw), (q, k, v))


def test_gradgradcheck_through_recomputation():
    rng = np.random.default_rng(5)
    q, k, v, m = _t(rng, 2, 3, 3), _t(rng, 2, 4, 3), _t(rng, 2, 4, 2), _t(rng, 3, 4)
    assert gradgradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, m))
    bool_mask = trainkit.tensor(rng.random((3, 4)) > 0.4)
    bool_mask[1] = False
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask), (q, k, v))
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))
    q4, k4, v4 = _t(rng, 1, 4, 2, 3), _t(rng, 1, 2, 3, 3), _t(rng, 1, 2, 3, 2)
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), (q4, k4, v4))


def test_dropout_uses_one_mask_per_seed_and_keeps_the_mean():
    rng = np.random.default_rng(6)
    q, k, v = _t(rng, 2, 3, 3), _t(rng, 2, 4, 3), _t(rng, 2, 4, 2)

    def f(q, k, v):
        trainkit.manual_seed(7)  # the same dropout mask on every call: the gradient is checkable
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)

    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))
    # uniform attention (q = 0) on values of one: each output is the mean of the kept, rescaled weights
    zeros, ones = trainkit.zeros(200, 50, 4), trainkit.ones(200, 50, 1)
    out = to_numpy(F.scaled_dot_product_attention(zeros, trainkit.zeros(200, 50, 4), ones, dropout_p=0.4))
    assert abs(out.mean() - 1.0) < 0.02
    kept = out * (1 - 0.4) * 50  # the number of keys each query kept
    np.testing.assert_allclose(kept, np.round(kept), atol=1e-3)
    assert kept.min() < 30 * 0.8 and kept.max() > 30 * 1.2
    full = F.scaled_dot_product_attention(zeros, zeros, ones, dropout_p=1.0)
    assert (to_numpy(full) == 0).all()


def test_one_node_that_saves_softmax_and_frees_it():
    q, k, v = (trainkit.randn(2, 3, 4, 8, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    node = out.grad_fn
    assert node.name() == NODE
    assert [fn is not None and type(fn).__name__ for fn, _ in node.next_functions] == ["AccumulateGrad"] * 3 + [False]
    saved = graph(out).saved(node)
    assert ((2, 3, 4, 4), "float32", 2 * 3 * 4 * 4 * 4) in saved  # P after the softmax
    ref = weakref.ref(node)
    out.sum().backward()
    assert graph(out).saved(node) is None  # freed
    del node, out
    assert ref() is None


def test_no_reference_cycle_keeps_the_graph():
    q = trainkit.randn(2, 4, 8, requires_grad=True)
    gc.disable()
    try:
        out = F.scaled_dot_product_attention(q, q, q)
        ref = weakref.ref(out.grad_fn)
        del out
        assert ref() is None
    finally:
        gc.enable()


def test_no_graph_without_grad():
    q = trainkit.randn(2, 4, 8)
    out = F.scaled_dot_product_attention(q, q, q)
    assert out.grad_fn is None and not out.requires_grad


def _errors():
    def qkv(lib, q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 8), dtype="float32"):
        d = getattr(lib, dtype)
        return lib.zeros(*q, dtype=d), lib.zeros(*k, dtype=d), lib.zeros(*v, dtype=d)

    def sdpa(lib, *args, **kw):
        return lib.nn.functional.scaled_dot_product_attention(*args, **kw)

    return [
        (
            "mask with causal, 3-d",
            lambda lib, d: sdpa(
                lib,
                *qkv(lib, (3, 4, 8), (3, 5, 8), (3, 5, 8)),
                attn_mask=lib.ones(4, 5, dtype=lib.bool),
                is_causal=True,
            ),
            ["attn_mask", "is_causal"],
        ),
        (
            "mask with causal and dropout",
            lambda lib, d: sdpa(
                lib, *qkv(lib), attn_mask=lib.ones(4, 5, dtype=lib.bool), is_causal=True, dropout_p=0.5
            ),
            ["attn_mask", "is_causal"],
        ),
        ("dtypes differ", lambda lib, d: sdpa(lib, qkv(lib)[0], *qkv(lib, dtype="float64")[1:]), ["same dtype"]),
        (
            "mask dtype",
            lambda lib, d: sdpa(lib, *qkv(lib), attn_mask=lib.zeros(4, 5, dtype=lib.float64)),
            ["attn_mask dtype"],
        ),
        (
            "int mask",
            lambda lib, d: sdpa(lib, *qkv(lib), attn_mask=lib.zeros(4, 5, dtype=lib.int64)),
            ["attn_mask dtype"],
        ),
        ("1-d", lambda lib, d: sdpa(lib, lib.zeros(8), lib.zeros(8), lib.zeros(8)), ["at least 2 dimensional"]),
        ("dropout p", lambda lib, d: sdpa(lib, *qkv(lib), dropout_p=1.5), ["dropout probability"]),
        ("gqa heads", lambda lib, d: sdpa(lib, *qkv(lib, q=(2, 4, 4, 8)), enable_gqa=True), ["must divide"]),
        (
            "heads without gqa",
            lambda lib, d: sdpa(lib, *qkv(lib, q=(2, 4, 4, 8))),
            ["size of tensor a (4)", "dimension 1"],
        ),
        ("mask shape", lambda lib, d: sdpa(lib, *qkv(lib), attn_mask=lib.zeros(4, 6)), ["(5)", "(6)"]),
        ("int inputs", lambda lib, d: sdpa(lib, *(x.long() for x in qkv(lib))), ["expected scalar type"]),
    ]


@pytest.mark.parametrize("name,fn,words", _errors(), ids=[e[0] for e in _errors()])
def test_errors_match_torch(torch, name, fn, words):
    assert_same_error(torch, fn, *words)


def test_float32_stays_float32_with_a_float_mask():
    q = trainkit.randn(2, 4, 8, requires_grad=True)
    m = trainkit.zeros(4, 4, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=m)
    out.sum().backward()
    assert out.dtype == trainkit.float32 and q.grad.dtype == trainkit.float32 and m.grad.dtype == trainkit.float32


@pytest.mark.parametrize("kw", [{"is_causal": True}, {"mask": "bool"}, {"mask": "float"}, {"dropout_p": 0.5}], ids=str)
def test_on_each_device(device, kw):
    """The op on ``device`` gives the CPU's numbers (dropout: the same mean, zeros where dropped)."""
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8))]
    mask = {"bool": rng.random((4, 5)) > 0.3, "float": rng.standard_normal((4, 5)).astype(np.float32)}.get(
        kw.get("mask")
    )
    results = []
    for dev in ("cpu", device):
        ins = [trainkit.tensor(a).to(dev).requires_grad_(True) for a in arrays]
        m = None if mask is None else trainkit.tensor(mask).to(dev)
        out = F.scaled_dot_product_attention(
            *ins, attn_mask=m, is_causal=kw.get("is_causal", False), dropout_p=kw.get("dropout_p", 0.0)
        )
        out.sum().backward()
        assert out.device.type == trainkit.device(dev).type and out.dtype == trainkit.float32
        results.append([to_numpy(out)] + [to_numpy(x.grad) for x in ins])
    if "dropout_p" in kw:
        assert all(np.isfinite(r).all() for r in results[1])
        return
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [{"is_causal": True}, {"mask": True}, {"enable_gqa": True}], ids=str)
def test_large_enough_to_split_between_threads(torch, kw):
    """Scores of 1 MiB or more are shared between threads: the same numbers as torch (fully masked rows too)."""
    rng = np.random.default_rng(10)
    shapes = (
        (4, 4, 128, 16),
        (4, 2 if kw.get("enable_gqa") else 4, 128, 16),
        (4, 2 if kw.get("enable_gqa") else 4, 128, 8),
    )
    mask = None
    if kw.pop("mask", False):
        mask = rng.random((4, 1, 128, 128)) > 0.5
        mask[1, :, 3] = False
    (out, grads), (ref, ref_grads) = _pair(torch, rng, shapes, np.float32, mask=mask, **kw)
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref), **TOL[np.float32])
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, **TOL[np.float32])


def test_a_mask_with_more_dimensions_than_the_scores_is_refused_as_torch(torch):
    def fn(L, dev):
        q = L.randn(2, 2, 3, 4)
        return L.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=L.zeros(1, 1, 1, 3, 3))

    assert_same_error(torch, fn, "doesn't match the broadcast shape [1, 2, 2, 3, 3]")


PATHS = [
    ("fused", ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4)), {}),
    ("Ev != E", ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3)), {}),
    ("3-D", ((2, 5, 4), (2, 6, 4), (2, 6, 4)), {}),
    ("2-D", ((5, 4), (6, 4), (6, 4)), {}),
    ("broadcast heads", ((2, 2, 5, 4), (2, 1, 6, 4), (2, 1, 6, 4)), {}),
    ("grouped heads", ((2, 4, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4)), {"enable_gqa": True}),
    ("dropout", ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4)), {"dropout_p": 0.5}),
    ("no query", ((2, 2, 0, 4), (2, 2, 6, 4), (2, 2, 6, 3)), {}),
    ("no key", ((2, 2, 5, 4), (2, 2, 0, 4), (2, 2, 0, 3)), {}),
    ("empty head size", ((2, 2, 5, 0), (2, 2, 6, 0), (2, 2, 6, 3)), {}),
]


@pytest.mark.parametrize("name,shapes,kw", PATHS, ids=[p[0] for p in PATHS])
def test_graph_follows_the_path_torch_takes(torch, name, shapes, kw):
    """One fused node where PyTorch's CPU runs its kernel; its reference path's ops (and their node names)
    elsewhere; zeros tied to every input where there is nothing to attend."""
    got = []
    for lib in (trainkit, torch):
        ins = [lib.ones(s, requires_grad=True) for s in shapes]
        out = lib.nn.functional.scaled_dot_product_attention(*ins, **kw)
        out.sum().backward()
        got.append((out.grad_fn.name(), tuple(out.shape), [to_numpy(x.grad) for x in ins]))
    (node, shape, grads), (ref_node, ref_shape, ref_grads) = got
    assert (node, shape) == (ref_node, ref_shape)
    if "dropout_p" not in kw:
        for a, b in zip(grads, ref_grads):
            np.testing.assert_allclose(a, b, atol=1e-6)
