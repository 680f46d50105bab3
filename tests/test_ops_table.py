"""The element-wise ops made from table rows (``trainkit.autograd.ops.table``), and the ``__all__`` of the ops modules
from which ``ops/methods.py`` binds Tensor's methods."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.autograd.function import Op
from trainkit.autograd.ops import activation, elementwise, methods, more_math, table, trigonometric
from trainkit.autograd.ops import math as tmath
from trainkit.autograd.ops.table import elementwise as row

OPS_DIR = Path(table.__file__).parent
OP_MODULES = sorted(m.name for m in pkgutil.iter_modules([str(OPS_DIR)]))

Cube, cube = row("cube", "CubeBackward0", "x", "x * x * x", "g * (3 * x * x)", "x^3 element-wise.")
Softsign, softsign = row("softsign", "SoftsignBackward0", "x, out", "x / (1 + xp.abs(x))", "g * (out / x) ** 2")
Scale, scale = row("scale", "ScaleBackward0", "", "x * 3", "g * 3", floating=False)
Swap, _ = row("swap", "SwapBackward0", "", "x - 2 * y", "g, -2 * g", inputs="x, y")


def test_a_row_makes_an_op_class_named_as_its_node_with_the_formulas_as_docstring():
    assert issubclass(Cube, Op) and Cube.__name__ == "CubeBackward0"
    assert Cube.__doc__ == "out = x * x * x.   dx = g * (3 * x * x)."
    assert Softsign.__doc__ == "out = x / (1 + abs(x)).   dx = g * (out / x) ** 2."
    assert Swap.__doc__ == "out = x - 2 * y.   dx = g,  dy = -2 * g."
    assert cube.__name__ == "cube" and cube.__doc__ == "x^3 element-wise." and cube.__module__ == __name__
    assert Cube.__module__ == __name__
    assert scale.__doc__ == "x * 3 element-wise, with ``x`` the input."


def test_a_generated_node_records_its_inputs_and_what_backward_reads():
    x = trainkit.tensor([1.0, -2.0], requires_grad=True)
    y = cube(x)
    assert y.grad_fn.name() == "CubeBackward0" and type(y.grad_fn) is Cube
    ((fn, nr),) = y.grad_fn.next_functions
    assert type(fn).__name__ == "AccumulateGrad" and fn.variable is x and nr == 0
    (saved,) = y.grad_fn.saved_tensors
    assert saved is x._data  # the input itself, as in the plain pass
    z = softsign(x)
    x_saved, out_saved = z.grad_fn.saved_tensors
    assert x_saved is x._data and out_saved is z._data
    assert Cube.save_inputs == (0,) and not Cube.save_output
    assert Softsign.save_inputs == (0,) and Softsign.save_output
    assert Scale.save_inputs == () and not Scale.save_output
    assert scale(x).grad_fn.saved_tensors == ()


def test_the_generated_ops_of_trainkit_keep_their_node_names():
    x = trainkit.tensor([0.5], requires_grad=True)
    for fn, node in (
        (tmath.exp, "ExpBackward0"),
        (activation.sigmoid, "SigmoidBackward0"),
        (activation.tanh, "TanhBackward0"),
        (elementwise.log1p, "Log1PBackward0"),
        (trigonometric.sin, "SinBackward0"),
        (more_math.deg2rad, "Deg2RadBackward0"),
    ):
        assert fn(x).grad_fn.name() == node
    assert tmath.Exp.__doc__ == "out = exp(x).   dx = g * out."
    assert "dx = g * out * one_minus(out)" in activation.Sigmoid.__doc__


@pytest.mark.parametrize(
    "fn",
    [
        cube,
        softsign,
        scale,
        tmath.exp,
        tmath.log,
        tmath.sqrt,
        activation.sigmoid,
        activation.tanh,
        trigonometric.sin,
        trigonometric.asin,
        more_math.asinh,
        elementwise.erf,
        elementwise.rsqrt,
    ],
)
def test_generated_ops_pass_gradcheck_and_gradgradcheck_in_float64(fn):
    x = trainkit.tensor([0.3, 0.55, 0.8], dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_a_generated_two_input_op_passes_gradcheck():
    x = trainkit.tensor([0.3, 0.5], dtype=trainkit.float64, requires_grad=True)
    y = trainkit.tensor([1.5, -0.5], dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(Swap.apply, (x, y)) and gradgradcheck(Swap.apply, (x, y))


def test_float32_stays_float32_and_integers_are_promoted_to_the_default_float_dtype():
    x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    y = cube(x)
    y.sum().backward()
    assert y.dtype == trainkit.float32 and x.grad.dtype == trainkit.float32
    assert cube(trainkit.tensor([1.0], dtype=trainkit.float64)).dtype == trainkit.float64
    assert cube(trainkit.tensor([2])).dtype == trainkit.float32
    assert cube(trainkit.tensor([True])).dtype == trainkit.float32
    assert scale(trainkit.tensor([2])).dtype == trainkit.int64  # floating=False: the dtype is the input's
    trainkit.set_default_dtype(trainkit.float64)
    try:
        assert tmath.exp(trainkit.tensor([1])).dtype == trainkit.float64
    finally:
        trainkit.set_default_dtype(trainkit.float32)


def test_quiet_rows_silence_numpy_warnings_where_the_gradient_overflows():
    x = trainkit.tensor([1e200, 0.5], dtype=trainkit.float64, requires_grad=True)
    with np.errstate(all="raise"):
        more_math.asinh(x).sum().backward()
    assert x.grad.numpy()[0] == 0.0


def test_an_in_place_form_bound_from_a_generated_class_runs_its_forward():
    x = trainkit.tensor([0.0, 1.0])
    assert x.exp_() is x and np.allclose(x.numpy(), [1.0, np.e])


def test_every_ops_module_has_all_and_lists_only_names_it_holds():
    for name in OP_MODULES:
        module = importlib.import_module(f"trainkit.autograd.ops.{name}")
        if name == "methods":
            continue
        assert isinstance(getattr(module, "__all__", None), list), f"ops.{name} has no __all__"
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"ops.{name}.__all__ names {missing}, which it does not hold"


def test_methods_binds_tensor_methods_from_the_modules_all_only():
    exported = {}
    for module in methods._MODULES:
        for name in module.__all__:
            exported.setdefault(name, getattr(module, name))
    for name in exported:
        if name in methods._FUNCTIONS_ONLY:
            assert getattr(trainkit.Tensor, name, None) is None or name in ("where", "permute")
        elif name not in ("where", "permute"):
            assert getattr(trainkit.Tensor, name) is exported[name], name
    # every plain-named method is a function of some module's __all__: only the operators (``__add__``), the
    # in-place forms (``add_``) and the properties ``T``/``mT`` are listed by hand, and where and permute, which
    # take their arguments otherwise than their functions
    for name, value in methods._METHODS.items():
        if name.startswith("_") or name.endswith("_") or name in ("T", "mT"):
            continue
        assert name in exported, f"Tensor.{name} is not in any ops module's __all__"
        assert value is exported[name] or name in ("where", "permute"), name
