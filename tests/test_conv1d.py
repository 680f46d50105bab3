"""1-d convolutions against PyTorch: F.conv1d, F.conv_transpose1d, nn.Conv1d, nn.ConvTranspose1d (values, gradients
of input, weight and bias, graph node names, errors, state_dict round trips), and BatchNorm1d over (N, C, L)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
import trainkit.nn as nn
import trainkit.nn.functional as F
from trainkit.autograd import gradcheck, gradgradcheck

DTYPES = [np.float32, np.float64]


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _both(torch, dtype, *arrays):
    """Each array as a trainkit and a torch tensor requiring grad (None stays None)."""
    ours, theirs = [], []
    for a in arrays:
        if a is None:
            ours.append(None)
            theirs.append(None)
        else:
            ours.append(trainkit.tensor(a.astype(dtype), requires_grad=True))
            theirs.append(torch.tensor(a.astype(dtype), requires_grad=True))
    return ours, theirs


def _compare(torch, fn, tfn, x_shape, w_shape, bias: bool, dtype, **kw):
    rng = np.random.default_rng(len(x_shape) * 100 + sum(w_shape))
    arrays = [
        rng.standard_normal(x_shape),
        rng.standard_normal(w_shape),
        rng.standard_normal(w_shape[0] if fn is F.conv1d else w_shape[1] * kw.get("groups", 1)) if bias else None,
    ]
    ours, theirs = _both(torch, dtype, *arrays)
    out, expected = fn(*ours, **kw), tfn(*theirs, **kw)
    assert tuple(out.shape) == tuple(expected.shape)
    assert out.dtype == getattr(trainkit, np.dtype(dtype).name)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **_tol(dtype))
    g = rng.standard_normal(tuple(expected.shape)).astype(dtype)
    out.backward(trainkit.tensor(g))
    expected.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        if a is not None:
            assert a.grad.dtype == a.dtype
            np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), **_tol(dtype))
    return out, expected


CONV_CASES = [
    # x shape, w shape, bias, keywords
    ((2, 4, 11), (6, 4, 3), True, {}),
    ((2, 4, 11), (6, 4, 3), False, dict(stride=2, padding=1)),
    ((3, 4, 12), (6, 2, 4), True, dict(groups=2, dilation=2, padding=3)),
    ((2, 6, 9), (6, 1, 3), True, dict(groups=6, stride=3)),
    ((2, 4, 10), (5, 4, 4), True, dict(padding="same")),
    ((2, 4, 10), (5, 4, 4), True, dict(padding="same", dilation=3)),
    ((2, 4, 10), (5, 4, 3), True, dict(padding="same", dilation=2)),
    ((2, 4, 10), (5, 4, 5), False, dict(padding="valid", stride=(2,))),
    ((4, 10), (5, 4, 3), True, dict(padding=[2])),
    ((4, 10), (6, 2, 2), True, dict(padding="same", groups=2)),
    ((2, 4, 7), (3, 4, 1), True, {}),
    ((2, 3, 5), (2, 3, 5), True, {}),
    ((0, 4, 7), (3, 4, 3), True, {}),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape, w_shape, bias, kw", CONV_CASES)
def test_conv1d_matches_torch(torch, dtype, x_shape, w_shape, bias, kw):
    out, expected = _compare(torch, F.conv1d, torch.nn.functional.conv1d, x_shape, w_shape, bias, dtype, **kw)
    if x_shape[0]:
        assert out.grad_fn.name() == type(expected.grad_fn).__name__


TRANSPOSE_CASES = [
    ((2, 4, 7), (4, 3, 3), True, {}),
    ((2, 4, 7), (4, 3, 3), False, dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 7), (4, 3, 3), True, dict(stride=3, padding=1, output_padding=2, dilation=2, groups=2)),
    ((2, 6, 5), (6, 1, 4), True, dict(groups=6, stride=2)),
    ((4, 7), (4, 3, 3), True, dict(stride=2, output_padding=(1,))),
    ((4, 7), (4, 3, 1), True, dict(output_padding=1, dilation=2)),
    ((2, 4, 7), (4, 2, 5), True, dict(padding=2, dilation=(2,))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape, w_shape, bias, kw", TRANSPOSE_CASES)
def test_conv_transpose1d_matches_torch(torch, dtype, x_shape, w_shape, bias, kw):
    out, expected = _compare(
        torch, F.conv_transpose1d, torch.nn.functional.conv_transpose1d, x_shape, w_shape, bias, dtype, **kw
    )
    assert out.grad_fn.name() == type(expected.grad_fn).__name__


def test_graph_nodes_as_torch(torch):
    x = trainkit.randn(2, 4, 9, requires_grad=True)
    w = trainkit.randn(6, 4, 3, requires_grad=True)
    out = F.conv1d(x, w)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    assert out.grad_fn.next_functions[0][0].variable is x
    assert F.conv1d(x[0], w).grad_fn.name() == "SqueezeBackward1"
    up = F.conv_transpose1d(x, trainkit.randn(4, 2, 3, requires_grad=True))
    assert up.grad_fn.name() == "ConvolutionBackward0"


def _f64(*shape):
    return trainkit.randn(*shape, dtype=trainkit.float64, requires_grad=True)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, groups=2), dict(padding="same", dilation=3)])
def test_conv1d_gradcheck_and_gradgradcheck(kw):
    trainkit.manual_seed(0)
    x, w, b = _f64(1, 4, 6), _f64(4, 4 // kw.get("groups", 1), 2), _f64(4)
    assert gradcheck(lambda x, w, b: F.conv1d(x, w, b, **kw), (x, w, b))
    assert gradgradcheck(lambda x, w, b: F.conv1d(x, w, b, **kw), (x, w, b))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1, groups=2)])
def test_conv_transpose1d_gradcheck_and_gradgradcheck(kw):
    trainkit.manual_seed(1)
    x, w, b = _f64(1, 4, 4), _f64(4, 2, 3), _f64(2 * kw.get("groups", 1))
    assert gradcheck(lambda x, w, b: F.conv_transpose1d(x, w, b, **kw), (x, w, b))
    assert gradgradcheck(lambda x, w, b: F.conv_transpose1d(x, w, b, **kw), (x, w, b))


def test_unbatched_gradcheck():
    trainkit.manual_seed(2)
    x, w = _f64(3, 5), _f64(2, 3, 3)
    assert gradcheck(lambda x, w: F.conv1d(x, w, padding=1), (x, w))
    assert gradgradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=2), (x, _f64(3, 1, 2)))


def _x(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


CONV_ERRORS = [
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 3, 3)), ("expected input[2, 4, 10] to have 3 channels",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3, 3)), ("4-dimensional weight [6, 4, 3, 3]",)),
    (lambda lib, x: lib.nn.functional.conv1d(x.reshape(80), lib.ones(6, 4, 3)), ("input of size: [80]",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 30)), ("padded input size per channel: (10)",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), lib.ones(5)), ("bias of size [5]",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), stride=(1, 2)), ("stride=[1, 2]",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), padding="same", stride=2), ("strided",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), padding="foo"), ("Invalid padding string",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), padding=-1), ("negative padding",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), stride=0), ("non-positive stride",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), dilation=0), ("non-positive dilation",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), groups=0), ("non-positive groups",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(5, 2, 3), groups=2), ("divisible by 2", "[[5, 2, 3]]")),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(0, 4, 3)), ("at least 1 at dimension 0",)),
    (lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4)), ("at least three dimensions",)),
    (
        lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3, dtype=lib.float64)),
        ("torch.FloatTensor", "torch.DoubleTensor"),
    ),
    (lambda lib, x: lib.nn.functional.conv1d(x.double(), lib.ones(6, 4, 3)), ("expected scalar type Double",)),
    (
        lambda lib, x: lib.nn.functional.conv1d(x, lib.ones(6, 4, 3), lib.ones(6, dtype=lib.float64)),
        ("bias type (double)",),
    ),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(3, 3, 3)), ("transposed=1", "input[2, 4, 10]")),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3, 3)), ("4-dimensional weight",)),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x.reshape(80), lib.ones(4, 3, 3)), ("input of size: [80]",)),
    (
        lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), stride=2, output_padding=2),
        ("output_padding_width: 2 stride_height: 1 stride_width: 2",),
    ),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), padding="same"), ("must be tuple",)),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), lib.ones(4)), ("bias of size [4]",)),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), groups=3), ("divisible by 3",)),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), groups=8), ("at least 8",)),
    (
        lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), output_padding=-1),
        ("negative output_padding",),
    ),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3), stride=0), ("non-positive stride",)),
    (lambda lib, x: lib.nn.functional.conv_transpose1d(x[:, :, :0], lib.ones(4, 3, 3)), ("[2, 4, 1, 0]",)),
    (
        lambda lib, x: lib.nn.functional.conv_transpose1d(x, lib.ones(4, 3, 3, dtype=lib.float64)),
        ("torch.DoubleTensor",),
    ),
    (
        lambda lib, x: lib.nn.functional.conv_transpose1d(x.double(), lib.ones(4, 3, 3, dtype=lib.float64), padding=20),
        ("Output size is too small",),
    ),
]


@pytest.mark.parametrize("case", range(len(CONV_ERRORS)))
def test_errors_as_torch(torch, case):
    fn, words = CONV_ERRORS[case]
    data = _x(2, 4, 10)
    assert_same_error(torch, lambda lib, dev: fn(lib, lib.tensor(data)), *words)


# ---------------------------------------------------------------------------------------------------- modules
def _load(ours, theirs):
    ours.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


MODULE_CASES = [
    dict(kernel_size=3, padding=1),
    dict(kernel_size=4, padding="same", dilation=2),
    dict(kernel_size=3, stride=2, padding=2, groups=2, bias=False),
    dict(kernel_size=2, padding="valid"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "mode, kw",
    [
        (mode, kw)
        for i, mode in enumerate(["zeros", "reflect", "replicate", "circular"])
        for kw in (MODULE_CASES[i], MODULE_CASES[(i + 1) % 4])
    ],
)
def test_conv1d_module_from_torch_state_dict(torch, dtype, mode, kw):
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    theirs = torch.nn.Conv1d(4, 6, padding_mode=mode, dtype=tdtype, **kw)
    ours = nn.Conv1d(4, 6, padding_mode=mode, dtype=getattr(trainkit, np.dtype(dtype).name), **kw)
    _load(ours, theirs)
    assert repr(ours) == repr(theirs)
    for shape in ((2, 4, 9), (4, 9)):
        data = _x(*shape, dtype=dtype)
        x, tx = trainkit.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        out, expected = ours(x), theirs(tx)
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **_tol(dtype))
        out.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(to_numpy(x.grad), to_numpy(tx.grad), **_tol(dtype))
    np.testing.assert_allclose(to_numpy(ours.weight.grad), to_numpy(theirs.weight.grad), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_transpose1d_module_and_output_size(torch, dtype):
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    theirs = torch.nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, groups=2, dtype=tdtype)
    ours = nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, groups=2, dtype=getattr(trainkit, np.dtype(dtype).name))
    _load(ours, theirs)
    assert repr(ours) == repr(theirs)
    for shape, size in (((2, 4, 5), None), ((2, 4, 5), [14]), ((2, 4, 5), [2, 6, 15]), ((4, 5), [6, 13])):
        data = _x(*shape, dtype=dtype)
        x, tx = trainkit.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        out, expected = ours(x, output_size=size), theirs(tx, output_size=size)
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **_tol(dtype))
        out.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(to_numpy(x.grad), to_numpy(tx.grad), **_tol(dtype))
    np.testing.assert_allclose(to_numpy(ours.bias.grad), to_numpy(theirs.bias.grad), **_tol(dtype))


def test_module_shapes_and_initialisation():
    trainkit.manual_seed(0)
    conv = nn.Conv1d(8, 12, 5, groups=2)
    assert tuple(conv.weight.shape) == (12, 4, 5) and tuple(conv.bias.shape) == (12,)
    bound = 1 / math.sqrt(4 * 5)
    assert float(conv.weight.abs().max()) <= bound and float(conv.bias.abs().max()) <= bound
    # uniform in +-bound: standard deviation bound / sqrt(3)
    assert abs(float(conv.weight.std()) - bound / math.sqrt(3)) < 0.2 * bound
    up = nn.ConvTranspose1d(8, 12, 5, groups=4)
    assert tuple(up.weight.shape) == (8, 3, 5)
    assert float(up.weight.abs().max()) <= 1 / math.sqrt(3 * 5)
    assert nn.Conv1d(2, 3, 1, bias=False).bias is None
    assert [name for name, _ in nn.Conv1d(2, 3, 1).named_parameters()] == ["weight", "bias"]


MODULE_ERRORS = [
    (lambda lib: lib.nn.Conv1d(4, 6, 3, padding="foo"), ("Invalid padding string 'foo'",)),
    (lambda lib: lib.nn.Conv1d(4, 6, 3, padding="same", stride=2), ("strided",)),
    (lambda lib: lib.nn.Conv1d(4, 6, 3, padding_mode="x"), ("padding_mode must be one of",)),
    (lambda lib: lib.nn.Conv1d(4, 6, 3, groups=0), ("positive integer",)),
    (lambda lib: lib.nn.Conv1d(4, 6, 3, groups=3), ("in_channels must be divisible",)),
    (lambda lib: lib.nn.Conv1d(4, 6, 3, groups=4), ("out_channels must be divisible",)),
    (lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, padding_mode="reflect"), ('"zeros" padding mode',)),
    (
        lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, stride=3)(lib.ones(2, 4, 3), output_size=[8]),
        ("valid sizes range from [9] to [11]",),
    ),
    (
        lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, stride=3)(lib.ones(2, 4, 3), output_size=[1, 2, 3, 4]),
        ("must have 1 or 3 elements (got 4)",),
    ),
]


@pytest.mark.parametrize("case", range(len(MODULE_ERRORS)))
def test_module_errors_as_torch(torch, case):
    fn, words = MODULE_ERRORS[case]
    assert_same_error(torch, lambda lib, dev: fn(lib), *words)


# ------------------------------------------------------------------------------------------------ BatchNorm1d
@pytest.mark.parametrize("dtype", DTYPES)
def test_batchnorm1d_on_sequences(torch, dtype):
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    theirs = torch.nn.BatchNorm1d(4, dtype=tdtype)
    with torch.no_grad():
        theirs.weight.uniform_()
        theirs.bias.uniform_()
    ours = nn.BatchNorm1d(4, dtype=getattr(trainkit, np.dtype(dtype).name))
    _load(ours, theirs)
    rng = np.random.default_rng(3)
    for train in (True, True, False):
        ours.train(train)
        theirs.train(train)
        data = (rng.standard_normal((3, 4, 7)) * 3 + 1).astype(dtype)
        x, tx = trainkit.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        out, expected = ours(x), theirs(tx)
        assert out.dtype == x.dtype
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **_tol(dtype))
        g = rng.standard_normal(data.shape).astype(dtype)
        out.backward(trainkit.tensor(g))
        expected.backward(torch.tensor(g))
        np.testing.assert_allclose(to_numpy(x.grad), to_numpy(tx.grad), **_tol(dtype))
        np.testing.assert_allclose(to_numpy(ours.running_mean), to_numpy(theirs.running_mean), **_tol(dtype))
        np.testing.assert_allclose(to_numpy(ours.running_var), to_numpy(theirs.running_var), **_tol(dtype))
    np.testing.assert_allclose(to_numpy(ours.weight.grad), to_numpy(theirs.weight.grad), **_tol(dtype))
    np.testing.assert_allclose(to_numpy(ours.bias.grad), to_numpy(theirs.bias.grad), **_tol(dtype))
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)


def test_on_device_as_on_cpu(device):
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 4, 9)), rng.standard_normal((6, 2, 3)), rng.standard_normal(6)
    wt = rng.standard_normal((4, 3, 3))
    results = []
    for dev in ("cpu", device):
        xs = [trainkit.tensor(a.astype(np.float32), device=dev, requires_grad=True) for a in (x, w, b, wt)]
        conv = nn.Conv1d(4, 6, 3, padding=2, groups=2, padding_mode="reflect").to(dev)
        with trainkit.no_grad():
            conv.weight.copy_(xs[1])
            conv.bias.copy_(xs[2])
        out = (
            F.conv1d(xs[0], xs[1], xs[2], stride=2, padding="valid", groups=2).sum()
            + F.conv_transpose1d(xs[0], xs[3], stride=2, output_padding=1).square().sum()
            + conv(xs[0]).sum()
        )
        out.backward()
        results.append([to_numpy(out)] + [to_numpy(t.grad) for t in xs] + [to_numpy(conv.weight.grad)])
    for a, c in zip(*results):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-4)
