"""SiLU, ELU, Mish, Hardswish, PReLU and Softplus (the layers and their functions) against PyTorch: values, node
names and gradients in float32 and float64, at the edges (0, the corners of hardswish, +-inf, nan, large
magnitudes), the ``inplace`` forms, finite differences of first and second derivatives, reprs, PReLU's parameter
and state_dict, and the errors.

``parity`` is shared with tests/test_similarity.py and tests/test_kl_div.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck

TOLERANCES = {"float32": (2e-5, 1e-6), "float64": (1e-10, 1e-12)}


def F(lib):
    return lib.nn.functional


def make(lib, array, dtype, requires_grad):
    t = lib.tensor(np.asarray(array))
    if t.is_floating_point():
        t = t.to(getattr(lib, dtype))
    return t.requires_grad_(requires_grad and t.is_floating_point())


def parity(torch, fn, *arrays, dtype="float64", grad=None, node=True, tol=None, seed=0):
    """``fn(lib, *tensors)`` on trainkit and on torch, from the same ``arrays`` in ``dtype`` (integer arrays stay
    integers): the values, dtype and shape, the node name (``node``), and after backward of the same random
    weighting of the output, each input's gradient (``grad``: which inputs require grad; default all floating).
    Returns both outputs."""
    grad = grad or (True,) * len(arrays)
    rtol, atol = tol or TOLERANCES[dtype]
    results = {}
    for lib in (trainkit, torch):
        inputs = [make(lib, a, dtype, g) for a, g in zip(arrays, grad)]
        out = fn(lib, *inputs)
        results[lib] = (inputs, out)
    (ours_in, ours), (theirs_in, theirs) = results[trainkit], results[torch]
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=rtol, atol=atol, equal_nan=True)
    if node and theirs.grad_fn is not None:
        assert ours.grad_fn.name() == theirs.grad_fn.name()
    if theirs.requires_grad:
        weights = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(theirs.shape))
        for lib, (_, out) in results.items():
            (out * make(lib, weights, dtype, False).to(out.dtype)).sum().backward()
        for a, b in zip(ours_in, theirs_in):
            if b.grad is None:
                assert a.grad is None
                continue
            assert a.grad is not None
            np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), rtol=rtol, atol=atol, equal_nan=True)
    return ours, theirs


_rng = np.random.default_rng(0)
X = _rng.standard_normal((3, 5)) * 3
IMAGE = _rng.standard_normal((2, 3, 4, 2))
# the edges: signed zero, the corners of hardswish, tiny and huge magnitudes, and the infinities
EDGES = np.array([-np.inf, -1e4, -100.0, -20.0, -3.0, -1.0, -1e-3, -0.0, 0.0, 1e-3, 1.0, 3.0, 20.0, 100.0, np.inf])
# PyTorch's vectorised loops and its scalar loop (the last elements of a tensor) disagree on some gradients at nan:
# a nan first in a long tensor meets the vectorised loop, which the bulk of any real tensor goes through
NAN = np.concatenate([[np.nan], np.linspace(-2, 2, 63)])

ACTIVATIONS = {
    "silu": lambda L, x: F(L).silu(x),
    "mish": lambda L, x: F(L).mish(x),
    "hardswish": lambda L, x: F(L).hardswish(x),
    "elu": lambda L, x: F(L).elu(x),
    "elu-alpha": lambda L, x: F(L).elu(x, alpha=0.5),
    "elu-negative-alpha": lambda L, x: F(L).elu(x, -0.7),
    "elu-zero-alpha": lambda L, x: F(L).elu(x, alpha=0.0),
    "prelu-one": lambda L, x: F(L).prelu(x, L.tensor([0.25], dtype=x.dtype)),
    "SiLU": lambda L, x: L.nn.SiLU()(x),
    "Mish": lambda L, x: L.nn.Mish()(x),
    "Hardswish": lambda L, x: L.nn.Hardswish()(x),
    "ELU": lambda L, x: L.nn.ELU(alpha=2.0)(x),
    "Softplus": lambda L, x: L.nn.Softplus()(x),
    "Softplus-beta": lambda L, x: L.nn.Softplus(beta=2, threshold=5)(x),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_values_gradients_and_nodes_match_torch(torch, name, dtype):
    parity(torch, ACTIVATIONS[name], X, dtype=dtype)


# the weighted sum that parity() differentiates adds prelu's -inf and inf outputs: nan, where NumPy also warns
@pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_edges_match_torch(torch, name, dtype):
    parity(torch, ACTIVATIONS[name], EDGES, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["silu", "mish", "hardswish", "elu", "elu-alpha", "prelu-one", "Softplus"])
def test_nan_propagates_as_in_torch(torch, name, dtype):
    parity(torch, ACTIVATIONS[name], NAN, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inplace_elu_of_nan_as_in_torch(torch, dtype):
    parity(torch, lambda L, x: F(L).elu(x * 1, inplace=True), NAN, dtype=dtype)


def test_float32_stays_float32():
    x = trainkit.randn(4, 3, requires_grad=True)
    for out in (
        trainkit.nn.functional.silu(x),
        trainkit.nn.functional.mish(x),
        trainkit.nn.functional.hardswish(x),
        trainkit.nn.functional.elu(x),
        trainkit.nn.PReLU(3)(x),
        trainkit.nn.Softplus()(x),
    ):
        assert out.dtype == trainkit.float32
        (grad,) = trainkit.autograd.grad(out.sum(), x)
        assert grad.dtype == trainkit.float32


# -------------------------------------------------------------------------------------------------- PReLU
PRELU = {
    "per-channel-4d": (lambda L, x, w: F(L).prelu(x, w), IMAGE, np.array([0.1, -0.5, 2.0])),
    "per-channel-2d": (lambda L, x, w: F(L).prelu(x, w), X.T[:4, :3], np.array([0.1, 0.3, 0.7])),
    "one-weight-4d": (lambda L, x, w: F(L).prelu(x, w), IMAGE, np.array([0.2])),
    "0-d-weight": (lambda L, x, w: F(L).prelu(x, w), IMAGE, np.array(0.2)),
    "1-d-input": (lambda L, x, w: F(L).prelu(x, w), X[0], np.array([0.3])),
    "0-d-input": (lambda L, x, w: F(L).prelu(x, w), np.array(-2.0), np.array([0.3])),
    "0-d-both": (lambda L, x, w: F(L).prelu(x, w), np.array(-2.0), np.array(0.3)),
    "zeros": (lambda L, x, w: F(L).prelu(x, w), np.array([[0.0, -0.0, 1.0]]).T, np.array([0.4])),
    "keywords": (lambda L, x, w: F(L).prelu(input=x, weight=w), IMAGE, np.array([0.2, 0.3, 0.4])),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", PRELU)
def test_prelu_matches_torch_with_the_weight_gradient(torch, name, dtype):
    fn, x, w = PRELU[name]
    parity(torch, fn, x, w, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prelu_layer_matches_torch(torch, dtype):
    def run(L, x):
        layer = L.nn.PReLU(3, init=0.1, dtype=getattr(L, dtype))
        with L.no_grad():
            layer.weight.copy_(L.tensor([0.1, -0.2, 0.3]))
        out = layer(x)
        out.sum().backward()
        return layer, out

    ours, out = run(trainkit, make(trainkit, IMAGE, dtype, True))
    theirs, expected = run(torch, make(torch, IMAGE, dtype, True))
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), rtol=rtol, atol=atol)
    np.testing.assert_allclose(to_numpy(ours.weight.grad), to_numpy(theirs.weight.grad), rtol=rtol, atol=atol)
    assert out.grad_fn.name() == expected.grad_fn.name() == "PreluKernelBackward0"
    names = [[type(f).__name__ for f, _ in o.grad_fn.next_functions] for o in (out, expected)]
    assert names[0] == names[1] == ["AccumulateGrad", "ViewBackward0"]


def test_prelu_layer_parameter_and_state_dict(torch):
    ours, theirs = trainkit.nn.PReLU(), torch.nn.PReLU()
    assert isinstance(ours.weight, trainkit.nn.Parameter) and ours.weight.requires_grad
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert [n for n, _ in ours.named_parameters()] == ["weight"]
    np.testing.assert_array_equal(to_numpy(ours.weight), to_numpy(theirs.weight))
    assert (ours.num_parameters, ours.init) == (theirs.num_parameters, theirs.init) == (1, 0.25)
    layer = trainkit.nn.PReLU(4, init=-0.5, dtype=trainkit.float64)
    assert layer.weight.dtype == trainkit.float64 and layer.weight.tolist() == [-0.5] * 4
    with trainkit.no_grad():
        layer.weight.fill_(3.0)
    layer.reset_parameters()
    assert layer.weight.tolist() == [-0.5] * 4
    # a state_dict of PyTorch's loads into ours
    layer = trainkit.nn.PReLU(3)
    layer.load_state_dict({"weight": trainkit.tensor(torch.nn.PReLU(3, init=0.7).weight.detach().numpy())})
    np.testing.assert_allclose(to_numpy(layer.weight), 0.7, rtol=1e-6)


def test_prelu_layer_errors_match_torch(torch):
    assert_same_error(torch, lambda L, dev: L.nn.PReLU(2.5), "float")
    assert_same_error(torch, lambda L, dev: L.nn.PReLU(-1), "negative dimension -1")
    assert_same_error(torch, lambda L, dev: L.nn.PReLU(3)(L.randn(2, 4)), "parameter numbers = 3", "channel size = 4")


PRELU_ERRORS = {
    "count-vs-channels": (
        lambda L: F(L).prelu(L.randn(2, 3, 4), L.rand(4)),
        "parameter numbers = 4",
        "channel size = 3",
    ),
    "vector-input": (lambda L: F(L).prelu(L.randn(3), L.rand(3)), "parameter numbers = 3", "channel size = 1"),
    "empty-weight": (lambda L: F(L).prelu(L.randn(2, 3), L.rand(0)), "parameter numbers = 0"),
    "scalar-input": (lambda L: F(L).prelu(L.randn(()), L.rand(3)), "zero-dim input"),
    "2-d-weight": (lambda L: F(L).prelu(L.randn(2, 3, 4), L.rand(1, 3)), "scalar or 1D", "ndim = 2"),
    "dtypes": (lambda L: F(L).prelu(L.randn(2, 3), L.rand(3, dtype=L.float64)), "Type promoting", "Float and Double"),
    "int": (
        lambda L: F(L).prelu(L.ones(2, 3, dtype=L.int64), L.ones(3, dtype=L.int64)),
        "\"prelu_cpu\" not implemented for 'Long'",
    ),
    "number-weight": (lambda L: F(L).prelu(L.randn(2, 3), 0.25), "argument 'weight'", "must be Tensor, not float"),
    "no-weight": (lambda L: F(L).prelu(L.randn(2, 3)), "weight"),
}


@pytest.mark.parametrize("name", PRELU_ERRORS)
def test_prelu_errors_match_torch(torch, name):
    fn, *words = PRELU_ERRORS[name]
    assert_same_error(torch, lambda L, dev: fn(L), *words)


# ------------------------------------------------------------------------------------------------ inplace
INPLACE = {
    "silu": lambda L, y: F(L).silu(y, inplace=True),
    "mish": lambda L, y: F(L).mish(y, True),
    "hardswish": lambda L, y: F(L).hardswish(y, inplace=True),
    "elu": lambda L, y: F(L).elu(y, 0.5, True),
    "SiLU": lambda L, y: L.nn.SiLU(inplace=True)(y),
    "Mish": lambda L, y: L.nn.Mish(inplace=True)(y),
    "Hardswish": lambda L, y: L.nn.Hardswish(inplace=True)(y),
    "ELU": lambda L, y: L.nn.ELU(inplace=True)(y),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", INPLACE)
def test_inplace_writes_into_the_input_with_torchs_node(torch, name, dtype):
    def fn(L, x):
        y = x * 1
        out = INPLACE[name](L, y)
        assert out is y and y._version > 0
        return out

    parity(torch, fn, EDGES[1:-1], dtype=dtype)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_outside_the_graph_and_on_a_leaf(torch, name):
    for lib in (trainkit, torch):
        x = lib.tensor([-1.0, 2.0])
        assert INPLACE[name](lib, x) is x
    np.testing.assert_allclose(
        to_numpy(INPLACE[name](trainkit, trainkit.tensor([-1.0, 2.0]))),
        to_numpy(INPLACE[name](torch, torch.tensor([-1.0, 2.0]))),
        rtol=1e-6,
    )
    assert_same_error(
        torch, lambda L, dev: INPLACE[name](L, L.ones(2, requires_grad=True)), "leaf Variable", "in-place"
    )


def test_inplace_elu_with_a_negative_alpha_fails_in_backward_as_torch(torch):
    def fn(L, dev):
        x = L.randn(3, requires_grad=True)
        out = F(L).elu(x * 1, alpha=-0.5, inplace=True)
        out.sum().backward()

    assert_same_error(torch, fn, "In-place elu backward", "negative slope")


@pytest.mark.parametrize("name", ["silu", "mish", "hardswish", "elu", "softplus"])
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_integer_inputs_are_torchs_error(torch, name, dtype):
    kernel = f'"{name}_cpu" not implemented for'
    assert_same_error(torch, lambda L, dev: getattr(F(L), name)(L.ones(3, dtype=getattr(L, dtype))), kernel)


def test_half_precision_keeps_its_dtype():
    x = trainkit.tensor([-1.0, 0.5, 4.0], dtype=trainkit.float16)
    for name in ("silu", "mish", "hardswish", "elu"):
        assert getattr(trainkit.nn.functional, name)(x).dtype == trainkit.float16


# ----------------------------------------------------------------------------------------- finite differences
GRADCHECK = {
    "silu": lambda x: trainkit.nn.functional.silu(x),
    "mish": lambda x: trainkit.nn.functional.mish(x),
    "hardswish": lambda x: trainkit.nn.functional.hardswish(x),
    "elu": lambda x: trainkit.nn.functional.elu(x, alpha=0.7),
    "elu-inplace": lambda x: trainkit.nn.functional.elu(x * 1, alpha=0.7, inplace=True),
    "silu-inplace": lambda x: trainkit.nn.functional.silu(x * 1, inplace=True),
    "prelu": lambda x: trainkit.nn.functional.prelu(x, trainkit.tensor([0.2, -0.3, 0.6], dtype=trainkit.float64)),
}


@pytest.mark.parametrize("name", GRADCHECK)
def test_gradcheck_float64(name):
    # away from the kinks at 0 and +-3, where finite differences straddle two pieces
    values = np.random.default_rng(1).uniform(0.2, 2.8, (2, 3, 2)) * np.where(np.arange(12) % 2, 1, -1).reshape(2, 3, 2)
    x = trainkit.tensor(values, dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(GRADCHECK[name], (x,))
    assert gradgradcheck(GRADCHECK[name], (x,))


def test_prelu_gradcheck_for_the_weight():
    x = trainkit.tensor(np.random.default_rng(2).uniform(0.2, 2.0, (2, 3, 4)) * -1, dtype=trainkit.float64)
    x[0, 0] *= -1
    w = trainkit.tensor([0.2, -0.3, 0.6], dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda w: trainkit.nn.functional.prelu(x, w), (w,))
    x.requires_grad_()
    assert gradgradcheck(lambda x, w: trainkit.nn.functional.prelu(x, w), (x, w))


# --------------------------------------------------------------------------------------------------- reprs
REPRS = [
    "SiLU()",
    "SiLU(inplace=True)",
    "Mish()",
    "Mish(True)",
    "Hardswish()",
    "Hardswish(inplace=True)",
    "ELU()",
    "ELU(alpha=0.5)",
    "ELU(2, True)",
    "PReLU()",
    "PReLU(num_parameters=3, init=0.1)",
    "Softplus()",
    "Softplus(beta=2, threshold=10)",
    "Softplus(0.5)",
]


@pytest.mark.parametrize("expression", REPRS)
def test_repr_matches_torch(torch, expression):
    assert repr(eval(f"trainkit.nn.{expression}")) == repr(eval(f"torch.nn.{expression}"))


def test_layers_in_a_sequential_train(torch):
    model = trainkit.nn.Sequential(
        trainkit.nn.Linear(4, 6), trainkit.nn.SiLU(), trainkit.nn.PReLU(6), trainkit.nn.Mish(), trainkit.nn.Linear(6, 1)
    )
    assert "(2): PReLU(num_parameters=6)" in repr(model)
    x = trainkit.randn(8, 4)
    loss = model(x).pow(2).mean()
    loss.backward()
    assert model[2].weight.grad is not None and model[2].weight.grad.shape == (6,)


@pytest.mark.parametrize("name", ["silu", "mish", "hardswish", "elu", "softplus", "gelu", "leaky_relu"])
def test_a_list_is_torchs_type_error(torch, name):
    assert_same_error(torch, lambda L, dev: getattr(F(L), name)([1.0, 2.0]), f"{name}(): argument 'input'", "list")


ON_DEVICE = {
    "silu": lambda x: trainkit.nn.functional.silu(x),
    "mish": lambda x: trainkit.nn.functional.mish(x),
    "hardswish": lambda x: trainkit.nn.functional.hardswish(x * 3),
    "elu": lambda x: trainkit.nn.functional.elu(x, 0.5),
    "elu-inplace": lambda x: trainkit.nn.functional.elu(x * 1, 0.5, inplace=True),
    "prelu": lambda x: trainkit.nn.functional.prelu(x, x.new_tensor([0.1, 0.2, 0.3])),
    "normalize": lambda x: trainkit.nn.functional.normalize(x),
    "cosine": lambda x: trainkit.nn.functional.cosine_similarity(x, x.flip(0)),
    "kl_div": lambda x: trainkit.nn.functional.kl_div(x.log_softmax(1), x.softmax(1).flip(0), reduction="batchmean"),
}


@pytest.mark.parametrize("name", ON_DEVICE)
def test_the_device_gives_the_hosts_values_and_gradients(device, name):
    values = np.random.default_rng(4).standard_normal((4, 3))
    results = []
    for dev in ("cpu", device):
        x = trainkit.tensor(values, device=dev, requires_grad=True)
        out = ON_DEVICE[name](x)
        assert out.device.type == dev
        out.sum().backward()
        results.append((to_numpy(out), to_numpy(x.grad)))
    for ours, host in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, host, rtol=1e-5, atol=1e-6)


SECOND = {
    **{name: ACTIVATIONS[name] for name in ("silu", "mish", "hardswish", "elu", "elu-alpha", "Softplus")},
    "elu-inplace": lambda L, x: F(L).elu(x * 1, alpha=0.7, inplace=True),
}
# finite values, the kinks (0, +-3) and tails included
SMOOTH_EDGES = np.array([-30.0, -3.0, -2.5, -1.0, -1e-3, -0.0, 0.0, 1e-3, 1.0, 2.5, 3.0, 30.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", SECOND)
def test_second_derivatives_match_torch(torch, name, dtype):
    results = []
    for lib in (trainkit, torch):
        x = make(lib, SMOOTH_EDGES, dtype, True)
        weights = make(lib, np.linspace(0.5, 1.5, x.numel()), dtype, False)
        out = SECOND[name](lib, x)
        (g,) = lib.autograd.grad((out * weights.reshape(out.shape)).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * weights.flip(0)).sum(), x)
        results.append((to_numpy(g), to_numpy(gg), g.grad_fn.name()))
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=rtol, atol=atol)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=rtol, atol=atol)
    if name.startswith("elu"):
        assert results[0][2] == results[1][2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prelu_second_derivatives_match_torch(torch, dtype):
    """dx depends on the weight and dw on x: the mixed second derivatives, at 0 too (where PyTorch's second
    derivative takes the positive side, its first the negative one)."""
    results = []
    for lib in (trainkit, torch):
        x = make(lib, SMOOTH_EDGES.reshape(4, 3), dtype, True)
        w = make(lib, [0.1, -0.2, 0.3], dtype, True)
        weights = make(lib, np.linspace(0.5, 1.5, 12).reshape(4, 3), dtype, False)
        gx, gw = lib.autograd.grad((F(lib).prelu(x, w) * weights).sum(), (x, w), create_graph=True)
        ggx, ggw = lib.autograd.grad((gx * weights.flip(0)).sum() + (gw * gw).sum(), (x, w))
        results.append([to_numpy(t) for t in (gx, gw, ggx, ggw)])
        assert gx.grad_fn.name() == "PreluKernelBackwardBackward0"
    rtol, atol = TOLERANCES[dtype]
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
