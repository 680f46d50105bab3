"""Ways to make tensors: from data, filled, ranges, random; each takes ``dtype``, ``device`` and ``requires_grad``.

Without ``device`` they use the default device (``set_default_device``, or a ``with trainkit.device(...)`` block;
the CPU when neither is in effect). The ``*_like`` ones take the device of their input instead, as in PyTorch.
"""

from __future__ import annotations

import functools

import numpy as np

from .backend import (
    CPU,
    device,
    device_state,
    get_default_dtype,
    is_array,
    kind_of,
    module_for,
    on_device,
    to_device,
    to_dtype,
    xp_of,
)
from .random import generator_for
from .scalar_fit import stored_value
from .tensor import Tensor, flatten_sizes

_device_cls = device


def _dev(spec):
    """A device from a spec; None means the default device. The name ``device`` is taken by the keyword arguments."""
    if spec is None:
        spec = device_state.current
        return CPU if spec is None else spec
    return _device_cls(spec)


def _finish(array, dev, requires_grad: bool) -> Tensor:
    t = Tensor._make(array if dev is None else to_device(array, _dev(dev)))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _nested(data, dtypes: set, depth: int = 0):
    """``data`` with tensors replaced by their arrays (on the CPU), so NumPy can read nested sequences of them;
    ``dtypes`` collects the element types PyTorch infers from: a tensor's or NumPy scalar's own dtype, the default
    float dtype for a Python float, int64 for an int, bool for a bool."""
    if isinstance(data, Tensor):
        if depth and data._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        dtypes.add(data._data.dtype)
        return np.asarray(to_device(data._data, CPU))
    if isinstance(data, (list, tuple)):
        return [_nested(d, dtypes, depth + 1) for d in data]
    if isinstance(data, (np.generic, np.ndarray)):
        dtypes.add(data.dtype)
    elif isinstance(data, bool):
        dtypes.add(_BOOL)
    elif isinstance(data, int):
        dtypes.add(_INT64)
    elif isinstance(data, float):
        dtypes.add(get_default_dtype().np)
    elif isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    elif data is None:
        raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
    return data


_BOOL, _INT64 = np.dtype(np.bool_), np.dtype(np.int64)


def _inferred(dtypes: set):
    """PyTorch's dtype for data of these element types: floats win over ints over bools, then NumPy promotion."""
    for kinds in ("cf", "iu", "b"):
        found = [d for d in dtypes if d.kind in kinds]
        if found:
            return functools.reduce(np.promote_types, found)
    return get_default_dtype().np  # no elements: an empty float tensor


