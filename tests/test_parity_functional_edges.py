"""nn.functional against PyTorch where inputs are awkward: infinite and nan logits, huge values, mixed dtypes,
bool targets, empty outputs, and the composite graphs PyTorch builds for some losses (their grad_fn names).
Each case runs the same call on both libraries and compares the exception class, or the result's dtype, values
(nan equal to nan), grad_fn name and the inputs' gradients after one backward with a fixed upstream gradient."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit

INF, NAN = np.inf, np.nan


def _tensor(L, a, grad):
    return L.tensor(np.array(a), requires_grad=grad and np.asarray(a).dtype.kind == "f")


def _close(a, b, dtype) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    rtol, atol = (1e-4, 1e-5) if dtype == "float32" else (1e-7, 1e-9)
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))


def compare(torch, fn, *arrays, grad=(), name=True):
    """Run ``fn(L, *tensors)`` on both libraries; tensors at the positions in ``grad`` require grad. The result's
    dtype, values, grad_fn name (when ``name``) and the gradients must agree, or both must raise the same class."""
    outs, leaves, errors = {}, {}, {}
    for L in (trainkit, torch):
        ts = [_tensor(L, a, i in grad) for i, a in enumerate(arrays)]
        leaves[L] = [t for i, t in enumerate(ts) if i in grad and t.requires_grad]
        try:
            outs[L] = fn(L, *ts)
        except Exception as err:  # noqa: BLE001  (the class is compared)
            errors[L] = err
    if errors:
        assert set(errors) == {trainkit, torch}, f"only one raises: {errors}"
        got, want = errors[trainkit], errors[torch]
        assert isinstance(got, type(want)) or type(want) in type(got).__mro__, (got, want)
        assert type(got).__name__ == type(want).__name__, (got, want)
        return None
    a, b = outs[trainkit], outs[torch]
    dtype = str(b.dtype).rsplit(".", 1)[-1]
    assert str(a.dtype).rsplit(".", 1)[-1] == dtype
    if any(np.asarray(x).dtype == np.float32 for x in arrays):  # float32 rounding carries into float64 results
        dtype = "float32"
    assert tuple(a.shape) == tuple(b.shape)
    assert _close(a.detach().numpy(), b.detach().numpy(), dtype), (a, b)
    if name:
        assert (a.grad_fn and type(a.grad_fn).__name__) == (b.grad_fn and type(b.grad_fn).__name__)
    if grad:
        up = np.random.default_rng(1).standard_normal(tuple(b.shape)).astype(b.detach().numpy().dtype)
        errs = []
        for L, out in ((trainkit, a), (torch, b)):
            try:
                out.backward(L.tensor(up))
                errs.append(None)
            except RuntimeError as err:
                errs.append(type(err).__name__)
        assert errs[0] == errs[1]
        if errs[0] is None:
            for x, y in zip(leaves[trainkit], leaves[torch]):
                assert (x.grad is None) == (y.grad is None)
                if y.grad is not None:
                    assert _close(x.grad.numpy(), y.grad.numpy(), dtype), (x.grad, y.grad)
    return a


def F(L):
    return L.nn.functional


# --------------------------------------------------------------------------------------------- cross-entropy
EDGE_LOGITS = np.array(
    [
        [-0.0, -1e-30, 0.0],
        [INF, -3e38, 1e-30],
        [-0.79, 1.91, -2.34],
        [3e38, -2.29, 3.47],
        [-INF, -INF, -INF],
        [NAN, 1.0, 2.0],
        [1e30, 1e30, -1e30],
    ],
    np.float32,
)
EDGE_TARGET = np.array([0, 1, 1, 0, 2, 1, 0])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_edge_logits(torch, reduction, ignore_index, weighted):
    # a row with an infinite or nan max is nan throughout; a huge max does not swallow the log of the sum; an
    # ignored row's nan stays out of the loss
    w = np.array([0.5, 2.0, 1.5], np.float32)

    def fn(L, x, t, w):
        return F(L).cross_entropy(x, t, weight=w if weighted else None, reduction=reduction, ignore_index=ignore_index)

    compare(torch, fn, EDGE_LOGITS, EDGE_TARGET, w, grad=(0,))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_ignored_nan_row(torch, reduction):
    x = np.array([[NAN, 1.0], [-0.5, -1.5], [INF, 0.0]], np.float32)
    t = np.array([0, 1, 0])
    compare(torch, lambda L, x, t: F(L).nll_loss(x, t, ignore_index=0, reduction=reduction), x, t, grad=(0,))


@pytest.mark.parametrize("fn_name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("dtypes", [("float64", "float32"), ("float32", "float64")])
def test_class_weight_of_another_dtype_raises(torch, fn_name, dtypes):
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(dtypes[0])
    w = np.ones(3, dtypes[1])
    compare(torch, lambda L, x, t, w: getattr(F(L), fn_name)(x, t, weight=w), x, np.array([0, 1, 2, 1]), w)


def test_weight_dtype_error_says_how_to_fix():
    x = trainkit.zeros(2, 3, dtype=trainkit.float64)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        trainkit.nn.functional.cross_entropy(x, trainkit.tensor([0, 1]), weight=trainkit.ones(3))


PROBS = np.random.default_rng(2).uniform(0.05, 0.95, (4, 3)).astype(np.float32)
LOGITS = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probability_targets_graph(torch, reduction, smoothing, weighted):
    # composed as PyTorch composes it: DivBackward1 for the mean, NegBackward0 otherwise; both inputs get grads
    w = np.array([0.5, 2.0, 1.5], np.float32)

    def fn(L, x, p, w):
        return F(L).cross_entropy(x, p, weight=w if weighted else None, reduction=reduction, label_smoothing=smoothing)

    compare(torch, fn, LOGITS, PROBS, w, grad=(0, 1, 2) if weighted else (0, 1))


@pytest.mark.parametrize("shape", [(3,), (2, 3, 2), (0, 3)])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cross_entropy_probability_targets_ranks(torch, shape, reduction):
    rng = np.random.default_rng(4)
    x, p = rng.standard_normal(shape).astype(np.float32), rng.uniform(0, 1, shape).astype(np.float32)
    compare(torch, lambda L, x, p: F(L).cross_entropy(x, p, reduction=reduction), x, p, grad=(0, 1))


def test_cross_entropy_probability_targets_promote(torch):
    compare(torch, lambda L, x, p: F(L).cross_entropy(x, p), LOGITS, PROBS.astype(np.float64), grad=(0, 1))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("target", [[0, 1, 2, 1], [0, -100, 2, -100], [-100, -100, -100, -100]])
def test_cross_entropy_label_smoothing_graph(torch, reduction, weighted, target):
    # (1 - e) nll + e / C * smooth: AddBackward0 on top, as in PyTorch
    w = np.array([0.5, 2.0, 1.5], np.float32)

    def fn(L, x, t, w):
        return F(L).cross_entropy(x, t, weight=w if weighted else None, reduction=reduction, label_smoothing=0.1)

    compare(torch, fn, LOGITS, np.array(target), w, grad=(0,))


def test_cross_entropy_label_smoothing_spatial_and_unbatched(torch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    t = np.array([[[0, 1], [2, -100]], [[1, 1], [0, 2]]])
    compare(torch, lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.3), x, t, grad=(0,))
    compare(torch, lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.3), x[0, :, 0, 0], np.array(2), grad=(0,))


def test_cross_entropy_class_indices_stay_one_node(torch):
    out = compare(torch, lambda L, x, t: F(L).cross_entropy(x, t), LOGITS, np.array([0, 1, 2, 1]), grad=(0,))
    assert out.grad_fn.next_functions[0][0] is not None
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"


# ------------------------------------------------------------------------------------------ regression losses
POINTWISE = ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss"]


@pytest.mark.parametrize("name", POINTWISE)
def test_shape_error_comes_before_a_bad_reduction(torch, name):
    x, t = np.ones((4, 3), np.float32), np.ones((5, 3), np.float32)
    with pytest.warns(UserWarning):
        compare(torch, lambda L, x, t: getattr(F(L), name)(x, t, reduction="bad"), x, t)


@pytest.mark.parametrize("name", POINTWISE)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"), ("float32", "int64")])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_pointwise_loss_dtypes(torch, name, dtypes, reduction):
    # huber_loss keeps the input's dtype, the others promote; torch's huber backward refuses mixed dtypes, so
    # only the forward is compared there
    rng = np.random.default_rng(6)
    x, t = (rng.standard_normal((4, 3)) * 2).astype(dtypes[0]), (rng.standard_normal((4, 3)) * 2).astype(dtypes[1])
    grad = () if name == "huber_loss" else (0, 1)
    compare(torch, lambda L, x, t: getattr(F(L), name)(x, t, reduction=reduction), x, t, grad=grad)


def test_huber_loss_integer_input_with_float_target_raises(torch):
    compare(torch, lambda L, x, t: F(L).huber_loss(x, t), np.array([1, 2]), np.array([0.5, 1.0], np.float32))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_mse_loss_gradient_of_huge_differences(torch, reduction):
    # 2 / n scales the difference before the gradient does, so 2 d need not overflow
    x = np.array([[3e38, -3e38, -np.inf, 1.0, np.nan]], np.float32).repeat(4, 0)
    t = np.random.default_rng(7).standard_normal((4, 5)).astype(np.float32)
    compare(torch, lambda L, x, t: F(L).mse_loss(x, t, reduction=reduction), x, t, grad=(0, 1))


# ------------------------------------------------------------------------------------- binary cross-entropy
@pytest.mark.parametrize("target_dtype", [np.bool_, np.float64, np.int64])
def test_binary_cross_entropy_target_of_another_dtype_raises(torch, target_dtype):
    x = np.array([0.2, 0.7, 0.5], np.float32)
    t = np.array([1, 0, 1]).astype(target_dtype)
    compare(torch, lambda L, x, t: F(L).binary_cross_entropy(x, t), x, t, grad=(0,))


@pytest.mark.parametrize(
    "dtypes", [("float32", "bool"), ("float32", "int64"), ("float64", "float32"), ("float32", "float64")]
)
@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_binary_cross_entropy_with_logits_target_dtype(torch, dtypes, reduction):
    # the loss takes the target's dtype; a bool target cannot be subtracted from 1
    x = np.array([-1.5, 0.3, 2.0], dtypes[0])
    t = np.array([1, 0, 1]).astype(dtypes[1])
    compare(torch, lambda L, x, t: F(L).binary_cross_entropy_with_logits(x, t, reduction=reduction), x, t, grad=(0, 1))


def test_binary_cross_entropy_with_logits_bool_pos_weight_raises(torch):
    x, t = np.array([-1.5, 0.3], np.float32), np.array([1.0, 0.0], np.float32)
    compare(
        torch,
        lambda L, x, t, pw: F(L).binary_cross_entropy_with_logits(x, t, pos_weight=pw),
        x,
        t,
        np.array([True, False]),
    )


# ------------------------------------------------------------------------------------------------ normalisation
@pytest.mark.parametrize(
    "dtypes, training",
    [
        (dtypes, training)
        for dtypes in [
            ("float64", "float32", None),
            ("float64", "float32", "float32"),
            ("float64", "float32", "float64"),
            ("float32", "float64", None),
            ("float32", "float64", "float32"),
            ("float32", "float32", "float64"),
            ("float64", None, "float32"),
        ]
        for training in (False, True)
        if dtypes[1] is not None or training  # evaluation needs running statistics
    ],
)
def test_batch_norm_mixed_dtypes_raise(torch, dtypes, training):
    x_dtype, stats_dtype, weight_dtype = dtypes
    x = np.random.default_rng(8).standard_normal((2, 3, 4)).astype(x_dtype)
    mean = np.zeros(3, stats_dtype or "float32")
    var = np.ones(3, stats_dtype or "float32")
    w = np.ones(3, weight_dtype or "float32")

    def fn(L, x, m, v, w):
        return F(L).batch_norm(
            x,
            m if stats_dtype else None,
            v if stats_dtype else None,
            weight=w if weight_dtype else None,
            training=training,
        )

    compare(torch, fn, x, mean, var, w, grad=(0,))


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_edge_gradients(torch, training):
    # an overflowing sum(g (x - mean)) gives nan, and a zero invstd does not hide it
    x = np.array([[3e38, 1.0, -1e-30], [0.0, -3e38, 0.0], [-0.52, -1.0, -1e-30], [2.05, 0.55, 4.65]], np.float32)
    m, v = np.array([-1.2, 1.1, 2.3], np.float32), np.array([2.1, 1.5, 2.9], np.float32)
    w, b = np.array([0.5, -2.0, 1.5], np.float32), np.array([0.1, 0.2, 0.3], np.float32)
    compare(
        torch, lambda L, x, m, v, w, b: F(L).batch_norm(x, m, v, w, b, training=training), x, m, v, w, b, grad=(0, 3, 4)
    )


EDGE_ROWS = {
    "float32": [
        [3e38, 1.97, -0.70],
        [NAN, -0.14, 1.0],
        [1.82, 1.0, -0.32],
        [-1.0, 3e38, -0.03],
        [3e38, -3e38, 1.0],
        [1e20, -1e20, 0.0],
        [2e19, 2e19, 2e19],
        [-INF, 0.5, 1.0],
    ],
    "float64": [[1e300, 1.97, -0.70], [1e160, 1e160, 0.0], [1e300, -1e300, 1.0], [1.82, 1.0, -0.32]],
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_edge_rows(torch, dtype, affine):
    # nan where PyTorch's one-pass statistics overflow (a huge mean, or values too far apart), else as usual
    x = np.array(EDGE_ROWS[dtype], dtype)
    w, b = np.array([0.5, -2.0, 1.5], dtype), np.array([0.1, 0.2, 0.3], dtype)
    compare(
        torch,
        lambda L, x, w, b: F(L).layer_norm(x, (3,), w if affine else None, b if affine else None),
        x,
        w,
        b,
        grad=(0, 1, 2),
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_group_norm_edge_rows(torch, dtype):
    x = np.array(EDGE_ROWS[dtype], dtype).reshape(-1, 3, 1)
    compare(torch, lambda L, x: F(L).group_norm(x, 1), x, grad=(0,))


# ------------------------------------------------------------------------------------------------- activations
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize(
    "values",
    [
        [INF, 3e38, 2e38, 1.7e38, -3e38, -INF, 1.0, NAN, -1e-30, 0.0],
        [INF],
        [3e38],
        [-INF],
    ],
)
def test_gelu_edge_values(torch, dtype, approximate, values):
    # float32 tensors of two or more elements go through PyTorch's vectorised kernel: nan at +-inf, and overflow
    # from half the largest float on; one element, float64 and the tanh form keep x at +inf
    x = np.array(values, dtype)
    compare(torch, lambda L, x: F(L).gelu(x, approximate=approximate), x, grad=(0,))


# ---------------------------------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("shape", [(2, 4, 6, 6), (4, 6, 6)])
@pytest.mark.parametrize("size", [0, (0, 3), (3, 0), (2, 3)])
def test_adaptive_avg_pool2d_empty_output_has_no_backward(torch, shape, size):
    # the forward gives an empty result; PyTorch's backward refuses it with a RuntimeError
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    compare(torch, lambda L, x: F(L).adaptive_avg_pool2d(x, size), x, grad=(0,))


# ------------------------------------------------------------------------------------------------ interpolation
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "how",
    [
        dict(scale_factor=2),
        dict(scale_factor=0.5),
        dict(size=(5, 9)),
        dict(size=(6, 6)),
        dict(scale_factor=(1.7, 0.6)),
        dict(size=(1, 3)),
        dict(size=(13, 2)),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bicubic(torch, align_corners, how, dtype):
    # four neighbours per axis with the a = -0.75 kernel, border pixels repeated beyond the edges
    x = np.random.default_rng(10).standard_normal((2, 3, 6, 6)).astype(dtype)
    compare(torch, lambda L, x: F(L).interpolate(x, mode="bicubic", align_corners=align_corners, **how), x, grad=(0,))


def test_bicubic_spreads_inf_as_nan(torch):
    # even at an unchanged size every output reads four inputs, so an inf reaches its neighbours as nan
    x = np.array([[[[1.0, INF, 2.0, 3.0], [0.5, 1.5, -2.0, 4.0]]]], np.float32)
    compare(torch, lambda L, x: F(L).interpolate(x, size=(2, 4), mode="bicubic"), x)
    compare(torch, lambda L, x: F(L).interpolate(x, scale_factor=3, mode="bicubic"), x)


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 1, 3, 3, 3)])
def test_bicubic_needs_4d_input(torch, shape):
    compare(torch, lambda L, x: F(L).interpolate(x, scale_factor=2, mode="bicubic"), np.ones(shape, np.float32))


def test_bicubic_refuses_integers(torch):
    compare(torch, lambda L, x: F(L).interpolate(x, scale_factor=2, mode="bicubic"), np.ones((1, 1, 2, 2), np.int64))


def test_bicubic_double_backward():
    x = trainkit.tensor(np.random.default_rng(11).standard_normal((1, 2, 4, 5)), requires_grad=True)
    assert trainkit.autograd.gradcheck(lambda x: F(trainkit).interpolate(x, size=(7, 3), mode="bicubic"), (x,))
    assert trainkit.autograd.gradgradcheck(lambda x: F(trainkit).interpolate(x, scale_factor=2, mode="bicubic"), (x,))
