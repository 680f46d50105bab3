"""Weight and spectral normalization, the parametrizations and the older hooks, against PyTorch: values,
gradients, the power iteration's vectors for the same seed, a few SGD steps, state dicts and errors; and a PyTorch
program using them under ``trainkit run-torch``."""

from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pytest

import trainkit
from tests.conftest import assert_same_error, to_numpy
from tests.test_run_torch import run_torch, write

DTYPES = ["float32", "float64"]


def tol(dtype):
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-11, "atol": 1e-12}


def make(lib, kind, dtype):
    """A layer with the same weights in both libraries (torch draws them; trainkit gets a copy)."""
    lib.manual_seed(0)
    layer = {
        "linear": lambda: lib.nn.Linear(5, 4),
        "conv": lambda: lib.nn.Conv2d(2, 3, 3),
        "convT": lambda: lib.nn.ConvTranspose2d(2, 3, 3),
    }[kind]()
    return layer.to(getattr(lib, dtype))


def pair(torch, kind, dtype):
    t_layer, k_layer = make(torch, kind, dtype), make(trainkit, kind, dtype)
    k_layer.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return t_layer, k_layer


def inputs(lib, kind, dtype, seed=0):
    shape = (6, 5) if kind == "linear" else (2, 2, 5, 5)
    x = np.random.default_rng(seed).standard_normal(shape)
    return lib.tensor(x, dtype=getattr(lib, dtype))


def train(lib, layer, kind, dtype, steps=4):
    optimizer = lib.optim.SGD(layer.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss = (layer(inputs(lib, kind, dtype, step)) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind, dim", [("linear", 0), ("linear", 1), ("linear", None), ("conv", 0), ("conv", -1)])
def test_parametrized_weight_norm_values_and_gradients(torch, kind, dim, dtype):
    t_layer, k_layer = pair(torch, kind, dtype)
    torch.nn.utils.parametrizations.weight_norm(t_layer, dim=dim)
    trainkit.nn.utils.parametrizations.weight_norm(k_layer, dim=dim)
    assert list(k_layer.state_dict()) == list(t_layer.state_dict())
    t_out, k_out = t_layer(inputs(torch, kind, dtype)), k_layer(inputs(trainkit, kind, dtype))
    assert k_out.dtype == getattr(trainkit, dtype)
    np.testing.assert_allclose(to_numpy(k_out), to_numpy(t_out), **tol(dtype))
    (t_out**2).sum().backward()
    (k_out**2).sum().backward()
    t_grads, k_grads = dict(t_layer.named_parameters()), dict(k_layer.named_parameters())
    for name, p in t_grads.items():
        assert k_grads[name].shape == p.shape
        np.testing.assert_allclose(to_numpy(k_grads[name].grad), to_numpy(p.grad), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["linear", "conv", "convT"])
def test_parametrized_spectral_norm_same_seed_same_vectors_and_training(torch, kind, dtype):
    t_layer, k_layer = pair(torch, kind, dtype)
    torch.manual_seed(7)
    trainkit.manual_seed(7)
    torch.nn.utils.parametrizations.spectral_norm(t_layer)
    trainkit.nn.utils.parametrizations.spectral_norm(k_layer)
    t_state, k_state = t_layer.state_dict(), k_layer.state_dict()
    assert list(k_state) == list(t_state)
    for key in ("parametrizations.weight.0._u", "parametrizations.weight.0._v"):
        np.testing.assert_allclose(to_numpy(k_state[key]), to_numpy(t_state[key]), **tol(dtype))
    np.testing.assert_allclose(train(trainkit, k_layer, kind, dtype), train(torch, t_layer, kind, dtype), **tol(dtype))
    for key, value in t_layer.state_dict().items():
        np.testing.assert_allclose(to_numpy(k_layer.state_dict()[key]), to_numpy(value), **tol(dtype))
    t_layer.eval()
    k_layer.eval()
    np.testing.assert_allclose(to_numpy(k_layer.weight), to_numpy(t_layer.weight), **tol(dtype))


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_weight_normed_training_gives_torchs_losses(torch, kind):
    t_layer, k_layer = pair(torch, kind, "float32")
    torch.nn.utils.parametrizations.weight_norm(t_layer)
    trainkit.nn.utils.parametrizations.weight_norm(k_layer)
    np.testing.assert_allclose(
        train(trainkit, k_layer, kind, "float32"), train(torch, t_layer, kind, "float32"), rtol=1e-5
    )


def test_spectral_norm_of_a_vector_and_its_errors(torch):
    for lib in (torch, trainkit):
        layer = lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), name="bias")
        np.testing.assert_allclose(np.linalg.norm(to_numpy(layer.bias)), 1.0, rtol=1e-6)
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), name="nothing"),
        "has no parameter or buffer with name 'nothing'",
    )
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), n_power_iterations=0),
        "Expected n_power_iterations to be positive",
    )
    assert_same_error(
        torch, lambda lib, dev: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), dim=2), "out of range"
    )


