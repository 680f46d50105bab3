"""Ops that copy: clone, dtype and device conversion, copy_ and fill."""

from __future__ import annotations

from ..backend import as_array, device, device_of, to_device, to_dtype, xp_of
from ..function import Op
from ..scalar_fit import stored_value
from ..tensor import Tensor

__all__ = ["clone", "contiguous", "to"]


class Clone(Op, name="CloneBackward0"):
    """out = a copy of x.   dx = g."""

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return g


class ToCopy(Op, name="ToCopyBackward0"):
    """out = x in another dtype and/or on another device.   dx = g, brought back (the engine casts the dtype)."""

    def forward(self, x, dtype, device):
        self.source = device_of(x)
        return _convert(x, dtype, device)

    def backward(self, g):
        if isinstance(g, Tensor):
            return g.to(self.source)
        return to_device(g, self.source)


def _convert(x, dtype, device):
    """Array ``x`` on ``device`` in ``dtype`` (either None: unchanged)."""
    if device is not None:
        x = to_device(x, device)
    if dtype is not None:
        x = x.astype(dtype)
    return x


class Copy(Op, name="CopyBackwards"):
    """out = src broadcast to x's shape and cast to its dtype.   dx = 0 (zeros, as PyTorch),  dsrc = g."""

    def forward(self, x, src):
        xp = xp_of(x)
        return xp.broadcast_to(to_device(xp.asarray(src), device_of(x)), x.shape).astype(x.dtype)

    def backward(self, g):
        return g * 0, g


class Fill(Op, name="FillBackward2"):
    """out = value everywhere.   dx = 0, dvalue = sum(g) when the value is a tensor."""

    allows_overlap = True  # one number written everywhere: elements that share memory agree, as PyTorch allows

    def forward(self, x, value):
        return xp_of(x).full(x.shape, stored_value(value, x.dtype), dtype=x.dtype)

    def backward(self, g):
        return g * 0, g.sum()


class FillTensor(Fill, name="FillBackward3"):
    allows_overlap = False  # PyTorch's fill_ with a tensor value goes through the checked element-wise path

    def forward(self, x, value):
        if getattr(value, "ndim", 0):
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                "dimensions. Pass a 0-d tensor or a number."
            )
        return super().forward(x, value)


class Zero(Fill, name="ZeroBackward0"):
    pass


def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` that stays in the graph (its gradient flows back to ``input``).

    >>> import trainkit
    >>> x = trainkit.ones(2, requires_grad=True)
    >>> x.clone().grad_fn.name()
    'CloneBackward0'
    """
    return Clone.apply(input)


def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """``input`` when its elements are laid out in row-major order, else a row-major copy of it in the graph.

    >>> import trainkit
    >>> x = trainkit.ones(2, 3, requires_grad=True)
    >>> x.contiguous() is x, x.t().contiguous().grad_fn.name()
    (True, 'CloneBackward0')
    """
    if input.is_contiguous():
        return input
    return Clone.apply(input)


def parse_to(*args, **kwargs) -> tuple:
    """The ``(device, dtype, copy)`` that arguments of ``Tensor.to`` or ``Module.to`` ask for (None: unchanged).

    >>> import trainkit
    >>> parse_to("cpu", trainkit.float64)
    (device(type='cpu'), trainkit.float64, False)
    """
    dev, dt = kwargs.pop("device", None), kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, (device, str)) and not (isinstance(a, str) and a in ("float32", "float64")):
            dev = a
        elif a is not None:
            dt = a
    return (None if dev is None else device(dev)), (None if dt is None else to_dtype(dt)), copy


def to(input: Tensor, *args, **kwargs) -> Tensor:
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other)``: input when nothing changes.

    >>> import trainkit
    >>> trainkit.ones(2).to(trainkit.float64).dtype
    trainkit.float64
    """
    dev, dt, copy = parse_to(*args, **kwargs)
    if (dev is None or dev == input.device) and (dt is None or dt.np == input._data.dtype) and not copy:
        return input
    if dt is not None and not dt.is_floating_point:  # integer and bool tensors never require grad
        return Tensor._make(as_array(_convert(input._data, dt.np, dev)))
    return ToCopy.apply(input, dtype=None if dt is None else dt.np, device=dev)
