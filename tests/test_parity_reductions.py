"""Reductions, running sums and products, sorting and the softmax family against PyTorch at their edges.

Each case runs the same snippet on trainkit and on torch with the same inputs and compares what comes out: the
values (nan equal to nan), dtype, shape and node name of every output, the gradient of every floating input, or
the class of the exception torch raises. ``check`` is shared with ``test_parity_functional.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import trainkit

RTOL, ATOL = 1e-5, 1e-6


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _host(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy())


def _node(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _run(lib, fn, arrays, grad: bool):
    """(outputs, input gradients) of ``fn(lib, *inputs)``, or the exception it raised."""
    inputs = [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    if grad:
        for t in inputs:
            if hasattr(t, "dtype") and t.dtype.is_floating_point:
                t.requires_grad_(True)
    lib.manual_seed(0)
    try:
        outs = _outputs(fn(lib, *inputs))
    except Exception as err:  # noqa: BLE001 - the class is what is compared
        return err, None
    wanted = [o for o in outs if getattr(o, "requires_grad", False)]
    grads = None
    if wanted:
        out = wanted[0]
        weights = np.arange(1, out.numel() + 1).reshape(tuple(out.shape)).astype(_host(out).dtype)
        (out * lib.tensor(weights)).sum().backward()
        grads = [None if getattr(t, "grad", None) is None else _host(t.grad) for t in inputs]
    return outs, grads


def _same_array(tk: np.ndarray, th: np.ndarray, what: str) -> None:
    assert tk.shape == th.shape, f"{what}: shape {tk.shape} != torch's {th.shape}"
    assert tk.dtype == th.dtype, f"{what}: dtype {tk.dtype} != torch's {th.dtype}"
    if th.dtype.kind in "biu":
        np.testing.assert_array_equal(tk, th, err_msg=what)
    else:
        np.testing.assert_allclose(tk, th, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=what)


def check(torch, fn, *arrays, grad: bool = True) -> None:
    """``fn(lib, *tensors)`` gives the same on trainkit as on torch: outputs, node names, gradients, errors."""
    th_out, th_grads = _run(torch, fn, arrays, grad)
    tk_out, tk_grads = _run(trainkit, fn, arrays, grad)
    if isinstance(th_out, Exception):
        assert isinstance(tk_out, Exception), f"torch raises {type(th_out).__name__}: {th_out}; trainkit does not"
        assert type(tk_out).__name__ == type(th_out).__name__, f"{type(tk_out).__name__} != torch's {th_out!r}"
        return
    if isinstance(tk_out, Exception):
        raise tk_out
    assert len(tk_out) == len(th_out)
    for i, (a, b) in enumerate(zip(tk_out, th_out)):
        if not hasattr(b, "dtype"):
            assert a == b, f"output {i}"
            continue
        _same_array(_host(a), _host(b), f"output {i}")
        assert _node(a) == _node(b), f"output {i}: node {_node(a)} != torch's {_node(b)}"
    assert (tk_grads is None) == (th_grads is None), "gradients"
    for i, (a, b) in enumerate(zip(tk_grads or [], th_grads or [])):
        assert (a is None) == (b is None), f"gradient of input {i}"
        if b is not None:
            _same_array(a, b, f"gradient of input {i}")


F32 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
I64 = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
BOOL = np.arange(12).reshape(3, 4) % 3 == 0
SCALAR = np.array(2.5, np.float32)
EMPTY = np.zeros((0, 3), np.float32)
EMPTY1 = np.zeros((0,), np.float32)
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], np.float32)
SPECIAL = np.array([[1.0, np.inf, -np.inf], [np.nan, 1.0, 2.0]], np.float32)
FLAT = np.full((2, 3), 1.5, np.float32)

CASES = {
    # node names: PyTorch's overloads (no dim / dim given, also dim=None and dim=[])
    "sum-all": (lambda L, x: x.sum(), F32),
    "sum-dim-none": (lambda L, x: L.sum(x, None), F32),
    "sum-dim-empty-list": (lambda L, x: x.sum(dim=[]), F32),
    "mean-all": (lambda L, x: x.mean(), F32),
    "mean-dim-none": (lambda L, x: x.mean(dim=None), F32),
    "mean-dim-empty-list": (lambda L, x: x.mean([]), F32),
    "prod-0d-dim": (lambda L, x: x.prod(0), SCALAR),
    "max-0d-dim": (lambda L, x: x.max(0), SCALAR),
    "min-0d-dim-keepdim": (lambda L, x: L.min(x, -1, keepdim=True), SCALAR),
    "cumsum-0d": (lambda L, x: x.cumsum(0), SCALAR),
    "cumprod-0d": (lambda L, x: L.cumprod(x, -1), SCALAR),
    # 0-d tensors take dim 0 and -1
    "sum-0d-dim0": (lambda L, x: x.sum(0), SCALAR),
    "sum-0d-dim-1-keepdim": (lambda L, x: x.sum(-1, keepdim=True), SCALAR),
    "sum-0d-int": (lambda L, x: x.sum(dim=(0,)), np.array(3, np.int64)),
    "mean-0d-dim": (lambda L, x: x.mean(-1), SCALAR),
    "var-0d-dim": (lambda L, x: x.var(0), SCALAR),
    "std-0d-dim": (lambda L, x: x.std(0, correction=0), SCALAR),
    "amax-0d-dim": (lambda L, x: x.amax(0), SCALAR),
    "amin-0d-int": (lambda L, x: x.amin(-1), np.array(3, np.int64)),
    "logsumexp-0d": (lambda L, x: x.logsumexp(0), SCALAR),
    "softmax-0d": (lambda L, x: L.softmax(x, 0), SCALAR),
    "log-softmax-0d": (lambda L, x: L.log_softmax(x, -1), SCALAR),
    "softmax-0d-float64": (lambda L, x: L.softmax(x, 0, dtype=L.float64), SCALAR),
    # empty tensors
    "mean-empty-backward": (lambda L, x: x.mean(0), EMPTY),
    "mean-empty-all-backward": (lambda L, x: x.mean(), EMPTY1),
    "logsumexp-empty": (lambda L, x: x.logsumexp(0), EMPTY),
    "logsumexp-empty-keepdim": (lambda L, x: L.logsumexp(x, -1, keepdim=True), EMPTY1),
    "softmax-empty": (lambda L, x: L.softmax(x, 0), EMPTY),
    "log-softmax-empty": (lambda L, x: L.log_softmax(x, 1), EMPTY),
    "amax-empty-all": (lambda L, x: x.amax(), EMPTY),
    "amax-empty-dim": (lambda L, x: x.amax(-2), EMPTY),
    "amin-empty-other-dim": (lambda L, x: x.amin(1), EMPTY),
    "max-empty-dim": (lambda L, x: x.max(0), EMPTY),
    "min-empty-all": (lambda L, x: x.min(), EMPTY),
    "argmax-empty-all": (lambda L, x: x.argmax(), EMPTY),
    "argmin-empty-dim": (lambda L, x: x.argmin(-1), EMPTY1),
    # std and var: integers refused, float32 overflow of the squares, zero spread
    "std-int": (lambda L, x: x.std(), I64),
    "var-bool-dim": (lambda L, x: L.var(x, 1), BOOL),
    "std-float32-squares-overflow": (lambda L, x: x.std(0), np.array([[2e19, 1.0], [-2e19, 2.0]], np.float32)),
    "var-float32-squares-overflow": (lambda L, x: x.var(0), np.array([[2e19, 1.0], [-2e19, 2.0]], np.float32)),
    "std-constant-gradient": (lambda L, x: x.std(1), FLAT),
    "std-constant-all": (lambda L, x: x.std(correction=0), FLAT),
    "std-dim-keepdim": (lambda L, x: x.std(1, keepdim=True, unbiased=False), F32),
    # max and min: ties and nan
    "max-all-nan-gradient": (lambda L, x: x.max(), SPECIAL),
    "min-all-nan-gradient": (lambda L, x: L.min(x), SPECIAL),
    "max-all-ties": (lambda L, x: x.max(), TIES),
    "amax-dim-ties": (lambda L, x: x.amax(1), TIES),
    "max-dim-ties": (lambda L, x: x.max(1), TIES),
    # prod: the gradient is out / x where x has no zero (nan at an inf, as torch)
    "prod-all-inf": (lambda L, x: x.prod(), SPECIAL),
    "prod-dim-inf": (lambda L, x: x.prod(0), SPECIAL),
    "prod-dim-zero": (lambda L, x: x.prod(1), np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 0.0]], np.float32)),
    # axis= aliases
    "prod-axis": (lambda L, x: x.prod(axis=1), F32),
    "amax-axis": (lambda L, x: L.amax(x, axis=0), F32),
    "amin-axis-keepdims": (lambda L, x: x.amin(axis=1, keepdims=True), F32),
    "argmax-axis": (lambda L, x: x.argmax(axis=1), F32),
    "argmin-axis": (lambda L, x: L.argmin(x, axis=0), F32),
    "logsumexp-axis": (lambda L, x: x.logsumexp(axis=1), F32),
    "sum-axis": (lambda L, x: x.sum(axis=0), F32),
    # dtypes
    "argmax-bool": (lambda L, x: x.argmax(), BOOL),
    "argmin-bool-dim": (lambda L, x: x.argmin(0), BOOL),
    "logsumexp-int": (lambda L, x: x.logsumexp(1), I64),
    "logsumexp-bool": (lambda L, x: L.logsumexp(x, 0), BOOL),
    "softmax-int": (lambda L, x: L.softmax(x, 0), I64),
    "log-softmax-int-dtype": (lambda L, x: L.log_softmax(x, 0, dtype=L.int64), F32),
    "softmax-int-to-float": (lambda L, x: L.softmax(x, 1, dtype=L.float64), I64),
    "softmax-0d-bad-dim": (lambda L, x: L.softmax(x, 1), np.array(3, np.int64)),
    "logsumexp-no-dim": (lambda L, x: L.logsumexp(x), F32),
    "sigmoid-bool": (lambda L, x: L.sigmoid(x), BOOL),
    "sigmoid-int": (lambda L, x: x.sigmoid(), I64),
    "tanh-int": (lambda L, x: L.tanh(x), I64),
    "relu-bool": (lambda L, x: L.relu(x), BOOL),
    "relu-int": (lambda L, x: x.relu(), I64),
    "relu-nan-gradient": (lambda L, x: L.relu(x), SPECIAL),
    # sorting: nan is the largest value; 0-d inputs get the sorting node; stable= is the other overload
    "sort-descending-nan": (lambda L, x: x.sort(descending=True), np.array([1.0, np.inf, np.nan, -np.inf, 0], "f4")),
    "argsort-descending-nan": (lambda L, x: L.argsort(x, 1, descending=True), SPECIAL),
    "topk-nan": (lambda L, x: x.topk(2), np.array([1.0, np.inf, np.nan, -np.inf, 0], np.float32)),
    "sort-stable": (lambda L, x: L.sort(x, stable=True), TIES),
    "sort-0d": (lambda L, x: x.sort(), SCALAR),
    "topk-0d": (lambda L, x: L.topk(x, 1), SCALAR),
    "topk-bool": (lambda L, x: L.topk(x, 1), BOOL),
    # norms: sign(nan) is 0 and nans share the inf-norm gradient; no inf norm of nothing; dist wants floats
    "norm-1-nan-gradient": (lambda L, x: x.norm(p=1), SPECIAL),
    "norm-inf-nan-gradient": (lambda L, x: L.norm(x, p=float("inf")), SPECIAL),
    "norm-inf-empty": (lambda L, x: L.norm(x, p=float("inf")), EMPTY),
    "dist-int": (lambda L, x: L.dist(x, x * 2, p=1), I64),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, torch):
    fn, *arrays = CASES[name]
    check(torch, fn, *arrays)


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((2, 3), {"dim": []}),
        ((2, 3), {"dim": (0, 1)}),
        ((2, 3), {"axis": 1}),
        ((), {"dim": 0}),
        ((), {"dim": (-1,)}),
        ((2, 3), {"dim": 1, "keepdim": True}),
        ((2, 3), {"dim": 2}),
        ((2, 0), {"dim": 1}),
    ],
)
def test_all_and_any_take_torchs_dims(name, shape, kwargs):
    import torch

    import trainkit

    x = np.random.default_rng(1).integers(0, 2, size=shape).astype(np.float32)
    results = []
    for lib in (trainkit, torch):
        try:
            results.append(getattr(lib, name)(lib.tensor(x), **kwargs).numpy())
        except IndexError as err:
            results.append(type(err))
    assert results[0] is results[1] if isinstance(results[1], type) else np.array_equal(results[0], results[1])
