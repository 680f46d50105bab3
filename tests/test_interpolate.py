"""F.interpolate and nn.Upsample against PyTorch: values, gradients and node names for 'nearest' (1-D, 2-D, 3-D),
'linear', 'bilinear', 'trilinear' and 'area', sizes and scale factors up and down, ``align_corners``,
``recompute_scale_factor``; PyTorch's index rounding in its corner cases; second derivatives; errors; the layers.

Trainkit runs on the ``device`` fixture, torch on the CPU, both on the same inputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional import interpolate, upsample, upsample_bilinear, upsample_nearest
from trainkit.layers.upsample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d


def _compare(torch, rng, device, shape, kwargs, dtype=np.float32, tk_fn=None, th_fn=None):
    """interpolate on the same input in both, then backward from the same upstream gradient: values, dtype, node
    name and the input's gradient must agree (float32: to a few roundings; float64: to 1e-12)."""
    tk_fn = tk_fn or (lambda x: interpolate(x, **kwargs))
    th_fn = th_fn or (lambda x: torch.nn.functional.interpolate(x, **kwargs))
    data = rng.standard_normal(shape).astype(dtype)
    tk_x = trainkit.tensor(data, device=device, requires_grad=True)
    th_x = torch.tensor(data, requires_grad=True)
    tk_out, th_out = tk_fn(tk_x), th_fn(th_x)
    assert tuple(tk_out.shape) == tuple(th_out.shape)
    assert tk_out.dtype == tk_x.dtype
    assert type(tk_out.grad_fn).__name__ == type(th_out.grad_fn).__name__
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(to_numpy(tk_out), to_numpy(th_out), rtol=tol, atol=tol)
    upstream = rng.standard_normal(tuple(th_out.shape)).astype(dtype)
    tk_out.backward(trainkit.tensor(upstream, device=device))
    th_out.backward(torch.tensor(upstream))
    assert tk_x.grad.dtype == tk_x.dtype
    np.testing.assert_allclose(to_numpy(tk_x.grad), to_numpy(th_x.grad), rtol=10 * tol, atol=10 * tol)
    return tk_out


CASES = [
    # nearest, 1-D / 2-D / 3-D spatial: sizes and scale factors, up and down
    ((2, 3, 7), {"size": 15}),
    ((2, 3, 7), {"size": 3}),
    ((2, 3, 7), {"scale_factor": 2.5}),
    ((2, 3, 10), {"scale_factor": 0.35, "recompute_scale_factor": True}),
    ((2, 3, 5, 7), {"scale_factor": 2}),
    ((2, 3, 5, 7), {"size": (8, 3)}),
    ((2, 3, 6, 7), {"scale_factor": (0.5, 1.7)}),
    ((2, 3, 6, 7), {"scale_factor": (1.3, 2.1), "recompute_scale_factor": True}),
    ((1, 2, 3, 4, 5), {"size": (5, 2, 7)}),
    ((1, 2, 3, 4, 5), {"scale_factor": (2, 0.5, 1.5)}),
    ((0, 3, 4, 5), {"scale_factor": 2}),  # an empty batch
    # linear (3-D input), bilinear (4-D), trilinear (5-D), align_corners both ways
    ((2, 3, 7), {"size": 16, "mode": "linear"}),
    ((2, 3, 9), {"size": 4, "mode": "linear", "align_corners": True}),
    ((2, 3, 9), {"scale_factor": 1.7, "mode": "linear"}),
    ((2, 3, 5, 6), {"size": (9, 4), "mode": "bilinear"}),
    ((2, 3, 5, 6), {"size": (9, 4), "mode": "bilinear", "align_corners": True}),
    ((2, 3, 8, 6), {"scale_factor": 0.5, "mode": "bilinear"}),
    ((2, 3, 8, 6), {"scale_factor": (2.3, 1.5), "mode": "bilinear", "align_corners": True}),
    ((2, 3, 8, 6), {"scale_factor": (0.7, 3), "mode": "bilinear", "recompute_scale_factor": True}),
    ((2, 3, 1, 6), {"size": (3, 6), "mode": "bilinear", "align_corners": True}),  # one input row, an unchanged axis
    ((1, 2, 3, 4, 5), {"size": (5, 2, 7), "mode": "trilinear"}),
    ((1, 2, 3, 4, 5), {"scale_factor": 1.5, "mode": "trilinear", "align_corners": True}),
    # area: adaptive average pooling for 4-D input
    ((2, 3, 9, 7), {"size": (4, 3), "mode": "area"}),
    ((2, 3, 9, 7), {"scale_factor": 0.5, "mode": "area"}),
]


