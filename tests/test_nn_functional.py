"""trainkit.functional against torch.nn.functional: values, gradients and node names (float32), finite
differences of first and second derivatives (float64), reductions, errors, and dropout's randomness.

Each case of ``CASES`` is a function of a library wrapper ``m`` (``m.F`` is the functional module: trainkit's
``trainkit.functional`` or ``torch.nn.functional``) and its input tensors, so that the same expression runs on both.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import assert_same_error, require_reference, to_numpy

import trainkit
from trainkit import functional as tkF
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.autograd.ops.erf import erf, erf_rational

REDUCTIONS = ("mean", "sum", "none")


# ------------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Arg:
    """One input: a shape and how its values are drawn, or fixed ``values``; ``grad``: does it require grad."""

    shape: tuple = ()
    kind: str = "normal"
    grad: bool = True
    values: tuple | None = None


def normal(*shape, grad=True) -> Arg:
    return Arg(shape, "normal", grad)


def away(*shape, grad=True) -> Arg:
    """|x| in [0.2, 2]: away from the kink at 0."""
    return Arg(shape, "away", grad)


def positive(*shape, grad=True) -> Arg:
    return Arg(shape, "positive", grad)


def prob(*shape, grad=True) -> Arg:
    """In [0.05, 0.95]: probabilities away from 0 and 1."""
    return Arg(shape, "prob", grad)


def simplex(*shape, grad=False) -> Arg:
    """Class probabilities: positive, summing to 1 along dimension 1 (dimension 0 for a vector)."""
    return Arg(shape, "simplex", grad)


def const(values) -> Arg:
    """Fixed values (class indices, say), never requiring grad."""
    values = np.asarray(values)
    return Arg(values.shape, "const", False, (values.tolist(),))


def fixed(values, grad=True) -> Arg:
    """Fixed floating values (points where an op is not smooth, say)."""
    values = np.asarray(values, dtype=np.float64)
    return Arg(values.shape, "fixed", grad, (values.tolist(),))


def draw(arg: Arg, rng: np.random.Generator) -> np.ndarray:
    if arg.kind in ("const", "fixed"):
        return np.asarray(arg.values[0])
    shape = arg.shape
    if arg.kind == "normal":
        return rng.standard_normal(shape)
    if arg.kind == "away":
        return rng.uniform(0.2, 2.0, shape) * np.where(rng.random(shape) < 0.5, -1, 1)
    if arg.kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if arg.kind == "prob":
        return rng.uniform(0.05, 0.95, shape)
    if arg.kind == "simplex":
        e = rng.uniform(0.1, 1.0, shape)
        return e / e.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    raise ValueError(arg.kind)


class Lib:
    """A library (trainkit or torch) on a device: ``m.F`` its functional module, ``m.tensor`` its constructor."""

    def __init__(self, module, device="cpu"):
        self.module = module
        self.device = device
        self.F = tkF if module is trainkit else module.nn.functional

    def tensor(self, array, dtype=None, requires_grad=False):
        t = self.module.tensor(np.asarray(array), device=self.device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        return t.requires_grad_(requires_grad)

    def __getattr__(self, name):
        return getattr(self.module, name)


@dataclass(frozen=True)
class Case:
    id: str
    fn: Callable
    args: tuple
    gradgrad: bool = False
    node: str | None = None  # our node name where PyTorch composes the op of several nodes
    # False where the gradient is by definition not the derivative: inputs at kinks, a padding row's zero gradient
    derivative: bool = True


CASES: list[Case] = []


def case(
    id: str, fn: Callable, *args: Arg, gradgrad: bool = False, node: str | None = None, derivative: bool = True
) -> None:
    CASES.append(Case(id, fn, args, gradgrad, node, derivative))


C = 4  # classes

# ------------------------------------------------------------------------------------------------ activations
case("leaky_relu", lambda m, x: m.F.leaky_relu(x), away(3, 5))
case("leaky_relu-slope", lambda m, x: m.F.leaky_relu(x, 0.2), away(3, 5), gradgrad=True)
case("leaky_relu-negative-slope", lambda m, x: m.F.leaky_relu(x, negative_slope=-0.3), away(3, 5))
case("leaky_relu-inplace", lambda m, x: m.F.leaky_relu(x * 1.0, 0.2, inplace=True), away(3, 5))
case("relu-inplace", lambda m, x: m.F.relu(x * 1.0, inplace=True), away(3, 5))
case("gelu", lambda m, x: m.F.gelu(x), normal(3, 5), gradgrad=True)
case("gelu-tanh", lambda m, x: m.F.gelu(x, approximate="tanh"), normal(3, 5), gradgrad=True)
case("gelu-wide-range", lambda m, x: m.F.gelu(x * 4), normal(40))
case("gelu-tanh-wide-range", lambda m, x: m.F.gelu(x * 4, approximate="tanh"), normal(40))
case("softmax", lambda m, x: m.F.softmax(x, dim=1), normal(3, 5))
case("log_softmax", lambda m, x: m.F.log_softmax(x, dim=-1), normal(3, 5))

# --------------------------------------------------------------------------------------------------- linear
case("linear", lambda m, x, w, b: m.F.linear(x, w, b), normal(4, 3), normal(5, 3), normal(5), gradgrad=True)
case("linear-no-bias", lambda m, x, w: m.F.linear(x, w), normal(4, 3), normal(5, 3))
case("linear-3d", lambda m, x, w, b: m.F.linear(x, w, b), normal(2, 4, 3), normal(5, 3), normal(5))
case("linear-3d-no-bias", lambda m, x, w: m.F.linear(x, w), normal(2, 4, 3), normal(5, 3))
case("linear-1d", lambda m, x, w, b: m.F.linear(x, w, b), normal(3), normal(5, 3), normal(5))
case("linear-1d-no-bias", lambda m, x, w: m.F.linear(x, w), normal(3), normal(5, 3))
case("linear-frozen-weight", lambda m, x, w, b: m.F.linear(x, w, b), normal(4, 3), normal(5, 3, grad=False), normal(5))

# ----------------------------------------------------------------------------------------------- batch norm
_bn = "batch_norm"
case(
    f"{_bn}-train-2d",
    lambda m, x, w, b: m.F.batch_norm(x, None, None, w, b, training=True),
    normal(6, 3),
    positive(3),
    normal(3),
    gradgrad=True,
)
case(
    f"{_bn}-train-3d",
    lambda m, x, w, b: m.F.batch_norm(x, None, None, w, b, training=True),
    normal(4, 3, 5),
    positive(3),
    normal(3),
)
case(
    f"{_bn}-train-4d",
    lambda m, x, w, b: m.F.batch_norm(x, None, None, w, b, training=True),
    normal(3, 2, 4, 5),
    positive(2),
    normal(2),
    gradgrad=True,
)
case(f"{_bn}-train-no-affine", lambda m, x: m.F.batch_norm(x, None, None, training=True), normal(6, 3), gradgrad=True)
case(
    f"{_bn}-train-weight-only",
    lambda m, x, w: m.F.batch_norm(x, None, None, w, training=True, eps=1e-3),
    normal(5, 3),
    positive(3),
)
case(
    f"{_bn}-train-running-stats",
    lambda m, x, rm, rv: m.F.batch_norm(x, rm, rv, training=True, momentum=0.3),
    normal(6, 3),
    normal(3, grad=False),
    positive(3, grad=False),
)
case(
    f"{_bn}-eval",
    lambda m, x, w, b, rm, rv: m.F.batch_norm(x, rm, rv, w, b),
    normal(6, 3),
    positive(3),
    normal(3),
    normal(3, grad=False),
    positive(3, grad=False),
    gradgrad=True,
)
case(
    f"{_bn}-eval-4d",
    lambda m, x, w, b, rm, rv: m.F.batch_norm(x, rm, rv, w, b, training=False),
    normal(2, 3, 4, 4),
    positive(3),
    normal(3),
    normal(3, grad=False),
    positive(3, grad=False),
)
case(
    f"{_bn}-eval-no-affine",
    lambda m, x, rm, rv: m.F.batch_norm(x, rm, rv),
    normal(6, 3),
    normal(3, grad=False),
    positive(3, grad=False),
)

# ------------------------------------------------------------------------------------------------ embedding
_IDX = [[1, 2, 2, 0], [9, 2, 1, 1], [4, 4, 4, 9]]
case("embedding", lambda m, w, i: m.F.embedding(i, w), normal(10, 3), const(_IDX), gradgrad=True)
case("embedding-1d", lambda m, w, i: m.F.embedding(i, w), normal(10, 3), const([3, 3, 7]))
case(
    "embedding-padding",
    lambda m, w, i: m.F.embedding(i, w, padding_idx=2),
    normal(10, 3),
    const(_IDX),
    gradgrad=True,
    derivative=False,
)
case(
    "embedding-negative-padding",
    lambda m, w, i: m.F.embedding(i, w, padding_idx=-1),
    normal(10, 3),
    const(_IDX),
    derivative=False,
)
case(
    "embedding-scale-grad-by-freq",
    lambda m, w, i: m.F.embedding(i, w, scale_grad_by_freq=True),
    normal(10, 3),
    const(_IDX),
    gradgrad=True,
    derivative=False,
)
case(
    "embedding-scale-grad-by-freq-padding",
    lambda m, w, i: m.F.embedding(i, w, padding_idx=0, scale_grad_by_freq=True),
    normal(10, 3),
    const(_IDX),
    derivative=False,
)

# ---------------------------------------------------------------------------------------- regression losses
for _r in REDUCTIONS:
    case(
        f"mse_loss-{_r}",
        lambda m, x, t, r=_r: m.F.mse_loss(x, t, reduction=r),
        normal(3, 4),
        normal(3, 4),
        gradgrad=_r == "mean",
    )
    case(f"l1_loss-{_r}", lambda m, x, t, r=_r: m.F.l1_loss(x, t, reduction=r), normal(3, 4), normal(3, 4))
    case(
        f"huber_loss-{_r}",
        lambda m, x, t, r=_r: m.F.huber_loss(x, t, reduction=r, delta=0.7),
        normal(3, 4),
        normal(3, 4),
        gradgrad=_r == "none",
    )
    case(
        f"smooth_l1_loss-{_r}",
        lambda m, x, t, r=_r: m.F.smooth_l1_loss(x, t, reduction=r, beta=0.7),
        normal(3, 4),
        normal(3, 4),
        gradgrad=_r == "sum",
    )
case("huber_loss-default-delta", lambda m, x, t: m.F.huber_loss(x * 2, t), normal(3, 4), normal(3, 4))
case("smooth_l1_loss-default-beta", lambda m, x, t: m.F.smooth_l1_loss(x * 2, t), normal(3, 4), normal(3, 4))
case("smooth_l1_loss-beta-0", lambda m, x, t: m.F.smooth_l1_loss(x, t, beta=0.0), normal(3, 4), normal(3, 4))
case("mse_loss-target-without-grad", lambda m, x, t: m.F.mse_loss(x, t), normal(3, 4), normal(3, 4, grad=False))


def _quiet(fn):
    """``fn`` with the broadcast warning silenced (it is tested on its own)."""

    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)

    return run


case("mse_loss-broadcast-target", _quiet(lambda m, x, t: m.F.mse_loss(x, t, reduction="sum")), normal(3, 4), normal(4))
case("huber_loss-broadcast-input", _quiet(lambda m, x, t: m.F.huber_loss(x, t)), normal(4), normal(3, 4))
case("l1_loss-broadcast-target", _quiet(lambda m, x, t: m.F.l1_loss(x, t)), normal(3, 4), normal(3, 1))

# ----------------------------------------------------------------------------------- classification losses
_T = [0, 3, 1, 1, 2]
_T_IGNORED = [0, -100, 1, 3, -100]
for _r in REDUCTIONS:
    case(
        f"cross_entropy-{_r}",
        lambda m, x, t, r=_r: m.F.cross_entropy(x, t, reduction=r),
        normal(5, C),
        const(_T),
        gradgrad=_r == "mean",
    )
    case(
        f"cross_entropy-weight-ignore-{_r}",
        lambda m, x, t, w, r=_r: m.F.cross_entropy(x, t, weight=w, reduction=r),
        normal(5, C),
        const(_T_IGNORED),
        positive(C, grad=False),
    )
    case(
        f"cross_entropy-smoothing-{_r}",
        lambda m, x, t, w, r=_r: m.F.cross_entropy(x, t, w, reduction=r, label_smoothing=0.2),
        normal(5, C),
        const(_T_IGNORED),
        positive(C, grad=False),
        gradgrad=_r == "mean",
    )
    case(
        f"cross_entropy-probs-{_r}",
        lambda m, x, t, r=_r: m.F.cross_entropy(x, t, reduction=r),
        normal(5, C),
        simplex(5, C),
        gradgrad=_r == "none",
    )
    case(
        f"cross_entropy-3d-{_r}",
        lambda m, x, t, r=_r: m.F.cross_entropy(x, t, reduction=r),
        normal(2, C, 3),
        const([[0, 1, 3], [2, -100, 2]]),
    )
    case(
        f"cross_entropy-4d-{_r}",
        lambda m, x, t, r=_r: m.F.cross_entropy(x, t, reduction=r),
        normal(2, C, 2, 3),
        const([[[0, 1, 3], [2, 2, 0]], [[1, 1, 1], [3, 0, -100]]]),
    )
    case(
        f"nll_loss-{_r}",
        lambda m, x, t, r=_r: m.F.nll_loss(x, t, reduction=r),
        normal(5, C),
        const(_T),
        gradgrad=_r == "sum",
    )
    case(
        f"nll_loss-weight-ignore-{_r}",
        lambda m, x, t, w, r=_r: m.F.nll_loss(x, t, w, reduction=r),
        normal(5, C),
        const(_T_IGNORED),
        positive(C, grad=False),
    )
    case(
        f"nll_loss-3d-{_r}",
        lambda m, x, t, r=_r: m.F.nll_loss(x, t, reduction=r),
        normal(2, C, 3),
        const([[0, 1, 3], [2, 0, 2]]),
    )
    case(
        f"nll_loss-4d-{_r}",
        lambda m, x, t, r=_r: m.F.nll_loss(x, t, reduction=r),
        normal(2, C, 2, 2),
        const([[[0, 1], [3, 2]], [[2, 0], [1, 1]]]),
    )
    case(
        f"binary_cross_entropy-{_r}",
        lambda m, x, t, r=_r: m.F.binary_cross_entropy(x, t, reduction=r),
        prob(3, 4),
        prob(3, 4),
        gradgrad=_r == "mean",
    )
    case(
        f"binary_cross_entropy-weight-{_r}",
        lambda m, x, t, w, r=_r: m.F.binary_cross_entropy(x, t, w, reduction=r),
        prob(3, 4),
        prob(3, 4),
        positive(4, grad=False),
    )
    case(
        f"bce_with_logits-{_r}",
        lambda m, x, t, r=_r: m.F.binary_cross_entropy_with_logits(x, t, reduction=r),
        normal(3, 4),
        prob(3, 4),
        gradgrad=_r == "mean",
    )
    case(
        f"bce_with_logits-weights-{_r}",
        lambda m, x, t, w, pw, r=_r: m.F.binary_cross_entropy_with_logits(x, t, w, reduction=r, pos_weight=pw),
        normal(3, 4),
        prob(3, 4),
        positive(3, 1, grad=False),
        positive(4, grad=False),
        gradgrad=_r == "sum",
    )

case("cross_entropy-ignore-index-1", lambda m, x, t: m.F.cross_entropy(x, t, ignore_index=1), normal(5, C), const(_T))
case(
    "cross_entropy-all-ignored-sum",
    lambda m, x, t: m.F.cross_entropy(x, t, reduction="sum"),
    normal(3, C),
    const([-100, -100, -100]),
)
case("cross_entropy-unbatched", lambda m, x, t: m.F.cross_entropy(x, t), normal(C), const(2))
case("cross_entropy-unbatched-none", lambda m, x, t: m.F.cross_entropy(x, t, reduction="none"), normal(C), const(2))
case(
    "cross_entropy-5d",
    lambda m, x, t: m.F.cross_entropy(x, t),
    normal(2, C, 2, 1, 2),
    const([[[[0, 1]], [[3, 2]]], [[[2, 0]], [[1, 1]]]]),
)
case(
    "cross_entropy-5d-none",
    lambda m, x, t: m.F.cross_entropy(x, t, reduction="none"),
    normal(2, C, 2, 1, 2),
    const([[[[0, 1]], [[3, 2]]], [[[2, 0]], [[1, 1]]]]),
)
case("cross_entropy-large-logits", lambda m, x, t: m.F.cross_entropy(x * 1000, t), normal(5, C), const(_T))
case(
    "cross_entropy-probs-weight",
    lambda m, x, t, w: m.F.cross_entropy(x, t, w),
    normal(5, C),
    simplex(5, C),
    positive(C),
    gradgrad=True,
)
case(
    "cross_entropy-probs-smoothing",
    lambda m, x, t, w: m.F.cross_entropy(x, t, weight=w, label_smoothing=0.3),
    normal(5, C),
    simplex(5, C, grad=True),
    positive(C, grad=False),
    gradgrad=True,
)
case(
    "cross_entropy-probs-target-grad",
    lambda m, x, t: m.F.cross_entropy(x, t, reduction="sum"),
    normal(5, C),
    simplex(5, C, grad=True),
)
case("cross_entropy-probs-3d", lambda m, x, t: m.F.cross_entropy(x, t), normal(2, C, 3), simplex(2, C, 3))
case("cross_entropy-probs-unbatched", lambda m, x, t: m.F.cross_entropy(x, t, reduction="none"), normal(C), simplex(C))
case(
    "cross_entropy-smoothing-3d",
    lambda m, x, t: m.F.cross_entropy(x, t, label_smoothing=0.1),
    normal(2, C, 3),
    const([[0, 1, 3], [2, -100, 2]]),
)
case("nll_loss-unbatched", lambda m, x, t: m.F.nll_loss(x, t), normal(C), const(1))
case(
    "nll_loss-after-log_softmax",
    lambda m, x, t: m.F.nll_loss(m.F.log_softmax(x, dim=1), t),
    normal(5, C),
    const(_T),
    gradgrad=True,
)
case(
    "nll_loss-5d-none",
    lambda m, x, t: m.F.nll_loss(x, t, reduction="none"),
    normal(2, C, 2, 1, 2),
    const([[[[0, 1]], [[3, 2]]], [[[2, 0]], [[1, 1]]]]),
)
case(
    "binary_cross_entropy-at-0-and-1",
    lambda m, x, t: m.F.binary_cross_entropy(x, t, reduction="none"),
    fixed([0.0, 1.0, 0.5, 1.0, 0.0]),
    fixed([1.0, 0.0, 0.5, 1.0, 0.0]),
    derivative=False,
)
case(
    "bce_with_logits-large-logits",
    lambda m, x, t: m.F.binary_cross_entropy_with_logits(x * 100, t),
    normal(3, 4),
    prob(3, 4),
)
case(
    "bce_with_logits-pos_weight-broadcast",
    lambda m, x, t, pw: m.F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
    normal(2, 3, 4),
    prob(2, 3, 4),
    positive(4, grad=False),
)


# --------------------------------------------------------------------------------------------------- running
def _inputs(m: Lib, case: Case, arrays: list, dtype=None) -> list:
    return [m.tensor(a, dtype, a_.grad) for a, a_ in zip(arrays, case.args)]


def _run(m: Lib, case: Case, arrays: list, dtype=None):
    inputs = _inputs(m, case, arrays, dtype)
    return inputs, case.fn(m, *inputs)


def _arrays(case: Case, rng) -> list:
    return [draw(a, rng) if a.kind == "const" else draw(a, rng).astype(np.float32) for a in case.args]


def _assert_close(got, expected, what: str, rtol=2e-5, atol=2e-5) -> None:
    got, expected = to_numpy(got), to_numpy(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, torch {expected.shape}"
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_values_and_grads_match_torch(case, device, torch, rng):
    arrays = _arrays(case, rng)
    tk_inputs, tk_out = _run(Lib(trainkit, device), case, arrays)
    th_inputs, th_out = _run(Lib(torch), case, arrays)
    _assert_close(tk_out, th_out, "forward")
    assert tk_out.dtype.name == str(th_out.dtype).removeprefix("torch.")
    upstream = rng.standard_normal(tuple(th_out.shape)).astype(np.float32)
    tk_out.backward(trainkit.tensor(upstream, device=device))
    th_out.backward(torch.tensor(upstream))
    for i, (a, b) in enumerate(zip(tk_inputs, th_inputs)):
        if b.requires_grad:
            assert (a.grad is None) == (b.grad is None), f"input {i}: grad presence differs"
            if b.grad is not None:
                _assert_close(a.grad, b.grad, f"grad of input {i}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_node_names_match_torch(case, torch, rng):
    arrays = _arrays(case, rng)
    _, tk_out = _run(Lib(trainkit), case, arrays)
    _, th_out = _run(Lib(torch), case, arrays)
    expected = case.node or th_out.grad_fn.name()
    assert tk_out.grad_fn.name() == expected


def _float64_arrays(case: Case, rng) -> list:
    return [draw(a, rng) for a in case.args]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gradcheck(case, device, rng):
    m = Lib(trainkit, device)
    inputs = _inputs(m, case, _float64_arrays(case, rng), trainkit.float64)
    if not case.derivative:
        pytest.skip("the gradient is not the derivative here, by definition")
    assert gradcheck(lambda *xs: case.fn(m, *xs), inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", [c for c in CASES if c.gradgrad], ids=lambda c: c.id)
def test_gradgradcheck(case, device, rng):
    m = Lib(trainkit, device)
    inputs = _inputs(m, case, _float64_arrays(case, rng), trainkit.float64)
    assert gradgradcheck(lambda *xs: case.fn(m, *xs), inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


# ----------------------------------------------------------------------------------------------- batch norm
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (4, 3, 2, 5)])
@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_batch_norm_updates_running_stats_as_torch(shape, momentum, device, torch, rng):
    c = shape[1]
    stats = {}
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        m = Lib(lib, dev)
        rm, rv = m.tensor(np.zeros(c, np.float32)), m.tensor(np.ones(c, np.float32))
        for step in range(4):
            x = m.tensor((np.random.default_rng(step).standard_normal(shape) * 3 + step).astype(np.float32))
            m.F.batch_norm(x, rm, rv, training=True, momentum=momentum)
        out = m.F.batch_norm(x, rm, rv, training=False)
        stats[lib.__name__] = (rm, rv, out)
    for got, expected, what in zip(stats["trainkit"], stats["torch"], ("running_mean", "running_var", "eval output")):
        _assert_close(got, expected, what)


def test_batch_norm_running_stats_change_bumps_their_version(torch):
    rm, rv = trainkit.zeros(3), trainkit.ones(3)
    before = rm._version, rv._version
    tkF.batch_norm(trainkit.randn(4, 3), rm, rv, training=True)
    assert (rm._version, rv._version) == (before[0] + 1, before[1] + 1)
    tkF.batch_norm(trainkit.randn(4, 3), rm, rv, training=False)
    assert (rm._version, rv._version) == (before[0] + 1, before[1] + 1)


def test_batch_norm_eval_backward_uses_the_running_stats_of_its_forward():
    """A later training step changes the running statistics; an earlier eval graph keeps its own copy."""
    x = trainkit.randn(5, 3, requires_grad=True)
    w = trainkit.ones(3, requires_grad=True)
    rm, rv = trainkit.zeros(3), trainkit.full((3,), 4.0)
    out = tkF.batch_norm(x, rm, rv, w, training=False, eps=0.0)
    tkF.batch_norm(trainkit.randn(5, 3) * 10, rm, rv, training=True, momentum=1.0)
    out.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), np.full((5, 3), 0.5), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(w.grad), to_numpy(x.sum(0)) / 2, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------- dropout
def test_dropout_zeroes_with_probability_p_and_scales_the_rest(device):
    trainkit.manual_seed(0)
    p = 0.3
    x = trainkit.ones(200_000, device=device, requires_grad=True)
    y = tkF.dropout(x, p)
    values = to_numpy(y)
    kept = values != 0
    assert abs(1 - kept.mean() - p) < 0.005
    np.testing.assert_allclose(values[kept], 1 / (1 - p), rtol=1e-6)
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), values)  # the gradient goes through the same mask


def test_dropout_mask_statistics_match_torch(torch):
    p = 0.25
    trainkit.manual_seed(1)
    torch.manual_seed(1)
    tk = to_numpy(tkF.dropout(trainkit.ones(100_000), p))
    th = to_numpy(torch.nn.functional.dropout(torch.ones(100_000), p))
    assert sorted(set(tk.tolist())) == sorted(set(th.tolist()))
    assert abs((tk == 0).mean() - (th == 0).mean()) < 0.01
    assert abs(tk.mean() - th.mean()) < 0.02  # both keep the expectation at 1


def test_dropout_repeats_under_the_same_seed_and_differs_between_calls(device):
    x = trainkit.ones(64, device=device)
    trainkit.manual_seed(7)
    a, b = tkF.dropout(x), tkF.dropout(x)
    trainkit.manual_seed(7)
    c = tkF.dropout(x)
    assert trainkit.equal(a, c)
    assert not trainkit.equal(a, b)


def test_dropout_passes_through_in_eval_and_with_p_0(device, torch):
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        F = Lib(lib).F
        x = lib.randn(4, 3, device=dev, requires_grad=True)
        assert F.dropout(x, 0.5, training=False) is x
        assert F.dropout(x, 0.0) is x


def test_dropout_with_p_1_gives_zeros_and_zero_grads(device, torch):
    x = trainkit.randn(4, 3, device=device, requires_grad=True)
    y = tkF.dropout(x, 1.0)
    assert not to_numpy(y).any()
    assert y.grad_fn.name() == torch.nn.functional.dropout(torch.ones(1, requires_grad=True), 1.0).grad_fn.name()
    y.sum().backward()
    assert not to_numpy(x.grad).any()


def test_dropout_inplace_writes_into_the_input(device):
    x = trainkit.ones(1000, device=device)
    y = tkF.dropout(x, 0.5, inplace=True)
    assert y is x
    assert set(to_numpy(x).tolist()) == {0.0, 2.0}


def test_dropout_gradcheck(device):
    def fn(x):
        trainkit.manual_seed(0)  # the same mask on every call
        return tkF.dropout(x, 0.3)

    assert gradcheck(fn, (trainkit.randn(4, 5, dtype=trainkit.float64, device=device, requires_grad=True),))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_probability_out_of_range_is_an_error(p, device, torch):
    assert_same_error(
        torch, lambda m, dev: Lib(m).F.dropout(m.ones(3, device=dev), p), "between 0 and 1", device=device
    )


# -------------------------------------------------------------------------------------------- other behaviour
def test_erf_matches_pythons_to_an_ulp():
    import math

    x = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 0.9, 200), [0.0, np.inf, -np.inf]])
    expected = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf(x), expected, rtol=3e-16, atol=0)
    assert np.isnan(erf(np.array([np.nan]))).all()
    assert erf(np.zeros(2, np.float32)).dtype == np.float32


def test_inplace_leaky_relu_with_negative_slope_fails_in_backward_as_torch(device, torch):
    def fn(m, dev):
        x = m.ones(3, device=dev, requires_grad=True)
        Lib(m).F.leaky_relu(x * 1.0, -0.2, inplace=True).sum().backward()

    assert_same_error(torch, fn, "negative slope", device=device)


def test_gelu_double_backward_node_name_is_torchs(torch):
    names = []
    for lib in (trainkit, torch):
        x = lib.tensor([0.5, -1.0], requires_grad=True)
        (g,) = lib.autograd.grad(Lib(lib).F.gelu(x).sum(), x, create_graph=True)
        names.append(g.grad_fn.name())
    assert names[0] == names[1] == "GeluBackwardBackward0"


def test_erf_rational_is_within_half_a_micro_of_erf_in_float32():
    # GELU's float32 kernel adds it to 1: an absolute error of a few float32 ulps of 1 is what it may have
    x = np.concatenate([np.linspace(-7, 7, 200_001), np.logspace(-30, 0, 1_000), -np.logspace(-30, 0, 1_000)])
    x = x.astype(np.float32)
    got = erf_rational(x)
    assert got.dtype == np.float32
    want = erf(x.astype(np.float64))
    assert np.abs(got - want).max() < 4.5e-7
    assert np.array_equal(erf_rational(np.float32([np.inf, -np.inf, 0.0])), [1.0, -1.0, 0.0])
    assert np.isnan(erf_rational(np.float32([np.nan]))).all()


def test_gelu_float32_values_and_gradients_match_torch_over_a_wide_range(torch):
    x = np.linspace(-12, 12, 4001, dtype=np.float32)
    got, want = [], []
    for lib, out in ((trainkit, got), (torch, want)):
        t = lib.tensor(x, requires_grad=True)
        y = Lib(lib).F.gelu(t)
        y.backward(lib.ones_like(y))
        out += [to_numpy(y), to_numpy(t.grad)]
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=2e-6, atol=1e-6)


def test_cross_entropy_is_stable_for_huge_logits(device):
    x = trainkit.tensor([[1e4, -1e4, 0.0], [-1e30, 1e30, 5.0]], device=device, requires_grad=True)
    loss = tkF.cross_entropy(x, trainkit.tensor([0, 0], device=device), reduction="none")
    np.testing.assert_allclose(to_numpy(loss), [0.0, 2e30], rtol=1e-6)
    loss.sum().backward()
    assert np.isfinite(to_numpy(x.grad)).all()


def test_cross_entropy_mean_of_all_ignored_targets_is_nan_as_torch(torch):
    outs = []
    for lib in (trainkit, torch):
        x = lib.zeros(2, 3, requires_grad=True)
        outs.append(Lib(lib).F.cross_entropy(x, lib.tensor([-100, -100])))
    assert np.isnan(to_numpy(outs[0])) and np.isnan(to_numpy(outs[1]))


def test_bce_with_logits_is_stable_for_huge_logits(device):
    x = trainkit.tensor([1e4, -1e4, 50.0], device=device, requires_grad=True)
    t = trainkit.tensor([0.0, 1.0, 1.0], device=device)
    loss = tkF.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(to_numpy(loss), [1e4, 1e4, np.exp(-50.0)], rtol=1e-5)
    loss.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [1.0, -1.0, 0.0], rtol=1e-5, atol=1e-7)


def test_embedding_grad_without_add_at_matches_dense_accumulation(device, rng):
    w = trainkit.randn(50, 8, device=device, requires_grad=True)
    idx = rng.integers(0, 50, (30, 7))
    upstream = rng.standard_normal((30, 7, 8)).astype(np.float32)
    tkF.embedding(trainkit.tensor(idx, device=device), w).backward(trainkit.tensor(upstream, device=device))
    expected = np.zeros((50, 8), np.float32)
    np.add.at(expected, idx, upstream)
    np.testing.assert_allclose(to_numpy(w.grad), expected, rtol=1e-5, atol=1e-5)


def test_embedding_max_norm_renormalises_looked_up_rows_as_torch(torch, rng):
    weights = (rng.standard_normal((6, 3)) * 3).astype(np.float32)
    idx = np.array([[0, 2], [2, 5]])
    results = []
    for lib in (trainkit, torch):
        w = lib.tensor(weights.copy(), requires_grad=True)
        out = Lib(lib).F.embedding(lib.tensor(idx), w, max_norm=1.5)
        out.sum().backward()
        results.append((out, w, w.grad))
    for got, expected, what in zip(results[0], results[1], ("output", "renormalised weight", "weight grad")):
        _assert_close(got, expected, what)


def test_loss_broadcast_warns_as_torch(torch):
    for lib in (trainkit, torch):
        with pytest.warns(UserWarning, match="different to the input size"):
            Lib(lib).F.mse_loss(lib.ones(3, 4), lib.ones(4))


def test_legacy_size_average_and_reduce_flags_map_to_a_reduction(torch):
    for size_average, reduce in ((None, False), (False, None), (True, True)):
        outs = []
        for lib in (trainkit, torch):
            x = lib.tensor([[1.0, 2.0], [3.0, 5.0]])
            with pytest.warns(UserWarning, match="size_average and reduce"):
                outs.append(Lib(lib).F.mse_loss(x, lib.zeros(2, 2), size_average, reduce))
        _assert_close(*outs, f"size_average={size_average}, reduce={reduce}")


def test_mixed_float_dtypes_promote_as_torch(torch):
    outs = [Lib(lib).F.mse_loss(lib.ones(3), lib.zeros(3, dtype=lib.float64)) for lib in (trainkit, torch)]
    assert outs[0].dtype.name == str(outs[1].dtype).removeprefix("torch.") == "float64"


# --------------------------------------------------------------------------------------------------- errors
def _F(m):
    return Lib(m).F


def _x(m, dev, *shape):
    return m.ones(*shape, device=dev)


def _t(m, dev, values):
    return m.tensor(values, device=dev)


ERRORS = {
    "ce-batch-mismatch": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 4, 3), _t(m, d, [0, 1, 2])),
        "batch_size (4)",
        "batch_size (3)",
    ),
    "ce-target-out-of-bounds": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [0, 5])),
        "Target 5",
        "out of bounds",
    ),
    "ce-negative-target": (lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [-1, 0])), "Target -1"),
    "ce-float-target-wrong-shape": (lambda m, d: _F(m).cross_entropy(_x(m, d, 4, 3), _x(m, d, 4, 2)), "1D target"),
    "ce-float-class-target": (lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [0.0, 1.0])), "target dtype"),
    "ce-int-probability-target": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [[0, 1, 0], [1, 0, 0]])),
        "floating point",
    ),
    "ce-weight-size": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [0, 1]), _x(m, d, 2)),
        "for all 3 classes",
        "[2]",
    ),
    "ce-ignore-index-with-probabilities": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _x(m, d, 2, 3), ignore_index=1),
        "ignore_index",
    ),
    "ce-label-smoothing-range": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [0, 1]), label_smoothing=1.5),
        "label_smoothing",
    ),
    "ce-bad-reduction": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3), _t(m, d, [0, 1]), reduction="avg"),
        "avg is not a valid value for reduction",
    ),
    "ce-spatial-target-shape": (
        lambda m, d: _F(m).cross_entropy(_x(m, d, 2, 3, 5), _t(m, d, [[0] * 4] * 2)),
        "target size",
        "[2, 5]",
    ),
    "nll-batch-mismatch": (lambda m, d: _F(m).nll_loss(_x(m, d, 4, 3), _t(m, d, [0, 1, 2])), "batch_size"),
    "nll-weight-requires-grad": (
        lambda m, d: _F(m).nll_loss(_x(m, d, 2, 3), _t(m, d, [0, 1]), m.ones(3, device=d, requires_grad=True)),
        "not differentiable with respect to argument 'weight'",
    ),
    "bce-target-shape": (
        lambda m, d: _F(m).binary_cross_entropy(_x(m, d, 4, 3) / 2, _x(m, d, 3) / 2),
        "target size",
        "input size",
        "Size([3])",
        "Size([4, 3])",
    ),
    "bce-input-range": (
        lambda m, d: _F(m).binary_cross_entropy(_x(m, d, 2) * 2, _x(m, d, 2) / 2),
        "all elements of input should be between 0 and 1",
    ),
    "bce-target-range": (
        lambda m, d: _F(m).binary_cross_entropy(_x(m, d, 2) / 2, _x(m, d, 2) * 2),
        "all elements of target should be between 0 and 1",
    ),
    "bce-weight-requires-grad": (
        lambda m, d: _F(m).binary_cross_entropy(
            _x(m, d, 2) / 2, _x(m, d, 2) / 2, m.ones(2, device=d, requires_grad=True)
        ),
        "not differentiable with respect to argument 'weight'",
    ),
    "bce-logits-target-shape": (
        lambda m, d: _F(m).binary_cross_entropy_with_logits(_x(m, d, 4, 3), _x(m, d, 3)),
        "Size([3])",
        "Size([4, 3])",
    ),
    "bce-logits-pos-weight-requires-grad": (
        lambda m, d: _F(m).binary_cross_entropy_with_logits(
            _x(m, d, 2), _x(m, d, 2), pos_weight=m.ones(2, device=d, requires_grad=True)
        ),
        "argument 'pos_weight'",
    ),
    "mse-not-broadcastable": (
        lambda m, d: _quiet(lambda: _F(m).mse_loss(_x(m, d, 4, 3), _x(m, d, 4)))(),
        "size of tensor a (3)",
        "size of tensor b (4)",
    ),
    "mse-bad-reduction": (
        lambda m, d: _F(m).mse_loss(_x(m, d, 2), _x(m, d, 2), reduction="foo"),
        "not a valid value for reduction",
    ),
    "huber-delta": (lambda m, d: _F(m).huber_loss(_x(m, d, 2), _x(m, d, 2), delta=0.0), "non-positive"),
    "smooth-l1-beta": (lambda m, d: _F(m).smooth_l1_loss(_x(m, d, 2), _x(m, d, 2), beta=-1.0), "negative"),
    "gelu-approximate": (lambda m, d: _F(m).gelu(_x(m, d, 2), approximate="fast"), "none or tanh"),
    "linear-shapes": (lambda m, d: _F(m).linear(_x(m, d, 4, 3), _x(m, d, 5, 4)), "4x3", "4x5"),
    "embedding-index-range": (lambda m, d: _F(m).embedding(_t(m, d, [1, 10]), _x(m, d, 10, 3)), "index out of range"),
    "embedding-float-indices": (lambda m, d: _F(m).embedding(_t(m, d, [1.0]), _x(m, d, 10, 3)), "indices", "Long, Int"),
    "embedding-padding-range": (
        lambda m, d: _F(m).embedding(_t(m, d, [1]), _x(m, d, 10, 3), padding_idx=10),
        "Padding_idx must be within num_embeddings",
    ),
    "bn-one-value-per-channel": (
        lambda m, d: _F(m).batch_norm(_x(m, d, 1, 3), _x(m, d, 3), _x(m, d, 3), training=True),
        "Expected more than 1 value per channel when training",
    ),
    "bn-running-mean-size": (
        lambda m, d: _F(m).batch_norm(_x(m, d, 4, 3), _x(m, d, 4), _x(m, d, 3)),
        "running_mean should contain 3 elements not 4",
    ),
    "bn-weight-size": (
        lambda m, d: _F(m).batch_norm(_x(m, d, 4, 3), _x(m, d, 3), _x(m, d, 3), _x(m, d, 2)),
        "weight should contain 3 elements not 2",
    ),
    "bn-eval-without-running-stats": (
        lambda m, d: _F(m).batch_norm(_x(m, d, 4, 3), None, None),
        "running_mean must be defined in evaluation mode",
    ),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(name, device, torch):
    if name == "ce-float-class-target":
        require_reference(torch, "2.13", "the wording of cross_entropy's target dtype error")
    fn, *words = ERRORS[name]
    assert_same_error(torch, fn, *(w.replace("torch", "trainkit") for w in words), device=device)
