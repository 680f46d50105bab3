"""Edge cases of element-wise, bitwise, comparison and arithmetic ops against PyTorch: which check comes first
(shapes before dtypes), the exception classes of refused calls, node names, and gradients at edge values."""

from __future__ import annotations

import math

import numpy as np
import pytest

import trainkit

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan


def _make(lib, spec):
    """A tensor of ``lib`` from ``(values, dtype name, requires_grad)``; anything else passes unchanged."""
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[1], str):
        values, dtype, rg = spec
        return lib.tensor(np.asarray(values).tolist(), dtype=getattr(lib, dtype), requires_grad=rg)
    return spec


def _outcome(lib, fn, specs, upstream=None):
    """What a call gives in ``lib``: the exception class, or the result's summary and the inputs' gradients."""
    inputs = [_make(lib, s) for s in specs]
    try:
        out = fn(lib, *inputs)
    except Exception as err:  # noqa: BLE001  (the class is what is compared)
        return ("raises", type(err).__name__)
    if not isinstance(out, lib.Tensor):
        return ("value", out)
    node = None if out.grad_fn is None else type(out.grad_fn).__name__
    summary = (
        tuple(out.shape),
        str(out.dtype).rsplit(".", 1)[-1],
        out.requires_grad,
        node,
        np.asarray(out.detach().numpy()),
    )
    grads = None
    if out.requires_grad:
        g = lib.ones_like(out) if upstream is None else lib.tensor(upstream, dtype=out.dtype)
        try:
            out.backward(g)
        except Exception as err:  # noqa: BLE001
            return ("backward raises", type(err).__name__, summary[:4])
        grads = [
            None if not isinstance(x, lib.Tensor) or x.grad is None else np.asarray(x.grad.numpy()) for x in inputs
        ]
    return ("result", summary, grads)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind == "f":
            return bool(
                np.all(
                    (a == b) & (np.signbit(a) == np.signbit(b))
                    | np.isnan(a) & np.isnan(b)
                    | np.isclose(a, b, rtol=1e-6, atol=0)
                )
            )
        return bool((a == b).all())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def check(fn, *specs, upstream=None):
    """``fn(lib, *inputs)`` gives the same outcome in trainkit and torch."""
    ours, theirs = _outcome(trainkit, fn, specs, upstream), _outcome(torch, fn, specs, upstream)
    assert _same(ours, theirs), f"trainkit {ours}\ntorch    {theirs}"


def f32(values, rg=True):
    return (values, "float32", rg)


def f64(values, rg=True):
    return (values, "float64", rg)


def i64(values):
    return (values, "int64", False)


def b(values):
    return (values, "bool", False)


# --- bitwise --------------------------------------------------------------------------------------------------

BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_checks_shapes_before_dtypes(name):
    x, y = f32(np.ones((2, 3)), rg=False), f32(np.ones(4), rg=False)
    check(lambda L, a, c: getattr(L, name)(a, c), x, y)
    check(lambda L, a, c: getattr(a, name)(c), x, y)


@pytest.mark.parametrize("op", ["__and__", "__or__", "__xor__"])
def test_bitwise_operators_check_shapes_before_dtypes(op):
    check(lambda L, a, c: getattr(a, op)(c), f32(np.ones((2, 3)), rg=False), f32(np.ones(4), rg=False))


@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift"])
@pytest.mark.parametrize("other", [True, b([[True, False, True], [False, False, True]])])
def test_shifts_of_bools_have_no_kernel(name, other):
    x = b([[True, False, True], [True, True, False]])
    check(lambda L, a, c: getattr(L, name)(a, c), x, other)
    check(lambda L, a, c: getattr(a, name)(c), x, other)


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_of_integers_still_works(name):
    check(lambda L, a, c: getattr(L, name)(a, c), i64([[1, 6, 3], [0, 5, 2]]), i64([1, 2, 0]))
    if "shift" not in name:
        check(lambda L, a, c: getattr(L, name)(a, c), b([True, False]), b([True, True]))


# --- comparisons ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparison_with_a_number_first_is_a_type_error(name):
    x = f32([[1.0, 2.5, 3.0], [2.5, -1.0, 0.0]], rg=False)
    check(lambda L, a: getattr(L, name)(2.5, a), x)
    check(lambda L, a: getattr(L, name)(a, 2.5), x)
    check(lambda L, a: 2.5 < a, x)  # the reflected operator still works


# --- division -------------------------------------------------------------------------------------------------

EDGE = [3e38, -3e38, 1e-30, 0.0, -0.0, 1.0, INF, -INF, NAN, 0.5]
EDGE2 = [0.68, 0.5, 1e-30, 0.0, -1.0, 3e38, 2.0, INF, 1.0, -0.0]


@pytest.mark.parametrize("name", ["div", "divide", "true_divide"])
def test_division_of_a_number_by_a_tensor_records_div(name):
    x = f32([[1.0, -2.0, 0.5], [3.0, 4.0, -0.25]])
    check(lambda L, a: getattr(L, name)(2.5, a), x, upstream=np.full((2, 3), -0.5, np.float32))
    check(lambda L, a: getattr(L, name)(3, a), i64([1, 2, 0]))


