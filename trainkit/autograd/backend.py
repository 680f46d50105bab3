"""Devices, dtypes and the array module (NumPy or CuPy) behind every tensor.

Ops never import NumPy or CuPy directly for computation: they ask ``xp_of(array)`` for the module that owns their
input, so one implementation serves both. CuPy is imported only when a CUDA device is first asked for.
"""

from __future__ import annotations

import functools
import threading

import ml_dtypes
import numpy as np

_cupy = None  # the cupy module once loaded
_cupy_ndarray: type | None = None  # cupy.ndarray once loaded, for fast type checks


def load_cupy():
    """Import CuPy on first use and check that a GPU answers; raise a RuntimeError that says which part is missing."""
    global _cupy, _cupy_ndarray
    if _cupy is None:
        try:
            import cupy
        except ImportError as err:
            raise RuntimeError(
                "CUDA was asked for but CuPy is not installed: install trainkit with the 'gpu' extra "
                "(pip install 'trainkit[gpu]') on a machine with an NVIDIA GPU."
            ) from err
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as err:  # CuPy raises its own CUDARuntimeError types
            raise RuntimeError(f"CUDA was asked for but no GPU is usable: {err}") from err
        if count == 0:
            raise RuntimeError("CUDA was asked for but no GPU is usable: CUDA reports 0 devices.")
        _cupy, _cupy_ndarray = cupy, cupy.ndarray
    return _cupy


def cuda_is_available() -> bool:
    """True when CuPy imports and at least one GPU answers.

    >>> isinstance(cuda_is_available(), bool)
    True
    """
    try:
        load_cupy()
    except RuntimeError:
        return False
    return True


def xp_of(array):
    """The array module (numpy or cupy) that owns ``array``.

    >>> xp_of(np.zeros(2)) is np
    True
    """
    if _cupy_ndarray is not None and type(array) is _cupy_ndarray:
        return _cupy
    return np


def as_array(value):
    """``value`` as an ndarray of its own module: NumPy's ufuncs return scalars for 0-d inputs, tensors need arrays."""
    t = type(value)
    if t is np.ndarray or (t is _cupy_ndarray and t is not None):
        return value
    return np.asarray(value)


def sum_to(g, shape: tuple):
    """Sum array ``g`` down to ``shape`` (undoing broadcasting); never returns a view, so the result is owned."""
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return as_array(g)


def is_array(value) -> bool:
    """True for a NumPy or CuPy ndarray."""
    return type(value) is np.ndarray or (_cupy_ndarray is not None and type(value) is _cupy_ndarray)


