"""The layers, losses and init functions against torch.nn: outputs and gradients for the same weights and inputs,
running statistics, train/eval behaviour, parameter and buffer registration, reprs, default initialisation, and
the init functions' distributions."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
from conftest import assert_same_error, require_reference, to_numpy

import trainkit
from trainkit.layers import activation, dropout, init, linear, loss, normalization, sparse

# The layers by their torch.nn names, whatever trainkit.nn exports.
tnn = types.SimpleNamespace(
    **{
        name: getattr(module, name)
        for module in (activation, dropout, linear, loss, normalization, sparse)
        for name in dir(module)
        if isinstance(getattr(module, name), type) and not name.startswith("_")
    }
)


def _nn(lib):
    return tnn if lib is trainkit else lib.nn


def _copy_state(ours, theirs) -> None:
    """Give our layer the torch layer's parameters and buffers."""
    own = ours.state_dict(keep_vars=True)
    assert list(own) == list(theirs.state_dict()), "state_dict keys differ"
    with trainkit.no_grad():
        for key, value in theirs.state_dict().items():
            own[key].copy_(trainkit.tensor(value.detach().numpy()))


def _close(got, expected, what: str, rtol=2e-5, atol=2e-5) -> None:
    got, expected = to_numpy(got), to_numpy(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, torch {expected.shape}"
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=what)


# -------------------------------------------------------------------------------------------- layer parity
LAYERS = {
    "ReLU": ("ReLU()", (4, 5)),
    "ReLU-inplace": ("ReLU(inplace=True)", (4, 5)),
    "LeakyReLU": ("LeakyReLU(0.2)", (4, 5)),
    "LeakyReLU-inplace": ("LeakyReLU(0.1, inplace=True)", (4, 5)),
    "Sigmoid": ("Sigmoid()", (4, 5)),
    "Tanh": ("Tanh()", (4, 5)),
    "GELU": ("GELU()", (4, 5)),
    "GELU-tanh": ("GELU(approximate='tanh')", (4, 5)),
    "Softmax": ("Softmax(dim=1)", (4, 5)),
    "LogSoftmax": ("LogSoftmax(dim=-1)", (2, 3, 5)),
    "Identity": ("Identity(54, unused=True)", (4, 5)),
    "Flatten": ("Flatten()", (2, 3, 4)),
    "Flatten-range": ("Flatten(0, 1)", (2, 3, 4)),
    "Linear": ("Linear(5, 3)", (4, 5)),
    "Linear-no-bias": ("Linear(5, 3, bias=False)", (4, 5)),
    "Linear-3d": ("Linear(5, 2)", (2, 4, 5)),
    "Dropout-eval": ("Dropout(0.4)", (4, 5)),
    "BatchNorm1d": ("BatchNorm1d(5)", (6, 5)),
    "BatchNorm1d-3d": ("BatchNorm1d(3, momentum=0.3)", (4, 3, 5)),
    "BatchNorm1d-cumulative": ("BatchNorm1d(5, momentum=None)", (6, 5)),
    "BatchNorm1d-no-affine": ("BatchNorm1d(5, affine=False)", (6, 5)),
    "BatchNorm1d-no-bias": ("BatchNorm1d(5, bias=False)", (6, 5)),
    "BatchNorm1d-untracked": ("BatchNorm1d(5, track_running_stats=False)", (6, 5)),
    "BatchNorm2d": ("BatchNorm2d(3, eps=1e-3)", (2, 3, 4, 5)),
}


def _make(lib, spec: str):
    return eval(spec, {}, vars(_nn(lib)) if lib is trainkit else vars(lib.nn))


