"""The ops against PyTorch: values, gradients, node names, dtypes (type promotion) and errors.

Trainkit runs on the ``device`` fixture, torch on the CPU. Inputs are float32, and so must the gradients be.
The op cases are those of ``test_ops_gradcheck.py``.
"""

from __future__ import annotations

import operator
import re

import numpy as np
import pytest
from conftest import to_numpy
from test_ops_gradcheck import CASES, Lib, draw

import trainkit

RTOL, ATOL = 1e-5, 1e-6


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _dtype_name(dtype) -> str:
    """``float32`` for both ``trainkit.float32`` and ``torch.float32``."""
    return str(dtype).rsplit(".", 1)[-1]


def _node_name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _run_both(case, device, torch, rng):
    arrays = [draw(a, rng).astype(np.float32) for a in case.args]
    tk_inputs = [trainkit.tensor(x, device=device, requires_grad=a.grad) for x, a in zip(arrays, case.args)]
    th_inputs = [torch.tensor(x, requires_grad=a.grad) for x, a in zip(arrays, case.args)]
    tk_out = _outputs(case.fn(Lib(trainkit, device), *tk_inputs))
    th_out = _outputs(case.fn(Lib(torch), *th_inputs))
    return tk_inputs, th_inputs, tk_out, th_out


def _assert_same_tensor(tk, th, what: str) -> None:
    assert tuple(tk.shape) == tuple(th.shape), f"{what}: shape {tuple(tk.shape)} != torch's {tuple(th.shape)}"
    assert _dtype_name(tk.dtype) == _dtype_name(th.dtype), f"{what}: dtype {tk.dtype} != torch's {th.dtype}"
    np.testing.assert_allclose(to_numpy(tk), th.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_values_and_grads_match_torch(case, device, torch, rng):
    tk_inputs, th_inputs, tk_out, th_out = _run_both(case, device, torch, rng)
    assert len(tk_out) == len(th_out)
    for i, (o, r) in enumerate(zip(tk_out, th_out)):
        _assert_same_tensor(o, r, f"output {i}")
        assert o.device.type == trainkit.device(device).type
        assert o.requires_grad == r.requires_grad, f"output {i}: requires_grad"

    pairs = [(o, r) for o, r in zip(tk_out, th_out) if r.requires_grad]
    upstream = [np.asarray(rng.standard_normal(tuple(r.shape)), dtype=r.detach().numpy().dtype) for _, r in pairs]
    trainkit.autograd.backward([o for o, _ in pairs], [trainkit.tensor(g, device=device) for g in upstream])
    torch.autograd.backward([r for _, r in pairs], [torch.tensor(g) for g in upstream])

    for i, (x, xr) in enumerate(zip(tk_inputs, th_inputs)):
        if xr.grad is None:
            assert x.grad is None, f"input {i} got a grad where torch's got none"
            continue
        assert x.grad is not None, f"input {i} got no grad"
        assert _dtype_name(x.grad.dtype) == "float32", f"input {i}: grad dtype {x.grad.dtype}"
        assert x.grad.device == x.device
        _assert_same_tensor(x.grad, xr.grad, f"grad of input {i}")


# Node names that differ on purpose: PyTorch's reflects how it happens to compute the op internally.
NAME_DIFFERENCES = {
    "matmul-2d-3d": "PyTorch expands and copies the matrix first (CloneBackward0); trainkit records one matmul node",
}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_grad_fn_names_match_torch(case, device, torch, rng):
    if case.id in NAME_DIFFERENCES:
        pytest.skip(NAME_DIFFERENCES[case.id])
    _, _, tk_out, th_out = _run_both(case, device, torch, rng)
    assert [_node_name(o) for o in tk_out] == [_node_name(r) for r in th_out]


# ------------------------------------------------------------------------------------------ type promotion
PROMOTIONS = {
    "int64-plus-float-number": lambda m: m.tensor([1, 2, 3]) + 1.5,
    "float-number-minus-int64": lambda m: 1.5 - m.tensor([1, 2, 3]),
    "float32-times-int-number": lambda m: m.tensor([1.5, 2.0]) * 2,
    "float32-plus-float64": lambda m: m.tensor([1.0, 2.0]) + m.tensor([0.5, 0.25], dtype=m.float64),
    "float64-plus-float32": lambda m: m.tensor([0.5, 0.25], dtype=m.float64) + m.tensor([1.0, 2.0]),
    "int64-plus-float64-0dim": lambda m: m.tensor([1, 2, 3]) + m.tensor(0.5, dtype=m.float64),
    "float32-plus-float64-0dim": lambda m: m.tensor([1.0, 2.0]) + m.tensor(0.5, dtype=m.float64),
    "int64-plus-float32": lambda m: m.tensor([1, 2, 3]) + m.tensor([0.5, 1.5, 2.5]),
    "int64-times-float32-0dim": lambda m: m.tensor([1, 2, 3]) * m.tensor(0.5),
    "int32-plus-int64": lambda m: m.tensor([1, 2], dtype=m.int32) + m.tensor([3, 4]),
    "int64-0dim-plus-int32": lambda m: m.tensor(3) + m.tensor([1, 2], dtype=m.int32),
    "uint8-plus-int8": lambda m: m.tensor([1, 2], dtype=m.uint8) + m.tensor([3, -4], dtype=m.int8),
    "int-true-division": lambda m: m.tensor([1, 2, 3]) / m.tensor([2, 2, 4]),
    "int-divided-by-int-number": lambda m: m.tensor([1, 2, 3]) / 2,
    "int-div-fn": lambda m: m.div(m.tensor([1, 2, 3]), m.tensor([2, 2, 4])),
    "bool-plus-int-number": lambda m: m.tensor([True, False]) + 1,
    "bool-times-float-number": lambda m: m.tensor([True, False]) * 2.5,
    "int64-times-bool-number": lambda m: m.tensor([1, 2]) * True,
    "float16-plus-float-number": lambda m: m.tensor([1.0, 2.0], dtype=m.float16) + 1.5,
    "int64-pow-float-number": lambda m: m.tensor([1, 4]) ** 0.5,
    "int-number-pow-float32": lambda m: 2 ** m.tensor([0.5, 1.5]),
    "maximum-int64-float32": lambda m: m.maximum(m.tensor([1, 2]), m.tensor([1.5, 0.5])),
    "where-int64-float32": lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2]), m.tensor([0.5, 0.5])),
    "cat-int64-float32": lambda m: m.cat([m.tensor([1, 2]), m.tensor([0.5])]),
    "sum-int64": lambda m: m.tensor([1, 2, 3]).sum(),
    "sum-bool": lambda m: m.tensor([True, False, True]).sum(),
    "mean-float32": lambda m: m.tensor([1.0, 2.0, 4.0]).mean(),
}


