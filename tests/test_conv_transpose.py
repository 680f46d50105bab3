"""F.conv_transpose2d and nn.ConvTranspose2d against PyTorch: values, gradients of input, weight and bias, node
names, second derivatives, errors, the layer's repr, init and ``output_size``.

Trainkit runs on the ``device`` fixture, torch on the CPU, both on the same float32 inputs; float64 finite
differences check the first and second derivatives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional import conv_transpose2d
from trainkit.layers.conv import ConvTranspose2d

RTOL, ATOL = 1e-4, 1e-5


def _node_name(t) -> str | None:
    return None if t.grad_fn is None else t.grad_fn.name()


def _compare(torch, rng, device, tk_fn, th_fn, shapes):
    """Both functions on the same float32 inputs (None stays None), then backward from the same upstream gradient:
    outputs, their dtype and node name, and every input's gradient must agree."""
    arrays = [None if s is None else rng.standard_normal(s).astype(np.float32) for s in shapes]
    tk_in = [None if a is None else trainkit.tensor(a, device=device, requires_grad=True) for a in arrays]
    th_in = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    tk_out, th_out = tk_fn(*tk_in), th_fn(*th_in)
    assert tuple(tk_out.shape) == tuple(th_out.shape)
    assert tk_out.dtype == trainkit.float32
    assert _node_name(tk_out) == _node_name(th_out)
    np.testing.assert_allclose(to_numpy(tk_out), to_numpy(th_out), rtol=RTOL, atol=ATOL)
    upstream = rng.standard_normal(tuple(th_out.shape)).astype(np.float32)
    tk_out.backward(trainkit.tensor(upstream, device=device))
    th_out.backward(torch.tensor(upstream))
    for i, (a, b) in enumerate(zip(tk_in, th_in)):
        if a is not None:
            assert a.grad.dtype == trainkit.float32, f"input {i}"
            np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), rtol=RTOL, atol=1e-4, err_msg=f"input {i}")
    return tk_out, th_out


# ------------------------------------------------------------------------------------------- the function
CASES = [
    # (input shape, weight shape (C_in, C_out / groups, KH, KW), bias, keyword arguments)
    ((2, 3, 5, 5), (3, 4, 3, 3), True, {}),
    ((2, 3, 5, 6), (3, 4, 3, 3), False, {"stride": 2}),
    ((2, 3, 5, 6), (3, 4, 3, 3), True, {"stride": 2, "padding": 1, "output_padding": 1}),
    ((1, 2, 4, 7), (2, 3, 2, 3), True, {"stride": (2, 3), "padding": (1, 2), "output_padding": (1, 2)}),
    ((2, 3, 6, 5), (3, 2, 3, 2), True, {"dilation": 2, "padding": 1}),
    ((2, 3, 4, 4), (3, 2, 3, 3), True, {"dilation": 3, "padding": 2, "output_padding": 2}),  # op < dilation
    ((2, 3, 5, 4), (3, 2, 3, 3), True, {"stride": 3, "padding": 1, "output_padding": 2}),
    ((2, 4, 5, 5), (4, 3, 3, 3), True, {"groups": 2, "padding": 1}),
    ((2, 4, 5, 6), (4, 2, 2, 3), True, {"groups": 4, "stride": 2, "dilation": (1, 2), "output_padding": 1}),
    ((2, 6, 4, 5), (6, 1, 3, 3), False, {"groups": 6, "stride": 2, "padding": 1}),  # depthwise
    ((3, 5, 4, 4), (5, 4, 1, 1), True, {}),  # 1x1: a channel mix
    ((2, 3, 4, 5), (3, 2, 1, 1), True, {"dilation": 2, "output_padding": 1}),  # 1x1 with output padding
    ((2, 3, 3, 3), (3, 2, 5, 5), True, {"padding": 3}),  # padding crops more than the input adds
    ((0, 3, 4, 4), (3, 2, 3, 3), True, {"stride": 2}),  # an empty batch
]


@pytest.mark.parametrize("xs, ws, bias, kwargs", CASES, ids=[f"{c[0]}{c[1]}{c[3]}" for c in CASES])
def test_conv_transpose2d_values_and_grads_match_torch(xs, ws, bias, kwargs, device, torch, rng):
    bs = (ws[1] * kwargs.get("groups", 1),) if bias else None
    _compare(
        torch,
        rng,
        device,
        lambda x, w, b: conv_transpose2d(x, w, b, **kwargs),
        lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kwargs),
        [xs, ws, bs],
    )


