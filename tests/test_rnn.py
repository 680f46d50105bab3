"""nn.RNN, nn.LSTM and nn.GRU against PyTorch: parameters, values and gradients with the same weights, layouts,
hidden states, dropout, state dicts, errors, and the graph they record (one node per layer and direction, freed
after backward)."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit

DTYPES = {"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}


def make_pair(torch, mode: str, in_size: int, hidden: int, dtype: str, **kw):
    """The torch module and a trainkit module holding the same weights."""
    torch.manual_seed(0)
    ref = getattr(torch.nn, mode)(in_size, hidden, **kw).to(getattr(torch, dtype))
    ours = getattr(trainkit.nn, mode)(in_size, hidden, **kw).to(getattr(trainkit, dtype))
    ours.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, ours


def both(torch, array, requires_grad=True):
    """The same values as a torch and a trainkit tensor."""
    t = torch.tensor(array, requires_grad=requires_grad)
    return t, trainkit.tensor(array, requires_grad=requires_grad)


def states_of(result, lstm: bool) -> list:
    out, hidden = result
    return [out] + (list(hidden) if lstm else [hidden])


def loss_of(lib, tensors: list):
    """A loss that weighs every output and state differently, so that each gradient path is checked."""
    total = 0
    for k, t in enumerate(tensors):
        weights = lib.arange(t.numel(), dtype=t.dtype).reshape(t.shape) * 0.01 + (k + 1)
        total = total + (t * t * weights).sum()
    return total


def check_pair(torch, ref, ours, x_shape, dtype, lstm, hidden_shapes=None, rng=None):
    rng = rng or np.random.default_rng(1)
    rtol, atol = DTYPES[dtype]
    xt, xk = both(torch, rng.standard_normal(x_shape).astype(dtype))
    hx_t = hx_k = None
    inputs = [(xt, xk)]
    if hidden_shapes is not None:
        pairs = [both(torch, rng.standard_normal(s).astype(dtype)) for s in hidden_shapes]
        inputs += pairs
        hx_t = tuple(p[0] for p in pairs) if lstm else pairs[0][0]
        hx_k = tuple(p[1] for p in pairs) if lstm else pairs[0][1]
    got_t = states_of(ref(xt, hx_t), lstm)
    got_k = states_of(ours(xk, hx_k), lstm)
    for a, b in zip(got_t, got_k):
        assert tuple(a.shape) == tuple(b.shape)
        assert b.dtype == getattr(trainkit, dtype)
        np.testing.assert_allclose(to_numpy(b), to_numpy(a), rtol=rtol, atol=atol)
    loss_of(torch, got_t).backward()
    loss_of(trainkit, got_k).backward()
    for a, b in inputs:
        np.testing.assert_allclose(to_numpy(b.grad), to_numpy(a.grad), rtol=rtol * 10, atol=atol * 10)
    for (name, p), (name_k, q) in zip(ref.named_parameters(), ours.named_parameters()):
        assert name == name_k
        assert q.grad.dtype == getattr(trainkit, dtype)
        np.testing.assert_allclose(to_numpy(q.grad), to_numpy(p.grad), rtol=rtol * 10, atol=atol * 10, err_msg=name)


CONFIGS = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {"bidirectional": True, "bias": False}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3}),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True, "bias": False}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"bias": False}),
]


def _hidden_shapes(mode, kw, batch, hidden):
    d = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    proj = kw.get("proj_size", 0) or hidden
    shapes = [(layers * d, batch, proj)]
    if mode == "LSTM":
        shapes.append((layers * d, batch, hidden))
    return shapes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_values_and_gradients_match_torch(torch, mode, kw, dtype):
    ref, ours = make_pair(torch, mode, 4, 6, dtype, **kw)
    check_pair(torch, ref, ours, (5, 3, 4), dtype, mode == "LSTM")


@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_given_initial_states_match_torch(torch, mode, kw):
    ref, ours = make_pair(torch, mode, 4, 6, "float64", **kw)
    check_pair(torch, ref, ours, (5, 3, 4), "float64", mode == "LSTM", _hidden_shapes(mode, kw, 3, 6))


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_batch_first_matches_torch(torch, mode):
    kw = {"batch_first": True, "num_layers": 2, "bidirectional": True}
    ref, ours = make_pair(torch, mode, 4, 5, "float64", **kw)
    check_pair(torch, ref, ours, (3, 6, 4), "float64", mode == "LSTM", _hidden_shapes(mode, kw, 3, 5))


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("given", [False, True])
def test_unbatched_input_matches_torch(torch, mode, given):
    kw = {"num_layers": 2}
    ref, ours = make_pair(torch, mode, 4, 5, "float64", **kw)
    shapes = [s[:1] + s[2:] for s in _hidden_shapes(mode, kw, 1, 5)] if given else None
    check_pair(torch, ref, ours, (6, 4), "float64", mode == "LSTM", shapes)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_dropout_in_eval_mode_matches_torch_and_in_training_keeps_shapes(torch, mode):
    ref, ours = make_pair(torch, mode, 4, 5, "float64", num_layers=3, dropout=0.5)
    ref.eval()
    ours.eval()
    check_pair(torch, ref, ours, (5, 2, 4), "float64", mode == "LSTM")
    ours.train()
    out, hidden = ours(trainkit.randn(5, 2, 4, dtype=trainkit.float64))
    assert tuple(out.shape) == (5, 2, 5)
    out.sum().backward()
    assert all(p.grad is not None for p in ours.parameters())


def test_parameters_names_shapes_order_and_init(torch):
    for mode, kw in CONFIGS:
        ref = getattr(torch.nn, mode)(4, 6, **kw)
        ours = getattr(trainkit.nn, mode)(4, 6, **kw)
        assert [(n, tuple(p.shape)) for n, p in ref.named_parameters()] == [
            (n, tuple(p.shape)) for n, p in ours.named_parameters()
        ]
        assert ours._flat_weights_names == ref._flat_weights_names
        assert [[tuple(p.shape) for p in w] for w in ours.all_weights] == [
            [tuple(p.shape) for p in w] for w in ref.all_weights
        ]
        bound = 1 / np.sqrt(6)
        for p in ours.parameters():
            assert p.dtype == trainkit.float32 and np.abs(to_numpy(p)).max() <= bound
        assert repr(ours) == repr(ref)
        assert ours.flatten_parameters() is None


def test_state_dict_from_torch_loads_and_gives_equal_outputs(torch):
    torch.manual_seed(3)
    ref = torch.nn.LSTM(3, 5, num_layers=2, proj_size=2)
    ours = trainkit.nn.LSTM(3, 5, num_layers=2, proj_size=2)
    ours.load_state_dict({k: trainkit.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    assert list(ours.state_dict()) == list(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype("float32")
    out, (h, c) = ours(trainkit.tensor(x))
    out_t, (h_t, c_t) = ref(torch.tensor(x))
    for a, b in ((out, out_t), (h, h_t), (c, c_t)):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-5, atol=1e-6)


def test_same_weights_in_float32_and_float64_agree():
    ours = trainkit.nn.GRU(3, 4)
    x = trainkit.randn(6, 2, 3)
    out32, _ = ours(x)
    ours.double()
    out64, _ = ours(x.double())
    assert out32.dtype == trainkit.float32 and out64.dtype == trainkit.float64
    np.testing.assert_allclose(to_numpy(out32), to_numpy(out64), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "args,kw",
    [
        ((3, 4), {"dropout": 1.5}),
        ((3, 4), {"dropout": True}),
        ((3, 0), {}),
        ((0, 4), {}),
        ((3, 4), {"num_layers": 0}),
        ((3, 4), {"proj_size": -1}),
        ((3, 4), {"proj_size": 4}),
        ((3, 4), {"bias": 1}),
        ((3, 4), {"batch_first": 0}),
        ((3.0, 4), {}),
    ],
)
def test_constructor_errors_match_torch(torch, args, kw):
    assert_same_error(torch, lambda lib, dev: lib.nn.LSTM(*args, **kw))


def test_rnn_and_gru_refuse_proj_size_and_rnn_an_unknown_nonlinearity(torch):
    assert_same_error(torch, lambda lib, dev: lib.nn.GRU(3, 4, proj_size=2), "proj_size")
    assert_same_error(torch, lambda lib, dev: lib.nn.RNN(3, 4, proj_size=2), "proj_size")
    assert_same_error(torch, lambda lib, dev: lib.nn.RNN(3, 4, nonlinearity="gelu"), "gelu")


def test_dropout_with_one_layer_warns_as_torch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainkit.nn.LSTM(3, 4, dropout=0.2)
    assert any("num_layers greater than 1" in str(w.message) for w in caught)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "x_shape,h_shapes,words",
    [
        ((5, 2, 3, 1), None, ["Expected input to be 2D or 3D"]),
        ((5, 2, 7), None, ["input.size(-1) must be equal to input_size", "Expected 3, got 7"]),
        ((5, 2, 3), [(1, 3, 4), (1, 3, 4)], ["Expected hidden", "[1, 3, 4]"]),
        ((5, 2, 3), [(2, 4), (2, 4)], ["For batched 3-D input"]),
        ((5, 3), [(1, 1, 4), (1, 1, 4)], ["For unbatched 2-D input"]),
    ],
)
def test_forward_errors_match_torch(torch, mode, x_shape, h_shapes, words):
    def snippet(lib, dev):
        torch.manual_seed(0)
        layer = getattr(lib.nn, mode)(3, 4)
        hx = None
        if h_shapes is not None:
            hx = tuple(lib.zeros(s) for s in h_shapes) if mode == "LSTM" else lib.zeros(h_shapes[0])
        return layer(lib.zeros(x_shape), hx)

    assert_same_error(torch, snippet, *words)


def test_lstm_cell_state_size_and_dtype_errors_match_torch(torch):
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3), (lib.zeros(1, 2, 2), lib.zeros(1, 2, 2))),
        "Expected hidden[1] size",
        "[1, 2, 2]",
    )
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3), (lib.zeros(1, 2, 4), lib.zeros(1, 2, 4))),
        "Expected hidden[0] size",
        "[1, 2, 4]",
    )
    assert_same_error(
        torch, lambda lib, dev: lib.nn.GRU(3, 4)(lib.zeros(5, 2, 3, dtype=lib.float64)), "does not match weight dtype"
    )


# ---------------------------------------------------------------------------------------------------- the graph
def _layer_nodes(fn, seen=None) -> list:
    seen = set() if seen is None else seen
    found = []
    stack = [fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.name().endswith("LayerBackward0"):
            found.append(node.name())
        stack.extend(n for n, _ in node.next_functions)
    return found


@pytest.mark.parametrize(
    "mode,name", [("RNN", "RnnTanhLayerBackward0"), ("LSTM", "LstmLayerBackward0"), ("GRU", "GruLayerBackward0")]
)
def test_one_fused_node_per_layer_and_direction(mode, name):
    layer = getattr(trainkit.nn, mode)(3, 4, num_layers=2, bidirectional=True)
    out, _ = layer(trainkit.randn(7, 2, 3))
    assert sorted(_layer_nodes(out.grad_fn)) == [name] * 4
    single = getattr(trainkit.nn, mode)(3, 4)
    out, _ = single(trainkit.randn(7, 2, 3))
    assert out.grad_fn.name() == name
    assert len(out.grad_fn.next_functions) == 8  # x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr


def test_relu_rnn_node_name():
    out, _ = trainkit.nn.RNN(3, 4, nonlinearity="relu")(trainkit.randn(2, 1, 3))
    assert out.grad_fn.name() == "RnnReluLayerBackward0"


def test_fused_node_lists_its_saved_arrays_and_frees_them():
    layer = trainkit.nn.LSTM(3, 4)
    out, _ = layer(trainkit.randn(5, 2, 3))
    node = out.grad_fn
    shapes = [s[0] for s in trainkit.autograd.Graph.saved(node)]
    assert (5 * 2, 16) in shapes  # the gates of every step
    assert (5 * 2 + 2, 4) in shapes  # the hidden states, h0 included
    assert trainkit.autograd.graph(out).saved_bytes > 0
    out.sum().backward()
    assert trainkit.autograd.Graph.saved(node) is None


def test_changing_the_output_in_place_is_caught_at_backward():
    layer = trainkit.nn.GRU(3, 4)
    out, _ = layer(trainkit.randn(5, 2, 3))
    loss = (out * out).sum()
    with trainkit.no_grad():
        out.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_graph_is_freed_without_the_garbage_collector(mode):
    layer = getattr(trainkit.nn, mode)(3, 4, num_layers=2, bidirectional=True)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        out, _ = layer(trainkit.randn(5, 2, 3))
        node = weakref.ref(out.grad_fn)
        out.sum().backward()
        del out
        assert node() is None
        out, _ = layer(trainkit.randn(5, 2, 3))
        node = weakref.ref(out.grad_fn)
        del out, _
        assert node() is None
    finally:
        if was:
            gc.enable()


def test_no_grad_records_nothing():
    layer = trainkit.nn.LSTM(3, 4)
    with trainkit.no_grad():
        out, (h, c) = layer(trainkit.randn(5, 2, 3))
    assert out.grad_fn is None and h.grad_fn is None and not out.requires_grad


def test_empty_sequence_and_state_dtype_errors_match_torch(torch):
    assert_same_error(
        torch, lambda lib, dev: lib.nn.LSTM(3, 4)(lib.zeros(0, 2, 3)), "Expected sequence length to be larger than 0"
    )
    assert_same_error(
        torch, lambda lib, dev: lib.nn.GRU(3, 4)(lib.zeros(2, 1, 3), lib.zeros(1, 1, 4, dtype=lib.float64))
    )


def test_empty_batch_gives_empty_outputs_as_torch(torch):
    out, (h, c) = trainkit.nn.LSTM(3, 4)(trainkit.zeros(2, 0, 3, requires_grad=True))
    out_t, (h_t, c_t) = torch.nn.LSTM(3, 4)(torch.zeros(2, 0, 3))
    assert tuple(out.shape) == tuple(out_t.shape) and tuple(h.shape) == tuple(h_t.shape)


def test_training_dropout_draws_from_trainkit_seeded_stream():
    layer = trainkit.nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = trainkit.randn(5, 2, 3)
    outs = []
    for _ in range(2):
        trainkit.manual_seed(7)
        outs.append(to_numpy(layer(x)[0]))
    np.testing.assert_array_equal(outs[0], outs[1])
    layer.eval()
    assert not np.allclose(to_numpy(layer(x)[0]), outs[0])
