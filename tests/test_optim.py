"""Optimizers and gradient clipping against PyTorch: the same small MLP and data, step for step.

The "model" is four leaf tensors (a 2-layer MLP written with matmul and relu) and an MSE loss, built from the same
NumPy values in both libraries; trainkit runs on the ``device`` fixture, PyTorch on the CPU.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.optim  # noqa: F401  (makes trainkit.optim an attribute, like torch.optim)
from trainkit.layers.clip_grad import clip_grad_norm_, clip_grad_value_

STEPS = 20
# End to end, the gradients themselves differ in the last bits (matmul summation order), and adaptive optimizers
# pass such differences on; given identical gradients the updates agree to a few float32 ulps.
RTOL, ATOL = 2e-5, 2e-6
STEP_RTOL, STEP_ATOL = 2e-6, 2e-7

SHAPES = {"w1": (4, 6), "b1": (6,), "w2": (6, 3), "b2": (3,)}


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {name: (rng.standard_normal(shape) * 0.5).astype(np.float32) for name, shape in SHAPES.items()}
    out["x"] = rng.standard_normal((16, 4)).astype(np.float32)
    out["y"] = rng.standard_normal((16, 3)).astype(np.float32)
    return out


def make_model(lib, dev, seed: int = 0):
    """(params, x, y): the MLP's leaf tensors and the data, on ``dev``."""
    a = _arrays(seed)
    params = [lib.tensor(a[name], device=dev, requires_grad=True) for name in SHAPES]
    return params, lib.tensor(a["x"], device=dev), lib.tensor(a["y"], device=dev)


def mse_loss(lib, params, x, y):
    w1, b1, w2, b2 = params
    out = lib.relu(x @ w1 + b1) @ w2 + b2
    return ((out - y) ** 2).mean()


def groups_of(params, spec):
    """``spec``: None (all params in one list) or [(indices, overrides), ...] for parameter groups."""
    if spec is None:
        return params
    return [{"params": [params[i] for i in idx], **opts} for idx, opts in spec]


def make_opt(lib, params, name, kwargs, groups=None):
    return getattr(lib.optim, name)(groups_of(params, groups), **kwargs)


def train(lib, dev, name, kwargs, groups=None, steps=STEPS, set_to_none=True):
    """Parameter values after each step, plus the final optimizer and params."""
    params, x, y = make_model(lib, dev)
    opt = make_opt(lib, params, name, kwargs, groups)
    history = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        mse_loss(lib, params, x, y).backward()
        opt.step()
        history.append([to_numpy(p).copy() for p in params])
    return history, opt, params


TWO_GROUPS = [((0, 1), {}), ((2, 3), {"lr": 0.003})]

CASES = [
    ("SGD", {"lr": 0.1}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, None),
    ("SGD", {"lr": 0.1, "weight_decay": 0.05}, None),
    ("SGD", {"lr": 0.005, "momentum": 0.8, "weight_decay": 0.01, "nesterov": True, "maximize": True}, None),
    ("SGD", {"lr": 0.01, "maximize": True}, None),
    ("SGD", {"lr": 0.1}, [((0, 1), {"momentum": 0.9}), ((2, 3), {"lr": 0.02, "weight_decay": 0.1})]),
    ("Adam", {"lr": 0.01}, None),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}, None),
    ("Adam", {"lr": 0.01, "amsgrad": True}, None),
    ("Adam", {"lr": 0.01, "maximize": True}, None),
    ("Adam", {"lr": 0.02, "betas": (0.5, 0.9), "eps": 1e-6, "weight_decay": 0.01, "amsgrad": True}, None),
    ("Adam", {"lr": 0.01}, [((0, 1), {"amsgrad": True}), ((2, 3), {"lr": 0.001, "betas": (0.8, 0.99)})]),
    ("AdamW", {"lr": 0.01}, None),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.3}, None),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "maximize": True}, None),
    ("AdamW", {"lr": 0.01}, TWO_GROUPS),
    ("RMSprop", {"lr": 0.01}, None),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}, None),
    ("RMSprop", {"lr": 0.01, "centered": True}, None),
    ("RMSprop", {"lr": 0.005, "centered": True, "momentum": 0.5, "weight_decay": 0.1}, None),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "maximize": True}, None),
    ("RMSprop", {"lr": 0.01}, [((0, 1), {"centered": True}), ((2, 3), {"lr": 0.001, "momentum": 0.9})]),
]


