"""sgn, signbit, erfc, the inverse hyperbolic functions and the arc* aliases, deg2rad, rad2deg, logit, xlogy,
nan_to_num, positive and fix: finite-difference gradients, and values, dtypes, node names and gradients against
PyTorch, edge values included."""

from __future__ import annotations

import math

import numpy as np
import pytest

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.25, 2.0, 1e-30, 3e38, INF, -INF, NAN]
UNIT = [0.0, -0.0, 0.3, -0.7, 0.99, -0.99, 1.0, -1.0, 1.5, INF, NAN]


def _fn(lib, name):
    return getattr(lib, name)


# name -> (kwargs, values for the finite-difference check: kept away from kinks and domain ends)
UNARY = {
    "sgn": ({}, [0.3, -1.2, 2.0]),
    "erfc": ({}, [0.3, -1.2, 2.0]),
    "asinh": ({}, [0.3, -1.2, 2.0]),
    "arcsinh": ({}, [0.3, -1.2, 2.0]),
    "acosh": ({}, [1.3, 2.2, 5.0]),
    "arccosh": ({}, [1.3, 2.2, 5.0]),
    "atanh": ({}, [0.3, -0.6, 0.9]),
    "arctanh": ({}, [0.3, -0.6, 0.9]),
    "arcsin": ({}, [0.3, -0.6, 0.9]),
    "arccos": ({}, [0.3, -0.6, 0.9]),
    "arctan": ({}, [0.3, -1.2, 2.0]),
    "deg2rad": ({}, [0.3, -1.2, 2.0]),
    "rad2deg": ({}, [0.3, -1.2, 2.0]),
    "logit": ({}, [0.3, 0.6, 0.9]),
    "nan_to_num": ({}, [0.3, -1.2, 2.0]),
    "fix": ({}, [0.3, -1.2, 2.4]),
}
WITH_KWARGS = [
    ("logit", {"eps": 0.2}),
    ("logit", {"eps": 0.0}),
    ("nan_to_num", {"nan": 1.5, "posinf": 2.0, "neginf": -3.0}),
    ("nan_to_num", {"posinf": 7.0}),
]


def _compare(got, want):
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    a, b = got.detach().numpy(), want.detach().numpy()
    numbers = ~np.isnan(b)  # the sign of a NaN is no part of the contract
    assert np.array_equal(np.signbit(a)[numbers], np.signbit(b)[numbers])


def _dense(t):
    """sgn's zero gradient is a ZeroTensor in torch, which has no NumPy view."""
    return torch.zeros_like(t) if t._is_zerotensor() else t


def _grad_name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _same_as_torch(make_input, fn):
    """``fn(lib, x)`` and its backward from ``sum`` in both libraries: values, node names and the input's gradient
    agree."""
    results = []
    for lib in (trainkit, torch):
        x = make_input(lib)
        y = fn(lib, x)
        y.sum().backward()
        results.append((y, _grad_name(y), x.grad))
    (y, node, grad), (ty, tnode, tgrad) = results
    _compare(y, ty)
    assert node == tnode
    _compare(grad, _dense(tgrad))


@pytest.mark.parametrize("name", list(UNARY))
def test_gradcheck_unary(name):
    kwargs, values = UNARY[name]
    x = trainkit.tensor(values, dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: _fn(trainkit, name)(t, **kwargs), (x,))
    assert gradgradcheck(lambda t: _fn(trainkit, name)(t, **kwargs), (x,))


@pytest.mark.parametrize("name,kwargs", WITH_KWARGS)
def test_gradcheck_with_options(name, kwargs):
    x = trainkit.tensor([0.3, 0.55, 0.7], dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: _fn(trainkit, name)(t, **kwargs), (x,))


