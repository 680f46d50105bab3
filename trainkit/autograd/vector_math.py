"""Float32 logarithm, sine and cosine as PyTorch's vectorised normal sampler computes them on x86 CPUs.

PyTorch's CPU ``normal_`` of a float32 tensor of 16 or more elements turns uniform numbers into normal ones eight
lanes at a time with Cephes-style polynomials (Pommier's AVX ``log256_ps`` and ``sincos256_ps``), not with the C
library. To give the same float32 numbers bit for bit, these functions run the same steps in the same order, each a
float32 operation in NumPy, with a fused multiply-add wherever PyTorch's compiled kernel has one (found by comparing
with ``torch.randn`` over millions of samples: every Horner step, ``y*z + e*q1`` with ``y*z`` fused, and so on).

log(x), x > 0: write x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then with f = m - 1
    log(x) = f - f^2/2 + f^3 P(f) + e * (q2 + q1)         (q2 + q1 = log 2 split in two, P of degree 8)
sin and cos, x >= 0: j = the even integer nearest above x * 4/pi, r = x - j * pi/4 (pi/4 in three parts, so that the
    reduction is exact), then cos(r) = 1 - r^2/2 + r^4 C(r^2), sin(r) = r + r^3 S(r^2), swapped and signed by j's
    octant.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cephes_log", "cephes_sincos", "fma32"]

f32 = np.float32
_SQRTHF = f32(0.707106781186547524)
_LOG_P = [
    f32(v)
    for v in (
        7.0376836292e-2,
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    )
]
_LOG_Q1 = f32(-2.12194440e-4)
_LOG_Q2 = f32(0.693359375)
_MIN_NORMAL = np.array([0x00800000], dtype=np.int32).view(np.float32)[0]
_MANTISSA_BITS = np.int32(~0x7F800000)
_HALF_BITS = np.int32(0x3F000000)

_DP1 = f32(-0.78515625)
_DP2 = f32(-2.4187564849853515625e-4)
_DP3 = f32(-3.77489497744594108e-8)
_SIN_P = (f32(-1.9515295891e-4), f32(8.3321608736e-3), f32(-1.6666654611e-1))
_COS_P = (f32(2.443315711809948e-005), f32(-1.388731625493765e-003), f32(4.166664568298827e-002))
_FOUR_OVER_PI = f32(1.27323954473516)
_SIGN = np.int32(-0x80000000)


def fma32(a, b, c, out: np.ndarray | None = None) -> np.ndarray:
    """a * b + c of float32 values with one rounding, as the fused multiply-add the compiler makes of PyTorch's
    steps: the float32 product is exact in float64, so only the sum rounds (twice, float64 then float32, which
    differs from one rounding only on ties, about once in 2^29). ``out``: a float32 array to write into.

    >>> float(fma32(np.float32(3), np.float32(2), np.float32(1)))
    7.0
    """
    wide = np.multiply(a, b, dtype=np.float64)
    wide += c
    if out is None:
        return wide.astype(np.float32)
    np.copyto(out, wide, casting="same_kind")
    return out


def cephes_log(x: np.ndarray) -> np.ndarray:
    """Natural logarithm of positive float32 values, rounded as PyTorch's AVX2 ``log256_ps`` rounds it.

    >>> float(cephes_log(np.array([1.0], dtype=np.float32))[0])
    0.0
    """
    invalid = x <= 0
    x = np.maximum(x, _MIN_NORMAL)
    bits = x.view(np.int32)
    exponent = (bits.view(np.uint32) >> np.uint32(23)).astype(np.int32) - np.int32(127)
    x = ((bits & _MANTISSA_BITS) | _HALF_BITS).view(np.float32)  # the mantissa, in [0.5, 1)
    e = exponent.astype(np.float32) + f32(1)
    below = x < _SQRTHF
    tmp = np.where(below, x, f32(0))
    x = x - f32(1)
    e = e - below.astype(np.float32)
    x = x + tmp
    z = x * x
    y = np.full_like(x, _LOG_P[0])
    for p in _LOG_P[1:]:
        fma32(y, x, p, out=y)
    y = y * x
    y = fma32(y, z, e * _LOG_Q1)
    y = fma32(-z, f32(0.5), y)
    x = x + y
    x = fma32(e, _LOG_Q2, x)
    return np.where(invalid, f32(np.nan), x)


def cephes_sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sin x, cos x) of non-negative float32 values, rounded as PyTorch's AVX2 ``sincos256_ps`` rounds them.

    >>> s, c = cephes_sincos(np.array([0.0], dtype=np.float32))
    >>> float(s[0]), float(c[0])
    (0.0, 1.0)
    """
    x = np.abs(x)
    j = (x * _FOUR_OVER_PI).astype(np.int32)  # truncation, as cvttps
    j = (j + np.int32(1)) & np.int32(~1)
    y = j.astype(np.float32)
    sin_sign = (j & np.int32(4)) << np.int32(29)
    cos_sign = (~(j - np.int32(2)) & np.int32(4)) << np.int32(29)
    sine_poly = (j & np.int32(2)) == 0
    x = fma32(y, _DP1, x)
    x = fma32(y, _DP2, x)
    x = fma32(y, _DP3, x)
    z = x * x
    c = fma32(_COS_P[0], z, _COS_P[1])
    fma32(c, z, _COS_P[2], out=c)
    c = c * z
    c = fma32(c, z, -(z * f32(0.5)))
    c = c + f32(1)
    s = fma32(_SIN_P[0], z, _SIN_P[1])
    fma32(s, z, _SIN_P[2], out=s)
    s = s * z
    s = fma32(s, x, x)
    sin = np.where(sine_poly, s, c)
    cos = np.where(sine_poly, c, s)
    sin = (sin.view(np.int32) ^ sin_sign).view(np.float32)
    cos = (cos.view(np.int32) ^ cos_sign).view(np.float32)
    return sin, cos
