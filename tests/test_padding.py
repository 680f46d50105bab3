"""F.pad, F.one_hot, nn.Unflatten and Module.half() compared with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.functional import pad

PADS = [(1, 2), (1, 2, 0, 1), (0, 0, 2, 0, 1, 1), (-1, 0), (1, -1, -1, 2)]


@pytest.mark.parametrize("pads", PADS, ids=str)
def test_pad_matches_torch(torch, device, pads, rng):
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    up = None
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        x = lib.tensor(data, device=dev, requires_grad=True)
        y = lib.nn.functional.pad(x, pads, value=0.5)
        if up is None:
            up = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * lib.tensor(up, device=dev)).sum().backward()
        results.append((to_numpy(y), to_numpy(x.grad), type(y.grad_fn).__name__))
    (y1, g1, n1), (y2, g2, n2) = results
    np.testing.assert_allclose(y1, y2)
    np.testing.assert_allclose(g1, g2)
    assert n1 == n2


def test_pad_gradcheck(rng):
    x = trainkit.tensor(rng.standard_normal((2, 3)), dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda t: trainkit.nn.functional.pad(t, (1, -1, 2, 0)), (x,))


def test_pad_errors_match_torch(torch):
    assert_same_error(torch, lambda lib, dev: lib.nn.functional.pad(lib.ones(2, 3), (1,)), "divisible by 2")


def test_one_hot_matches_torch(torch):
    for args in (([0, 2], 4), ([1, 0, 3], -1), ([[0, 1], [2, 2]], 3)):
        ours = trainkit.nn.functional.one_hot(trainkit.tensor(args[0]), args[1])
        theirs = torch.nn.functional.one_hot(torch.tensor(args[0]), args[1])
        assert ours.dtype == trainkit.int64
        np.testing.assert_array_equal(to_numpy(ours), theirs.numpy())
    assert_same_error(torch, lambda lib, dev: lib.nn.functional.one_hot(lib.tensor([0, 5]), 4), "smaller than")


def test_unflatten_and_half(torch):
    for lib in (trainkit, torch):
        layer = lib.nn.Unflatten(1, (2, 3))
        assert tuple(layer(lib.ones(4, 6)).shape) == (4, 2, 3)
    assert repr(trainkit.nn.Unflatten(1, (2, 3))) == repr(torch.nn.Unflatten(1, (2, 3)))
    model = trainkit.nn.Linear(2, 2).half()
    assert model.weight.dtype == trainkit.float16 and isinstance(model.weight, trainkit.nn.Parameter)


# ------------------------------------------------------------------------------ reflect, replicate, circular
EDGE_MODES = ["reflect", "replicate", "circular"]
EDGE_CASES = [
    ((2, 3, 6), (1, 2)),
    ((3, 6), (2, 3)),  # unbatched
    ((2, 3, 6), (0, 0)),
    ((2, 3, 6), (-2, 3)),  # crop one side, pad the other
    ((2, 3, 6), (3, -1)),
    ((2, 3, 6), (5, 5)),
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((3, 5, 6), (2, 1, 1, 2)),
    ((2, 4, 5, 6), (1, -2, -1, 3)),
    ((1, 2, 4, 5, 6), (1, 2, 0, 3, 2, 1)),
    ((2, 4, 5, 6), (0, 2, 1, 0, 3, 1)),  # unbatched 3-D padding
    ((0, 3, 4, 5), (1, 1, 2, 2)),  # an empty batch
]


@pytest.mark.parametrize("mode", EDGE_MODES)
@pytest.mark.parametrize("shape, pads", EDGE_CASES, ids=[f"{c[0]}{c[1]}" for c in EDGE_CASES])
def test_edge_pad_matches_torch(torch, device, mode, shape, pads, rng):
    data = rng.standard_normal(shape).astype(np.float32)
    up = None
    results = []
    for lib, dev in ((trainkit, device), (torch, "cpu")):
        x = lib.tensor(data, device=dev, requires_grad=True)
        y = pad(x, pads, mode=mode) if lib is trainkit else torch.nn.functional.pad(x, pads, mode=mode)
        if up is None:
            up = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * lib.tensor(up, device=dev)).sum().backward()
        results.append((to_numpy(y), to_numpy(x.grad), type(y.grad_fn).__name__))
    (y1, g1, n1), (y2, g2, n2) = results
    assert y1.dtype == np.float32 and g1.dtype == np.float32
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(g1, g2, rtol=1e-6, atol=1e-6)
    assert n1 == n2


@pytest.mark.parametrize("mode", EDGE_MODES)
def test_edge_pad_of_integers_matches_torch(torch, mode):
    data = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    ours = pad(trainkit.tensor(data), (2, 1, 1, 2), mode=mode)
    assert ours.dtype == trainkit.int64
    np.testing.assert_array_equal(to_numpy(ours), torch.nn.functional.pad(torch.tensor(data), (2, 1, 1, 2), mode=mode))


@pytest.mark.parametrize("mode", EDGE_MODES)
def test_edge_pad_gradcheck_and_gradgradcheck(mode, device, rng):
    for shape, pads in (((2, 3, 4, 5), (2, 1, -1, 2)), ((2, 5), (1, 3)), ((2, 3, 4, 5), (1, 0, 2, 1, 1, 1))):
        x = trainkit.tensor(rng.standard_normal(shape), dtype=trainkit.float64, device=device, requires_grad=True)
        assert gradcheck(lambda t, p=pads: pad(t, p, mode=mode), (x,))
        assert gradgradcheck(lambda t, p=pads: pad(t, p, mode=mode), (x,))


def test_edge_pad_double_backward_names_match_torch(torch):
    for mode in ("reflect", "replicate"):
        names = []
        for lib, fn in ((trainkit, pad), (torch, torch.nn.functional.pad)):
            x = lib.ones(1, 2, 4, 5, dtype=lib.float64, requires_grad=True)
            y = fn(x, (1, 2, 2, 1), mode=mode)
            (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
            names.append(type(g.grad_fn).__name__)
        assert names[0] == names[1]


def _pad(lib, shape, pads, mode, **kwargs):
    fn = pad if lib is trainkit else lib.nn.functional.pad
    return fn(lib.ones(*shape), pads, mode=mode, **kwargs)


EDGE_ERRORS = [
    ((2, 3, 4), (1, 1), "foo", {}, NotImplementedError, ["Unrecognised padding mode foo"]),
    (
        (2, 3, 4),
        (1, 1),
        "reflect",
        {"value": 1.0},
        RuntimeError,
        ['Padding mode "reflect" doesn\'t take in value argument'],
    ),
    (
        (1, 2, 3, 4),
        (1, 1),
        "replicate",
        {},
        NotImplementedError,
        ["Padding size 2 is not supported for 4D input tensor", "3D or 4D input: padding size = 4"],
    ),
    ((2, 3, 4), (1, 1, 1, 1, 1, 1), "circular", {}, NotImplementedError, ["Padding size 6 is not supported for 3D"]),
    (
        (2, 3, 4),
        (4, 2),
        "reflect",
        {},
        RuntimeError,
        [
            "Argument #4: Padding size should be less than the corresponding input dimension, but got: "
            "padding (4, 2) at dimension 2 of input [2, 3, 4]"
        ],
    ),
    ((1, 2, 3, 4), (1, 1, 3, 1), "reflect", {}, RuntimeError, ["Argument #6", "padding (3, 1) at dimension 2"]),
    ((1, 2, 3, 4, 5), (1, 1, 1, 1, 3, 1), "reflect", {}, RuntimeError, ["Argument #8", "at dimension 2"]),
    (
        (2, 0, 4),
        (1, 1),
        "reflect",
        {},
        RuntimeError,
        [
            "Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, "
            "but got: [2, 0, 4]"
        ],
    ),
    ((1, 2, 0, 4), (1, 1, 1, 1), "replicate", {}, RuntimeError, ["Expected 3D or 4D (batch mode) tensor"]),
    ((2, 3, 4), (-3, -1), "reflect", {}, RuntimeError, ["input (W: 4) is too small. Calculated output W: 0"]),
    ((2, 3, 4), (-2, -3), "replicate", {}, RuntimeError, ["input (W: 4) is too small. Calculated output W: -1"]),
    (
        (1, 2, 3, 4),
        (-2, -2, -2, -1),
        "reflect",
        {},
        RuntimeError,
        ["input (H: 3, W: 4) is too small. Calculated output H: 0 W: 0"],
    ),
    ((1, 2, 3, 4), (-2, -2, -2, -1), "replicate", {}, RuntimeError, ["input (H: 3, W: 4 ) is too small"]),
    (
        (1, 2, 3, 4, 5),
        (-2, -3, -2, -2, -1, -2),
        "replicate",
        {},
        RuntimeError,
        ["input (D: 3 H: 4, W: 5) is too small. Calculated output D: 0 H: 0 W: 0"],
    ),
    (
        (1, 2, 3, 4, 5),
        (0, 0, 0, 0, -2, -3),
        "reflect",
        {},
        RuntimeError,
        ["Trying to create tensor with negative dimension -2: [1, 2, -2, 4, 5]"],
    ),
    ((2, 3, 4), (5, 3), "circular", {}, RuntimeError, ["Padding value causes wrapping around more than once."]),
    (
        (1, 2, 3, 4, 5),
        (1, 1, -5, -5, 1, 1),
        "circular",
        {},
        RuntimeError,
        ["Negative padding value is resulting in an empty dimension"],
    ),
    ((1, 1, 4), (-3, 4), "circular", {}, RuntimeError, ["some elements of the input tensor and the written-to tensor"]),
]


@pytest.mark.parametrize(
    "shape, pads, mode, kwargs, kind, words", EDGE_ERRORS, ids=[f"{c[2]}{c[0]}{c[1]}" for c in EDGE_ERRORS]
)
def test_edge_pad_errors_match_torch(torch, shape, pads, mode, kwargs, kind, words):
    got, _ = assert_same_error(torch, lambda lib, dev: _pad(lib, shape, pads, mode, **kwargs), *words)
    assert isinstance(got, kind)


def test_edge_pad_of_bool_raises_as_torch(torch):
    def run(lib, dev):
        fn = pad if lib is trainkit else lib.nn.functional.pad
        return fn(lib.ones(1, 2, 3, 4).bool(), (1, 1, 1, 1), mode="reflect")

    assert_same_error(torch, run, "\"reflection_pad2d\" not implemented for 'Bool'")


@pytest.mark.parametrize("mode", EDGE_MODES)
def test_conv2d_padding_modes_pad_as_torch(torch, mode, rng):
    """nn.Conv2d pads with F.pad in these modes: the same values, the same padding node, the same errors."""
    from trainkit.layers.conv import Conv2d

    layer, reference = (
        Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode),
        torch.nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode),
    )
    with torch.no_grad():
        reference.weight.copy_(torch.from_numpy(layer.weight.detach().numpy()))
        reference.bias.copy_(torch.from_numpy(layer.bias.detach().numpy()))
    data = rng.standard_normal((2, 2, 5, 6)).astype(np.float32)
    ours, theirs = layer(trainkit.tensor(data, requires_grad=True)), reference(torch.tensor(data, requires_grad=True))
    np.testing.assert_allclose(to_numpy(ours), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    padded = [type(out.grad_fn.next_functions[0][0]).__name__ for out in (ours, theirs)]
    assert padded[0] == padded[1]
    if mode == "reflect":
        assert_same_error(
            torch,
            lambda lib, dev: (Conv2d if lib is trainkit else lib.nn.Conv2d)(2, 3, 3, padding=4, padding_mode=mode)(
                lib.ones(1, 2, 3, 3)
            ),
            "Padding size should be less than",
        )
