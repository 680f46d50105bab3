"""The ``out=`` keyword of the top-level functions, compared with PyTorch: values, the dtype rules and their errors,
the refusal to record autograd, resizing and its warning, and the object that comes back."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from conftest import CUDA, assert_same_error, to_numpy

import trainkit

A = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]], dtype=np.float32)
B = np.array([[1.5, 2.0, -0.5], [0.75, -2.0, 1.0]], dtype=np.float32)
P = np.abs(A) + 0.5

# name -> fn(lib, x, y, p, out); x, y hold A and B (y has no zero), p is positive
CASES = {
    "add": lambda L, x, y, p, o: L.add(x, y, alpha=2, out=o),
    "sub": lambda L, x, y, p, o: L.sub(x, y, out=o),
    "subtract": lambda L, x, y, p, o: L.subtract(x, y, out=o),
    "mul": lambda L, x, y, p, o: L.mul(x, y, out=o),
    "multiply": lambda L, x, y, p, o: L.multiply(x, 2.0, out=o),
    "div": lambda L, x, y, p, o: L.div(x, y, out=o),
    "divide": lambda L, x, y, p, o: L.divide(x, y, out=o),
    "true_divide": lambda L, x, y, p, o: L.true_divide(x, y, out=o),
    "div_floor": lambda L, x, y, p, o: L.div(x, y, rounding_mode="floor", out=o),
    "floor_divide": lambda L, x, y, p, o: L.floor_divide(x, y, out=o),
    "remainder": lambda L, x, y, p, o: L.remainder(x, y, out=o),
    "fmod": lambda L, x, y, p, o: L.fmod(x, y, out=o),
    "pow": lambda L, x, y, p, o: L.pow(p, x, out=o),
    "pow_scalar": lambda L, x, y, p, o: L.pow(x, 2, out=o),
    "atan2": lambda L, x, y, p, o: L.atan2(x, y, out=o),
    "maximum": lambda L, x, y, p, o: L.maximum(x, y, out=o),
    "minimum": lambda L, x, y, p, o: L.minimum(x, y, out=o),
    "matmul": lambda L, x, y, p, o: L.matmul(x, y.T, out=o),
    "mm": lambda L, x, y, p, o: L.mm(x, y.T, out=o),
    "bmm": lambda L, x, y, p, o: L.bmm(x[None], y.T[None], out=o),
    "dot": lambda L, x, y, p, o: L.dot(x[0], y[0], out=o),
    "outer": lambda L, x, y, p, o: L.outer(x[0], y[1], out=o),
    "exp": lambda L, x, y, p, o: L.exp(x, out=o),
    "log": lambda L, x, y, p, o: L.log(x.abs() + 0.5, out=o),
    "sqrt": lambda L, x, y, p, o: L.sqrt(x.abs(), out=o),
    "abs": lambda L, x, y, p, o: L.abs(x, out=o),
    "absolute": lambda L, x, y, p, o: L.absolute(x, out=o),
    "neg": lambda L, x, y, p, o: L.neg(x, out=o),
    "negative": lambda L, x, y, p, o: L.negative(x, out=o),
    "reciprocal": lambda L, x, y, p, o: L.reciprocal(x, out=o),
    "sign": lambda L, x, y, p, o: L.sign(x, out=o),
    "sigmoid": lambda L, x, y, p, o: L.sigmoid(x, out=o),
    "tanh": lambda L, x, y, p, o: L.tanh(x, out=o),
    "sin": lambda L, x, y, p, o: L.sin(x, out=o),
    "cos": lambda L, x, y, p, o: L.cos(x, out=o),
    "tan": lambda L, x, y, p, o: L.tan(x, out=o),
    "asin": lambda L, x, y, p, o: L.asin(x / 4, out=o),
    "acos": lambda L, x, y, p, o: L.acos(x / 4, out=o),
    "atan": lambda L, x, y, p, o: L.atan(x, out=o),
    "sinh": lambda L, x, y, p, o: L.sinh(x, out=o),
    "cosh": lambda L, x, y, p, o: L.cosh(x, out=o),
    "exp2": lambda L, x, y, p, o: L.exp2(x, out=o),
    "expm1": lambda L, x, y, p, o: L.expm1(x, out=o),
    "log2": lambda L, x, y, p, o: L.log2(x.abs(), out=o),
    "log10": lambda L, x, y, p, o: L.log10(x.abs(), out=o),
    "log1p": lambda L, x, y, p, o: L.log1p(x.abs(), out=o),
    "rsqrt": lambda L, x, y, p, o: L.rsqrt(x.abs(), out=o),
    "erf": lambda L, x, y, p, o: L.erf(x, out=o),
    "square": lambda L, x, y, p, o: L.square(x, out=o),
    "floor": lambda L, x, y, p, o: L.floor(x, out=o),
    "ceil": lambda L, x, y, p, o: L.ceil(x, out=o),
    "round": lambda L, x, y, p, o: L.round(x, out=o),
    "trunc": lambda L, x, y, p, o: L.trunc(x, out=o),
    "frac": lambda L, x, y, p, o: L.frac(x, out=o),
    "lerp": lambda L, x, y, p, o: L.lerp(x, y, 0.25, out=o),
    "addcmul": lambda L, x, y, p, o: L.addcmul(x, y, p, value=0.5, out=o),
    "addcdiv": lambda L, x, y, p, o: L.addcdiv(x, y, p, value=0.5, out=o),
    "clamp": lambda L, x, y, p, o: L.clamp(x, -1, 1, out=o),
    "clip": lambda L, x, y, p, o: L.clip(x, -1, 1, out=o),
    "clamp_min": lambda L, x, y, p, o: L.clamp_min(x, 0, out=o),
    "clamp_max": lambda L, x, y, p, o: L.clamp_max(x, 0, out=o),
    "where": lambda L, x, y, p, o: L.where(y > 0, x, y, out=o),
    "eq": lambda L, x, y, p, o: L.eq(x, y, out=o),
    "ne": lambda L, x, y, p, o: L.ne(x, 0.5, out=o),
    "lt": lambda L, x, y, p, o: L.lt(x, y, out=o),
    "le": lambda L, x, y, p, o: L.le(x, y, out=o),
    "gt": lambda L, x, y, p, o: L.gt(x, y, out=o),
    "ge": lambda L, x, y, p, o: L.ge(x, y, out=o),
    "logical_and": lambda L, x, y, p, o: L.logical_and(x, y, out=o),
    "logical_or": lambda L, x, y, p, o: L.logical_or(x, y, out=o),
    "logical_not": lambda L, x, y, p, o: L.logical_not(x, out=o),
    "all": lambda L, x, y, p, o: L.all(x, out=o),
    "any_dim": lambda L, x, y, p, o: L.any(y > 1, 1, out=o),
    "sum": lambda L, x, y, p, o: L.sum(x, 1, out=o),
    "sum_keepdim": lambda L, x, y, p, o: L.sum(x, (0, 1), keepdim=True, out=o),
    "mean": lambda L, x, y, p, o: L.mean(x, out=o),
    "mean_dim": lambda L, x, y, p, o: L.mean(x, 0, out=o),
    "prod": lambda L, x, y, p, o: L.prod(x, 1, out=o),
    "std": lambda L, x, y, p, o: L.std(x, 1, out=o),
    "var": lambda L, x, y, p, o: L.var(x, 0, out=o),
    "amax": lambda L, x, y, p, o: L.amax(x, 1, out=o),
    "amin": lambda L, x, y, p, o: L.amin(x, 0, out=o),
    "argmax": lambda L, x, y, p, o: L.argmax(x, 1, out=o),
    "argmin": lambda L, x, y, p, o: L.argmin(x, out=o),
    "max_all": lambda L, x, y, p, o: L.max(x, out=o),
    "min_all": lambda L, x, y, p, o: L.min(x, out=o),
    "max_binary": lambda L, x, y, p, o: L.max(x, y, out=o),
    "logsumexp": lambda L, x, y, p, o: L.logsumexp(x, 1, out=o),
    "softmax": lambda L, x, y, p, o: L.softmax(x, 1, out=o),
    "log_softmax": lambda L, x, y, p, o: L.log_softmax(x, 1, out=o),
    "cumsum": lambda L, x, y, p, o: L.cumsum(x, 1, out=o),
    "cumprod": lambda L, x, y, p, o: L.cumprod(x, 0, out=o),
    "cat": lambda L, x, y, p, o: L.cat([x, y], 1, out=o),
    "concat": lambda L, x, y, p, o: L.concat([x, y], out=o),
    "concatenate": lambda L, x, y, p, o: L.concatenate([x, y], out=o),
    "stack": lambda L, x, y, p, o: L.stack([x, y], 1, out=o),
    "gather": lambda L, x, y, p, o: L.gather(x, 1, L.tensor([[0, 2], [1, 1]]), out=o),
    "index_select": lambda L, x, y, p, o: L.index_select(x, 1, L.tensor([2, 0]), out=o),
    "masked_select": lambda L, x, y, p, o: L.masked_select(x, y > 0, out=o),
    "take_along_dim": lambda L, x, y, p, o: L.take_along_dim(x, L.tensor([[0], [2]]), 1, out=o),
    "scatter": lambda L, x, y, p, o: L.scatter(x, 1, L.tensor([[0], [2]]), y, out=o),
    "scatter_add": lambda L, x, y, p, o: L.scatter_add(x, 1, L.tensor([[0, 0], [2, 1]]), y, out=o),
    "scatter_reduce": lambda L, x, y, p, o: L.scatter_reduce(x, 1, L.tensor([[0, 0], [2, 1]]), y, "prod", out=o),
    "nonzero": lambda L, x, y, p, o: L.nonzero(y > 0, out=o),
    "diag": lambda L, x, y, p, o: L.diag(x, out=o),
    "tril": lambda L, x, y, p, o: L.tril(x, out=o),
    "triu": lambda L, x, y, p, o: L.triu(x, 1, out=o),
    "norm": lambda L, x, y, p, o: L.norm(x, 2, 1, out=o),
}
# PyTorch lets these through with inputs that require grad (and leaves a broken grad_fn on out); trainkit refuses.
REFUSED_HERE_ONLY = {"diag", "softmax", "log_softmax"}
PAIR_CASES = {
    "max_dim": lambda L, x, y, p, o: L.max(x, 1, out=o),
    "min_dim": lambda L, x, y, p, o: L.min(x, 0, keepdim=True, out=o),
    "sort": lambda L, x, y, p, o: L.sort(x, 1, out=o),
    "topk": lambda L, x, y, p, o: L.topk(x, 2, out=o),
}
FACTORY_CASES = {
    "zeros": lambda L, o, **k: L.zeros(2, 3, out=o, **k),
    "ones": lambda L, o, **k: L.ones((2, 3), out=o, **k),
    "empty": lambda L, o, **k: L.empty(2, 3, out=o, **k).zero_(),
    "full": lambda L, o, **k: L.full((2, 3), 7, out=o, **k),
    "arange": lambda L, o, **k: L.arange(1, 7, 2, out=o, **k),
    "linspace": lambda L, o, **k: L.linspace(0, 1, 5, out=o, **k),
    "eye": lambda L, o, **k: L.eye(3, 2, out=o, **k),
    "rand": lambda L, o, **k: L.rand(2, 3, out=o, **k).shape,
    "randn": lambda L, o, **k: L.randn(4, out=o, **k).shape,
    "randint": lambda L, o, **k: L.randint(0, 5, (3,), out=o, **k).shape,
    "randperm": lambda L, o, **k: L.randperm(5, out=o, **k).sort().values,
}
OUT_DTYPES = ["float32", "float64", "int64", "bool"]


def _outcome(fn):
    """("ok", values) or (exception type name, message), warnings recorded as messages up to PyTorch's suffix."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001  (compared with the reference's)
            return type(err).__name__, str(err), []
    said = [str(w.message).split(" (Triggered internally")[0] for w in caught]
    if isinstance(result, tuple) and all(hasattr(t, "dtype") for t in result):
        return "ok", [(to_numpy(t), str(t.dtype).split(".")[-1]) for t in result], said
    if hasattr(result, "dtype"):
        return "ok", (to_numpy(result), str(result.dtype).split(".")[-1]), said
    return "ok", tuple(result), said