def test_gradcheck_xlogy():
    x = trainkit.tensor([0.3, -1.2, 2.0], dtype=trainkit.float64, requires_grad=True)
    y = trainkit.tensor([0.5, 1.7, 3.0], dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(trainkit.xlogy, (x, y))
    assert gradgradcheck(trainkit.xlogy, (x, y))
    assert gradcheck(lambda t: trainkit.xlogy(t, 2.5), (x,))
    assert gradcheck(lambda t: trainkit.xlogy(1.5, t), (y,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_matches_torch(name, dtype):
    kwargs, _ = UNARY[name]
    values = UNIT if name in ("atanh", "arctanh", "arcsin", "arccos", "logit") else EDGE
    _same_as_torch(
        lambda lib: lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True),
        lambda lib, x: _fn(lib, name)(x, **kwargs),
    )


@pytest.mark.parametrize("name,kwargs", WITH_KWARGS)
def test_options_match_torch(name, kwargs):
    _same_as_torch(
        lambda lib: lib.tensor(EDGE + [0.1, 0.9], requires_grad=True), lambda lib, x: _fn(lib, name)(x, **kwargs)
    )


@pytest.mark.parametrize("dtype", ["int64", "bool"])
@pytest.mark.parametrize("name", list(UNARY) + ["signbit"])
def test_integer_and_bool_inputs(name, dtype):
    values = [0, 1, -3, 2] if dtype == "int64" else [True, False, True, True]
    out = []
    for lib in (trainkit, torch):
        x = lib.tensor(values, dtype=getattr(lib, dtype))
        try:
            out.append(_fn(lib, name)(x))
        except Exception as e:  # noqa: BLE001 - the error type is what is compared
            out.append(type(e))
    if isinstance(out[1], type):
        assert out[0] is out[1]
    else:
        _compare(*out)


def test_signbit():
    for dtype in ("float32", "float64", "int64", "bool"):
        values = EDGE if dtype.startswith("float") else ([0, -1, 5] if dtype == "int64" else [True, False])
        got = trainkit.signbit(trainkit.tensor(values, dtype=getattr(trainkit, dtype)))
        want = torch.signbit(torch.tensor(values, dtype=getattr(torch, dtype)))
        assert got.dtype == trainkit.bool
        assert got.tolist() == want.tolist()
    x = trainkit.tensor([-1.0, 0.0], requires_grad=True)
    assert x.signbit().grad_fn is None and not x.signbit().requires_grad


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_xlogy_matches_torch(dtype):
    xs = [0.0, -0.0, 0.0, 0.0, 1.0, 2.0, -1.0, NAN, 0.5, 3e38, INF, 0.0]
    ys = [NAN, 0.0, -1.0, 2.0, 0.0, INF, 0.5, 1.0, -0.0, 2.0, 1e-30, INF]
    if dtype == "int64":
        xs, ys = [0, 0, 1, 2, -1, 3], [0, -1, 0, 4, 2, 3]
    floating = dtype != "int64"
    for make in (
        lambda L, a, b: L.xlogy(a, b),
        lambda L, a, b: a.xlogy(b),
        lambda L, a, b: L.xlogy(a, 2.5),
        lambda L, a, b: L.xlogy(0.0, b),
        lambda L, a, b: L.xlogy(a, 0),
    ):
        results = []
        for lib in (trainkit, torch):
            a = lib.tensor(xs, dtype=getattr(lib, dtype), requires_grad=floating)
            b = lib.tensor(ys, dtype=getattr(lib, dtype), requires_grad=floating)
            out = make(lib, a, b)
            if floating:
                out.sum().backward()
            results.append((out, _grad_name(out), a.grad, b.grad))
        (y, node, ga, gb), (ty, tnode, tga, tgb) = results
        _compare(y, ty)
        assert node == tnode
        for g, tg in ((ga, tga), (gb, tgb)):
            assert (g is None) == (tg is None)
            if g is not None:
                _compare(g, tg)


def test_xlogy_refuses_two_numbers():
    with pytest.raises(TypeError) as got:
        trainkit.xlogy(2.0, 3.0)
    with pytest.raises(TypeError) as want:
        torch.xlogy(2.0, 3.0)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize(
    "name",
    [
        "sgn",
        "erfc",
        "asinh",
        "acosh",
        "atanh",
        "arcsin",
        "arccos",
        "arctan",
        "arcsinh",
        "arccosh",
        "arctanh",
        "deg2rad",
        "rad2deg",
        "logit",
        "nan_to_num",
        "fix",
    ],
)
def test_inplace_forms_match_torch(name):
    values = [0.3, 0.6, 1.5, NAN] if name not in ("acosh", "arccosh") else [1.3, 2.0, 0.5, INF]
    results = []
    for lib in (trainkit, torch):
        leaf = lib.tensor(values, requires_grad=True)
        x = leaf.clone()
        out = getattr(x, name + "_")()
        assert out is x
        try:
            x.sum().backward()
            grad, error = leaf.grad, None
        except Exception as e:  # noqa: BLE001 - asinh_, acosh_ and atanh_ have no derivative in torch
            grad, error = None, (type(e), str(e))
        results.append((x, _grad_name(x), grad, error))
    (y, node, grad, error), (ty, tnode, tgrad, terror) = results
    _compare(y, ty)
    assert node == tnode
    assert error == terror
    if tgrad is not None:
        _compare(grad, _dense(tgrad))
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(trainkit.tensor([1, 2]), name + "_")() if name not in ("sgn", "fix", "nan_to_num") else trainkit.tensor(
            [1, 2]
        ).deg2rad_()


def test_xlogy_inplace():
    for lib in (trainkit, torch):
        x = lib.tensor([0.5, 0.0, 2.0])
        assert x.xlogy_(lib.tensor([2.0, 0.0, 3.0])) is x
    np.testing.assert_allclose(x.numpy(), [0.5 * math.log(2), 0.0, 2 * math.log(3)], rtol=1e-6)


def test_positive_and_aliases():
    x = trainkit.tensor([1.0, -2.0], requires_grad=True)
    assert trainkit.positive(x) is x and x.positive() is x
    with pytest.raises(RuntimeError, match="bool tensor is not supported"):
        trainkit.positive(trainkit.tensor([True]))
    for alias, name in (("arcsinh", "asinh"), ("arcsin", "asin"), ("fix", "trunc")):
        x = trainkit.tensor([0.5, -0.25], requires_grad=True)
        a, b = getattr(trainkit, alias)(x), getattr(x, name)()
        assert a.tolist() == b.tolist() and type(a.grad_fn) is type(b.grad_fn)


def test_out_keyword():
    for lib in (trainkit, torch):
        out = lib.empty(2)
        lib.erfc(lib.tensor([0.0, 1.0]), out=out)
        np.testing.assert_allclose(out.numpy(), [1.0, math.erfc(1.0)], rtol=1e-6)


# --- shapes, joins, counts and matrix functions -------------------------------------------------------------
MATRIX_EDGE = [[0.0, -0.0, INF], [NAN, 1.5, -INF], [2.0, -1.0, 0.5]]
SHAPED = {
    "fliplr": lambda L, x: L.fliplr(x),
    "flipud": lambda L, x: L.flipud(x),
    "moveaxis": lambda L, x: L.moveaxis(x, 0, 1),
    "Tensor.moveaxis": lambda L, x: x.moveaxis((0, 1), (1, 0)),
    "hstack": lambda L, x: L.hstack([x, x * 2]),
    "vstack": lambda L, x: L.vstack([x, x[0]]),
    "trace": lambda L, x: L.trace(x),
    "Tensor.trace": lambda L, x: x.trace(),
    "mv": lambda L, x: L.mv(x, x[0] * 0.5),
    "Tensor.mv": lambda L, x: x.mv(x[:, 1]),
}


@pytest.mark.parametrize("name", list(SHAPED))
def test_gradcheck_shaped(name):
    x = trainkit.tensor(
        [[0.3, -1.2, 2.0], [0.7, 1.1, -0.4], [1.5, -0.2, 0.9]], dtype=trainkit.float64, requires_grad=True
    )
    assert gradcheck(lambda t: SHAPED[name](trainkit, t), (x,))
    assert gradgradcheck(lambda t: SHAPED[name](trainkit, t), (x,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(SHAPED))
def test_shaped_match_torch(name, dtype):
    _same_as_torch(lambda lib: lib.tensor(MATRIX_EDGE, dtype=getattr(lib, dtype), requires_grad=True), SHAPED[name])


@pytest.mark.parametrize("name", ["trace", "mv", "hstack", "vstack", "fliplr", "flipud"])
def test_shaped_integer_inputs(name):
    out = []
    for lib in (trainkit, torch):
        x = lib.tensor([[1, 0, -3], [2, 5, 0], [7, -1, 4]])
        out.append(SHAPED[name](lib, x) if name != "mv" else lib.mv(x, x[0]))
    _compare(*out)


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.fliplr(L.ones(3)),
        lambda L: L.flipud(L.tensor(1.0)),
        lambda L: L.hstack([]),
        lambda L: L.vstack([]),
        lambda L: L.trace(L.ones(3)),
        lambda L: L.trace(L.ones(2, 2, dtype=L.bool)),
        lambda L: L.mv(L.ones(2, 3), L.ones(2)),
        lambda L: L.mv(L.ones(3), L.ones(3)),
        lambda L: L.mv(L.tensor(1.0), L.ones(3)),
        lambda L: L.count_nonzero(L.ones(2, 3), dim=(0, 0)),
        lambda L: L.count_nonzero(L.ones(2, 3), dim=2),
        lambda L: L.moveaxis(L.ones(2, 3), 0, 5),
    ],
)
def test_shaped_errors_match_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(trainkit)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("kwargs", [{}, {"dim": 0}, {"dim": -1}, {"dim": (0, 1)}, {"dim": [1]}])
def test_count_nonzero_and_argwhere(kwargs):
    for dtype in ("float32", "int64", "bool"):
        values = MATRIX_EDGE if dtype == "float32" else [[0, 1, 2], [3, 0, 0]]
        got = trainkit.count_nonzero(trainkit.tensor(values, dtype=getattr(trainkit, dtype)), **kwargs)
        want = torch.count_nonzero(torch.tensor(values, dtype=getattr(torch, dtype)), **kwargs)
        assert got.dtype == trainkit.int64 and got.tolist() == want.tolist()
        x = trainkit.tensor(values, dtype=getattr(trainkit, dtype))
        assert x.count_nonzero(**kwargs).tolist() == want.tolist()
        assert x.argwhere().tolist() == torch.argwhere(torch.tensor(values)).tolist()
    assert trainkit.argwhere(trainkit.tensor(0.0)).shape == torch.argwhere(torch.tensor(0.0)).shape
    assert trainkit.count_nonzero(trainkit.tensor(-0.0)).item() == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.hstack([L.ones(2), L.zeros(1)], out=L.empty(3)),
        lambda L: L.vstack([L.ones(2), L.zeros(2)], out=L.empty(2, 2, dtype=L.float64)),
        lambda L: L.hstack([L.ones(2), L.zeros(1)], out=L.empty(3, dtype=L.int64)),
        lambda L: L.mv(L.ones(2, 3), L.ones(3), out=L.empty(2)),
        lambda L: L.mv(L.ones(2, 3), L.ones(3), out=L.empty(2, dtype=L.float64)),
        lambda L: L.mv(L.ones(2, 3, requires_grad=True), L.ones(3), out=L.empty(2)),
    ],
)
def test_out_keyword_of_joins_and_mv(call):
    try:
        want = call(torch)
    except Exception as e:  # noqa: BLE001 - the same error is expected
        with pytest.raises(type(e)) as got:
            call(trainkit)
        assert str(got.value) == str(e)
        return
    got = call(trainkit)
    assert got.tolist() == want.tolist() and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]


