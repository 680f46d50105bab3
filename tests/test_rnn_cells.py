"""trainkit.nn's recurrent cells against torch.nn: RNNCell (tanh, relu), LSTMCell and GRUCell with the same weights,
batched and unbatched, with and without hx, float32 and float64; gradients of the input, hx and every parameter;
a loop over time; gradcheck and gradgradcheck; parameters, initialisation, reprs and errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.layers import rnn_cells

# name, constructor kwargs
CELLS = [
    ("RNNCell", {}),
    ("RNNCell", {"nonlinearity": "relu"}),
    ("LSTMCell", {}),
    ("GRUCell", {}),
]
CELL_IDS = ["rnn_tanh", "rnn_relu", "lstm", "gru"]
TOL = {"float32": 2e-5, "float64": 1e-11}


def _nn(lib):
    return rnn_cells if lib is trainkit else lib.nn


def _pair_cells(torch, name, kwargs, input_size=3, hidden_size=5, bias=True, dtype="float64"):
    """A torch cell and ours, given the torch cell's weights."""
    theirs = getattr(torch.nn, name)(input_size, hidden_size, bias=bias, dtype=getattr(torch, dtype), **kwargs)
    ours = getattr(rnn_cells, name)(input_size, hidden_size, bias=bias, dtype=getattr(trainkit, dtype), **kwargs)
    own = ours.state_dict(keep_vars=True)
    assert list(own) == list(theirs.state_dict())
    with trainkit.no_grad():
        for key, value in theirs.state_dict().items():
            own[key].copy_(trainkit.tensor(value.detach().numpy()))
    return ours, theirs


def _hidden(name, rng, shape, dtype):
    if name == "LSTMCell":
        return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tensors(lib, arrays, requires_grad=True):
    if arrays is None:
        return None
    if isinstance(arrays, tuple):
        return tuple(lib.tensor(a, requires_grad=requires_grad) for a in arrays)
    return lib.tensor(arrays, requires_grad=requires_grad)


def _flat(value):
    return list(value) if isinstance(value, tuple) else [value]


def _same(ours, theirs, tol):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name,kwargs", CELLS, ids=CELL_IDS)
def test_cell_values_and_gradients_against_torch(torch, rng, name, kwargs, bias, with_hx, batched, dtype):
    ours, theirs = _pair_cells(torch, name, kwargs, bias=bias, dtype=dtype)
    x = rng.standard_normal((4, 3) if batched else (3,)).astype(dtype)
    hx = _hidden(name, rng, (4, 5) if batched else (5,), dtype) if with_hx else None
    results = []
    for lib, cell in ((trainkit, ours), (torch, theirs)):
        xt, ht = _tensors(lib, x), _tensors(lib, hx)
        out = cell(xt, ht)
        loss = sum(((o * o).sum() * (k + 1) for k, o in enumerate(_flat(out))), lib.tensor(0.0, dtype=xt.dtype))
        loss.backward()
        grads = [xt.grad] + ([t.grad for t in _flat(ht)] if ht is not None else [])
        results.append((_flat(out), grads, [p.grad for p in cell.parameters()]))
    (out, grads, pgrads), (ref_out, ref_grads, ref_pgrads) = results
    for a, b in zip(out, ref_out):
        _same(a, b, TOL[dtype])
    for a, b in zip(grads, ref_grads):
        _same(a, b, TOL[dtype])
    assert len(pgrads) == len(ref_pgrads) == (4 if bias else 2)
    for a, b in zip(pgrads, ref_pgrads):
        _same(a, b, TOL[dtype])


@pytest.mark.parametrize("name,kwargs", CELLS, ids=CELL_IDS)
def test_loop_over_time_against_torch(torch, rng, name, kwargs):
    ours, theirs = _pair_cells(torch, name, kwargs, input_size=4, hidden_size=6, dtype="float32")
    xs = rng.standard_normal((7, 3, 4)).astype("float32")
    h0 = _hidden(name, rng, (3, 6), "float32")
    results = []
    for lib, cell in ((trainkit, ours), (torch, theirs)):
        x = lib.tensor(xs, requires_grad=True)
        hx = start = _tensors(lib, h0)
        outputs = []
        for t in range(x.shape[0]):
            hx = cell(x[t], hx)
            outputs.append(hx[0] if isinstance(hx, tuple) else hx)
        out = lib.stack(outputs)
        (out.tanh() * lib.arange(6, dtype=lib.float32)).sum().backward()
        results.append((out, x.grad, [p.grad for p in cell.parameters()], [t.grad for t in _flat(start)]))
    (out, gx, pg, gh), (ref_out, ref_gx, ref_pg, ref_gh) = results
    _same(out, ref_out, 1e-5)
    _same(gx, ref_gx, 1e-5)
    for a, b in zip(pg + gh, ref_pg + ref_gh):
        _same(a, b, 1e-4)


