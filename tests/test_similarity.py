"""F.normalize, F.cosine_similarity and nn.CosineSimilarity against PyTorch: values and gradients in float32 and
float64, the whole graph's node names, broadcasting, zero, tiny and huge vectors (where the two clamp their norms
differently), mixed dtypes, finite differences, the errors and the repr."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy
from test_activations_more import F, make, parity

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck

_rng = np.random.default_rng(3)
A = _rng.standard_normal((3, 5))
B = _rng.standard_normal((3, 5))
ROW = _rng.standard_normal(5)
CUBE = _rng.standard_normal((2, 3, 4))
# a zero row, a row far below eps, a row whose squares overflow float32, and an ordinary one
EDGY = np.array([[0.0, 0.0, 0.0], [1e-30, -1e-30, 1e-30], [1e30, 1e30, -1e30], [1.0, 2.0, -3.0]])
OTHER = np.array([[1.0, -1.0, 2.0], [2.0, 0.5, -1.0], [1e30, 2e30, 1.0], [0.0, 0.0, 0.0]])


def graph_names(t) -> list:
    """The node names of a graph, depth first (AccumulateGrad for a leaf), as a nested list."""

    def walk(fn):
        if fn is None:
            return None
        name = type(fn).__name__ if "AccumulateGrad" in fn.name() else fn.name()
        return [name, [walk(f) for f, _ in fn.next_functions]]

    return walk(t.grad_fn)


NORMALIZE = {
    "default": (lambda L, x: F(L).normalize(x), A),
    "p1": (lambda L, x: F(L).normalize(x, p=1), A),
    "p3-dim0": (lambda L, x: F(L).normalize(x, 3.0, 0), A),
    "inf": (lambda L, x: F(L).normalize(x, p=float("inf"), dim=-1), A),
    "dims": (lambda L, x: F(L).normalize(x, dim=(0, 2)), CUBE),
    "vector": (lambda L, x: F(L).normalize(x, dim=0), ROW),
    "edges": (lambda L, x: F(L).normalize(x), EDGY),
    "edges-eps": (lambda L, x: F(L).normalize(x, dim=1, eps=0.5), EDGY / 10),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NORMALIZE)
def test_normalize_matches_torch(torch, name, dtype):
    fn, x = NORMALIZE[name]
    ours, theirs = parity(torch, fn, x, dtype=dtype)
    assert graph_names(ours) == graph_names(theirs)


def test_normalize_of_a_zero_vector_divides_by_eps(torch):
    for lib in (trainkit, torch):
        x = lib.zeros(2, 3, requires_grad=True)
        F(lib).normalize(x).sum().backward()
        np.testing.assert_allclose(to_numpy(x.grad), 1e12, rtol=1e-6)


def test_normalize_into_out(torch):
    for lib in (trainkit, torch):
        out = lib.empty(3, 5)
        got = F(lib).normalize(lib.tensor(A, dtype=lib.float32), out=out)
        assert got is out
        np.testing.assert_allclose(to_numpy(out), A / np.linalg.norm(A, axis=1, keepdims=True), rtol=1e-6)
    assert_same_error(
        torch,
        lambda L, dev: F(L).normalize(L.ones(2, 3, requires_grad=True), out=L.empty(2, 3)),
        "out=",
        "automatic differentiation",
    )


NORMALIZE_ERRORS = {
    "vector-default-dim": (lambda L: F(L).normalize(L.ones(3)), "Dimension out of range"),
    "int": (lambda L: F(L).normalize(L.ones(2, 3, dtype=L.int64)), "floating point"),
}


@pytest.mark.parametrize("name", NORMALIZE_ERRORS)
def test_normalize_errors_match_torch(torch, name):
    fn, *words = NORMALIZE_ERRORS[name]
    assert_same_error(torch, lambda L, dev: fn(L), *words)


# ----------------------------------------------------------------------------------------- cosine similarity
COSINE = {
    "same-shape": (lambda L, a, b: F(L).cosine_similarity(a, b), A, B),
    "dim0": (lambda L, a, b: F(L).cosine_similarity(a, b, dim=0), A, B),
    "broadcast-row": (lambda L, a, b: F(L).cosine_similarity(a, b, dim=-1), A, ROW),
    "broadcast-row-dim0": (lambda L, a, b: F(L).cosine_similarity(a, b, 0), A, ROW),
    "broadcast-both": (lambda L, a, b: F(L).cosine_similarity(a, b, dim=-1), CUBE[:, :1], CUBE[0]),
    "vectors": (lambda L, a, b: F(L).cosine_similarity(a, b, dim=0), ROW, B[0]),
    "scalars": (lambda L, a, b: F(L).cosine_similarity(a, b, dim=0), np.array(2.0), np.array(-3.0)),
    "edges": (lambda L, a, b: F(L).cosine_similarity(a, b), EDGY, OTHER),
    "edges-large-eps": (lambda L, a, b: F(L).cosine_similarity(a, b, eps=0.5), EDGY / 10, OTHER / 10),
    "empty-dim": (lambda L, a, b: F(L).cosine_similarity(a, b), np.zeros((3, 0)), np.zeros((3, 0))),
    "module": (lambda L, a, b: L.nn.CosineSimilarity(dim=0, eps=1e-3)(a, b), A, B),
    "module-default": (lambda L, a, b: L.nn.CosineSimilarity()(a, b), CUBE, CUBE[::-1].copy()),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", COSINE)
def test_cosine_similarity_matches_torch(torch, name, dtype):
    fn, a, b = COSINE[name]
    ours, theirs = parity(torch, fn, a, b, dtype=dtype)
    assert graph_names(ours) == graph_names(theirs)


def test_cosine_similarity_of_a_zero_vector(torch):
    """PyTorch clamps the norms outside the graph: the zero vector's gradient is the other's unit vector / eps,
    the other vector's gradient is 0."""
    grads = []
    for lib in (trainkit, torch):
        x, y = lib.zeros(2, 3, requires_grad=True), lib.ones(2, 3, requires_grad=True)
        out = F(lib).cosine_similarity(x, y)
        out.sum().backward()
        assert out.tolist() == [0.0, 0.0]
        grads.append((to_numpy(x.grad), to_numpy(y.grad)))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-6)
    np.testing.assert_allclose(grads[0][0], 1 / np.sqrt(3) / 1e-8, rtol=1e-6)
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def test_cosine_similarity_of_equal_vectors_stays_within_one(torch):
    x = np.full((4, 7), 0.1)
    for lib in (trainkit, torch):
        t = lib.tensor(x, dtype=lib.float32)
        assert float(F(lib).cosine_similarity(t, t).max()) <= 1.0


