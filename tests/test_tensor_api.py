"""The Tensor API compared with PyTorch: creation, dtypes, random numbers, attributes and conversions, repr,
comparisons, indexing, a tutorial snippet run unchanged, and device errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, run_both, to_numpy

import trainkit

CUDA = trainkit.cuda.is_available()

# ------------------------------------------------------------------------------------------------------ helpers


def dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def describe(t):
    """What a tensor is, library-neutrally: dtype name, shape, values, requires_grad."""
    return dtype_name(t), tuple(t.shape), to_numpy(t).tolist(), t.requires_grad


# ------------------------------------------------------------------------------------------------------ creation

TENSOR_DATA = {
    "ints": [1, 2, 3],
    "floats": [1.0, 2.5],
    "mixed": [1, 2.5],
    "bools": [True, False, True],
    "nested": [[1.0, 2.0], [3.0, 4.0]],
    "nested_ints": [[1, 2], [3, 4], [5, 6]],
    "int_scalar": 7,
    "float_scalar": 2.5,
    "bool_scalar": True,
    "tuple": (1.0, 2.0),
    "empty": [],
    "np_float64": np.array([1.0, 2.0]),
    "np_float32": np.array([1.0, 2.0], dtype=np.float32),
    "np_int32": np.array([1, 2], dtype=np.int32),
    "np_int64": np.array([[1, 2]], dtype=np.int64),
    "np_uint8": np.array([1, 255], dtype=np.uint8),
    "np_bool": np.array([True, False]),
    "np_float16": np.array([0.5, 1.5], dtype=np.float16),
    "np_scalar_float64": np.float64(3.0),
    "np_0d": np.array(4.0),
}


@pytest.mark.parametrize("case", list(TENSOR_DATA))
def test_tensor_from_data_keeps_dtype_and_values(torch, device, case):
    def snippet(lib, dev):
        return describe(lib.tensor(TENSOR_DATA[case], device=dev))

    got, expected = run_both(torch, snippet, device)
    assert got == expected


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "bool", "float16", "uint8"])
def test_tensor_with_explicit_dtype(torch, dtype):
    def snippet(lib, dev):
        return describe(lib.tensor([0, 1, 2], dtype=getattr(lib, dtype)))

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_tensor_copies_its_data(torch):
    def snippet(lib, dev):
        array = np.array([1.0, 2.0])
        t = lib.tensor(array)
        array[0] = 100.0
        src = lib.tensor([1.0, 2.0])
        u = lib.tensor(src)
        src.add_(5)
        return t.tolist(), u.tolist()

    with pytest.warns(UserWarning):
        expected = snippet(torch, "cpu")
    assert snippet(trainkit, "cpu") == expected


def test_tensor_requires_grad_kwarg(torch):
    def snippet(lib, dev):
        t = lib.tensor([1.0, 2.0], requires_grad=True)
        return t.requires_grad, t.is_leaf, t.grad is None

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_tensor_class_constructor_is_float32(torch):
    def snippet(lib, dev):
        a = lib.Tensor([1, 2])
        b = lib.Tensor(2, 3)
        c = lib.Tensor([[True, False]])
        return describe(a), (dtype_name(b), tuple(b.shape)), describe(c)

    got, expected = run_both(torch, snippet)
    assert got == expected


FILLED = {
    "zeros": lambda lib, dev: lib.zeros(2, 3, device=dev),
    "zeros_tuple": lambda lib, dev: lib.zeros((2, 3), device=dev),
    "zeros_int": lambda lib, dev: lib.zeros(3, dtype=lib.int64, device=dev),
    "ones": lambda lib, dev: lib.ones(4, device=dev),
    "ones_f64": lambda lib, dev: lib.ones(2, 2, dtype=lib.float64, device=dev),
    "ones_grad": lambda lib, dev: lib.ones(2, device=dev, requires_grad=True),
    "full_int": lambda lib, dev: lib.full((2, 2), 3, device=dev),
    "full_float": lambda lib, dev: lib.full((3,), 1.5, device=dev),
    "full_bool": lambda lib, dev: lib.full((2,), True, device=dev),
    "full_dtype": lambda lib, dev: lib.full((2,), 7, dtype=lib.float32, device=dev),
    "eye": lambda lib, dev: lib.eye(3, device=dev),
    "eye_rect": lambda lib, dev: lib.eye(2, 3, device=dev),
    "arange_int": lambda lib, dev: lib.arange(5, device=dev),
    "arange_start_end": lambda lib, dev: lib.arange(2, 7, device=dev),
    "arange_step": lambda lib, dev: lib.arange(0, 10, 3, device=dev),
    "arange_float_step": lambda lib, dev: lib.arange(0, 1, 0.25, device=dev),
    "arange_float_start": lambda lib, dev: lib.arange(1.0, 4, device=dev),
    "arange_dtype": lambda lib, dev: lib.arange(4, dtype=lib.float64, device=dev),
    "linspace": lambda lib, dev: lib.linspace(0, 1, 5, device=dev),
    "linspace_neg": lambda lib, dev: lib.linspace(-2.0, 2.0, steps=3, device=dev),
    "zeros_like_int": lambda lib, dev: lib.zeros_like(lib.tensor([1, 2, 3], device=dev)),
    "ones_like_float": lambda lib, dev: lib.ones_like(lib.zeros(2, 2, device=dev)),
    "ones_like_dtype": lambda lib, dev: lib.ones_like(lib.zeros(2, device=dev), dtype=lib.int32),
    "full_like": lambda lib, dev: lib.full_like(lib.zeros(3, device=dev), 2.5),
}


@pytest.mark.parametrize("case", list(FILLED))
def test_filled_and_range_creation(torch, device, case):
    def snippet(lib, dev):
        return describe(FILLED[case](lib, dev))

    got, expected = run_both(torch, snippet, device)
    assert got[:2] == expected[:2]
    np.testing.assert_allclose(np.array(got[2], dtype=float), np.array(expected[2], dtype=float), rtol=1e-6)
    assert got[3] == expected[3]


@pytest.mark.parametrize("make", ["empty", "empty_like"])
def test_empty_shape_and_dtype(torch, make):
    def snippet(lib, dev):
        t = lib.empty(2, 3) if make == "empty" else lib.empty_like(lib.zeros(4, dtype=lib.int32))
        return dtype_name(t), tuple(t.shape)

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("make", ["randn_like", "rand_like"])
def test_random_like_shape_and_dtype(torch, make):
    def snippet(lib, dev):
        base = lib.zeros(3, 2, dtype=lib.float64)
        t = getattr(lib, make)(base)
        return dtype_name(t), tuple(t.shape), t.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_from_numpy_shares_memory(torch):
    def snippet(lib, dev):
        array = np.array([1.0, 2.0, 3.0])
        t = lib.from_numpy(array)
        array[0] = 10.0
        t[1] = 20.0
        ints = lib.from_numpy(np.array([1, 2], dtype=np.int32))
        return t.tolist(), array.tolist(), dtype_name(t), dtype_name(ints), np.shares_memory(t.numpy(), array)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_numpy_shares_memory_with_tensor(torch):
    def snippet(lib, dev):
        t = lib.tensor([1.0, 2.0])
        array = t.numpy()
        array[1] = 5.0
        t.add_(1)
        return t.tolist(), array.tolist(), array.dtype.name

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_as_tensor_shares_numpy_memory(torch):
    def snippet(lib, dev):
        array = np.array([1.0, 2.0])
        t = lib.as_tensor(array)
        array[0] = 9.0
        return t.tolist(), dtype_name(t)

    got, expected = run_both(torch, snippet)
    assert got == expected


# -------------------------------------------------------------------------------------------------------- dtypes


def test_default_dtype_is_float32(torch):
    def snippet(lib, dev):
        d = lib.get_default_dtype()
        return repr(d).split(".")[-1], d is lib.float32, d == lib.float

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize(
    "name",
    [
        "float16",
        "float32",
        "float64",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "bool",
        "half",
        "float",
        "double",
        "long",
        "int",
        "short",
    ],
)
def test_dtype_objects(torch, name):
    def snippet(lib, dev):
        d = getattr(lib, name)
        return repr(d).replace(lib.__name__, "LIB"), d.is_floating_point, d.itemsize

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_set_default_dtype_changes_float_creation(torch):
    def snippet(lib, dev):
        previous = lib.get_default_dtype()
        try:
            lib.set_default_dtype(lib.float64)
            made = [lib.tensor([1.0]), lib.zeros(2), lib.Tensor([1]), lib.arange(0.0, 1.0, 0.5), lib.tensor([1])]
            return [dtype_name(t) for t in made], dtype_name(lib.tensor([1.0]) * 2.5)
        finally:
            lib.set_default_dtype(previous)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert trainkit.get_default_dtype() is trainkit.float32


def test_is_floating_point(torch):
    def snippet(lib, dev):
        return [lib.is_floating_point(t) for t in (lib.zeros(1), lib.tensor([1]), lib.tensor([True]))]

    got, expected = run_both(torch, snippet)
    assert got == expected


# -------------------------------------------------------------------------------------------------------- random


RANDOM = {
    "rand": lambda lib: lib.rand(2, 3),
    "rand_tuple": lambda lib: lib.rand((4,)),
    "rand_f64": lambda lib: lib.rand(3, dtype=lib.float64),
    "randn": lambda lib: lib.randn(3, 2),
    "randn_grad": lambda lib: lib.randn(2, requires_grad=True),
    "randint_high": lambda lib: lib.randint(10, (3, 4)),
    "randint_low_high": lambda lib: lib.randint(5, 8, (6,)),
    "randint_dtype": lambda lib: lib.randint(0, 3, (2,), dtype=lib.int32),
    "randperm": lambda lib: lib.randperm(5),
}


@pytest.mark.parametrize("case", list(RANDOM))
def test_random_shapes_and_dtypes(torch, case):
    def snippet(lib, dev):
        t = RANDOM[case](lib)
        return dtype_name(t), tuple(t.shape), t.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_random_value_ranges():
    trainkit.manual_seed(1)
    u = to_numpy(trainkit.rand(10_000))
    assert u.min() >= 0.0 and u.max() < 1.0
    n = to_numpy(trainkit.randn(10_000))
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05
    i = to_numpy(trainkit.randint(5, 8, (1000,)))
    assert set(i.tolist()) == {5, 6, 7}
    assert sorted(to_numpy(trainkit.randperm(6)).tolist()) == list(range(6))


def test_manual_seed_reproducibility(torch):
    def snippet(lib, dev):
        lib.manual_seed(123)
        a = to_numpy(lib.randn(5))
        a_int = to_numpy(lib.randint(0, 1000, (5,)))
        lib.manual_seed(123)
        b = to_numpy(lib.randn(5))
        b_int = to_numpy(lib.randint(0, 1000, (5,)))
        lib.manual_seed(124)
        c = to_numpy(lib.randn(5))
        d = to_numpy(lib.randn(5))
        return bool((a == b).all()), bool((a_int == b_int).all()), bool((a == c).all()), bool((c == d).all())

    got, expected = run_both(torch, snippet)
    assert got == expected == (True, True, False, False)


def test_generator_objects_are_reproducible(torch):
    def snippet(lib, dev):
        g1 = lib.Generator().manual_seed(7)
        g2 = lib.Generator().manual_seed(7)
        a = to_numpy(lib.rand(4, generator=g1))
        b = to_numpy(lib.rand(4, generator=g2))
        return bool((a == b).all()), g1.initial_seed()

    got, expected = run_both(torch, snippet)
    assert got == expected


# ----------------------------------------------------------------------------------- attributes and conversions


def test_shape_size_dim_numel(torch):
    def snippet(lib, dev):
        t = lib.zeros(2, 3, 4)
        return (
            tuple(t.shape),
            repr(t.shape).replace(lib.__name__, "LIB"),
            t.size(),
            t.size(1),
            t.size(-1),
            t.dim(),
            t.ndim,
            t.numel(),
            lib.numel(t),
            len(t),
            t.shape == (2, 3, 4),
            isinstance(t.shape, tuple),
            t.shape[1:],
            t.size() == t.shape,
        )

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_size_out_of_range_raises(torch):
    def snippet(lib, dev):
        lib.zeros(2, 3).size(2)

    assert_same_error(torch, snippet, "Dimension out of range")


def test_transpose_property(torch):
    def snippet(lib, dev):
        m = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        return describe(m.T), describe(m.t()), describe(m.T.T)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_item_tolist_numpy(torch):
    def snippet(lib, dev):
        f = lib.tensor(2.5)
        i = lib.tensor([7])
        b = lib.tensor(True)
        m = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        items = [f.item(), i.item(), b.item(), (m.sum()).item()]
        types = [type(v).__name__ for v in items]
        array = m.numpy()
        return items, types, m.tolist(), lib.tensor([1, 2]).tolist(), f.tolist(), array.dtype.name, array.shape

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_item_of_many_elements_raises(torch):
    def snippet(lib, dev):
        lib.tensor([1.0, 2.0]).item()

    assert_same_error(torch, snippet, "cannot be converted to Scalar")


@pytest.mark.parametrize(
    "convert",
    [
        lambda lib, t: t.to(lib.float64),
        lambda lib, t: t.to(dtype=lib.int32),
        lambda lib, t: t.float(),
        lambda lib, t: t.double(),
        lambda lib, t: t.long(),
        lambda lib, t: t.int(),
        lambda lib, t: t.bool(),
        lambda lib, t: t.half(),
        lambda lib, t: t.cpu(),
        lambda lib, t: t.to("cpu"),
        lambda lib, t: t.type_as(lib.tensor([1])),
    ],
    ids=["to_f64", "to_kw_int32", "float", "double", "long", "int", "bool", "half", "cpu", "to_cpu", "type_as"],
)
def test_conversions(torch, convert):
    def snippet(lib, dev):
        t = lib.tensor([[1.5, -2.0], [0.0, 3.25]])
        out = convert(lib, t)
        return describe(out), out is t, str(out.device)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_to_same_dtype_returns_self_and_conversion_keeps_graph(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        same = x.to(lib.float32) is x and x.float() is x and x.cpu() is x
        y = x.double()
        (y * y).sum().backward()
        return same, dtype_name(y), y.requires_grad, dtype_name(x.grad), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_python_number_conversions(torch):
    def snippet(lib, dev):
        t = lib.tensor([2.75])
        return float(t), int(t), bool(lib.tensor(0.0)), bool(lib.tensor([3]))

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_device_and_is_cuda(torch):
    def snippet(lib, dev):
        t = lib.zeros(2)
        d = lib.device("cpu")
        return str(t.device), t.device.type, t.is_cuda, t.device == d, repr(d), str(lib.device("cuda:1"))

    got, expected = run_both(torch, snippet)
    assert got == expected


# ---------------------------------------------------------------------------------------------------------- repr

REPR_CASES = {
    "whole_floats": lambda lib: lib.tensor([1.0, 2.0]),
    "fractions": lambda lib: lib.tensor([1.5, 2.25]),
    "negative": lambda lib: lib.tensor([-1.0, 0.5]),
    "scalar": lambda lib: lib.tensor(3.5),
    "whole_scalar": lambda lib: lib.tensor(2.0),
    "requires_grad": lambda lib: lib.tensor([1.0, 2.0], requires_grad=True),
    "grad_fn": lambda lib: lib.tensor([1.0, 2.0], requires_grad=True) * 2,
    "ints": lambda lib: lib.tensor([1, 2, 3]),
    "int_scalar": lambda lib: lib.tensor(5),
    "int32": lambda lib: lib.tensor([1, 2], dtype=lib.int32),
    "float64": lambda lib: lib.tensor([1.0, 2.0], dtype=lib.float64),
    "bools": lambda lib: lib.tensor([True, False]),
    "matrix": lambda lib: lib.tensor([[1.0, 2.0], [3.0, 4.0]]),
    "zeros": lambda lib: lib.zeros(3),
}


@pytest.mark.parametrize("case", list(REPR_CASES))
def test_repr_matches_torch(torch, case):
    got = repr(REPR_CASES[case](trainkit))
    expected = repr(REPR_CASES[case](torch)).replace("torch", "trainkit")
    assert got == expected


# ------------------------------------------------------------------------------------------- comparisons, bools


@pytest.mark.parametrize(
    "compare",
    [
        lambda lib, a, b: a > b,
        lambda lib, a, b: a >= 2,
        lambda lib, a, b: a < b,
        lambda lib, a, b: a <= b,
        lambda lib, a, b: a == b,
        lambda lib, a, b: a != 3,
        lambda lib, a, b: lib.eq(a, b),
        lambda lib, a, b: a.gt(b),
        lambda lib, a, b: (a > 1) & (b < 5),
        lambda lib, a, b: (a > 1) | (b < 2),
        lambda lib, a, b: ~(a > 1),
        lambda lib, a, b: lib.logical_not(a == b),
        lambda lib, a, b: lib.isnan(a / (a - a)),
    ],
    ids=[
        "gt",
        "ge_scalar",
        "lt",
        "le",
        "eq",
        "ne_scalar",
        "torch_eq",
        "gt_method",
        "and",
        "or",
        "invert",
        "not",
        "isnan",
    ],
)
def test_comparisons_give_bool_tensors(torch, compare):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0, 3.0, 0.0])
        b = lib.tensor([3.0, 2.0, 1.0, 0.0])
        with np.errstate(invalid="ignore", divide="ignore"):
            return describe(compare(lib, a, b))

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_comparison_of_grad_tensor_does_not_require_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        return describe(x > 1), (x == x).grad_fn is None

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_bool_tensor_arithmetic(torch):
    def snippet(lib, dev):
        mask = lib.tensor([1.0, -2.0, 3.0]) > 0
        as_float = mask.float()
        return describe(mask.sum()), describe(as_float), describe(mask * 2), describe(mask * 1.5)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_all_and_any(torch):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0])
        return bool((a == a).all()), bool((a > 1).any()), bool((a > 5).any()), describe((a > 1).all())

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_equal_and_allclose(torch):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0])
        return lib.equal(a, a.clone()), lib.equal(a, a + 1), lib.allclose(a, a + 1e-9), lib.allclose(a, a + 1)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_ambiguous_bool_raises(torch):
    def snippet(lib, dev):
        bool(lib.tensor([1.0, 2.0]) > 0)

    assert_same_error(torch, snippet, "Boolean value of Tensor with", "ambiguous")


# -------------------------------------------------------------------------------------------------------- indexing

GETITEM = {
    "int": lambda lib, t: t[1],
    "negative_int": lambda lib, t: t[-1],
    "slice": lambda lib, t: t[1:],
    "step_slice": lambda lib, t: t[::2],
    "two_ints": lambda lib, t: t[1, 2],
    "int_and_slice": lambda lib, t: t[:, 1],
    "ellipsis": lambda lib, t: t[..., 0],
    "none": lambda lib, t: t[None, 0],
    "int_list": lambda lib, t: t[[0, 2, 0]],
    "int_tensor": lambda lib, t: t[lib.tensor([2, 1])],
    "int_tensor_2d": lambda lib, t: t[lib.tensor([[0], [2]])],
    "two_int_arrays": lambda lib, t: t[[0, 1], [3, 2]],
    "array_and_slice": lambda lib, t: t[[2, 0], 1:3],
    "bool_mask": lambda lib, t: t[t > 5],
    "bool_row_mask": lambda lib, t: t[lib.tensor([True, False, True])],
    "bool_list": lambda lib, t: t[[True, False, True]],
    "numpy_index": lambda lib, t: t[np.array([1, 0])],
    "tensor_scalar_index": lambda lib, t: t[lib.tensor(1)],
}


@pytest.mark.parametrize("case", list(GETITEM))
def test_getitem_values(torch, device, case):
    def snippet(lib, dev):
        t = lib.arange(12, device=dev).reshape(3, 4).float()
        return describe(GETITEM[case](lib, t))

    got, expected = run_both(torch, snippet, device)
    assert got == expected


@pytest.mark.parametrize("case", list(GETITEM))
def test_getitem_gradients(torch, case):
    def snippet(lib, dev):
        x = lib.arange(12).reshape(3, 4).float().requires_grad_()
        out = GETITEM[case](lib, x)
        weights = lib.arange(out.numel()).reshape(out.shape).float() + 1
        (out * weights).sum().backward()
        return x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_basic_index_is_a_view(torch):
    def snippet(lib, dev):
        t = lib.zeros(3, 4)
        row = t[1]
        row[2] = 5.0
        part = t[:, 0]
        part.fill_(1.0)
        copy = t[[0, 1]]
        copy.fill_(9.0)
        return t.tolist(), t._version

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_integer_index_of_vector_is_a_view(torch):
    def snippet(lib, dev):
        t = lib.zeros(3)
        element = t[1]
        element.fill_(5.0)
        t[2].add_(7.0)
        return t.tolist(), t._version, element._version, element.dim()

    got, expected = run_both(torch, snippet)
    assert got == expected


SETITEM = {
    "int": lambda lib, t: t.__setitem__(0, 7.0),
    "row_tensor": lambda lib, t: t.__setitem__(1, lib.tensor([1.0, 2.0, 3.0, 4.0])),
    "broadcast_row": lambda lib, t: t.__setitem__(slice(None), lib.tensor([1.0, 2.0, 3.0, 4.0])),
    "slice_scalar": lambda lib, t: t.__setitem__((slice(None), slice(1, 3)), -1.0),
    "int_list": lambda lib, t: t.__setitem__([0, 2], 5.0),
    "int_pairs": lambda lib, t: t.__setitem__(([0, 1], [3, 2]), lib.tensor([10.0, 20.0])),
    "bool_mask": lambda lib, t: t.__setitem__(t > 5, 0.0),
    "bool_mask_values": lambda lib, t: t.__setitem__(t < 3, lib.tensor([7.0, 8.0, 9.0])),
    "bool_rows": lambda lib, t: t.__setitem__(lib.tensor([False, True, True]), 4.0),
    "ellipsis": lambda lib, t: t.__setitem__((Ellipsis, 0), 3.0),
}


@pytest.mark.parametrize("case", list(SETITEM))
def test_setitem_values(torch, device, case):
    def snippet(lib, dev):
        t = lib.arange(12).reshape(3, 4).float()
        SETITEM[case](lib, t)
        return describe(t), t._version

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("case", list(SETITEM))
def test_setitem_gradients(torch, case):
    def snippet(lib, dev):
        x = lib.arange(12).reshape(3, 4).float().requires_grad_()
        t = x * 1
        SETITEM[case](lib, t)
        (t * (lib.arange(12).reshape(3, 4).float() + 1)).sum().backward()
        return x.grad.tolist(), t.tolist() if not t.requires_grad else t.detach().tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_index_out_of_range_raises(torch):
    def snippet(lib, dev):
        lib.zeros(3)[5]

    assert_same_error(torch, snippet, "out of")


# ------------------------------------------------------------------------------------------- tutorial, unchanged

TUTORIAL = """
{import_line}

