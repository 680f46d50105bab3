"""``torch.onnx.export``: run the model on the example inputs while recording its ops, convert each recorded call
with its row of the converter tables, check the model with ``onnx.checker`` and write it.

The model runs a second time, on the inputs with every dynamic axis resized and other values, and the two
recordings are matched call by call: a size in the ops' arguments that changed follows an axis and is computed at
run time (:mod:`trainkit.onnx.shapes`); a tensor made inside forward that changed is refused unless it can be made
at run time; a forward that ran other ops branches on its inputs and is refused.
"""

from __future__ import annotations

import copy
import inspect
import os
import warnings
from typing import Any

import numpy as np

from ..autograd import grad_mode
from ..autograd.creation import from_numpy
from ..autograd.graph import tensors_in
from ..autograd.tensor import Tensor
from .context import Context, differs, flat_arrays
from .graph import GraphBuilder, OnnxExporterError, array_of
from .layers import LAYER_CONVERTERS
from .ops_math import MATH_CONVERTERS
from .ops_nn import NN_CONVERTERS
from .ops_reduce import REDUCE_CONVERTERS
from .ops_shape import SHAPE_CONVERTERS
from .options import DEFAULT_OPSET, TrainingMode, check_options, opset_of
from .program import ONNXProgram
from .shapes import Dims
from .trace import Record, Tracer, fingerprint, prints

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OP_CONVERTERS", "TrainingMode", "export", "is_in_onnx_export"]

OP_CONVERTERS = {**MATH_CONVERTERS, **NN_CONVERTERS, **REDUCE_CONVERTERS, **SHAPE_CONVERTERS}
_state = {"exporting": False}


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
    """The example inputs with each dynamic axis resized by its own step and other values: floats drawn anew
    with the same mean and spread, integers and bools shifted by one place (token ids stay in range)."""
    it = iter(names)
    rng = np.random.default_rng(0)

    made: dict[int, Tensor] = {}  # a tensor passed twice (q, k and v of self-attention) stays one tensor

    def resize(v):
        if isinstance(v, Tensor):
            name = next(it)
            if id(v) in made:
                return made[id(v)]
            a = np.asarray(array_of(v))
            for axis, sym in dynamic.get(name, {}).items():
                a = _resize(a, axis, steps[sym](a.shape[axis]))
            if a.dtype.kind == "f" and a.size:
                spread = float(a.std()) if np.isfinite(a).all() else 1.0
                a = (rng.standard_normal(a.shape) * (spread or 1.0) + float(a.mean() if spread else 0)).astype(a.dtype)
            elif a.size:
                a = np.roll(a, 1)
            made[id(v)] = from_numpy(np.array(a, order="C"))
            return made[id(v)]
        if isinstance(v, (list, tuple)):
            return type(v)(resize(x) for x in v)
        if isinstance(v, dict):
            return {k: resize(x) for k, x in v.items()}
        return v

    return tuple(resize(a) for a in args), {k: resize(v) for k, v in kwargs.items()}


def _on_cpu(model, args, kwargs):
    """A model or inputs on a GPU are exported from a CPU copy (the graph holds the same values)."""
    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [v for v in tensors_in(list(args) + list(kwargs.values()))]
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


def _run(model, args, kwargs):
    with Tracer(model, _layer_converter) as tracer, grad_mode.no_grad():
        output = model(*args, **kwargs)
    return tracer.records, output


def _second_run(model, args, kwargs, names, dynamic):
    """The model run again, on the inputs resized along the dynamic axes and with other values: what changes
    between the two runs follows the inputs, what does not is a constant."""
    args2, kwargs2 = _second_args(args, kwargs, names, dynamic, _steps(dynamic, names))
    inputs2 = flat_arrays(list(args2) + list(kwargs2.values()))
    try:
        records2, output2 = _run(model, args2, kwargs2)
    except Exception as err:
        raise OnnxExporterError(
            f"torch.onnx.export: the model is run a second time, on inputs of shapes {[a.shape for a in inputs2]} "
            f"(the dynamic axes resized) and other values, to tell what follows the inputs, and it failed: "
            f"{type(err).__name__}: {err}"
        ) from err
    return records2, output2, inputs2


