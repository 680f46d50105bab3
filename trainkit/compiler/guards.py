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
from .capture import has_hooks


class Guards:
    """The guards of one plan (see the module's docstring).

    >>> Guards(True, [], [], set()).check()
    """

    def __init__(self, grad_enabled: bool, modules: list, externals: list, leaves: set):
        self.grad_enabled = grad_enabled
        self.modules = [
            (
                m,
                m.training,
                tuple((k, p, p._data.shape if p is not None else None) for k, p in m._parameters.items()),
                tuple((k, b) for k, b in m._buffers.items()),
            )
            for m in modules
        ]
        self.externals = tuple(
            (t, t._data.shape, t._data.dtype, type(t._data), t._requires_grad, id(t) in leaves) for _, t in externals
        )

    def check(self) -> str | None:
        """None when the plan fits, else the first guard that failed, in words."""
        if grad_mode.state.enabled is not self.grad_enabled:
            return "grad mode changed" if self.grad_enabled else "grad mode changed (no_grad left)"
        if grad_mode.state.anomaly:
            return "anomaly detection is on"
        for m, training, params, buffers in self.modules:
            if m.training is not training:
                return f"{type(m).__name__}.training is now {m.training}"
            if m._forward_pre_hooks or m._forward_hooks or m._backward_hooks:
                return f"a hook was added to {type(m).__name__}"
            current = m._parameters
            if len(current) != len(params):
                return f"a parameter of {type(m).__name__} was added or removed"
            for name, p, shape in params:
                q = current.get(name)
                if q is not p:
                    return f"{type(m).__name__}.{name} was replaced"
                if p is not None and p._data.shape != shape:
                    return f"{type(m).__name__}.{name} changed shape"
            for name, b in buffers:
                if m._buffers.get(name) is not b:
                    return f"buffer {type(m).__name__}.{name} was replaced"
        for t, shape, dtype, kind, requires, leaf in self.externals:
            a = t._data
            if a.shape != shape or a.dtype != dtype or type(a) is not kind or t._requires_grad is not requires:
                return f"a tensor the region reads changed shape, dtype, device or requires_grad ({tuple(a.shape)})"
            if leaf and (t._hooks is not None or t._post_accumulate_hooks) and has_hooks(t):
                return "a hook was added to a parameter"
        return None

    def describe(self) -> list[str]:
        """The guards in words, for ``explain``."""
        lines = [f"grad mode {'on' if self.grad_enabled else 'off (no_grad)'}; anomaly detection off"]
        for m, training, params, buffers in self.modules:
            lines.append(
                f"{type(m).__name__}: training={training}, {len(params)} parameters and {len(buffers)} buffers by "
                "identity and shape, no hooks"
            )
        if self.externals:
            lines.append(f"{len(self.externals)} tensors read by the region: shape, dtype, device, requires_grad")
        return lines
