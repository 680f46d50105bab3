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
    summary = (tuple(out.shape), str(out.dtype).rsplit(".", 1)[-1], out.requires_grad, node,
               np.asarray(out.detach().numpy()))
    grads = None
    if out.requires_grad:
        g = lib.ones_like(out) if upstream is None else lib.tensor(upstream, dtype=out.dtype)
        try:
            out.backward(g)
        except Exception as err:  # noqa: BLE001
            return ("backward raises", type(err).__name__, summary[:4])
        grads = [None if not isinstance(x, lib.Tensor) or x.grad is None else np.asarray(x.grad.numpy())
                 for x in inputs]
    return ("result", summary, grads)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind == "f":
            return bool(np.all((a == b) & (np.signbit(a) == np.signbit(b)) | np.isnan(a) & np.isnan(b)
                               | np.isclose(a, b, rtol=1e-6, atol=0)))
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
