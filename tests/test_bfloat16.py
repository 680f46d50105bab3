"""bfloat16 as a dtype: its name and limits, creation and conversion, PyTorch's type promotion, and the results of
the common ops, compared with torch (values at bfloat16's tolerance)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit.autograd.backend import BFLOAT16_NP, promote_types, result_type

BF16_TOL = {"rtol": 1.6e-2, "atol": 1e-5}  # torch.testing.assert_close's defaults for bfloat16


def values(t) -> np.ndarray:
    return to_numpy(t.float())


def test_the_dtype_names_and_flags(torch):
    bf = trainkit.bfloat16
    assert repr(bf) == "trainkit.bfloat16" and str(torch.bfloat16) == "torch.bfloat16"
    assert bf.is_floating_point and bf.itemsize == torch.bfloat16.itemsize == 2
    assert bf.np == np.dtype(ml_dtypes.bfloat16)
    x = trainkit.zeros(2, 3, dtype=trainkit.bfloat16)
    assert x.dtype is trainkit.bfloat16 and x.element_size() == 2
    assert x.type() == torch.zeros(2, dtype=torch.bfloat16).type().replace("torch", "trainkit")


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "float64"])
def test_finfo_matches_torch(torch, name):
    got, expected = trainkit.finfo(getattr(trainkit, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(got, field) == getattr(expected, field), field
    assert repr(got) == repr(expected)


def test_finfo_default_and_refusal(torch):
    assert trainkit.finfo() == trainkit.finfo(trainkit.float32)
    with pytest.raises(TypeError, match="floating point"):
        trainkit.finfo(trainkit.int32)
    with pytest.raises(TypeError, match="floating point"):
        torch.finfo(torch.int32)


def test_creation_and_conversion(torch):
    x = trainkit.tensor([1.0, 2.123456, -3.3e-5], dtype=trainkit.bfloat16)
    t = torch.tensor([1.0, 2.123456, -3.3e-5], dtype=torch.bfloat16)
    np.testing.assert_array_equal(values(x), to_numpy(t.float()))  # the same rounding to nearest even
    y = trainkit.ones(3).to(trainkit.bfloat16)
    assert y.dtype is trainkit.bfloat16
    assert y.float().dtype is trainkit.float32 and y.half().dtype is trainkit.float16
    assert y.to(trainkit.float64).dtype is trainkit.float64
    assert trainkit.full((2,), 1.5, dtype=trainkit.bfloat16).dtype is trainkit.bfloat16
    assert trainkit.arange(3, dtype=trainkit.bfloat16).tolist() == [0.0, 1.0, 2.0]
    assert trainkit.tensor([2.5], dtype=trainkit.bfloat16).item() == 2.5


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        ("float32", "float32"),
        ("float16", "float32"),
        ("float64", "float64"),
        ("int64", "bfloat16"),
        ("bool", "bfloat16"),
    ],
)
def test_promotion_of_two_tensors_matches_torch(torch, other, expected):
    a = trainkit.ones(2, dtype=trainkit.bfloat16)
    b = trainkit.ones(2, dtype=getattr(trainkit, other))
    assert (a + b).dtype is getattr(trainkit, expected)
    assert (torch.ones(2, dtype=torch.bfloat16) + torch.ones(2, dtype=getattr(torch, other))).dtype == getattr(
        torch, expected
    )


def test_promotion_rules_on_arrays():
    bf, f16, f32 = BFLOAT16_NP, np.dtype(np.float16), np.dtype(np.float32)
    assert promote_types(bf, f16) == f32 and promote_types(f16, bf) == f32
    assert promote_types(bf, np.dtype(np.int64)) == bf and promote_types(bf, f32) == f32
    a = np.ones(3, bf)
    assert result_type(a, 1.5) == bf  # a Python float does not widen the tensor
    assert result_type(a, np.ones((), f32)) == bf  # nor does a 0-dim tensor of the same category
    assert result_type(a, np.ones(3, f32)) == f32


def test_elementwise_and_linear_results_match_torch(torch, rng):
    data = rng.standard_normal((4, 3)).astype(np.float32)
    weight = rng.standard_normal((5, 3)).astype(np.float32)
    x, tx = trainkit.tensor(data).to(trainkit.bfloat16), torch.tensor(data).to(torch.bfloat16)
    w, tw = trainkit.tensor(weight).to(trainkit.bfloat16), torch.tensor(weight).to(torch.bfloat16)
    for fn in (
        lambda m, a, b: a + a,
        lambda m, a, b: a * a,
        lambda m, a, b: a.relu(),
        lambda m, a, b: a.sum(),
        lambda m, a, b: m.nn.functional.linear(a, b, b[:, 0]),
        lambda m, a, b: m.nn.functional.gelu(a),
        lambda m, a, b: m.nn.functional.layer_norm(a, (3,)),
        lambda m, a, b: m.nn.functional.cross_entropy(a, m.tensor([0, 1, 2, 0])),
    ):
        got, expected = fn(trainkit, x, w), fn(torch, tx, tw)
        assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
        np.testing.assert_allclose(values(got), to_numpy(expected.float()), **BF16_TOL)


def test_conv2d_in_bfloat16_matches_torch(torch, rng):
    data = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    kernel = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    got = trainkit.nn.functional.conv2d(
        trainkit.tensor(data).to(trainkit.bfloat16), trainkit.tensor(kernel).to(trainkit.bfloat16)
    )
    expected = torch.nn.functional.conv2d(
        torch.tensor(data).to(torch.bfloat16), torch.tensor(kernel).to(torch.bfloat16)
    )
    assert got.dtype is trainkit.bfloat16
    np.testing.assert_allclose(values(got), to_numpy(expected.float()), rtol=3e-2, atol=3e-2)


def test_a_cast_to_bfloat16_gives_float32_gradients(torch):
    w = trainkit.tensor([[0.5, -1.25], [2.0, 0.75]], requires_grad=True)
    tw = torch.tensor([[0.5, -1.25], [2.0, 0.75]], requires_grad=True)
    for lib, param in ((trainkit, w), (torch, tw)):
        low = param.to(lib.bfloat16)
        assert low.grad_fn.name() == "ToCopyBackward0"
        (low.relu().float() * 3).sum().backward()
    assert w.grad.dtype is trainkit.float32
    np.testing.assert_allclose(to_numpy(w.grad), to_numpy(tw.grad))
