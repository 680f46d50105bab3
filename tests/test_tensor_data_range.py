"""trainkit.tensor(data, dtype=an integer dtype) refuses numbers outside the dtype, as torch.tensor does."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit

CASES = [
    (300, "uint8"),
    (-1, "uint8"),
    (-255, "uint8"),
    (-256, "uint8"),
    ([1, 300], "uint8"),
    (300.5, "uint8"),
    (-1.0, "uint8"),
    ([[1, 2], [3, -129]], "int8"),
    ([[1, 2], [3, -128]], "int8"),
    (float("nan"), "int32"),
    (2**31, "int32"),
    (2.0**40, "int64"),
    (True, "uint8"),
    ([], "int16"),
    (1e40, "float32"),
]


@pytest.mark.parametrize("data,dtype", CASES, ids=[f"{d!r}-{t}" for d, t in CASES])
def test_integer_data_outside_the_dtype_is_refused_as_torch(torch, data, dtype):
    def make(lib, device="cpu"):
        return lib.tensor(data, dtype=getattr(lib, dtype), device=device)

    try:
        want = make(torch)
    except RuntimeError:
        assert_same_error(torch, make, "value cannot be converted", "without overflow")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch converts silently (1e40 is inf in float32)
        got = make(trainkit)
    assert str(got.dtype).split(".")[-1] == dtype
    np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def test_the_message_names_the_dtype():
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8 without overflow"):
        trainkit.tensor([0, 256], dtype=trainkit.uint8)
