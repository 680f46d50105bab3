"""Indexing, shapes and views, creation ops and their errors against PyTorch: values (NaN equal to NaN), dtype,
shape, the exception class, input gradients and the grad_fn name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error

import trainkit

X = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
W = (np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) % 5) - 1.5  # the weights of the loss in backward


def _node(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _summary(lib, t):
    if not isinstance(t, lib.Tensor):
        return ("value", t)
    values = t.detach().numpy()
    return (str(t.dtype).split(".")[-1], tuple(t.shape), _node(t), values.tolist())


def _same(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, tuple) and len(e) == 4 and isinstance(e[3], list):
            assert g[:3] == e[:3]
            np.testing.assert_allclose(np.asarray(g[3], dtype=float), np.asarray(e[3], dtype=float), rtol=1e-6,
                                       atol=1e-6, equal_nan=True)
        else:
            assert g == e


def check(torch, fn):
    """``fn(lib)`` returns a tensor or a tuple of them (and values); both libraries agree on each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's deprecation notes on list indices
        expected = fn(torch)
        got = fn(trainkit)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    _same([_summary(trainkit, g) for g in got], [_summary(torch, e) for e in expected])


def errors(torch, fn, *words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_error(torch, lambda lib, dev: fn(lib), *words)


def key_of(lib, spec):
    """An index from a spec: ('t', data) becomes a tensor, ('u8', data) a uint8 tensor, tuples recurse."""
    if isinstance(spec, tuple) and spec and spec[0] == "t":
        return lib.tensor(spec[1])
    if isinstance(spec, tuple) and spec and spec[0] == "u8":
        return lib.tensor(spec[1], dtype=lib.uint8)
    if isinstance(spec, tuple):
        return tuple(key_of(lib, s) for s in spec)
    if isinstance(spec, list):
        return [key_of(lib, s) for s in spec]
    return spec


KEYS = {
    "int": 1,
    "slice-step": slice(None, None, 2),
    "int-slice": (0, slice(1, None)),
    "slice-int": (slice(1, None), 0),
    "int-none": (0, None),
    "none-int": (None, 0),
    "ellipsis": Ellipsis,
    "full-slices": (slice(None), slice(None)),
    "none-ellipsis-none": (None, Ellipsis, None),
    "list": [1, 0],
    "nested-list": [[1, 0], [0, 1]],
    "list-of-slice-int": [slice(None), 0],
    "list-of-tensors": [("t", 0), ("t", 1)],
    "empty-list": [],
    "range": range(2),
    "bool-list": [True, False],
    "int-slice-list": (0, slice(None), [0, 2]),
    "int-slice-tensor": (1, slice(None), ("t", [0, 3])),
    "0d-slice-1d": (("t", 1), slice(None), ("t", [0, 1])),
    "slice-int-list": (slice(None), 0, [1, 3]),
    "list-slice-int": ([1, 0], slice(None), 2),
    "int-none-list": (0, None, [0, 1]),
    "ellipsis-int-list": (Ellipsis, 0, [1, 0]),
    "int-list": (1, [0, 2]),
    "list-none-list": ([0, 1], None, [0, 1]),
    "mask-int": (("t", [True, False]), slice(None), 1),
    "int-slice-mask": (1, slice(None), ("t", [True, False, True, False])),
    "uint8": ("u8", [1, 0]),
    "0d-tensor": ("t", 1),
    "repeats": [0, 0, 1],
    "true": True,
}


@pytest.mark.parametrize("name", list(KEYS))
def test_getitem_matches_torch(torch, name):
    def run(lib):
        x = lib.tensor(X, requires_grad=True)
        y = x[key_of(lib, KEYS[name])]
        (y * lib.arange(y.numel()).reshape(y.shape)).sum().backward()
        return y, x.grad

    check(torch, run)


@pytest.mark.parametrize("name", [n for n in KEYS if n not in ("ellipsis", "full-slices", "true")])
def test_setitem_matches_torch(torch, name):
    def run(lib):
        x = lib.tensor(X, requires_grad=True)
        key = key_of(lib, KEYS[name])
        shape = tuple(x.detach()[key].shape)
        v = lib.tensor(np.arange(float(np.prod(shape)), dtype=np.float32).reshape(shape) + 100, requires_grad=True)
        y = x * 1
        y[key] = v
        (y * lib.tensor(W)).sum().backward()
        plain = lib.tensor(X)
        plain[key] = v.detach()
        return y, x.grad, v.grad, plain

    check(torch, run)


@pytest.mark.parametrize("spec", ["str", "float", "float-tensor", "mask-shape", "out-of-range", "broadcast"])
def test_index_errors_match_torch(torch, spec):
    keys = {
        "str": lambda lib: "a",
        "float": lambda lib: 1.5,
        "float-tensor": lambda lib: lib.tensor([1.0]),
        "mask-shape": lambda lib: (1, slice(None), lib.tensor([True, False])),
        "out-of-range": lambda lib: (0, 5),
        "broadcast": lambda lib: (0, [0, 1], slice(None), [0, 1, 2]),
    }
    errors(torch, lambda lib: lib.tensor(np.ones((2, 3, 4, 5), np.float32))[keys[spec](lib)])


def test_0d_indexing_matches_torch(torch):
    for key in (None, Ellipsis, (), True):
        check(torch, lambda lib, key=key: lib.tensor(3.0, requires_grad=True)[key])
    errors(torch, lambda lib: lib.tensor(3.0)[0])