# --- var_mean, std_mean, nansum, nanmean --------------------------------------------------------------------
STATS = {
    "var_mean": lambda L, x, **k: L.var_mean(x, **k),
    "std_mean": lambda L, x, **k: L.std_mean(x, **k),
    "nansum": lambda L, x, **k: (L.nansum(x, **k),),
    "Tensor.nansum": lambda L, x, **k: (x.nansum(**k),),
    "nanmean": lambda L, x, **k: (L.nanmean(x, **k),),
    "Tensor.nanmean": lambda L, x, **k: (x.nanmean(**k),),
}
STAT_FORMS = [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": (0, 1)}]


@pytest.mark.parametrize("kwargs", STAT_FORMS)
@pytest.mark.parametrize("name", list(STATS))
def test_gradcheck_stats(name, kwargs):
    x = trainkit.tensor([[0.3, -1.2, 2.0], [0.7, 1.1, -0.4]], dtype=trainkit.float64, requires_grad=True)

    def total(t):
        outs = STATS[name](trainkit, t, **kwargs)
        return sum((o * (i + 1)).sum() for i, o in enumerate(outs))  # both outputs' gradients, weighted apart

    assert gradcheck(total, (x,))
    assert gradgradcheck(total, (x,))


@pytest.mark.parametrize(
    "values",
    [[[0.3, -1.2, 2.0], [0.7, 1.1, -0.4]], [[0.0, -0.0, NAN], [INF, 1.5, -2.0]], [[NAN, NAN, 1.0], [3e38, 3e38, -1.0]]],
)
@pytest.mark.parametrize("kwargs", STAT_FORMS + [{"correction": 0}, {"dim": 1, "correction": 2}])
@pytest.mark.parametrize("name", list(STATS))
def test_stats_match_torch(name, kwargs, values):
    if name.startswith(("nan", "Tensor.nan")) and "correction" in kwargs:
        return
    results = []
    for lib in (trainkit, torch):
        x = lib.tensor(values, requires_grad=True)
        outs = STATS[name](lib, x, **kwargs)
        sum((o * (i + 1)).sum() for i, o in enumerate(outs)).backward()
        results.append((outs, [_grad_name(o) for o in outs], x.grad))
    (outs, nodes, grad), (touts, tnodes, tgrad) = results
    assert type(outs) is tuple and len(outs) == len(touts)
    for o, to in zip(outs, touts):
        _compare(o, to)
    assert nodes == tnodes
    _compare(grad, tgrad)


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.var_mean(L.tensor([1, 2])),
        lambda L: L.std_mean(L.tensor([1, 2])),
        lambda L: L.nanmean(L.tensor([1, 2])),
        lambda L: L.nansum(L.ones(2), dim=3),
        lambda L: L.nansum(L.ones(2, requires_grad=True), dtype=L.int64),
    ],
)
def test_stats_errors_match_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)):
        call(trainkit)


