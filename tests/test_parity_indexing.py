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
            np.testing.assert_allclose(
                np.asarray(g[3], dtype=float), np.asarray(e[3], dtype=float), rtol=1e-6, atol=1e-6, equal_nan=True
            )
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


def _grad_case(fn, *shapes):
    """``fn(lib, *leaves)``: its result and the leaves' gradients under a weighted sum."""

    def run(lib):
        rng = np.random.default_rng(0)
        leaves = [lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]
        out = fn(lib, *leaves)
        first = out[0] if isinstance(out, tuple) else out
        weights = lib.arange(first.numel()).reshape(first.shape).to(first.dtype) + 1
        (first * weights).sum().backward()
        return (first, *[leaf.grad for leaf in leaves])

    return run


def _ints(lib, *shape):
    return lib.zeros(*shape, dtype=lib.int64)


SHAPE_CASES = {
    "view-noncontiguous-allowed": _grad_case(lambda lib, a: a.t().view(3, 2), (2, 3)),
    "view-expanded": _grad_case(lambda lib, a: a.expand(2, 3).view(2, 1, 3), (1, 3)),
    "view-dtype": lambda lib: lib.arange(6.0).reshape(2, 3).t().view(lib.int32),
    "view-dtype-narrower": lambda lib: lib.ones(2, 3).view(lib.int16),
    "reshape-noncontiguous-alias": _grad_case(lambda lib, a: a.transpose(1, 2).reshape(2, 4, 3), (2, 3, 4)),
    "reshape-copy": _grad_case(lambda lib, a: a.t().reshape(6), (2, 3)),
    "flatten-1d-is-input": _grad_case(lambda lib, a: a.flatten() * 1, (3,)),
    "flatten-one-dim": lambda lib: (lambda a: (a.flatten(1, 1) is a, a.flatten() is a))(lib.ones(2, 3)),
    "squeeze-dims": _grad_case(lambda lib, a: a.squeeze((0, 2)), (1, 3, 1)),
    "squeeze-dim-list": _grad_case(lambda lib, a: a.squeeze([2]), (1, 3, 1)),
    "transpose-0d": _grad_case(lambda lib, a: a.transpose(0, -1), ()),
    "t-1d": _grad_case(lambda lib, a: a.t(), (3,)),
    "t-0d": _grad_case(lambda lib, a: a.t(), ()),
    "movedim-0d": _grad_case(lambda lib, a: lib.movedim(a, 0, -1), ()),
    "flip-0d": _grad_case(lambda lib, a: lib.flip(a, [0]), ()),
    "cat-axis": lambda lib: lib.cat([lib.ones(2, 1), lib.zeros(2, 2)], axis=1),
    "concatenate-axis": lambda lib: lib.concatenate([lib.ones(2, 1), lib.zeros(2, 2)], axis=-1),
    "cat-legacy-empty": _grad_case(lambda lib, a: lib.cat([a, lib.tensor([]), a], 0), (2, 3)),
    "cat-all-empty": lambda lib: lib.cat([lib.zeros(0), lib.zeros(0)]),
    "stack-axis": lambda lib: lib.stack([lib.ones(2), lib.zeros(2)], axis=1),
    "stack-promotes": lambda lib: lib.stack([lib.ones(2, dtype=lib.int64), lib.ones(2)]),
    "stack-promotes-bool": lambda lib: lib.stack([lib.ones(2, dtype=lib.bool), lib.ones(2, dtype=lib.int8)]),
    "split-empty": lambda lib: lib.split(lib.zeros(0), 2),
    "split-zero-of-empty": lambda lib: lib.split(lib.zeros(0, 3), 0),
    "chunk-empty": lambda lib: lib.chunk(lib.zeros(0, 3), 3),
    "chunk-uneven": lambda lib: lib.chunk(lib.arange(6.0), 4),
    "sum_to_size-lead": _grad_case(lambda lib, a: a.sum_to_size(3, 4), (2, 3, 4)),
    "sum_to_size-keep": _grad_case(lambda lib, a: a.sum_to_size(1, 3, 1), (2, 3, 4)),
    "gather-empty-index": _grad_case(lambda lib, a: lib.gather(a, 1, _ints(lib, 0, 9)), (3, 4)),
    "gather-empty-1d-index": lambda lib: lib.gather(lib.ones(3, 4), 1, _ints(lib, 0)),
    "scatter-empty-index": lambda lib: lib.scatter(lib.ones(3, 4), 1, _ints(lib, 0), lib.ones(3, 4)),
    "scatter_add-empty-index": lambda lib: lib.scatter_add(lib.ones(3, 4), 1, _ints(lib, 0, 9), lib.ones(3, 4)),
    "scatter_reduce-empty-index": lambda lib: lib.scatter_reduce(
        lib.ones(3, 4), 0, _ints(lib, 0, 9), lib.ones(3, 4), "amax"
    ),
    "einsum-product-promotes": lambda lib: lib.einsum("i,j->ij", lib.ones(2), lib.ones(3, dtype=lib.float64)),
}


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_shape_ops_match_torch(torch, name):
    check(torch, SHAPE_CASES[name])


