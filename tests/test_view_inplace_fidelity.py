"""In-place ops through views, detach_, division nodes and fills, against torch: the same errors (class and
message), the same grad_fn names and structure, the same values and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from tests.conftest import assert_same_error, to_numpy


def names(t, depth: int = 2):
    """The node of ``t`` and, to ``depth``, its next functions' names: the shape of the graph PyTorch prints."""

    def walk(node, d):
        if node is None:
            return None
        if d == 0:
            return type(node).__name__
        return (type(node).__name__, [walk(n, d - 1) for n, _ in node.next_functions])

    return walk(t.grad_fn, depth)


# --- detach_ ------------------------------------------------------------------------------------------------

DETACH_VIEWS = {
    "view of a leaf that requires grad": lambda L: L.ones(3, requires_grad=True)[1:],
    "view of a non-leaf": lambda L: L.ones(3, requires_grad=True).clone()[1:],
    "view of a plain tensor": lambda L: L.ones(3)[1:],
    "view of a view": lambda L: L.ones(3)[1:][1:],
    "view of a detached tensor": lambda L: L.ones(3, requires_grad=True).detach().unsqueeze(0),
    "output of unbind": lambda L: L.ones(3, 2, requires_grad=True).clone().unbind()[0],
}


@pytest.mark.parametrize("make", DETACH_VIEWS.values(), ids=DETACH_VIEWS.keys())
def test_detach_in_place_refuses_every_view(torch, make):
    got, want = assert_same_error(torch, lambda L, dev: make(L).detach_(), "Can't detach views in-place")
    assert str(got) == str(want)


def test_detach_in_place_of_a_tensor_that_is_not_a_view(torch):
    for L in (trainkit, torch):
        x = L.ones(3, requires_grad=True)
        y = (x * 2).detach_()
        assert not y.requires_grad and y.grad_fn is None and x.detach().detach_().grad_fn is None


# --- division nodes -----------------------------------------------------------------------------------------