@pytest.mark.parametrize(
    "a_dtype, b_dtype", [("float32", "float64"), ("int64", "float32"), ("bool", "float64"), ("float64", "int32")]
)
def test_cosine_similarity_promotes_as_torch(torch, a_dtype, b_dtype):
    def fn(L, a, b):
        return F(L).cosine_similarity(a.to(getattr(L, a_dtype)), b.to(getattr(L, b_dtype)))

    ours, theirs = parity(torch, fn, np.abs(A).round() + 1, B, grad=(False, False), tol=(1e-6, 1e-6))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch", "trainkit")


COSINE_ERRORS = {
    "ints": (
        lambda L: F(L).cosine_similarity(L.ones(2, 3, dtype=L.int64), L.ones(2, 3, dtype=L.int64)),
        "expected common dtype to be floating point",
        "Long",
    ),
    "shapes": (lambda L: F(L).cosine_similarity(L.ones(3, 4), L.ones(5), dim=-1), "size of tensor a (4)", "(5)"),
    "dim": (lambda L: F(L).cosine_similarity(L.ones(3, 4), L.ones(3, 4), dim=2), "Dimension out of range"),
    "vector-default-dim": (lambda L: F(L).cosine_similarity(L.ones(4), L.ones(4)), "Dimension out of range"),
    "tuple-dim": (lambda L: F(L).cosine_similarity(L.ones(3, 4), L.ones(3, 4), dim=(0, 1)), "'dim' must be int"),
    "number": (lambda L: F(L).cosine_similarity(L.ones(3, 4), 1.0), "argument 'x2'", "must be Tensor, not float"),
}


@pytest.mark.parametrize("name", COSINE_ERRORS)
def test_cosine_similarity_errors_match_torch(torch, name):
    fn, *words = COSINE_ERRORS[name]
    assert_same_error(torch, lambda L, dev: fn(L), *words)


def test_cosine_similarity_module_repr(torch):
    for args in ("", "dim=0", "2, 1e-6"):
        assert repr(eval(f"trainkit.nn.CosineSimilarity({args})")) == repr(eval(f"torch.nn.CosineSimilarity({args})"))
    layer = trainkit.nn.CosineSimilarity(dim=0, eps=1e-3)
    assert (layer.dim, layer.eps) == (0, 1e-3) and list(layer.state_dict()) == []


def test_gradcheck_float64():
    a = make(trainkit, A, "float64", True)
    b = make(trainkit, B, "float64", True)
    row = make(trainkit, ROW, "float64", True)
    assert gradcheck(lambda x: F(trainkit).normalize(x), (a,))
    assert gradcheck(lambda x: F(trainkit).normalize(x, p=3, dim=0), (a,))
    assert gradcheck(lambda x, y: F(trainkit).cosine_similarity(x, y), (a, b))
    assert gradcheck(lambda x, y: F(trainkit).cosine_similarity(x, y, dim=-1), (a, row))
    assert gradgradcheck(lambda x: F(trainkit).normalize(x), (a,))
    assert gradgradcheck(lambda x, y: F(trainkit).cosine_similarity(x, y, dim=-1), (a, row))
