"""Reductions, sorting, products, joins, index selection and shapes at their edges, against PyTorch: values (NaN
equal to NaN), dtype, the grad_fn name, the exception class, and the input gradients after backward (including
which inputs get none)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import trainkit


def _node(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def run(lib, fn, arrays, dtypes=None, grad=True, upstream_seed=1):
    """``fn(lib, *tensors)`` on leaves made from ``arrays``; backward with a seeded upstream gradient from every
    floating result that requires grad. Returns (results as (dtype, shape, node, values), leaf grads or None)."""
    dtypes = dtypes or ["float32"] * len(arrays)
    leaves = [
        lib.tensor(a, dtype=getattr(lib, d), requires_grad=grad and d.startswith("float"))
        for a, d in zip(arrays, dtypes)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(lib, *leaves)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    summary = [(str(o.dtype).split(".")[-1], tuple(o.shape), _node(o), o.detach().numpy()) for o in outs]
    pairs = [o for o in outs if o.requires_grad]
    if pairs:
        rng = np.random.default_rng(upstream_seed)
        ups = [lib.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in pairs]
        lib.autograd.backward(pairs, ups)
    grads = [None if t.grad is None else t.grad.numpy() for t in leaves if t.requires_grad]
    return summary, grads


def same(torch, fn, arrays, dtypes=None, rtol=1e-5, atol=1e-6, values=True):
    (got, ggot), (want, gwant) = run(trainkit, fn, arrays, dtypes), run(torch, fn, arrays, dtypes)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:3] == w[:3]
        if values:
            np.testing.assert_allclose(g[3], w[3], rtol=rtol, atol=atol, equal_nan=True)
    assert [g is None for g in ggot] == [g is None for g in gwant]
    for g, w in zip(ggot, gwant):
        if g is not None:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def same_error(torch, fn, arrays, dtypes=None):
    errs = []
    for lib in (trainkit, torch):
        with pytest.raises(Exception) as info:
            run(lib, fn, arrays, dtypes)
        errs.append(info.value)
    assert type(errs[0]) is type(errs[1]), (errs[0], errs[1])


# ------------------------------------------------------------------------------------------------------- einsum
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("ij->", [(2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
    ("iji->j", [(3, 2, 3)]),
    ("iijj->ij", [(2, 2, 3, 3)]),
    ("ij,jk", [(2, 1), (4, 5)]),
    ("i,j->", [(2,), (3,)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("...,...->...", [(3, 1), (1, 4)]),
    ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_node_values_and_grads_match_torch(torch, equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    same(torch, lambda L, *ts: L.einsum(equation, *ts), arrays)


def test_einsum_double_backward_through_a_diagonal():
    x = trainkit.randn(3, 3, dtype=trainkit.float64, requires_grad=True)
    assert trainkit.autograd.gradgradcheck(lambda t: trainkit.einsum("ii->i", t) ** 2, (x,))


# --------------------------------------------------------------------------------------------------------- norms
EDGE_ROWS = np.array(
    [[np.nan, 1.0, -2.0, 0.5], [0.0, 0.0, -0.0, 0.0], [3e38, -3e38, 1.0, 2.0], [np.inf, 1.0, -2.0, 0.0]],
    dtype=np.float32,
)


@pytest.mark.parametrize("p", [1, 2, 3, 0.5, 1.5, -1, float("inf"), -float("inf")])
def test_norm_grads_at_zeros_infinities_overflow_and_nan_match_torch(torch, p):
    same(torch, lambda L, x: L.norm(x, p=p, dim=1), [EDGE_ROWS])


def test_norm_p0_leaves_no_grad_as_in_torch(torch):
    same(torch, lambda L, x: x.norm(p=0), [np.arange(-3.0, 3.0).reshape(2, 3)])


def test_dist_p0_backward_raises_only_when_other_requires_grad(torch):
    a, b = np.ones((2, 3)), np.zeros((2, 3))
    same_error(torch, lambda L, x, y: L.dist(x, y, 0), [a, b])
    same(torch, lambda L, x, y: L.dist(x, y, 0), [a, b], dtypes=["float32", "int64"])


# ---------------------------------------------------------------------------------------------------------- topk
def _tie_rows(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "int":
        return rng.integers(0, 3, (3, n)), "int64"
    return rng.choice([0.0, -0.0, 1.0, np.nan, 2.0, np.inf, -np.inf], (3, n)), "float32"


@pytest.mark.parametrize("kind", ["int", "float"])
@pytest.mark.parametrize("n,k", [(6, 1), (6, 2), (6, 3), (6, 5), (17, 9), (33, 4), (130, 2), (300, 3)])
@pytest.mark.parametrize("largest,sorted_", [(True, True), (False, True), (True, False), (False, False)])
def test_topk_picks_the_same_tied_indices_as_torch(torch, kind, n, k, largest, sorted_):
    data, dtype = _tie_rows(kind, n, n * 31 + k)
    for dim in (1, 0):
        kk = min(k, data.shape[dim])
        got = trainkit.topk(trainkit.tensor(data, dtype=getattr(trainkit, dtype)), kk, dim, largest, sorted_)
        want = torch.topk(torch.tensor(data, dtype=getattr(torch, dtype)), kk, dim, largest, sorted_)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())


def test_topk_grad_goes_to_the_picked_ties(torch):
    same(torch, lambda L, x: L.topk(x, 3), [np.array([[1.0, 2.0, 2.0, 2.0, 0.0, 2.0]])])


# ----------------------------------------------------------------------------------------------------------- cat
@pytest.mark.parametrize("dim", [0, 1])
def test_cat_gives_skipped_empty_inputs_an_empty_grad(torch, dim):
    arrays = [np.zeros(0), np.arange(6.0).reshape(2, 3), np.zeros(0)]
    same(torch, lambda L, a, b, c: L.cat([a, b, c], dim), arrays, dtypes=["float32", "float32", "float64"])


# ------------------------------------------------------------------------------------------- cumprod, prod, cumsum
PRODUCT_ROWS = np.array(
    [
        [1.5, 0.0, 2.0, -3.0, 0.5],
        [0.0, 2.0, 0.0, 1.0, 4.0],
        [-3e38, -1.2, 0.0, 3e38, 1.7],
        [0.8, np.inf, np.inf, 0.4, -np.inf],
        [1.9, 0.6, 0.0, np.nan, 0.0],
        [1e-30, 2.6, -3e38, 0.0, 1.2],
    ],
    dtype=np.float32,
)


@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_values_and_grads_at_zeros_infinities_and_overflow_match_torch(torch, dim):
    same(torch, lambda L, x: L.cumprod(x, dim), [PRODUCT_ROWS])
    same(torch, lambda L, x: L.cumprod(x, dim, dtype=L.float64), [PRODUCT_ROWS])


def test_cumsum_runs_float32_in_double_as_torch(torch):
    same(torch, lambda L, x: L.cumsum(x, 0), [np.array([3e38, 3e38, -3e38, 1.0], dtype=np.float32)])


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_prod_grads_with_zeros_nan_and_inf_match_torch(torch, dim, keepdim):
    fn = (lambda L, x: x.prod()) if dim is None else (lambda L, x: x.prod(dim, keepdim=keepdim))
    same(torch, fn, [PRODUCT_ROWS])
    same(torch, fn, [PRODUCT_ROWS[:2]])
    same(torch, fn, [np.array([[2.0, 0.0, np.inf], [1.0, 3.0, 2.0]])])


# --------------------------------------------------------------------------------------------------- std and var
@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(
    "values,kwargs",
    [
        ([1.0, 2.0, 3.0], {"correction": 3}),
        ([1.0, 2.0, 3.0], {"correction": 5}),
        ([1.0, np.nan, 3.0], {"correction": 5}),
        ([1.0, 3.0], {"correction": 2}),
        ([[1.0, 2.0]], {"dim": 1, "correction": 2}),
        ([[1.0, 2.0]], {"dim": 1, "correction": 3}),
        ([[1.0], [2.0]], {"dim": 1}),
        (3.0, {"correction": 0}),
        ([[-1.6, 0.3, 1.0, 1.7, 1e-30], [-3.7, -3e38, 1.5, -1e-30, 2.6]], {"correction": 0}),
        ([[0.0, 1.0, 1e-30, -3e38, -3e38], [0.9, -0.4, 4.1, -1.0, 0.0]], {"dim": 1}),
    ],
)
def test_std_and_var_grads_at_the_edges_match_torch(torch, name, values, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(torch, lambda L, x: getattr(x, name)(**kwargs), [np.array(values, dtype=np.float32)])


# -------------------------------------------------------------------------------------------------------- matmul
@pytest.mark.parametrize(
    "shapes",
    [
        ((1, 2, 3), (5, 3, 4)),
        ((5, 2, 3), (1, 3, 4)),
        ((2, 3), (5, 3, 4)),
        ((1, 2, 3), (1, 3, 4)),
        ((2, 3), (2, 5, 3, 4)),
        ((3,), (5, 3, 4)),
    ],
)
@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
def test_matmul_node_names_follow_torchs_folding(torch, shapes, grads):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    names = []
    for lib in (trainkit, torch):
        a, b = (lib.tensor(x, dtype=lib.float32, requires_grad=g) for x, g in zip(arrays, grads))
        names.append(_node(a @ b))
    assert names[0] == names[1]
    same(torch, lambda L, a, b: a @ b, arrays, rtol=1e-4)


# ------------------------------------------------------------------------------------ index_select, take_along_dim
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("index", [[9, 0], [-1], [0, 4]])
def test_index_select_out_of_range_raises_torchs_class_for_each_dim(torch, shape, index):
    for dim in range(-len(shape), len(shape)):
        n = shape[dim]
        if all(0 <= i < n for i in index):
            continue
        same_error(torch, lambda L, x, d=dim: L.index_select(x, d, L.tensor(index)), [np.zeros(shape)])


@pytest.mark.parametrize("index", [[[6, 0], [1, 5], [4, 4]], [[-1, 0], [1, 2], [3, 0]], [[-5, 12], [0, 0], [7, 3]]])
def test_take_along_dim_wraps_indices_along_a_dim_as_torch(torch, index):
    x = np.arange(12.0).reshape(3, 4)
    same(torch, lambda L, t: L.take_along_dim(t, L.tensor(index), dim=1), [x])
    same(torch, lambda L, t: t.take_along_dim(L.tensor(index), 1), [x])


def test_take_along_dim_edge_errors_match_torch(torch):
    same_error(torch, lambda L, x: L.take_along_dim(x, L.tensor([[1], [0], [0]]), dim=1), [np.zeros((3, 0))])
    same_error(torch, lambda L, x: L.take_along_dim(x, L.tensor(0), dim=0), [np.array(5.0)])
    same_error(torch, lambda L, x: L.take_along_dim(x, L.tensor([13])), [np.zeros((3, 4))])


# ------------------------------------------------------------------------------------------- reduction arguments
@pytest.mark.parametrize(
    "call",
    [
        lambda L, x: x.sum(1, dtype=L.int64),
        lambda L, x: L.sum(x, dtype=L.bool),
        lambda L, x: x.prod(dtype=L.int64),
        lambda L, x: x.prod(1, dtype=L.int32),
        lambda L, x: x.cumsum(1, dtype=L.int64),
        lambda L, x: L.cumprod(x, 0, dtype=L.int64),
        lambda L, x: x.norm(dim=1, dtype=L.int64),
        lambda L, x: x.sum(5, dtype=L.int64),
        lambda L, x: x.sum([0, -2]),
        lambda L, x: x.mean((1, 1)),
        lambda L, x: x.std([0, 1, 0]),
        lambda L, x: L.norm(x, dim=[1, -1]),
    ],
)
def test_reductions_refuse_integer_results_that_need_grad_and_repeated_dims(torch, call):
    same_error(torch, call, [np.ones((2, 3))])


def test_reductions_into_integers_work_without_grad(torch):
    same(torch, lambda L, x: x.detach().sum(1, dtype=L.int64), [np.arange(6.0).reshape(2, 3) / 2])
    same(torch, lambda L, x: x.sum([0], dtype=L.float64), [np.ones(())])


# ------------------------------------------------------------------------------------------ 0-d shapes and sorts
@pytest.mark.parametrize(
    "call",
    [
        lambda L, x: L.argsort(x, dim=2),
        lambda L, x: x.argsort(dim=-2),
        lambda L, x: L.roll(x, -5, -1),
        lambda L, x: x.roll((1,), (0,)),
    ],
)
def test_zero_dim_sort_and_roll_errors_match_torch(torch, call):
    same_error(torch, call, [np.array(2.5)])


def test_zero_dim_argsort_roll_and_mT_values_match_torch(torch):
    same(torch, lambda L, x: L.argsort(x, dim=0), [np.array(2.5)])
    same(torch, lambda L, x: L.roll(x, 3), [np.array(2.5)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(torch, lambda L, x: (x * 2).mT, [np.array(2.5)])
        for lib in (trainkit, torch):
            x = lib.tensor(1.0, requires_grad=True)
            assert x.mT is x
    same_error(torch, lambda L, x: x.mT, [np.ones(3)])
    same(torch, lambda L, x: x.mT, [np.ones((2, 3, 4))])


def test_einsum_sublist_form_matches_torch(torch):
    arrays = [np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)]
    same(torch, lambda L, a, b: L.einsum(a, [0, 1], b, [1, 2], [0, 2]), arrays)
    same(torch, lambda L, a, b: L.einsum(a, [..., 27], b, [27, 26]), arrays)
    same(torch, lambda L, a: L.einsum(a, [27, 26]), arrays[:1])
    same_error(torch, lambda L, a: L.einsum(a, [0, 52]), arrays[:1])


def test_einsum_diagonal_is_a_view_that_in_place_changes_write_through(torch):
    results = []
    for lib in (trainkit, torch):
        x = lib.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
        y = x * 1
        lib.einsum("ii->i", y).mul_(2)
        (y * lib.arange(9.0).reshape(3, 3)).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["all", "any", "logsumexp"])
@pytest.mark.parametrize("dims", [(0, 0), (0, -2), (1, -1)])
def test_a_dim_named_twice_is_refused_as_torch_refuses_it(name, dims):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="appears multiple times"):
        getattr(torch, name)(torch.ones(2, 3), dim=dims)
    with pytest.raises(RuntimeError, match="appears multiple times in the list of dims: name each dimension once"):
        getattr(trainkit, name)(trainkit.ones(2, 3), dim=dims)
