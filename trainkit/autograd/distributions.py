"""PyTorch's CPU samplers on its MT19937 engine: the same seed gives the same numbers as ``torch`` on the CPU.

Each function takes the engine (``trainkit.autograd.mt19937.MT19937``) and returns a NumPy array, drawing exactly
the 32- and 64-bit words PyTorch draws, in its order, and transforming them as PyTorch does:

- uniform in [from, to): float32 takes the low 24 bits of a 32-bit draw, float64 the low 53 bits of a 64-bit draw,
  x = bits * 2^-digits, then x * (to - from) + from in the tensor's precision;
- integers in [low, high): draw % (high - low) + low, with a 64-bit draw once the range reaches 2^28;
- normal, 16 or more contiguous elements: all uniforms first, then Box-Muller on blocks of 16 (u1 = 1 - x[j],
  u2 = x[j + 8], r = sqrt(-2 log u1), x[j] = r cos(2 pi u2), x[j + 8] = r sin(2 pi u2)); a length that is not a
  multiple of 16 draws 16 fresh uniforms for the last 16 elements, overwriting the tail of the last block. Float32
  uses the vectorised float32 functions of ``vector_math`` on x86, float64 the C library's (through ``math``);
- normal, fewer than 16 elements (or not contiguous): one float64 Box-Muller pair per two elements from two 64-bit
  uniforms, r = sqrt(-2 log(1 - u2)), theta = 2 pi u1, r cos theta first; r sin theta is kept in the engine and
  returned by the next such draw, also by a later call;
- bernoulli with a scalar p: a float64 uniform per element, u < p (dropout draws its mask so, with p = 1 - rate);
  with a tensor of p: a uniform in p's precision, u < p;
- exponential: -1 / lambda * log1p(-u) with a float64 uniform;
- randperm: a Fisher-Yates shuffle, element i swapped with i + draw % (n - i).
"""

from __future__ import annotations

import math
import platform

import numpy as np

from .backend import kind_of
from .mt19937 import MT19937
from .vector_math import cephes_log, cephes_sincos, fma32

__all__ = [
    "bernoulli_scalar",
    "bernoulli_tensor",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "normal",
    "random_bits",
    "random_from_to",
    "randperm",
    "uniform",
    "uniform_bits",
]

# PyTorch runs its float32 normal fill with AVX2 polynomials on x86 CPUs, with the C library elsewhere
VECTORISED_NORMAL = platform.machine().lower() in ("x86_64", "amd64", "x86", "i686")
_BLOCK = 16
# ranges from 2^28 up take a 64-bit draw, so that ``draw % range`` stays close to uniform (PyTorch 2.13's cut)
_WIDE_RANGE = 1 << 28
_F32_MASK = np.uint32((1 << 24) - 1)
# float64 Box-Muller and exponentials call the C library's log, log1p, sin and cos, as PyTorch does: Python's math
# module is that library, so these give PyTorch's last bits (NumPy's own float64 functions differ in a few)
_LOG, _LOG1P, _SIN, _COS = (np.frompyfunc(f, 1, 1) for f in (math.log, math.log1p, math.sin, math.cos))
_TAN = np.frompyfunc(math.tan, 1, 1)
# the C library gives -inf and inf where Python's math raises (a uniform of exactly 0, an exponent past 709.78)
_EXP = np.frompyfunc(lambda x: math.exp(x) if x < 709.8 else math.inf, 1, 1)
_LOG0 = np.frompyfunc(lambda x: math.log(x) if x > 0 else -math.inf, 1, 1)


def _libm(fn, x: np.ndarray) -> np.ndarray:
    return np.asarray(fn(x), dtype=np.float64)


def _fma64(a: np.ndarray, b: float, c: float) -> np.ndarray:
    """a * b + c in float64 rounded once, as the fused multiply-add of PyTorch's compiled kernel; x86's long double
    (64-bit mantissa) holds the product closely enough that the final rounding agrees (plain float64 elsewhere)."""
    if b == 1 and c == 0:
        return a
    if np.finfo(np.longdouble).nmant >= 63:
        return (a.astype(np.longdouble) * np.longdouble(b) + np.longdouble(c)).astype(np.float64)
    return a * b + c


_F64_MASK = np.uint64((1 << 53) - 1)


