"""F.kl_div and nn.KLDivLoss against PyTorch: every reduction with and without ``log_target``, zero targets (a 0
term, a nan target gradient, as PyTorch's xlogy gives), broadcasting and mixed dtypes, the warning of the default
'mean' (where it points), the legacy flags, finite differences, the errors, the repr and the loss registry."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy
from test_activations_more import F, make, parity

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck

_rng = np.random.default_rng(5)
LOGITS = _rng.standard_normal((4, 3))
LOG_P = LOGITS - np.log(np.exp(LOGITS).sum(axis=1, keepdims=True))
Q = _rng.dirichlet(np.ones(3), size=4)
Q_ZEROS = Q.copy()
Q_ZEROS[0, 1] = Q_ZEROS[2, 0] = 0.0
REDUCTIONS = ("batchmean", "sum", "none", "mean")


def quiet_kl(L, *args, **kwargs):
    """kl_div with its 'mean' warning silenced (the warning has its own test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return F(L).kl_div(*args, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reductions_match_torch(torch, reduction, log_target, dtype):
    target = np.log(Q) if log_target else Q

    def fn(L, x, t):
        return quiet_kl(L, x, t, reduction=reduction, log_target=log_target)

    parity(torch, fn, LOG_P, target, dtype=dtype, grad=(True, False))
    parity(torch, fn, LOG_P, target, dtype=dtype)  # the target's gradient too


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_zero_targets_add_nothing(torch, reduction, dtype):
    def fn(L, x, t):
        return quiet_kl(L, x, t, reduction=reduction)

    ours, _ = parity(torch, fn, LOG_P, Q_ZEROS, dtype=dtype, grad=(True, False))
    if reduction == "none":
        assert ours[0, 1].item() == 0.0 and ours[2, 0].item() == 0.0
    parity(torch, fn, LOG_P, Q_ZEROS, dtype=dtype)  # the target's gradient is nan at its zeros, as in PyTorch


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")  # the backward's 0 * inf
def test_log_target_of_minus_infinity_is_nan_as_in_torch(torch):
    target = np.log(Q_ZEROS, where=Q_ZEROS > 0, out=np.full_like(Q_ZEROS, -np.inf))
    parity(torch, lambda L, x, t: F(L).kl_div(x, t, reduction="none", log_target=True), LOG_P, target)


CASES = {
    "broadcast-target": (lambda L, x, t: quiet_kl(L, x, t, reduction="none"), LOG_P, Q[0]),
    "broadcast-batchmean": (lambda L, x, t: F(L).kl_div(x, t, reduction="batchmean"), LOG_P[0], Q),
    "scalar-batchmean": (lambda L, x, t: F(L).kl_div(x, t, reduction="batchmean"), np.array(-0.5), np.array(0.3)),
    "empty-batchmean": (lambda L, x, t: F(L).kl_div(x, t, reduction="batchmean"), np.zeros((0, 3)), np.zeros((0, 3))),
    "empty-mean": (lambda L, x, t: quiet_kl(L, x, t), np.zeros((0, 3)), np.zeros((0, 3))),
    "module-batchmean": (lambda L, x, t: L.nn.KLDivLoss(reduction="batchmean")(x, t), LOG_P, Q),
    "module-log-target": (lambda L, x, t: L.nn.KLDivLoss(reduction="sum", log_target=True)(x, t), LOG_P, LOG_P[::-1]),
    "legacy-flags": (lambda L, x, t: quiet_kl(L, x, t, size_average=False, reduction="batchmean"), LOG_P, Q),
    "legacy-module": (lambda L, x, t: L.nn.KLDivLoss(reduce=False)(x, t), LOG_P, Q),
    "legacy-none-batchmean": (lambda L, x, t: quiet_kl(L, x, t, reduce=False, reduction="batchmean"), LOG_P, Q),
    "from-log-softmax": (lambda L, x, t: F(L).kl_div(F(L).log_softmax(x, 1), t, reduction="batchmean"), LOGITS, Q),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_cases_match_torch(torch, name, dtype):
    fn, x, t = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy flags' deprecation
        parity(torch, fn, x, np.ascontiguousarray(t), dtype=dtype)


def test_mixed_dtypes_promote_as_torch(torch):
    def fn(L, x, t):
        return F(L).kl_div(x.float(), t, reduction="sum")

    ours, theirs = parity(torch, fn, LOG_P, Q, grad=(True, False), tol=(1e-6, 1e-6))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch", "trainkit") == "trainkit.float64"


def test_mean_warns_as_torch_and_points_at_the_caller(torch):
    messages = {}
    for lib in (trainkit, torch):
        x, t = lib.tensor(LOG_P), lib.tensor(Q)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            F(lib).kl_div(x, t)
        assert len(caught) == 1 and caught[0].category is UserWarning
        assert caught[0].filename == __file__
        messages[lib] = str(caught[0].message)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the other reductions are silent
            for reduction in ("batchmean", "sum", "none"):
                F(lib).kl_div(x, t, reduction=reduction)
                lib.nn.KLDivLoss(reduction=reduction)(x, t)
    assert messages[trainkit] == messages[torch]
    assert "'batchmean' divides only by the batch size" in messages[trainkit]


def test_legacy_flags_warn_their_deprecation_instead(torch):
    for lib in (trainkit, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            F(lib).kl_div(lib.tensor(LOG_P), lib.tensor(Q), reduce=False)
        assert [str(w.message) for w in caught] == [
            "size_average and reduce args will be deprecated, please use reduction='none' instead."
        ]


ERRORS = {
    "int-target": (lambda L: F(L).kl_div(L.randn(2, 3), L.ones(2, 3, dtype=L.int64)), "Integral inputs not supported"),
    "int-input": (lambda L: F(L).kl_div(L.ones(2, 3, dtype=L.int64), L.rand(2, 3)), "Integral inputs not supported"),
    "bool-target": (lambda L: F(L).kl_div(L.randn(2, 3), L.ones(2, 3, dtype=L.bool)), "Integral inputs"),
    "reduction": (lambda L: F(L).kl_div(L.randn(2, 3), L.rand(2, 3), reduction="avg"), "avg is not a valid value"),
    "module-reduction": (lambda L: L.nn.KLDivLoss(reduction="avg")(L.randn(2), L.rand(2)), "not a valid value"),
    "shapes": (lambda L: F(L).kl_div(L.randn(2, 3), L.rand(4), reduction="sum"), "size of tensor a (4)", "(3)"),
    "number": (lambda L: F(L).kl_div(L.randn(2, 3), 0.5), "argument 'target'", "must be Tensor, not float"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(torch, name):
    fn, *words = ERRORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_error(torch, lambda L, dev: fn(L), *words)


def test_module_repr_attributes_and_registry(torch):
    for args in ("", "reduction='batchmean'", "reduction='sum', log_target=True"):
        assert repr(eval(f"trainkit.nn.KLDivLoss({args})")) == repr(eval(f"torch.nn.KLDivLoss({args})"))
    loss = trainkit.nn.KLDivLoss(reduction="batchmean", log_target=True)
    assert (loss.reduction, loss.log_target) == ("batchmean", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy flag's deprecation
        assert trainkit.nn.KLDivLoss(size_average=False).reduction == torch.nn.KLDivLoss(size_average=False).reduction
    assert trainkit.registry.LOSSES.get("KLDivLoss") is trainkit.nn.KLDivLoss


def test_gradcheck_float64():
    x = make(trainkit, LOG_P, "float64", True)
    t = make(trainkit, Q, "float64", True)
    for reduction in ("batchmean", "none"):
        for log_target in (False, True):
            target = t.log().detach().requires_grad_() if log_target else t

            def fn(x, t, reduction=reduction, log_target=log_target):
                return F(trainkit).kl_div(x, t, reduction=reduction, log_target=log_target)

            assert gradcheck(fn, (x, target))
            assert gradgradcheck(fn, (x, target))


def test_values_are_the_divergence():
    """batchmean of log_softmax outputs is sum_i q_i log(q_i / p_i) per sample."""
    p = np.exp(LOG_P)
    expected = (Q * np.log(Q / p)).sum() / len(Q)
    got = F(trainkit).kl_div(trainkit.tensor(LOG_P), trainkit.tensor(Q), reduction="batchmean")
    np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12)
