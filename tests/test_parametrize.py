"""nn.utils.parametrize as torch.nn.utils.parametrize: values, gradients, state dicts and errors compared with
PyTorch, and state dicts of parametrized models moving between the two through .pt files."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import trainkit
from tests.conftest import assert_same_error, to_numpy

DTYPES = ["float32", "float64"]


def parametrizations(lib):
    """The same parametrizations written against either library."""
    nn = lib.nn

    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

    class Doubled(nn.Module):
        def forward(self, x):
            return 2 * x

        def right_inverse(self, y):
            return y / 2

    class Outer(nn.Module):
        """weight = a bᵀ + c, from three tensors (right_inverse returns a sequence)."""

        def forward(self, a, b, c):
            return a.unsqueeze(-1) * b.unsqueeze(0) + c

        def right_inverse(self, w):
            return w[:, 0].clone(), lib.ones(w.shape[1], dtype=w.dtype), w - w[:, :1]

    class Flatten(nn.Module):
        def forward(self, x):
            return x.reshape(-1)

    class WrongInverse(nn.Module):
        def forward(self, x):
            return x

        def right_inverse(self, y):
            return y.reshape(-1)

    return Symmetric, Doubled, Outer, Flatten, WrongInverse


def same_linear(lib, dtype, n_in=4, n_out=4):
    lib.manual_seed(0)
    layer = lib.nn.Linear(n_in, n_out).to(getattr(lib, dtype))
    return layer


def copy_state(src, dst):
    """Copy a torch module's state into a trainkit one (or back) by key."""
    state = {k: v.detach().cpu().numpy() for k, v in src.state_dict().items()}
    lib = trainkit if isinstance(dst, trainkit.nn.Module) else __import__("torch")
    dst.load_state_dict({k: lib.tensor(v) for k, v in state.items()})


def assert_close(a, b, dtype):
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["Symmetric", "Doubled", "Outer", "chain"])
def test_values_and_gradients_equal_torchs(torch, kind, dtype):
    results = {}
    layers = {"torch": same_linear(torch, dtype), "trainkit": same_linear(trainkit, dtype)}
    copy_state(layers["torch"], layers["trainkit"])
    for lib in (torch, trainkit):
        P = lib.nn.utils.parametrize
        symmetric, doubled, outer, _, _ = parametrizations(lib)
        layer = layers[lib.__name__]
        chosen = {"Symmetric": [symmetric], "Doubled": [doubled], "Outer": [outer], "chain": [doubled, symmetric]}
        for cls in chosen[kind]:
            P.register_parametrization(layer, "weight", cls())
        x = lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=getattr(lib, dtype))
        out = layer(x)
        (out * out).sum().backward()
        grads = {name: p.grad for name, p in layer.named_parameters()}
        results[lib.__name__] = (out, layer.weight, grads, list(layer.state_dict()), type(layer).__name__)
    t_out, t_w, t_grads, t_keys, t_cls = results["torch"]
    k_out, k_w, k_grads, k_keys, k_cls = results["trainkit"]
    assert k_keys == t_keys and k_cls == t_cls == "ParametrizedLinear"
    assert k_out.dtype == getattr(trainkit, dtype)
    assert_close(k_out, t_out, dtype)
    assert_close(k_w, t_w, dtype)
    assert set(k_grads) == set(t_grads)
    for name in t_grads:
        assert_close(k_grads[name], t_grads[name], dtype)


