"""Autograd extras compared with PyTorch: detect_anomaly, post-accumulate hooks, once_differentiable,
autograd.functional, Tensor.type."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit


def test_detect_anomaly_names_the_node(torch):
    def snippet(lib, dev):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with lib.autograd.detect_anomaly():
            (x / x).sum().backward()

    with np.errstate(all="ignore"), pytest.warns(UserWarning):  # torch warns that anomaly mode is slow
        assert_same_error(torch, snippet, "DivBackward0", "returned nan values in its 1th output")


def test_post_accumulate_grad_hook_sees_the_accumulated_grad(torch):
    for lib in (trainkit, torch):
        y = lib.tensor([1.0, 2.0], requires_grad=True)
        seen = []
        y.register_post_accumulate_grad_hook(lambda t, seen=seen: seen.append(t.grad.clone()))
        (y * 2).sum().backward()
        (y * 3).sum().backward()
        assert [to_numpy(s).tolist() for s in seen] == [[2.0, 2.0], [5.0, 5.0]], lib.__name__
    with pytest.raises(RuntimeError, match="non-leaf"):
        (trainkit.ones(1, requires_grad=True) * 2).register_post_accumulate_grad_hook(print)


def test_once_differentiable_backward_builds_no_graph():
    class Square(trainkit.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @trainkit.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = trainkit.tensor([3.0], requires_grad=True)
    (g,) = trainkit.autograd.grad(Square.apply(x), x, create_graph=True)
    assert g.item() == 6.0 and not g.requires_grad


@pytest.mark.parametrize("name", ["jacobian", "hessian", "vjp", "jvp"])
def test_functional_matches_torch(torch, name):
    from torch.autograd import functional as tf

    from trainkit.autograd import functional as kf

    x = np.array([0.5, -1.0, 2.0])
    funcs = {
        "jacobian": lambda m, f: f.jacobian(lambda a: a.exp() * a.sum(), m.tensor(x)),
        "hessian": lambda m, f: f.hessian(lambda a: (a**3).sum() + (a[0] * a[1]), m.tensor(x)),
        "vjp": lambda m, f: f.vjp(lambda a: a**2 * a[2], m.tensor(x), m.tensor([1.0, 2.0, 3.0]))[1],
        "jvp": lambda m, f: f.jvp(lambda a: a**2 * a[2], m.tensor(x), m.tensor([1.0, 2.0, 3.0]))[1],
    }
    ours, theirs = funcs[name](trainkit, kf), funcs[name](torch, tf)
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=1e-6)


def test_tensor_type_names_and_casts(torch):
    for lib in (trainkit, torch):
        t = lib.ones(2)
        assert t.type() == f"{lib.__name__}.FloatTensor"
        assert t.type(lib.float64).dtype == lib.float64
        assert t.type(f"{lib.__name__}.LongTensor").dtype == lib.int64
