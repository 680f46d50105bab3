"""``torch.onnx.export``: run the model once on the example inputs while recording its ops, convert each recorded
call with its row of the converter tables, check the model with ``onnx.checker`` and write it.

With ``dynamic_axes`` the model runs a second time with every dynamic axis resized, so that each size in the ops'
arguments is known to be a constant or to follow an axis (:mod:`trainkit.onnx.shapes`).
"""

from __future__ import annotations

import copy
import inspect
import os
from typing import Any

import numpy as np

from ..autograd import grad_mode
from ..autograd.creation import from_numpy
from ..autograd.tensor import Tensor
from .context import Context, differs, flat_arrays
from .graph import GraphBuilder, OnnxExporterError, array_of
from .layers import LAYER_CONVERTERS
from .ops_math import MATH_CONVERTERS
from .ops_shape import SHAPE_CONVERTERS
from .shapes import Dims
from .trace import Tracer

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OP_CONVERTERS", "export", "is_in_onnx_export"]

DEFAULT_OPSET = 18  # what torch 2.13's exporter writes
MIN_OPSET, MAX_OPSET = 13, 21
OP_CONVERTERS = {**MATH_CONVERTERS, **SHAPE_CONVERTERS}
_state = {"exporting": False}


class ONNXProgram:
    """What ``export`` returns: the ``onnx.ModelProto`` as ``model_proto``, and ``save(path)``.

    >>> ONNXProgram(None).model_proto is None
    True
    """

    def __init__(self, model_proto):
        self.model_proto = model_proto

    def save(self, destination) -> None:
        """Write the model to a path or a binary file object."""
        data = self.model_proto.SerializeToString()
        if hasattr(destination, "write"):
            destination.write(data)
            return
        with open(os.fspath(destination), "wb") as fh:
            fh.write(data)

    def __repr__(self) -> str:
        return (
            f"ONNXProgram(opset={self.model_proto.opset_import[0].version}, nodes={len(self.model_proto.graph.node)})"
        )


def is_in_onnx_export() -> bool:
    """True while ``export`` runs the model (a forward may test it to take an export-friendly path).

    >>> is_in_onnx_export()
    False
    """
    return _state["exporting"]


def _op_key(cls: type) -> str:
    return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"


def _layer_converter(module) -> Any:
    """The converter of a layer written as one ONNX op, when ``module`` is that layer (or a subclass that keeps
    its ``forward``: a subclass with a forward of its own is traced op by op)."""
    for cls in type(module).__mro__:
        if cls in LAYER_CONVERTERS:
            return LAYER_CONVERTERS[cls] if type(module).forward is cls.forward else None
    return None


def _split_args(args, kwargs) -> tuple[tuple, dict]:
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict) and not kwargs:  # PyTorch's old form: a trailing dict is the kwargs
        args, kwargs = args[:-1], dict(args[-1])
    return args, kwargs


