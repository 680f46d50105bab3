"""F.layer_norm, F.group_norm, F.dropout1d, F.dropout2d and their modules compared with PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit import functional as tkF
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.layers.dropout import Dropout1d, Dropout2d, Dropout3d
from trainkit.layers.normalization import GroupNorm, LayerNorm

_OURS_NN = {"LayerNorm": LayerNorm, "GroupNorm": GroupNorm, "Dropout1d": Dropout1d, "Dropout2d": Dropout2d}


def _F(lib):
    """The functional namespace holding the functions under test."""
    return tkF if lib is trainkit else lib.nn.functional


def _nn(lib, name: str):
    return _OURS_NN[name] if lib is trainkit else getattr(lib.nn, name)


def _run(lib, dev, fn, x_data, params, upstream, needs=(True, True, True)):
    """``fn(lib, x, *params)`` with every given input requiring grad (as ``needs`` says), backward of
    ``sum(out * upstream)``; the output, the grads and the node's name."""
    x = lib.tensor(x_data, device=dev, requires_grad=needs[0])
    ps = [None if p is None else lib.tensor(p, device=dev, requires_grad=need) for p, need in zip(params, needs[1:])]
    y = fn(lib, x, *ps)
    (y * lib.tensor(upstream, device=dev)).sum().backward()
    grads = [None if t is None or t.grad is None else to_numpy(t.grad) for t in [x, *ps]]
    return y, grads, type(y.grad_fn).__name__


def _compare(torch, device, fn, x_data, params, rng, needs=(True, True, True), rtol=1e-5, atol=1e-5):
    upstream = rng.standard_normal(x_data.shape).astype(x_data.dtype)
    y1, g1, n1 = _run(trainkit, device, fn, x_data, params, upstream, needs)
    y2, g2, n2 = _run(torch, "cpu", fn, x_data, params, upstream, needs)
    assert n1 == n2
    assert str(y1.dtype).split(".")[-1] == str(y2.dtype).split(".")[-1]
    np.testing.assert_allclose(to_numpy(y1), to_numpy(y2), rtol=rtol, atol=atol)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------- layer norm
LAYER_CASES = [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), (5,)), ((3, 2, 4, 5), (2, 4, 5)), ((4, 7), [7])]


@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape,normalized", LAYER_CASES, ids=str)
def test_layer_norm_matches_torch(torch, device, rng, shape, normalized, affine):
    ns = tuple(normalized)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    w = rng.standard_normal(ns).astype(np.float32) if affine != "none" else None
    b = rng.standard_normal(ns).astype(np.float32) if affine == "both" else None
    _compare(torch, device, lambda lib, t, w, b: _F(lib).layer_norm(t, normalized, w, b, eps=1e-3), x, [w, b], rng)


@pytest.mark.parametrize("needs", [(False, True, True), (True, False, True), (False, False, True)], ids=str)
def test_layer_norm_grads_of_some_inputs_only(torch, device, rng, needs):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    params = [rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    _compare(torch, device, lambda lib, t, w, b: _F(lib).layer_norm(t, (4,), w, b), x, params, rng, needs)


def test_layer_norm_float16_input_with_float32_parameters(torch, rng):
    x = rng.standard_normal((3, 8)).astype(np.float16)
    params = [rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)]
    upstream = rng.standard_normal((3, 8)).astype(np.float16)
    results = [
        _run(lib, "cpu", lambda lib, t, w, b: _F(lib).layer_norm(t, (8,), w, b), x, params, upstream)
        for lib in (trainkit, torch)
    ]
    (y1, g1, _), (y2, g2, _) = results
    assert y1.dtype == trainkit.float16
    np.testing.assert_allclose(to_numpy(y1), to_numpy(y2), atol=2e-3, rtol=2e-3)
    for a, b in zip(g1, g2):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, atol=2e-2, rtol=2e-2)


def test_layer_norm_gradcheck_and_gradgradcheck(rng):
    def make(*shape):
        return trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, requires_grad=True)

    x, w, b = make(2, 3, 4), make(3, 4), make(3, 4)
    fn = lambda t, w, b: tkF.layer_norm(t, (3, 4), w, b)  # noqa: E731
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    assert gradcheck(lambda t: tkF.layer_norm(t, (4,)), (x,))
    assert gradgradcheck(lambda t: tkF.layer_norm(t, (4,)), (x,))