@pytest.mark.parametrize("make", PROMOTIONS.values(), ids=PROMOTIONS.keys())
def test_type_promotion_matches_torch(make, device, torch):
    out = make(Lib(trainkit, device))
    expected = make(Lib(torch))
    _assert_same_tensor(out, expected, "result")


GRAD_PROMOTIONS = {
    "float32-plus-float64": (lambda a, b: a + b, ((3,), "float32"), ((3,), "float64")),
    "float64-times-float32": (lambda a, b: a * b, ((3,), "float64"), ((2, 3), "float32")),
    "float32-plus-float64-0dim": (lambda a, b: a + b, ((3,), "float32"), ((), "float64")),
    "float32-times-int-number": (lambda a: a * 2, ((3,), "float32")),
    "float32-div-float64": (lambda a, b: a / b, ((2, 3), "float32"), ((3,), "float64")),
    "float32-pow-float64": (lambda a, b: a.abs() ** b, ((3,), "float32"), ((3,), "float64")),
    "maximum-float32-float64": (lambda a, b: a.maximum(b), ((3,), "float32"), ((3,), "float64")),
    "float16-times-float32": (lambda a, b: a * b, ((3,), "float16"), ((3,), "float32")),
}


@pytest.mark.parametrize("spec", GRAD_PROMOTIONS.values(), ids=GRAD_PROMOTIONS.keys())
def test_gradients_keep_each_inputs_dtype(spec, device, torch, rng):
    """A gradient has its input's dtype, whatever dtype the op computed in (as in torch)."""
    fn, *inputs = spec
    arrays = [np.asarray(rng.standard_normal(shape) + 2.0) for shape, _ in inputs]
    tk = [
        trainkit.tensor(x, dtype=getattr(trainkit, d), device=device, requires_grad=True)
        for x, (_, d) in zip(arrays, inputs)
    ]
    th = [torch.tensor(x, dtype=getattr(torch, d), requires_grad=True) for x, (_, d) in zip(arrays, inputs)]
    out, ref = fn(*tk), fn(*th)
    assert _dtype_name(out.dtype) == _dtype_name(ref.dtype)
    upstream = rng.standard_normal(tuple(ref.shape))
    out.backward(trainkit.tensor(upstream, dtype=out.dtype, device=device))
    ref.backward(torch.tensor(upstream, dtype=ref.dtype))
    for i, (x, xr) in enumerate(zip(tk, th)):
        assert _dtype_name(x.grad.dtype) == inputs[i][1] == _dtype_name(xr.grad.dtype)
        assert tuple(x.grad.shape) == tuple(xr.grad.shape)
        np.testing.assert_allclose(
            to_numpy(x.grad).astype(np.float64),
            xr.grad.double().numpy(),
            rtol=2e-3,
            atol=2e-3,
            err_msg=f"grad of input {i}",
        )