DIVISIONS = {
    "x / 2": lambda L, x: x / 2,
    "x.div(2)": lambda L, x: x.div(2),
    "x / tensor": lambda L, x: x / L.full((3,), 2.0),
    "true_divide": lambda L, x: L.true_divide(x, 2),
    "rounding_mode=None, number": lambda L, x: L.div(x, 2, rounding_mode=None),
    "rounding_mode=None, tensor": lambda L, x: L.div(x, L.full((3,), 2.0), rounding_mode=None),
    "method, rounding_mode=None": lambda L, x: x.div(2, rounding_mode=None),
    "divide, rounding_mode=None": lambda L, x: L.divide(x, 2, rounding_mode=None),
    "number / x, rounding_mode=None": lambda L, x: L.div(2, x, rounding_mode=None),
    "floor": lambda L, x: L.div(x, 2, rounding_mode="floor"),
    "trunc, tensor": lambda L, x: L.div(x, L.full((3,), 2.0), rounding_mode="trunc"),
    "div_": lambda L, x: x.clone().div_(2),
    "div_, rounding_mode=None": lambda L, x: x.clone().div_(L.full((3,), 2.0), rounding_mode=None),
    "div_, floor": lambda L, x: x.clone().div_(2, rounding_mode="floor"),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", DIVISIONS.values(), ids=DIVISIONS.keys())
def test_division_nodes_values_and_grads_match_torch(torch, fn, dtype):
    out = {}
    for L in (trainkit, torch):
        x = L.tensor([1.5, -3.0, 4.0], dtype=getattr(L, dtype), requires_grad=True)
        y = fn(L, x)
        y.backward(L.tensor([1.0, 2.0, -1.0], dtype=y.dtype))
        out[L.__name__] = (type(y.grad_fn).__name__, to_numpy(y), to_numpy(x.grad), y.dtype)
    got, want = out["trainkit"], out["torch"]
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    assert str(got[3]).split(".")[-1] == str(want[3]).split(".")[-1]


def test_true_division_with_an_explicit_none_mode_is_differentiable_twice():
    x = trainkit.tensor([1.5, 2.0], dtype=trainkit.float64, requires_grad=True)
    assert trainkit.autograd.gradcheck(lambda a: trainkit.div(a, a * a + 1, rounding_mode=None), (x,))
    assert trainkit.autograd.gradgradcheck(lambda a: trainkit.div(1.0, a, rounding_mode=None), (x,))


# --- in-place changes through views of leaves and views made in no_grad mode -------------------------------------


def _made_in_no_grad(L, base, view=lambda t: t[1:]):
    with L.no_grad():
        return view(base)


REFUSED = {
    "view of a leaf": lambda L: L.ones(3, requires_grad=True)[1:].mul_(2),
    "view of a view of a leaf": lambda L: L.ones(3, 4, requires_grad=True)[1:].t().mul_(2),
    "select, narrow, view, diagonal": lambda L: L.ones(3, 3, requires_grad=True).diagonal().add_(1),
    "reshape of a leaf": lambda L: L.ones(3, 3, requires_grad=True).reshape(9).zero_(),
    "copy_ into a view of a leaf": lambda L: L.ones(3, 3, requires_grad=True)[0].copy_(L.zeros(3)),
    "fill_ of a view of a leaf": lambda L: L.ones(3, 3, requires_grad=True).narrow(0, 1, 1).fill_(1),
    "expanded view of a leaf (before the overlap check)": lambda L: (
        L.ones(1, 3, requires_grad=True).expand(3, 3).mul_(2)
    ),
    "leaf[0] = v writes through a view": lambda L: L.ones(3, 3, requires_grad=True).__setitem__(0, 5.0),
    "leaf[1:] = v": lambda L: L.ones(3, 3, requires_grad=True).__setitem__(slice(1, None), 5.0),
    "leaf[0, [1]] = v": lambda L: L.ones(3, 3, requires_grad=True).__setitem__((0, [1]), 5.0),
    "leaf[...] = v writes into the leaf": lambda L: L.ones(3, requires_grad=True).__setitem__(Ellipsis, 5.0),
    "leaf[mask] = v": lambda L: L.ones(3, requires_grad=True).__setitem__(L.tensor([True, False, True]), 5.0),
    "a leaf itself": lambda L: L.ones(3, requires_grad=True).mul_(2),
    "view made before requires_grad_()": lambda L: (lambda x: (x[1:], x.requires_grad_())[0].mul_(2))(L.ones(3)),
    "no_grad view of a leaf": lambda L: _made_in_no_grad(L, L.ones(3, requires_grad=True)).mul_(2),
    "no_grad view of a non-leaf": lambda L: _made_in_no_grad(L, L.ones(3, requires_grad=True).clone()).mul_(2),
    "no_grad view, operand requires grad": lambda L: _made_in_no_grad(L, L.ones(3)).add_(L.ones(2, requires_grad=True)),
    "no_grad view, item set": lambda L: _made_in_no_grad(L, L.ones(3, requires_grad=True).clone()).__setitem__(0, 1.0),
    "view of a no_grad view": lambda L: _made_in_no_grad(L, L.ones(3, requires_grad=True).clone())[1:].mul_(2),
    "output of unbind": lambda L: L.ones(3, 3, requires_grad=True).clone().unbind()[0].mul_(2),
}


@pytest.mark.parametrize("fn", REFUSED.values(), ids=REFUSED.keys())
def test_in_place_refusals_match_torch_word_for_word(torch, fn):
    got, want = assert_same_error(torch, lambda L, dev: fn(L), "in")
    assert str(got) == str(want)


ALLOWED = {
    "view of a leaf under no_grad": lambda L: _no_grad_call(L, lambda x: x[1:].mul_(2)),
    "no_grad view of a plain tensor, grad mode": lambda L: _made_in_no_grad(L, L.ones(3)).mul_(2),
    "view of a detached leaf": lambda L: L.ones(3, requires_grad=True).detach()[1:].mul_(2),
    "integer view": lambda L: L.ones(3, dtype=L.int64)[1:].add_(1),
}


def _no_grad_call(L, fn):
    x = L.ones(3, requires_grad=True)
    with L.no_grad():
        fn(x)
    return x


@pytest.mark.parametrize("fn", ALLOWED.values(), ids=ALLOWED.keys())
def test_in_place_changes_torch_allows(torch, fn):
    np.testing.assert_array_equal(to_numpy(fn(trainkit)), to_numpy(fn(torch)))


# --- grad_fn names and graph structure after in-place changes through views ---------------------------------

VIEWS = {
    "slice": lambda a: a[1:],
    "select": lambda a: a[1],
    "t": lambda a: a.t(),
    "transpose": lambda a: a.transpose(0, 1),
    "narrow": lambda a: a.narrow(1, 1, 2),
    "view": lambda a: a.view(24),
    "reshape": lambda a: a.reshape(2, 12),
    "permute": lambda a: a.permute(1, 0),
    "unsqueeze": lambda a: a.unsqueeze(0),
    "diagonal": lambda a: a.diagonal(),
    "slice of a slice": lambda a: a[1:][:, ::2],
    "t of a slice": lambda a: a[1:].t(),
    "select of a transpose": lambda a: a.t()[2],
    "view of a view": lambda a: a.view(24).view(2, 12),
    "squeeze of an unsqueeze": lambda a: a.unsqueeze(0).squeeze(0),
    "expand of a row": lambda a: a[:1].expand(1, 6),
}

CHANGES = {
    "mul_ by a number": lambda L, v, y: v.mul_(2),
    "mul_ by a tensor": lambda L, v, y: v.mul_(y[:1]),
    "copy_": lambda L, v, y: v.copy_(y[1:2] * 3),
    "add_ with alpha": lambda L, v, y: v.add_(y.sum(), alpha=3),
    "clamp_": lambda L, v, y: v.clamp_(-0.5, 0.5),
    "item set": lambda L, v, y: v.__setitem__((0,) * max(v.dim(), 1) if v.dim() else Ellipsis, y.sum()),
}


def _change_through_view(L, view, change, dtype="float64"):
    rng = np.random.default_rng(0)
    leaf = L.tensor(rng.standard_normal((4, 6)), dtype=getattr(L, dtype), requires_grad=True)
    y = L.tensor(rng.standard_normal(6), dtype=getattr(L, dtype), requires_grad=True)
    a = leaf.clone()
    v = view(a)
    change(L, v, y)
    structure = names(a, 2), names(v, 2)
    (a * L.arange(24.0, dtype=a.dtype).reshape(4, 6)).sum().backward()
    return structure, to_numpy(a), to_numpy(leaf.grad), None if y.grad is None else to_numpy(y.grad)


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_in_place_through_views_records_torch_graph(torch, view, change):
    got, want = _change_through_view(trainkit, view, change), _change_through_view(torch, view, change)
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:]):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _stale(kind):
    def run(L):
        w = L.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        y = L.tensor([5.0, 6.0, 7.0, 8.0], requires_grad=True)
        a = w.clone() if kind != "plain base" else L.zeros(4)
        v, u = a[1:], a[:2]
        if kind == "base changed":
            a.mul_(3)
        elif kind == "sibling changed":
            u.mul_(5)
        elif kind == "plain base":
            a.add_(y)
        elif kind == "view of the view changed":
            v[1:].mul_(7)
        elif kind == "changed under no_grad":
            with L.no_grad():
                a.mul_(2)
        structure = (v.requires_grad, names(v, 1))
        (v * L.tensor([1.0, 10.0, 100.0])).sum().backward()
        return structure, *(None if t.grad is None else to_numpy(t.grad) for t in (w, y))

    return run