@pytest.mark.parametrize("shape, kwargs", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_interpolate_matches_torch(shape, kwargs, device, torch, rng):
    _compare(torch, rng, device, shape, kwargs)


F64_CASES = [c for c in CASES if c[0][0] and c[1].get("mode") != "area"]


@pytest.mark.parametrize("shape, kwargs", F64_CASES, ids=[f"{c[0]}{c[1]}" for c in F64_CASES])
def test_interpolate_float64_matches_torch(shape, kwargs, device, torch, rng):
    _compare(torch, rng, device, shape, kwargs, dtype=np.float64)


CORNER_CASES = [
    # torch computes positions in float32 and floors them; its generic nearest kernel has no special cases (a
    # scale factor that keeps the size does not copy), its vectorised one (2-D, small outputs) and its backward do
    ((1, 2, 1000), {"scale_factor": 1.0004}),
    ((2, 3, 11, 31), {"scale_factor": (1.0004, 4.0)}),  # output height + width > 128: the generic kernel
    ((2, 3, 11, 31), {"scale_factor": (1.0004, 2.0)}),  # <= 128: the vectorised kernel
    ((1, 2, 3, 3, 7), {"scale_factor": (1.0, 1.0, 1.134)}),
    ((1, 2, 300), {"scale_factor": 1 / 3}),
    ((1, 2, 31), {"size": 90, "mode": "linear"}),  # weights from a fused multiply-add
    ((1, 2, 68), {"size": 275, "mode": "linear"}),
    ((2, 3, 19, 36), {"scale_factor": (1.5, 7 / 3), "mode": "bilinear"}),
]


@pytest.mark.parametrize("shape, kwargs", CORNER_CASES, ids=[f"{c[0]}{c[1]}" for c in CORNER_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_interpolate_rounds_positions_as_torch(shape, kwargs, dtype, torch, rng):
    _compare(torch, rng, "cpu", shape, kwargs, dtype=dtype)


def test_nearest_on_a_channels_last_view_matches_torch(torch, rng):
    data = rng.standard_normal((2, 11, 31, 5)).astype(np.float32)
    results = []
    for lib, fn in ((trainkit, interpolate), (torch, torch.nn.functional.interpolate)):
        x = lib.tensor(data, requires_grad=True)
        y = fn(x.permute(0, 3, 1, 2), scale_factor=(1.0004, 4.0))  # 5 channels, channels fastest in memory
        y.backward(lib.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape))))
        results.append((to_numpy(y), to_numpy(x.grad)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_nearest_copies_uint8_as_torch(torch):
    data = np.arange(24, dtype=np.uint8).reshape(1, 2, 3, 4)
    ours = interpolate(trainkit.tensor(data), size=(5, 7))
    assert ours.dtype == trainkit.uint8
    np.testing.assert_array_equal(to_numpy(ours), torch.nn.functional.interpolate(torch.tensor(data), size=(5, 7)))


def test_interpolate_keeps_float16(device):
    out = interpolate(trainkit.ones(1, 1, 3, 3, dtype=trainkit.float16, device=device), size=5, mode="bilinear")
    assert out.dtype == trainkit.float16
    np.testing.assert_array_equal(to_numpy(out), np.ones((1, 1, 5, 5), np.float16))


# ------------------------------------------------------------------------- finite differences (float64)
GRADCHECK_CASES = {
    "nearest1d": (lambda x: interpolate(x, scale_factor=2.5), (2, 2, 4)),
    "nearest2d": (lambda x: interpolate(x, size=(5, 2)), (1, 2, 3, 4)),
    "nearest3d": (lambda x: interpolate(x, scale_factor=(0.7, 1.5, 2)), (1, 2, 3, 2, 4)),
    "linear": (lambda x: interpolate(x, size=7, mode="linear", align_corners=True), (2, 2, 3)),
    "bilinear": (lambda x: interpolate(x, size=(5, 3), mode="bilinear"), (2, 2, 3, 4)),
    "trilinear": (lambda x: interpolate(x, size=(2, 3, 5), mode="trilinear"), (1, 2, 3, 2, 4)),
}


@pytest.mark.parametrize("name", list(GRADCHECK_CASES))
def test_interpolate_gradcheck_and_gradgradcheck(name, device, rng):
    fn, shape = GRADCHECK_CASES[name]
    x = trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, device=device, requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_double_backward_names_and_values_match_torch(torch, rng):
    data = rng.standard_normal((1, 2, 3, 4))
    results = []
    for lib, fn in ((trainkit, interpolate), (torch, torch.nn.functional.interpolate)):
        x = lib.tensor(data, requires_grad=True)
        out = fn(x, scale_factor=2, mode="bilinear")
        (gx,) = lib.autograd.grad((out * out).sum(), x, create_graph=True)
        (ggx,) = lib.autograd.grad((gx * gx).sum(), x)
        results.append((type(gx.grad_fn).__name__, to_numpy(gx), to_numpy(ggx)))
    assert results[0][0] == results[1][0] == "UpsampleBilinear2DBackwardBackward0"
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-12)


# ---------------------------------------------------------------------------------------------- errors
def _interp(lib, shape=(1, 2, 4, 5), **kwargs):
    fn = interpolate if lib is trainkit else lib.nn.functional.interpolate
    return fn(lib.ones(*shape), **kwargs)


ERROR_CASES = [
    ({}, ValueError, ["either size or scale_factor should be defined"]),
    ({"size": 3, "scale_factor": 2}, ValueError, ["only one of size or scale_factor should be defined"]),
    (
        {"size": (2, 3, 4)},
        ValueError,
        [
            "Input and output must have the same number of spatial dimensions",
            "spatial dimensions of [4, 5] and output size of (2, 3, 4)",
        ],
    ),
    (
        {"scale_factor": [2]},
        ValueError,
        ["Input and scale_factor must have the same number of spatial dimensions", "scale_factor of shape [2]"],
    ),
    ({"size": (2, 3.0)}, TypeError, ["expected size to be one of int or Tuple[int]"]),
    ({"size": 3, "recompute_scale_factor": True}, ValueError, ["recompute_scale_factor is not meaningful"]),
    ({"size": 3, "align_corners": True}, ValueError, ["align_corners option can only be set with the interpolating"]),
    ({"size": 3, "mode": "nearest", "antialias": True}, ValueError, ["Anti-alias option is restricted to bilinear"]),
    (
        {"size": (0, 3)},
        RuntimeError,
        ["Input and output sizes should be greater than 0, but got input (H: 4, W: 5) output (H: 0, W: 3)"],
    ),
    ({"scale_factor": 0.1}, RuntimeError, ["output (H: 0, W: 0)"]),
    (
        {"shape": (2, 3, 5), "size": 0, "mode": "linear"},
        RuntimeError,
        ["Input and output sizes should be greater than 0, but got input (W: 5) and output (W: 0)"],
    ),
    (
        {"shape": (1, 2, 3, 4, 5), "size": (0, 1, 2)},
        RuntimeError,
        ["input (D: 3, H: 4, W: 5) output (D: 0, H: 1, W: 2)"],
    ),
    (
        {"shape": (1, 0, 4, 5), "size": 3},
        RuntimeError,
        ["Non-empty 4D data tensor expected but got a tensor with sizes [1, 0, 4, 5]"],
    ),
    ({"scale_factor": float("inf")}, RuntimeError, ["value cannot be converted to type int64_t without overflow"]),
    ({"size": 3, "mode": "linear"}, NotImplementedError, ["Got 4D input, but linear mode needs 3D input"]),
    (
        {"shape": (2, 3, 5), "size": 3, "mode": "bilinear"},
        NotImplementedError,
        ["Got 3D input, but bilinear mode needs 4D input"],
    ),
    ({"size": 3, "mode": "trilinear"}, NotImplementedError, ["Got 4D input, but trilinear mode needs 5D input"]),
    (
        {"shape": (4, 5), "size": 3},
        NotImplementedError,
        ["Only 3D, 4D and 5D input Tensors supported (got 2D)", "(got nearest)"],
    ),
    ({"size": 3, "mode": "foo"}, NotImplementedError, ["(got foo)"]),
]


@pytest.mark.parametrize("kwargs, kind, words", ERROR_CASES, ids=[str(c[0]) for c in ERROR_CASES])
def test_interpolate_errors_match_torch(kwargs, kind, words, torch):
    got, _ = assert_same_error(torch, lambda lib, dev: _interp(lib, **kwargs), *words)
    assert isinstance(got, kind)


def test_integer_inputs_raise_as_torch(torch):
    def run(lib, mode):
        fn = interpolate if lib is trainkit else lib.nn.functional.interpolate
        return fn(lib.ones(1, 2, 4, dtype=lib.int32), size=3, mode=mode)

    assert_same_error(torch, lambda lib, dev: run(lib, "nearest"), "not implemented for 'Int'")
    assert_same_error(torch, lambda lib, dev: run(lib, "linear"), '"compute_indices_weights_linear" not implemented')


def test_modes_not_implemented_say_so():
    with pytest.raises(NotImplementedError, match="lanczos"):
        interpolate(trainkit.ones(1, 1, 4, 4), size=3, mode="lanczos", antialias=True)


AA_CASES = [
    ((2, 3, 17, 13), {"size": (5, 4)}),  # shrinking both axes
    ((1, 2, 8, 8), {"size": (3, 8)}),  # one axis unchanged: left alone
    ((1, 1, 9, 7), {"size": (20, 3)}),  # one axis grown, the other shrunk
    ((2, 2, 16, 16), {"scale_factor": 0.3}),
    ((1, 1, 31, 29), {"scale_factor": (0.5, 0.25)}),
    ((1, 1, 10, 12), {"size": (4, 5), "align_corners": True}),
    ((1, 1, 6, 6), {"size": (12, 12)}),  # growing only: the plain kernel's width
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape,kwargs", AA_CASES, ids=[str(c) for c in AA_CASES])
def test_antialias_matches_torch(torch, rng, device, shape, kwargs, mode, dtype):
    _compare(torch, rng, device, shape, dict(kwargs, mode=mode, antialias=True), dtype)


@pytest.mark.parametrize("dtype", ["int32", "float16"])
def test_antialias_dtypes_torch_refuses_raise_as_torch(torch, dtype):
    def run(lib, dev):
        fn = interpolate if lib is trainkit else lib.nn.functional.interpolate
        return fn(lib.ones(1, 1, 6, 6, dtype=getattr(lib, dtype)), size=(3, 3), mode="bilinear", antialias=True)

    got, _ = assert_same_error(torch, run, '"compute_index_ranges_weights" not implemented for')
    assert isinstance(got, NotImplementedError)


def test_antialias_on_uint8_says_it_is_not_supported_yet():
    with pytest.raises(NotImplementedError, match="uint8 input with antialias=True is not supported yet"):
        interpolate(trainkit.ones(1, 1, 6, 6, dtype=trainkit.uint8), size=(3, 3), mode="bicubic", antialias=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_gradcheck_and_double_backward(rng, mode):
    x = trainkit.tensor(rng.standard_normal((1, 2, 7, 6)), requires_grad=True)
    assert gradcheck(lambda t: interpolate(t, size=(3, 4), mode=mode, antialias=True), (x,))
    assert gradgradcheck(lambda t: interpolate(t, size=(3, 4), mode=mode, antialias=True), (x,))


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((1, 2, 5), {"size": 3, "mode": "nearest-exact"}),
        ((1, 2, 4, 5), {"size": (7, 3), "mode": "nearest-exact"}),
        ((1, 1, 3, 4, 5), {"scale_factor": 1.5, "mode": "nearest-exact"}),
        ((2, 3, 7), {"size": 3, "mode": "area"}),
        ((1, 2, 4), {"size": 9, "mode": "area"}),
    ],
)
def test_nearest_exact_and_area_on_1d_match_torch(torch, rng, shape, kwargs):
    data = rng.standard_normal(shape).astype(np.float32)
    grads = []
    for lib, fn in ((trainkit, interpolate), (torch, torch.nn.functional.interpolate)):
        x = lib.tensor(data, requires_grad=True)
        out = fn(x, **kwargs)
        (out * lib.tensor(np.arange(out.numel(), dtype=np.float32).reshape(tuple(out.shape)))).sum().backward()
        grads.append((out.detach().numpy(), x.grad.numpy(), type(out.grad_fn).__name__))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5, atol=1e-5)
    assert grads[0][2] == grads[1][2]


