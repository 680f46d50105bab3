"""optim.lr_scheduler.OneCycleLR against PyTorch: rates and momenta step by step, the training they drive, its
errors, its state dict, and a config naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.optim
from trainkit.registry import SCHEDULERS

ROOT = Path(__file__).resolve().parents[1]


def make_optimizer(lib, name="SGD", groups=1, **kwargs):
    rng = np.random.default_rng(0)
    params = [lib.tensor(rng.standard_normal(3).astype("float32"), requires_grad=True) for _ in range(groups)]
    kwargs.setdefault("lr", 0.1)
    if groups == 1:
        return getattr(lib.optim, name)(params, **kwargs), params
    return getattr(lib.optim, name)([{"params": [p]} for p in params], **kwargs), params


def momentum_of(group):
    return group["betas"][0] if "betas" in group else group.get("momentum")


def schedule(lib, steps, opt_name="SGD", groups=1, opt_kwargs=None, **kwargs):
    """(rates, momenta) of every group after construction and after each of ``steps`` steps."""
    opt, params = make_optimizer(lib, opt_name, groups, **(opt_kwargs or {}))
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, **kwargs)
    rates, momenta = [sched.get_last_lr()], [[momentum_of(g) for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        rates.append(sched.get_last_lr())
        momenta.append([momentum_of(g) for g in opt.param_groups])
    return rates, momenta


CASES = [
    ("SGD", {"momentum": 0.9}, 1, {"max_lr": 0.5, "total_steps": 20}),
    ("SGD", {"momentum": 0.9}, 1, {"max_lr": 0.5, "total_steps": 20, "anneal_strategy": "linear"}),
    ("SGD", {"momentum": 0.9}, 1, {"max_lr": 0.5, "total_steps": 20, "three_phase": True}),
    ("SGD", {"momentum": 0.9}, 1, {"max_lr": 0.5, "total_steps": 21, "three_phase": True, "anneal_strategy": "linear"}),
    ("SGD", {}, 1, {"max_lr": 1.0, "epochs": 3, "steps_per_epoch": 7, "pct_start": 0.25}),
    ("SGD", {}, 1, {"max_lr": 1.0, "total_steps": 17, "div_factor": 10.0, "final_div_factor": 100.0}),
    ("SGD", {"momentum": 0.5}, 2, {"max_lr": [0.3, 0.03], "total_steps": 15, "base_momentum": [0.8, 0.7]}),
    ("SGD", {"momentum": 0.5}, 2, {"max_lr": 0.3, "total_steps": 15, "max_momentum": [0.99, 0.9]}),
    ("Adam", {}, 1, {"max_lr": 0.01, "total_steps": 12}),
    ("AdamW", {}, 2, {"max_lr": [0.01, 0.02], "total_steps": 12, "three_phase": True}),
    ("RMSprop", {}, 1, {"max_lr": 0.01, "total_steps": 12, "pct_start": 0.5}),
    ("Adagrad", {}, 1, {"max_lr": 0.1, "total_steps": 12, "cycle_momentum": False}),
    ("SGD", {"momentum": 0.9}, 1, {"max_lr": 0.5, "total_steps": 1000}),
]


def _id(case):
    name, _, groups, kwargs = case
    return name + f"x{groups}," + ",".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_rate_and_momentum_equals_torch(torch, case):
    name, opt_kwargs, groups, kwargs = case
    steps = kwargs.get("total_steps") or kwargs["epochs"] * kwargs["steps_per_epoch"]
    ours = schedule(trainkit, steps, name, groups, opt_kwargs, **kwargs)
    theirs = schedule(torch, steps, name, groups, opt_kwargs, **kwargs)
    assert ours[0] == theirs[0]  # the same Python floats: the same formula in the same order
    assert ours[1] == theirs[1]


def test_momentum_is_cycled_inversely_to_the_rate():
    rates, momenta = schedule(trainkit, 10, "SGD", opt_kwargs={"momentum": 0.9}, max_lr=1.0, total_steps=10)
    peak = int(np.argmax([r[0] for r in rates]))
    assert peak == 2 and momenta[peak][0] == pytest.approx(0.85)
    assert rates[0][0] == pytest.approx(1.0 / 25) and momenta[0][0] == pytest.approx(0.95)
    assert rates[9][0] == pytest.approx(1.0 / 25 / 1e4)


def test_training_with_the_cycle_matches_torch(torch):
    """The cycled rate and momentum reach the updates (SGD's momentum, Adam's beta1)."""

    def run(lib, name, **opt_kwargs):
        rng = np.random.default_rng(1)
        w = lib.tensor(rng.standard_normal((5, 3)).astype("float32"), requires_grad=True)
        x = lib.tensor(rng.standard_normal((8, 5)).astype("float32"))
        opt = getattr(lib.optim, name)([w], lr=0.1, **opt_kwargs)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=10)
        for _ in range(10):
            opt.zero_grad()
            ((x @ w) ** 2).mean().backward()
            opt.step()
            sched.step()
        return to_numpy(w)

    for name, kwargs in (("SGD", {"momentum": 0.9}), ("Adam", {}), ("SGD", {"nesterov": True, "momentum": 0.5})):
        np.testing.assert_allclose(run(trainkit, name, **kwargs), run(torch, name, **kwargs), rtol=2e-5, atol=2e-6)


def test_stepping_past_total_steps_raises_like_torch(torch):
    def fn(lib, dev):
        opt, _ = make_optimizer(lib, momentum=0.9)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=4)
        for _ in range(4):  # the last allowed step
            opt.step()
            sched.step()
        sched.step()

    assert_same_error(torch, fn, "Tried to step 5 times. The specified number of total steps is 4")


def _construct(**kwargs):
    def fn(lib, dev):
        options = dict(kwargs)
        name = options.pop("opt", "SGD")
        extra = {"momentum": 0.9} if name == "SGD" else {}
        opt, _ = make_optimizer(lib, name, options.pop("groups", 1), **extra)
        lib.optim.lr_scheduler.OneCycleLR(opt, **options)

    return fn


@pytest.mark.parametrize(
    "fn,words",
    [
        (_construct(max_lr=0.1), ["You must define either total_steps OR (epochs AND steps_per_epoch)"]),
        (_construct(max_lr=0.1, epochs=3), ["You must define either total_steps"]),
        (_construct(max_lr=0.1, total_steps=0), ["Expected positive integer total_steps, but got 0"]),
        (_construct(max_lr=0.1, total_steps=2.5), ["Expected positive integer total_steps, but got 2.5"]),
        (_construct(max_lr=0.1, epochs=0, steps_per_epoch=3), ["Expected positive integer epochs, but got 0"]),
        (_construct(max_lr=0.1, epochs=2, steps_per_epoch=-1), ["positive integer steps_per_epoch, but got -1"]),
        (_construct(max_lr=0.1, total_steps=10, pct_start=1.5), ["Expected float between 0 and 1 pct_start"]),
        (_construct(max_lr=0.1, total_steps=10, pct_start=1), ["Expected float between 0 and 1 pct_start, but got 1"]),
        (_construct(max_lr=0.1, total_steps=10, anneal_strategy="exp"), ["one of 'cos' or 'linear', instead got exp"]),
        (_construct(max_lr=[0.1, 0.2], total_steps=10), ["max_lr must have the same length as optimizer.param_groups"]),
        (_construct(max_lr=0.1, total_steps=10, groups=2, base_momentum=[0.8]), ["base_momentum must have the same"]),
        (_construct(max_lr=0.1, total_steps=10, opt="Adagrad"), ["optimizer must support momentum or beta1"]),
    ],
)
def test_bad_arguments_raise_like_torch(torch, fn, words):
    assert_same_error(torch, fn, *words)


def test_not_an_optimizer_raises_like_torch(torch):
    assert_same_error(
        torch, lambda lib, dev: lib.optim.lr_scheduler.OneCycleLR(object(), max_lr=0.1, total_steps=3), "not an Optim"
    )


def test_group_keys_and_state_dict_match_torch(torch):
    def build(lib):
        opt, _ = make_optimizer(lib, "Adam")
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=8, three_phase=True)
        for _ in range(3):
            opt.step()
            sched.step()
        return opt, sched

    (opt, sched), (topt, tsched) = build(trainkit), build(torch)
    group, tgroup = opt.param_groups[0], topt.param_groups[0]
    for key in ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum", "lr", "betas"):
        assert group[key] == tgroup[key], key
    sd, tsd = sched.state_dict(), tsched.state_dict()
    assert set(sd) == set(tsd)
    for key in ("total_steps", "_schedule_phases", "_anneal_func_type", "cycle_momentum", "use_beta1", "last_epoch"):
        assert sd[key] == tsd[key], key


def test_state_dict_round_trip_continues_the_cycle():
    def build():
        opt, _ = make_optimizer(trainkit, momentum=0.9)
        return opt, trainkit.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=12)

    opt, sched = build()
    for _ in range(5):
        opt.step()
        sched.step()
    resumed_opt, resumed = build()
    resumed_opt.load_state_dict(opt.state_dict())
    resumed.load_state_dict(sched.state_dict())
    for _ in range(7):
        for o, s in ((opt, sched), (resumed_opt, resumed)):
            o.step()
            s.step()
        assert resumed.get_last_lr() == sched.get_last_lr()
        assert resumed_opt.param_groups[0]["momentum"] == opt.param_groups[0]["momentum"]


def test_resuming_with_last_epoch_matches_torch(torch):
    def run(lib):
        opt, _ = make_optimizer(lib, momentum=0.9)
        lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10, last_epoch=3)
        rates = [sched.get_last_lr()]
        for _ in range(5):
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr())
        return rates, opt.param_groups[0]["momentum"]

    assert run(trainkit) == run(torch)


def test_it_is_reached_from_lr_scheduler_and_the_registry():
    from trainkit.optim.lr_scheduler import OneCycleLR

    assert trainkit.optim.lr_scheduler.OneCycleLR is OneCycleLR
    assert "OneCycleLR" in trainkit.optim.lr_scheduler.__all__
    assert issubclass(OneCycleLR, trainkit.optim.lr_scheduler.LRScheduler)
    assert SCHEDULERS.get("OneCycleLR") is OneCycleLR


def test_a_config_steps_it_once_per_epoch(tmp_path):
    """A config's scheduler steps at each epoch end, so total_steps counts epochs there."""
    config = tmp_path / "one_cycle.yaml"
    config.write_text(
        (ROOT / "configs" / "regression.yaml")
        .read_text()
        .replace("../examples", str(ROOT / "examples"))
        .replace("name: SGD\n  lr: 0.2", "name: SGD\n  lr: 0.2\n  options: {momentum: 0.9}")
        + "scheduler:\n  name: OneCycleLR\n  options: {max_lr: 0.3, total_steps: 5}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "train", str(config), "--set", "trainer.epochs=5"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    run = tmp_path / "runs" / "regression" / "version_0"
    rows = (run / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    lrs = [float(row.split(",")[header.index("lr")]) for row in rows[1:]]
    # each epoch logs the rate it trained with: steps 0..4 of a 5-step cycle (the step after the last epoch is the
    # fifth and last one allowed)
    expected = schedule(trainkit, 5, "SGD", opt_kwargs={"lr": 0.2, "momentum": 0.9}, max_lr=0.3, total_steps=5)[0]
    np.testing.assert_allclose(lrs, [r[0] for r in expected[:5]], rtol=1e-6)


def test_the_trainer_steps_it_per_batch_through_the_callback(torch):
    """From Python, LRSchedulerCallback(interval='step') steps the cycle after every optimizer step, to its end."""
    from trainkit import nn
    from trainkit.callbacks import LRSchedulerCallback
    from trainkit.trainer import Trainer

    model = nn.Linear(2, 1)
    opt = trainkit.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = trainkit.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, epochs=3, steps_per_epoch=4)
    trainer = Trainer(model, opt, callbacks=[LRSchedulerCallback(sched, interval="step")], verbose=0)
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(16, 2)
    history = trainer.fit(x, x.sum(1, keepdims=True), epochs=3, batch_size=4)
    assert sched.last_epoch == 12
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.2, epochs=3, steps_per_epoch=4)
    rates = []
    for _ in range(12):
        topt.step()
        tsched.step()
        rates.append(tsched.get_last_lr()[0])
    assert sched.get_last_lr() == [rates[-1]]
    assert history.history["lr"] == pytest.approx([rates[3], rates[7], rates[11]])