IDENTITIES = {"copy.CloneBackward0", "shape.AliasBackward0"}  # .contiguous() copies only what is not contiguous


def _converter_of(rec):
    if rec.module is not None:
        return _layer_converter(rec.module)
    return OP_CONVERTERS.get(_op_key(rec.target))


def _same(rec, rec2) -> bool:
    """The same call in both runs: the same op (or another op of the same converter: a reshape may be a view in
    one run and a copy in the other) in the same module."""
    if rec.scope != rec2.scope:
        return False
    if _op_key(rec.target) == _op_key(rec2.target):
        return True
    convert = _converter_of(rec)
    return rec.module is None and rec2.module is None and convert is not None and convert is _converter_of(rec2)


def _align(records: list, records2: list) -> list:
    """The twin in the second run of each recorded call (None for a copy that one run made and the other did not
    need); refused when the runs differ otherwise, since the forward branches on sizes or values."""
    out, j = [], 0
    for rec in records:
        while j < len(records2) and not _same(rec, records2[j]) and _op_key(records2[j].target) in IDENTITIES:
            j += 1
        if j < len(records2) and _same(rec, records2[j]):
            out.append(records2[j])
            j += 1
        elif _op_key(rec.target) in IDENTITIES:
            out.append(None)
        else:
            raise _branches(rec)
    if any(_op_key(r.target) not in IDENTITIES for r in records2[j:]):
        raise _branches(records2[j])
    return out


def _branches(rec) -> OnnxExporterError:
    return OnnxExporterError(
        "torch.onnx.export: the model runs other ops on other inputs (from "
        f"{rec.target.__name__} in {rec.scope or '<the model>'!r} on): its forward branches or loops on their "
        "sizes or values, and one graph cannot hold both; a Python loop over a dynamic axis (for t in range(T)) "
        "is unrolled at the traced length, so leave that axis out of dynamic_axes"
    )


def _current(g: GraphBuilder, rec, later: dict) -> None:
    """Point each input array of ``rec`` at the value it held when the call began. An array changed in place since
    its value was named (``x += 1``, ``x.relu_()``, ``x[:, 0] = 0``) now holds the result of the last call that
    read it and made what it holds; an array changed by something not recorded is refused."""
    for a, seen in zip(flat_arrays([rec.inputs, rec.params]), rec.seen):
        name = g.values.get(id(a))
        if name is None or g.prints.get(name, seen) == seen:
            continue
        newer = later.get((id(a), seen))
        if newer is None:
            raise OnnxExporterError(
                f"torch.onnx.export: {rec.target.__name__} in module {rec.scope or '<the model>'!r} reads a tensor "
                "that was changed in place by something the exporter does not record (a write through a view such as "
                "y[:, 1:] *= 2, or through NumPy); write it out of place (y[:, 1:] = y[:, 1:] * 2)"
            )
        g.values[id(a)] = newer


def _note(g: GraphBuilder, rec, later: dict) -> None:
    """Remember the fingerprint of each output, and, for each array the call read, which value it would hold were
    the call's result written into it (as in-place ops do)."""
    outs = [g.values.get(id(a)) for a in flat_arrays(rec.output)]
    for name, made in zip(outs, rec.made):
        if name is not None:
            g.prints[name] = made
            for a in flat_arrays([rec.inputs, rec.params]):
                later[(id(a), made)] = name