def test_operator_division_of_a_number_stays_reciprocal_times_number():
    check(lambda L, a: 2.5 / a, f32([[1.0, -2.0, 0.5], [3.0, 4.0, -0.25]]))
    check(lambda L, a: 3 / a, i64([1, 2, 0]))


@pytest.mark.parametrize("mode", ["bad", "Floor", ""])
def test_div_unknown_rounding_mode_is_a_runtime_error(mode):
    check(lambda L, a, c: L.div(a, c, rounding_mode=mode), f32([1.0, 2.0]), f32([3.0, 4.0]))
    check(lambda L, a, c: a.div(c, rounding_mode=mode), i64([7, -7]), i64([2, 2]))


def test_div_gradient_overflows_where_torch_does():
    up = np.array([-0.2, 1.5, 0.3, -1.0, 2.0, 0.7, -0.4, 1.1, 0.9, -2.0], np.float32)
    check(lambda L, a, c: a / c, f32(EDGE), f32(EDGE2), upstream=up)
    check(lambda L, a, c: L.divide(a, c), f64([1e300, -1e300, 1e-300, 2.0]), f64([1e-10, 0.5, 1e10, 0.0]))


# --- atan2 ----------------------------------------------------------------------------------------------------


def test_atan2_gradient_at_the_origin_and_at_extremes():
    y = [0.0, 0.0, -0.0, 1e-30, 1e20, 3e38, INF, 1.0, 1.3677, 0.5223, 3e38, 3e38]
    x = [0.0, -0.0, 0.0, 1e-30, 1e20, 3e38, INF, INF, -3e38, 3e38, INF, -2.32]
    up = np.array([-0.5, 1.0, 2.0, -1.0, 0.5, 1.5, 1.0, -1.0, 1.94, -1.75, -1.52, 1.15], np.float32)
    check(lambda L, a, c: L.atan2(a, c), f32(y), f32(x), upstream=up)
    check(lambda L, a, c: a.atan2(c), f64(y), f64(x), upstream=up.astype(np.float64))


# --- creation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int64", "float16", "bool"])
def test_tensor_with_a_dtype_converts_python_numbers_directly(dtype):
    data = [1e300, -1e-300, 2.7] if dtype == "float64" else [1.5, -2.7, 0.0]
    check(lambda L: L.tensor(data, dtype=getattr(L, dtype)))


# --- add and sub with alpha -----------------------------------------------------------------------------------

ALPHAS = [0.5, 1.0, 2, True, -1]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("name", ["add", "sub", "rsub"])
def test_alpha_is_checked_against_the_result_dtype(name, alpha):
    ints, floats, bools = i64([[1, -2, 3], [0, 5, 7]]), f32([1.5, -2.0, 0.25]), b([True, False, True])
    check(lambda L, a, c: getattr(L, name)(a, c, alpha=alpha), ints, ints)
    check(lambda L, a, c: getattr(L, name)(a, c, alpha=alpha), ints, floats)
    check(lambda L, a, c: getattr(L, name)(a, c, alpha=alpha), floats, floats)
    check(lambda L, a: getattr(L, name)(a, 3, alpha=alpha), ints)
    check(lambda L, a: getattr(L, name)(a, 2.5, alpha=alpha), ints)
    check(lambda L, a, c: getattr(L, name)(a, c, alpha=alpha), bools, bools)
    check(lambda L, a, c: getattr(a, name)(c, alpha=alpha), ints, ints)


# --- masked_fill ----------------------------------------------------------------------------------------------