def _same(ours, theirs):
    (k1, v1, w1), (k2, v2, w2) = ours, theirs
    assert k1 == k2, f"trainkit: {k1} {v1}; torch: {k2} {v2}"
    assert w1 == w2
    if k1 != "ok":
        assert v1 == v2
        return
    pairs = zip(v1, v2) if isinstance(v1, list) else [(v1, v2)]
    for a, b in pairs:
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], np.ndarray):
            assert a[1] == b[1], f"dtype {a[1]} != {b[1]}"
            assert a[0].shape == b[0].shape
            np.testing.assert_allclose(a[0].astype(np.float64), b[0].astype(np.float64), rtol=1e-6, atol=1e-6)
        else:
            assert a == b


def _run(lib, dev, case, out_dtype, pair=False, requires_grad=False):
    def go():
        x = lib.tensor(A, device=dev, requires_grad=requires_grad)
        y, p = lib.tensor(B, device=dev), lib.tensor(P, device=dev)
        dt = getattr(lib, out_dtype)
        out = lib.empty(0, dtype=dt, device=dev)
        if pair:
            out = (out, lib.empty(0, dtype=lib.int64, device=dev))
        return case(lib, x, y, p, out)

    if lib is trainkit:
        with trainkit.device(dev):  # index tensors made inside the cases land on the device under test
            return _outcome(go)
    return _outcome(go)


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_values_and_dtype_rules_match_torch(torch, device, name):
    for out_dtype in OUT_DTYPES:
        _same(_run(trainkit, device, CASES[name], out_dtype), _run(torch, "cpu", CASES[name], out_dtype))