def test_nansum_of_integers_and_dtype():
    for lib in (trainkit, torch):
        assert lib.nansum(lib.tensor([[1, 2], [3, 4]]), 0).tolist() == [4, 6]
        assert lib.nansum(lib.tensor([True, True])).item() == 2
        assert lib.nansum(lib.tensor([1.0, NAN]), dtype=lib.float64).dtype == lib.float64
        assert math.isnan(lib.nanmean(lib.tensor([NAN, NAN])).item())


# --- diagonal -----------------------------------------------------------------------------------------------
DIAGONAL_FORMS = [(), (1,), (-1,), (1, 2, 0), (0, -1, -3), (4,)]


@pytest.mark.parametrize("args", DIAGONAL_FORMS)
def test_gradcheck_diagonal(args):
    x = trainkit.tensor(np.arange(24.0).reshape(2, 3, 4) * 0.1 - 1, dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: t.diagonal(*args) * 1.5, (x,))
    assert gradgradcheck(lambda t: trainkit.diagonal(t, *args) ** 2, (x,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("args", DIAGONAL_FORMS)
def test_diagonal_matches_torch(args, dtype):
    values = np.array(EDGE * 2, dtype=dtype)[:24].reshape(2, 3, 4)
    results = []
    for lib in (trainkit, torch):
        x = lib.tensor(values, requires_grad=True)
        y = lib.diagonal(x, *args)
        (y * lib.arange(1.0, 1.0 + y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        results.append((y, _grad_name(y), x.grad))
    (y, node, grad), (ty, tnode, tgrad) = results
    _compare(y, ty)
    assert node == tnode == "DiagonalBackward0"
    _compare(grad, tgrad)


def test_diagonal_is_a_view_written_through():
    results = []
    for lib in (trainkit, torch):
        leaf = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        x = leaf * 1
        x.diagonal(1).mul_(3)
        x.sum().backward()
        plain = lib.ones(3, 3, dtype=lib.int64)
        plain.diagonal().zero_()
        results.append((x, _grad_name(x), leaf.grad, plain))
    (x, node, grad, plain), (tx, tnode, tgrad, tplain) = results
    _compare(x, tx)
    assert node == tnode
    _compare(grad, tgrad)
    assert plain.tolist() == tplain.tolist()


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.diagonal(L.ones(3)),
        lambda L: L.diagonal(L.ones(3, 3), 0, 1, 1),
        lambda L: L.diagonal(L.ones(3, 3), 0, -1, 1),
        lambda L: L.ones(2, 2).diagonal(0, 0, 2),
    ],
)
def test_diagonal_errors_match_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(trainkit)
    assert str(got.value) == str(want.value)