SHAPE_ERRORS = {
    "view-noncontiguous": lambda lib: lib.ones(2, 3).t().view(6),
    "view-expanded-flat": lambda lib: lib.ones(1, 3).expand(2, 3).view(6),
    "view-strided": lambda lib: lib.ones(4, 3)[:, :2].view(8),
    "view-dtype-stride": lambda lib: lib.ones(2, 3).t().view(lib.int16),
    "flatten-0d-bad-dim": lambda lib: lib.tensor(1.0).flatten(0, 1),
    "cat-0d": lambda lib: lib.cat([lib.tensor(1.0), lib.tensor(2.0)]),
    "cat-empty-list": lambda lib: lib.cat([]),
    "stack-empty-list": lambda lib: lib.stack([]),
    "split-zero": lambda lib: lib.split(lib.ones(5), 0),
    "split-negative": lambda lib: lib.split(lib.ones(5), -1),
    "split-0d": lambda lib: lib.ones(()).split(1),
    "chunk-zero": lambda lib: lib.chunk(lib.ones(5), 0),
    "chunk-0d": lambda lib: lib.chunk(lib.ones(()), 2),
    "narrow-0d": lambda lib: lib.narrow(lib.tensor(1.0), 0, 0, 1),
    "sum_to_size-not-expandable": lambda lib: lib.ones(2, 3).sum_to_size(4, 3),
    "sum_to_size-longer": lambda lib: lib.ones(4).sum_to_size(1, 3, 1),
    "getitem-negative-step": lambda lib: lib.ones(4)[::-1],
    "getitem-negative-step-tuple": lambda lib: lib.ones(4, 2)[0, ::-2],
    "take_along_dim-broadcast": lambda lib: lib.take_along_dim(lib.ones(3, 4), _ints(lib, 2, 5), 1),
    "index_select-negative": lambda lib: lib.index_select(lib.ones(3), 0, lib.tensor([-1])),
    "index_select-too-large": lambda lib: lib.index_select(lib.ones(3, 4), 1, lib.tensor([5])),
    "index_select-list": lambda lib: lib.index_select(lib.ones(3, 4), 1, [0]),
    "masked_select-broadcast": lambda lib: lib.masked_select(lib.ones(3, 4), lib.ones(5, dtype=lib.bool)),
    "matmul-bool": lambda lib: lib.matmul(lib.ones(2, 3, dtype=lib.bool), lib.ones(3, 2, dtype=lib.bool)),
    "mv-bool": lambda lib: lib.matmul(lib.ones(2, 3, dtype=lib.bool), lib.ones(3, dtype=lib.bool)),
    "bmm-bool": lambda lib: lib.bmm(lib.ones(2, 2, 3, dtype=lib.bool), lib.ones(2, 3, 2, dtype=lib.bool)),
    "dot-bool": lambda lib: lib.dot(lib.ones(3, dtype=lib.bool), lib.ones(3, dtype=lib.bool)),
    "einsum-contraction-mixed": lambda lib: lib.einsum("ij,jk->ik", lib.ones(2, 3), lib.ones(3, 2, dtype=lib.float64)),
    "einsum-sum-mixed": lambda lib: lib.einsum("i,i->", lib.ones(3), lib.ones(3, dtype=lib.float64)),
}


