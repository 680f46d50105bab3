"""Learning-rate schedulers against PyTorch: the rates of every group over 30 epochs, and state-dict round trips."""

from __future__ import annotations

import pickle
import warnings

import pytest
from conftest import assert_same_error

import trainkit
import trainkit.optim  # noqa: F401  (makes trainkit.optim an attribute, like torch.optim)
from trainkit.optim import lr_scheduler

EPOCHS = 30


def make_optimizer(lib, name="SGD"):
    """Two parameter groups with different rates, so per-group arithmetic is exercised."""
    a, b = lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)
    if name == "SGD":
        return lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1, momentum=0.9)
    return lib.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.003}], lr=0.05)


def _lambda_list(epoch):
    return 0.95**epoch


SCHEDULERS = {
    "StepLR": lambda s, opt: s.StepLR(opt, step_size=7, gamma=0.5),
    "StepLR-default-gamma": lambda s, opt: s.StepLR(opt, step_size=3),
    "MultiStepLR": lambda s, opt: s.MultiStepLR(opt, milestones=[5, 12, 12, 20], gamma=0.3),
    "ExponentialLR": lambda s, opt: s.ExponentialLR(opt, gamma=0.9),
    "CosineAnnealingLR": lambda s, opt: s.CosineAnnealingLR(opt, T_max=10, eta_min=0.001),
    "CosineAnnealingLR-long": lambda s, opt: s.CosineAnnealingLR(opt, T_max=40),
    "CosineAnnealingLR-T1": lambda s, opt: s.CosineAnnealingLR(opt, T_max=1, eta_min=1e-4),
    "LambdaLR": lambda s, opt: s.LambdaLR(opt, lambda epoch: 1.0 / (1 + epoch) ** 0.5),
    "LambdaLR-list": lambda s, opt: s.LambdaLR(opt, [lambda epoch: epoch // 5 + 1, _lambda_list]),
    "LinearLR": lambda s, opt: s.LinearLR(opt, start_factor=0.25, total_iters=8),
    "LinearLR-decay": lambda s, opt: s.LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=12),
    "LinearLR-default": lambda s, opt: s.LinearLR(opt),
}


def lr_sequence(lib, build, epochs=EPOCHS, optimizer="SGD"):
    """Each epoch: optimizer step, scheduler step; the scheduler's last rates and the groups' rates."""
    opt = make_optimizer(lib, optimizer)
    sched = build(lib.optim.lr_scheduler, opt)
    seen = [(list(sched.get_last_lr()), [g["lr"] for g in opt.param_groups])]
    for _ in range(epochs):
        opt.step()
        sched.step()
        seen.append((list(sched.get_last_lr()), [g["lr"] for g in opt.param_groups]))
    return seen


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_lr_sequence_matches_torch(torch, name):
    ours = lr_sequence(trainkit, SCHEDULERS[name])
    theirs = lr_sequence(torch, SCHEDULERS[name])
    assert ours == theirs  # the same float arithmetic in the same order: equal to the last bit


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "LinearLR"])
def test_lr_sequence_with_adam_matches_torch(torch, name):
    assert lr_sequence(trainkit, SCHEDULERS[name], optimizer="Adam") == lr_sequence(
        torch, SCHEDULERS[name], optimizer="Adam"
    )


