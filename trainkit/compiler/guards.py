"""Guards: what must still hold for a plan to be replayed instead of running the region eagerly.

A plan is specialised on what its capture saw. Before each replay ``Guards.check`` compares, cheapest first:

- grad mode (``no_grad`` or not) and that anomaly detection is off;
- each module the region called: its ``training`` flag, the identity and shape of its parameters and buffers
  (a replaced parameter, ``module.weight = Parameter(...)``), and that it has no forward or backward hooks;
- each tensor the region found (parameters, closures' tensors): shape, dtype, device and ``requires_grad``, and
  no gradient hooks on those the backward reaches.

The tensor arguments' shapes, dtypes, devices and ``requires_grad`` are the key a plan is filed under (see
``capture.signature``). The first failing guard names itself, and the compiled object notes it as the reason for
capturing again.
"""

from __future__ import annotations

from ..autograd import grad_mode
from ..autograd.tensor import Tensor
from .capture import has_hooks
from .state import current, locate


class Guards:
    """The guards of one plan (see the module's docstring).

    >>> Guards(True, [], [], set()).check()
    """

    def __init__(
        self,
        grad_enabled: bool,
        modules: list,
        externals: list,
        leaves: set,
        points: tuple = (),
        located=(),
        anchors=(),
    ):
        self.grad_enabled = grad_enabled
        self.points = tuple(points)  # state.watch_points: tensors found by name
        self.anchors = tuple(anchors)  # state.anchors: the lists and dicts whose items the region reads or stores
        # state carried from the previous call (state.carried): whatever tensor is there now, of the same kind
        where = {slot: place for slot, *place in located}
        self.located = tuple(
            (*where[s], t._data.shape, t._data.dtype, type(t._data), t._requires_grad)
            for s, t in externals
            if s in where
        )
        externals = [(s, t) for s, t in externals if s not in where]
        self.modules = tuple((m, m.training) for m in modules)
        # the parameter and buffer tables of the modules that have any, with the ids of what they held
        self.tables = tuple(
            (m, table, tuple(map(id, table.values())))
            for m in modules
            for table in (m._parameters, m._buffers)
            if table
        )
        self.externals = tuple((t, t._data.shape, t._data.dtype, type(t._data), t._requires_grad) for _, t in externals)
        self.leaves = tuple(t for _, t in externals if id(t) in leaves)

    def check(self) -> str | None:
        """None when the plan fits, else the first guard that failed, in words."""
        state = grad_mode.state
        if state.enabled is not self.grad_enabled:
            return "grad mode changed" if self.grad_enabled else "grad mode changed (no_grad left)"
        if state.anomaly:
            return "anomaly detection is on"
        for m, training in self.modules:
            if m.training is not training:
                return f"{type(m).__name__}.training is now {m.training}"
            if m._forward_pre_hooks or m._forward_hooks or m._backward_hooks:
                return f"a hook was added to {type(m).__name__}"
        for m, table, ids in self.tables:
            if tuple(map(id, table.values())) != ids:
                return f"{type(m).__name__}.{_changed(table, ids)} was replaced"
        for t, shape, dtype, kind, requires in self.externals:
            a = t._data
            if a.shape != shape or a.dtype != dtype or type(a) is not kind or t._requires_grad is not requires:
                return f"a tensor the region reads changed shape, dtype, device or requires_grad ({tuple(a.shape)})"
        for container, key, path, shape, dtype, kind, requires in self.located:
            t = locate(container, key, path)
            if not isinstance(t, Tensor):
                return f"the state the region carries under {key!r} is no tensor now"
            a = t._data
            if a.shape != shape or a.dtype != dtype or type(a) is not kind or t._requires_grad is not requires:
                return f"the state the region carries under {key!r} changed shape, dtype, device or requires_grad"
        for t in self.leaves:
            if (t._hooks is not None or t._post_accumulate_hooks) and has_hooks(t):
                return "a hook was added to a parameter"
        for container, key, obj in self.anchors:
            if current(container, key) is not obj:
                return f"the {type(obj).__name__} found under {key!r} is another one"
        for container, key, t in self.points:
            if current(container, key) is not t:
                return f"the tensor found under {key!r} is another one"
        return None

    def describe(self) -> list[str]:
        """The guards in words, for ``explain``."""
        lines = [f"grad mode {'on' if self.grad_enabled else 'off (no_grad)'}; anomaly detection off"]
        for m, training in self.modules:
            lines.append(
                f"{type(m).__name__}: training={training}, {len(m._parameters)} parameters and {len(m._buffers)} "
                "buffers by identity, no hooks"
            )
        if self.externals:
            lines.append(f"{len(self.externals)} tensors read by the region: shape, dtype, device, requires_grad")
        return lines


def _changed(table: dict, ids: tuple) -> str:
    """The name of the first entry of a module's table that is not the one a plan was made with."""
    for (name, now), then in zip(table.items(), ids):
        if id(now) != then:
            return name
    return next(iter(table), "(an entry)")
