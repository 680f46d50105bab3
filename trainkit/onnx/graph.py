"""The ONNX graph under construction: value names, initializers and nodes, in the order a converter emits them.

Every tensor the traced forward pass made is known by its array (``id``), so an op's inputs are found by the arrays
its ``forward`` received; an array nobody made during the trace is a constant (a parameter or buffer keeps its
name from ``named_parameters``/``named_buffers``, anything else is ``const_N``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.tensor import Tensor

__all__ = ["GraphBuilder", "OnnxExporterError", "array_of"]


class OnnxExporterError(RuntimeError):
    """What ``export`` raises when a model cannot be written as ONNX (an op without a converter, a bad argument).

    >>> issubclass(OnnxExporterError, RuntimeError)
    True
    """


def array_of(x: Any):
    """The NumPy array behind a CPU Tensor (the same object each time: values are known by it), or ``x``.

    >>> import trainkit
    >>> t = trainkit.ones(2)
    >>> array_of(t) is array_of(t)
    True
    """
    return x.numpy(force=True) if isinstance(x, Tensor) else x


class GraphBuilder:
    """Names, initializers and nodes of one ONNX graph.

    >>> import numpy as np
    >>> g = GraphBuilder(18)
    >>> x = g.input_value(np.zeros((2, 3), "float32"), "x")
    >>> y = g.node("Relu", [x])
    >>> g.nodes[0].op_type, y
    ('Relu', 'Relu_0')
    """

    def __init__(self, opset: int, names: dict | None = None, export_params: bool = True):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.param_inputs: list = []  # with export_params=False: parameters become graph inputs
        self.export_params = export_params
        self.values: dict[int, str] = {}  # id(array) -> value name
        self.arrays: dict[str, Any] = {}  # value name -> the array seen in the trace (shape, dtype)
        self.keep: list = []  # the arrays named here stay alive, so that their ids stay theirs
        self.param_names = names or {}  # id(array) -> parameter or buffer name
        self.taken: set[str] = set()
        self.counts: dict[str, int] = {}
        self.consts: dict[tuple, str] = {}
        self.prints: dict[str, int] = {}  # value name -> fingerprint of its array when the value was made

    # ------------------------------------------------------------------------------------------------ names
    def fresh(self, hint: str, plain: bool = False) -> str:
        """A value or node name not used yet: ``hint_0``, ``hint_1``, ... (with ``plain``, ``hint`` itself first)."""
        if plain and hint not in self.taken:
            self.taken.add(hint)
            return hint
        n = self.counts.get(hint, 0)
        name = f"{hint}_{n}"
        while name in self.taken:
            n += 1
            name = f"{hint}_{n}"
        self.counts[hint] = n + 1
        self.taken.add(name)
        return name

    def claim(self, name: str) -> str:
        if name in self.taken:
            raise OnnxExporterError(f"torch.onnx.export: the name {name!r} is given to two values")
        self.taken.add(name)
        return name

    def bind(self, array, name: str) -> str:
        """Say that ``array`` (a traced value) is the value ``name`` from now on."""
        array = array_of(array)
        self.values[id(array)] = name
        self.arrays[name] = array
        self.keep.append(array)
        return name

    def input_value(self, array, name: str) -> str:
        return self.bind(array, self.claim(name))

    def known(self, x) -> bool:
        a = array_of(x)
        return id(a) in self.values

    # ------------------------------------------------------------------------------------------------ values
    def value(self, x, like: str | None = None) -> str:
        """The value name of ``x``: a traced array, a parameter or buffer (an initializer by its name), another
        array (a constant) or a Python number (a constant of the dtype of ``like``, else float32/int64)."""
        a = array_of(x)
        if id(a) in self.values:
            return self.values[id(a)]
        if isinstance(a, (bool, int, float, np.generic)) or (hasattr(a, "shape") and id(a) not in self.param_names):
            if not hasattr(a, "shape") or isinstance(a, np.generic):
                dtype = self.dtype(like) if like is not None else None
                if dtype is None:
                    dtype = np.bool_ if isinstance(a, bool) else np.int64 if isinstance(a, int) else np.float32
                return self.const(np.asarray(a, dtype=dtype))
            return self.bind(a, self.initializer(array_of(a), "const"))
        if id(a) in self.param_names:
            name = self.param_names[id(a)]
            if name in self.taken:  # a parameter used twice under different arrays cannot happen; a clash can
                name = self.fresh(name)
            else:
                self.taken.add(name)
            host = array_of(a)
            if self.export_params:
                self.initializers.append(self.numpy_helper.from_array(np.asarray(host, order="C"), name))
            else:
                self.param_inputs.append(self.helper.make_tensor_value_info(name, _elem_type(host.dtype), host.shape))
            return self.bind(a, name)
        raise OnnxExporterError(f"torch.onnx.export: cannot use a {type(x).__name__} as an ONNX value")

    def initializer(self, array: np.ndarray, hint: str) -> str:
        """A new initializer holding ``array`` (a derived weight: a transposed or reordered parameter)."""
        name = self.fresh(hint, plain=hint != "const")
        self.initializers.append(self.numpy_helper.from_array(np.asarray(array, order="C"), name))
        self.arrays[name] = array
        return name

    def const(self, array: np.ndarray) -> str:
        """A small constant (shapes, axes, scalars), shared by every use of the same value."""
        array = np.asarray(array)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.consts:
            self.consts[key] = self.initializer(array, "const")
        return self.consts[key]

    def ints(self, values) -> str:
        """A 1-d int64 constant (shapes, axes, starts and ends)."""
        return self.const(np.asarray(list(values), dtype=np.int64))

    def shape(self, name: str) -> tuple:
        """The shape the value had in the traced call."""
        a = self.arrays.get(name)
        return tuple(a.shape) if a is not None and hasattr(a, "shape") else ()

    def dtype(self, name: str):
        a = self.arrays.get(name)
        return np.dtype(a.dtype) if a is not None and hasattr(a, "dtype") else None

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    # ------------------------------------------------------------------------------------------------ nodes
    def node(self, op_type: str, inputs: list, outputs: int | list = 1, like=None, **attrs) -> Any:
        """Append a node; returns its output name (or the list of them when ``outputs`` is a count above 1 or a
        list). ``like``: an array (or a list of arrays) of the traced result, which the outputs are bound to, or
        whose shape and dtype they are known by."""
        names = outputs if isinstance(outputs, list) else [self.fresh(op_type) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names, name=self.fresh(f"n_{op_type}"), **attrs))
        if like is not None:
            likes = like if isinstance(like, (list, tuple)) else [like]
            for n, a in zip(names, likes):
                if a is not None:
                    self.arrays[n] = a
        return names if isinstance(outputs, list) or outputs > 1 else names[0]

    def model(self, inputs: list, outputs: list, producer: str, initializers_as_inputs: bool = False):
        """The ``ModelProto``: ``inputs`` and ``outputs`` are ``(name, elem dtype, dims)`` with dims a list of
        ints or strings (symbolic); ``initializers_as_inputs`` also lists each initializer as an input (with its
        value as the default), as older runtimes wanted."""
        h = self.helper
        extra = list(self.param_inputs)
        if initializers_as_inputs:
            extra += [h.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in self.initializers]
        graph = h.make_graph(
            self.nodes,
            "main_graph",
            [h.make_tensor_value_info(n, _elem_type(d), dims) for n, d, dims in inputs] + extra,
            [h.make_tensor_value_info(n, _elem_type(d), dims) for n, d, dims in outputs],
            initializer=self.initializers,
        )
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", self.opset)], producer_name=producer)
        # the oldest IR version the opset allows, so that older runtimes read the file (onnxruntime 1.17: IR 9)
        model.ir_version = h.find_min_ir_version_for(list(model.opset_import))
        return model


def _elem_type(dtype) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
