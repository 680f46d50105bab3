"""trainkit.amp.GradScaler against torch.amp.GradScaler on the CPU: the scale sequence with injected infs, skipped
steps, unscaling, the state dict, the errors, and the disabled scaler of a machine without CUDA."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import to_numpy

import trainkit

# per iteration: None for a clean step, else the value put into the first gradient
INJECTED = [None, None, float("inf"), None, None, None, float("nan"), None, None, None, None, float("-inf"), None]


def run(lib, injected, clip: bool = False):
    """Train two parameters with SGD through a CPU GradScaler; the scale, the step taken and the weights, per step."""
    w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    b = lib.nn.Parameter(lib.tensor([0.5]))
    opt = lib.optim.SGD([w, b], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    rows = []
    for bad in injected:
        opt.zero_grad()
        loss = ((w * lib.tensor([3.0, 1.0])).sum() + b.sum()) ** 2
        scaler.scale(loss).backward()
        if bad is not None:
            with lib.no_grad():
                w.grad[0] = bad
        if clip:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_([w, b], 1.0)
        before = to_numpy(w).copy()
        scaler.step(opt)
        scaler.update()
        rows.append((scaler.get_scale(), not np.array_equal(before, to_numpy(w)), to_numpy(w).copy()))
    return rows, scaler


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NumPy's, as clipping meets inf
@pytest.mark.parametrize("clip", [False, True])
def test_scale_sequence_and_skipped_steps_match_torch(torch, clip):
    got, scaler = run(trainkit, INJECTED, clip)
    expected, tscaler = run(torch, INJECTED, clip)
    assert [r[0] for r in got] == [r[0] for r in expected]
    assert [r[1] for r in got] == [r[1] for r in expected]
    for (_, _, w), (_, _, tw) in zip(got, expected):
        np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)
    assert scaler.state_dict() == tscaler.state_dict()


def test_scale_of_outputs_and_the_state_before_any_step(torch):
    for lib in (trainkit, torch):
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0)
        assert scaler.is_enabled() and scaler.get_scale() == 4.0
        a, b = scaler.scale([lib.ones(2), lib.ones(1)])
        assert a.tolist() == [4.0, 4.0] and b.tolist() == [4.0]
        (c,) = scaler.scale((lib.ones(1, dtype=lib.float16),))
        assert c.dtype == lib.float16
        with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
            scaler.scale(3.0)
        fresh = lib.amp.GradScaler("cpu")
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)
        with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
            fresh.step(opt)


def test_errors_of_the_iteration_order(torch):
    for lib in (trainkit, torch):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler = lib.amp.GradScaler("cpu")
        scaler.scale(p.sum()).backward()
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called on this optimizer"):
            scaler.unscale_(opt)
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
            scaler.step(opt)
        with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
            scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
            scaler.step(opt, closure=lambda: 0.0)
        scaler.update()
        with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
            scaler.update()
        scaler.update(new_scale=2.0)
        assert scaler.get_scale() == 2.0
        with pytest.raises(AssertionError, match="The growth factor must be > 1.0"):
            lib.amp.GradScaler("cpu", growth_factor=1.0)
        with pytest.raises(AssertionError, match="The backoff factor must be < 1.0"):
            lib.amp.GradScaler("cpu", backoff_factor=1.0)


def test_state_dict_round_trip(torch):
    for lib in (trainkit, torch):
        scaler = lib.amp.GradScaler("cpu", init_scale=16.0, growth_interval=7)
        other = lib.amp.GradScaler("cpu")
        other.load_state_dict(scaler.state_dict())
        assert other.state_dict() == {
            "scale": 16.0,
            "growth_factor": 2.0,
            "backoff_factor": 0.5,
            "growth_interval": 7,
            "_growth_tracker": 0,
        }
        with pytest.raises(RuntimeError, match="The source state dict is empty"):
            other.load_state_dict({})


@pytest.mark.skipif(trainkit.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_scalers_without_cuda_warn_and_pass_through(torch):
    for lib in (trainkit, torch):
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            scaler = lib.amp.GradScaler()
            old = lib.cuda.amp.GradScaler()
        messages = [(w.category, str(w.message)) for w in found]
        disabling = (UserWarning, "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
        assert messages == [
            disabling,
            (
                FutureWarning,
                "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', "
                "args...)` instead.",
            ),
            disabling,
        ]
        assert isinstance(old, lib.amp.GradScaler)
        for s in (scaler, old):
            assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
            p = lib.nn.Parameter(lib.ones(2))
            opt = lib.optim.SGD([p], lr=0.5)
            loss = p.sum()
            assert s.scale(loss) is loss
            loss.backward()
            s.unscale_(opt)
            s.step(opt)
            s.update()
            assert p.tolist() == [0.5, 0.5]
            s.load_state_dict({})  # a disabled scaler ignores it


def test_float16_gradients_are_refused(torch):
    for lib in (trainkit, torch):
        p = lib.nn.Parameter(lib.ones(2, dtype=lib.float16))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0)
        scaler.scale(p.float().sum()).backward()
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            scaler.unscale_(opt)


SCRIPT = """
import warnings
import torch
import torch.cuda.amp
from torch.amp import GradScaler

model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = GradScaler("cpu", init_scale=4.0)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.ones(2, 3))
    loss = (out.float() ** 2).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
with warnings.catch_warnings(record=True) as found:
    warnings.simplefilter("always")
    old = torch.cuda.amp.GradScaler()
print(out.dtype, model.weight.grad.dtype, scaler.get_scale(), old.is_enabled(), [w.category.__name__ for w in found])
"""


@pytest.mark.skipif(trainkit.cuda.is_available(), reason="checks the machine without a GPU")
def test_a_pytorch_script_with_amp_runs_unmodified(tmp_path):
    script = tmp_path / "amp_script.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "run-torch", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "trainkit.bfloat16",
        "trainkit.float32",
        "4.0",
        "False",
        "['FutureWarning',",
        "'UserWarning']",
    ]