# ------------------------------------------------------------------------------------------------- errors
def _raised(fn) -> Exception:
    try:
        fn()
    except Exception as err:
        return err
    raise AssertionError("no exception was raised")


def _names_shape(message: str, shape: tuple) -> bool:
    """Does ``message`` name ``shape``, as (2, 3), (2,3), [2, 3], [2,3] or 2x3?"""
    forms = {str(tuple(shape)), str(list(shape))}
    forms |= {f.replace(" ", "") for f in forms}
    if any(f in message for f in forms):
        return True
    return re.search(r"(?<![\dx])" + "x".join(map(str, shape)) + r"(?![\dx])", message) is not None


BINARY_OPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": operator.pow,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
}
MISMATCHED_SHAPES = [((2, 3), (4, 3)), ((3,), (4,)), ((2, 3), (3, 2)), ((2, 1, 3), (4, 2))]


@pytest.mark.parametrize("shapes", MISMATCHED_SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("op", BINARY_OPS.values(), ids=BINARY_OPS.keys())
def test_broadcast_error_matches_torch_and_names_both_shapes(op, shapes, device, torch):
    sa, sb = shapes
    expected = _raised(lambda: op(torch.ones(sa), torch.ones(sb)))
    err = _raised(lambda: op(trainkit.ones(sa, device=device), trainkit.ones(sb, device=device)))
    assert type(err) is type(expected), f"{type(err).__name__}: {err}"
    assert _names_shape(str(err), sa) and _names_shape(str(err), sb), str(err)


@pytest.mark.parametrize("shapes", [((2, 3), (4, 3)), ((2, 3), (3, 2))], ids=lambda s: f"{s[0]}-{s[1]}")
def test_where_broadcast_error_matches_torch(shapes, device, torch):
    sa, sb = shapes
    expected = _raised(lambda: torch.where(torch.ones(sa) > 0, torch.ones(sa), torch.ones(sb)))
    err = _raised(
        lambda: trainkit.where(
            trainkit.ones(sa, device=device) > 0, trainkit.ones(sa, device=device), trainkit.ones(sb, device=device)
        )
    )
    assert type(err) is type(expected), f"{type(err).__name__}: {err}"
    assert _names_shape(str(err), sa) and _names_shape(str(err), sb), str(err)


@pytest.mark.parametrize(
    ("shape", "other"),
    [((2, 3), (4, 3)), ((3,), (2, 3)), ((2, 3), (3, 3))],
    ids=["not-broadcastable", "result-larger", "rows-differ"],
)
@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "div_"])
def test_inplace_shape_error_matches_torch(method, shape, other, device, torch):
    expected = _raised(lambda: getattr(torch.ones(shape), method)(torch.ones(other)))
    err = _raised(lambda: getattr(trainkit.ones(shape, device=device), method)(trainkit.ones(other, device=device)))
    assert type(err) is type(expected), f"{type(err).__name__}: {err}"