def test_conv_transpose2d_is_one_node_with_torch_name(device, rng):
    x = trainkit.tensor(rng.standard_normal((1, 2, 3, 3)), dtype=trainkit.float32, device=device, requires_grad=True)
    w = trainkit.tensor(rng.standard_normal((2, 3, 2, 2)), dtype=trainkit.float32, device=device, requires_grad=True)
    b = trainkit.zeros(3, device=device, requires_grad=True)
    out = conv_transpose2d(x, w, b, stride=2)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    assert [type(fn).__name__ for fn, _ in out.grad_fn.next_functions] == ["AccumulateGrad"] * 3


def test_conv_transpose2d_unbatched_input_is_squeezed_back_as_in_torch(device, torch, rng):
    out, _ = _compare(
        torch,
        rng,
        device,
        lambda x, w, b: conv_transpose2d(x, w, b, stride=2),
        lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, stride=2),
        [(3, 4, 5), (3, 2, 3, 3), (2,)],
    )
    assert _node_name(out) == "SqueezeBackward1"


def test_conv_transpose2d_is_the_adjoint_of_conv2d(rng):
    """<conv2d(y), x> = <y, conv_transpose2d(x)> for the same weight and settings."""
    w = trainkit.tensor(rng.standard_normal((3, 2, 3, 2)))
    x = trainkit.tensor(rng.standard_normal((2, 3, 4, 5)))
    kwargs = {"stride": 2, "padding": 1, "dilation": (1, 2)}
    out = conv_transpose2d(x, w, **kwargs, output_padding=1)
    y = trainkit.tensor(rng.standard_normal(tuple(out.shape)))
    lhs = (trainkit.nn.functional.conv2d(y, w, **kwargs) * x).sum().item()
    assert math.isclose(lhs, (y * out).sum().item(), rel_tol=1e-4)


def test_conv_transpose2d_keeps_float32_and_float64(device):
    for dtype in (trainkit.float32, trainkit.float64):
        x = trainkit.ones(1, 2, 3, 3, dtype=dtype, device=device)
        assert conv_transpose2d(x, trainkit.ones(2, 1, 2, 2, dtype=dtype, device=device)).dtype == dtype


# ------------------------------------------------------------------------- finite differences (float64)
def _f64(rng, device, *shape):
    return trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, device=device, requires_grad=True)


GRADCHECK_CASES = {
    "plain": (lambda x, w, b: conv_transpose2d(x, w, b), [(2, 3, 3, 4), (3, 2, 2, 3), (2,)]),
    "strided": (
        lambda x, w, b: conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        [(1, 2, 3, 3), (2, 3, 3, 3), (3,)],
    ),
    "groups_dilation": (
        lambda x, w: conv_transpose2d(x, w, stride=(1, 2), groups=2, dilation=(2, 1)),
        [(2, 4, 3, 3), (4, 1, 2, 3)],
    ),
    "unbatched": (lambda x, w: conv_transpose2d(x, w, stride=2), [(2, 3, 2), (2, 2, 2, 2)]),
}


@pytest.mark.parametrize("name", list(GRADCHECK_CASES))
def test_conv_transpose2d_gradcheck_and_gradgradcheck(name, device, rng):
    fn, shapes = GRADCHECK_CASES[name]
    inputs = tuple(_f64(rng, device, *s) for s in shapes)
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)  # the backward is made of differentiable ops under create_graph


