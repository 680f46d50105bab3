"""PyTorch's legacy tensor types (``FloatTensor``, ``LongTensor``, ...): constructors from sizes or data, and
``isinstance`` checks of a tensor's dtype, as ``torch.FloatTensor`` and its siblings behave on the CPU."""

from __future__ import annotations

import numbers

from .backend import bool_, dtype, float16, float32, float64, int8, int16, int32, int64, uint8
from .creation import tensor, zeros
from .tensor import Size, Tensor

__all__ = [
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "TensorType",
]


class TensorType(type):
    """The class of the legacy types: calling one builds a tensor of its dtype, ``isinstance(t, FloatTensor)`` is
    ``t.dtype == float32`` (for a tensor on the CPU).

    The call takes what torch's legacy constructors take: sizes (``FloatTensor(2, 3)``, ``FloatTensor(Size)``;
    zeros, as ``trainkit.empty`` gives), data (a list, tuple or NumPy array, converted to the dtype), a tensor of
    the same dtype (the same data), or nothing (an empty tensor).
    """

    dtype: dtype
    is_cuda = False
    is_sparse = False

    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor) and other.dtype == cls.dtype and other.device.type == "cpu"

    def __call__(cls, *args, device=None) -> Tensor:
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: {device} was passed")
        if not args:
            return zeros(0, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Tensor):
            given = args[0]
            if given.dtype != cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {given.dtype})")
            return given.detach()
        if len(args) == 1 and isinstance(args[0], Size):
            return zeros(*args[0], dtype=cls.dtype)
        if all(is_size(a) for a in args):
            return zeros(*args, dtype=cls.dtype)
        if len(args) == 1:
            if isinstance(args[0], (numbers.Number, str)):
                raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")
            return tensor(args[0], dtype=cls.dtype)
        bad = next((i, a) for i, a in enumerate(args, 1) if not is_size(a))
        raise TypeError(
            f"new(): argument 'size' failed to unpack the object at pos {bad[0]} with error "
            f'"type must be tuple of ints,but got {type(bad[1]).__name__}"'
        )

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def is_size(value) -> bool:
    """An integer that can be a size (a bool is not)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def legacy_type(name: str, dt: dtype, example: str) -> TensorType:
    """The legacy type ``name`` of dtype ``dt``; ``example`` is data its docstring builds one from."""
    doc = (
        f"``{name}``: builds a {dt} tensor from sizes or data; ``isinstance(t, {name})`` is True for {dt} "
        f"tensors.\n\n    >>> isinstance({name}({example}), {name}), {name}(2, 3).shape\n"
        f"    (True, trainkit.Size([2, 3]))\n    "
    )
    return TensorType(name, (), {"dtype": dt, "__doc__": doc, "__module__": "trainkit"})


FloatTensor = legacy_type("FloatTensor", float32, "[1, 2]")
DoubleTensor = legacy_type("DoubleTensor", float64, "[1, 2]")
HalfTensor = legacy_type("HalfTensor", float16, "[1, 2]")
LongTensor = legacy_type("LongTensor", int64, "[1, 2]")
IntTensor = legacy_type("IntTensor", int32, "[1, 2]")
ShortTensor = legacy_type("ShortTensor", int16, "[1, 2]")
CharTensor = legacy_type("CharTensor", int8, "[1, 2]")
ByteTensor = legacy_type("ByteTensor", uint8, "[1, 2]")
BoolTensor = legacy_type("BoolTensor", bool_, "[1, 0]")