MASK = b([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
INTS = i64(np.arange(12).reshape(3, 4))


@pytest.mark.parametrize("value", [-INF, INF, NAN, 1e20, 2.7, -3, True])
def test_masked_fill_of_an_integer_tensor_refuses_values_it_cannot_hold(value):
    check(lambda L, a, m: a.masked_fill(m, value), INTS, MASK)
    check(lambda L, a, m: L.masked_fill(a, m, value), INTS, b([True, False, False, True]))


@pytest.mark.parametrize("value", [1e40, -1e39, INF, NAN, 3e38])
def test_masked_fill_of_a_float32_tensor_refuses_values_beyond_its_range(value):
    check(lambda L, a, m: a.masked_fill(m, value), f32(np.ones((3, 4))), MASK)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rg", [True, False])
def test_masked_fill_of_an_integer_tensor_with_a_value_that_requires_grad(dtype, rg):
    check(lambda L, a, m, v: a.masked_fill(m, v), INTS, MASK, (2.5, dtype, rg))
    check(lambda L, a, m, v: a.masked_fill(m, v), f32(np.ones((3, 4))), MASK, (2.5, dtype, rg))


# --- pow ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("base", [True, False, 2, 2.5])
def test_number_to_a_bool_tensor_power(base):
    check(lambda L, e: base**e, b([True, False, True]))
    check(lambda L, e: L.pow(base, e), b([True, False, True]))


def test_pow_with_a_bool_exponent_tensor_cannot_backward_to_the_base():
    check(lambda L, x, e: L.pow(x, e), f64([[1.5, -2.0, 0.5], [3.0, 0.0, 2.0]]), b([True, False, True]))
    check(lambda L, x, e: x**e, f32([1.5, -2.0, 0.5]), b([True, False, False]))
    check(lambda L, x, e: L.pow(x, e), b([True, False]), f32([1.5, 2.0]))


def test_pow_gradients_overflow_where_torch_does():
    x = [2.3767872, 0.0, 0.0, -1.0, 3e38, 1e-30, INF, 2.0, NAN, -0.0]
    y = [-3e38, 2.0, -1.0, 0.5, 2.0, 3e38, 0.0, 200.0, 0.0, 3.0]
    up = np.array([1.16, -0.5, 2.0, 1.0, -1.5, 0.3, 0.7, -3e38, 1.0, 2.0], np.float32)
    check(lambda L, a, c: a.pow(c), f32(x), f32(y), upstream=up)
    check(lambda L, a: 2.5**a, f32(y), upstream=up)
    check(lambda L, a: 0**a, f32(y), upstream=up)
    check(lambda L, a: (-2) ** a, f32(y), upstream=up)


# --- unary plus -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [b([True, False]), i64([1, -2]), f32([1.5, -0.0])])
def test_unary_plus(spec):
    check(lambda L, a: +a, spec)
    check(lambda L, a: (+a) is a, spec)


# --- isclose, allclose, where ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["isclose", "allclose"])
def test_isclose_refuses_shapes_that_do_not_broadcast_and_mixed_dtypes(name):
    x = f32(np.ones((2, 3)), rg=False)
    for other in (
        f32(np.ones(4), rg=False),
        f64(np.ones((2, 3)), rg=False),
        i64(np.ones((2, 3), int)),
        f32(np.ones(3), rg=False),
    ):
        check(lambda L, a, c: getattr(L, name)(a, c), x, other)
        check(lambda L, a, c: getattr(a, name)(c), x, other)
    check(lambda L, a, c: getattr(L, name)(a, c), b([True, False]), b([True, True]))


@pytest.mark.parametrize(
    "cond", [b(True), b(False), f32(2.5, rg=False), b(np.zeros((2, 0), bool)), b([[True, False], [False, True]])]
)
def test_where_with_only_a_condition(cond):
    check(lambda L, c: len(L.where(c)), cond)
    for i in range(2):
        check(lambda L, c, i=i: L.where(c)[i] if i < len(L.where(c)) else None, cond)


@pytest.mark.parametrize("args", [(5, 0, (3,)), (3, 3, (2,)), (0, (2,)), (-2, (2,)), (5, 5, (0,))])
def test_randint_with_an_empty_range_is_a_runtime_error(args):
    check(lambda L: L.randint(*args))


def test_randint_of_an_empty_size_still_works():
    check(lambda L: L.randint(0, 5, (0,)))


# --- clamp with tensor bounds ---------------------------------------------------------------------------------

CLAMP_SHAPES = [((), (3,), (2, 3)), ((3,), (2, 3), (3,)), ((3,), (3,), (2, 3)), ((), (2, 3), (3,)), ((2, 3), (3,), ())]


@pytest.mark.parametrize("shapes", CLAMP_SHAPES)
@pytest.mark.parametrize("wanted", [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)])
def test_clamp_backward_when_the_bounds_broadcast_x_further(shapes, wanted):
    rng = np.random.default_rng(0)
    specs = [(rng.standard_normal(s).astype(np.float32), "float32", bool(w)) for s, w in zip(shapes, wanted)]
    check(lambda L, x, lo, hi: L.clamp(x, lo, hi), *specs)
    check(lambda L, x, lo, hi: x.clip(min=lo, max=hi), *specs)


# --- unsigned dtypes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("np_dtype", [np.uint16, np.uint32, np.uint64])
def test_from_numpy_keeps_wide_unsigned_dtypes(np_dtype):
    array = np.arange(3, dtype=np_dtype)
    check(lambda L: L.from_numpy(array.copy()))
    check(lambda L: L.from_numpy(array.copy()).type().rsplit(".", 1)[-1])
    check(lambda L: L.from_numpy(array.copy()).float())
    check(lambda L: L.from_numpy(array.copy()) == 1)
    check(lambda L: L.from_numpy(array.copy()) + L.tensor([1, 2, 3]))


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_wide_unsigned_dtypes_make_tensors(name):
    check(lambda L: L.zeros(2, dtype=getattr(L, name)))
    check(lambda L: L.tensor([1, 2], dtype=getattr(L, name)).to(L.int64))
    check(lambda L: str(getattr(L, name)).rsplit(".", 1)[-1])


def test_as_tensor_of_a_tensor_converts_in_the_graph():
    x = f32([[1.5, -2.0, 0.5], [3.0, 0.0, 2.0]])
    check(lambda L, a: L.as_tensor(a, dtype=L.float64), x)
    check(lambda L, a: L.as_tensor(a, dtype=L.float64, device="cpu"), x)
    check(lambda L, a: L.as_tensor(a) is a, x)
    check(lambda L, a: L.as_tensor(a, dtype=L.int64), x)