def test_layer_norm_double_backward_matches_torch(torch, rng):
    x_data = rng.standard_normal((3, 5))
    w_data = rng.standard_normal(5)
    results = []
    for lib in (trainkit, torch):
        x = lib.tensor(x_data, requires_grad=True)
        w = lib.tensor(w_data, requires_grad=True)
        y = _F(lib).layer_norm(x, (5,), w)
        (gx,) = lib.autograd.grad((y**3).sum(), (x,), create_graph=True)
        (gx * gx).sum().backward()
        results.append((to_numpy(x.grad), to_numpy(w.grad)))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_layer_norm_constant_rows_without_eps_give_nan_as_torch(torch):
    for lib in (trainkit, torch):
        y = _F(lib).layer_norm(lib.ones(2, 3), (3,), eps=0.0)
        assert np.isnan(to_numpy(y)).all()


def test_layer_norm_empty_batch(torch):
    for lib in (trainkit, torch):
        x = lib.zeros(0, 4, requires_grad=True)
        y = _F(lib).layer_norm(x, (4,))
        y.sum().backward()
        assert tuple(y.shape) == (0, 4) and tuple(x.grad.shape) == (0, 4)


LAYER_ERRORS = [
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 3, 4), (5,)), ["expected input with shape [*, 5]"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 3, 4), (2, 3, 4, 5)), ["but got input of size[2, 3, 4]"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), ()), ["at least 1-dimensional"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), 4), ["must be tuple of ints, not int"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4.0,)), ["element of type float at pos 0"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4,), lib.ones(3)), ["weight of shape [3]"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4,), lib.ones(1, 4)), ["weight of shape [1, 4]"]),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4,), None, lib.ones(3)), ["bias of shape [3]"]),
    (
        lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4,), lib.ones(4, dtype=lib.float64)),
        ["expect parameter to have scalar type of Float"],
    ),
    (
        lambda lib: _F(lib).layer_norm(lib.ones(2, 4, dtype=lib.float64), (4,), lib.ones(4)),
        ["all inputs must share same datatype"],
    ),
    (
        lambda lib: _F(lib).layer_norm(lib.ones(2, 4), (4,), lib.ones(4), lib.ones(4, dtype=lib.float64)),
        ["expected scalar type Float but found Double"],
    ),
    (lambda lib: _F(lib).layer_norm(lib.ones(2, 4, dtype=lib.int64), (4,)), ["not implemented for 'Long'"]),
]


@pytest.mark.parametrize("case", range(len(LAYER_ERRORS)))
def test_layer_norm_errors_match_torch(torch, case):
    fn, words = LAYER_ERRORS[case]
    assert_same_error(torch, lambda lib, dev: fn(lib), *words)


# ------------------------------------------------------------------------------------------------- group norm
GROUP_CASES = [((2, 6, 4), 3), ((2, 6), 2), ((3, 4, 2, 5), 1), ((3, 4, 2, 5), 4), ((2, 6, 3, 2, 2), 2)]


@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape,groups", GROUP_CASES, ids=str)
def test_group_norm_matches_torch(torch, device, rng, shape, groups, affine):
    x = rng.standard_normal(shape).astype(np.float32) * 2 - 1
    c = shape[1]
    w = rng.standard_normal(c).astype(np.float32) if affine != "none" else None
    b = rng.standard_normal(c).astype(np.float32) if affine == "both" else None
    _compare(torch, device, lambda lib, t, w, b: _F(lib).group_norm(t, groups, w, b, eps=1e-4), x, [w, b], rng)


