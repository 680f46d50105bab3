"""nn.MultiheadAttention and F.multi_head_attention_forward against PyTorch: parameters and state_dict, outputs,
weights and gradients of inputs and parameters with every option and mask; errors and warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.nn.functional as F

TOL = {"float32": dict(rtol=1e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-11)}


def _modules(torch, dtype: str, **kw):
    ref = torch.nn.MultiheadAttention(8, 2, dtype=getattr(torch, dtype), **kw)
    mod = trainkit.nn.MultiheadAttention(8, 2, dtype=getattr(trainkit, dtype), **kw)
    mod.load_state_dict({k: trainkit.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return mod, ref


def _run(
    torch,
    rng,
    dtype="float64",
    kw=None,
    call=None,
    shapes=((5, 3, 8), (6, 3, 8), (6, 3, 8)),
    same=False,
    masks=None,
    train=True,
):
    """Both modules on the same inputs, weights and masks; compares outputs, weights and every gradient."""
    mod, ref = _modules(torch, dtype, **(kw or {}))
    mod.train(train)
    ref.train(train)
    arrays = [rng.standard_normal(s) for s in shapes]
    g = None
    results = []
    for lib, m in ((trainkit, mod), (torch, ref)):
        d = getattr(lib, dtype)
        ins = [lib.tensor(a, dtype=d, requires_grad=True) for a in arrays]
        if same:
            ins = [ins[0]] * 3
        mk = {}
        for name, value in (masks or {}).items():
            t = lib.tensor(value)
            mk[name] = t if t.dtype == lib.bool else t.to(d)
        out, weights = m(*ins, **mk, **(call or {}))
        if g is None:
            g = rng.standard_normal(tuple(out.shape))
        (out * lib.tensor(g, dtype=d)).sum().backward()
        grads = [to_numpy(x.grad) for x in ins[: 1 if same else 3]]
        grads += [to_numpy(p.grad) for _, p in m.named_parameters()]
        results.append((out, weights, grads))
    (out, weights, grads), (rout, rweights, rgrads) = results
    assert out.dtype == getattr(trainkit, dtype)
    np.testing.assert_allclose(to_numpy(out), to_numpy(rout), **TOL[dtype])
    if rweights is None:
        assert weights is None
    else:
        assert tuple(weights.shape) == tuple(rweights.shape)
        np.testing.assert_allclose(to_numpy(weights), to_numpy(rweights), **TOL[dtype])
    assert len(grads) == len(rgrads)
    for a, b in zip(grads, rgrads):
        np.testing.assert_allclose(a, b, **TOL[dtype])
    return out, weights


def test_parameters_and_state_dict_as_torch(torch):
    for kw in ({}, {"bias": False}, {"add_bias_kv": True}, {"kdim": 5, "vdim": 7}):
        ref = torch.nn.MultiheadAttention(8, 2, **kw)
        mod = trainkit.nn.MultiheadAttention(8, 2, **kw)
        assert list(mod.state_dict()) == list(ref.state_dict())
        assert [n for n, _ in mod.named_parameters()] == [n for n, _ in ref.named_parameters()]
        for (n, p), (_, q) in zip(mod.state_dict().items(), ref.state_dict().items()):
            assert tuple(p.shape) == tuple(q.shape), n
        assert mod._qkv_same_embed_dim == ref._qkv_same_embed_dim and mod.head_dim == ref.head_dim == 4
        assert type(mod.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
        assert isinstance(mod.out_proj, trainkit.nn.Linear)
        assert repr(mod) == repr(ref)
    mod = trainkit.nn.MultiheadAttention(8, 2, kdim=5)
    assert mod.in_proj_weight is None and mod.q_proj_weight.shape == (8, 8) and mod.k_proj_weight.shape == (8, 5)
    assert mod.bias_k is None and mod.bias_v is None


def test_initialisation():
    trainkit.manual_seed(0)
    mod = trainkit.nn.MultiheadAttention(64, 4, add_bias_kv=True)
    w = to_numpy(mod.in_proj_weight)
    bound = np.sqrt(6.0 / (64 + 3 * 64))  # xavier-uniform of (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert (to_numpy(mod.in_proj_bias) == 0).all() and (to_numpy(mod.out_proj.bias) == 0).all()
    assert abs(to_numpy(mod.bias_k).std() - np.sqrt(2.0 / (64 + 64))) < 0.08  # xavier-normal of (1, 1, E)
    assert mod.in_proj_weight.dtype == trainkit.float32


CASES = [
    ("self", {}, {}, {"same": True}),
    ("bias False", {"bias": False}, {}, {"same": True}),
    ("bias_kv zero_attn", {"add_bias_kv": True, "add_zero_attn": True}, {}, {}),
    ("kdim vdim", {"kdim": 5, "vdim": 7}, {}, {"shapes": ((5, 3, 8), (6, 3, 5), (6, 3, 7))}),
    ("batch_first", {"batch_first": True}, {}, {"shapes": ((3, 5, 8), (3, 6, 8), (3, 6, 8))}),
    ("batch_first self", {"batch_first": True}, {}, {"shapes": ((3, 5, 8),) * 3, "same": True}),
    ("unbatched", {}, {}, {"shapes": ((5, 8), (6, 8), (6, 8))}),
    ("per head weights", {}, {"average_attn_weights": False}, {}),
    ("need_weights False", {}, {"need_weights": False}, {}),
    ("eval with dropout", {"dropout": 0.3}, {}, {"train": False}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw,call,extra", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(torch, name, kw, call, extra, dtype):
    _run(torch, np.random.default_rng(0), dtype, kw, call, **extra)


def _masks(rng):
    kpm = rng.random((3, 6)) > 0.7
    kpm[:, 0] = False
    am = rng.random((5, 6)) > 0.7
    am[:, 1] = False
    return kpm, am


MASK_CASES = [
    ("kpm bool", lambda kpm, am, r: {"key_padding_mask": kpm}, {}),
    ("kpm float", lambda kpm, am, r: {"key_padding_mask": np.where(kpm, -1e9, 0.0)}, {}),
    ("attn 2-d bool and kpm", lambda kpm, am, r: {"attn_mask": am, "key_padding_mask": kpm}, {}),
    ("attn 2-d float", lambda kpm, am, r: {"attn_mask": r.standard_normal((5, 6))}, {}),
    (
        "attn 3-d float per head",
        lambda kpm, am, r: {"attn_mask": r.standard_normal((6, 5, 6))},
        {"average_attn_weights": False},
    ),
    ("attn 3-d bool no weights", lambda kpm, am, r: {"attn_mask": r.random((6, 5, 6)) > 0.8}, {"need_weights": False}),
    ("attn and kpm no weights", lambda kpm, am, r: {"attn_mask": am, "key_padding_mask": kpm}, {"need_weights": False}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,make,call", MASK_CASES, ids=[c[0] for c in MASK_CASES])
def test_masks_match_torch(torch, name, make, call, dtype):
    rng = np.random.default_rng(1)
    kpm, am = _masks(rng)
    _run(torch, rng, dtype, {}, call, masks=make(kpm, am, rng))


def test_masks_with_bias_kv_and_zero_attn(torch):
    rng = np.random.default_rng(2)
    kpm, am = _masks(rng)
    for call in ({}, {"need_weights": False}):
        _run(
            torch,
            rng,
            "float64",
            {"add_bias_kv": True, "add_zero_attn": True},
            call,
            masks={"attn_mask": am, "key_padding_mask": kpm},
        )


@pytest.mark.parametrize("call", [{"need_weights": False, "is_causal": True}, {"is_causal": True}], ids=str)
def test_is_causal_with_its_mask(torch, call):
    rng = np.random.default_rng(3)
    causal = np.triu(np.full((5, 5), -np.inf), 1)
    _run(torch, rng, "float64", {}, call, shapes=((5, 3, 8),) * 3, same=True, masks={"attn_mask": causal})
    kpm = rng.random((3, 5)) > 0.7
    kpm[:, 0] = False
    _run(
        torch,
        rng,
        "float64",
        {},
        call,
        shapes=((5, 3, 8),) * 3,
        same=True,
        masks={"attn_mask": causal, "key_padding_mask": np.where(kpm, -np.inf, 0.0)},
    )


def test_need_weights_false_runs_the_fused_op():
    mod = trainkit.nn.MultiheadAttention(8, 2)
    x = trainkit.randn(5, 3, 8, requires_grad=True)
    out, weights = mod(x, x, x, need_weights=False)
    assert weights is None
    names = set()
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and type(node).__name__ not in names:
            names.add(type(node).__name__)
            stack.extend(fn for fn, _ in node.next_functions)
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in names


def test_dropout_in_training_changes_weights():
    trainkit.manual_seed(0)
    mod = trainkit.nn.MultiheadAttention(8, 2, dropout=0.5)
    x = trainkit.randn(6, 2, 8)
    _, w = mod(x, x, x, average_attn_weights=False)
    w = to_numpy(w)
    assert (w == 0).any()
    kept = w[w != 0]
    assert np.isfinite(kept).all() and (w.sum(-1) > 1.2).any()  # kept weights are scaled by 2
    out, _ = mod(x, x, x, need_weights=False)
    assert np.isfinite(to_numpy(out)).all()
    mod.eval()
    _, w = mod(x, x, x)
    np.testing.assert_allclose(to_numpy(w).sum(-1), 1.0, rtol=1e-5)


def test_functional_with_static_k_and_v(torch):
    rng = np.random.default_rng(4)
    L, N, E, H, S = 4, 2, 8, 2, 3
    arrays = {
        "q": rng.standard_normal((L, N, E)),
        "w": rng.standard_normal((3 * E, E)) * 0.3,
        "b": rng.standard_normal(3 * E),
        "ow": rng.standard_normal((E, E)) * 0.3,
        "ob": rng.standard_normal(E),
        "sk": rng.standard_normal((N * H, S, E // H)),
        "sv": rng.standard_normal((N * H, S, E // H)),
    }
    results = []
    for lib in (trainkit, torch):
        t = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
        out, w = lib.nn.functional.multi_head_attention_forward(
            t["q"],
            t["q"],
            t["q"],
            E,
            H,
            t["w"],
            t["b"],
            None,
            None,
            False,
            0.0,
            t["ow"],
            t["ob"],
            static_k=t["sk"],
            static_v=t["sv"],
            average_attn_weights=False,
        )
        (out.sum() + (w * w).sum()).backward()
        results.append([out, w] + [t[k].grad for k in ("q", "w", "ow", "ob", "sk", "sv")])
    for a, b in zip(*results):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), **TOL["float64"])


def test_functional_separate_weights_without_training(torch):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in ((4, 2, 8), (5, 2, 3), (5, 2, 6), (8, 8), (8, 3), (8, 6), (8, 8))]
    outs = []
    for lib in (trainkit, torch):
        q, k, v, wq, wk, wv, wo = (lib.tensor(a) for a in arrays)
        outs.append(
            lib.nn.functional.multi_head_attention_forward(
                q,
                k,
                v,
                8,
                2,
                None,
                None,
                None,
                None,
                True,
                0.9,
                wo,
                None,
                training=False,
                use_separate_proj_weight=True,
                q_proj_weight=wq,
                k_proj_weight=wk,
                v_proj_weight=wv,
            )
        )
    for a, b in zip(*outs):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), **TOL["float64"])


def _x(lib, *shape):
    return lib.zeros(*shape)


def _m(lib):
    return lib.nn.MultiheadAttention(8, 2)


ERRORS = [
    ("heads do not divide", lambda lib, d: lib.nn.MultiheadAttention(8, 3), ["divisible"]),
    ("zero embed_dim", lambda lib, d: lib.nn.MultiheadAttention(0, 3), ["greater than 0"]),
    (
        "int kpm",
        lambda lib, d: _m(lib)(
            _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), key_padding_mask=lib.zeros(3, 4, dtype=lib.int64)
        ),
        ["bool and floating"],
    ),
    (
        "2-d mask shape",
        lambda lib, d: _m(lib)(_x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), attn_mask=lib.zeros(4, 5)),
        ["2D attn_mask", "should be (4, 4)"],
    ),
    (
        "3-d mask shape",
        lambda lib, d: _m(lib)(_x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), attn_mask=lib.zeros(5, 4, 4)),
        ["3D attn_mask", "(6, 4, 4)"],
    ),
    (
        "4-d mask",
        lambda lib, d: _m(lib)(_x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), attn_mask=lib.zeros(1, 6, 4, 4)),
        ["4-D tensor"],
    ),
    (
        "causal without mask",
        lambda lib, d: _m(lib)(_x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), is_causal=True),
        ["Need attn_mask"],
    ),
    (
        "kpm length",
        lambda lib, d: _m(lib)(
            _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), key_padding_mask=lib.zeros(3, 5, dtype=lib.bool)
        ),
        ["key_padded_mask", "to be 4"],
    ),
    (
        "kpm batch",
        lambda lib, d: _m(lib)(
            _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8), key_padding_mask=lib.zeros(2, 4, dtype=lib.bool)
        ),
        ["to be 3"],
    ),
    (
        "key value shapes",
        lambda lib, d: _m(lib)(_x(lib, 4, 3, 8), _x(lib, 4, 2, 8), _x(lib, 4, 3, 8)),
        ["does not match value shape"],
    ),
    (
        "unbatched query, batched key",
        lambda lib, d: _m(lib)(_x(lib, 4, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8)),
        ["unbatched (2-D)", "3-D and 3-D"],
    ),
    ("4-d query", lambda lib, d: _m(lib)(_x(lib, 2, 4, 3, 8), _x(lib, 4, 3, 8), _x(lib, 4, 3, 8)), ["4-D query"]),
    (
        "unbatched 3-d mask",
        lambda lib, d: _m(lib)(_x(lib, 4, 8), _x(lib, 4, 8), _x(lib, 4, 8), attn_mask=lib.zeros(3, 4, 4)),
        ["(2, 4, 4)"],
    ),
    (
        "unbatched 2-d kpm",
        lambda lib, d: _m(lib)(
            _x(lib, 4, 8), _x(lib, 4, 8), _x(lib, 4, 8), key_padding_mask=lib.zeros(3, 4, dtype=lib.bool)
        ),
        ["1-D"],
    ),
    (
        "embed dim",
        lambda lib, d: lib.nn.functional.multi_head_attention_forward(
            _x(lib, 4, 3, 8),
            _x(lib, 4, 3, 8),
            _x(lib, 4, 3, 8),
            6,
            2,
            _x(lib, 24, 8),
            None,
            None,
            None,
            False,
            0.0,
            _x(lib, 8, 8),
            None,
        ),
        ["expecting embedding dimension of 6"],
    ),
    (
        "static_k heads",
        lambda lib, d: lib.nn.functional.multi_head_attention_forward(
            _x(lib, 4, 3, 8),
            _x(lib, 4, 3, 8),
            _x(lib, 4, 3, 8),
            8,
            2,
            _x(lib, 24, 8),
            None,
            None,
            None,
            False,
            0.0,
            _x(lib, 8, 8),
            None,
            static_k=_x(lib, 5, 4, 4),
        ),
        ["static_k.size(0) of 6"],
    ),
]


@pytest.mark.parametrize("name,fn,words", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(torch, name, fn, words):
    assert_same_error(torch, fn, *words)


def test_mismatched_mask_types_warn_as_torch(torch):
    for lib in (trainkit, torch):
        m = _m(lib)
        x = _x(lib, 4, 3, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m(x, x, x, key_padding_mask=lib.zeros(3, 4), attn_mask=lib.zeros(4, 4, dtype=lib.bool))
        assert any("mismatched key_padding_mask and attn_mask" in str(w.message) for w in caught)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m(x, x, x, key_padding_mask=lib.zeros(3, 4), attn_mask=lib.zeros(4, 4))


def test_functional_is_exported():
    assert F.multi_head_attention_forward.__module__ == "trainkit.functional.multi_head_attention"
    assert trainkit.nn.MultiheadAttention.__module__ == "trainkit.layers.attention"


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradcheck_and_gradgradcheck_through_the_layer(need_weights):
    trainkit.manual_seed(0)
    mod = trainkit.nn.MultiheadAttention(4, 2, add_bias_kv=True, dtype=trainkit.float64)
    rng = np.random.default_rng(6)
    q = trainkit.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    kv = trainkit.tensor(rng.standard_normal((2, 2, 4)), requires_grad=True)
    mask = trainkit.tensor(np.array([[False, True], [False, False], [True, False]]))

    def f(q, kv):
        return mod(q, kv, kv, attn_mask=mask, need_weights=need_weights)[0]

    assert trainkit.autograd.gradcheck(f, (q, kv))
    assert trainkit.autograd.gradgradcheck(f, (q, kv))


def test_merge_masks_as_torch(torch):
    rng = np.random.default_rng(7)
    am2, am3, kpm = rng.standard_normal((4, 4)), rng.standard_normal((6, 4, 4)), rng.standard_normal((3, 4))
    for attn, pad in ((None, None), (None, kpm), (am2, None), (am2, kpm), (am3, kpm)):
        got = []
        for lib in (trainkit, torch):
            m = lib.nn.MultiheadAttention(8, 2, batch_first=True)
            a, p = (None if x is None else lib.tensor(x) for x in (attn, pad))
            got.append(m.merge_masks(a, p, lib.zeros(3, 4, 8)))
        (mask, kind), (ref, ref_kind) = got
        assert kind == ref_kind
        if ref is None:
            assert mask is None
        else:
            np.testing.assert_allclose(to_numpy(mask), to_numpy(ref))


@pytest.mark.parametrize("need_weights", [True, False])
def test_float_masks_get_gradients_as_torch(torch, need_weights):
    rng = np.random.default_rng(8)
    mod, ref = _modules(torch, "float64")
    arrays = [rng.standard_normal((5, 3, 8)), rng.standard_normal((5, 5)), rng.standard_normal((3, 5))]
    results = []
    for lib, m in ((trainkit, mod), (torch, ref)):
        x, am, kpm = (lib.tensor(a, requires_grad=True) for a in arrays)
        out, _ = m(x, x, x, attn_mask=am, key_padding_mask=kpm, need_weights=need_weights)
        out.sum().backward()
        results.append([out, x.grad, am.grad, kpm.grad])
    for a, b in zip(*results):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), **TOL["float64"])
