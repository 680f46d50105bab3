"""Element-wise ops made from one table row each: the op's forward and its gradient are formulas, so a row says all.

A row names the function, PyTorch's node, what backward reads (the input ``x``, the output ``out``, both or
nothing), the forward on arrays and the gradient of the input::

    Exp, exp = elementwise("exp", "ExpBackward0", "out", "xp.exp(x)", "g * out")

makes the ``Op`` subclass ``ExpBackward0`` (bound as ``Exp``) and the function ``exp(input)``. The forward is an
expression of ``x`` and ``xp`` (NumPy or CuPy, the array's module) and of the array kernels of ``ops.kernels``;
the gradient one of ``g``, the saved values and the functions of ``ops.dual``, so that it runs on arrays and,
under ``create_graph``, on Tensors. Both are compiled once, when the row is read, into ``forward`` and
``backward`` methods as a hand-written class would have them: a generated op costs no more per call. The two
formulas, with ``xp.`` left out, are the node's docstring (``out = exp(x).   dx = g * out.``), and
``Exp.backward.__source__`` shows the code made from them.

An op whose forward or backward is more than a formula (softmax, clamp with bounds, where) stays a class of its
own beside these rows.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable

import numpy as np

from ..backend import FLOAT32_NP, bfloat16_result, get_default_dtype, kind_of, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, kernels
from .copy import ToCopy
from .erf import erf

__all__ = ["as_floating", "cast", "elementwise"]

# The names a formula may use besides its arguments: the array kernels, the dual functions, and a few constants.
_NAMESPACE = {
    "xp_of": xp_of,
    "bfloat16_result": bfloat16_result,
    "FLOAT32_NP": FLOAT32_NP,
    "np": np,
    "ndarray": np.ndarray,
    "erf": erf,
    **{name: getattr(kernels, name) for name in ("absolute", "erfc", "negative", "quiet_all", "sigmoid", "sign")},
    **{name: getattr(dual, name) for name in dual.__all__},
    "LN2": math.log(2.0),
    "LN10": math.log(10.0),
    "TWO_OVER_SQRT_PI": 2.0 / math.sqrt(math.pi),
    "DEG_TO_RAD": math.pi / 180,
}
_SAVES = {"": ((), False), "x": ((0,), False), "out": ((), True), "x, out": ((0,), True)}


def cast(t: Tensor, np_dtype) -> Tensor:
    """``t`` converted to the NumPy dtype ``np_dtype``, recorded as PyTorch's ``ToCopyBackward0``."""
    return ToCopy.apply(t, dtype=np_dtype, device=None)


def as_floating(t: Tensor) -> Tensor:
    """``t`` itself when it is floating, else cast to the default float dtype (as PyTorch's float functions do).

    >>> import trainkit
    >>> as_floating(trainkit.tensor([1, 2])).dtype
    trainkit.float32
    """
    if kind_of(t._data.dtype) in "fc":
        return t
    return cast(t, get_default_dtype().np)