@pytest.mark.parametrize("name", sorted(PAIR_CASES))
def test_out_pairs_match_torch(torch, device, name):
    for out_dtype in OUT_DTYPES:
        _same(
            _run(trainkit, device, PAIR_CASES[name], out_dtype, pair=True),
            _run(torch, "cpu", PAIR_CASES[name], out_dtype, pair=True),
        )


@pytest.mark.parametrize("name", sorted(set(CASES) - REFUSED_HERE_ONLY))
def test_out_refuses_autograd_as_torch(torch, name):
    _same(
        _run(trainkit, "cpu", CASES[name], "float32", requires_grad=True),
        _run(torch, "cpu", CASES[name], "float32", requires_grad=True),
    )


@pytest.mark.parametrize("name", sorted(PAIR_CASES))
def test_out_pairs_refuse_autograd_as_torch(torch, name):
    _same(
        _run(trainkit, "cpu", PAIR_CASES[name], "float32", pair=True, requires_grad=True),
        _run(torch, "cpu", PAIR_CASES[name], "float32", pair=True, requires_grad=True),
    )


def test_refused_here_only_still_refuses():
    x = trainkit.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"diag\(\): functions with out=\.\.\. arguments"):
        trainkit.diag(x, out=trainkit.empty(0))
    with trainkit.no_grad():
        assert trainkit.diag(x, out=trainkit.empty(0)).tolist() == [1.0, 1.0]