@pytest.mark.parametrize(
    "kind", ["base changed", "sibling changed", "plain base", "view of the view changed", "changed under no_grad"]
)
def test_a_view_follows_later_in_place_changes_of_its_base(torch, kind):
    got, want = _stale(kind)(trainkit), _stale(kind)(torch)
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:]):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w)


def test_float32_stays_float32_through_copy_slices():
    leaf = trainkit.ones(3, 4, requires_grad=True)
    y = trainkit.full((4,), 2.0, requires_grad=True)
    a = leaf.clone()
    a[1:].t()[1].mul_(y[:2])
    a.sum().backward()
    assert leaf.grad.dtype == trainkit.float32 and y.grad.dtype == trainkit.float32


def test_in_place_through_views_passes_gradcheck_and_gradgradcheck():
    def fn(x, y):
        a = x * 1.5
        a[1:].t()[0].mul_(y)
        v = a.view(-1)[2:5]
        v.copy_(x[0, :3] * y.sum())
        return a.sin()

    rng = np.random.default_rng(1)
    x = trainkit.tensor(rng.standard_normal((3, 4)), dtype=trainkit.float64, requires_grad=True)
    y = trainkit.tensor(rng.standard_normal(2), dtype=trainkit.float64, requires_grad=True)
    assert trainkit.autograd.gradcheck(fn, (x, y))
    assert trainkit.autograd.gradgradcheck(fn, (x, y))


# --- numbers that do not fit the destination dtype ------------------------------------------------------------