def uniform_bits(engine: MT19937, n: int, dtype) -> np.ndarray:
    """``n`` uniform numbers in [0, 1) of ``dtype`` (float32: 24 bits of a 32-bit draw; else 53 of a 64-bit one)."""
    if np.dtype(dtype) == np.float32:
        return (engine.random32(n) & _F32_MASK).astype(np.float32) * np.float32(2.0**-24)
    return (engine.random64(n) & _F64_MASK).astype(np.float64) * (2.0**-53)


def uniform(engine: MT19937, shape: tuple, dtype, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``uniform_(low, high)``: values in [low, high) of ``dtype`` (float16 and bfloat16 are drawn as float32)."""
    work = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    x = uniform_bits(engine, math.prod(shape), work)
    lo, hi = work(low), work(high)
    if not (lo == 0 and hi == 1):
        x = fma32(x, hi - lo, lo) if work is np.float32 else x * (hi - lo) + lo
    return x.reshape(shape).astype(dtype, copy=False)


def _box_muller_pairs(engine: MT19937, n: int, mean: float, std: float) -> np.ndarray:
    """``n`` float64 normals one at a time, as ``at::normal_distribution<double>``, with the engine's cache."""
    out = np.empty(n, dtype=np.float64)
    start = 0
    if n and engine.next_double_normal is not None:
        out[0] = engine.next_double_normal
        engine.next_double_normal = None
        start = 1
    pairs = (n - start + 1) // 2
    u = uniform_bits(engine, 2 * pairs, np.float64).reshape(pairs, 2)
    radius = np.sqrt(-2.0 * _libm(_LOG1P, -u[:, 1]))
    theta = 2.0 * math.pi * u[:, 0]
    both = np.stack([radius * _libm(_COS, theta), radius * _libm(_SIN, theta)], axis=1).reshape(-1)
    if (n - start) % 2:
        engine.next_double_normal = float(both[-1])
        both = both[:-1]
    out[start:] = both
    return _fma64(out, std, mean)


def _fill_blocks32(x: np.ndarray, mean: float, std: float) -> np.ndarray:
    """Box-Muller on float32 blocks of 16 uniforms, with the vectorised float32 functions where PyTorch has them."""
    blocks = x.reshape(-1, _BLOCK)
    u1 = np.float32(1) - blocks[:, :8]
    u2 = blocks[:, 8:]
    theta = np.float32(2.0 * math.pi) * u2
    if VECTORISED_NORMAL:
        radius = np.sqrt(np.float32(-2) * cephes_log(u1))
        sin, cos = cephes_sincos(theta)
    else:
        radius = np.sqrt(np.float32(-2) * np.log(u1))
        sin, cos = np.sin(theta), np.cos(theta)
    both = np.concatenate([radius * cos, radius * sin], axis=1).reshape(-1)
    return fma32(both, np.float32(std), np.float32(mean))


def _fill_blocks64(x: np.ndarray, mean: float, std: float) -> np.ndarray:
    blocks = x.reshape(-1, _BLOCK)
    radius = np.sqrt(-2.0 * _libm(_LOG, 1.0 - blocks[:, :8]))
    theta = 2.0 * math.pi * blocks[:, 8:]
    both = np.concatenate([radius * _libm(_COS, theta), radius * _libm(_SIN, theta)], axis=1)
    return _fma64(both, std, mean).reshape(-1)


def normal(engine: MT19937, shape: tuple, dtype, mean: float = 0.0, std: float = 1.0, contiguous: bool = True):
    """``normal_(mean, std)`` of a tensor of ``shape`` and ``dtype``, by PyTorch's path for its size."""
    n = math.prod(shape)
    dt = np.dtype(dtype)
    if n < _BLOCK or not contiguous or kind_of(dt) != "f":
        return _box_muller_pairs(engine, n, mean, std).astype(dt).reshape(shape)
    work = np.float64 if dt == np.float64 else np.float32
    fill = _fill_blocks64 if work is np.float64 else _fill_blocks32
    x = uniform_bits(engine, n, work)
    whole = n - n % _BLOCK
    x[:whole] = fill(x[:whole], mean, std)
    if n % _BLOCK:
        x[n - _BLOCK :] = fill(uniform_bits(engine, _BLOCK, work), mean, std)
    return x.astype(dt, copy=False).reshape(shape)


def random_from_to(engine: MT19937, shape: tuple, dtype, low: int, high: int) -> np.ndarray:
    """``random_(low, high)``: integers in [low, high) stored as ``dtype`` (``randint``)."""
    span = int(high) - int(low)
    n = math.prod(shape)
    dt = np.dtype(dtype)
    wide = span >= _WIDE_RANGE
    draws = engine.random64(n) if wide else engine.random32(n).astype(np.uint64)
    values = (draws % np.uint64(span)).astype(np.int64) + np.int64(low)
    return values.astype(dt).reshape(shape)


def random_bits(engine: MT19937, shape: tuple, dtype) -> np.ndarray:
    """``random_()`` without bounds: [0, 2^63) for int64, [0, 2^mantissa] for floats, [0, max] for other
    integers, 0 or 1 for bool."""
    n = math.prod(shape)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return (engine.random32(n) & np.uint32(1)).astype(bool).reshape(shape)
    if dt == np.int64:
        return (engine.random64(n) % np.uint64(1 << 63)).astype(np.int64).reshape(shape)
    if dt == np.float64:
        return (engine.random64(n) % np.uint64((1 << 53) + 1)).astype(dt).reshape(shape)
    if kind_of(dt) == "f":
        digits = 24 if dt == np.float32 else 11
        return (engine.random32(n).astype(np.uint64) % np.uint64((1 << digits) + 1)).astype(dt).reshape(shape)
    top = int(np.iinfo(dt).max) + 1
    return (engine.random32(n).astype(np.uint64) % np.uint64(top)).astype(dt).reshape(shape)


def randperm(engine: MT19937, n: int) -> np.ndarray:
    """A permutation of 0 .. n-1 by PyTorch's Fisher-Yates shuffle (int64)."""
    perm = list(range(n))
    if n < (2**32 - 1) // 20:
        offsets = (engine.random32(n - 1).astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)).tolist()
        for i, z in enumerate(offsets):
            j = i + z
            perm[i], perm[j] = perm[j], perm[i]
    else:  # a 64-bit draw per element, so that the remainder stays unbiased
        picks = (engine.random64(n) % np.arange(1, n + 1, dtype=np.uint64)).tolist()
        for i, z in enumerate(picks):
            perm[i] = perm[z]
            perm[z] = i
    return np.array(perm, dtype=np.int64)