FACTORY_VARIANTS = {
    "float32": lambda L: (L.empty(0), {}),
    "float64": lambda L: (L.empty(0, dtype=L.float64), {}),
    "int64": lambda L: (L.empty(0, dtype=L.int64), {}),
    "int32": lambda L: (L.empty(0, dtype=L.int32), {}),
    "bool": lambda L: (L.empty(0, dtype=L.bool), {}),
    "dtype-mismatch": lambda L: (L.empty(0), {"dtype": L.float64}),
    "dtype-match": lambda L: (L.empty(0, dtype=L.float64), {"dtype": L.float64}),
    "resize": lambda L: (L.empty(7), {}),
    "requires-grad": lambda L: (L.empty(0), {"requires_grad": True}),
}


@pytest.mark.parametrize("name", sorted(FACTORY_CASES))
def test_factories_with_out_match_torch(torch, device, name):
    for variant, make in FACTORY_VARIANTS.items():
        if name == "empty" and variant == "requires-grad":
            continue  # PyTorch's empty(..., requires_grad=True, out=) then zero_() refuses the leaf; not a factory rule

        def ours(make=make):
            out, kw = make(trainkit)
            return FACTORY_CASES[name](trainkit, out.to(device), **kw)

        def theirs(make=make):
            out, kw = make(torch)
            return FACTORY_CASES[name](torch, out, **kw)

        got, want = _outcome(ours), _outcome(theirs)
        if got[0] == "ok" and isinstance(got[1], tuple) and len(got[1]) == 2 and isinstance(got[1][0], np.ndarray):
            _same(got, want)
        else:
            assert got[0] == want[0] and got[2] == want[2], (variant, got, want)
            if got[0] != "ok":
                assert got[1] == want[1], variant
            else:
                assert tuple(got[1]) == tuple(want[1]), variant