def test_double_backward_through_conv_transpose2d_matches_torch(torch, rng):
    x0, w0 = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((3, 2, 3, 3))

    def gradient_penalty(lib, x, w):
        fn = torch.nn.functional.conv_transpose2d if lib is torch else conv_transpose2d
        out = fn(x, w, stride=2, padding=1)
        (gx,) = lib.autograd.grad((out * out).sum(), x, create_graph=True)
        return (gx * gx).sum()

    tk_x, tk_w = (trainkit.tensor(a, requires_grad=True) for a in (x0, w0))
    th_x, th_w = (torch.tensor(a, requires_grad=True) for a in (x0, w0))
    gradient_penalty(trainkit, tk_x, tk_w).backward()
    gradient_penalty(torch, th_x, th_w).backward()
    np.testing.assert_allclose(tk_x.grad.numpy(), th_x.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tk_w.grad.numpy(), th_w.grad.numpy(), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------------------------- errors
def _ct(lib, x_shape=(2, 4, 5, 5), w_shape=(4, 3, 3, 3), bias=None, x_dtype=None, **kwargs):
    fn = conv_transpose2d if lib is trainkit else lib.nn.functional.conv_transpose2d
    x = lib.ones(*x_shape) if x_dtype is None else lib.ones(*x_shape, dtype=getattr(lib, x_dtype))
    b = None if bias is None else lib.ones(*bias)
    return fn(x, lib.ones(*w_shape), b, **kwargs)


ERROR_CASES = [
    ({"x_shape": (5, 5)}, ["Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d", "[5, 5]"]),
    ({"stride": (1, 2, 3)}, ["expected stride to be a single integer value or a list of 2 values"]),
    ({"stride": 0}, ["non-positive stride is not supported"]),
    ({"padding": -1}, ["negative padding is not supported"]),
    ({"output_padding": -1}, ["negative output_padding is not supported"]),
    ({"groups": 0}, ["non-positive groups is not supported"]),
    ({"groups": 3}, ["Given groups=3, expected weight to be divisible by 3 at dimension 0"]),
    (
        {"w_shape": (3, 3, 3, 3)},
        [
            "Given transposed=1, weight of size [3, 3, 3, 3], expected input[2, 4, 5, 5]",
            "to have 3 channels, but got 4 channels instead",
        ],
    ),
    ({"bias": (2,)}, ["expected bias to be 1-dimensional with 3 elements, but got bias of size [2] instead"]),
    ({"bias": (3,), "groups": 2}, ["expected bias to be 1-dimensional with 6 elements"]),
    ({"x_shape": (2, 4, 0, 5)}, ["Only zero batch or zero channel inputs are supported", "[2, 4, 0, 5]"]),
    ({"x_dtype": "float64"}, ["expected scalar type Double but found Float"]),
    (
        {"stride": 2, "output_padding": 2},
        [
            "output padding must be smaller than either stride or dilation",
            "output_padding_height: 2 output_padding_width: 2 stride_height: 2",
        ],
    ),
    ({"output_padding": 1}, ["output padding must be smaller than either stride or dilation"]),
    ({"x_dtype": "int32", "w_shape": (4, 3, 3, 3)}, []),
]


@pytest.mark.parametrize("kwargs, words", ERROR_CASES, ids=[str(c[0]) for c in ERROR_CASES])
def test_conv_transpose2d_errors_match_torch(kwargs, words, torch):
    if kwargs.get("x_dtype") == "int32":  # an integer weight too: torch has no integer kernel

        def fn(lib, dev):
            f = conv_transpose2d if lib is trainkit else lib.nn.functional.conv_transpose2d
            return f(lib.ones(1, 2, 3, 3, dtype=lib.int32), lib.ones(2, 1, 2, 2, dtype=lib.int32))

        assert_same_error(torch, fn, "not implemented for 'Int'")
        return
    assert_same_error(torch, lambda lib, dev: _ct(lib, **kwargs), *words)


def test_conv_transpose2d_dtype_mismatches_match_torch(torch):
    def run(lib, x_dtype, w_dtype, b_dtype):
        fn = conv_transpose2d if lib is trainkit else lib.nn.functional.conv_transpose2d
        x, w, b = lib.ones(1, 2, 3, 3, dtype=x_dtype), lib.ones(2, 3, 2, 2, dtype=w_dtype), lib.ones(3, dtype=b_dtype)
        return fn(x, w, b)

    def dtypes(lib, *names):
        return [getattr(lib, n) for n in names]

    # torch words these by the kernel it picks (which depends on the sizes): only the dtypes are sure to appear
    assert_same_error(
        torch, lambda lib, dev: run(lib, *dtypes(lib, "float32", "float64", "float32")), "float", "double"
    )
    assert_same_error(
        torch, lambda lib, dev: run(lib, *dtypes(lib, "float64", "float32", "float64")), "float", "double"
    )
    # torch's kernel for other dtypes casts a bias of another type
    assert run(trainkit, *dtypes(trainkit, "float64", "float64", "float32")).dtype == trainkit.float64
    assert run(torch, *dtypes(torch, "float64", "float64", "float32")).dtype == torch.float64


def test_conv_transpose2d_rejects_padding_strings_and_too_small_outputs(torch):
    assert_same_error(torch, lambda lib, dev: _ct(lib, padding="same"), "argument 'padding' must be tuple of ints")
    with pytest.raises(RuntimeError, match="Output size is too small"):
        _ct(trainkit, padding=4)


# ------------------------------------------------------------------------------------------------ layer
LAYER_CASES = [
    ((16, 33, 3), {"stride": 2}),
    (
        (4, 6, (3, 5)),
        {"stride": (2, 1), "padding": (4, 2), "output_padding": (1, 0), "groups": 2, "bias": False, "dilation": (1, 3)},
    ),
    ((4, 4, 2), {"stride": 2, "dilation": 2, "output_padding": 1}),
    ((3, 2, 1), {}),
]


@pytest.mark.parametrize("args, kwargs", LAYER_CASES, ids=[f"{c[0]}{c[1]}" for c in LAYER_CASES])
def test_layer_repr_and_forward_match_torch(args, kwargs, device, torch, rng):
    tk_layer = ConvTranspose2d(*args, **kwargs)
    th_layer = torch.nn.ConvTranspose2d(*args, **kwargs)
    assert repr(tk_layer) == repr(th_layer)
    assert tk_layer.weight.shape == tuple(th_layer.weight.shape) and tk_layer.transposed
    assert (tk_layer.bias is None) == (th_layer.bias is None)
    with torch.no_grad():  # the same weights in both
        for (_, p), (_, q) in zip(tk_layer.named_parameters(), th_layer.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    params = list(tk_layer.parameters())
    tk_layer.to(device)
    _compare(torch, rng, device, tk_layer, th_layer, [(2, args[0], 5, 4)])
    for p, q in zip(params, th_layer.parameters()):
        np.testing.assert_allclose(to_numpy(p.grad), q.grad.numpy(), rtol=RTOL, atol=1e-4)


def test_layer_default_init_follows_torch_bounds(torch):
    trainkit.manual_seed(0)
    layer = ConvTranspose2d(32, 16, 3, groups=2)
    reference = torch.nn.ConvTranspose2d(32, 16, 3, groups=2)
    bound = 1 / math.sqrt(16 // 2 * 9)  # torch's fan_in for this layout: dimension 1 times the kernel
    assert tuple(layer.weight.shape) == (32, 8, 3, 3)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert np.abs(reference.weight.detach().numpy()).max() <= bound
    assert np.abs(reference.bias.detach().numpy()).max() <= bound
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.98 * bound  # 2304 draws come close to the bound
    assert layer.weight.dtype == trainkit.float32


@pytest.mark.parametrize("output_size", [[10, 10], [9, 10], (2, 4, 10, 9), [4, 10, 9]])
def test_layer_output_size_matches_torch(output_size, torch, rng):
    batched = len(output_size) != 3
    layer, reference = (
        ConvTranspose2d(3, 4, 3, stride=2, padding=1),
        torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1),
    )
    with torch.no_grad():
        reference.weight.copy_(torch.from_numpy(layer.weight.detach().numpy()))
        reference.bias.copy_(torch.from_numpy(layer.bias.detach().numpy()))
    x = rng.standard_normal((2, 3, 5, 5) if batched else (3, 5, 5)).astype(np.float32)
    ours = layer(trainkit.tensor(x), output_size=output_size)
    theirs = reference(torch.tensor(x), output_size=output_size)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(to_numpy(ours), theirs.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_layer_errors_match_torch(torch):
    def layer(lib, **kwargs):
        return (ConvTranspose2d if lib is trainkit else lib.nn.ConvTranspose2d)(4, 2, 3, stride=2, **kwargs)

    assert_same_error(
        torch,
        lambda lib, dev: layer(lib, padding_mode="reflect"),
        'Only "zeros" padding mode is supported for ConvTranspose2d',
    )
    assert_same_error(torch, lambda lib, dev: layer(lib, groups=3), "in_channels must be divisible by groups")
    assert_same_error(
        torch,
        lambda lib, dev: layer(lib)(lib.ones(1, 4, 5, 5), output_size=[13, 11]),
        "requested an output size of [13, 11], but valid sizes range from [11, 11] to [12, 12]",
    )
    assert_same_error(
        torch,
        lambda lib, dev: layer(lib)(lib.ones(1, 4, 5, 5), output_size=[11]),
        "ConvTranspose2D: for 4D input, output_size must have 2 or 4 elements (got 1)",
    )