def _big_int(data) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_big_int(d) for d in data)
    return isinstance(data, int) and not -(2**63) <= data < 2**63


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor that copies ``data`` (a number, nested sequence, NumPy array or tensor).

    Python floats become the default dtype (float32), ints int64, bools bool; NumPy arrays keep their dtype.

    >>> tensor([1, 2]).dtype, tensor([1.0, 2]).dtype
    (trainkit.int64, trainkit.float32)
    """
    if device is None:
        device = device_state.current
    if isinstance(data, Tensor):
        array = data._data.copy()
        dev = device if device is not None else data.device
    elif is_array(data):
        array = data.copy()
        dev = device
    else:
        dtypes: set = set()
        try:
            array = np.array(_nested(data, dtypes))
        except OverflowError:
            raise ValueError("Overflow when unpacking long long") from None
        if array.dtype.kind in "uO" and _big_int(data):
            raise ValueError("Overflow when unpacking long long")
        if kind_of(array.dtype) not in "biuf":
            raise TypeError(f"can't convert {type(data).__name__} of {array.dtype} to a tensor")
        if not dtypes and array.size:  # other iterables NumPy reads (range, ...): by the kind NumPy found
            dtypes.add({"f": get_default_dtype().np, "b": _BOOL}.get(array.dtype.kind, _INT64))
        # a given dtype takes the Python numbers as they are (a float64 tensor keeps 1e300, not float32's inf)
        target = to_dtype(dtype).np if dtype is not None else _inferred(dtypes)
        if target.kind in "iu" and array.size:
            _check_range(array, target)
        if array.dtype != target:
            with np.errstate(over="ignore"):  # 1e40 into float32 is inf, as PyTorch makes it, without a warning
                array = array.astype(target)
        dev = device
    if dtype is not None:
        array = array.astype(to_dtype(dtype).np)
    return _finish(array, dev, requires_grad)


def _check_range(array: np.ndarray, target: np.dtype) -> None:
    """PyTorch's checked conversion of Python numbers into an integer dtype: a number outside its range (a float
    as it is, 255.5 not in uint8; an unsigned dtype takes negative integers down to minus its largest value, -1
    is 255) is refused rather than wrapped."""
    info = np.iinfo(target)
    if kind_of(array.dtype) == "f":
        fits = not np.isnan(array).any() and array.min() >= info.min and array.max() <= info.max
    elif array.dtype.kind in "iu":
        low = -int(info.max) if target.kind == "u" else int(info.min)
        fits = int(array.min()) >= low and int(array.max()) <= int(info.max)
    else:
        return
    if not fits:
        raise RuntimeError(
            f"value cannot be converted to type {target.name} without overflow: the data holds a number outside "
            f"{target.name}'s range [{info.min}, {info.max}]"
        )


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with a tensor or array when dtype and device already match.

    >>> t = ones(2)
    >>> as_tensor(t) is t, as_tensor([1, 2])
    (True, tensor([1, 2]))
    """
    if device is None:
        device = device_state.current
    if (
        isinstance(data, Tensor)
        and (dtype is None or to_dtype(dtype).np == data._data.dtype)
        and (device is None or _device_cls(device) == data.device)
    ):
        return data
    if isinstance(data, np.ndarray) and device in (None, "cpu") and (dtype is None or to_dtype(dtype).np == data.dtype):
        return Tensor._make(data)
    if isinstance(data, Tensor):  # as PyTorch: a conversion that stays in the graph (ToCopyBackward0)
        return data.to(device=data.device if device is None else device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (changes show through both ways), whatever the default device.

    >>> a = np.zeros(2, dtype=np.float32)
    >>> t = from_numpy(a); a[0] = 5; t
    tensor([5., 0.])
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return Tensor._make(array)


def _check_sizes(shape: tuple) -> tuple:
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    return shape


def _make_filled(shape, fill, dtype, dev, requires_grad) -> Tensor:
    _check_sizes(shape)
    dev_ = _dev(dev)
    dt = get_default_dtype().np if dtype is None else to_dtype(dtype).np
    with on_device(dev_):
        array = module_for(dev_).full(shape, fill, dtype=dt)
    return _finish(array, None, requires_grad)


def _sizes(sizes: tuple, size) -> tuple:
    """The shape from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if size is not None:
        if sizes:
            raise TypeError("got multiple values for argument 'size'")
        sizes = (size,)
    return flatten_sizes(sizes)


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))``.

    >>> zeros(2, dtype='int64')
    tensor([0, 0])
    """
    return _make_filled(_sizes(sizes, size), 0, dtype, device, requires_grad)


def ones(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones.

    >>> ones((1, 2))
    tensor([[1., 1.]])
    """
    return _make_filled(_sizes(sizes, size), 1, dtype, device, requires_grad)


def empty(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor whose values are not set (here: zeros, so runs stay repeatable).

    >>> empty(2, 3).shape
    trainkit.Size([2, 3])
    """
    return _make_filled(_sizes(sizes, size), 0, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; its dtype follows the value when not given (as in PyTorch).

    >>> full((2,), 7)
    tensor([7, 7])
    """
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = "bool"
        elif isinstance(fill_value, (int, np.integer)):
            dtype = "int64"
    if dtype is not None and not isinstance(fill_value, bool):
        fill_value = stored_value(fill_value, to_dtype(dtype).np)  # refused outside the dtype, as torch
    return _make_filled(flatten_sizes((size,)), fill_value, dtype, device, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The identity matrix (``n`` x ``m``).

    >>> eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    """
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None and m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dev = _dev(device)
    dt = get_default_dtype().np if dtype is None else to_dtype(dtype).np
    with on_device(dev):
        array = module_for(dev).eye(n, m, dtype=dt)
    return _finish(array, None, requires_grad)


def _number(v):
    """A Python number from a number or a one-element tensor."""
    return v.item() if isinstance(v, Tensor) else v


def arange(start=0, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from ``start`` up to (not including) ``end`` by ``step``; int64 unless a float is involved.

    >>> arange(3)
    tensor([0, 1, 2])
    """
    start, end, step = _number(start), _number(end), _number(step)
    if end is None:
        start, end = 0, start
    if dtype is None:
        floating = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dtype = get_default_dtype() if floating else "int64"
    if not all(np.isfinite(float(v)) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if to_dtype(dtype).np.kind == "b":
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    dev = _dev(device)
    with on_device(dev):
        array = module_for(dev).arange(start, end, step).astype(to_dtype(dtype).np)
    return _finish(array, None, requires_grad)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive.

    >>> linspace(0, 1, 3)
    tensor([0.0000, 0.5000, 1.0000])
    """
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dev = _dev(device)
    dt = get_default_dtype().np if dtype is None else to_dtype(dtype).np
    if dt.kind == "b":
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    with on_device(dev):
        array = module_for(dev).linspace(start, end, steps).astype(dt)
    return _finish(array, None, requires_grad)


_SCALAR_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _random(draw, size, generator, dtype, device, requires_grad, kernel: str) -> Tensor:
    dev = _dev(device)
    dt = get_default_dtype().np if dtype is None else to_dtype(dtype).np
    if kind_of(dt) != "f":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_SCALAR_NAMES[dt.name]}'")
    with on_device(dev):
        array = draw(generator_for(dev, generator).rng, flatten_sizes(size), dt)
    return _finish(array, None, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform random values in [0, 1), from the seeded stream of ``device``.

    >>> rand(2, 3).shape
    trainkit.Size([2, 3])
    """
    return _random(
        lambda rng, s, dt: rng.random(s, dtype=dt),
        size,
        generator,
        dtype,
        device,
        requires_grad,
        "check_uniform_bounds",
    )


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal random values, from the seeded stream of ``device``.

    >>> randn(4).dtype
    trainkit.float32
    """
    return _random(
        lambda rng, s, dt: rng.standard_normal(s, dtype=dt),
        size,
        generator,
        dtype,
        device,
        requires_grad,
        "normal_kernel_cpu",
    )


def randint(
    low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Random integers in [low, high): ``randint(10, (3,))`` or ``randint(2, 10, (3,))``.

    >>> bool(((randint(2, 5, (10,)) >= 2) & (randint(2, 5, (10,)) < 5)).all())
    True
    """
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        raise TypeError("randint() needs high and size")
    if low >= high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}: pass "
            f"randint(low, high, size) with low < high"
        )
    dev = _dev(device)
    dt = np.dtype(np.int64) if dtype is None else to_dtype(dtype).np
    if dt.kind == "b" and high > 2:
        raise RuntimeError("to - 1 is out of bounds for bool")
    with on_device(dev):
        array = generator_for(dev, generator).rng.integers(low, high, size=flatten_sizes((size,))).astype(dt)
    return _finish(array, None, requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1.

    >>> randperm(4).sort().values
    tensor([0, 1, 2, 3])
    """
    dev = _dev(device)
    dt = np.dtype(np.int64) if dtype is None else to_dtype(dtype).np
    if dt.kind == "b":
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    with on_device(dev):
        rng = generator_for(dev, generator).rng
        # CuPy's Generator has no permutation: the order that sorts n uniform draws is one
        array = (rng.permutation(n) if dev.type == "cpu" else rng.random(n).argsort()).astype(dt)
    return _finish(array, None, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, device=None, requires_grad=False):
    """Normal draws, as ``torch.normal``: ``normal(mean_tensor, std_tensor)`` (shapes broadcast),
    ``normal(mean_tensor, std)``, ``normal(mean, std_tensor)`` or ``normal(mean, std, size)``. The draws are
    PyTorch's: standard normals scaled by std, then mean added (with a number std, drawn at that scale).

    >>> import trainkit
    >>> normal(2.0, 0.5, (3,), generator=trainkit.Generator().manual_seed(0))
    tensor([2.7705, 1.8533, 0.9106])
    """
    mean_t, std_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mean_t and not std_t:
        if size is None:
            raise TypeError(
                "normal() received an invalid combination of arguments: give a size with number mean and std"
            )
        result = empty(size, dtype=dtype, device=device) if out is None else out
        result.normal_(mean, std, generator=generator)
        result.requires_grad_(requires_grad)
        return result
    if std_t and std._data.size and bool(xp_of(std._data).any(std._data < 0)):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not std_t and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    like = mean if mean_t else std
    shape = np.broadcast_shapes(tuple(mean.shape) if mean_t else (), tuple(std.shape) if std_t else ())
    noise = empty(shape, dtype=like.dtype, device=like.device)
    if std_t:
        noise.normal_(0.0, 1.0, generator=generator)
        result = noise * std + (mean if mean_t else full((), mean, dtype=like.dtype, device=like.device))
    else:
        noise.normal_(0.0, std, generator=generator)
        result = noise + mean
    if out is not None:
        out._data = result._data.copy()
        out._version_counter[0] += 1
        return out
    return result


def _like(input: Tensor, dtype, device):
    return (input.dtype if dtype is None else dtype), (input.device if device is None else device)


def zeros_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``input``'s shape, dtype and device (the default device does not apply).

    >>> zeros_like(ones(2, dtype='int64'))
    tensor([0, 0])
    """
    dt, dev = _like(input, dtype, device)
    return zeros(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def ones_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones of ``input``'s shape, dtype and device.

    >>> ones_like(zeros(2))
    tensor([1., 1.])
    """
    dt, dev = _like(input, dtype, device)
    return ones(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def empty_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An unset tensor (zeros here) of ``input``'s shape, dtype and device.

    >>> empty_like(zeros(2, 3)).shape
    trainkit.Size([2, 3])
    """
    dt, dev = _like(input, dtype, device)
    return empty(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def full_like(input: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` in ``input``'s shape, dtype and device.

    >>> full_like(zeros(2), 3)
    tensor([3., 3.])
    """
    dt, dev = _like(input, dtype, device)
    return full(input.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def rand_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False, *, generator=None) -> Tensor:
    """Uniform random values in [0, 1) of ``input``'s shape, dtype and device.

    >>> rand_like(zeros(2, 3)).shape
    trainkit.Size([2, 3])
    """
    dt, dev = _like(input, dtype, device)
    return rand(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randn_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False, *, generator=None) -> Tensor:
    """Standard normal random values of ``input``'s shape, dtype and device.

    >>> randn_like(zeros(2, 3)).shape
    trainkit.Size([2, 3])
    """
    dt, dev = _like(input, dtype, device)
    return randn(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randint_like(
    input: Tensor,
    low: int = 0,
    high: int | None = None,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad=False,
) -> Tensor:
    """Random integers in [low, high) of ``input``'s shape, dtype and device: ``randint_like(x, 10)`` or
    ``randint_like(x, 2, 10)``.

    >>> randint_like(zeros(3, dtype='int32'), 2, 5).dtype
    trainkit.int32
    """
    if high is None:
        low, high = 0, low
    dt, dev = _like(input, dtype, device)
    return randint(
        low, high, tuple(input.shape), generator=generator, dtype=dt, device=dev, requires_grad=requires_grad
    )


def new_tensor(input: Tensor, data, dtype=None, requires_grad: bool = False) -> Tensor:
    """``input.new_tensor(data)``: a copy of ``data`` with ``input``'s dtype and device unless given.

    >>> import trainkit
    >>> trainkit.zeros(1, dtype=trainkit.float64).new_tensor([1, 2])
    tensor([1., 2.], dtype=trainkit.float64)
    """
    return tensor(data, dtype=dtype or input.dtype, device=input.device, requires_grad=requires_grad)