class device:
    """Where a tensor's storage lives: ``device('cpu')`` or ``device('cuda:0')``, as ``torch.device``.

    Used as a context manager, it is the default device of the factories (``zeros``, ``tensor``, ...) inside the
    block, as ``set_default_device`` is outside of one.

    >>> device('cuda:1').index, device('cpu') == 'cpu', device('cpu:0').index, device('cpu:0') == 'cpu'
    (1, True, 0, False)
    >>> with device('cpu'):
    ...     get_default_device()
    device(type='cpu')
    """

    __slots__ = ("type", "index")

    def __init__(self, spec: str | device, index: int | None = None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index if index is None else index
        if not isinstance(spec, str):
            raise TypeError(f"device() expects a string such as 'cpu' or 'cuda:0', got {type(spec).__name__}")
        kind, _, num = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {spec}")
        if num:
            if not num.isdigit():
                raise RuntimeError(f"Invalid device string: '{spec}'")
            index = int(num)
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type = kind
        self.index = index  # 'cpu:0' keeps its index and differs from 'cpu', as in PyTorch (tensors say 'cpu')

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __enter__(self) -> device:
        state = device_state
        state.blocks = state.blocks + (self,)
        state.current = self
        return self

    def __exit__(self, *exc) -> None:
        state = device_state
        state.blocks = state.blocks[:-1]
        state.current = state.blocks[-1] if state.blocks else state.default


CPU = device("cpu")


class _DeviceState(threading.local):
    """The default device of this thread (thread-local, as in PyTorch). ``current`` is what the factories read: the
    innermost ``with device(...)`` block, else the ``set_default_device`` one, else None for "none set" (the CPU,
    and a tensor made from a tensor stays where its data is)."""

    default: device | None = None
    blocks: tuple = ()
    current: device | None = None


device_state = _DeviceState()


def set_default_device(device: str | device | None) -> None:
    """Make ``device`` where the factories (``zeros``, ``ones``, ``tensor``, ``arange``, ``rand``, ...) put new
    tensors when they are given no ``device``; ``None`` goes back to the CPU. ``*_like`` factories and
    ``from_numpy`` are not affected, as in PyTorch. The setting is per thread.

    >>> set_default_device('cpu')
    >>> get_default_device()
    device(type='cpu')
    >>> set_default_device(None)
    """
    state = device_state
    state.default = None if device is None else _device_cls(device)
    state.current = state.blocks[-1] if state.blocks else state.default


def get_default_device() -> device:
    """The device the factories use when given none (with its index for CUDA: the current GPU).

    >>> get_default_device()
    device(type='cpu')
    """
    dev = device_state.current
    if dev is None:
        return CPU
    if dev.type == "cuda" and dev.index is None:
        return _device_cls("cuda", load_cupy().cuda.runtime.getDevice())
    return dev


_device_cls = device  # the name ``device`` is taken by the arguments above


def device_of(array) -> device:
    """The device that holds ``array``."""
    if _cupy_ndarray is not None and type(array) is _cupy_ndarray:
        return device("cuda", array.device.id)
    return CPU


def to_device(array, dev: device):
    """``array`` on ``dev``: the same object when it is already there, else a copy."""
    if dev.type == "cpu":
        if _cupy_ndarray is not None and type(array) is _cupy_ndarray:
            return array.get()
        return array
    cp = load_cupy()
    index = 0 if dev.index is None else dev.index
    if type(array) is _cupy_ndarray and array.device.id == index:
        return array
    with cp.cuda.Device(index):
        return cp.asarray(array)


def module_for(dev: device):
    """The array module that creates arrays on ``dev`` (use inside ``on_device(dev)``)."""
    return np if dev.type == "cpu" else load_cupy()


class on_device:
    """Context that makes ``dev`` CuPy's current device (nothing to do for the CPU)."""

    __slots__ = ("dev", "ctx")

    def __init__(self, dev: device):
        self.dev, self.ctx = dev, None

    def __enter__(self):
        if self.dev.type == "cuda":
            self.ctx = load_cupy().cuda.Device(self.dev.index or 0)
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


class dtype:
    """A tensor element type, as ``torch.dtype``: ``trainkit.float32`` and friends.

    >>> float32.is_floating_point, float32.itemsize
    (True, 4)
    """

    __slots__ = ("name", "np", "is_floating_point", "itemsize")

    def __init__(self, name: str, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = is_floating(self.np)
        self.itemsize = self.np.itemsize

    def __repr__(self) -> str:
        return f"trainkit.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))


# ml_dtypes' bfloat16 is a NumPy dtype of kind "V" (not "f"): ``is_floating`` is the test that knows it
BFLOAT16_NP = np.dtype(ml_dtypes.bfloat16)
# float32's NumPy dtype, tested with ``is`` before the general tests: comparing two dtypes with ``==`` looks up a cast
# between them (as costly as a small op's whole Python work), and float32 is the dtype nearly every tensor has. Only
# a shortcut: a float32 dtype that is another object (unpickled arrays have one) takes the general test.
FLOAT32_NP = np.dtype(np.float32)


def is_floating(np_dtype) -> bool:
    """True for NumPy's float dtypes and ml_dtypes' bfloat16 (whose ``kind`` is "V", not "f").

    >>> is_floating(np.dtype(np.float16)), is_floating(BFLOAT16_NP), is_floating(np.dtype(np.int8))
    (True, True, False)
    """
    return np_dtype is FLOAT32_NP or np_dtype.kind == "f" or np_dtype == BFLOAT16_NP


def kind_of(np_dtype) -> str:
    """NumPy's one-letter kind of ``np_dtype``, with "f" for bfloat16 as for the other floats.

    >>> kind_of(BFLOAT16_NP), kind_of(np.dtype(np.int64))
    ('f', 'i')
    """
    if np_dtype is FLOAT32_NP:
        return "f"
    return "f" if np_dtype == BFLOAT16_NP else np_dtype.kind


def weak_number(value, np_dtype):
    """``value`` ready to meet an array of ``np_dtype``: a Python float beside bfloat16 becomes a bfloat16 number,
    since ml_dtypes promotes the pair to float32 where PyTorch keeps bfloat16 (NumPy keeps the other floats).

    >>> weak_number(0.5, BFLOAT16_NP).dtype, weak_number(0.5, np.dtype(np.float32))
    (dtype(bfloat16), 0.5)
    """
    if type(value) is float and np_dtype is not FLOAT32_NP and np_dtype == BFLOAT16_NP:
        return BFLOAT16_NP.type(value)
    return value


def bfloat16_result(out, like):
    """``out`` rounded to bfloat16 where ``like`` (the input) is bfloat16 and NumPy computed in float32 (ml_dtypes
    does so for a Python float constant): PyTorch's CPU kernels also compute bfloat16 in float32 and round once.

    >>> x = np.ones(2, BFLOAT16_NP)
    >>> bfloat16_result(x * 0.5, x).dtype, bfloat16_result(np.ones(2), np.ones(2)).dtype
    (dtype(bfloat16), dtype('float64'))
    """
    like_dtype = getattr(like, "dtype", None)
    if like_dtype is FLOAT32_NP:
        return out
    if like_dtype == BFLOAT16_NP and getattr(out, "dtype", None) == np.float32:
        return out.astype(BFLOAT16_NP)
    return out


def float32_for_bfloat16(forward):
    """Decorate an op's ``forward(self, x, ...)``: a bfloat16 ``x`` is computed in float32 and the result rounded to
    bfloat16 once, as PyTorch's CPU kernels accumulate (NumPy would add bfloat16 numbers in bfloat16, whose 8 bits
    of mantissa lose a long sum).

    >>> class Total:
    ...     @float32_for_bfloat16
    ...     def forward(self, x):
    ...         return x.sum(keepdims=True)
    >>> Total().forward(np.full(10000, 0.01, BFLOAT16_NP))
    array([100], dtype=bfloat16)
    """

    @functools.wraps(forward)
    def run(self, x, *args, **kwargs):
        dtype = getattr(x, "dtype", None)
        if dtype is FLOAT32_NP or dtype != BFLOAT16_NP:
            return forward(self, x, *args, **kwargs)
        return bfloat16_result(forward(self, x.astype(np.float32), *args, **kwargs), x)

    return run


float16 = dtype("float16", np.float16)
bfloat16 = dtype("bfloat16", BFLOAT16_NP)
float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
int8 = dtype("int8", np.int8)
uint8 = dtype("uint8", np.uint8)
int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32)
int64 = dtype("int64", np.int64)
bool_ = dtype("bool", np.bool_)
# PyTorch 2 has these with few ops of their own: they mainly carry NumPy's unsigned arrays through from_numpy
uint16 = dtype("uint16", np.uint16)
uint32 = dtype("uint32", np.uint32)
uint64 = dtype("uint64", np.uint64)

_BY_NP = {
    d.np: d
    for d in (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, bool_, uint16, uint32, uint64)
}
_BY_NAME = {d.name: d for d in _BY_NP.values()}
_BY_NAME.update(half=float16, float=float32, double=float64, long=int64, int=int32, short=int16)

_default_float = float32


# PyTorch's scalar names of the dtypes, which its type names ('torch.FloatTensor') and dtype errors quote
SCALAR_NAMES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
}


