"""``trainkit.testing.assert_close`` against ``torch.testing.assert_close``: the same verdict and the same message
on passing and failing pairs (tensors of each dtype, 0-d tensors, numbers, sequences, mappings)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import trainkit
from trainkit.testing import assert_close

nan, inf = math.nan, math.inf

# (actual, expected, keyword arguments): values as nested lists with a dtype name, or Python objects
CASES = [
    ("tensors_equal", ([1.0, 2.0, 3.0], "float32"), ([1.0, 2.0, 3.0], "float32"), {}),
    ("float32_within_default", ([1.0, 2.0], "float32"), ([1.0000001, 2.0], "float32"), {}),
    ("float32_one_off", ([1.0, 2.0, 3.0], "float32"), ([1.0, 2.1, 3.0], "float32"), {}),
    ("float32_2d", ([[1.0, 2.0], [3.0, 4.0]], "float32"), ([[1.0, 2.0], [3.0, 5.0]], "float32"), {}),
    ("float64_default", ([1.0, 2.0], "float64"), ([1.0, 2.0 + 1e-6], "float64"), {}),
    ("float64_tiny", ([1.0, 2.0], "float64"), ([1.0, 2.0 + 1e-9], "float64"), {}),
    ("float16", ([1.0, 2.0], "float16"), ([1.0, 2.01], "float16"), {}),
    ("int64", ([1, 2, 3], "int64"), ([1, 2, 4], "int64"), {}),
    ("int32_thirds", ([1, 2, 4], "int32"), ([1, 2, 3], "int32"), {}),
    ("bool", ([True], "bool"), ([False], "bool"), {}),
    ("nan_not_equal", ([1.0, nan], "float32"), ([1.0, nan], "float32"), {}),
    ("nan_equal", ([1.0, nan], "float32"), ([1.0, nan], "float32"), {"equal_nan": True}),
    ("inf", ([inf, -inf], "float32"), ([inf, -inf], "float32"), {}),
    ("inf_sign", ([inf], "float32"), ([-inf], "float32"), {}),
    ("zero_expected", ([0.0, 1.0], "float32"), ([0.0, 0.0], "float32"), {}),
    ("small_abs", ([1e-6], "float32"), ([0.0], "float32"), {}),
    ("dtype_differs", ([1.0], "float32"), ([1.0], "float64"), {}),
    ("dtype_unchecked", ([1.0, 2.0], "float32"), ([1.0, 2.0], "float64"), {"check_dtype": False}),
    ("dtype_unchecked_fails", ([1.0, 2.0], "float32"), ([1.0, 2.1], "float64"), {"check_dtype": False}),
    ("int_and_float32_unchecked", ([1, 3], "int64"), ([1.0, 2.9], "float32"), {"check_dtype": False}),
    ("bool_and_int_unchecked", ([True, False], "bool"), ([1, 1], "int32"), {"check_dtype": False}),
    ("shape", ([1.0], "float32"), ([1.0, 2.0], "float32"), {}),
    ("shape_2d", (np.zeros((2, 3)).tolist(), "float32"), (np.zeros((3, 2)).tolist(), "float32"), {}),
    ("empty", ([], "float32"), ([], "float32"), {}),
    ("zero_dim", (1.0, "float32"), (1.5, "float32"), {}),
    ("zero_dim_float32_value", (1.1, "float32"), (1.0, "float32"), {}),
    ("custom_tolerance_pass", ([1.0], "float32"), ([1.1], "float32"), {"rtol": 0.2, "atol": 0.0}),
    ("custom_tolerance_fail", ([1.0], "float32"), ([1.5], "float32"), {"rtol": 0.2, "atol": 0.01}),
    ("exact_asked", ([1.0], "float64"), ([1.0 + 1e-12], "float64"), {"rtol": 0.0, "atol": 0.0}),
    ("only_rtol", ([1.0], "float32"), ([1.1], "float32"), {"rtol": 0.2}),
    ("only_atol", ([1.0], "float32"), ([1.1], "float32"), {"atol": 0.2}),
    ("custom_msg", ([1.0], "float32"), ([1.1], "float32"), {"msg": "custom"}),
    ("floats", 1.0, 1.1, {}),
    ("floats_close", 1.0, 1.0 + 1e-9, {}),
    ("ints", 1, 2, {}),
    ("int_and_float", 1.0, 1, {}),
    ("int_and_float_unchecked", 1.0, 1, {"check_dtype": False}),
    ("float_nan", nan, nan, {"equal_nan": True}),
    ("list_of_tensors", [([1.0], "float32")], [([2.0], "float32")], {}),
    ("list_of_ints", [1, 2], [1, 3], {}),
    ("lists_of_different_length", [1, 2], [1], {}),
    ("dict", {"a": ([1.0], "float32")}, {"a": ([2.0], "float32")}, {}),
    ("dict_keys", {"a": 1, "b": 2}, {"a": 1, "c": 2}, {}),
    ("tensor_and_list", ([1.0], "float32"), [1.0], {}),
    ("nested", {"w": [([1.0, 2.0], "float32"), 3]}, {"w": [([1.0, 2.0], "float32"), 4]}, {}),
]


def build(lib, value):
    """The case's objects for one library: ``(values, dtype name)`` pairs become tensors."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        return lib.tensor(value[0], dtype=getattr(lib, value[1]))
    if isinstance(value, list):
        return [build(lib, v) for v in value]
    if isinstance(value, dict):
        return {k: build(lib, v) for k, v in value.items()}
    return value


def outcome(fn, actual, expected, kwargs):
    try:
        fn(actual, expected, **kwargs)
    except (AssertionError, TypeError, ValueError) as err:
        return type(err).__name__, str(err).replace("torch.", "").replace("trainkit.", "").replace("Size", "S")
    return "passed", ""


@pytest.mark.parametrize("actual,expected,kwargs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_verdict_and_message_as_torch(torch, actual, expected, kwargs):
    theirs = outcome(torch.testing.assert_close, build(torch, actual), build(torch, expected), kwargs)
    ours = outcome(assert_close, build(trainkit, actual), build(trainkit, expected), kwargs)
    if "list'>" in theirs[1]:  # the message names the class: torch.Tensor there, trainkit's Tensor here
        theirs = (theirs[0], theirs[1].split(" and ")[-1])
        ours = (ours[0], ours[1].split(" and ")[-1])
    assert ours == theirs


def test_callable_message_gets_pytorchs_message():
    with pytest.raises(AssertionError, match=r"^wrapped: Tensor-likes are not close!"):
        assert_close(trainkit.ones(2), trainkit.zeros(2), msg=lambda text: "wrapped: " + text)


def test_gradients_and_parameters_compare_by_value():
    layer = trainkit.nn.Linear(2, 1)
    assert_close(layer.weight, layer.weight.detach().clone())
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(layer.weight, layer.weight.detach().clone(), allow_subclasses=False)


def test_reachable_as_trainkit_testing():
    assert trainkit.testing.assert_close is assert_close
