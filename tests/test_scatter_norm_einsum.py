"""scatter(reduce=...), scatter_reduce, norm(p='nuc' / 'fro' with dim), einsum with '...' and hessian of several
inputs, compared with PyTorch: values, gradients, grad_fn names, float64 gradchecks and error messages."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck

REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]
OLD_NAMES = ["max", "min"]  # PyTorch still takes these for amax and amin


def _both(torch, device, fn, arrays, upstream=None):
    """``fn(lib, *tensors)`` on trainkit (on ``device``) and torch, then backward with ``upstream``: per library
    (result, gradients, grad_fn name)."""
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        ts = [
            lib.tensor(a, device=dev, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
            for a in arrays
        ]
        with trainkit.device(dev):
            out = fn(lib, *ts)
        name = out.grad_fn.name() if out.grad_fn is not None else None
        grads = []
        if out.requires_grad:
            up = np.ones(tuple(out.shape), np.float32) if upstream is None else upstream
            out.backward(lib.tensor(up.astype(to_numpy(out).dtype), device=dev))
            grads = [
                None
                if not (isinstance(t, (trainkit.Tensor, torch.Tensor)) and t.requires_grad) or t.grad is None
                else to_numpy(t.grad)
                for t in ts
            ]
        results.append((to_numpy(out), grads, name))
    return results


def _assert_same(results, atol=1e-5):
    (v1, g1, n1), (v2, g2, n2) = results
    assert v1.dtype == v2.dtype and v1.shape == v2.shape
    np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=atol)
    assert len(g1) == len(g2)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol)
    assert n1 == n2


# ----------------------------------------------------------------------------------------- scatter(reduce=...)
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_matches_torch(torch, device, reduce):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    src = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    index = np.array([[0, 0, 2], [1, 1, 1]])
    for arrays, fn in (
        ((x, src), lambda L, a, s: L.scatter(a, 1, L.tensor(index), s, reduce=reduce)),
        ((x,), lambda L, a: L.scatter(a, 1, L.tensor(index), 2.0, reduce=reduce)),
        ((x.astype(np.int64), src.astype(np.int64)), lambda L, a, s: a.scatter(1, L.tensor(index), s, reduce=reduce)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = []
            for lib, dev in ((trainkit, device), (torch, "cpu")):
                ts = [lib.tensor(a, device=dev) for a in arrays]
                with trainkit.device(dev):
                    got.append(to_numpy(fn(lib, *ts)))
        assert got[0].dtype == got[1].dtype
        np.testing.assert_array_equal(got[0], got[1])


def test_scatter_with_reduce_has_no_derivative_as_in_torch(torch):
    messages = []
    for lib in (trainkit, torch):
        x = lib.zeros(2, 3, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lib.scatter(x, 1, lib.tensor([[0, 1]]), lib.ones(1, 2), reduce="add")
        messages.append([str(w.message).split(" (Triggered")[0] for w in caught])
        assert out.requires_grad and type(out.grad_fn).__name__ == "NotImplemented"
        assert "grad_fn=<NotImplemented>" in repr(out)
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            out.sum().backward()
    # PyTorch warns once per process, so its list may be empty when an earlier test triggered the warning
    assert len(messages[0]) == 1 and "deprecated" in messages[0][0] and messages[1] in ([], messages[0])
    assert_same_error(
        torch,
        lambda L, d: L.scatter(L.zeros(2), 0, L.tensor([0]), L.ones(1), reduce="sum"),
        "reduce argument must be either add or multiply.",
    )


# ------------------------------------------------------------------------------------------------ scatter_reduce
@pytest.mark.parametrize("include_self", [True, False], ids=["include_self", "exclude_self"])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_matches_torch(torch, device, reduce, include_self, rng):
    # small integers as floats: ties for amax/amin and zeros for prod, where the gradient rules matter
    x = rng.integers(-2, 3, (3, 5)).astype(np.float32)
    src = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    index = rng.integers(0, 5, (3, 4))
    up = rng.standard_normal((3, 5)).astype(np.float32)
    fn = lambda L, a, s: L.scatter_reduce(a, 1, L.tensor(index), s, reduce, include_self=include_self)  # noqa: E731
    _assert_same(_both(torch, device, fn, [x, src], up))


@pytest.mark.parametrize("reduce", OLD_NAMES)
def test_scatter_reduce_old_names_work_forward_only_as_in_torch(torch, reduce):
    for lib in (trainkit, torch):
        x = lib.tensor([1.0, 5.0, 3.0], requires_grad=True)
        out = lib.scatter_reduce(x, 0, lib.tensor([0, 1]), lib.tensor([4.0, 2.0]), reduce)
        assert out.tolist() == ([4.0, 5.0, 3.0] if reduce == "max" else [1.0, 2.0, 3.0])
        with pytest.raises(RuntimeError, match=f"Expected 'reduce' to be one of .* but got {reduce}."):
            out.sum().backward()


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_along_dim0_with_a_smaller_index(torch, reduce, rng):
    x = rng.standard_normal((4, 3))
    src = rng.standard_normal((5, 3))
    index = rng.integers(0, 4, (3, 2))  # smaller than src: only its leading part takes part
    got = [
        to_numpy(lib.tensor(x).scatter_reduce(0, lib.tensor(index), lib.tensor(src), reduce=reduce))
        for lib in (trainkit, torch)
    ]
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12)
    # PyTorch's backward fails here (its src gradient has the index's shape); trainkit's has src's shape
    xs = (trainkit.tensor(x, requires_grad=True), trainkit.tensor(src, requires_grad=True))
    assert gradcheck(lambda a, s: a.scatter_reduce(0, trainkit.tensor(index), s, reduce=reduce), xs)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_gradcheck(reduce, include_self, rng):
    x = trainkit.tensor(rng.permutation(12).reshape(3, 4) / 3.0 - 1.9, dtype=trainkit.float64, requires_grad=True)
    src = trainkit.tensor(rng.permutation(9).reshape(3, 3) / 4.0 + 0.1, dtype=trainkit.float64, requires_grad=True)
    index = trainkit.tensor(rng.integers(0, 4, (3, 3)))
    fn = lambda a, s: trainkit.scatter_reduce(a, 1, index, s, reduce, include_self=include_self)  # noqa: E731
    assert gradcheck(fn, (x, src))
    assert gradgradcheck(fn, (x, src))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_of_integers_matches_torch(torch, reduce, include_self):
    x = np.array([[-3, 5, 7, 0]])
    src = np.array([[-4, 2, 9]])
    index = np.array([[0, 0, 2]])
    got = [
        to_numpy(
            lib.scatter_reduce(lib.tensor(x), 1, lib.tensor(index), lib.tensor(src), reduce, include_self=include_self)
        )
        for lib in (trainkit, torch)
    ]
    assert got[0].dtype == got[1].dtype
    np.testing.assert_array_equal(got[0], got[1])


def test_scatter_reduce_errors_match_torch(torch):
    idx = lambda L: L.tensor([[0, 1]])  # noqa: E731
    assert_same_error(
        torch,
        lambda L, d: L.scatter_reduce(L.zeros(1, 3), 1, idx(L), L.ones(1, 2), "add"),
        "reduce argument must be either sum, prod, mean, amax or amin, got add",
    )
    assert_same_error(
        torch,
        lambda L, d: L.scatter_reduce(L.zeros(1, 3), 1, idx(L), 2.0, "sum"),
        "argument 'src' (position 4) must be Tensor, not float",
    )
    assert_same_error(
        torch,
        lambda L, d: L.scatter_reduce(L.zeros(1, 3), 1, idx(L), L.ones(1, 2, dtype=L.int64), "sum"),
        "Expected self.dtype to be equal to src.dtype",
    )
    assert_same_error(
        torch,
        lambda L, d: L.scatter_reduce(L.zeros(1, 3, dtype=L.bool), 1, idx(L), L.ones(1, 2, dtype=L.bool), "mean"),
        "not implemented",
    )
    assert_same_error(
        torch, lambda L, d: L.scatter_reduce(L.zeros(1, 3), 1, L.tensor([[0, 3]]), L.ones(1, 2), "sum"), "out of bounds"
    )


# --------------------------------------------------------------------------------------------------------- norm
NORM_CASES = [
    ((3, 4), {}),
    ((4, 3), {}),
    ((3, 3), {"keepdim": True}),
    ((2, 3, 4), {"dim": (1, 2)}),
    ((2, 3, 4), {"dim": (2, 0), "keepdim": True}),
    ((2, 3, 4), {"dim": (-1, -3)}),
    ((2, 3, 1), {"dim": (0, 1)}),
]


@pytest.mark.parametrize("shape,kwargs", NORM_CASES, ids=str)
def test_nuclear_norm_matches_torch(torch, device, shape, kwargs, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    _assert_same(_both(torch, device, lambda L, t: L.norm(t, "nuc", **kwargs), [a]))
    _assert_same(_both(torch, device, lambda L, t: t.norm(p="nuc", **kwargs), [a]))


@pytest.mark.parametrize("shape,kwargs", NORM_CASES, ids=str)
def test_nuclear_norm_gradcheck_and_gradgradcheck(shape, kwargs, rng):
    x = trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: trainkit.norm(t, "nuc", **kwargs), (x,))
    assert gradgradcheck(lambda t: trainkit.norm(t, "nuc", **kwargs), (x,))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dim": 1},
        {"dim": (1,)},
        {"dim": (0, 2)},
        {"dim": (2, 1), "keepdim": True},
        {"dim": None},
        {"dim": -1, "dtype": "float64"},
    ],
    ids=str,
)
def test_frobenius_norm_with_dim_matches_torch(torch, device, kwargs, rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)

    def fn(L, t):
        kw = dict(kwargs)
        if "dtype" in kw:
            kw["dtype"] = getattr(L, kw["dtype"])
        return L.norm(t, "fro", **kw)

    _assert_same(_both(torch, device, fn, [a]))
    x = trainkit.tensor(a, dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: fn(trainkit, t), (x,))


def test_nuclear_norm_dtype_argument_matches_torch(torch, rng):
    a = rng.standard_normal((3, 3)).astype(np.float32)
    _assert_same(_both(torch, "cpu", lambda L, t: L.norm(t, "nuc", dtype=L.float64), [a]))


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda L: L.norm(L.ones(2, 3, 4), "nuc"), "dim must be a 2-tuple. Got 0 1 2"),
        (lambda L: L.norm(L.ones(2, 3, 4), "nuc", dim=1), "dim must be a 2-tuple. Got 1"),
        (lambda L: L.norm(L.ones(2, 3, 4), "nuc", dim=(1, -2)), "dims must be different. Got (1, 1)"),
        (lambda L: L.norm(L.ones(2, 3, 4), "fro", dim=(0, 1, 2)), "dim must be a 2-tuple. Got 0 1 2"),
        (lambda L: L.norm(L.ones(3, 4), "foo"), "Order foo not supported."),
        (lambda L: L.norm(L.ones(3, 4, dtype=L.int64), "nuc"), "Expected a floating point or complex tensor"),
        (lambda L: L.norm(L.ones(3), "nuc"), "must have at least 2 dimensions"),
    ],
    ids=["nuc-3d", "nuc-one-dim", "nuc-same-dims", "fro-three-dims", "bad-order", "integer", "vector"],
)
def test_matrix_norm_errors_match_torch(torch, call, words):
    got, _ = assert_same_error(torch, lambda L, d: call(L), words)
    assert str(got).startswith("linalg.matrix_norm: ")


# ------------------------------------------------------------------------------------------------------- einsum
EINSUM_CASES = [
    ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (3, 1, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (3, 1, 4, 5)]),
    ("...ij,...jk->ik", [(2, 3, 4), (3, 1, 4, 5)]),
    ("i...->...", [(2, 3, 4)]),
    ("...", [(2, 3, 4)]),
    ("...->", [(2, 3, 4)]),
    ("ba...", [(2, 3, 4)]),
    ("b...a", [(2, 3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("bi...,b...->b", [(2, 3, 4), (2, 4)]),
    ("...,...->...", [(3, 1), (1, 4)]),
    ("ij,jk", [(2, 1), (4, 5)]),
    ("ij->...", [(2, 2)]),
    ("i j -> j", [(2, 2)]),
    ("Ab,bA->A", [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_with_ellipsis_matches_torch(torch, device, equation, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (v1, g1, _), (v2, g2, _) = _both(torch, device, lambda L, *ts: L.einsum(equation, *ts), arrays)
    assert v1.shape == v2.shape and v1.dtype == v2.dtype
    np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    xs = tuple(trainkit.tensor(a, dtype=trainkit.float64, requires_grad=True) for a in arrays)
    assert gradcheck(lambda *ts: trainkit.einsum(equation, *ts), xs)


EINSUM_ERRORS = [
    ("....ij", [(2, 3, 4)], "for which an ellipsis was already found"),
    ("..ij", [(2, 3, 4)], "that is not part of any ellipsis"),
    ("abcd...", [(2, 3, 4)], "is more than the number of dimensions (3) for operand 0"),
    ("ij,jk", [(2, 3), (4, 5)], "subscript j has size 4 for operand 1 which does not broadcast"),
    ("...i,...i->...", [(2, 3), (4, 3)], "dimension 0 covered by ellipsis in operand 1has size 4"),
    ("ij->j...", [(2, 3, 4)], "and no ellipsis was given"),
    ("...ij->...i...", [(2, 3, 4)], "found '.' for output but an ellipsis (...) was already found"),
    ("...ij->...ik", [(2, 3, 4)], "output subscript k does not appear"),
    ("ij$", [(2, 2)], "invalid subscript given at index 2"),
    ("ij->ii", [(2, 2)], "output subscript i appears more than once in the output"),
    ("ij->.", [(2, 2)], "found '.' for output that is not part of any ellipsis (...)"),
    ("ii->i", [(1, 2)], "subscript i is repeated for operand 0 but the sizes don't match, 2 != 1"),
    ("ij,jk", [(2, 2)], "fewer operands were provided"),
    ("ij", [(2, 2), (2,)], "more operands were provided"),
]


@pytest.mark.parametrize("equation,shapes,words", EINSUM_ERRORS, ids=[c[0] for c in EINSUM_ERRORS])
def test_einsum_errors_match_torch(torch, equation, shapes, words):
    assert_same_error(torch, lambda L, d: L.einsum(equation, *[L.ones(s) for s in shapes]), words)


# ------------------------------------------------------------------------------------------------------ hessian
def _two_block_function(x, y, z):
    return (x**2).sum() * (y.exp() * x[:2]).sum() + (x[0] * y[1, 1]) ** 3 + 0 * z.sum()


def test_hessian_of_several_inputs_matches_torch(torch):
    from torch.autograd import functional as tf

    from trainkit.autograd import functional as kf

    arrays = (np.array([0.5, -1.0, 2.0]), np.array([[1.5, 2.0], [0.3, -0.7]]), np.array([1.0, 2.0]))
    ours = kf.hessian(_two_block_function, tuple(trainkit.tensor(a) for a in arrays))
    theirs = tf.hessian(_two_block_function, tuple(torch.tensor(a) for a in arrays))
    assert isinstance(ours, tuple) and len(ours) == 3 and all(isinstance(r, tuple) and len(r) == 3 for r in ours)
    for row_ours, row_theirs in zip(ours, theirs):
        for a, b in zip(row_ours, row_theirs):
            assert tuple(a.shape) == tuple(b.shape) and a.dtype == trainkit.float64
            assert not a.requires_grad
            np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-10, atol=1e-12)


def test_hessian_forms_match_torch(torch):
    from torch.autograd import functional as tf

    from trainkit.autograd import functional as kf

    a = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    f = lambda x: (x**3).sum()  # noqa: E731
    single = kf.hessian(f, trainkit.tensor(a))
    assert isinstance(single, trainkit.Tensor)
    np.testing.assert_allclose(to_numpy(single), to_numpy(tf.hessian(f, torch.tensor(a))))
    one_tuple = kf.hessian(f, (trainkit.tensor(a),))
    assert isinstance(one_tuple, tuple) and isinstance(one_tuple[0], tuple)
    assert one_tuple[0][0].dtype == trainkit.float32
    np.testing.assert_allclose(to_numpy(one_tuple[0][0]), to_numpy(single))
    g = lambda x, y: (x * y).sum() + 1  # noqa: E731
    ours = kf.hessian(g, (trainkit.tensor(a), trainkit.tensor(a)), create_graph=True)
    theirs = tf.hessian(g, (torch.tensor(a), torch.tensor(a)), create_graph=True)
    for ro, rt in zip(ours, theirs):
        for o, t in zip(ro, rt):
            assert o.requires_grad == t.requires_grad
            np.testing.assert_allclose(to_numpy(o), to_numpy(t))


def test_hessian_of_an_input_the_output_ignores_is_zero(torch):
    from trainkit.autograd import functional as kf

    h = kf.hessian(lambda x, y: (x**2).sum() + y.sum(), (trainkit.ones(2), trainkit.ones(3)))
    assert h[1][1].tolist() == [[0.0] * 3] * 3 and tuple(h[0][1].shape) == (2, 3)
    assert h[0][0].tolist() == [[2.0, 0.0], [0.0, 2.0]]


@pytest.mark.parametrize(
    "fn,inputs,words",
    [
        (lambda x: x * 2, lambda L: L.ones(2), "should contain a single element"),
        (lambda x: (x.sum(), x.sum()), lambda L: L.ones(2), "should return a single Tensor"),
        (lambda x: x.sum(), lambda L: (L.ones(2), 3), "the value at index 1 has type <class 'int'>"),
        (lambda x: x.sum(), lambda L: 3, "but the given inputs has type <class 'int'>"),
    ],
    ids=["not-scalar", "tuple-output", "not-a-tensor-in-tuple", "not-a-tensor"],
)
def test_hessian_errors_match_torch(torch, fn, inputs, words):
    from torch.autograd import functional as tf

    from trainkit.autograd import functional as kf

    def call(lib, dev):
        mod = kf if lib is trainkit else tf
        ins = inputs(lib)
        return mod.hessian(fn, ins) if not isinstance(ins, tuple) else mod.hessian(lambda *a: fn(a[0]), ins)

    assert_same_error(torch, call, words)


# ----------------------------------------------------------------------------------------------- in place forms
IN_PLACE = {
    "scatter_": lambda L, x, s: x.scatter_(1, L.tensor([[0, 0, 2], [1, 1, 1]]), s),
    "scatter_value": lambda L, x, s: x.scatter_(1, L.tensor([[2], [0]]), 2.5),
    "scatter_add_": lambda L, x, s: x.scatter_add_(1, L.tensor([[0, 0, 2], [1, 1, 1]]), s),
    "scatter_reduce_prod": lambda L, x, s: x.scatter_reduce_(1, L.tensor([[0, 0, 2], [1, 1, 1]]), s, "prod"),
    "scatter_reduce_mean": lambda L, x, s: x.scatter_reduce_(
        0, L.tensor([[1, 0, 1]]), s[:1], "mean", include_self=False
    ),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_scatters_match_torch(torch, device, name, rng):
    x0 = rng.standard_normal((2, 3)).astype(np.float32)
    s0 = rng.standard_normal((2, 3)).astype(np.float32)
    up = rng.standard_normal((2, 3)).astype(np.float32)
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        w = lib.tensor(x0, device=dev, requires_grad=True)
        s = lib.tensor(s0, device=dev, requires_grad=True)
        x = w * 1  # a non-leaf, so that it may change in place inside the graph
        version = x._version
        with trainkit.device(dev):
            out = IN_PLACE[name](lib, x, s)
        assert out is x and x._version == version + 1
        x.backward(lib.tensor(up, device=dev))
        results.append((to_numpy(x), to_numpy(w.grad), None if s.grad is None else to_numpy(s.grad), x.grad_fn.name()))
    (v1, gw1, gs1, n1), (v2, gw2, gs2, n2) = results
    np.testing.assert_allclose(v1, v2, rtol=1e-6)
    np.testing.assert_allclose(gw1, gw2, rtol=1e-6)
    assert (gs1 is None) == (gs2 is None)
    if gs1 is not None:
        np.testing.assert_allclose(gs1, gs2, rtol=1e-6)
    assert n1 == n2


def test_in_place_scatter_of_a_leaf_that_requires_grad_is_refused(torch):
    assert_same_error(
        torch,
        lambda L, d: L.zeros(3, requires_grad=True).scatter_add_(0, L.tensor([0]), L.ones(1)),
        "a leaf Variable that requires grad is being used in an in-place operation",
    )