FILLS = {
    "fill_ 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(300),
    "fill_ -256 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(-256),
    "fill_ -1.0 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(-1.0),
    "fill_ 255.5 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(255.5),
    "fill_ 2**31 int32": lambda L: L.zeros(2, dtype=L.int32).fill_(2**31),
    "fill_ 2**63 int64": lambda L: L.zeros(2, dtype=L.int64).fill_(2**63),
    "fill_ 1e20 int64": lambda L: L.zeros(2, dtype=L.int64).fill_(1e20),
    "fill_ 128 int8": lambda L: L.zeros(2, dtype=L.int8).fill_(128),
    "fill_ 32767.9 int16": lambda L: L.zeros(2, dtype=L.int16).fill_(32767.9),
    "fill_ inf int32": lambda L: L.zeros(2, dtype=L.int32).fill_(float("inf")),
    "fill_ nan int64": lambda L: L.zeros(2, dtype=L.int64).fill_(float("nan")),
    "fill_ 1e39 float32": lambda L: L.zeros(2).fill_(1e39),
    "fill_ 70000 float16": lambda L: L.zeros(2, dtype=L.float16).fill_(70000),
    "fill_ 1j float32": lambda L: L.zeros(2).fill_(1j),
    "masked_fill 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).masked_fill(L.tensor([True, False]), 300),
    "masked_fill_ 2**31 int32": lambda L: L.zeros(2, dtype=L.int32).masked_fill_(L.tensor([True, False]), 2**31),
    "x[0] = 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).__setitem__(0, 300),
    "x[mask] = 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).__setitem__(L.tensor([True, False]), 300),
    "new_full 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).new_full((2,), 300),
    "scatter_ value 300 uint8": lambda L: L.zeros(2, dtype=L.uint8).scatter_(0, L.tensor([0]), 300),
}


@pytest.mark.parametrize("fn", FILLS.values(), ids=FILLS.keys())
def test_a_number_that_does_not_fit_is_refused_as_torch_refuses_it(torch, fn):
    got, want = assert_same_error(torch, lambda L, dev: fn(L), "without overflow")
    assert str(got) == str(want)


FITTING = {
    "fill_ -1 uint8 wraps": lambda L: L.zeros(2, dtype=L.uint8).fill_(-1),
    "fill_ -255 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(-255),
    "fill_ 255 uint8": lambda L: L.zeros(2, dtype=L.uint8).fill_(255),
    "fill_ 1.5 uint8 truncates": lambda L: L.zeros(2, dtype=L.uint8).fill_(1.5),
    "fill_ inf float32": lambda L: L.zeros(2).fill_(float("inf")),
    "fill_ nan float16": lambda L: L.zeros(2, dtype=L.float16).fill_(float("nan")),
    "fill_ 1+0j float32": lambda L: L.zeros(2).fill_(1 + 0j),
    "fill_ 5 bool": lambda L: L.zeros(2, dtype=L.bool).fill_(5),
    "fill_ 0-d tensor 300 uint8 wraps": lambda L: L.zeros(2, dtype=L.uint8).fill_(L.tensor(300)),
    "fill_ -2**63 int64": lambda L: L.zeros(2, dtype=L.int64).fill_(-(2**63)),
    "masked_fill_ -1 uint8": lambda L: L.zeros(2, dtype=L.uint8).masked_fill_(L.tensor([True, False]), -1),
    "x[0] = -1 uint8": lambda L: (lambda x: (x.__setitem__(0, -1), x)[1])(L.zeros(2, dtype=L.uint8)),
}


@pytest.mark.parametrize("fn", FITTING.values(), ids=FITTING.keys())
def test_numbers_that_fit_are_stored_as_torch_stores_them(torch, fn):
    np.testing.assert_array_equal(to_numpy(fn(trainkit)), to_numpy(fn(torch)))


# --- device('cpu:0') ------------------------------------------------------------------------------------------


def test_cpu_device_with_an_index_is_told_apart_as_in_torch(torch):
    for L in (trainkit, torch):
        d = L.device("cpu:0")
        assert (d.type, d.index, str(d)) == ("cpu", 0, "cpu:0")
        assert repr(d).endswith("device(type='cpu', index=0)")
        assert d != L.device("cpu") and L.device("cpu", 0) == d and hash(d) != hash(L.device("cpu"))
        assert L.device("cpu:1").index == 1
        made = (
            L.zeros(2, device="cpu:0"),
            L.tensor([1.0], device=d),
            L.arange(3, device="cpu:1"),
            L.zeros(2).to("cpu:0"),
        )
        assert all(t.device == L.device("cpu") for t in made)


def test_a_negative_device_index_is_refused(torch):
    got, want = assert_same_error(torch, lambda L, dev: L.device("cpu", -1), "must not be negative")
    assert str(got) == str(want)


def test_a_view_requires_grad_when_its_base_does(torch):
    for L in (trainkit, torch):
        x = L.ones(3)
        v = x[1:]
        x.requires_grad_()
        assert v.requires_grad
        with L.no_grad():
            u = x[:2]
        assert u.requires_grad and u.is_leaf


def test_a_bool_base_to_a_tensor_power_refuses_backward_as_torch_does(torch):
    def fn(L, dev):
        x = L.ones(3, requires_grad=True)
        (True**x).sum().backward()

    assert_same_error(torch, fn)
    x = trainkit.ones(3, requires_grad=True)
    (1.0**x).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), np.zeros(3))
