"""How a forward call becomes a graph node: ``Op`` for built-in ops, ``Function`` for users' own.

A built-in op is one class with ``forward`` and ``backward`` side by side. ``forward`` works on arrays; ``backward``
receives the gradient of the output and returns one gradient per input, written with operators and ``ops.dual``
so that it runs on arrays (the plain pass) and on Tensors (``create_graph=True``) alike. The op never un-broadcasts
or casts a gradient: the engine does that once, from the shapes and dtypes recorded here.
"""

from __future__ import annotations

import functools
from threading import get_ident

from . import grad_mode
from .backend import as_array, xp_of
from .engine import Node, accumulator, next_seq
from .saved import ALL_SAME, FREED_MESSAGE, OUTPUT0, SAME_AS_OUTPUT, SavedOutput, unpack_tensor
from .tensor import Tensor, refresh_view

_NO_COUNTER = [0]  # version counter of a Python number saved by an op: it cannot change
# Recorders of trainkit.compiler while it captures a region, innermost last; empty otherwise, so that an op pays one
# test of an empty list for the feature. A recorder runs the op itself (through ``apply``) and notes it; an op that
# another thread runs meanwhile is not the region's, and runs as usual.
recording: list = []


def device_error(inputs) -> RuntimeError:
    devices = [str(x.device) for x in inputs if isinstance(x, Tensor)]
    first = devices[0]
    other = next(d for d in devices if d != first)
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {first} and {other}! "
        "Move them with .to(device) first."
    )


_NO_EDGE = (None, 0)
_new = object.__new__


def _connect(node: Node, inputs, out=None) -> tuple:
    """Record the graph edges of ``node``: one ``(node, output_nr)`` per input and the input's shape and dtype.
    With ``out``, the array of the node's only output, inputs of its shape and dtype are recorded as such."""
    node._seq = next_seq()
    edges = []
    meta = None  # one entry per input, built only from the first input whose shape or dtype differs from out's
    same = out is not None
    if same:
        out_shape, out_dtype = out.shape, out.dtype
    for x in inputs:
        if isinstance(x, Tensor) and x._requires_grad:
            fn = x._grad_fn
            if fn is None:  # a leaf: its AccumulateGrad, through the weak reference when it is still alive
                acc = x._acc
                fn = acc() if acc is not None else None
                if fn is None:
                    fn = accumulator(x)
            edges.append((fn, x._output_nr))
            a = x._data
            shape, dtype = a.shape, a.dtype
            if meta is None:
                # dtypes compared with ``is``: NumPy has one object per built-in dtype, and a miss only costs a record
                if same and dtype is out_dtype and shape == out_shape:
                    continue
                if len(edges) == 1:  # most often the first input: no list comprehension (a call in 3.11)
                    meta = [(shape, dtype)]
                else:  # the inputs before it matched the output
                    meta = [None if e is _NO_EDGE else SAME_AS_OUTPUT for e in edges]
                    meta[-1] = (shape, dtype)
            else:
                meta.append((shape, dtype))
        else:
            edges.append(_NO_EDGE)
            if meta is not None:
                meta.append(None)
    node.next_functions = edges = tuple(edges)
    if meta is None:  # the common case of element-wise ops: one shared tuple, no list built along the way
        n = len(edges)
        meta = ALL_SAME[n] if n < len(ALL_SAME) else (SAME_AS_OUTPUT,) * n
    node._input_meta = meta
    return edges


def _wrap_outputs(node: Node, inputs, outs: tuple, record: bool) -> tuple:
    """The tensors of a multi-output op: views of the first input (unbind, split) that may not be changed in place
    while in a graph, since no single base update describes them; or new tensors (``fresh_outputs``: var_mean),
    whose node may save its inputs as a single-output op's does."""
    cls = type(node)
    if cls.fresh_outputs:
        results = tuple(Tensor._make(as_array(o)) for o in outs)
    else:
        base = inputs[0]
        results = tuple(Tensor._make(as_array(o), False, None, 0, base._version_counter) for o in outs)
        for t in results:
            t._view = (base, None, None)
    if record:
        edges = _connect(node, inputs)
        if cls.save_inputs:
            node._saved = _save_inputs(cls.save_inputs, cls.save_only_for, inputs, edges)
        node.num_outputs = len(outs)
        node._output_meta = tuple((t._data.shape, t._data.dtype, xp_of(t._data)) for t in results)
        for nr, t in enumerate(results):
            t._requires_grad, t._grad_fn, t._output_nr = True, node, nr
    return results


