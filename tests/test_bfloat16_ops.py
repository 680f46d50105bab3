"""bfloat16 through the tensor ops: methods, printing, Python numbers, products, unary ops, backward and files,
compared with torch (values at bfloat16's tolerance)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit

BF16_TOL = {"rtol": 1.6e-2, "atol": 1e-5}


def pair(torch, data):
    return trainkit.tensor(data).to(trainkit.bfloat16), torch.tensor(data).to(torch.bfloat16)


def same(got, expected, **tol):
    assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
    np.testing.assert_allclose(to_numpy(got.float()), to_numpy(expected.float()), **(tol or BF16_TOL))


def test_methods_printing_and_modules(torch):
    x = trainkit.ones(3).bfloat16()
    assert x.dtype is trainkit.bfloat16 and x.is_floating_point() and trainkit.is_floating_point(x)
    for values in ([1.5, 2.123456, 1e-5], [1.0, 2.0], [0.1, 0.2, -3.3]):
        got = repr(trainkit.tensor(values, dtype=trainkit.bfloat16))
        assert got.replace("trainkit", "torch") == repr(torch.tensor(values, dtype=torch.bfloat16))
    layer = trainkit.nn.Linear(3, 2).bfloat16()
    assert layer.weight.dtype is trainkit.bfloat16 and layer.weight.requires_grad
    assert layer(trainkit.ones(4, 3, dtype=trainkit.bfloat16)).dtype is trainkit.bfloat16


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a + 1.5,
        lambda a: a * 0.3,
        lambda a: 1.5 - a,
        lambda a: a / 3,
        lambda a: a**2,
        lambda a: a.exp(),
        lambda a: a.tanh(),
        lambda a: a.sigmoid(),
        lambda a: a.clamp(-0.5, 0.5),
        lambda a: a.mean(1),
        lambda a: a.softmax(-1),
        lambda a: a @ a.t(),
        lambda a: a.abs().sqrt(),
    ],
)
def test_ops_keep_bfloat16_as_torch(torch, rng, fn):
    x, tx = pair(torch, rng.standard_normal((3, 4)).astype(np.float32))
    same(fn(x), fn(tx))


def test_matmul_accumulates_in_float32(torch, rng):
    a, ta = pair(torch, rng.standard_normal((8, 64)).astype(np.float32))
    b, tb = pair(torch, rng.standard_normal((64, 5)).astype(np.float32))
    same(a @ b, ta @ tb, rtol=1e-2, atol=1e-2)
    same(trainkit.bmm(a[None], b[None]), torch.bmm(ta[None], tb[None]), rtol=1e-2, atol=1e-2)


def test_backward_in_bfloat16(torch, rng):
    data = rng.standard_normal((4, 3)).astype(np.float32)
    grads = []
    for lib in (trainkit, torch):
        x = lib.tensor(data).to(lib.bfloat16).requires_grad_()
        w = lib.ones(2, 3, dtype=lib.bfloat16, requires_grad=True)
        (lib.nn.functional.linear(x, w).tanh() * 0.5).sum().backward()
        grads.append((x.grad, w.grad))
    for got, expected in zip(*grads):
        same(got, expected, rtol=3e-2, atol=1e-2)


def test_autocast_products(torch):
    for lib in (trainkit, torch):
        x = lib.ones(2, 3)
        with lib.autocast("cpu"):
            assert (x @ x.t()).dtype == lib.bfloat16
            assert lib.bmm(x[None], x.t()[None]).dtype == lib.bfloat16
            assert lib.dot(x[0], x[1]).dtype == lib.float32  # not on the CPU list
            assert lib.mv(x, x[0]).dtype == lib.float32


@pytest.mark.parametrize("name", ["w.npz", "w.pt", "w.safetensors"])
def test_files_keep_bfloat16(tmp_path, name):
    if name.endswith(".safetensors"):
        pytest.importorskip("safetensors")
    state = {"w": trainkit.tensor([1.5, -2.125, 3e-5], dtype=trainkit.bfloat16), "f": trainkit.ones(2)}
    trainkit.save(state, tmp_path / name)
    back = trainkit.load(tmp_path / name)
    assert back["w"].dtype is trainkit.bfloat16 and back["f"].dtype is trainkit.float32
    np.testing.assert_array_equal(to_numpy(back["w"].float()), to_numpy(state["w"].float()))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, a: a.sum(),
        lambda m, a: a.mean(1),
        lambda m, a: a.cumsum(1)[:, -1],
        lambda m, a: a.softmax(-1),
        lambda m, a: a.log_softmax(-1),
        lambda m, a: a.logsumexp(-1),
        lambda m, a: a.norm(),
        lambda m, a: m.nn.functional.cross_entropy(a, m.tensor([0, 1, 2, 3])),
    ],
)
def test_long_reductions_accumulate_in_float32(torch, rng, fn):
    x, tx = pair(torch, rng.standard_normal((4, 5000)).astype(np.float32) + 0.5)
    same(fn(trainkit, x), fn(torch, tx), rtol=1e-2, atol=0.07)