def test_deprecated_upsample_functions_warn_and_match_torch(torch, rng):
    data = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    pairs = [
        (upsample, torch.nn.functional.upsample, {"scale_factor": 2, "mode": "bilinear"}),
        (upsample_nearest, torch.nn.functional.upsample_nearest, {"size": (5, 6)}),
        (upsample_bilinear, torch.nn.functional.upsample_bilinear, {"scale_factor": 2}),
    ]
    for ours, theirs, kwargs in pairs:
        with pytest.warns(UserWarning, match="is deprecated. Use `nn.functional.interpolate` instead"):
            got = ours(trainkit.tensor(data), **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs(torch.tensor(data), **kwargs)
        np.testing.assert_allclose(to_numpy(got), expected.numpy(), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------------- layers
UPSAMPLE_CASES = [
    {"scale_factor": 2},
    {"size": (3, 7), "mode": "bilinear"},
    {"scale_factor": (2, 1.5), "mode": "bilinear", "align_corners": True},
    {"size": 5, "mode": "nearest"},
    {"scale_factor": 0.6, "mode": "bilinear", "recompute_scale_factor": True},
]


@pytest.mark.parametrize("kwargs", UPSAMPLE_CASES, ids=str)
def test_upsample_layer_repr_and_forward_match_torch(kwargs, device, torch, rng):
    layer, reference = Upsample(**kwargs), torch.nn.Upsample(**kwargs)
    assert repr(layer) == repr(reference)
    assert layer.scale_factor == reference.scale_factor and layer.name == reference.name == "Upsample"
    _compare(torch, rng, device, (2, 3, 5, 6), None, tk_fn=layer, th_fn=reference)


@pytest.mark.parametrize("kwargs", [{"size": 7}, {"scale_factor": 2}], ids=str)
def test_upsampling_2d_layers_match_torch(kwargs, device, torch, rng):
    for ours, theirs in (
        (UpsamplingNearest2d, torch.nn.UpsamplingNearest2d),
        (UpsamplingBilinear2d, torch.nn.UpsamplingBilinear2d),
    ):
        layer, reference = ours(**kwargs), theirs(**kwargs)
        assert repr(layer) == repr(reference)
        _compare(torch, rng, device, (2, 3, 4, 5), None, tk_fn=layer, th_fn=reference)
