"""In-place ops, ``x[i] = v``, ``copy_``, ``fill_`` and ``contiguous`` against PyTorch at their edges: writing into
an expanded tensor, the order of PyTorch's checks (overlap, output shape, result dtype, then the kernel's dtypes),
dtype rules of index assignment, integer destinations and the graph, node names, and gradients of in-place ops
whose other operand is wider than the tensor written into."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit

DATA = [[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]]


def outcome(lib, fn):
    """What ``fn(lib)`` gives: the exception class name, or per result (shape, dtype, requires_grad, node, values)."""
    try:
        out = fn(lib)
    except Exception as err:  # the class is what is compared
        return type(err).__name__
    results = out if isinstance(out, tuple) else (out,)
    summary = []
    for t in results:
        if t is None:  # a gradient that was never computed
            summary.append((None,) * 4 + (np.zeros(0),))
            continue
        node = t.grad_fn.name() if t.grad_fn is not None else None
        node = node.rpartition("::")[2] if node else None
        summary.append(
            (
                tuple(t.shape),
                str(t.dtype).rpartition(".")[2],
                t.requires_grad,
                node,
                np.asarray(t.detach().tolist(), dtype=np.float64),
            )
        )
    return summary


def same(torch, fn):
    ours, theirs = outcome(trainkit, fn), outcome(torch, fn)
    if isinstance(ours, str) or isinstance(theirs, str):
        assert ours == theirs
        return
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a[:4] == b[:4]
        np.testing.assert_allclose(a[4], b[4], rtol=1e-5, atol=1e-6, equal_nan=True)


def expanded(lib, dtype="float32"):
    return lib.tensor([[0.5, -0.25, 0.75, 0.1]], dtype=getattr(lib, dtype)).expand(3, 4)


# --- writing into an expanded tensor ------------------------------------------------------------------------

UNARY = [
    "acos_",
    "asin_",
    "atan_",
    "cos_",
    "exp_",
    "exp2_",
    "expm1_",
    "log_",
    "log1p_",
    "log2_",
    "log10_",
    "neg_",
    "rsqrt_",
    "sign_",
    "sqrt_",
    "tan_",
    "tanh_",
    "trunc_",
    "ceil_",
    "floor_",
    "frac_",
    "reciprocal_",
    "round_",
    "sin_",
    "sinh_",
    "square_",
    "erf_",
    "relu_",
    "logical_not_",
    "bitwise_not_",
    "sigmoid_",
    "abs_",
]


@pytest.mark.parametrize("name", UNARY)
def test_unary_inplace_on_expanded_raises_runtime_error(torch, name):
    same(torch, lambda lib: getattr(expanded(lib), name)())


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3), (3, 0, 2)])
@pytest.mark.parametrize("name", ["relu_", "exp_", "neg_", "sigmoid_"])
def test_unary_inplace_on_empty_tensors_in_a_graph(torch, name, shape):
    """An empty tensor has no elements to share memory, whatever strides its axes have: no overlap error."""

    def run(lib):
        x = lib.zeros(*shape, requires_grad=True)
        y = getattr(x.clone(), name)()
        y.sum().backward()
        return [tuple(y.shape), y.grad_fn.name(), tuple(x.grad.shape)]

    assert run(trainkit) == run(torch)


@pytest.mark.parametrize(
    "name",
    [
        "clamp_min_",
        "clamp_max_",
        "fmod_",
        "remainder_",
        "pow_",
        "floor_divide_",
        "bitwise_and_",
        "bitwise_or_",
        "bitwise_xor_",
        "add_",
        "mul_",
        "atan2_",
    ],
)
def test_binary_inplace_on_expanded_checks_overlap_first(torch, name):
    same(torch, lambda lib: getattr(expanded(lib), name)(1.0))


def test_fill_and_zero_write_through_an_expanded_tensor(torch):
    def fill(lib):
        base = lib.zeros(1, 4)
        x = base.expand(3, 4)
        x.fill_(1.5)
        return x, base

    def zero(lib):
        base = lib.ones(1, 4)
        base.expand(3, 4).zero_()
        return base

    same(torch, fill)
    same(torch, zero)
    same(torch, lambda lib: lib.zeros(1, 4).expand(3, 4).fill_(lib.tensor(2.0)))
    same(torch, lambda lib: lib.zeros(1, 4).expand(3, 4).copy_(lib.ones(3, 4)))


@pytest.mark.parametrize("index", [0, (0, 1), (slice(0, 2),), (slice(None), 0), 2, -1])
def test_setitem_on_expanded_writes_through_when_the_region_does_not_overlap(torch, index):
    def run(lib):
        base = lib.zeros(1, 4)
        x = base.expand(3, 4)
        x[index] = 2.5
        return x, base

    same(torch, run)


# --- the order of PyTorch's checks in binary in-place ops ---------------------------------------------------


@pytest.mark.parametrize("name", ["bitwise_and_", "bitwise_or_", "bitwise_xor_"])
@pytest.mark.parametrize("case", ["shape", "result type", "kernel", "int tensor", "int 0-d f64"])
def test_bitwise_inplace_error_order(torch, name, case):
    def run(lib):
        if case == "shape":  # the output shape is checked before the float dtype
            return getattr(lib.ones(3), name)(lib.ones(2, 3))
        if case == "result type":
            return getattr(lib.ones(2, 3, dtype=lib.int64), name)(2.5)
        if case == "kernel":
            return getattr(lib.ones(2, 3), name)(lib.ones(2, 3))
        if case == "int tensor":
            return getattr(lib.ones(2, 3, dtype=lib.int64), name)(lib.ones(2, 3))
        return getattr(lib.ones(2, 3, dtype=lib.int64), name)(lib.tensor(1.0, dtype=lib.float64))

    same(torch, run)


def test_kernel_dtype_errors_still_come_from_the_kernel(torch):
    same(torch, lambda lib: lib.ones(2, 3, dtype=lib.int64).lerp_(lib.ones(2, 3, dtype=lib.int64), 0.5))
    same(torch, lambda lib: lib.ones(2, 3, dtype=lib.int64).atan2_(2.5))
    same(torch, lambda lib: lib.ones(2, 3, dtype=lib.int64).bitwise_and_(3))


@pytest.mark.parametrize("name", ["sigmoid_", "tanh_", "exp_", "log_", "sqrt_", "relu_"])
@pytest.mark.parametrize("dtype", ["bool", "int64"])
def test_float_unary_inplace_on_integers_raises_runtime_error(torch, name, dtype):
    same(torch, lambda lib: getattr(lib.tensor([[1, 2, 3]], dtype=getattr(lib, dtype)), name)())


# --- x[i] = v -------------------------------------------------------------------------------------------------


def _mask(lib, rows=(True, False, True, False)):
    return lib.tensor(list(rows))


INDEXES = {
    "int": lambda lib: 0,
    "slice": lambda lib: slice(1, 3),
    "column": lambda lib: (slice(None), 1),
    "mask": _mask,
    "list": lambda lib: [0, 2],
    "int and list": lambda lib: (0, [1, 2]),
    "ellipsis": lambda lib: Ellipsis,
    "2-d mask": lambda lib: lib.tensor([[True, False, True, False, True]] * 2 + [[False] * 5] * 2),
    "step, new axis, int": lambda lib: (slice(None, None, 2), None, 0),
}
VALUES = {
    "number": lambda lib: 1.5,
    "0-d f32 rg": lambda lib: lib.tensor(2.0, requires_grad=True),
    "0-d f64": lambda lib: lib.tensor(2.0, dtype=lib.float64),
    "0-d i64": lambda lib: lib.tensor(3),
    "f32[6] rg": lambda lib: lib.linspace(-1, 1, 6, requires_grad=True),
    "i64[6]": lambda lib: lib.arange(6),
    "f64[5,6]": lambda lib: lib.ones(5, 6, dtype=lib.float64),
    "f32[2,6] rg": lambda lib: lib.ones(2, 6, requires_grad=True),
}


@pytest.mark.parametrize("dest", ["float32 rg", "int64", "float32"])
@pytest.mark.parametrize("index", list(INDEXES))
@pytest.mark.parametrize("value", list(VALUES))
def test_setitem_matches_torch(torch, dest, index, value):
    def run(lib):
        if dest == "int64":
            x = lib.tensor(np.arange(120).reshape(4, 5, 6))
        else:
            x = lib.tensor(np.linspace(-3, 3, 120, dtype=np.float32).reshape(4, 5, 6))
            if dest == "float32 rg":
                x = x.requires_grad_().clone()
        v = VALUES[value](lib)
        x[INDEXES[index](lib)] = v
        return x

    same(torch, run)


@pytest.mark.parametrize("index", [Ellipsis, slice(None), (), (Ellipsis, slice(None))])
@pytest.mark.parametrize("value", ["number", "0-d f32", "0-d f64", "f32[6]"])
def test_whole_tensor_assignment_is_a_fill_or_a_copy_with_torchs_gradients(torch, index, value):
    def run(lib):
        leaf = lib.linspace(-1, 1, 24, requires_grad=True)
        x = leaf.reshape(4, 6) * 2
        v = {
            "number": 1.5,
            "0-d f32": lib.tensor(2.0, requires_grad=True),
            "0-d f64": lib.tensor(2.0, dtype=lib.float64, requires_grad=True),
            "f32[6]": lib.linspace(0, 1, 6, requires_grad=True),
        }[value]
        x[index] = v
        node = x.grad_fn.name().rpartition("::")[2]
        (x * lib.arange(24.0).reshape(4, 6)).sum().backward()
        grads = [leaf.grad] + ([v.grad] if isinstance(v, lib.Tensor) else [])
        return node, [(str(g.dtype), g.tolist()) for g in grads]

    assert run(trainkit)[0] == run(torch)[0]
    ours, theirs = run(trainkit)[1], run(torch)[1]
    assert [d.rpartition(".")[2] for d, _ in ours] == [d.rpartition(".")[2] for d, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_setitem_error_messages_say_what_went_wrong():
    x = trainkit.zeros(4, 5, 6)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        x[[0, 2]] = trainkit.ones(6, dtype=trainkit.int64)
    with pytest.raises(RuntimeError, match="cannot be broadcast to indexing result of shape"):
        x[[0, 2]] = trainkit.ones(3, 6)
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor \(4\) must match the existing size \(5\)"):
        x[:, 1] = trainkit.ones(5, 6)


# --- copy_, fill_ and integer destinations ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_integer_destination_of_a_copy_stays_out_of_the_graph(torch, dtype):
    same(
        torch,
        lambda lib: lib.zeros(2, 3, dtype=getattr(lib, dtype)).copy_(
            lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        ),
    )
    same(torch, lambda lib: lib.zeros(2, 3, dtype=getattr(lib, dtype)).fill_(lib.tensor(1.0, requires_grad=True)))
    same(torch, lambda lib: lib.zeros(2, 3, dtype=getattr(lib, dtype)).fill_(lib.ones(2, requires_grad=True)))


# --- contiguous -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "step-sliced", "expanded"])
def test_contiguous_copies_a_non_contiguous_tensor_as_clone(torch, layout):
    def run(lib):
        leaf = lib.linspace(-1, 1, 24, requires_grad=True)
        x = leaf.reshape(2, 3, 4)
        x = {
            "contiguous": x,
            "transposed": x.transpose(-1, -2),
            "step-sliced": x[..., ::2],
            "expanded": x[:1].expand(3, 3, 4),
        }[layout]
        y = x.contiguous()
        assert (y is x) == (layout == "contiguous") and y.is_contiguous()
        (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
        return y, leaf.grad

    same(torch, run)


# --- gradients of in-place ops computed in a wider dtype --------------------------------------------------------

WIDER = {
    "addcdiv_": lambda x, y, z: x.addcdiv_(y, z),
    "addcmul_": lambda x, y, z: x.addcmul_(y, z),
    "fmod_": lambda x, y, z: x.fmod_(y),
    "remainder_": lambda x, y, z: x.remainder_(y),
    "atan2_": lambda x, y, z: x.atan2_(y),
    "pow_": lambda x, y, z: x.pow_(y),
    "clamp_min_": lambda x, y, z: x.clamp_min_(y),
    "clamp_max_": lambda x, y, z: x.clamp_max_(y),
    "add_": lambda x, y, z: x.add_(y),
    "mul_": lambda x, y, z: x.mul_(y),
}


@pytest.mark.parametrize("name", list(WIDER))
def test_inplace_with_a_wider_operand_gives_its_grad_in_its_own_dtype(torch, name):
    def run(lib):
        x = lib.tensor(DATA, requires_grad=True)
        y = lib.tensor([[1.5, 2.0, 0.75], [3.0, 1.25, 2.5]], dtype=lib.float64, requires_grad=True)
        z = lib.tensor([[2.0, -1.0, 0.5], [1.5, 4.0, -2.0]], requires_grad=True)
        out = WIDER[name](lib.abs(x.clone()) + 0.5, y, z)
        out.backward(lib.tensor([[1.0, -2.0, 0.5], [0.25, 1.0, 3.0]]))
        return out, x.grad, y.grad, z.grad

    same(torch, run)


@pytest.mark.parametrize("call", ["clamp_min_", "clamp_max_", "clamp_", "clamp_min", "clamp", "clamp_max"])
@pytest.mark.parametrize("bound", [True, 1, -0.5])
def test_clamping_bools_to_a_number(torch, call, bound):
    same(torch, lambda lib: getattr(lib.tensor([True, False]), call)(bound))