# ------------------------------------------------------------------------------------------------ the older hooks
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind, dim", [("linear", 0), ("linear", None), ("conv", 1)])
def test_legacy_weight_norm(torch, kind, dim, dtype):
    t_layer, k_layer = pair(torch, kind, dtype)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        torch.nn.utils.weight_norm(t_layer, dim=dim)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm") as caught:
        trainkit.nn.utils.weight_norm(k_layer, dim=dim)
    assert caught[0].filename == __file__  # the warning names the user's line
    assert list(k_layer.state_dict()) == list(t_layer.state_dict()) == ["bias", "weight_g", "weight_v"]
    np.testing.assert_allclose(train(trainkit, k_layer, kind, dtype), train(torch, t_layer, kind, dtype), **tol(dtype))
    torch.nn.utils.remove_weight_norm(t_layer)
    trainkit.nn.utils.remove_weight_norm(k_layer)
    assert [n for n, _ in k_layer.named_parameters()] == [n for n, _ in t_layer.named_parameters()]
    np.testing.assert_allclose(to_numpy(k_layer.weight), to_numpy(t_layer.weight), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["linear", "conv", "convT"])
def test_legacy_spectral_norm(torch, kind, dtype):
    t_layer, k_layer = pair(torch, kind, dtype)
    torch.manual_seed(3)
    trainkit.manual_seed(3)
    torch.nn.utils.spectral_norm(t_layer)
    trainkit.nn.utils.spectral_norm(k_layer)
    assert list(k_layer.state_dict()) == list(t_layer.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    for key in ("weight_u", "weight_v"):
        np.testing.assert_allclose(
            to_numpy(k_layer.state_dict()[key]), to_numpy(t_layer.state_dict()[key]), **tol(dtype)
        )
    np.testing.assert_allclose(train(trainkit, k_layer, kind, dtype), train(torch, t_layer, kind, dtype), **tol(dtype))
    t_layer.eval()
    k_layer.eval()
    t_out, k_out = t_layer(inputs(torch, kind, dtype)), k_layer(inputs(trainkit, kind, dtype))
    np.testing.assert_allclose(to_numpy(k_out), to_numpy(t_out), **tol(dtype))
    torch.nn.utils.remove_spectral_norm(t_layer)
    trainkit.nn.utils.remove_spectral_norm(k_layer)
    assert list(k_layer.state_dict()) == list(t_layer.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(to_numpy(k_layer.weight), to_numpy(t_layer.weight), **tol(dtype))


def test_legacy_spectral_norm_state_dict_through_pt_files(torch, tmp_path):
    t_layer, k_layer = pair(torch, "linear", "float32")
    torch.nn.utils.spectral_norm(t_layer)
    trainkit.nn.utils.spectral_norm(k_layer)
    train(torch, t_layer, "linear", "float32", steps=2)
    torch.save(t_layer.state_dict(), tmp_path / "torch.pt")
    k_layer.load_state_dict(trainkit.load(str(tmp_path / "torch.pt")))
    for layer in (t_layer, k_layer):
        layer.eval()
    x = inputs(torch, "linear", "float32")
    np.testing.assert_allclose(
        to_numpy(k_layer(inputs(trainkit, "linear", "float32"))), to_numpy(t_layer(x)), rtol=1e-5
    )
    trainkit.save(k_layer.state_dict(), str(tmp_path / "trainkit.pt"))
    fresh = torch.nn.utils.spectral_norm(torch.nn.Linear(5, 4)).eval()
    fresh.load_state_dict(torch.load(tmp_path / "trainkit.pt"))
    np.testing.assert_allclose(to_numpy(fresh(x)), to_numpy(t_layer(x)), rtol=1e-5)


def test_legacy_hooks_after_deepcopy_and_their_errors(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        layer = trainkit.nn.utils.weight_norm(trainkit.nn.Linear(3, 2))
        assert_same_error(
            torch,
            lambda lib, dev: copy.deepcopy(lib.nn.utils.weight_norm(lib.nn.Linear(3, 2))),
            "deepcopy",
        )
        with trainkit.no_grad():  # the weight computed without a graph: now the module can be copied, as in torch
            layer(trainkit.ones(1, 3))
        twin = copy.deepcopy(layer)
        trainkit.nn.utils.remove_weight_norm(twin)
        assert [n for n, _ in twin.named_parameters()] == ["bias", "weight"]
        layer.weight_g.data.mul_(0)
        assert float(layer(trainkit.ones(1, 3)).sub(layer.bias).abs().sum()) == 0  # the original still recomputes
        twin.weight.data.fill_(1.0)
        assert float(twin(trainkit.zeros(1, 3)).sub(twin.bias).abs().sum()) == 0

        def twice(lib, dev):
            lib.nn.utils.weight_norm(lib.nn.utils.weight_norm(lib.nn.Linear(2, 2)))

        assert_same_error(torch, twice, "Cannot register two weight_norm hooks on the same parameter weight")
        assert_same_error(
            torch, lambda lib, dev: lib.nn.utils.remove_weight_norm(lib.nn.Linear(2, 2)), "weight_norm of 'weight'"
        )
    assert_same_error(
        torch, lambda lib, dev: lib.nn.utils.remove_spectral_norm(lib.nn.Linear(2, 2)), "spectral_norm of 'weight'"
    )
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.utils.spectral_norm(lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2))),
        "Cannot register two spectral_norm hooks",
    )