def _convert(g: GraphBuilder, dims: Dims, records, records2, opset: int, verbose, fold: bool) -> dict:
    later: dict = {}
    for i, rec in enumerate(records):
        rec2 = records2[i]
        _current(g, rec, later)
        arrays = [a for a in flat_arrays(list(rec.inputs) + list(rec.params.values())) if id(a) in g.values]
        moves = rec2 is not None and (differs(rec.params, rec2.params) or differs(rec.inputs, rec2.inputs))
        if fold and rec.module is None and not arrays and g.export_params and not moves:
            continue  # every input a constant: the output is one too, folded to its value when used
        cx = Context(g, dims, rec, rec2, opset)
        convert = _converter_of(rec)
        if convert is None:
            raise OnnxExporterError(
                f"torch.onnx.export: no ONNX converter for the op {rec.target.__name__} "
                f"({_op_key(rec.target)}) in module {rec.scope or '<the model>'!r}"
            )
        if rec2 is not None:
            _check_constants(cx, g)
            ranks = [a.ndim for a in flat_arrays(rec.output)], [a.ndim for a in flat_arrays(rec2.output)]
            if ranks[0] != ranks[1]:
                raise cx.refuse(
                    f"its result has {ranks[0]} dimensions at the traced sizes and {ranks[1]} at others (an axis of "
                    "size 1 squeezed away?); export with sizes other than 1 on the dynamic axes, or squeeze by dim"
                )
        before = len(g.nodes)
        convert(cx)
        _note(g, rec, later)
        if verbose:
            for node in g.nodes[before:]:
                print(f"{rec.scope or '<model>'}: {node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")
    return later