@pytest.mark.parametrize("needs", [(False, True, True), (True, False, True), (False, False, True)], ids=str)
def test_group_norm_grads_of_some_inputs_only(torch, device, rng, needs):
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    params = [rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    _compare(torch, device, lambda lib, t, w, b: _F(lib).group_norm(t, 2, w, b), x, params, rng, needs)


def test_group_norm_float16_input_with_float32_parameters(torch, rng):
    x = rng.standard_normal((2, 4, 3)).astype(np.float16)
    params = [rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    upstream = rng.standard_normal((2, 4, 3)).astype(np.float16)
    results = [
        _run(lib, "cpu", lambda lib, t, w, b: _F(lib).group_norm(t, 2, w, b), x, params, upstream)
        for lib in (trainkit, torch)
    ]
    (y1, g1, _), (y2, g2, _) = results
    assert y1.dtype == trainkit.float16
    np.testing.assert_allclose(to_numpy(y1), to_numpy(y2), atol=2e-3, rtol=2e-3)
    for a, b in zip(g1, g2):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, atol=2e-2, rtol=2e-2)


def test_group_norm_gradcheck_and_gradgradcheck(rng):
    def make(*shape):
        return trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, requires_grad=True)

    x, w, b = make(2, 4, 3), make(4), make(4)
    fn = lambda t, w, b: tkF.group_norm(t, 2, w, b)  # noqa: E731
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    assert gradcheck(lambda t: tkF.group_norm(t, 4), (x,))
    assert gradgradcheck(lambda t: tkF.group_norm(t, 1), (x,))


def test_group_norm_double_backward_matches_torch(torch, rng):
    x_data = rng.standard_normal((2, 4, 3))
    w_data = rng.standard_normal(4)
    results = []
    for lib in (trainkit, torch):
        x = lib.tensor(x_data, requires_grad=True)
        w = lib.tensor(w_data, requires_grad=True)
        y = _F(lib).group_norm(x, 2, w)
        (gx,) = lib.autograd.grad((y**3).sum(), (x,), create_graph=True)
        (gx * gx).sum().backward()
        results.append((to_numpy(x.grad), to_numpy(w.grad)))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_group_norm_empty_batch(torch):
    for lib in (trainkit, torch):
        x = lib.zeros(0, 4, 3, requires_grad=True)
        w = lib.ones(4, requires_grad=True)
        y = _F(lib).group_norm(x, 2, w)
        y.sum().backward()
        assert tuple(x.grad.shape) == (0, 4, 3)
        np.testing.assert_array_equal(to_numpy(w.grad), np.zeros(4, np.float32))


GROUP_ERRORS = [
    (lambda lib: _F(lib).group_norm(lib.ones(3), 1), ["at least 2 dimensions"]),
    (lambda lib: _F(lib).group_norm(lib.ones(1, 2), 2), ["more than 1 value per channel", "[1, 2]"]),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), 2), ["divisible by num_groups", "num_groups=2"]),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), -2), ["greater than 0, got -2"]),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), 0), []),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), 3, lib.ones(4)), ["weight of shape [4]", "[2, 3, 4]"]),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), 3, lib.ones(3, 1)), ["weight of shape [3, 1]"]),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 3, 4), 3, None, lib.ones(4)), ["Expected bias to be a vector"]),
    (
        lambda lib: _F(lib).group_norm(lib.ones(2, 4), 2, lib.ones(4, dtype=lib.float64)),
        ["expect parameter to have scalar type of Float"],
    ),
    (lambda lib: _F(lib).group_norm(lib.ones(2, 4, dtype=lib.int64), 2), ["not implemented for 'Long'"]),
]


@pytest.mark.parametrize("case", range(len(GROUP_ERRORS)))
def test_group_norm_errors_match_torch(torch, case):
    fn, words = GROUP_ERRORS[case]
    assert_same_error(torch, lambda lib, dev: fn(lib), *words)


