"""Capture: run a region eagerly once and note every op, backward pass and optimizer update it makes.

``Recorder`` sits in ``autograd.function.recording`` while the region runs: each ``Op.apply`` calls it, it runs the
op as usual and notes the op's class, inputs, keyword arguments and results (see ``plan.OpStep``). The wrappers
``patches.Patches`` puts on a few classes for the duration note the rest: backward passes, optimizer updates and
``zero_grad``, tensor functions without a gradient, the modules called, and the reads of values into Python.

Whatever the region does that a replay would not repeat refuses the plan with the reason (``Refused``): random
numbers drawn, a value read into Python, a tensor changed in place, a tensor made outside the ops from data, a
custom ``autograd.Function``, ``create_graph``, hooks.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..autograd import engine, function, grad_mode
from ..autograd.graph import tensors_in
from ..autograd.random import get_rng_state
from ..autograd.tensor import Tensor
from .errors import CompileError
from .patches import CONSTANT_MAKERS, Patches
from .plan import WANTED, BackwardStep, CallStep, Const, FuncStep, OpStep, Refused, schedule
from .prepared import BUMPED, PREPARED, after_apply
from .state import note_places, reachable_tensors, roots


def flatten(args: tuple, kwargs: dict) -> tuple:
    """``(structure, tensors)``: the tensors of a call's arguments in order, and a hashable description of the
    rest (containers and Python values) that a later call must match for a plan to fit.

    >>> flatten((1, [2.5, "a"]), {})[0]
    (('v', 1), ('l', (('v', 2.5), ('v', 'a'))), ('d', ()))

    Any other object (a module, a NumPy array) must be the same object again: its description holds it, so that a
    new object made at the same address cannot pass for it.
    """
    tensors: list = []
    structure = tuple(_walk(a, tensors) for a in args) + (
        ("d", tuple((k, _walk(v, tensors)) for k, v in kwargs.items())),
    )
    return structure, tensors


def _walk(x, tensors: list):
    if isinstance(x, Tensor):
        tensors.append(x)
        return ("t",)
    if isinstance(x, (list, tuple)):
        return ("l" if isinstance(x, list) else type(x).__name__, tuple(_walk(v, tensors) for v in x))
    if isinstance(x, dict):
        return ("d", tuple((k, _walk(v, tensors)) for k, v in x.items()))
    if x is None or isinstance(x, (bool, int, float, str, complex, type(Ellipsis), slice)):
        return ("v", x)
    return ("o", id(x), x)  # another object: the same one must come again (held, so that its id is not reused)


def signature(tensors: list) -> tuple:
    """What a plan is specialised on for each tensor argument: shape, dtype, array type, requires_grad.

    >>> import trainkit
    >>> signature([trainkit.zeros(2, requires_grad=True)])
    (((2,), dtype('float32'), <class 'numpy.ndarray'>, True),)
    """
    return tuple((t._data.shape, t._data.dtype, type(t._data), t._requires_grad) for t in tensors)


class Recorder:
    """Notes one eager run of a region; ``steps`` and the slot tables are what ``plan`` is built from."""

    def __init__(self, arg_tensors: list, fullgraph: bool):
        self.fullgraph = fullgraph
        self.thread = threading.get_ident()
        self.steps: list = []
        self.slot_of: dict = {}  # id(tensor) -> slot
        self.tensors: list = []  # tensor of each slot (kept alive while capturing, so that ids stay unique)
        self.array_slot: dict = {}  # id(array) -> slot, for keyword arguments that are a tensor's array
        self.externals: list = []  # (slot, tensor)
        self.versions: dict = {}  # slot -> version seen when first read
        self.op_of: dict = {}  # id(node) -> OpStep
        self.modules: dict = {}  # id(module) -> module, every module called
        self.view_of: dict = {}  # slot of a view -> slot of the tensor whose version counter it shares
        self.owners: dict = {}  # id(array) -> the parameter or buffer that holds it, for modules called
        self.fresh: dict = {}  # id(tensor) -> (tensor, maker's module): tensors made by Tensor._make meanwhile
        self.places: dict = {}  # id(tensor) -> where it sat before the region ran (state.note_places)
        self.refusal: str | None = None
        self.opaque = 0
        self.start_seq = engine.next_seq()
        self.passes = 0
        self.args = tuple(self.new_slot(t) for t in arg_tensors)

    # ------------------------------------------------------------------------------------------------ slots
    def new_slot(self, t: Tensor) -> int:
        slot = len(self.tensors)
        self.tensors.append(t)
        self.slot_of[id(t)] = slot
        self.array_slot[id(t._data)] = slot
        self.versions[slot] = t._version_counter[0]
        return slot

    def slot(self, t: Tensor) -> int:
        slot = self.slot_of.get(id(t))
        if slot is not None:
            return slot
        fn = t._grad_fn
        if fn is not None and fn._seq > self.start_seq:
            raise Refused(
                f"a tensor made by {fn.name()}, which the compiler cannot replay (a custom autograd.Function or an "
                "in-place op)"
            )
        made = self.fresh.get(id(t))
        if made is not None and made[0] is t and made[1] not in CONSTANT_MAKERS:
            raise Refused(
                f"a tensor made outside the ops by {made[1]} (a mask or the like): a replay would not recompute it"
            )
        slot = self.new_slot(t)
        self.externals.append((slot, t))
        return slot

    def known(self, module) -> None:
        """Note the arrays of a module's parameters and buffers: an op may take one as a keyword argument
        (batch norm's running statistics)."""
        for t in (*module._parameters.values(), *module._buffers.values()):
            if t is not None:
                self.owners[id(t._data)] = t

    def refuse(self, reason: str) -> None:
        if self.refusal is None:
            self.refusal = reason
        if self.fullgraph:
            raise CompileError(reason)

    # ------------------------------------------------------------------------------------------------- ops
    def __call__(self, cls, apply, inputs, params):
        """The hook of ``Op.apply``: run the op, then note it."""
        function.recording.pop()
        try:
            result = apply(*inputs, **params)
        finally:
            function.recording.append(self)
        if self.refusal is None:
            try:
                self.note_op(cls, inputs, params, result)
            except Refused as why:
                self.refuse(str(why))
        return result

    def note_op(self, cls, inputs, params, result) -> None:
        spec = []
        for x in inputs:
            if isinstance(x, Tensor):
                spec.append(self.slot(x))
            elif self.array_ref(x, cls, "an input") is not None:
                raise Refused(f"{cls.__name__} takes a tensor's array as a plain input")
            else:
                spec.append(Const(x))
        static, refs = {}, []
        prepare = PREPARED.get(cls)
        for key, value in params.items():
            if prepare is not None and key in prepare[0]:
                continue  # recomputed from the op's inputs at each replay
            ref = self.array_ref(value, cls, key)
            if ref is None:
                static[key] = value
            else:
                refs.append((key, *ref))
        spec = tuple(spec)
        multi = isinstance(result, tuple)
        outs = result if multi else (result,)
        step = OpStep(cls, spec, static, tuple(refs), tuple(self.new_slot(t) for t in outs), multi)
        step.prepare = prepare[1] if prepare is not None else None
        if cls in BUMPED and params.get("training"):
            step.bumps = tuple(s for key, s, _ in refs if key in BUMPED[cls])
            for s in step.bumps:
                self.versions[s] += 1  # the function bumps it right after apply
        step.index = len(self.steps)
        first = inputs[0] if inputs else None
        if isinstance(first, Tensor) and outs[0]._version_counter is first._version_counter:
            self.view_of[step.outs[0]] = self.view_of.get(spec[0], spec[0])  # a view: its base's versions
        step.out_shapes = tuple((t._data.shape, t._data.dtype) for t in outs)
        node = outs[0]._grad_fn if outs[0]._requires_grad else None
        if node is not None and type(node) is cls:
            self.op_of[id(node)] = step
            step.node = node  # until the plan is built; dropped then
            step.num_outputs = node.num_outputs
            step.output_meta = getattr(node, "_output_meta", ())
            step.edges = tuple((WANTED if fn is not None else None, nr) for fn, nr in node.next_functions)
            step.meta = node._input_meta
            saved = node._saved or ()
            kept = [None if saved[j] is None else i for j, i in enumerate(cls.save_inputs) if j < len(saved)]
            step.saved = tuple(kept + ([-1] if cls.save_output else []))
        self.steps.append(step)

    def array_ref(self, value, cls, key):
        """``(slot, shape)`` when a keyword argument is a slot's array or a reshaped view of it (a loss's
        targets), None for a value that is no array. An array computed outside the ops may hold values derived
        from the data, which a replay would not recompute: refused, naming the op and argument."""
        if isinstance(value, (tuple, list)):
            for v in value:
                if self.array_ref(v, cls, key) is not None:
                    raise Refused(f"{cls.__name__} takes a sequence of tensors' arrays ({key})")
            return None
        if not isinstance(value, np.ndarray) and not hasattr(value, "__cuda_array_interface__"):
            return None
        slot = self.array_slot.get(id(value))
        if slot is None and id(value) in self.owners:
            slot = self.slot(self.owners[id(value)])
        if slot is not None:
            return slot, None
        base = value.base
        while base is not None:
            slot = self.array_slot.get(id(base))
            if slot is None and id(base) in self.owners:
                slot = self.slot(self.owners[id(base)])
            if slot is not None:
                src = self.tensors[slot]._data
                if value.size == src.size and value.flags.c_contiguous and src.flags.c_contiguous:
                    return slot, value.shape
                raise Refused(f"{cls.__name__} takes a view of a tensor's array that the compiler cannot rebuild")
            base = base.base
        if not value.flags.writeable:
            return None  # a frozen array of its maker's: a constant
        raise Refused(f"{cls.__name__} takes an array computed outside the ops ({key}): it could depend on the data")

    def note_function(self, fn, args: tuple, kwargs: dict, out: Tensor) -> None:
        spec = []
        for x in args:
            if isinstance(x, Tensor):
                spec.append(self.slot(x))
            elif self.array_ref(x, type(fn), "an input") is not None:
                raise Refused(f"{fn.__name__} takes a tensor's array as a plain input")
            else:
                spec.append(Const(x))
        for key, value in kwargs.items():
            if isinstance(value, Tensor) or self.array_ref(value, type(fn), key) is not None:
                raise Refused(f"{fn.__name__} takes a tensor as the keyword argument {key}")
        step = FuncStep(fn, tuple(spec), dict(kwargs), self.new_slot(out), (out._data.shape, out._data.dtype))
        self.steps.append(step)

    # ------------------------------------------------------------------------------------------ backward
    def backward(self, t: Tensor, gradient, retain_graph, create_graph, inputs) -> None:
        if create_graph:
            raise Refused("backward(create_graph=True): higher-order gradients run eagerly")
        if inputs is not None:
            raise Refused("backward(inputs=...) is not compiled")
        if retain_graph:
            raise Refused("backward(retain_graph=True) inside the region")
        self.check_versions("before backward()")
        check_nodes(self.steps)
        if t._grad_fn is None:
            raise Refused("backward() from a tensor with no history")
        root = self.slot(t)
        seed = None if gradient is None else self.slot(gradient)
        sched = schedule([(t._grad_fn, t._output_nr, root)], [seed], self.op_of, self.input_slot)
        for slot, _, _ in sched.exits:
            leaf = self.tensors[slot]
            if leaf._grad_fn is not None:
                raise Refused("backward() inside the region reaches a graph made before it")
            if has_hooks(leaf):
                raise Refused("a hook on a leaf tensor the backward reaches")
        self.steps.append(BackwardStep(sched, root, seed))
        self.passes += 1

    def input_slot(self, step: OpStep, i: int) -> int:
        return step.inputs[i]

    def check_nodes(self, steps: list) -> None:
        check_nodes(steps)

    def after_backward(self) -> None:
        """The leaves' ``.grad`` tensors become slots: later code (gradient clipping, metrics) reads them."""
        step = self.steps[-1]
        pairs = []
        for slot, _, _ in step.schedule.exits:
            grad = self.tensors[slot]._grad
            if grad is not None:
                pairs.append((self.new_slot(grad), slot))
        step.grads_out = tuple(pairs)

    # ------------------------------------------------------------------------------------- eager calls
    def call(self, kind: str, target, args: tuple, text: str) -> None:
        self.check_versions(f"before {text}")
        self.steps.append(CallStep(kind, target, args, text))

    def call_whole(self, fn, args: tuple, kwargs: dict):
        """A call of a function marked ``function.replayed_whole`` (gradient clipping): noted as one ``CallStep``
        that a replay makes again with the same arguments (the tensors among them found anew), run here without
        recording what it does inside."""
        step = None
        if self.refusal is None:
            try:
                spec = (whole_spec(self, args), whole_spec(self, kwargs))
                self.check_versions(f"before {fn.__name__}()")
                step = CallStep("whole", None, (fn, *spec), f"{fn.__name__}()")
                args, kwargs = whole_value(spec[0], self.tensors), whole_value(spec[1], self.tensors)
            except Refused as why:
                self.refuse(str(why))
        function.recording.remove(self)
        self.opaque += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            function.recording.append(self)
            self.opaque -= 1
        if step is not None:
            self.resnapshot()  # the call changed gradients in place, as its replay will
            if isinstance(out, Tensor):
                step.out = self.new_slot(out)
            elif out is not None:
                self.refuse(f"{fn.__name__}() returned something the compiler cannot replay")
            self.steps.append(step)
        return out

    def check_versions(self, when: str) -> None:
        """Every tensor read so far still has the version it was read at: nothing changed one in place."""
        for slot, version in self.versions.items():
            t = self.tensors[slot]
            if t._version_counter[0] != version:
                raise Refused(f"a tensor of shape {tuple(t._data.shape)} was changed in place inside the region")

    def resnapshot(self) -> None:
        for slot in self.versions:
            self.versions[slot] = self.tensors[slot]._version_counter[0]


def whole_spec(rec: Recorder, x):
    """How a replay finds an argument of a ``replayed_whole`` call again: ``("s", slot)`` for a tensor of the
    region, ``("h", tensor)`` for a leaf from outside it (a parameter the region did not read: the same one again),
    containers of those (an iterator, such as ``model.parameters()``, becomes a list), ``("v", value)`` else."""
    if isinstance(x, Tensor):
        slot = rec.slot_of.get(id(x))
        if slot is not None:
            return ("s", slot)
        if x._grad_fn is None and id(x) not in rec.fresh:
            return ("h", x)
        raise Refused("a tensor the compiler cannot find again is passed to a function it replays whole")
    if isinstance(x, dict):
        return (dict, tuple((k, whole_spec(rec, v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)) or hasattr(x, "__next__"):
        return (tuple if type(x) is tuple else list, tuple(whole_spec(rec, v) for v in x))
    return ("v", x)


def whole_value(spec, tensors: list, env: list | None = None):
    """The argument ``whole_spec`` described, with each slot's tensor (a tensor around its array where the slot
    has only an array, ``env``'s)."""
    kind = spec[0]
    if kind == "s":
        t = tensors[spec[1]]
        return t if t is not None else Tensor._make(env[spec[1]])
    if kind in ("h", "v"):
        return spec[1]
    if kind is dict:
        return {k: whole_value(v, tensors, env) for k, v in spec[1]}
    return kind(whole_value(v, tensors, env) for v in spec[1])


def check_nodes(steps: list) -> None:
    """Refuse nodes that code after ``apply`` changed in ways a replay would not repeat (hooks, retain_grad, saved
    entries added), except the fused layers' kept arrays, which a replay moves as ``run_layer`` does."""
    for step in steps:
        fn = getattr(step, "node", None)
        if fn is None:
            continue
        if fn._hooks is not None:
            raise Refused(f"a hook or retain_grad() on a tensor made by {fn.name()} in the region")
        if step.saved is not None and len(fn._saved or ()) != len(step.saved):
            step.after = after_apply(type(fn))
            if step.after is None:
                raise Refused(f"{fn.name()}'s node was changed after it was made")


def has_hooks(t: Tensor) -> bool:
    """Whether a leaf carries gradient hooks of its own or post-accumulate hooks.

    >>> import trainkit
    >>> w = trainkit.zeros(2, requires_grad=True)
    >>> has_hooks(w), has_hooks(w.register_hook(lambda g: g) and w)
    (False, True)
    """
    h = t._hooks
    if h is not None and (any(h.tensor.values()) or h.pre or h.post or h.retain):
        return True
    return bool(t._post_accumulate_hooks)


def escaped(rec: Recorder, result) -> str | None:
    """Why the plan would miss a side effect: a tensor the region made that outlives the call without being part
    of what it returns (kept in a list, a module attribute, a closure: state carried to the next call, which a
    replay would not update), or None. What the returned tensors hold (their views' bases, the tensors their graph
    saved) is theirs; everything else the capture made must be gone once its own references are dropped."""
    produced = [s for step in rec.steps if type(step) is OpStep for s in step.outs]
    produced += [step.out for step in rec.steps if type(step) is FuncStep]
    kept: set = set()
    stack = tensors_in(result)
    seen_nodes: set = set()
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            if id(item) in kept:
                continue
            kept.add(id(item))
            if item._view is not None:
                stack.append(item._view[0])
            if item._grad_fn is not None:
                stack.append(item._grad_fn)
        elif id(item) not in seen_nodes and item._seq > rec.start_seq:  # a node of the region's graph
            seen_nodes.add(id(item))
            stack.extend(e[0] for e in item._saved or () if e is not None and isinstance(e[0], Tensor))
            stack.extend(fn for fn, _ in item.next_functions if fn is not None)
    refs = [weakref.ref(rec.tensors[s]) for s in produced]
    for s in produced:
        rec.tensors[s] = None
    rec.fresh.clear()
    for ref in refs:
        t = ref()
        if t is not None and id(t) not in kept:
            return (
                f"a tensor of shape {tuple(t._data.shape)} made in the region is kept outside what it returns (state "
                "carried to the next call, e.g. an RNN's hidden state or a module attribute): a replay would not "
                "update it; return it instead"
            )
    return None


def run_captured(fn, args: tuple, kwargs: dict, arg_tensors: list, fullgraph: bool, watch: tuple = ()):
    """Run ``fn(*args, **kwargs)`` eagerly under a ``Recorder``; return ``(result, recorder)``. ``watch``: modules
    the region belongs to without calling them (a compiled ``forward``), guarded as the ones it calls."""
    rec = Recorder(arg_tensors, fullgraph)
    for module in watch:
        rec.modules[id(module)] = module
        rec.known(module)
    for t in reachable_tensors(fn):
        rec.owners[id(t._data)] = t
    note_places(rec.places, roots(fn, watch))
    if grad_mode.state.anomaly:
        rec.refuse("anomaly detection is on")
    before = get_rng_state()._data.tobytes()
    with Patches(rec):
        result = fn(*args, **kwargs)
    if rec.refusal is None:
        try:
            rec.check_versions("at the end")
        except Refused as why:
            rec.refuse(str(why))
    if rec.refusal is None and get_rng_state()._data.tobytes() != before:
        rec.refuse("random numbers were drawn inside the region (dropout, randn, ...): they would repeat on replay")
    return result, rec


__all__ = ["Recorder", "flatten", "run_captured", "signature"]