def bernoulli_scalar(engine: MT19937, shape: tuple, p: float) -> np.ndarray:
    """``bernoulli_(p)`` with one probability: True where a float64 uniform falls below ``p``."""
    return (uniform_bits(engine, math.prod(shape), np.float64) < float(p)).reshape(shape)


def bernoulli_tensor(engine: MT19937, p: np.ndarray) -> np.ndarray:
    """``bernoulli_(p)`` with a probability per element (``p`` already of the output's shape): a uniform in p's
    precision (float64 for float64 p, else float32) below p."""
    work = np.float64 if p.dtype == np.float64 else np.float32
    u = uniform_bits(engine, p.size, work).reshape(p.shape)
    return u < p.astype(work, copy=False)


def exponential(engine: MT19937, shape: tuple, dtype, lambd: float = 1.0) -> np.ndarray:
    """``exponential_(lambd)``: -1 / lambd * log1p(-u) with a float64 uniform, stored as ``dtype``."""
    u = uniform_bits(engine, math.prod(shape), np.float64)
    return ((-1.0 / lambd) * _libm(_LOG1P, -u)).astype(dtype).reshape(shape)


def cauchy(engine: MT19937, shape: tuple, dtype, median: float = 0.0, sigma: float = 1.0) -> np.ndarray:
    """``cauchy_(median, sigma)``: median + sigma * tan(pi * (u - 1/2)) with a float64 uniform, stored as ``dtype``."""
    u = uniform_bits(engine, math.prod(shape), np.float64)
    return (median + sigma * _libm(_TAN, math.pi * (u - 0.5))).astype(dtype).reshape(shape)


def log_normal(engine: MT19937, shape: tuple, dtype, mean: float = 1.0, std: float = 2.0) -> np.ndarray:
    """``log_normal_(mean, std)``: exp of a float64 normal (one Box-Muller number at a time, as PyTorch's serial
    kernel draws them), stored as ``dtype``."""
    normals = _box_muller_pairs(engine, math.prod(shape), mean, std)
    return _libm(_EXP, normals).astype(dtype).reshape(shape)


def geometric(engine: MT19937, shape: tuple, dtype, p: float) -> np.ndarray:
    """``geometric_(p)``: the number of Bernoulli(p) trials up to the first success, ceil(log(u) / log1p(-p)) with a
    float64 uniform, stored as ``dtype``."""
    u = uniform_bits(engine, math.prod(shape), np.float64)
    return np.ceil(_libm(_LOG0, u) / math.log1p(-p)).astype(dtype).reshape(shape)