# ------------------------------------------------------------------------------------------- a PyTorch program
PROGRAM = """
import torch
import torch.nn as nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import spectral_norm, weight_norm

torch.manual_seed(0)
model = nn.Sequential(weight_norm(nn.Linear(4, 16)), nn.Tanh(), spectral_norm(nn.Linear(16, 1)))
assert parametrize.is_parametrized(model[0], "weight")
print("keys", sorted(model.state_dict()))
x = torch.randn(64, 4)
y = x.sum(dim=1, keepdim=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(5):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")
"""


def test_pytorch_program_with_weight_norm_runs_under_run_torch(torch, tmp_path):
    script = write(tmp_path, "train.py", PROGRAM)
    result = run_torch(script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = {}
    exec_globals: dict = {"print": lambda *a: lines.setdefault("torch", []).append(" ".join(map(str, a)))}
    exec(PROGRAM, exec_globals)
    expected = "\n".join(lines["torch"]) + "\n"
    got_losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", result.stdout)]
    want_losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", expected)]
    assert result.stdout.splitlines()[0] == expected.splitlines()[0]
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-4)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_gradcheck_of_weight_norm(dim):
    layer = trainkit.nn.utils.parametrizations.weight_norm(trainkit.nn.Linear(3, 4).double(), dim=dim)
    names = [f"parametrizations.weight.original{i}" for i in range(2)]
    inputs = tuple(dict(layer.named_parameters())[n].detach().clone().requires_grad_(True) for n in names)
    x = trainkit.randn(2, 3, dtype=trainkit.float64)
    assert trainkit.autograd.gradcheck(
        lambda g, v: trainkit.func.functional_call(layer, dict(zip(names, (g, v))), x), inputs
    )


def test_a_legacy_weight_norm_file_loads_into_the_parametrization(torch, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 2))
    torch.save(old.state_dict(), tmp_path / "old.pt")
    state = trainkit.load(str(tmp_path / "old.pt"))
    layer = trainkit.nn.utils.parametrizations.weight_norm(trainkit.nn.Linear(3, 2))
    model = trainkit.nn.Sequential(layer)
    given = {f"0.{k}": v for k, v in state.items()}
    model.load_state_dict(given)
    assert "0.weight_g" in given  # the caller's dict is left as it was
    np.testing.assert_allclose(to_numpy(layer.weight), to_numpy(old.weight), rtol=1e-6)