def test_right_inverse_with_several_originals_and_assignment(torch):
    for lib in (torch, trainkit):
        P = lib.nn.utils.parametrize
        _, _, outer, _, _ = parametrizations(lib)
        layer = P.register_parametrization(same_linear(lib, "float64", 3, 2), "weight", outer())
        chain = layer.parametrizations.weight
        assert not chain.is_tensor and chain.ntensors == 3
        assert [n for n, _ in layer.named_parameters()] == [
            "bias",
            "parametrizations.weight.original0",
            "parametrizations.weight.original1",
            "parametrizations.weight.original2",
        ]
        target = lib.arange(6, dtype=lib.float64).reshape(2, 3)
        layer.weight = target  # through right_inverse into the three originals
        np.testing.assert_allclose(to_numpy(layer.weight), to_numpy(target))
        with pytest.raises(ValueError, match="sequence of tensors"):
            P.remove_parametrizations(layer, "weight", leave_parametrized=False)
        P.remove_parametrizations(layer, "weight")
        assert type(layer) is lib.nn.Linear and isinstance(layer.weight, lib.nn.Parameter)
        np.testing.assert_allclose(to_numpy(layer.weight), to_numpy(target))


def test_remove_cached_and_the_class_swap():
    P = trainkit.nn.utils.parametrize
    _, doubled, _, _, _ = parametrizations(trainkit)
    layer = same_linear(trainkit, "float32")
    before = layer.weight.detach().clone()
    P.register_parametrization(layer, "weight", doubled())
    P.register_parametrization(layer, "bias", doubled())
    assert P.is_parametrized(layer) and P.is_parametrized(layer, "bias") and not P.is_parametrized(layer, "x")
    assert P.type_before_parametrizations(layer) is trainkit.nn.Linear
    assert isinstance(layer.parametrizations.weight, P.ParametrizationList)
    np.testing.assert_allclose(to_numpy(layer.weight), to_numpy(before))  # right_inverse kept the value
    np.testing.assert_allclose(to_numpy(layer.parametrizations.weight.original), to_numpy(before) / 2)
    assert "ParametrizationList(" in repr(layer)
    assert layer.weight is not layer.weight
    with P.cached():
        assert layer.weight is layer.weight
        with P.cached():
            assert layer.bias is layer.bias
    assert layer.weight is not layer.weight
    other = trainkit.nn.Linear(4, 4)
    assert not hasattr(other, "parametrizations") and type(other) is trainkit.nn.Linear
    P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    np.testing.assert_allclose(to_numpy(layer.weight), to_numpy(before) / 2)
    assert type(layer).__name__ == "ParametrizedLinear"
    P.remove_parametrizations(layer, "bias")
    assert type(layer) is trainkit.nn.Linear and not hasattr(layer, "parametrizations")
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]


def test_deepcopy_copies_and_pickle_refuses_as_torch():
    P = trainkit.nn.utils.parametrize
    _, doubled, _, _, _ = parametrizations(trainkit)
    layer = P.register_parametrization(same_linear(trainkit, "float32"), "weight", doubled())
    twin = copy.deepcopy(layer)
    assert type(twin) is type(layer)
    assert twin.parametrizations.weight.original is not layer.parametrizations.weight.original
    np.testing.assert_array_equal(to_numpy(twin.weight), to_numpy(layer.weight))
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(layer)


def test_buffer_can_be_parametrized(torch):
    keys = {}
    for lib in (torch, trainkit):
        bn = lib.nn.BatchNorm1d(3)
        _, doubled, _, _, _ = parametrizations(lib)
        lib.nn.utils.parametrize.register_parametrization(bn, "running_var", doubled())
        keys[lib.__name__] = list(bn.state_dict())
        assert dict(bn.named_buffers())["parametrizations.running_var.original"] is not None
        np.testing.assert_allclose(to_numpy(bn.running_var), [1.0, 1.0, 1.0])
    assert keys["trainkit"] == keys["torch"]


@pytest.mark.parametrize(
    "snippet, words",
    [
        ("P.register_parametrization(layer, 'nothing', doubled())", ["does not have a parameter"]),
        ("P.remove_parametrizations(layer, 'weight')", ["does not have a parametrization on weight"]),
        ("P.register_parametrization(layer, 'weight', flat())", ["may not change the shape"]),
        (
            "P.register_parametrization(layer, 'weight', doubled()); "
            "P.register_parametrization(layer, 'weight', wrong())",
            ["right_inverse must have the same shape"],
        ),
        (
            "P.register_parametrization(layer, 'weight', doubled()); "
            "P.register_parametrization(layer, 'weight', flat())",
            ["may not change the shape"],
        ),
        ("P.ParametrizationList([], layer.weight)", ["requires one or more modules"]),
    ],
)
def test_errors_as_torch(torch, snippet, words):
    def run(lib, dev):
        _, doubled, _, flat, wrong = parametrizations(lib)
        P = lib.nn.utils.parametrize
        layer = lib.nn.Linear(3, 3)
        exec(snippet, {"P": P, "layer": layer, "doubled": doubled, "flat": flat, "wrong": wrong})

    assert_same_error(torch, run, *words)