def test_out_is_returned_written_in_place_and_versioned(torch):
    for lib in (trainkit, torch):
        base = lib.zeros(2, 3)
        row = base[0]
        v = row._version
        x = lib.tensor([1.0, 2.0, 3.0])
        result = lib.add(x, 1, out=row)
        assert result is row
        assert row._version == v + 1
        assert base.tolist() == [[2.0, 3.0, 4.0], [0.0, 0.0, 0.0]]  # a view written into shows through its base
        assert lib.mul(x, 2, out=x) is x and x.tolist() == [2.0, 4.0, 6.0]  # out may be an input


def test_resizing_warns_only_when_out_was_not_empty(torch):
    results = []
    for lib in (trainkit, torch):
        x = lib.ones(2, 3)
        got = [
            _outcome(lambda L=lib, x=x: L.neg(x, out=L.empty(5))),
            _outcome(lambda L=lib, x=x: L.neg(x, out=L.empty(0))),
        ]
        results.append(got)
        out = lib.empty(0)
        lib.mul(x, 1, out=out)
        x.add_(1)  # the resized out got storage of its own: it does not follow x
        assert out.tolist() == [[1.0] * 3] * 2
    (a1, b1), (a2, b2) = results
    _same(a1, a2)
    _same(b1, b2)
    assert len(a1[2]) == 1 and "was resized since it had shape [5]" in a1[2][0] and b1[2] == []


def test_arange_resize_warning_matches_torch(torch):
    _same(
        _outcome(lambda: trainkit.arange(1, 7, 2, out=trainkit.empty(7))),
        _outcome(lambda: torch.arange(1, 7, 2, out=torch.empty(7))),
    )


def test_out_that_requires_grad_is_refused(torch):
    for lib in (trainkit, torch):
        x = lib.ones(2)
        with pytest.raises(RuntimeError, match=r"^add\(\): functions with out=\.\.\. arguments don't support"):
            lib.add(x, x, out=lib.zeros(2, requires_grad=True))
        with pytest.raises(RuntimeError, match=r"^aten::zeros\(\): functions with out="):
            lib.zeros(2, out=lib.zeros(2, requires_grad=True))
        eq_out = lib.zeros(2, requires_grad=True)
        assert lib.eq(x, x, out=eq_out) is eq_out  # a comparison has no gradient: nothing to refuse
        with lib.no_grad():
            leaf = lib.zeros(2, requires_grad=True)
            assert lib.add(x, lib.ones(2, requires_grad=True), out=leaf).tolist() == [2.0, 2.0]