x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w) + b
loss = ((z - y) ** 2).mean()
grad_fn_names = (z.grad_fn.name(), loss.grad_fn.name())
loss.backward()
w_grad = w.grad.clone()
b_grad = b.grad.clone()

z = torch.matmul(x, w) + b
requires_before = z.requires_grad
with torch.no_grad():
    z = torch.matmul(x, w) + b
requires_in_no_grad = z.requires_grad
z = torch.matmul(x, w) + b
z_det = z.detach()
requires_detached = z_det.requires_grad

inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
first_call = inp.grad.clone()
out.backward(torch.ones_like(out), retain_graph=True)
second_call = inp.grad.clone()
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
call_after_zeroing = inp.grad.clone()

a = torch.tensor([2., 3.], requires_grad=True)
c = torch.tensor([6., 4.], requires_grad=True)
Q = 3 * a ** 3 - c ** 2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)
check_a = (9 * a ** 2 == a.grad).tolist()
check_c = (-2 * c == c.grad).tolist()
"""


def _run_tutorial(import_line: str) -> dict:
    namespace: dict = {}
    exec(TUTORIAL.format(import_line=import_line), namespace)
    return namespace


def test_autograd_tutorial_runs_unchanged(torch):
    got = _run_tutorial("import trainkit as torch")
    expected = _run_tutorial("import torch")
    for name in ("grad_fn_names", "requires_before", "requires_in_no_grad", "requires_detached", "check_a", "check_c"):
        assert got[name] == expected[name], name
    assert got["check_a"] == [True, True]
    for name in ("first_call", "second_call", "call_after_zeroing"):
        np.testing.assert_allclose(to_numpy(got[name]), to_numpy(expected[name]), err_msg=name)
    w = to_numpy(got["w"])
    b = to_numpy(got["b"])
    z = np.ones(5, dtype=np.float32) @ w + b
    np.testing.assert_allclose(to_numpy(got["w_grad"]), np.outer(np.ones(5), 2 * z / 3), rtol=1e-5)
    np.testing.assert_allclose(to_numpy(got["b_grad"]), 2 * z / 3, rtol=1e-5)
    assert dtype_name(got["w_grad"]) == dtype_name(expected["w_grad"]) == "float32"


# -------------------------------------------------------------------------------------------------------- devices


@pytest.mark.skipif(CUDA, reason="a GPU is usable here")
@pytest.mark.parametrize(
    "ask",
    [
        lambda: trainkit.zeros(2, device="cuda"),
        lambda: trainkit.tensor([1.0], device="cuda:0"),
        lambda: trainkit.ones(2).cuda(),
        lambda: trainkit.ones(2).to("cuda"),
        lambda: trainkit.randn(3, device=trainkit.device("cuda")),
    ],
    ids=["zeros", "tensor", "cuda_method", "to", "randn"],
)
def test_cuda_without_gpu_raises_saying_what_is_missing(ask):
    with pytest.raises(RuntimeError) as info:
        ask()
    message = str(info.value)
    assert "CuPy" in message or "GPU" in message
    assert trainkit.cuda.is_available() is False
    assert trainkit.cuda.device_count() == 0


@pytest.mark.skipif(not CUDA, reason="needs a usable GPU")
@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: b * a,
        lambda a, b: a @ b,
        lambda a, b: trainkit.cat([a, b]),
        lambda a, b: a.add_(b),
        lambda a, b: a.__setitem__(0, b[0]),
    ],
    ids=["add", "mul", "matmul", "cat", "add_", "setitem"],
)
def test_mixing_devices_raises_naming_both(op):
    a = trainkit.ones(2, device="cuda")
    b = trainkit.ones(2)
    with pytest.raises(RuntimeError) as info:
        op(a, b)
    message = str(info.value)
    assert "cuda:0" in message and "cpu" in message
    assert "device" in message


@pytest.mark.skipif(not CUDA, reason="needs a usable GPU")
def test_gpu_round_trip_keeps_values_and_grads(torch):
    x = trainkit.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert str(y.device) == "cuda:0" and y.is_cuda
    (y * y).sum().backward()
    tx = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (tx * tx).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(tx.grad))
    assert str(x.grad.device) == "cpu"
    back = y.cpu()
    assert str(back.device) == "cpu" and back.grad_fn.name() == "ToCopyBackward0"


_OVERFLOWS = [(v, d) for v in (float("-inf"), float("nan"), 2.0**70, -1e300) for d in ("int64", "int32", "uint8")]


@pytest.mark.parametrize("value,dtype", _OVERFLOWS + [(256, "uint8"), (-256, "uint8"), (-0.5, "uint8"), (-129, "int8")])
def test_full_refuses_a_value_its_integer_dtype_cannot_hold_as_torch(torch, value, dtype):
    assert_same_error(torch, lambda L, dev: L.full((2, 2), value, dtype=getattr(L, dtype)), "without overflow")


def test_full_truncates_a_fraction_wraps_negative_integers_into_uint8_and_fills_bool_with_any_number(torch):
    for lib in (trainkit, torch):
        assert lib.full((2,), 3.7, dtype=lib.int64).tolist() == [3, 3]
        assert lib.full((2,), float("nan"), dtype=lib.bool).tolist() == [True, True]
        assert lib.full((2,), -1, dtype=lib.uint8).tolist() == [255, 255]
        assert lib.full((1,), -255, dtype=lib.uint8).tolist() == [1]


def test_pin_memory_as_torch(torch):
    """A copy for transfers to a GPU where one answers; torch's error without one."""
    if trainkit.cuda.is_available():
        x = trainkit.ones(3)
        pinned = x.pin_memory()
        assert pinned is not x and pinned.device.type == "cpu" and pinned.tolist() == [1.0, 1.0, 1.0]
        assert pinned.to("cuda", non_blocking=True).device.type == "cuda"
    elif not torch.cuda.is_available():
        assert_same_error(torch, lambda lib, dev: lib.ones(3).pin_memory(), "accelerator")