def test_assigning_without_right_inverse_names_the_parametrization(torch):
    def run(lib, dev):
        symmetric, _, _, _, _ = parametrizations(lib)
        layer = lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(2, 2), "weight", symmetric())
        layer.weight = lib.zeros(2, 2)

    assert_same_error(torch, run, "Symmetric does not implement right_inverse")


@pytest.mark.parametrize("direction", ["torch_to_trainkit", "trainkit_to_torch"])
def test_state_dicts_move_through_pt_files(torch, tmp_path, direction):
    def build(lib):
        _, _, outer, _, _ = parametrizations(lib)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        lib.nn.utils.parametrize.register_parametrization(model[0], "weight", outer())
        lib.nn.utils.parametrizations.spectral_norm(model[2])
        return model

    torch.manual_seed(1)
    trainkit.manual_seed(2)
    source_lib, target_lib = (torch, trainkit) if direction == "torch_to_trainkit" else (trainkit, torch)
    source, target = build(source_lib), build(target_lib)
    path = tmp_path / "weights.pt"
    source_lib.save(source.state_dict(), str(path))
    state = target_lib.load(str(path))
    assert list(state) == list(source.state_dict()) == list(target.state_dict())
    assert "0.parametrizations.weight.original1" in state and "2.parametrizations.weight.0._u" in state
    target.load_state_dict(state)
    source.eval()
    target.eval()
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    np.testing.assert_allclose(
        to_numpy(target(target_lib.tensor(x))), to_numpy(source(source_lib.tensor(x))), rtol=1e-5, atol=1e-6
    )


def test_transfer_parametrizations_and_params():
    P = trainkit.nn.utils.parametrize
    _, doubled, _, _, _ = parametrizations(trainkit)
    a = P.register_parametrization(trainkit.nn.Linear(2, 2), "weight", doubled())
    b = P.transfer_parametrizations_and_params(a, trainkit.nn.Linear(2, 2))
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    np.testing.assert_array_equal(to_numpy(b.weight), to_numpy(a.weight))


def test_assigning_a_parameter_to_a_parametrized_name_is_refused_as_torch(torch):
    def run(lib, dev):
        _, doubled, _, _, _ = parametrizations(lib)
        layer = lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(2, 2), "weight", doubled())
        layer.weight = lib.ones(2, 2)  # a plain tensor goes through right_inverse
        assert layer.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
        layer.weight = lib.nn.Parameter(lib.zeros(2, 2))

    assert_same_error(torch, run, "attribute 'weight' already exists")


@pytest.mark.parametrize("outer_kind", ["Outer", "Symmetric"])
def test_gradcheck_through_a_parametrization(outer_kind):
    P = trainkit.nn.utils.parametrize
    symmetric, _, outer, _, _ = parametrizations(trainkit)
    layer = P.register_parametrization(
        same_linear(trainkit, "float64", 3, 3), "weight", outer() if outer_kind == "Outer" else symmetric()
    )
    originals = list(layer.parametrizations.weight.parameters())
    x = trainkit.randn(2, 3, dtype=trainkit.float64)

    def f(*values):
        given = {
            f"parametrizations.weight.{n}": v
            for (n, _), v in zip(layer.parametrizations.weight.named_parameters(), values)
        }
        return trainkit.func.functional_call(layer, given, x)

    inputs = tuple(p.detach().clone().requires_grad_(True) for p in originals)
    assert trainkit.autograd.gradcheck(f, inputs)