def test_chained_schedulers_match_torch(torch):
    def build(lib):
        opt = make_optimizer(lib)
        first = lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4)
        second = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        lrs = []
        for _ in range(EPOCHS):
            opt.step()
            first.step()
            second.step()
            lrs.append((first.get_last_lr(), second.get_last_lr()))
        return lrs

    assert build(trainkit) == build(torch)


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR"])
def test_step_with_epoch_uses_the_closed_form_like_torch(torch, name):
    def run(lib):
        opt = make_optimizer(lib)
        sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
        lrs = []
        for epoch in [3, 7, 7, 12, 25]:
            opt.step()
            with pytest.warns(UserWarning, match="epoch parameter"):
                sched.step(epoch)
            lrs.append(sched.get_last_lr())
        return lrs

    assert run(trainkit) == run(torch)


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_state_dict_round_trip(torch, name):
    """A scheduler rebuilt from a saved state continues like an uninterrupted one, and saves what PyTorch's
    does."""

    def resumed(lib):
        opt = make_optimizer(lib)
        sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
        for _ in range(10):
            opt.step()
            sched.step()
        saved_opt, saved = opt.state_dict(), sched.state_dict()
        keys = sorted(saved)
        saved = pickle.loads(pickle.dumps(saved))  # as if saved to disk and read back
        opt2 = make_optimizer(lib)
        sched2 = SCHEDULERS[name](lib.optim.lr_scheduler, opt2)
        opt2.load_state_dict(saved_opt)
        sched2.load_state_dict(saved)
        lrs = []
        for _ in range(EPOCHS - 10):
            opt2.step()
            sched2.step()
            lrs.append(sched2.get_last_lr())
        return lrs, keys

    (lrs, keys), (tlrs, tkeys) = resumed(trainkit), resumed(torch)
    assert lrs == tlrs
    assert lrs == [lr for lr, _ in lr_sequence(trainkit, SCHEDULERS[name])[11:]]
    assert keys == tkeys


# ----------------------------------------------------------------------------------------- ReduceLROnPlateau
METRICS = [
    1.0,
    0.9,
    0.95,
    0.95,
    0.95,
    0.94,
    0.9,
    0.9,
    0.9,
    0.9,
    0.85,
    0.86,
    0.86,
    0.86,
    0.86,
    0.86,
    0.5,
    0.5,
    0.5,
    0.5,
    0.5,
    0.5,
    0.49999,
    0.5,
    0.5,
    0.5,
    0.5,
    0.5,
    0.5,
    0.5,
]

PLATEAU = {
    "defaults": {},
    "min-rel": {"factor": 0.5, "patience": 2},
    "min-abs": {"factor": 0.5, "patience": 1, "threshold": 0.02, "threshold_mode": "abs"},
    "max-rel": {"mode": "max", "factor": 0.3, "patience": 2},
    "max-abs": {"mode": "max", "factor": 0.5, "patience": 0, "threshold": 0.1, "threshold_mode": "abs"},
    "cooldown": {"factor": 0.5, "patience": 1, "cooldown": 3},
    "min_lr": {"factor": 0.1, "patience": 0, "min_lr": 1e-4},
    "min_lr-list": {"factor": 0.1, "patience": 0, "min_lr": [1e-3, 1e-5]},
    "eps": {"factor": 0.5, "patience": 0, "eps": 0.01},
}


def plateau_sequence(lib, kwargs, metrics=METRICS, as_tensor=False):
    opt = make_optimizer(lib)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    lrs = [sched.get_last_lr()]
    for m in metrics:
        opt.step()
        sched.step(lib.tensor(m) if as_tensor else m)
        lrs.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter, sched.best))
    return lrs


@pytest.mark.parametrize("name", list(PLATEAU))
def test_reduce_lr_on_plateau_matches_torch(torch, name):
    metrics = [-m for m in METRICS] if PLATEAU[name].get("mode") == "max" else METRICS
    ours = plateau_sequence(trainkit, PLATEAU[name], metrics)
    assert ours == plateau_sequence(torch, PLATEAU[name], metrics)


def test_reduce_lr_on_plateau_takes_a_tensor_metric(torch):
    kwargs = PLATEAU["min-rel"]
    ours = plateau_sequence(trainkit, kwargs, METRICS, as_tensor=True)
    theirs = plateau_sequence(torch, kwargs, METRICS, as_tensor=True)
    assert [lr for lr, *_ in ours[1:]] == [lr for lr, *_ in theirs[1:]]