def _forward(lib, dev, layer, x_np):
    x = lib.tensor(x_np, device=dev, requires_grad=True)
    return x, layer(x * 1.0 if getattr(layer, "inplace", False) else x)  # in place needs a non-leaf


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_torch_in_train_and_eval(name, device, torch, rng):
    spec, shape = LAYERS[name]
    if name.startswith("BatchNorm"):
        require_reference(torch, "2.13", "BatchNorm's bias= keyword and repr")
    ours, theirs = _make(trainkit, spec), _make(torch, spec)
    _copy_state(ours, theirs)
    ours.to(device)
    modes = ["eval"] if name.startswith("Dropout") else ["train", "train", "train", "eval"]
    for step, mode in enumerate(modes):
        for layer in (ours, theirs):
            getattr(layer, mode)()
            layer.zero_grad()
        x = (rng.standard_normal(shape) * 2 + step).astype(np.float32)
        tk_x, tk_out = _forward(trainkit, device, ours, x)
        th_x, th_out = _forward(torch, "cpu", theirs, x)
        upstream = rng.standard_normal(tuple(th_out.shape)).astype(np.float32)
        tk_out.backward(trainkit.tensor(upstream, device=device))
        th_out.backward(torch.tensor(upstream))
        _close(tk_out, th_out, f"{mode} step {step}: output")
        _close(tk_x.grad, th_x.grad, f"{mode} step {step}: input grad")
        for (key, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            _close(p.grad, q.grad, f"{mode} step {step}: grad of {key}")
        for (key, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers()):
            _close(b, c, f"{mode} step {step}: buffer {key}")


def test_batch_norm_running_stats_after_several_steps_match_torch(device, torch, rng):
    for momentum in (0.1, None):
        ours, theirs = tnn.BatchNorm2d(3, momentum=momentum).to(device), torch.nn.BatchNorm2d(3, momentum=momentum)
        for step in range(5):
            x = (rng.standard_normal((4, 3, 2, 2)) * (step + 1) + step).astype(np.float32)
            ours(trainkit.tensor(x, device=device))
            theirs(torch.tensor(x))
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 5
        _close(ours.running_mean, theirs.running_mean, f"running_mean, momentum={momentum}")
        _close(ours.running_var, theirs.running_var, f"running_var, momentum={momentum}")
        x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
        _close(ours.eval()(trainkit.tensor(x, device=device)), theirs.eval()(torch.tensor(x)), "eval output")


def test_batch_norm_eval_uses_running_stats_and_leaves_them(device):
    bn = tnn.BatchNorm1d(2).to(device)
    with trainkit.no_grad():
        bn.running_mean.copy_(trainkit.tensor([1.0, -1.0]))
        bn.running_var.copy_(trainkit.tensor([4.0, 0.25]))
    bn.eval()
    out = bn(trainkit.tensor([[3.0, 0.0], [1.0, -1.5]], device=device))
    np.testing.assert_allclose(to_numpy(out), [[1.0, 2.0], [0.0, -1.0]], rtol=1e-4)
    np.testing.assert_allclose(to_numpy(bn.running_mean), [1.0, -1.0])
    assert int(bn.num_batches_tracked) == 0


def test_batch_norm_without_tracking_uses_batch_stats_in_eval(device, torch, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    outs = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        bn = _nn(lib).BatchNorm1d(4, track_running_stats=False).eval()
        outs.append(bn.to(dev)(lib.tensor(x, device=dev)))
    _close(*outs, "eval output")
    assert abs(to_numpy(outs[0]).mean()) < 1e-5


def test_batch_norm_reset_running_stats():
    bn = tnn.BatchNorm1d(3)
    bn(trainkit.randn(4, 3) + 5)
    bn.reset_running_stats()
    assert to_numpy(bn.running_mean).tolist() == [0, 0, 0] and to_numpy(bn.running_var).tolist() == [1, 1, 1]
    assert int(bn.num_batches_tracked) == 0


@pytest.mark.parametrize("spec, shape", [("BatchNorm1d(3)", (2, 3, 4, 5)), ("BatchNorm2d(3)", (2, 3))])
def test_batch_norm_input_rank_errors_match_torch(spec, shape, device, torch):
    assert_same_error(torch, lambda m, dev: _make(m, spec).to(dev)(m.ones(*shape, device=dev)), "input", device=device)


# -------------------------------------------------------------------------------------------- dropout layer
def test_dropout_layer_drops_in_train_and_passes_through_in_eval(device):
    trainkit.manual_seed(3)
    layer = tnn.Dropout(0.2)
    x = trainkit.ones(50_000, device=device)
    y = to_numpy(layer(x))
    assert abs((y == 0).mean() - 0.2) < 0.01
    np.testing.assert_allclose(y[y != 0], 1.25, rtol=1e-6)
    assert layer.eval()(x) is x


def test_dropout_layer_mask_statistics_match_torch(torch):
    trainkit.manual_seed(0)
    torch.manual_seed(0)
    ours = to_numpy(tnn.Dropout(0.6)(trainkit.ones(40_000)))
    theirs = to_numpy(torch.nn.Dropout(0.6)(torch.ones(40_000)))
    assert abs((ours == 0).mean() - (theirs == 0).mean()) < 0.015
    assert set(ours.tolist()) == set(theirs.tolist())


def test_dropout_layer_rejects_a_bad_probability_as_torch(torch):
    assert_same_error(torch, lambda m, dev: _nn(m).Dropout(1.2), "between 0 and 1")


# ------------------------------------------------------------------------------------------------ embedding
def test_embedding_matches_torch_and_padding_row_gets_no_grad(device, torch, rng):
    idx = np.array([[1, 2, 2], [0, 1, 7]])
    upstream = rng.standard_normal((2, 3, 4)).astype(np.float32)
    theirs, ours = torch.nn.Embedding(8, 4, padding_idx=2), tnn.Embedding(8, 4, padding_idx=2)
    _copy_state(ours, theirs)
    results = []
    for lib, dev, emb in ((trainkit, device, ours.to(device)), (torch, "cpu", theirs)):
        out = emb(lib.tensor(idx, device=dev))
        out.backward(lib.tensor(upstream, device=dev))
        results.append((out, emb.weight.grad))
    _close(results[0][0], results[1][0], "output")
    _close(results[0][1], results[1][1], "weight grad")
    assert not to_numpy(results[0][1])[2].any()


def test_embedding_default_init_is_standard_normal_with_zero_padding_row():
    trainkit.manual_seed(0)
    emb = tnn.Embedding(1000, 50, padding_idx=-1)
    w = to_numpy(emb.weight)
    assert emb.padding_idx == 999
    assert not w[999].any()
    assert abs(w[:999].mean()) < 0.01 and abs(w[:999].std() - 1) < 0.01


def test_embedding_from_pretrained_shares_and_freezes(torch):
    table = trainkit.tensor([[1.0, 2.0], [3.0, 4.0]])
    emb = tnn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad
    assert to_numpy(emb(trainkit.tensor([1, 0]))).tolist() == [[3.0, 4.0], [1.0, 2.0]]
    assert tnn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    assert repr(emb) == repr(torch.nn.Embedding.from_pretrained(torch.tensor([[1.0, 2.0], [3.0, 4.0]])))


def test_embedding_padding_out_of_range_is_an_error_as_torch(torch):
    assert_same_error(torch, lambda m, dev: _nn(m).Embedding(5, 2, padding_idx=5), "Padding_idx")


# ---------------------------------------------------------------------------------------------------- losses
LOSSES = {
    "MSELoss": ("MSELoss()", "normal"),
    "MSELoss-sum": ("MSELoss(reduction='sum')", "normal"),
    "L1Loss-none": ("L1Loss(reduction='none')", "normal"),
    "HuberLoss": ("HuberLoss(delta=0.5)", "normal"),
    "SmoothL1Loss": ("SmoothL1Loss(beta=0.5, reduction='sum')", "normal"),
    "CrossEntropyLoss": ("CrossEntropyLoss()", "index"),
    "CrossEntropyLoss-options": (
        "CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.1, reduction='sum')",
        "index",
    ),
    "CrossEntropyLoss-probabilities": ("CrossEntropyLoss(weight=w)", "probs"),
    "NLLLoss": ("NLLLoss(weight=w, reduction='none')", "index"),
    "BCELoss": ("BCELoss(weight=w)", "prob"),
    "BCEWithLogitsLoss": ("BCEWithLogitsLoss(pos_weight=w, reduction='none')", "binary"),
}


def _loss_inputs(kind: str, rng) -> tuple:
    x = rng.standard_normal((5, 4)).astype(np.float32)
    if kind == "normal":
        return x, rng.standard_normal((5, 4)).astype(np.float32)
    if kind == "index":
        return x, np.array([0, 1, 3, 1, 2])
    if kind == "probs":
        e = rng.uniform(0.1, 1, (5, 4)).astype(np.float32)
        return x, e / e.sum(1, keepdims=True)
    if kind == "prob":
        return rng.uniform(0.05, 0.95, (5, 4)).astype(np.float32), rng.uniform(0, 1, (5, 4)).astype(np.float32)
    return x, (rng.random((5, 4)) < 0.5).astype(np.float32)


@pytest.mark.parametrize("name", LOSSES)
def test_loss_module_matches_torch(name, device, torch, rng):
    spec, kind = LOSSES[name]
    x, t = _loss_inputs(kind, rng)
    w = rng.uniform(0.5, 2, 4).astype(np.float32)
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        module = eval(spec, {"w": lib.tensor(w, device=dev)}, vars(_nn(lib)))
        xt = lib.tensor(x, device=dev, requires_grad=True)
        out = module(xt, lib.tensor(t, device=dev))
        out.backward(lib.ones_like(out))
        results.append((out, xt.grad, repr(module), [k for k, _ in module.named_buffers()]))
    _close(results[0][0], results[1][0], "loss")
    _close(results[0][1], results[1][1], "input grad")
    assert results[0][2] == results[1][2]
    assert results[0][3] == results[1][3]


def test_loss_module_legacy_flags_warn_and_set_reduction(torch):
    for lib in (trainkit, torch):
        with pytest.warns(UserWarning, match="size_average and reduce"):
            module = _nn(lib).MSELoss(size_average=False)
        assert module.reduction == "sum"


# ------------------------------------------------------------------------------------- registration and repr
REPRS = [
    "ReLU()",
    "ReLU(inplace=True)",
    "LeakyReLU()",
    "LeakyReLU(0.2, inplace=True)",
    "Sigmoid()",
    "Tanh()",
    "GELU()",
    "GELU('tanh')",
    "Softmax()",
    "Softmax(dim=1)",
    "LogSoftmax(dim=-1)",
    "Identity()",
    "Flatten()",
    "Flatten(0, 2)",
    "Linear(3, 4)",
    "Linear(3, 4, bias=False)",
    "Dropout()",
    "Dropout(0.2, inplace=True)",
    "BatchNorm1d(3)",
    "BatchNorm2d(8, eps=0.001, momentum=None, affine=False, track_running_stats=False)",
    "BatchNorm2d(8, bias=False)",
    "Embedding(10, 3)",
    "Embedding(10, 3, padding_idx=-2)",
    "Embedding(10, 3, max_norm=1.0, scale_grad_by_freq=True)",
    "MSELoss()",
    "L1Loss()",
    "HuberLoss()",
    "SmoothL1Loss()",
    "CrossEntropyLoss()",
    "NLLLoss()",
    "BCELoss()",
    "BCEWithLogitsLoss()",
]


@pytest.mark.parametrize("spec", REPRS)
def test_repr_matches_torch(spec, torch):
    if spec.startswith("BatchNorm"):
        require_reference(torch, "2.13", "BatchNorm's bias= keyword and repr")
    assert repr(_make(trainkit, spec)) == repr(_make(torch, spec)).replace("torch", "trainkit")


@pytest.mark.parametrize("spec", [s for s in REPRS if "(" in s] + ["BatchNorm1d(3, track_running_stats=False)"])
def test_parameters_and_buffers_are_registered_as_torch(spec, torch):
    if spec.startswith("BatchNorm"):
        require_reference(torch, "2.13", "BatchNorm's bias= keyword and repr")
    ours, theirs = _make(trainkit, spec), _make(torch, spec)
    assert [(k, tuple(p.shape), p.requires_grad) for k, p in ours.named_parameters()] == [
        (k, tuple(p.shape), p.requires_grad) for k, p in theirs.named_parameters()
    ]
    assert [(k, tuple(b.shape), b.dtype.name) for k, b in ours.named_buffers()] == [
        (k, tuple(b.shape), str(b.dtype).removeprefix("torch.")) for k, b in theirs.named_buffers()
    ]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(isinstance(p, trainkit.layers.Parameter) for p in ours.parameters())


def test_layers_work_in_a_sequential_model_and_train(device):
    trainkit.manual_seed(0)
    model = trainkit.layers.Sequential(
        tnn.Flatten(), tnn.Linear(12, 16), tnn.BatchNorm1d(16), tnn.GELU(), tnn.Dropout(0.1), tnn.Linear(16, 3)
    ).to(device)
    x = trainkit.randn(32, 3, 4, device=device)
    target = trainkit.tensor(np.arange(32) % 3, device=device)
    criterion = tnn.CrossEntropyLoss()
    first = None
    for _ in range(100):
        model.zero_grad()
        loss_value = criterion(model(x), target)
        loss_value.backward()
        with trainkit.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        first = float(loss_value) if first is None else first
    assert float(loss_value) < 0.3 * first


# --------------------------------------------------------------------------------------- default initialisation
@pytest.mark.parametrize("fan_in, fan_out", [(20, 30), (400, 50)])
def test_linear_default_init_bounds_and_spread_match_torch(fan_in, fan_out, torch):
    trainkit.manual_seed(0)
    bound = 1 / math.sqrt(fan_in)
    weights, biases = [], []
    for lib in (trainkit, torch):
        layer = _nn(lib).Linear(fan_in, fan_out)
        weights.append(to_numpy(layer.weight))
        biases.append(to_numpy(layer.bias))
    for w in weights + biases:
        assert np.abs(w).max() <= bound
    assert abs(weights[0].std() - bound / math.sqrt(3)) < 0.05 * bound
    assert abs(weights[0].std() - weights[1].std()) < 0.07 * bound


# -------------------------------------------------------------------------------------------- init functions
@pytest.mark.parametrize(
    "nonlinearity, param",
    [
        ("linear", None),
        ("conv2d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("leaky_relu", 3),
        ("selu", None),
    ],
)
def test_calculate_gain_matches_torch(nonlinearity, param, torch):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize("shape", [(3, 4), (8, 3, 5, 5), (2, 6, 3), (0, 4)])
def test_fans_match_torch(shape, torch):
    assert init._calculate_fan_in_and_fan_out(trainkit.empty(*shape)) == (
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    )


INIT_ERRORS = {
    "fan-of-a-vector": (lambda m: m.nn.init.xavier_uniform_(m.empty(3)), "fewer than 2 dimensions"),
    "bad-mode": (lambda m: m.nn.init.kaiming_normal_(m.empty(3, 4), mode="fan_avg"), "fan_avg not supported"),
    "bad-nonlinearity": (lambda m: m.nn.init.calculate_gain("swish"), "Unsupported nonlinearity swish"),
    "bad-slope": (lambda m: m.nn.init.calculate_gain("leaky_relu", "x"), "not a valid number"),
}


@pytest.mark.parametrize("name", INIT_ERRORS)
def test_init_errors_match_torch(name, torch):
    fn, *words = INIT_ERRORS[name]
    lib_nn = types.SimpleNamespace(init=init)
    assert_same_error(
        torch, lambda m, dev: fn(types.SimpleNamespace(nn=lib_nn, empty=m.empty) if m is trainkit else m), *words
    )


def _init_sample(name: str, shape: tuple, device="cpu", **kwargs) -> np.ndarray:
    t = trainkit.empty(*shape, device=device)
    out = getattr(init, name)(t, **kwargs)
    assert out is t
    return to_numpy(t)


def test_uniform_and_normal_draw_the_asked_distribution(device):
    trainkit.manual_seed(0)
    u = _init_sample("uniform_", (200, 500), device, a=-3.0, b=1.0)
    assert u.min() >= -3.0 and u.max() < 1.0
    assert abs(u.mean() + 1.0) < 0.01 and abs(u.std() - 4 / math.sqrt(12)) < 0.01
    n = _init_sample("normal_", (200, 500), device, mean=2.0, std=0.5)
    assert abs(n.mean() - 2.0) < 0.005 and abs(n.std() - 0.5) < 0.005


def test_constant_zeros_ones(device):
    assert (_init_sample("constant_", (3, 2), device, val=0.25) == 0.25).all()
    assert (_init_sample("zeros_", (3, 2), device) == 0).all()
    assert (_init_sample("ones_", (3, 2), device) == 1).all()


@pytest.mark.parametrize("shape", [(300, 200), (64, 16, 3, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_xavier_bounds_and_std_follow_torchs_formulas(shape, gain, device, torch):
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    u = _init_sample("xavier_uniform_", shape, device, gain=gain)
    assert np.abs(u).max() <= math.sqrt(3) * std
    assert abs(u.std() - std) < 0.02 * std
    n = _init_sample("xavier_normal_", shape, device, gain=gain)
    assert abs(n.std() - std) < 0.02 * std and abs(n.mean()) < 0.02 * std


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize(
    "nonlinearity, a", [("leaky_relu", 0), ("leaky_relu", math.sqrt(5)), ("relu", 0), ("tanh", 0), ("linear", 0)]
)
def test_kaiming_bounds_and_std_follow_torchs_formulas(mode, nonlinearity, a, device, torch):
    shape = (120, 40, 3, 3)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    std = torch.nn.init.calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)
    u = _init_sample("kaiming_uniform_", shape, device, a=a, mode=mode, nonlinearity=nonlinearity)
    assert np.abs(u).max() <= math.sqrt(3) * std
    assert abs(u.std() - std) < 0.02 * std
    n = _init_sample("kaiming_normal_", shape, device, a=a, mode=mode, nonlinearity=nonlinearity)
    assert abs(n.std() - std) < 0.02 * std and abs(n.mean()) < 0.02 * std
    th = torch.nn.init.kaiming_uniform_(torch.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    assert abs(float(th.std()) - u.std()) < 0.03 * std


def test_init_is_seeded_and_takes_a_generator():
    trainkit.manual_seed(5)
    a = _init_sample("normal_", (4, 4))
    trainkit.manual_seed(5)
    assert (_init_sample("normal_", (4, 4)) == a).all()
    g = trainkit.Generator().manual_seed(9)
    b = _init_sample("uniform_", (4, 4), generator=g)
    g.manual_seed(9)
    assert (_init_sample("uniform_", (4, 4), generator=g) == b).all()


def test_init_writes_in_place_without_recording_and_keeps_the_dtype():
    p = trainkit.layers.Parameter(trainkit.empty(5, 4, dtype=trainkit.float64))
    version = p._version
    out = init.kaiming_normal_(p)
    assert out is p and p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p.dtype == trainkit.float64 and p._version > version
    init.zeros_(p)
    assert not to_numpy(p).any()


def test_kaiming_on_an_empty_tensor_warns_and_does_nothing(torch):
    for lib in (init, torch.nn.init):
        with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
            lib.kaiming_uniform_((trainkit if lib is init else torch).empty(0, 3))


def test_softmax_layer_without_dim_warns_and_picks_torchs_dim(torch, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    outs = []
    for lib in (trainkit, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs.append(_nn(lib).Softmax()(lib.tensor(x)))
        assert any("Implicit dimension choice for softmax" in str(w.message) for w in caught)
    _close(*outs, "implicit-dim softmax")