@pytest.mark.parametrize("name,kwargs", CELLS, ids=CELL_IDS)
def test_double_backward_against_torch(torch, rng, name, kwargs):
    ours, theirs = _pair_cells(torch, name, kwargs, input_size=2, hidden_size=3)
    x = rng.standard_normal((2, 2))
    h0 = _hidden(name, rng, (2, 3), "float64")
    results = []
    for lib, cell in ((trainkit, ours), (torch, theirs)):
        xt, ht = _tensors(lib, x), _tensors(lib, h0)
        out = _flat(cell(xt, ht))[0]
        (gx,) = lib.autograd.grad((out**2).sum(), xt, create_graph=True)
        (gx * gx).sum().backward()
        results.append((gx, cell.weight_hh.grad, xt.grad))
    for a, b in zip(*results):
        _same(a, b, 1e-10)


@pytest.mark.parametrize("name,kwargs", CELLS, ids=CELL_IDS)
def test_gradcheck_and_gradgradcheck(rng, name, kwargs):
    trainkit.manual_seed(0)
    cell = getattr(rnn_cells, name)(2, 3, dtype=trainkit.float64, **kwargs)
    x = trainkit.tensor(rng.standard_normal((2, 2)), requires_grad=True)
    hx = _tensors(trainkit, _hidden(name, rng, (2, 3), "float64"))
    params = list(cell.parameters())

    if name == "LSTMCell":

        def fn(x, h, c, *weights):
            return cell(x, (h, c))

        inputs = (x, *hx, *params)
    else:

        def fn(x, h, *weights):
            return cell(x, h)

        inputs = (x, hx, *params)
    if name == "RNNCell" and kwargs.get("nonlinearity") == "relu":
        # keep the pre-activations away from relu's kink, where finite differences are meaningless
        with trainkit.no_grad():
            cell.bias_ih.fill_(2.0)
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("name,chunks", [("RNNCell", 1), ("LSTMCell", 4), ("GRUCell", 3)])
def test_parameters_shapes_and_initialisation(torch, name, chunks):
    cell = getattr(rnn_cells, name)(3, 16)
    ref = getattr(torch.nn, name)(3, 16)
    assert [(n, tuple(p.shape)) for n, p in cell.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in ref.named_parameters()
    ]
    assert tuple(cell.weight_ih.shape) == (chunks * 16, 3)
    for p in cell.parameters():
        assert p.dtype == trainkit.float32
        values = to_numpy(p)
        assert values.min() >= -0.25 and values.max() < 0.25 and values.std() > 0.1
    no_bias = getattr(rnn_cells, name)(3, 16, bias=False)
    assert no_bias.bias_ih is None and no_bias.bias_hh is None and len(list(no_bias.parameters())) == 2
    assert getattr(rnn_cells, name)(3, 0).weight_ih.shape == (0, 3)
    assert getattr(rnn_cells, name)(3, 2, dtype=trainkit.float64).weight_hh.dtype == trainkit.float64


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_initialisation_draws_in_registration_order(name):
    trainkit.manual_seed(7)
    cell = getattr(rnn_cells, name)(3, 4)
    trainkit.manual_seed(7)
    for p in cell.parameters():
        expected = trainkit.nn.init.uniform_(trainkit.empty(*p.shape), -0.5, 0.5)
        np.testing.assert_array_equal(to_numpy(p), to_numpy(expected))


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_initialisation_matches_torch_when_the_generators_agree(torch, name):
    trainkit.manual_seed(3)
    torch.manual_seed(3)
    probe = to_numpy(trainkit.nn.init.uniform_(trainkit.empty(8), -1, 1))
    if not np.array_equal(probe, torch.nn.init.uniform_(torch.empty(8), -1, 1).numpy()):
        pytest.skip("trainkit's generator does not draw torch's numbers")
    trainkit.manual_seed(5)
    torch.manual_seed(5)
    ours, theirs = getattr(rnn_cells, name)(3, 4), getattr(torch.nn, name)(3, 4)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_array_equal(to_numpy(a), b.detach().numpy())


