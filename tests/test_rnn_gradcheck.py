"""float64 gradcheck of each fused recurrent op (padded and packed, both directions) and gradgradcheck through its
create_graph path, which recomputes the layer with ordinary ops."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional.rnn import LAYER_OPS, schedule
from trainkit.functional.rnn_steps import run_layer

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
SIZES = [((2, 2, 2), False), ((2, 2, 2), True), ((3, 2, 1), False), ((3, 2, 1), True)]


def _inputs(mode: str, sizes: tuple, proj: int = 0, bias: bool = True, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)

    def t(*shape):
        return trainkit.tensor(rng.standard_normal(shape) * 0.5, dtype=trainkit.float64, requires_grad=True)

    hidden, in_size, n, g = 3, 2, sizes[0], GATES[mode]
    out = proj or hidden
    x, h0 = t(sum(sizes), in_size), t(n, out)
    c0 = t(n, hidden) if mode == "LSTM" else None
    weights = [t(g * hidden, in_size), t(g * hidden, out)]
    weights += [t(g * hidden), t(g * hidden)] if bias else [None, None]
    w_hr = t(proj, hidden) if proj else None
    return x, h0, c0, weights, w_hr


def _layer(mode: str, sizes: tuple, reverse: bool, c0, weights, w_hr):
    """The fused op as a function of its tensor inputs, for gradcheck."""
    sched = schedule(sizes, reverse)
    present = [c0 is not None] + [w is not None for w in weights] + [w_hr is not None]

    def f(x, h0, *rest):
        it = iter(rest)
        c, w_ih, w_hh, b_ih, b_hh, hr = (next(it) if p else None for p in present)
        return run_layer(LAYER_OPS[mode], x, h0, c, w_ih, w_hh, b_ih, b_hh, hr, sched)

    return f


@pytest.mark.parametrize("mode", list(GATES))
@pytest.mark.parametrize("sizes,reverse", SIZES)
def test_gradcheck_and_gradgradcheck_of_the_fused_op(mode, sizes, reverse):
    x, h0, c0, weights, w_hr = _inputs(mode, sizes)
    f = _layer(mode, sizes, reverse, c0, weights, w_hr)
    args = [x, h0] + [a for a in [c0, *weights, w_hr] if a is not None]
    assert gradcheck(f, args)
    if len(set(sizes)) > 1:  # the create_graph path, on the packed batches (the padded ones take the same path)
        assert gradgradcheck(f, args)


@pytest.mark.parametrize("sizes,reverse", SIZES[3:])
def test_gradcheck_of_lstm_with_projection_and_without_bias(sizes, reverse):
    x, h0, c0, weights, w_hr = _inputs("LSTM", sizes, proj=2, bias=False)
    f = _layer("LSTM", sizes, reverse, c0, weights, w_hr)
    args = [x, h0, c0] + [a for a in [*weights, w_hr] if a is not None]
    assert gradcheck(f, args)
    assert gradgradcheck(f, args)


def test_padded_input_keeps_its_shape_through_the_op():
    x, h0, c0, weights, w_hr = _inputs("GRU", (2, 2, 2))
    x3 = x.detach().reshape(3, 2, 2).requires_grad_()
    f = _layer("GRU", (2, 2, 2), False, c0, weights, w_hr)
    assert gradcheck(f, [x3, h0] + weights)


def test_second_derivative_through_the_module():
    layer = trainkit.nn.LSTM(2, 3, num_layers=2, bidirectional=True).double()
    x = trainkit.randn(4, 2, 2, dtype=trainkit.float64, requires_grad=True)
    out, _ = layer(x)
    (g,) = trainkit.autograd.grad((out * out).sum(), x, create_graph=True)
    assert g.requires_grad
    (g * g).sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in layer.parameters())


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_second_derivative_matches_torch(torch, mode):
    torch.manual_seed(0)
    ref = getattr(torch.nn, mode)(2, 3, num_layers=2).double()
    ours = getattr(trainkit.nn, mode)(2, 3, num_layers=2).double()
    ours.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 2, 2))
    grads = []
    for lib, module in ((torch, ref), (trainkit, ours)):
        xt = lib.tensor(x, requires_grad=True)
        out, _ = module(xt)
        (g,) = lib.autograd.grad((out * out).sum(), xt, create_graph=True)
        (g * g).sum().backward()
        grads.append([xt.grad] + [p.grad for p in module.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-9, atol=1e-10)


def test_retained_graph_gives_the_same_gradients_twice():
    layer = trainkit.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    x = trainkit.randn(5, 2, 3, requires_grad=True)
    out, _ = layer(x)
    loss = (out * out).sum()
    first = trainkit.autograd.grad(loss, [x, *layer.parameters()], retain_graph=True)
    second = trainkit.autograd.grad(loss, [x, *layer.parameters()])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