@pytest.mark.parametrize("name", list(SHAPE_ERRORS))
def test_shape_op_errors_match_torch(torch, name):
    errors(torch, SHAPE_ERRORS[name])


CREATION_CASES = {
    "arange-tensor-float": lambda lib: lib.arange(lib.tensor(3.0)),
    "arange-end-keyword": lambda lib: lib.arange(end=4),
    "arange-equal-bounds": lambda lib: lib.arange(3, 3),
    "arange-down": lambda lib: lib.arange(5, 0, -2),
    "full-numpy-int": lambda lib: lib.full((2,), np.int32(2)),
    "full-numpy-bool": lambda lib: lib.full((2,), np.bool_(True)),
    "zeros-size-keyword": lambda lib: lib.zeros(size=(2, 3)),
    "ones-size-keyword": lambda lib: lib.ones(size=(2,), dtype=lib.int64),
    "tensor-numpy-float64-in-list": lambda lib: lib.tensor([np.float64(1.0), 2]),
    "tensor-numpy-mixed-floats": lambda lib: lib.tensor([np.float32(1), np.float64(2)]),
    "tensor-numpy-float32-and-float": lambda lib: lib.tensor([np.float32(1), 2.5]),
    "tensor-numpy-int32": lambda lib: lib.tensor(np.int32(3)),
    "tensor-numpy-int32-list": lambda lib: lib.tensor([np.int32(1), np.int32(2)]),
    "tensor-python-floats": lambda lib: lib.tensor([1, 2.5]),
    "tensor-of-0d-tensors": lambda lib: lib.tensor([lib.tensor(1), lib.tensor(2)]),
    "Tensor-no-args": lambda lib: lib.Tensor(),
}


@pytest.mark.parametrize("name", list(CREATION_CASES))
def test_creation_matches_torch(torch, name):
    check(torch, CREATION_CASES[name])


CREATION_ERRORS = {
    "arange-negative-end": lambda lib: lib.arange(-3),
    "arange-wrong-step-sign": lambda lib: lib.arange(0, 5, -1),
    "arange-backwards": lambda lib: lib.arange(5, 0, 1),
    "arange-zero-step": lambda lib: lib.arange(0, 5, 0),
    "arange-nan": lambda lib: lib.arange(0, float("nan")),
    "arange-inf": lambda lib: lib.arange(0, float("inf")),
    "linspace-negative-steps": lambda lib: lib.linspace(0, 1, -1),
    "zeros-negative": lambda lib: lib.zeros(2, -1),
    "ones-negative": lambda lib: lib.ones(-1),
    "empty-negative": lambda lib: lib.empty((2, -1), dtype=lib.bool),
    "full-negative": lambda lib: lib.full((-1,), 3),
    "eye-negative": lambda lib: lib.eye(-1),
    "tensor-overflow": lambda lib: lib.tensor(2**63),
    "tensor-big-overflow": lambda lib: lib.tensor([2**70]),
    "tensor-none": lambda lib: lib.tensor([1, None]),
    "tensor-str": lambda lib: lib.tensor("a"),
    "tensor-of-vectors": lambda lib: lib.tensor([lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])]),
}


@pytest.mark.parametrize("name", list(CREATION_ERRORS))
def test_creation_errors_match_torch(torch, name):
    errors(torch, CREATION_ERRORS[name])


@pytest.mark.parametrize(
    "name,good,bad", [("flip", ([1],), (1,)), ("tile", ((2, 1),), (2, 1)), ("permute", ([1, 0],), (1, 0))]
)
def test_function_forms_take_dims_as_one_sequence_as_torch(name, good, bad):
    import torch

    for lib in (trainkit, torch):
        x = lib.ones(2, 3)
        assert tuple(getattr(lib, name)(x, *good).shape) == tuple(getattr(x, name)(*bad).shape)
        with pytest.raises(TypeError):
            getattr(lib, name)(x, *bad)
