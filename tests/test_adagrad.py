"""optim.Adagrad against PyTorch: every step of a small MLP, its state and state dict, its errors, and the command."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.optim
from trainkit.registry import OPTIMIZERS

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"w1": (4, 6), "b1": (6,), "w2": (6, 3), "b2": (3,)}
RTOL, ATOL = 2e-5, 2e-6


def make_model(lib, dev, dtype="float32"):
    rng = np.random.default_rng(0)
    arrays = {name: (rng.standard_normal(shape) * 0.5).astype(dtype) for name, shape in SHAPES.items()}
    params = [lib.tensor(arrays[name], device=dev, requires_grad=True) for name in SHAPES]
    x = lib.tensor(rng.standard_normal((16, 4)).astype(dtype), device=dev)
    y = lib.tensor(rng.standard_normal((16, 3)).astype(dtype), device=dev)
    return params, x, y


def loss_of(lib, params, x, y):
    w1, b1, w2, b2 = params
    return ((lib.relu(x @ w1 + b1) @ w2 + b2 - y) ** 2).mean()


def groups_of(params, groups):
    if groups is None:
        return params
    return [{"params": [params[i] for i in idx], **opts} for idx, opts in groups]


def train(lib, dev, kwargs, groups=None, steps=12, dtype="float32"):
    params, x, y = make_model(lib, dev, dtype)
    opt = lib.optim.Adagrad(groups_of(params, groups), **kwargs)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss_of(lib, params, x, y).backward()
        opt.step()
        history.append([to_numpy(p).copy() for p in params])
    return history, opt, params


CASES = [
    ({}, None),
    ({"lr": 0.1}, None),
    ({"lr": 0.1, "lr_decay": 0.05}, None),
    ({"lr": 0.1, "weight_decay": 0.1}, None),
    ({"lr": 0.1, "initial_accumulator_value": 0.5}, None),
    ({"lr": 0.1, "eps": 1e-3}, None),
    ({"lr": 0.1, "maximize": True}, None),
    ({"lr": 0.1}, [((0, 1), {}), ((2, 3), {"lr": 0.02, "lr_decay": 0.1, "weight_decay": 0.01})]),
    ({"lr": 0.1, "initial_accumulator_value": 0.25}, [((0, 1), {"eps": 1e-4}), ((2, 3), {"maximize": True})]),
]


def _id(case):
    kwargs, groups = case
    return ",".join(f"{k}={v}" for k, v in kwargs.items()) + (",groups" if groups else "")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_step_matches_torch(torch, device, case):
    kwargs, groups = case
    ours, _, _ = train(trainkit, device, kwargs, groups)
    theirs, _, _ = train(torch, "cpu", kwargs, groups)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for p, q in zip(a, b):
            np.testing.assert_allclose(p, q, rtol=RTOL, atol=ATOL, err_msg=f"step {step}")


def test_float64_steps_match_torch(torch, device):
    kwargs = {"lr": 0.2, "lr_decay": 0.01, "weight_decay": 0.05, "initial_accumulator_value": 0.1}
    ours, opt, params = train(trainkit, device, kwargs, dtype="float64")
    theirs, _, _ = train(torch, "cpu", kwargs, dtype="float64")
    for a, b in zip(ours, theirs):
        for p, q in zip(a, b):
            assert p.dtype == np.float64
            np.testing.assert_allclose(p, q, rtol=1e-12, atol=1e-13)
    assert opt.state[params[0]]["sum"].dtype == trainkit.float64
    assert opt.state[params[0]]["step"].dtype == trainkit.float32


def test_float32_stays_float32(device):
    _, opt, params = train(trainkit, device, {"lr": 0.1}, steps=2)
    assert all(p.dtype == trainkit.float32 for p in params)
    assert all(opt.state[p]["sum"].dtype == trainkit.float32 for p in params)


def test_state_exists_from_the_constructor_like_torch(torch):
    params, _, _ = make_model(trainkit, "cpu")
    tparams, _, _ = make_model(torch, "cpu")
    opt = trainkit.optim.Adagrad(params, initial_accumulator_value=0.3)
    topt = torch.optim.Adagrad(tparams, initial_accumulator_value=0.3)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"]) == [0, 1, 2, 3]
    for key, state in tsd["state"].items():
        assert sorted(sd["state"][key]) == sorted(state) == ["step", "sum"]
        np.testing.assert_array_equal(to_numpy(sd["state"][key]["sum"]), to_numpy(state["sum"]))
        assert sd["state"][key]["step"].item() == state["step"].item() == 0


def test_state_dict_layout_matches_torch(torch, device):
    groups = [((0, 1), {}), ((2, 3), {"lr": 0.02, "lr_decay": 0.1})]
    _, opt, _ = train(trainkit, device, {"lr": 0.1, "weight_decay": 0.01}, groups, steps=3)
    _, topt, _ = train(torch, "cpu", {"lr": 0.1, "weight_decay": 0.01}, groups, steps=3)
    sd, tsd = opt.state_dict(), topt.state_dict()
    for key, state in tsd["state"].items():
        assert sorted(sd["state"][key]) == sorted(state)
        assert sd["state"][key]["step"].item() == state["step"].item() == 3
        np.testing.assert_allclose(to_numpy(sd["state"][key]["sum"]), to_numpy(state["sum"]), rtol=RTOL, atol=ATOL)
    torch_only = {"foreach", "differentiable", "fused"}
    for group, tgroup in zip(sd["param_groups"], tsd["param_groups"]):
        assert set(group) == set(tgroup) - torch_only
        assert {k: group[k] for k in group} == {k: tgroup[k] for k in group}


def test_state_dict_round_trip_continues_identically(device):
    kwargs, groups = {"lr": 0.1, "lr_decay": 0.02}, [((0, 1), {}), ((2, 3), {"lr": 0.05})]
    params, x, y = make_model(trainkit, device)
    opt = trainkit.optim.Adagrad(groups_of(params, groups), **kwargs)
    for _ in range(3):
        opt.zero_grad()
        loss_of(trainkit, params, x, y).backward()
        opt.step()
    copies = [p.detach().clone().requires_grad_() for p in params]
    resumed = trainkit.optim.Adagrad(groups_of(copies, groups), **kwargs)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    for _ in range(3):
        for o, ps in ((opt, params), (resumed, copies)):
            o.zero_grad()
            loss_of(trainkit, ps, x, y).backward()
            o.step()
    for p, c in zip(params, copies):
        np.testing.assert_array_equal(to_numpy(c), to_numpy(p))
        assert resumed.state[c]["step"].item() == 6
        assert resumed.state[c]["sum"] is not opt.state[p]["sum"]


def test_group_added_later_starts_from_the_constructor_default_like_torch(torch):
    def run(lib):
        params, x, y = make_model(lib, "cpu")
        opt = lib.optim.Adagrad(params[:2], lr=0.1, initial_accumulator_value=0.5)
        opt.add_param_group({"params": params[2:], "initial_accumulator_value": 2.0, "lr": 0.05})
        for _ in range(4):
            opt.zero_grad()
            loss_of(lib, params, x, y).backward()
            opt.step()
        return [to_numpy(p) for p in params], [to_numpy(opt.state[p]["sum"]) for p in params]

    (ours, our_sums), (theirs, their_sums) = run(trainkit), run(torch)
    for a, b in zip(ours + our_sums, theirs + their_sums):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_tensor_learning_rate_matches_torch(torch):
    def run(lib):
        params, x, y = make_model(lib, "cpu")
        opt = lib.optim.Adagrad(params, lr=lib.tensor(0.1))
        for _ in range(3):
            opt.zero_grad()
            loss_of(lib, params, x, y).backward()
            opt.step()
        return [to_numpy(p) for p in params]

    for a, b in zip(run(trainkit), run(torch)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_step_bumps_versions_and_builds_no_graph():
    params, x, y = make_model(trainkit, "cpu")
    opt = trainkit.optim.Adagrad(params)
    loss_of(trainkit, params, x, y).backward()
    before = [p._version for p in params]
    opt.step()
    assert [p._version for p in params] == [v + 1 for v in before]
    assert all(p.grad_fn is None and p.is_leaf for p in params)


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"lr": -0.1}, ["Invalid learning rate"]),
        ({"lr_decay": -1.0}, ["Invalid lr_decay value"]),
        ({"weight_decay": -1.0}, ["Invalid weight_decay value"]),
        ({"initial_accumulator_value": -1.0}, ["Invalid initial_accumulator_value value"]),
        ({"eps": -1.0}, ["Invalid epsilon value"]),
    ],
)
def test_bad_hyper_parameters_raise_like_torch(torch, kwargs, words):
    assert_same_error(torch, lambda lib, dev: lib.optim.Adagrad([lib.zeros(2, requires_grad=True)], **kwargs), *words)


def test_tensor_lr_of_several_elements_raises_like_torch(torch):
    assert_same_error(
        torch,
        lambda lib, dev: lib.optim.Adagrad([lib.zeros(2, requires_grad=True)], lr=lib.tensor([0.1, 0.2])),
        "lr must be 1-element",
    )


def test_the_registry_and_repr_know_it():
    assert OPTIMIZERS.get("Adagrad") is trainkit.optim.Adagrad
    text = repr(trainkit.optim.Adagrad([trainkit.zeros(1, requires_grad=True)], lr=0.5))
    assert text.startswith("Adagrad (") and "lr: 0.5" in text and "initial_accumulator_value: 0" in text


def test_a_config_trains_and_resumes_with_adagrad(tmp_path):
    config = tmp_path / "adagrad.yaml"
    config.write_text(
        (ROOT / "configs" / "regression.yaml")
        .read_text()
        .replace("../examples", str(ROOT / "examples"))
        .replace("name: SGD\n  lr: 0.2", "name: Adagrad\n  lr: 0.3\n  options: {lr_decay: 0.001}")
    )

    def command(*args):
        return subprocess.run(
            [sys.executable, "-m", "trainkit.cli", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's trainkit, whichever is installed
        )

    result = command("train", config, "--set", "trainer.epochs=4", "--set", f"output_dir={tmp_path / 'runs'}")
    assert result.returncode == 0, result.stderr
    run = tmp_path / "runs" / "regression" / "version_0"
    assert "Adagrad" in (run / "config.yaml").read_text()
    result = command("train", config, "--resume", run, "--set", "trainer.epochs=6")
    assert result.returncode == 0, result.stderr
    assert "done: 6 epochs" in result.stdout