def test_reprs_as_torch(torch):
    for name, args, kwargs in [
        ("RNNCell", (3, 4), {}),
        ("RNNCell", (3, 4), {"bias": False}),
        ("RNNCell", (3, 4), {"nonlinearity": "relu"}),
        ("RNNCell", (3, 4), {"bias": False, "nonlinearity": "relu"}),
        ("LSTMCell", (2, 5), {}),
        ("LSTMCell", (2, 5), {"bias": False}),
        ("GRUCell", (1, 1), {}),
        ("GRUCell", (1, 1), {"bias": False}),
    ]:
        assert repr(getattr(rnn_cells, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


def test_exported_from_trainkit_nn():
    for name in rnn_cells.__all__:
        assert getattr(trainkit.nn, name) is getattr(rnn_cells, name)
    assert issubclass(trainkit.nn.LSTMCell, trainkit.nn.RNNCellBase)


def test_empty_batch(torch):
    for name in ("RNNCell", "LSTMCell", "GRUCell"):
        out = getattr(rnn_cells, name)(3, 4)(trainkit.zeros(0, 3))
        assert all(tuple(o.shape) == (0, 4) for o in _flat(out))


def _call(name, x_shape, hx_shapes=None, x_dtype="float32", **kwargs):
    def fn(lib, dev):
        cell = getattr(_nn(lib), name)(3, 4, **kwargs)
        x = lib.zeros(x_shape, dtype=getattr(lib, x_dtype))
        if hx_shapes is None:
            return cell(x)
        if name == "LSTMCell":
            return cell(x, tuple(lib.zeros(*s) for s in hx_shapes))
        return cell(x, lib.zeros(*hx_shapes[0]))

    return fn


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_errors_as_torch(torch, name):
    two = 2 if name == "LSTMCell" else 1
    assert_same_error(torch, _call(name, (2, 5)), "input has inconsistent input_size: got 5 expected 3")
    assert_same_error(torch, _call(name, (5,)), "input has inconsistent input_size: got 5 expected 3")
    assert_same_error(torch, _call(name, (2, 3, 3)), f"{name}: Expected input to be 1D or 2D, got 3D instead")
    assert_same_error(torch, _call(name, ()), f"{name}: Expected input to be 1D or 2D, got 0D instead")
    assert_same_error(
        torch, _call(name, (2, 3), [(2, 5)] * two), "hidden0 has inconsistent hidden_size: got 5, expected 4"
    )
    assert_same_error(
        torch, _call(name, (2, 3), [(3, 4)] * two), "Input batch size 2 doesn't match hidden0 batch size 3"
    )
    assert_same_error(torch, _call(name, (2, 3), [(4,)] * two), "Input batch size 2 doesn't match hidden0 batch size 4")
    assert_same_error(
        torch, _call(name, (3,), [(2, 4)] * two), "hidden0 has inconsistent hidden_size: got 2, expected 4"
    )
    assert_same_error(torch, _call(name, (2, 3), x_dtype="float64"), "mat1 and mat2 must have the same dtype")
    hidden = "hx[0]" if name == "LSTMCell" else "hidden"
    assert_same_error(
        torch, _call(name, (2, 3), [(2, 2, 4)] * two), f"{name}: Expected {hidden} to be 1D or 2D, got 3D instead"
    )


def test_lstm_cell_hidden_state_errors(torch):
    assert_same_error(
        torch, _call("LSTMCell", (2, 3), [(2, 4), (2, 5)]), "hidden1 has inconsistent hidden_size: got 5, expected 4"
    )
    assert_same_error(
        torch, _call("LSTMCell", (2, 3), [(2, 4), (3, 4)]), "Input batch size 2 doesn't match hidden1 batch size 3"
    )

    def tensor_hx(lib, dev):
        return _nn(lib).LSTMCell(3, 4)(lib.zeros(2, 3), lib.zeros(2, 4))

    assert_same_error(torch, tensor_hx, "argument 'hx' (position 2) must be tuple of Tensors, not Tensor")

    def one_state(lib, dev):
        return _nn(lib).LSTMCell(3, 4)(lib.zeros(2, 3), (lib.zeros(2, 4),))

    assert_same_error(torch, one_state, "lstm_cell expects two hidden states")


def test_unknown_nonlinearity_is_refused_at_the_call(torch):
    assert_same_error(torch, _call("RNNCell", (2, 3), nonlinearity="foo"), "Unknown nonlinearity: foo")