def _check_constants(cx: Context, g: GraphBuilder) -> None:
    """A tensor made during the forward pass is written as a constant: refused when it is not the same in the
    second run, since then it follows a dynamic axis (``torch.ones(T, T)``) or the inputs' values (computed by an
    operation that is not recorded)."""
    mine = flat_arrays(list(cx.rec.inputs) + list(cx.rec.params.values()))
    theirs = flat_arrays(list(cx.rec2.inputs) + list(cx.rec2.params.values()))
    for a, b in zip(mine, theirs):
        if id(a) in g.values or id(a) in g.param_names:
            continue
        if tuple(a.shape) != tuple(b.shape):
            filled = cx.dims.made(a, b)
            if filled is not None:
                g.bind(a, filled)
                continue
            raise cx.refuse(
                f"it uses a tensor of shape {tuple(a.shape)} made inside forward whose size follows a dynamic "
                "axis; make it from the input with traced ops (or use is_causal=True for a causal mask)"
            )
        a, b = np.asarray(a), np.asarray(b)
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            raise cx.refuse(
                f"it uses a tensor of shape {tuple(a.shape)} made inside forward that changes with the inputs' "
                "values: it was computed by an operation the exporter does not record (or drawn at random)"
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
    verbose: bool | None = None,
    input_names=None,
    output_names=None,
    opset_version: int | None = None,
    dynamo: bool = True,
    external_data: bool = True,
    dynamic_shapes=None,
    custom_translation_table=None,
    report: bool = False,
    optimize: bool = True,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: Any = ".",
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    dynamic_axes=None,
    training: Any = TrainingMode.EVAL,
    operator_export_type: Any = None,
    do_constant_folding: bool = True,
    custom_opsets=None,
    export_modules_as_functions: Any = False,
    autograd_inlining: bool = True,
) -> ONNXProgram:
    """Write ``model`` called on ``args`` as an ONNX model to ``f`` (a path or a binary file object; None: only
    return it), as ``torch.onnx.export``; returns the ``ONNXProgram``. docs/onnx.md lists the arguments, what
    exports and what is refused (``OnnxExporterError``, naming the op and the module).

    >>> import io, trainkit
    >>> from trainkit import nn
    >>> buffer = io.BytesIO()
    >>> program = export(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), (trainkit.ones(1, 3),), buffer,
    ...                  input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    >>> [node.op_type for node in program.model_proto.graph.node]
    ['Gemm', 'Relu', 'Identity']
    """
    try:
        import onnx
    except ImportError:
        raise OnnxExporterError(
            "torch.onnx.export needs the onnx package: pip install onnx (or trainkit[onnx])"
        ) from None
    if not hasattr(model, "named_modules") or not callable(model):
        raise OnnxExporterError(f"torch.onnx.export: model must be a Module, got {type(model).__name__}")
    opset = opset_of(opset_version)
    check_options(model, training, custom_translation_table, custom_opsets, operator_export_type)
    args, kwargs = _split_args(args, kwargs)
    model, args, kwargs = _on_cpu(model, args, kwargs)
    names = _input_names(model, args, kwargs, input_names)
    inputs = flat_arrays(list(args) + list(kwargs.values()))
    dynamic = _dynamic(dynamic_axes, dynamic_shapes, names)
    for name, a in zip(names, inputs):
        bad = [axis for axis in dynamic.get(name, {}) if not 0 <= axis < a.ndim]
        if bad:
            raise OnnxExporterError(
                f"torch.onnx.export: dynamic_axes[{name!r}] names axis {bad[0]}, but the input {name!r} has "
                f"{a.ndim} dimensions"
            )
    was_training = [(m, m.training) for m in model.modules()]
    model.eval()
    _state["exporting"] = True
    try:
        records, output = _run(model, args, kwargs)
        records2, output2, inputs2 = _second_run(model, args, kwargs, names, dynamic)
        records2 = _align(records, records2)
        param_names = {}
        for name, t in list(model.named_buffers()) + list(model.named_parameters()):
            param_names.setdefault(id(array_of(t)), name)
        g = GraphBuilder(opset, param_names, export_params)
        graph_inputs, sources = [], []
        for i, (name, a) in enumerate(zip(names, inputs)):
            g.input_value(a, name)
            g.prints[name] = fingerprint(a)
            axes = dynamic.get(name, {})
            dims = [axes.get(k, int(n)) for k, n in enumerate(a.shape)]
            graph_inputs.append((name, a.dtype, dims))
            for axis in axes:
                sources.append((a.shape[axis], inputs2[i].shape[axis], name, axis))
        dims_helper = Dims(g, sources)
        later = _convert(g, dims_helper, records, records2, opset, verbose, do_constant_folding)
        _current(g, Record(type(model), (output,), {}, None, "", None, prints(output)), later)
        outputs = _outputs(g, output, output2, output_names, dynamic, sources)
        for name in set(dynamic) - set(names) - {n for n, _, _ in outputs}:
            warnings.warn(
                f"Provided key {name} for dynamic axes is not a valid input/output name (inputs {names}, outputs "
                f"{[n for n, _, _ in outputs]}); it is ignored",
                stacklevel=2,
            )
    finally:
        _state["exporting"] = False
        for m, flag in was_training:
            m.training = flag
    proto = g.model(graph_inputs, outputs, "trainkit", keep_initializers_as_inputs)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise OnnxExporterError(f"torch.onnx.export: the ONNX checker refused the graph written: {err}") from err
    program = ONNXProgram(proto)
    if verify:
        program.verify(args, kwargs, flat_arrays(output))
    if f is not None:
        if not hasattr(f, "write") and not isinstance(f, (str, os.PathLike)):
            raise OnnxExporterError(
                f"torch.onnx.export: f must be a path or a binary file object, got {type(f).__name__}"
            )
        program.save(f)
    return program


def _check_axes(dynamic: dict, outputs: dict) -> None:
    """An output axis that does not exist is refused; a name that is no output is warned about (it is checked
    against the inputs first), as PyTorch warns."""
    for name, axes in dynamic.items():
        if name in outputs:
            bad = [a for a in axes if not 0 <= a < outputs[name].ndim]
            if bad:
                raise OnnxExporterError(
                    f"torch.onnx.export: dynamic_axes[{name!r}] names axis {bad[0]}, but the output {name!r} has "
                    f"{outputs[name].ndim} dimensions"
                )


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
    _check_axes(dynamic, dict(zip(names, arrays)))
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