def test_reduce_lr_on_plateau_state_dict_round_trip(torch):
    def run(lib):
        opt = make_optimizer(lib)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=2)
        for m in METRICS[:12]:
            sched.step(m)
        saved = pickle.loads(pickle.dumps(sched.state_dict()))
        opt2 = make_optimizer(lib)
        opt2.load_state_dict(opt.state_dict())
        sched2 = lib.optim.lr_scheduler.ReduceLROnPlateau(opt2)
        sched2.load_state_dict(saved)
        lrs = []
        for m in METRICS[12:]:
            sched2.step(m)
            lrs.append(sched2.get_last_lr())
        return lrs, sorted(saved)

    assert run(trainkit) == run(torch)


# -------------------------------------------------------------------------------------------- checks, warnings
def _sched(build):
    return lambda lib, dev: build(lib.optim.lr_scheduler, make_optimizer(lib))


BAD = {
    "not an optimizer": (lambda lib, dev: lib.optim.lr_scheduler.StepLR(object(), 3), TypeError, "is not an Optimizer"),
    "resume without initial_lr": (_sched(lambda s, o: s.StepLR(o, 3, last_epoch=4)), KeyError, "initial_lr"),
    "LinearLR start": (_sched(lambda s, o: s.LinearLR(o, start_factor=0)), ValueError, "Starting multiplicative"),
    "LinearLR end": (_sched(lambda s, o: s.LinearLR(o, end_factor=1.5)), ValueError, "Ending multiplicative"),
    "LambdaLR count": (_sched(lambda s, o: s.LambdaLR(o, [lambda e: 1.0])), ValueError, "Expected 2 lr_lambdas"),
    "plateau factor": (_sched(lambda s, o: s.ReduceLROnPlateau(o, factor=1.0)), ValueError, "Factor should be < 1.0"),
    "plateau mode": (_sched(lambda s, o: s.ReduceLROnPlateau(o, mode="avg")), ValueError, "mode avg is unknown"),
    "plateau threshold_mode": (
        _sched(lambda s, o: s.ReduceLROnPlateau(o, threshold_mode="pct")),
        ValueError,
        "threshold mode pct",
    ),
    "plateau min_lrs": (_sched(lambda s, o: s.ReduceLROnPlateau(o, min_lr=[0.1])), ValueError, "expected 2 min_lrs"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_like_torch(torch, case):
    fn, kind, words = BAD[case]
    got, _ = assert_same_error(torch, fn, words)
    assert isinstance(got, kind)


def test_scheduler_before_optimizer_step_warns_like_torch(torch):
    for lib in (trainkit, torch):
        opt = make_optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, 3)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            sched.step()
    for lib in (trainkit, torch):
        opt = make_optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, 3)
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()


def test_get_lr_outside_step_warns(torch):
    for lib in (trainkit, torch):
        sched = lib.optim.lr_scheduler.ExponentialLR(make_optimizer(lib), 0.5)
        with pytest.warns(UserWarning, match="get_last_lr"):
            sched.get_lr()


def test_resume_with_last_epoch_matches_torch(torch):
    def run(lib):
        opt = make_optimizer(lib)
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=12, last_epoch=5)
        lrs = [sched.get_last_lr()]
        for _ in range(10):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        return lrs, sched.base_lrs

    assert run(trainkit) == run(torch)


def test_initial_lr_and_base_lrs(torch):
    for lib in (trainkit, torch):
        opt = make_optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, 3)
        assert sched.base_lrs == [0.1, 0.01]
        assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.01]
        assert sched.last_epoch == 0


def test_module_names():
    for name in [
        "LRScheduler",
        "StepLR",
        "MultiStepLR",
        "ExponentialLR",
        "CosineAnnealingLR",
        "LambdaLR",
        "LinearLR",
        "ReduceLROnPlateau",
    ]:
        assert issubclass(getattr(lr_scheduler, name), lr_scheduler.LRScheduler)