def _case_id(case) -> str:
    name, kwargs, groups = case
    opts = "-".join(f"{k}={v}" for k, v in kwargs.items())
    return f"{name}-{opts}" + ("-groups" if groups else "")


def assert_close(got, expected, what=""):
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def assert_state_close(got, expected, what=""):
    """State buffers live on their own scale (exp_avg_sq ~ g**2): the tolerance follows the buffer's size."""
    scale = float(np.max(np.abs(expected))) if np.size(expected) else 0.0
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * scale + 1e-12, err_msg=what)


# ------------------------------------------------------------------------------------------ updates vs torch
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_every_step_matches_torch(torch, device, case):
    name, kwargs, groups = case
    ours, opt, params = train(trainkit, device, name, kwargs, groups)
    theirs, topt, tparams = train(torch, "cpu", name, kwargs, groups)
    for step, (got, expected) in enumerate(zip(ours, theirs), 1):
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == np.float32
            assert_close(g, e, f"step {step}, parameter {i}")
    # the state agrees too: same keys, same values, float32 buffers on the parameter's device
    for p, tp in zip(params, tparams):
        state, tstate = opt.state[p], topt.state[tp]
        assert sorted(state) == sorted(tstate)
        for key, value in state.items():
            assert isinstance(value, trainkit.Tensor) and value.dtype == trainkit.float32
            assert not value.requires_grad
            assert str(value.device) == ("cpu" if key == "step" else str(p.device))
            assert_state_close(to_numpy(value), to_numpy(tstate[key]), key)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_every_update_matches_torch_given_the_same_grads(torch, device, case):
    """Each step gets PyTorch's gradients, so only the optimizers' arithmetic is compared: to a few ulps."""
    name, kwargs, groups = case
    params, _, _ = make_model(trainkit, device)
    tparams, x, y = make_model(torch, "cpu")
    opt, topt = make_opt(trainkit, params, name, kwargs, groups), make_opt(torch, tparams, name, kwargs, groups)
    for step in range(1, STEPS + 1):
        topt.zero_grad()
        mse_loss(torch, tparams, x, y).backward()
        for p, tp in zip(params, tparams):
            p.grad = trainkit.tensor(tp.grad.numpy(), device=device)
        opt.step()
        topt.step()
        for i, (p, tp) in enumerate(zip(params, tparams)):
            np.testing.assert_allclose(
                to_numpy(p), to_numpy(tp), rtol=STEP_RTOL, atol=STEP_ATOL, err_msg=f"step {step}, parameter {i}"
            )


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("SGD", {"lr": 0.1, "momentum": 0.9}),
        ("RMSprop", {"momentum": 0.5}),
        ("Adam", {"lr": 0.01, "amsgrad": True}),
        ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
        ("Adam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
    ],
)
def test_large_parameters_updated_block_by_block_match_torch(torch, device, name, kwargs):
    """Parameters larger than one block of the in-place update (with a short last block), and a transposed one."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in ((300, 250), (70000,))]
    values.append(rng.standard_normal((200, 300)).astype(np.float32).T)  # not C-ordered: the plain path
    params = [trainkit.tensor(v, device=device, requires_grad=True) for v in values]
    tparams = [torch.tensor(v, requires_grad=True) for v in values]
    opt = getattr(trainkit.optim, name)(params, **kwargs)
    topt = getattr(torch.optim, name)(tparams, **kwargs)
    for _ in range(3):
        grads = [rng.standard_normal(v.shape).astype(np.float32) for v in values]
        for p, tp, g in zip(params, tparams, grads):
            p.grad, tp.grad = trainkit.tensor(g, device=device), torch.tensor(g)
        opt.step()
        topt.step()
    for i, (p, tp) in enumerate(zip(params, tparams)):
        np.testing.assert_allclose(to_numpy(p), tp.detach().numpy(), rtol=1e-6, atol=1e-6, err_msg=f"parameter {i}")


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_matches_torch(torch, device, set_to_none):
    def grads_after(lib, dev):
        params, x, y = make_model(lib, dev)
        opt = lib.optim.SGD(params, lr=0.1)
        mse_loss(lib, params, x, y).backward()
        before = [p.grad for p in params]
        opt.zero_grad(set_to_none=set_to_none)
        return [
            (p.grad is None, p.grad is b, None if p.grad is None else to_numpy(p.grad)) for p, b in zip(params, before)
        ]

    ours, theirs = grads_after(trainkit, device), grads_after(torch, "cpu")
    for (none, same, value), (tnone, tsame, tvalue) in zip(ours, theirs):
        assert (none, same) == (tnone, tsame)
        if value is not None:
            np.testing.assert_array_equal(value, tvalue)


def test_zero_grad_false_keeps_training_like_torch(torch, device):
    ours, _, _ = train(trainkit, device, "SGD", {"lr": 0.1, "momentum": 0.9}, steps=5, set_to_none=False)
    theirs, _, _ = train(torch, "cpu", "SGD", {"lr": 0.1, "momentum": 0.9}, steps=5, set_to_none=False)
    for got, expected in zip(ours[-1], theirs[-1]):
        assert_close(got, expected)


def test_closure_returns_the_loss(torch, device):
    def run(lib, dev):
        params, x, y = make_model(lib, dev)
        opt = lib.optim.Adam(params, lr=0.01)
        losses = []
        for _ in range(5):

            def closure():
                opt.zero_grad()
                loss = mse_loss(lib, params, x, y)
                loss.backward()
                return loss

            losses.append(opt.step(closure).item())
        return losses, [to_numpy(p) for p in params]

    (losses, params), (tlosses, tparams) = run(trainkit, device), run(torch, "cpu")
    np.testing.assert_allclose(losses, tlosses, rtol=RTOL)
    for g, e in zip(params, tparams):
        assert_close(g, e)


def test_closure_runs_with_grad_enabled_inside_no_grad(device):
    params, x, y = make_model(trainkit, device)
    opt = trainkit.optim.SGD(params, lr=0.1)

    def closure():
        assert trainkit.is_grad_enabled()
        loss = mse_loss(trainkit, params, x, y)
        loss.backward()
        return loss

    with trainkit.no_grad():
        assert opt.step(closure).requires_grad


def test_add_param_group_while_training_matches_torch(torch, device):
    def run(lib, dev):
        params, x, y = make_model(lib, dev)
        params[2].requires_grad_(False)  # frozen at first, unfrozen and given its own group later
        opt = lib.optim.Adam([params[0], params[1], params[3]], lr=0.01)
        for step in range(10):
            if step == 4:
                params[2].requires_grad_(True)
                opt.add_param_group({"params": params[2], "lr": 0.05, "amsgrad": True})
            opt.zero_grad()
            mse_loss(lib, params, x, y).backward()
            opt.step()
        return [to_numpy(p) for p in params], [sorted(g) for g in opt.param_groups]

    (params, keys), (tparams, tkeys) = run(trainkit, device), run(torch, "cpu")
    for g, e in zip(params, tparams):
        assert_close(g, e)
    for ours, theirs in zip(keys, tkeys):
        assert set(ours) <= set(theirs)


# ------------------------------------------------------------------------------------ skipped parameters
@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}),
        ("Adam", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
        ("AdamW", {"lr": 0.01}),
        ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True}),
    ],
    ids=["SGD", "Adam", "AdamW", "RMSprop"],
)
def test_parameters_without_grad_are_skipped(torch, device, name, kwargs):
    def run(lib, dev):
        params, x, y = make_model(lib, dev)
        params[0].requires_grad_(False)  # frozen: never gets a grad
        unused = lib.tensor(np.arange(3, dtype=np.float32), device=dev, requires_grad=True)  # not in the loss
        opt = getattr(lib.optim, name)(params + [unused], **kwargs)
        frozen_before, unused_before = to_numpy(params[0]).copy(), to_numpy(unused).copy()
        versions = (params[0]._version, unused._version)
        for _ in range(5):
            opt.zero_grad()
            mse_loss(lib, params, x, y).backward()
            opt.step()
        np.testing.assert_array_equal(to_numpy(params[0]), frozen_before)
        np.testing.assert_array_equal(to_numpy(unused), unused_before)
        assert (params[0]._version, unused._version) == versions
        assert params[0] not in opt.state and unused not in opt.state
        return [to_numpy(p) for p in params[1:]]

    for g, e in zip(run(trainkit, device), run(torch, "cpu")):
        assert_close(g, e)


# ------------------------------------------------------------------------------------------- no graph
@pytest.mark.parametrize("case", [CASES[5], CASES[12], CASES[16], CASES[21]], ids=_case_id)
def test_step_builds_no_graph_and_bumps_versions_like_torch(torch, device, case):
    name, kwargs, groups = case

    def versions(lib, dev):
        params, x, y = make_model(lib, dev)
        opt = make_opt(lib, params, name, kwargs, groups)
        seen = []
        for _ in range(3):
            opt.zero_grad()
            mse_loss(lib, params, x, y).backward()
            opt.step()  # grad mode is on: the step must still record nothing
            for p in params:
                assert p.is_leaf and p.grad_fn is None and p.requires_grad
            seen.append([p._version for p in params])
        for state in opt.state.values():
            for value in state.values():
                if hasattr(value, "requires_grad"):
                    assert not value.requires_grad and value.grad_fn is None
        return seen

    assert versions(trainkit, device) == versions(torch, "cpu")


def test_step_keeps_the_parameter_storage(device):
    params, x, y = make_model(trainkit, device)
    arrays = [p._data for p in params]
    opt = trainkit.optim.AdamW(params, lr=0.01)
    mse_loss(trainkit, params, x, y).backward()
    opt.step()
    assert all(p._data is a for p, a in zip(params, arrays))


def test_step_invalidates_tensors_saved_for_backward(device):
    """A tensor saved for backward before the step sees the step as an in-place change of the parameter."""
    (w1, b1, w2, b2), x, y = make_model(trainkit, device)
    opt = trainkit.optim.SGD([w1, b1, w2, b2], lr=0.1)
    loss = mse_loss(trainkit, [w1, b1, w2, b2], x, y)
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# ------------------------------------------------------------------------------------------ state dict
ROUND_TRIP = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, None),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01}, TWO_GROUPS),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}, None),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True}, TWO_GROUPS),
]


@pytest.mark.parametrize("case", ROUND_TRIP, ids=_case_id)
def test_state_dict_round_trip_continues_identically(device, case):
    name, kwargs, groups = case
    params, x, y = make_model(trainkit, device)
    opt = make_opt(trainkit, params, name, kwargs, groups)

    def train_steps(opt, params, n):
        for _ in range(n):
            opt.zero_grad()
            mse_loss(trainkit, params, x, y).backward()
            opt.step()

    train_steps(opt, params, 10)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))  # as if saved to disk and read back
    copies = [trainkit.tensor(to_numpy(p), device=device, requires_grad=True) for p in params]
    resumed = make_opt(trainkit, copies, name, {"lr": 123.0}, groups)  # lr comes from the state dict
    resumed.load_state_dict(saved)
    assert [g["lr"] for g in resumed.param_groups] == [g["lr"] for g in opt.param_groups]
    train_steps(opt, params, 10)
    train_steps(resumed, copies, 10)
    for p, c in zip(params, copies):
        np.testing.assert_array_equal(to_numpy(c), to_numpy(p))
    for p, c in zip(params, copies):
        for key, value in opt.state[p].items():
            np.testing.assert_array_equal(to_numpy(resumed.state[c][key]), to_numpy(value))
            assert resumed.state[c][key] is not value


@pytest.mark.parametrize("case", ROUND_TRIP, ids=_case_id)
def test_state_dict_layout_matches_torch(torch, device, case):
    name, kwargs, groups = case
    _, opt, _ = train(trainkit, device, name, kwargs, groups, steps=3)
    _, topt, _ = train(torch, "cpu", name, kwargs, groups, steps=3)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sorted(sd) == sorted(tsd) == ["param_groups", "state"]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for key in tsd["state"]:
        assert sorted(sd["state"][key]) == sorted(tsd["state"][key])
        for k, v in tsd["state"][key].items():
            assert_state_close(to_numpy(sd["state"][key][k]), to_numpy(v), k)
    torch_only = {"foreach", "differentiable", "fused", "capturable"}
    for group, tgroup in zip(sd["param_groups"], tsd["param_groups"]):
        assert set(group) == set(tgroup) - torch_only
        assert {k: group[k] for k in group} == {k: tgroup[k] for k in group}


def test_load_state_dict_moves_state_to_the_parameters_device(device):
    params, x, y = make_model(trainkit, "cpu")
    opt = trainkit.optim.Adam(params, lr=0.01)
    mse_loss(trainkit, params, x, y).backward()
    opt.step()
    moved = [trainkit.tensor(to_numpy(p), device=device, requires_grad=True) for p in params]
    other = trainkit.optim.Adam(moved, lr=0.01)
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    for p in moved:
        assert str(other.state[p]["exp_avg"].device) == str(p.device)
        assert str(other.state[p]["step"].device) == "cpu"


# ------------------------------------------------------------------------------------------------ errors
def _params(lib, dev):
    return [lib.ones(2, device=dev, requires_grad=True)]


BAD_HYPER = [
    ("SGD", {"lr": -0.1}, "Invalid learning rate"),
    ("SGD", {"momentum": -0.5}, "Invalid momentum value"),
    ("SGD", {"weight_decay": -1.0}, "Invalid weight_decay value"),
    ("SGD", {"nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "Nesterov momentum requires"),
    ("Adam", {"lr": -1.0}, "Invalid learning rate"),
    ("Adam", {"eps": -1e-8}, "Invalid epsilon value"),
    ("Adam", {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0"),
    ("Adam", {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1"),
    ("Adam", {"weight_decay": -0.1}, "Invalid weight_decay value"),
    ("AdamW", {"lr": -1.0}, "Invalid learning rate"),
    ("AdamW", {"betas": (0.9, 1.5)}, "Invalid beta parameter at index 1"),
    ("AdamW", {"weight_decay": -0.1}, "Invalid weight_decay value"),
    ("RMSprop", {"lr": -1.0}, "Invalid learning rate"),
    ("RMSprop", {"eps": -1.0}, "Invalid epsilon value"),
    ("RMSprop", {"momentum": -1.0}, "Invalid momentum value"),
    ("RMSprop", {"weight_decay": -1.0}, "Invalid weight_decay value"),
    ("RMSprop", {"alpha": -1.0}, "Invalid alpha value"),
]


@pytest.mark.parametrize("name,kwargs,words", BAD_HYPER, ids=[f"{n}-{w}" for n, _, w in BAD_HYPER])
def test_bad_hyper_parameters_raise_like_torch(torch, device, name, kwargs, words):
    assert_same_error(
        torch, lambda lib, dev: getattr(lib.optim, name)(_params(lib, dev), **kwargs), words, device=device
    )


def _leaf(lib, dev):
    return lib.ones(2, device=dev, requires_grad=True)


BAD_PARAMS = {
    "empty": (lambda lib, dev: lib.optim.SGD([], lr=0.1), "empty parameter list"),
    "a tensor": (lambda lib, dev: lib.optim.SGD(_leaf(lib, dev), lr=0.1), "iterable of Tensors or dicts"),
    "non-leaf": (lambda lib, dev: lib.optim.SGD([_leaf(lib, dev) * 2], lr=0.1), "can't optimize a non-leaf Tensor"),
    "not a tensor": (lambda lib, dev: lib.optim.SGD([1.0], lr=0.1), "optimizer can only optimize Tensors"),
    "a set": (lambda lib, dev: lib.optim.SGD([{"params": {_leaf(lib, dev)}}], lr=0.1), "ordered collections"),
    "two groups": (
        lambda lib, dev: (lambda p: lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1))(_leaf(lib, dev)),
        "more than one parameter group",
    ),
    "group not a dict": (
        lambda lib, dev: lib.optim.SGD([_leaf(lib, dev)], lr=0.1).add_param_group([_leaf(lib, dev)]),
        "param_group must be a dict",
    ),
    "fewer groups in state dict": (
        lambda lib, dev: lib.optim.SGD(
            [{"params": [_leaf(lib, dev)]}, {"params": [_leaf(lib, dev)]}], lr=0.1
        ).load_state_dict(lib.optim.SGD([_leaf(lib, dev)], lr=0.1).state_dict()),
        "different number of parameter groups",
    ),
    "group size in state dict": (
        lambda lib, dev: lib.optim.SGD([_leaf(lib, dev)], lr=0.1).load_state_dict(
            lib.optim.SGD([_leaf(lib, dev), _leaf(lib, dev)], lr=0.1).state_dict()
        ),
        "doesn't match the size of optimizer's group",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PARAMS))
def test_bad_parameters_raise_like_torch(torch, device, case):
    fn, words = BAD_PARAMS[case]
    assert_same_error(torch, fn, words, device=device)


def test_retained_non_leaf_can_be_optimized(torch):
    def make(lib, dev):
        x = lib.ones(2, requires_grad=True) * 2
        x.retain_grad()
        return len(lib.optim.SGD([x], lr=0.1).param_groups)

    assert make(trainkit, "cpu") == make(torch, "cpu") == 1


def test_duplicate_parameters_warn_like_torch(torch):
    for lib in (trainkit, torch):
        p = lib.ones(2, requires_grad=True)
        with pytest.warns(UserWarning, match="duplicate parameters"):
            lib.optim.SGD([p, p], lr=0.1)


# --------------------------------------------------------------------------------------------- clipping
def _with_grads(lib, dev, scale: float, inf: bool = False):
    rng = np.random.default_rng(1)
    params = []
    for shape in [(3, 4), (5,), (2, 2, 2)]:
        p = lib.zeros(shape, device=dev, requires_grad=True)
        g = (rng.standard_normal(shape) * scale).astype(np.float32)
        if inf:
            g.flat[0] = np.inf
        p.grad = lib.tensor(g, device=dev)
        params.append(p)
    params.append(lib.zeros(2, device=dev, requires_grad=True))  # no grad: ignored
    return params


@pytest.mark.parametrize("norm_type", [1, 2, 2.0, 3.5, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e4], ids=["clips", "leaves"])
def test_clip_grad_norm_matches_torch(torch, device, norm_type, max_norm):
    def run(lib, dev, clip):
        params = _with_grads(lib, dev, scale=2.0)
        total = clip(params, max_norm, norm_type=norm_type)
        return to_numpy(total), [to_numpy(p.grad) for p in params[:-1]], params[-1].grad

    total, grads, none = run(trainkit, device, clip_grad_norm_)
    ttotal, tgrads, _ = run(torch, "cpu", torch.nn.utils.clip_grad_norm_)
    assert total.shape == () and total.dtype == np.float32 and none is None
    np.testing.assert_allclose(total, ttotal, rtol=1e-6)
    for g, e in zip(grads, tgrads):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_single_tensor_and_empty(torch, device):
    for lib, dev, clip in ((trainkit, device, clip_grad_norm_), (torch, "cpu", torch.nn.utils.clip_grad_norm_)):
        p = lib.zeros(3, device=dev, requires_grad=True)
        p.grad = lib.tensor([3.0, 0.0, 4.0], device=dev)
        assert float(clip(p, 1.0)) == pytest.approx(5.0)
        np.testing.assert_allclose(to_numpy(p.grad), [0.6, 0.0, 0.8], rtol=1e-5)
        assert float(clip([], 1.0)) == 0.0
        assert float(clip([lib.zeros(2, device=dev, requires_grad=True)], 1.0)) == 0.0


def test_clip_grad_norm_nonfinite(torch, device):
    def clip(lib, dev):
        fn = clip_grad_norm_ if lib is trainkit else torch.nn.utils.clip_grad_norm_
        return fn(_with_grads(lib, dev, scale=1.0, inf=True), 1.0, error_if_nonfinite=True)

    assert_same_error(torch, clip, "non-finite", "error_if_nonfinite=False", device=device)
    with np.errstate(invalid="ignore"):  # inf * 0 = nan in the scaled grads, as in PyTorch
        total = clip_grad_norm_(_with_grads(trainkit, device, scale=1.0, inf=True), 1.0)
    assert np.isinf(to_numpy(total))


def test_clip_grad_norm_builds_no_graph(device):
    params = _with_grads(trainkit, device, scale=2.0)
    for p in params[:-1]:
        p.grad.requires_grad_(True)
    versions = [p.grad._version for p in params[:-1]]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        params[0].grad.mul_(2)  # what an in-place op on such a grad would do under grad mode
    total = clip_grad_norm_(params, 0.1)
    assert not total.requires_grad
    assert [p.grad._version for p in params[:-1]] == [v + 1 for v in versions]


@pytest.mark.parametrize("clip_value", [0.1, 1.0, 10.0])
def test_clip_grad_value_matches_torch(torch, device, clip_value):
    ours = _with_grads(trainkit, device, scale=2.0)
    theirs = _with_grads(torch, "cpu", scale=2.0)
    assert clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    for g, e in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_array_equal(to_numpy(g.grad), to_numpy(e.grad))
    assert ours[-1].grad is None