def dtype_of(np_dtype) -> dtype:
    """The trainkit dtype for a NumPy dtype."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        raise TypeError(f"trainkit has no dtype for NumPy's {np_dtype}") from None


def to_dtype(spec) -> dtype:
    """Accepts a trainkit dtype, a NumPy dtype or type, or a name ('float32'), and returns the trainkit dtype."""
    if isinstance(spec, dtype):
        return spec
    if isinstance(spec, str):
        try:
            return _BY_NAME[spec]
        except KeyError:
            raise TypeError(f"unknown dtype name {spec!r}") from None
    if spec is float:
        return _default_float
    if spec is int:
        return int64
    if spec is bool:
        return bool_
    return dtype_of(np.dtype(spec))


class finfo:
    """The limits of a floating dtype, as ``torch.finfo``: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (=
    ``smallest_normal``), ``resolution`` and ``dtype`` (its name); no argument means the default dtype.

    >>> finfo(bfloat16).eps, finfo(bfloat16).bits, finfo(float16).max
    (0.0078125, 16, 65504.0)
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type: dtype | None = None):
        d = _default_float if type is None else to_dtype(type)
        if not d.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'"
            )
        info = ml_dtypes.finfo(d.np) if d is bfloat16 else np.finfo(d.np)
        self.bits, self.dtype = d.itemsize * 8, d.name
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # PyTorch's: a power of ten, not the dtype's own rounding

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        fields = ("resolution", "min", "max", "eps", "smallest_normal", "tiny")
        return "finfo(" + ", ".join(f"{k}={getattr(self, k):g}" for k in fields) + f", dtype={self.dtype})"


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats (float32 unless changed).

    >>> get_default_dtype()
    trainkit.float32
    """
    return _default_float


def set_default_dtype(d) -> None:
    """Change the default floating dtype (float32 or float64), as ``torch.set_default_dtype``."""
    global _default_float
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


# Type promotion as PyTorch does it. Operands come in three priority groups: tensors with dimensions, 0-dim
# tensors, Python numbers. A lower group only matters when it brings a higher category (bool < int < float).
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def result_type(a, b):
    """NumPy dtype of ``op(a, b)`` where each is an ndarray or a Python number, by PyTorch's promotion rules."""
    groups = []
    for v in (a, b):
        if isinstance(v, bool):
            groups.append((2, 0, None))
        elif isinstance(v, int):
            groups.append((2, 1, None))
        elif isinstance(v, float):
            groups.append((2, 2, None))
        else:
            groups.append((0 if v.ndim else 1, _CATEGORY[kind_of(v.dtype)], v.dtype))
    (ga, ca, da), (gb, cb, db) = sorted(groups, key=lambda g: g[0])
    if ga == gb:
        if da is None:
            return _default_np_for(max(ca, cb))
        if ca != cb:  # int with float: the float operand's dtype, not NumPy's wider float64
            return da if ca > cb else db
        if da != db and (da in _WIDE_UNSIGNED or db in _WIDE_UNSIGNED):
            raise RuntimeError(
                f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                f"{da.name} and {db.name}: convert one tensor to the other's dtype first"
            )
        return promote_types(da, db)
    if cb <= ca:
        return da
    if db is not None:  # a 0-dim tensor of a higher category keeps its own dtype
        return db
    return _default_np_for(cb)


def promote_types(a, b):
    """NumPy's ``promote_types`` with bfloat16 as PyTorch promotes it: with float16 it gives float32, with an
    integer or bool the bfloat16.

    >>> promote_types(BFLOAT16_NP, np.dtype(np.float16)), promote_types(BFLOAT16_NP, np.dtype(np.int64))
    (dtype('float32'), dtype(bfloat16))
    """
    if a == b:
        return a
    if a == BFLOAT16_NP or b == BFLOAT16_NP:
        other = b if a == BFLOAT16_NP else a
        if other.kind in "biu":
            return BFLOAT16_NP
        if other == np.float16:
            return np.dtype(np.float32)
    return np.promote_types(a, b)


_WIDE_UNSIGNED = (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


def _default_np_for(category: int):
    return (np.dtype(np.bool_), np.dtype(np.int64), _default_float.np)[category]