# ------------------------------------------------------------------------------------------------- the modules
MODULES = [
    ("LayerNorm", (4,), {}),
    ("LayerNorm", ((3, 4),), {"eps": 1e-3}),
    ("LayerNorm", ([4],), {"bias": False}),
    ("LayerNorm", (4,), {"elementwise_affine": False}),
    ("GroupNorm", (2, 4), {}),
    ("GroupNorm", (1, 6), {"eps": 0.1, "bias": False}),
    ("GroupNorm", (3, 3), {"affine": False}),
    ("Dropout1d", (), {}),
    ("Dropout1d", (0.2, True), {}),
    ("Dropout2d", (), {"p": 0.3}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=str)
def test_module_repr_parameters_and_state_dict_match_torch(torch, name, args, kwargs):
    ours, theirs = _nn(trainkit, name)(*args, **kwargs), _nn(torch, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        np.testing.assert_array_equal(to_numpy(ours.state_dict()[key]), value.numpy())
        assert ours.state_dict()[key].dtype == trainkit.float32
    for attr in (
        "normalized_shape",
        "eps",
        "elementwise_affine",
        "num_groups",
        "num_channels",
        "affine",
        "p",
        "inplace",
    ):
        assert getattr(ours, attr, None) == getattr(theirs, attr, None)


def test_norm_modules_take_dtype_and_device(device):
    ln = LayerNorm((2, 3), dtype=trainkit.float64, device=device)
    gn = GroupNorm(2, 4, dtype=trainkit.float64, device=device)
    for m in (ln, gn):
        assert all(p.dtype == trainkit.float64 and str(p.device).startswith(device) for p in m.parameters())
    assert tuple(ln.weight.shape) == (2, 3) and tuple(gn.bias.shape) == (4,)


@pytest.mark.parametrize(
    "name,args,shape", [("LayerNorm", ((3, 4),), (2, 3, 4)), ("GroupNorm", (2, 6), (2, 6, 5))], ids=str
)
def test_norm_module_forward_and_backward_match_torch(torch, device, rng, name, args, shape):
    ours, theirs = _nn(trainkit, name)(*args), _nn(torch, name)(*args)
    for value in theirs.state_dict().values():
        value.copy_(torch.tensor(rng.standard_normal(tuple(value.shape)).astype(np.float32)))
    ours.load_state_dict({k: trainkit.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    ours.to(device)
    x = rng.standard_normal(shape).astype(np.float32)
    y1 = ours(trainkit.tensor(x, device=device))
    y2 = theirs(torch.tensor(x))
    y1.sum().backward()
    y2.sum().backward()
    np.testing.assert_allclose(to_numpy(y1), y2.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert type(y1.grad_fn).__name__ == type(y2.grad_fn).__name__
    for (n1, p1), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n1 == n2
        np.testing.assert_allclose(to_numpy(p1.grad), p2.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_group_norm_module_errors_match_torch(torch):
    assert_same_error(
        torch, lambda lib, dev: _nn(lib, "GroupNorm")(4, 6), "num_channels (6) must be divisible by num_groups (4)"
    )
    assert_same_error(torch, lambda lib, dev: _nn(lib, "GroupNorm")(0, 6))
    assert_same_error(torch, lambda lib, dev: _nn(lib, "LayerNorm")(4)(lib.ones(2, 3)), "expected input with shape")


# ---------------------------------------------------------------------------------------------- channel dropout
def test_dropout2d_zeroes_whole_channels_with_probability_p(device):
    trainkit.manual_seed(1)
    x = trainkit.ones(200, 100, 2, 3, device=device)
    y = to_numpy(tkF.dropout2d(x, p=0.3))
    assert y.dtype == np.float32
    per_channel = y.reshape(200, 100, -1)
    assert (per_channel == per_channel[..., :1]).all()  # one value per channel
    dropped = per_channel[..., 0] == 0
    assert abs(dropped.mean() - 0.3) < 0.01
    np.testing.assert_allclose(per_channel[~dropped], 1 / 0.7, rtol=1e-6)


def test_dropout1d_zeroes_whole_channels_batched_and_not(device):
    trainkit.manual_seed(2)
    y = to_numpy(tkF.dropout1d(trainkit.ones(100, 100, 4, device=device), p=0.6))
    assert (y == y[..., :1]).all()
    assert abs((y[..., 0] == 0).mean() - 0.6) < 0.015
    np.testing.assert_allclose(y[y != 0], 2.5, rtol=1e-6)
    y = to_numpy(tkF.dropout1d(trainkit.ones(10_000, 3, device=device), p=0.25))
    assert y.shape == (10_000, 3) and (y == y[:, :1]).all()
    assert abs((y[:, 0] == 0).mean() - 0.25) < 0.015


def test_channel_dropout_statistics_match_torch(torch):
    trainkit.manual_seed(0)
    torch.manual_seed(0)
    ours = to_numpy(tkF.dropout2d(trainkit.ones(100, 400, 1, 1), 0.4))
    theirs = to_numpy(torch.nn.functional.dropout2d(torch.ones(100, 400, 1, 1), 0.4))
    assert abs((ours == 0).mean() - (theirs == 0).mean()) < 0.015
    np.testing.assert_allclose(sorted(set(ours.ravel().tolist())), sorted(set(theirs.ravel().tolist())), rtol=1e-6)


def test_channel_dropout_is_seeded():
    trainkit.manual_seed(5)
    a = to_numpy(tkF.dropout2d(trainkit.ones(8, 16, 2, 2)))
    trainkit.manual_seed(5)
    b = to_numpy(tkF.dropout2d(trainkit.ones(8, 16, 2, 2)))
    np.testing.assert_array_equal(a, b)


def test_channel_dropout_grad_is_the_mask_and_grad_fn_matches_torch(torch, device):
    trainkit.manual_seed(0)
    x = trainkit.ones(4, 8, 3, 3, device=device, requires_grad=True)
    y = tkF.dropout2d(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), to_numpy(y))
    assert x.grad.dtype == trainkit.float32
    cases = [
        lambda lib, t: _F(lib).dropout2d(t, 0.5),
        lambda lib, t: _F(lib).dropout2d(t, 1.0),
        lambda lib, t: _F(lib).dropout1d(t[0], 0.5),
        lambda lib, t: _F(lib).dropout1d(t[0, 0], 0.5),
        lambda lib, t: _F(lib).dropout1d(t[0, 0], 0.0),
        lambda lib, t: _F(lib).dropout1d(t[0, 0], 0.5, training=False),
        lambda lib, t: _F(lib).dropout2d(t * 1, 0.5, inplace=True),
    ]
    for case in cases:
        names = []
        for lib, dev in ((trainkit, device), (torch, "cpu")):
            t = lib.ones(2, 3, 4, 5, device=dev, requires_grad=True)
            names.append(type(case(lib, t).grad_fn).__name__)
        assert names[0] == names[1]


def test_channel_dropout_p_zero_one_and_eval(device):
    x = trainkit.ones(2, 3, 4, 4, device=device)
    assert tkF.dropout2d(x, 0.0) is x
    assert tkF.dropout2d(x, 0.5, training=False) is x
    assert tkF.dropout1d(x[0], 0.5, training=False).shape == (3, 4, 4)
    assert (to_numpy(tkF.dropout2d(x, 1.0)) == 0).all()
    layer = Dropout2d(0.9).eval()
    assert layer(x) is x
    sample = x[0]
    assert Dropout1d(0.9).eval()(sample) is sample


def test_channel_dropout_in_place(device):
    trainkit.manual_seed(3)
    x = trainkit.ones(30, 20, 2, device=device)
    y = tkF.dropout1d(x, 0.5, inplace=True)
    assert y is x
    values = to_numpy(x)
    assert set(values.ravel().tolist()) == {0.0, 2.0} and (values == values[..., :1]).all()
    x = trainkit.ones(50, 2, device=device)
    y = tkF.dropout1d(x, 0.5, inplace=True)
    assert y is x and (to_numpy(x) == to_numpy(x)[:, :1]).all()
    layer = Dropout2d(0.5, inplace=True)
    x = trainkit.ones(4, 6, 2, 2, device=device)
    assert layer(x) is x


def test_channel_dropout_keeps_float64(device):
    y = tkF.dropout2d(trainkit.ones(2, 3, 2, 2, dtype=trainkit.float64, device=device), 0.5)
    assert y.dtype == trainkit.float64


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 4), (2, 3, 4, 5, 6), (2, 3, 4, 5)], ids=str)
def test_dropout2d_warnings_match_torch(torch, shape):
    ours = _warnings_of(lambda: tkF.dropout2d(trainkit.ones(*shape)))
    theirs = _warnings_of(lambda: torch.nn.functional.dropout2d(torch.ones(*shape)))
    assert ours == theirs
    layer = Dropout2d()
    assert _warnings_of(lambda: layer(trainkit.ones(*shape))) == theirs


def test_dropout2d_warning_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tkF.dropout2d(trainkit.ones(2, 3, 4))
    assert caught[0].filename == __file__


CHANNEL_DROPOUT_ERRORS = [
    (lambda lib: _F(lib).dropout2d(lib.ones(2, 3, 4, 4), p=1.5), ["between 0 and 1, but got 1.5"]),
    (lambda lib: _F(lib).dropout1d(lib.ones(2, 3, 4), p=-0.1), ["between 0 and 1, but got -0.1"]),
    (lambda lib: _F(lib).dropout1d(lib.ones(2, 3, 4, 5)), ["Expected 2D or 3D input, but received a 4D input"]),
    (lambda lib: _F(lib).dropout1d(lib.ones(3), training=False), ["received a 1D input"]),
    (lambda lib: _F(lib).dropout2d(lib.ones(3)), ["Feature dropout requires at least 2 dimensions"]),
    (lambda lib: _F(lib).dropout2d(lib.ones(2, 3, 4, 4, dtype=lib.int64), 0.5), ["can't be cast", "Long"]),
    (lambda lib: _nn(lib, "Dropout2d")(2), ["between 0 and 1, but got 2"]),
    (lambda lib: _nn(lib, "Dropout1d")(-1), ["between 0 and 1, but got -1"]),
]


@pytest.mark.parametrize("case", range(len(CHANNEL_DROPOUT_ERRORS)))
def test_channel_dropout_errors_match_torch(torch, case):
    fn, words = CHANNEL_DROPOUT_ERRORS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_error(torch, lambda lib, dev: fn(lib), *words)


def test_channel_dropout_of_a_leaf_in_place_is_an_error_as_torch(torch):
    assert_same_error(
        torch,
        lambda lib, dev: _F(lib).dropout2d(lib.ones(2, 3, 2, 2, requires_grad=True), inplace=True),
        "leaf Variable",
    )


def test_dropout3d_zeroes_whole_channels_batched_and_not(device):
    trainkit.manual_seed(4)
    y = to_numpy(tkF.dropout3d(trainkit.ones(60, 100, 2, 2, 3, device=device), p=0.3))
    per_channel = y.reshape(60, 100, -1)
    assert y.dtype == np.float32 and (per_channel == per_channel[..., :1]).all()
    assert abs((per_channel[..., 0] == 0).mean() - 0.3) < 0.015
    np.testing.assert_allclose(per_channel[per_channel != 0], 1 / 0.7, rtol=1e-6)
    y = to_numpy(tkF.dropout3d(trainkit.ones(5000, 2, 2, 2, device=device), p=0.5))  # (C, D, H, W)
    assert y.shape == (5000, 2, 2, 2) and (y.reshape(5000, -1) == y.reshape(5000, -1)[:, :1]).all()
    assert abs((y[:, 0, 0, 0] == 0).mean() - 0.5) < 0.03
    x = trainkit.ones(40, 3, 2, 2, device=device)
    assert tkF.dropout3d(x, 0.5, inplace=True) is x
    values = to_numpy(x).reshape(40, -1)
    assert set(values.ravel().tolist()) <= {0.0, 2.0} and (values == values[:, :1]).all()
    batch = trainkit.ones(2, 3, 1, 1, 1, device=device)
    assert Dropout3d(0.9).eval()(batch) is batch  # as torch: an unbatched input comes back as a new view


@pytest.mark.filterwarnings("ignore:dropout3d")  # the deprecation notices compared in the test itself
@pytest.mark.parametrize("shape", [(2, 3, 4, 5, 6), (3, 4, 5, 6), (2, 3, 4), (5,)], ids=str)
def test_dropout3d_warnings_grad_fn_and_module_match_torch(torch, shape):
    ours = _warnings_of(lambda: tkF.dropout3d(trainkit.ones(*shape)))
    theirs = _warnings_of(lambda: torch.nn.functional.dropout3d(torch.ones(*shape)))
    assert ours == theirs
    x, t = trainkit.ones(*shape, requires_grad=True), torch.ones(*shape, requires_grad=True)
    assert type(tkF.dropout3d(x, 0.5).grad_fn).__name__ == type(torch.nn.functional.dropout3d(t, 0.5).grad_fn).__name__
    assert repr(Dropout3d(0.2, True)) == repr(torch.nn.Dropout3d(0.2, True))
    assert_same_error(torch, lambda lib, dev: _F(lib).dropout3d(lib.ones(*shape), 1.5))