MATMUL_MISMATCHES = [
    ((2, 3), (4, 5)),
    ((2, 2, 3), (2, 4, 5)),
    ((3, 2, 3), (4, 5)),
    ((2, 3), (2, 4, 5)),
    ((3,), (4,)),
    ((2, 3), (4,)),
    ((3,), (4, 5)),
]


@pytest.mark.parametrize("shapes", MATMUL_MISMATCHES, ids=lambda s: f"{s[0]}-{s[1]}")
def test_matmul_error_matches_torch_and_names_both_shapes(shapes, device, torch):
    sa, sb = shapes
    expected = _raised(lambda: torch.ones(sa) @ torch.ones(sb))
    err = _raised(lambda: trainkit.ones(sa, device=device) @ trainkit.ones(sb, device=device))
    assert type(err) is type(expected), f"{type(err).__name__}: {err}"
    assert _names_shape(str(err), sa) and _names_shape(str(err), sb), str(err)


def test_mm_error_message_is_torchs(device, torch):
    expected = _raised(lambda: torch.mm(torch.ones(2, 3), torch.ones(4, 5)))
    err = _raised(lambda: trainkit.mm(trainkit.ones(2, 3, device=device), trainkit.ones(4, 5, device=device)))
    assert type(err) is type(expected)
    assert str(err) == str(expected)


def test_bmm_batch_error_matches_torch(device, torch):
    expected = _raised(lambda: torch.bmm(torch.ones(2, 2, 3), torch.ones(3, 3, 5)))
    err = _raised(lambda: trainkit.bmm(trainkit.ones(2, 2, 3, device=device), trainkit.ones(3, 3, 5, device=device)))
    assert type(err) is type(expected)
    assert _names_shape(str(err), (2, 2, 3)) and _names_shape(str(err), (3, 3, 5)), str(err)


def test_matmul_of_mixed_float_dtypes_is_an_error_as_in_torch(device, torch):
    expected = _raised(lambda: torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.float64))
    err = _raised(
        lambda: trainkit.ones(2, 3, device=device) @ trainkit.ones(3, 2, dtype=trainkit.float64, device=device)
    )
    assert type(err) is type(expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda m, d: m.cat([m.ones(2, 3, device=d), m.ones(2, 4, device=d)]),
        lambda m, d: m.stack([m.ones(2, 3, device=d), m.ones(2, 4, device=d)]),
    ],
    ids=["cat", "stack"],
)
def test_join_error_matches_torch_and_names_both_shapes(make, device, torch):
    expected = _raised(lambda: make(torch, "cpu"))
    err = _raised(lambda: make(trainkit, device))
    assert type(err) is type(expected)
    assert _names_shape(str(err), (2, 3)) and _names_shape(str(err), (2, 4)), str(err)


# ------------------------------------------------------------------------------------------- edge values
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("op", ["var", "std"])
def test_variance_of_a_single_value_is_nan_with_nan_grad(op, device, torch):
    """With correction=1 and one value per group, torch gives nan values and nan gradients (no error)."""
    data = np.array([[1.0], [2.0]], dtype=np.float32)
    x = trainkit.tensor(data, device=device, requires_grad=True)
    xr = torch.tensor(data, requires_grad=True)
    out, ref = getattr(x, op)(1), getattr(xr, op)(1)
    _assert_same_tensor(out, ref, "value")
    out.sum().backward()
    ref.sum().backward()
    _assert_same_tensor(x.grad, xr.grad, "grad")