def test_out_argument_errors_match_torch(torch):
    x = lambda L: L.tensor(A)  # noqa: E731
    assert_same_error(torch, lambda L, d: L.add(x(L), x(L), out=(L.empty(0),)), "argument 'out' must be Tensor")
    assert_same_error(torch, lambda L, d: L.sort(x(L), out=[L.empty(0)]), "expected tuple of 2 elements but got 1")
    assert_same_error(
        torch,
        lambda L, d: L.sort(x(L), out=(L.empty(0), L.empty(0, dtype=L.int64), L.empty(0))),
        "expected tuple of 2 elements but got 3",
    )
    assert_same_error(torch, lambda L, d: L.sort(x(L), out=(L.empty(0), 3)), "expected Tensor as element 1")
    assert_same_error(
        torch,
        lambda L, d: L.exp(x(L), out=L.empty(1).expand(2, 3)),
        "more than one element of the written-to tensor refers to a single memory location",
    )
    assert_same_error(
        torch,
        lambda L, d: L.sum(x(L), 0, dtype=L.float64, out=L.empty(0, dtype=L.int64)),
        "Expected out tensor to have dtype double, but got long int instead",
    )
    assert_same_error(
        torch,
        lambda L, d: L.zeros(2, dtype=L.float64, out=L.empty(0)),
        "dtype Double does not match dtype of out parameter (Float)",
    )


def test_reductions_compute_in_the_dtype_of_out(torch):
    for fn in {
        "sum": lambda L, o: L.sum(L.tensor([0.5, 0.7, 1.5]), 0, out=o),
        "prod": lambda L, o: L.prod(L.tensor([[1.5, 1.5]]), 1, out=o),
        "cumsum": lambda L, o: L.cumsum(L.tensor([0.5, 0.7, 1.5]), 0, out=o),
        "cumprod": lambda L, o: L.cumprod(L.tensor([1.5, 2.5]), 0, out=o),
    }.values():
        for dt in ("int64", "float64", "bool"):
            _same(
                _outcome(lambda fn=fn, dt=dt: fn(trainkit, trainkit.empty(0, dtype=getattr(trainkit, dt)))),
                _outcome(lambda fn=fn, dt=dt: fn(torch, torch.empty(0, dtype=getattr(torch, dt)))),
            )


def test_pair_result_is_named_and_holds_the_out_tensors(torch):
    for lib in (trainkit, torch):
        values, indices = lib.empty(0), lib.empty(0, dtype=lib.int64)
        r = lib.max(lib.tensor(A), 1, out=(values, indices))
        assert type(r).__name__ == "max_out"
        assert r.values is values and r.indices is indices and r[0] is values
        assert indices.tolist() == [2, 0]
        s = lib.topk(lib.tensor(A), 2, out=[lib.empty(0), lib.empty(0, dtype=lib.int64)])
        assert type(s).__name__ == "topk_out" and s.indices.tolist() == [[2, 0], [0, 1]]


def test_without_out_nothing_changes():
    x = trainkit.tensor(A, requires_grad=True)
    y = trainkit.add(x, 1)
    assert y.grad_fn.name() == "AddBackward0"
    values, indices = trainkit.max(x, 1)
    assert values.grad_fn is not None and indices.dtype == trainkit.int64
    assert "out" in inspect.signature(trainkit.add).parameters
    assert "out" in inspect.signature(trainkit.zeros).parameters
    assert trainkit.add.__doc__ == trainkit.autograd.ops.math.add.__doc__
    with pytest.raises(TypeError):
        x.add(x, out=trainkit.empty(0))  # methods take no out=, as in PyTorch


def test_factory_out_takes_the_device_of_out(device):
    out = trainkit.empty(0, device=device)
    assert trainkit.arange(3, out=out) is out
    assert out.device.type == trainkit.device(device).type and out.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.skipif(not CUDA, reason="no usable GPU")
def test_out_on_another_device_is_an_error():
    x = trainkit.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="Expected out tensor to have device cuda:0, but got cpu instead"):
        trainkit.exp(x, out=trainkit.empty(2))