def _input_names(model, args: tuple, kwargs: dict, given) -> list[str]:
    """Each tensor input's name: ``input_names`` first, then the name of ``forward``'s parameter (``x``,
    ``x_1`` for the second tensor of a tuple), as PyTorch's exporter names them."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values() if p.kind != p.VAR_KEYWORD]
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i].name if i < len(params) and params[i].kind != params[i].VAR_POSITIONAL else f"input_{i}"
        n = len(flat_arrays(a))
        names += [base] if n == 1 else [f"{base}_{k}" for k in range(n)]
    for k, v in kwargs.items():
        n = len(flat_arrays(v))
        names += [k] if n == 1 else [f"{k}_{j}" for j in range(n)]
    given = list(given or [])
    if len(given) > len(names):
        raise OnnxExporterError(
            f"torch.onnx.export: input_names has {len(given)} names for {len(names)} tensor inputs ({given})"
        )
    return given + names[len(given) :]


def _dynamic(dynamic_axes, dynamic_shapes, names: list[str]) -> dict[str, dict[int, str]]:
    """``{value name: {axis: symbolic name}}`` from ``dynamic_axes`` (axes as a list or a dict of names)."""
    out: dict[str, dict[int, str]] = {}
    spec = dict(dynamic_axes or {})
    if dynamic_shapes:
        items = dynamic_shapes.items() if isinstance(dynamic_shapes, dict) else zip(names, dynamic_shapes)
        for name, axes in items:
            if axes:
                spec[name] = {a: str(getattr(d, "__name__", d)) for a, d in dict(axes).items()}
    for name, axes in spec.items():
        if isinstance(axes, dict):
            out[name] = {int(a): str(n) for a, n in axes.items()}
        elif isinstance(axes, (list, tuple)):
            out[name] = {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
        else:
            raise OnnxExporterError(
                f"torch.onnx.export: dynamic_axes[{name!r}] must be a list of axes or a dict of axis to name, got "
                f"{type(axes).__name__}"
            )
    return out


def _resize(a: np.ndarray, axis: int, n: int) -> np.ndarray:
    """``a`` with ``axis`` cut or repeated to length ``n``: the values stay ones the model accepts (token ids in
    range, masks of 0/1)."""
    return np.take(a, np.arange(n) % max(a.shape[axis], 1), axis=axis)


def _second_args(args, kwargs, names, dynamic, steps):
    """The example inputs with each dynamic axis resized by its own step."""
    it = iter(names)

    def resize(v):
        if isinstance(v, Tensor):
            name = next(it)
            a = np.asarray(array_of(v))
            for axis, sym in dynamic.get(name, {}).items():
                a = _resize(a, axis, steps[sym](a.shape[axis]))
            return from_numpy(np.ascontiguousarray(a))
        if isinstance(v, (list, tuple)):
            return type(v)(resize(x) for x in v)
        if isinstance(v, dict):
            return {k: resize(x) for k, x in v.items()}
        return v

    return tuple(resize(a) for a in args), {k: resize(v) for k, v in kwargs.items()}


def _on_cpu(model, args, kwargs):
    """A model or inputs on a GPU are exported from a CPU copy (the graph holds the same values)."""
    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [v for v in _flat_tensors(list(args) + list(kwargs.values()))]
    if all(t.device.type == "cpu" for t in tensors):
        return model, args, kwargs

    def cpu(v):
        if isinstance(v, Tensor):
            return v.cpu()
        if isinstance(v, (list, tuple)):
            return type(v)(cpu(x) for x in v)
        if isinstance(v, dict):
            return {k: cpu(x) for k, x in v.items()}
        return v

    return copy.deepcopy(model).cpu(), cpu(args), cpu(kwargs)


def _flat_tensors(value) -> list:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat_tensors(v)]
    return []


def _run(model, args, kwargs):
    with Tracer(model, _layer_converter) as tracer, grad_mode.no_grad():
        output = model(*args, **kwargs)
    return tracer.records, output


def _convert(g: GraphBuilder, dims: Dims, records, records2, opset: int, verbose, fold: bool) -> None:
    for i, rec in enumerate(records):
        rec2 = records2[i] if records2 is not None else None
        if rec2 is not None and (rec2.target is not rec.target or rec2.scope != rec.scope):
            raise OnnxExporterError(
                "torch.onnx.export: the model runs other ops when a dynamic axis has another size (at "
                f"{rec.target.__name__} in {rec.scope or '<the model>'!r}): it cannot be exported with these "
                "dynamic_axes"
            )
        arrays = [a for a in flat_arrays(list(rec.inputs) + list(rec.params.values())) if id(a) in g.values]
        moves = rec2 is not None and differs(rec.params, rec2.params)
        if fold and rec.module is None and not arrays and g.export_params and not moves:
            continue  # every input a constant: the output is one too, folded to its value when used
        cx = Context(g, dims, rec, rec2, opset)
        if rec.module is not None:
            convert = _layer_converter(rec.module)
        else:
            convert = OP_CONVERTERS.get(_op_key(rec.target))
        if convert is None:
            raise OnnxExporterError(
                f"torch.onnx.export: no ONNX converter for the op {rec.target.__name__} "
                f"({_op_key(rec.target)}) in module {rec.scope or '<the model>'!r}"
            )
        if rec2 is not None:
            _check_constants(cx, g)
        before = len(g.nodes)
        convert(cx)
        if verbose:
            for node in g.nodes[before:]:
                print(f"{rec.scope or '<model>'}: {node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")


def _check_constants(cx: Context, g: GraphBuilder) -> None:
    """A tensor made during the forward pass whose shape follows a dynamic axis (``torch.ones(T, T)``) would be
    written at the traced size: refused."""
    for a, b in zip(flat_arrays(list(cx.rec.inputs)), flat_arrays(list(cx.rec2.inputs))):
        if id(a) not in g.values and id(a) not in g.param_names and tuple(a.shape) != tuple(b.shape):
            raise cx.refuse(
                f"it uses a tensor of shape {tuple(a.shape)} made inside forward whose size follows a dynamic "
                "axis; make it from the input with traced ops (or use is_causal=True for a causal mask)"
            )


def _steps(dynamic: dict, names: list[str]) -> dict:
    """A resize per symbolic axis name: the k-th name changes by k + 1 (down when that leaves 2 or more)."""
    syms: list[str] = []
    for name in names:
        for sym in dynamic.get(name, {}).values():
            if sym not in syms:
                syms.append(sym)
    return {s: (lambda n, d=k + 1: n - d if n - d >= 2 else n + d) for k, s in enumerate(syms)}


def export(
    model: Any,
    args: Any = (),
    f: Any = None,
    *,
    kwargs: dict | None = None,
    export_params: bool = True,
    verbose: bool | None = None,
    input_names=None,
    output_names=None,
    opset_version: int | None = None,
    dynamic_axes=None,
    do_constant_folding: bool = True,
    dynamo: bool = True,
    dynamic_shapes=None,
    **ignored: Any,
) -> ONNXProgram:
    """Write ``model`` called on ``args`` as an ONNX model to ``f`` (a path or a binary file object; None: only
    return it), as ``torch.onnx.export``. See :mod:`trainkit.onnx`."""
    try:
        import onnx
    except ImportError:
        raise OnnxExporterError(
            "torch.onnx.export needs the onnx package: pip install onnx (or trainkit[onnx])"
        ) from None
    if not hasattr(model, "named_modules") or not callable(model):
        raise OnnxExporterError(f"torch.onnx.export: model must be a Module, got {type(model).__name__}")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxExporterError(
            f"torch.onnx.export: opset_version={opset_version} is not supported; trainkit writes opsets "
            f"{MIN_OPSET} to {MAX_OPSET}"
        )
    args, kwargs = _split_args(args, kwargs)
    model, args, kwargs = _on_cpu(model, args, kwargs)
    names = _input_names(model, args, kwargs, input_names)
    inputs = flat_arrays(list(args) + list(kwargs.values()))
    dynamic = _dynamic(dynamic_axes, dynamic_shapes, names)
    was_training = [(m, m.training) for m in model.modules()]
    model.eval()
    _state["exporting"] = True
    try:
        records, output = _run(model, args, kwargs)
        records2 = output2 = None
        if any(name in dynamic for name in names):
            steps = _steps(dynamic, names)
            args2, kwargs2 = _second_args(args, kwargs, names, dynamic, steps)
            try:
                records2, output2 = _run(model, args2, kwargs2)
            except Exception as err:
                shapes = [tuple(a.shape) for a in flat_arrays(list(args2) + list(kwargs2.values()))]
                raise OnnxExporterError(
                    f"torch.onnx.export: with dynamic_axes the model is run again at other sizes (inputs {shapes}) "
                    f"to see which sizes follow them, and it failed: {type(err).__name__}: {err}"
                ) from err
            if len(records2) != len(records):
                raise OnnxExporterError(
                    "torch.onnx.export: the model runs a different number of ops when a dynamic axis has another "
                    "size: it cannot be exported with these dynamic_axes"
                )
            inputs2 = flat_arrays(list(args2) + list(kwargs2.values()))
        param_names = {}
        for name, t in list(model.named_buffers()) + list(model.named_parameters()):
            param_names.setdefault(id(array_of(t)), name)
        g = GraphBuilder(opset, param_names, export_params)
        graph_inputs, sources = [], []
        for i, (name, a) in enumerate(zip(names, inputs)):
            g.input_value(a, name)
            axes = dynamic.get(name, {})
            dims = [axes.get(k, int(n)) for k, n in enumerate(a.shape)]
            graph_inputs.append((name, a.dtype, dims))
            for axis in axes:
                sources.append((a.shape[axis], inputs2[i].shape[axis], name, axis))
        dims_helper = Dims(g, sources)
        _convert(g, dims_helper, records, records2, opset, verbose, do_constant_folding)
        outputs = _outputs(g, output, output2, output_names, dynamic, sources)
    finally:
        _state["exporting"] = False
        for m, flag in was_training:
            m.training = flag
    proto = g.model(graph_inputs, outputs, "trainkit")
    onnx.checker.check_model(proto)
    program = ONNXProgram(proto)
    if f is not None:
        if not hasattr(f, "write") and not isinstance(f, (str, os.PathLike)):
            raise OnnxExporterError(
                f"torch.onnx.export: f must be a path or a binary file object, got {type(f).__name__}"
            )
        program.save(f)
    return program


def _outputs(g: GraphBuilder, output, output2, output_names, dynamic, sources) -> list:
    arrays = flat_arrays(output)
    arrays2 = flat_arrays(output2) if output2 is not None else [None] * len(arrays)
    given = list(output_names or [])
    if len(given) > len(arrays):
        raise OnnxExporterError(
            f"torch.onnx.export: output_names has {len(given)} names for {len(arrays)} tensor outputs ({given})"
        )
    names = given + [f"output_{i}" if len(arrays) > 1 else "output" for i in range(len(given), len(arrays))]
    if len(arrays) == 1 and not given:
        names = ["output"]
    known = {(a, b): sym for a, b, name, axis in sources for sym in [dynamic[name][axis]]}
    out = []
    for _k, (name, a, b) in enumerate(zip(names, arrays, arrays2)):
        value = g.value(a)
        g.claim(name)
        g.node("Identity", [value], outputs=[name])
        axes = dynamic.get(name, {})
        dims: list = []
        for j, n in enumerate(a.shape):
            if j in axes:
                dims.append(axes[j])
            elif b is not None and b.shape[j] != n:
                dims.append(known.get((n, b.shape[j]), f"{name}_dim_{j}"))
            else:
                dims.append(int(n))
        out.append((name, a.dtype, dims))
    return out