def shape_error(name: str, arrays, err: ValueError) -> RuntimeError:
    """PyTorch's RuntimeError for arrays that do not broadcast (NumPy raises ValueError), naming both shapes."""
    shapes = [tuple(a.shape) for a in arrays if hasattr(a, "shape")]
    if len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        n = max(len(a), len(b))
        for offset in range(1, n + 1):
            sa = a[-offset] if offset <= len(a) else 1
            sb = b[-offset] if offset <= len(b) else 1
            if sa != sb and sa != 1 and sb != 1:
                return RuntimeError(
                    f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at non-singleton "
                    f"dimension {n - offset} (shapes {list(a)} and {list(b)})"
                )
    listed = " and ".join(str(list(s)) for s in shapes)
    return RuntimeError(f"{name} failed on tensors of shapes {listed}: {err}")


class Op(Node):
    """Base of the built-in ops.

    Class attributes: ``save_inputs`` lists the inputs ``backward`` reads (saved with their version, checked at
    backward); ``save_only_for`` names, for a saved input, the one input whose gradient needs it, so that it is
    not kept (nor checked) when that gradient is not wanted; ``save_output`` says whether it reads its own output,
    ``is_view`` that the output shares the input's storage (and so its version counter). A subclass may give
    PyTorch's node name as ``name=``.
    """

    save_inputs: tuple[int, ...] = ()
    save_only_for: dict[int, int] = {}  # saved input -> the input whose gradient alone needs it
    save_output = False
    is_view = False
    multi_output = False  # forward returns a tuple of arrays: one output tensor each
    fresh_outputs = False  # with multi_output: the outputs are new tensors, not views of the first input

    def __init_subclass__(cls, name: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.__name__ = cls.__qualname__ = name
        if "apply" not in cls.__dict__:
            cls.apply = _apply_of(cls)

    def forward(self, *arrays, **params):
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    @classmethod
    def apply(cls, *inputs, **params) -> Tensor:
        """Run ``forward`` on the inputs' arrays and, in grad mode, record the node. Inputs: Tensors or numbers.
        Each subclass gets its own ``apply`` with the class built in (see ``_apply_of``)."""
        return _apply_of(cls)(*inputs, **params)


def _apply_of(cls):
    """``cls.apply``, made once per op class when the class is defined, with the class and its flags built in.

    A plain function stored on the class, not a classmethod: Python 3.11 caches the look-up of a function on a
    class but redoes that of a classmethod, and binds a new method object, on every call; and the class's flags,
    read here once, would otherwise be five class attribute reads per call, which 3.11 does not cache either.
    Together about 1,000 CPU instructions per op.
    """
    multi_output, is_view, save_inputs, save_only_for, save_output = (
        cls.multi_output,
        cls.is_view,
        cls.save_inputs,
        cls.save_only_for,
        cls.save_output,
    )

    def apply(*inputs, **params) -> Tensor:
        """Run ``forward`` on the inputs' arrays and, in grad mode, record the node. Inputs: Tensors or numbers."""
        if recording:
            rec = recording[-1:]  # a copy: a capture in another thread may change the list meanwhile
            if rec and rec[0].thread == get_ident():  # a capture notes its own thread's ops only
                return rec[0](cls, apply, inputs, params)
        arrays = []
        kind = None
        requires = False
        for x in inputs:
            if isinstance(x, Tensor):
                if x._view is not None and x._view_version != x._version_counter[0]:
                    refresh_view(x)  # its base changed in place since its grad_fn was set
                a = x._data
                if type(a) is not kind:
                    if kind is not None:
                        raise device_error(inputs)
                    kind = type(a)
                if x._requires_grad:
                    requires = True
                arrays.append(a)
            else:
                arrays.append(x)
        node = _new(cls)
        try:
            out = node.forward(*arrays, **params) if params else node.forward(*arrays)
        except ValueError as err:  # NumPy's broadcasting errors become PyTorch's RuntimeError, naming the shapes
            raise shape_error(cls.__name__, arrays, err) from None
        record = requires and (not grad_mode.disabled_threads or grad_mode.state.enabled)
        if multi_output:
            return _wrap_outputs(node, inputs, out, record)
        if type(out) is not kind:
            out = as_array(out)
        result = _new(Tensor)
        result._data = out
        if is_view and out.base is not None:  # it shares its input's storage, and so its version counter
            result._version_counter = inputs[0]._version_counter
            result._view = (inputs[0], cls, params)
            if result._version_counter[0]:
                result._view_version = result._version_counter[0]
            # PyTorch refuses to record an in-place change through a view made in no_grad mode, or a view of one
            if grad_mode.disabled_threads and not grad_mode.state.enabled:
                result._no_grad_view = 1
            elif inputs[0]._no_grad_view:
                result._no_grad_view = 2
        else:
            result._version_counter = [0]
        if not record:
            return result

        edges = _connect(node, inputs, out)
        result._requires_grad = True
        result._grad_fn = node
        result._output_nr = 0  # the class default would do, but every later op's _connect reads it ten times faster
        if save_inputs:
            node._saved = _save_inputs(save_inputs, save_only_for, inputs, edges)
        if save_output:
            counter = result._version_counter
            saved = node._saved = node._saved or []
            saved.append((OUTPUT0, out, counter[0], counter))
        return result

    return apply


def _save_inputs(save_inputs, only_for, inputs, edges) -> list:
    """The saved entries of the inputs ``save_inputs`` names: ``(value, array, version, version counter)``, or
    None for one that only an unwanted gradient would read (see ``Op.save_only_for``)."""
    saved = []
    for i in save_inputs:
        x = inputs[i]
        if i in only_for and edges[only_for[i]] is _NO_EDGE:
            saved.append(None)
        elif isinstance(x, Tensor):
            counter = x._version_counter
            saved.append((x, x._data, counter[0], counter))
        else:
            saved.append((x, x, 0, _NO_COUNTER))
    return saved


class FunctionCtx:
    """What a custom ``Function``'s forward and backward share: saved tensors and any attribute you set."""

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` for backward; each is checked for in-place changes when read back."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, got {type(t).__name__}")
        self._to_save = tensors

    def mark_dirty(self, *tensors) -> None:
        """Inputs that forward changed in place; they must be returned as outputs, and then carry this node as
        their ``grad_fn`` (their history is rewritten, as after any in-place op)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that never get a gradient (indices, masks)."""
        self._non_differentiable = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None instead of zeros for outputs that got no gradient."""
        self._materialize = value


class BackwardCFunction(Node, FunctionCtx):
    """The node of a custom Function call; it is also the ``ctx`` its forward and backward receive."""

    _function: type = None  # type: ignore[assignment]
    needs_input_grad: tuple = ()  # set per call (a plain attribute here, not Node's derived property)

    def __init__(self):
        Node.__init__(self)
        self._to_save = ()
        self._non_differentiable = set()
        self._dirty = ()
        self._materialize = True
        self.needs_input_grad = ()
        self._output_meta = ()
        self._saved_nones = ()
        self._tensor_positions = ()  # which forward arguments were tensors: next_functions lists only those

    @property
    def saved_tensors(self) -> tuple:
        """The saved tensors themselves (as PyTorch unpacks them), checked against in-place changes."""
        if self._saved is None and not self._freed and self._to_save:
            return tuple(self._to_save)  # read inside forward, before the graph records the node
        if self._saved is None and self._freed:
            raise RuntimeError(FREED_MESSAGE)
        values = [unpack_tensor(self, entry) for entry in self._saved or ()]
        return tuple(None if is_none else values.pop(0) for is_none in self._saved_nones)

    def backward(self, *grad_outputs):
        create = grad_mode.state.create_graph
        grads = [g if (g is None or create) else Tensor._make(as_array(g)) for g in grad_outputs]
        result = self._function.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_args = len(self.needs_input_grad)
        if len(result) < n_args or any(g is not None for g in result[n_args:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {n_args}, "
                f"got {len(result)})"
            )
        out = []
        for i, g in enumerate(result[p] for p in self._tensor_positions):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"{self.name()}.backward must return Tensors or None, got {type(g).__name__}")
            meta = self._input_meta[i]
            if g is not None and meta is not None and not _expandable(meta[0], tuple(g.shape)):
                raise RuntimeError(
                    f"Function {self.name()} returned an invalid gradient at index {i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(meta[0])}"
                )
            out.append(None if g is None else (g if create else g._data))
        return tuple(out)


def once_differentiable(backward):
    """Mark a Function's backward as not differentiable itself: it runs without recording a graph, and a
    ``create_graph`` pass through it gives gradients that do not require grad."""

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            return backward(ctx, *grads)

    return wrapper


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        # Each Function gets its own node class named as PyTorch names it: MyFunctionBackward.
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_function": cls})


class Function(metaclass=_FunctionMeta):
    """Base for differentiable operations of your own, as ``torch.autograd.Function``.

    Write ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` as static methods; call ``apply``.

    >>> import trainkit
    >>> class Cube(Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return grad * 3 * x ** 2
    >>> x = trainkit.tensor([2.0], requires_grad=True)
    >>> Cube.apply(x).backward(trainkit.ones(1)); x.grad
    tensor([12.])
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("subclasses of Function must implement a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("subclasses of Function must implement a static backward(ctx, ...)")

    @classmethod
    def apply(cls, *args, **kwargs):
        node = cls._backward_cls()
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        for t in tensor_args:
            refresh_view(t)
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with grad_mode.no_grad():
            outputs = cls.forward(node, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        requires = grad_mode.state.enabled and any(t._requires_grad for t in tensor_args)
        dirty = {id(t) for t in node._dirty}
        if dirty:
            _check_dirty(node._dirty, outs, requires)
        if not requires:
            return outputs
        node._tensor_positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        _connect(node, tensor_args)
        node.num_outputs = len(outs)
        node._output_meta = tuple(
            (o._data.shape, o._data.dtype, xp_of(o._data)) if isinstance(o, Tensor) else ((), None, None) for o in outs
        )
        results = []
        for nr, o in enumerate(outs):
            if not isinstance(o, Tensor):
                results.append(o)
                continue
            if id(o) in node._non_differentiable or not o.is_floating_point():
                o._requires_grad = False
                results.append(o)
                continue
            if id(o) in dirty:  # changed in place: the input itself now comes from this node
                pass
            elif any(o is a for a in args):  # an input returned as is: PyTorch returns a view of it
                o = Tensor._make(o._data, False, None, 0, o._version_counter)
            o._grad_fn, o._output_nr, o._requires_grad = node, nr, True
            results.append(o)
        to_save = node._to_save
        node._saved_nones = tuple(t is None for t in to_save)
        output_nrs = {
            id(o): SavedOutput(nr) for nr, o in enumerate(results) if isinstance(o, Tensor) and o._grad_fn is node
        }
        # An output is saved without itself (its output number stands in): the node must not hold its outputs.
        node._saved = tuple(
            (output_nrs.get(id(t), t), t._data, t._version_counter[0], t._version_counter)
            for t in to_save
            if t is not None
        )
        node._to_save = ()
        if not node._saved:
            node._saved = None
        return results[0] if single else tuple(results)


def _check_dirty(dirty: tuple, outputs: tuple, requires: bool) -> None:
    """The rules for inputs marked dirty: returned as outputs, not leaves that require grad; each one's version
    moves on (as PyTorch's does, on top of any in-place op forward ran)."""
    if any(not any(t is o for o in outputs) for t in dirty):
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as output. The "
            "inputs that are modified inplace must all be outputs of the Function."
        )
    for t in dirty:
        if requires and t._requires_grad and t._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        if requires and t._view is not None:
            raise NotImplementedError("mark_dirty on a view that requires grad is not supported: clone() it first")
        t._version_counter[0] += 1


def _expandable(shape: tuple, to_shape: tuple) -> bool:
    """Can an array of ``shape`` be broadcast to ``to_shape`` (so that a grad of ``to_shape`` sums back)?"""
    if len(shape) > len(to_shape):
        return False
    return all(a == b or a == 1 for a, b in zip(shape[::-1], to_shape[::-1]))


def replayed_whole(fn):
    """Mark a function that changes tensors in place outside the ops (gradient clipping): a region that
    ``trainkit.compile`` captures notes a call of it as one step and calls it again on each replay, rather than
    recording what it does inside (an in-place change, which a replay would not repeat). Elsewhere it costs one test
    of an empty list.

    >>> @replayed_whole
    ... def halve(x):
    ...     return x / 2
    >>> halve(3.0)
    1.5
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if recording:
            rec = recording[-1:]
            if rec and rec[0].thread == get_ident():
                return rec[0].call_whole(fn, args, kwargs)
        return fn(*args, **kwargs)

    return wrapper