def elementwise(
    name: str,
    node: str,
    saves: str,
    forward: str,
    grad: str,
    doc: str | None = None,
    *,
    floating: bool = True,
    inputs: str = "x",
    quiet: tuple[str, ...] = (),
) -> tuple[type[Op], Callable[[Tensor], Tensor]]:
    """The ``Op`` subclass and the function of one table row.

    ``saves``: what ``backward`` reads, ``""``, ``"x"``, ``"out"`` or ``"x, out"``. ``forward``: an expression of
    the input array(s) named in ``inputs``. ``grad``: the gradient of each input, an expression of ``g`` and the
    saved values (a tuple of them for several inputs). ``doc``: the function's docstring (else one made from the
    formula); a row of several inputs gives ``apply`` as its function, since such a function promotes its operands
    first and is written beside the row. ``floating``: integer and bool inputs are computed in the default float
    dtype, as PyTorch's float functions take them. ``quiet``: ``"forward"`` and/or ``"backward"`` run with NumPy's
    warnings silenced, for functions that reach inf and NaN at the ends of their domains.

    >>> import trainkit
    >>> Cube, cube = elementwise("cube", "CubeBackward0", "x", "x * x * x", "g * (3 * x * x)")
    >>> x = trainkit.tensor([2.0], requires_grad=True)
    >>> y = cube(x); y, y.grad_fn.name(), Cube.__doc__
    (tensor([8.], grad_fn=<CubeBackward0>), 'CubeBackward0', 'out = x * x * x.   dx = g * (3 * x * x).')
    >>> y.backward(); x.grad
    tensor([12.])
    """
    module = sys._getframe(1).f_globals.get("__name__", __name__)  # the module of the row, as namedtuple does
    save_inputs, save_output = _SAVES[saves]
    shown = _shown(forward)
    names = [n.strip() for n in inputs.split(",")]
    parts = grad.split(",") if len(names) > 1 else [grad]
    grads = ",  ".join(f"d{n} = {_shown(part.strip())}" for n, part in zip(names, parts))
    attrs = {
        "__module__": module,
        "__doc__": f"out = {shown}.   {grads}.",
        "save_inputs": save_inputs,
        "save_output": save_output,
        "forward": _compile(name, node, "forward", inputs, _forward_body(forward, names[0], "forward" in quiet)),
        "backward": _compile(name, node, "backward", "g", _backward_body(saves, grad, "backward" in quiet)),
    }
    cls = type(node, (Op,), attrs, name=node)
    if len(names) > 1:  # the function of several operands promotes them first: it is written beside the row
        return cls, cls.apply
    return cls, _function(cls.apply, name, module, doc or f"{shown} element-wise, with ``x`` the input.", floating)


def _shown(formula: str) -> str:
    """A formula as the docstring states it: without the array module, and ``data(x)`` (x's array, for a mask or a
    constant under ``create_graph``) as plain ``x``."""
    return re.sub(r"\bdata\((\w+)\)", r"\1", formula.replace("xp.", ""))


def _forward_body(forward: str, first: str, quiet: bool) -> list[str]:
    # NumPy's arrays, nearly all of them, get their module without xp_of's call
    lines = [f"xp = np if type({first}) is ndarray else xp_of({first})"] if "xp." in forward else []
    # A float32 input (most of them) has nothing to round: one identity test instead of bfloat16_result's call
    # and dtype comparison. The first input may be a Python number, which has no dtype (nor anything to round).
    body = [
        f"out = {forward}",
        "try:",
        f"    if {first}.dtype is FLOAT32_NP:",
        "        return out",
        "except AttributeError:",
        "    return out",
        f"return bfloat16_result(out, {first})",
    ]
    if quiet:
        return lines + [f"with quiet_all(xp_of({first})):"] + ["    " + line for line in body]
    return lines + body


def _backward_body(saves: str, grad: str, quiet: bool) -> list[str]:
    lines = (
        [f"({saves},) = self.saved_tensors" if saves in ("x", "out") else f"{saves} = self.saved_tensors"]
        if saves
        else []
    )
    if quiet:
        return lines + [f"with quiet_all(xp_of(data({saves.split(',')[0] or 'g'}))):", f"    return {grad}"]
    return lines + [f"return {grad}"]


def _compile(name: str, node: str, method: str, args: str, body: list[str]):
    """``def method(self, args): body`` compiled in the formulas' namespace. Its qualified name is that of a method
    of the class the row binds (``Exp.forward``), as Python names a hand-written one in errors."""
    source = f"def {method}(self, {args}):\n" + "".join(f"    {line}\n" for line in body)
    scope: dict = {}
    exec(compile(source, f"<{node}.{method}>", "exec"), _NAMESPACE, scope)  # noqa: S102
    fn = scope[method]
    fn.__qualname__ = f"{name.capitalize()}.{method}"
    fn.__source__ = source
    return fn


def _function(apply, name: str, module: str, doc: str, floating: bool) -> Callable[[Tensor], Tensor]:
    if floating:

        def function(input: Tensor) -> Tensor:
            dtype = input._data.dtype
            if dtype is not FLOAT32_NP and kind_of(dtype) not in "fc":
                input = cast(input, get_default_dtype().np)
            return apply(input)

    else:

        def function(input: Tensor) -> Tensor:
            return apply(input)

    function.__name__ = function.__qualname__ = name
    function.__module__ = module
    function.__doc__ = doc
    return function
