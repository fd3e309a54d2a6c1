"""NVDLA's floating-point formats and roundings (nv_full's FP16 mode), bit-exact, in numpy.

What the hardware does, as read in nvdla/hw branch nvdlav1 (docs/validation.md section 5g has the
citations and the measurements on its RTL):
- CMAC splits an FP16 operand into a 3-bit block exponent (e >> 2) and a mantissa of up to 15 bits,
  (1024 + f) << (e & 3), or 2f for a denormal: value = mantissa * 2**(4 * block - 25), exactly
  (NV_NVDLA_CMAC_CORE_active.v). An exponent of 31 with f = 0 is the finite 65536, not infinity.
- CACC accumulates in a 48-bit float (8-bit exponent, 40-bit two's-complement mantissa, s1.38) and
  rounds after every addition to the nearest, ties away from zero (NV_NVDLA_CACC_CALC_fp_48b.v
  `point5 = guard & (~sign | sticky)`): 39 significant bits, `add_round_away`. It hands SDP an FP32,
  rounded from those 39 bits to 24 on the guard bit alone (ties away from zero again).
- SDP computes in FP32 with round-to-nearest-even, flushes denormal results to signed zero and saturates
  overflow to the largest finite FP32 (cmod/hls/include/nvdla_float.h FpAdd, FpMul, SetToInf), and
  converts FP32 to FP16 with round-to-nearest-even (denormals kept) saturating at 65504, not infinity
  (Fp32ToFp16).
NaN payloads are not tracked: a NaN comes out as numpy's (the RTL keeps the first NaN's fraction).
"""

from __future__ import annotations

import numpy as np

FP32_MAX = float(np.finfo(np.float32).max)
FP32_MIN_NORMAL = float(np.finfo(np.float32).tiny)  # 2**-126
FP16_MAX = 65504.0


def fp16_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CMAC's view of FP16 operands: (sign, block exponent e >> 2, mantissa, zero, nan) as integer arrays;
    the value is (-1)**sign * mantissa * 2**(4 * block - 25) (a zero, +0 or -0, takes no part in a sum)."""
    bits = np.asarray(x, np.float16).view(np.uint16).astype(np.int64)
    sign, e, f = bits >> 15, (bits >> 10) & 31, bits & 1023
    mant = np.where(e != 0, 1024 + f, 2 * f) << (e & 3)
    return sign, e >> 2, mant, (e == 0) & (f == 0), (e == 31) & (f != 0)


def _rounded(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (exact in float64) at `bits` significant bits: (rounded half away from zero, truncated toward
    zero, whether x lies exactly half-way)."""
    m, ex = np.frexp(x)  # x = m * 2**ex, 0.5 <= |m| < 1
    scaled = np.ldexp(np.abs(m), bits)  # in [2**(bits-1), 2**bits): exact
    low = np.floor(scaled)
    away = np.copysign(np.ldexp(np.floor(scaled + 0.5), ex - bits), x)
    return away, np.copysign(np.ldexp(low, ex - bits), x), (scaled - low) == 0.5


def round_away(x: np.ndarray, bits: int) -> np.ndarray:
    """x rounded to `bits` significant bits, ties away from zero (x exact in float64, bits <= 51)."""
    return _rounded(np.asarray(x, np.float64), bits)[0]


def add_round_away(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """a + b rounded to `bits` significant bits, ties away from zero, exactly: the float64 sum s and its
    error e (s + e = a + b, Knuth's TwoSum) decide the one case float64 alone cannot, s on a tie."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    away, toward_zero, tie = _rounded(s, bits)
    # on a tie, an error toward zero leaves the exact sum below the half: round toward zero
    return np.where(tie & (err != 0) & (np.sign(err) != np.sign(s)), toward_zero, away)


def to_fp32(x: np.ndarray) -> np.ndarray:
    """An exact float64 result to SDP's FP32: round to nearest even, denormals to signed zero, overflow
    to the largest finite FP32 (numpy's float64 -> float32 cast rounds to nearest even; the double
    rounding through float64 is innocuous for +, - and x of FP32 operands, 53 >= 2 * 24 + 2)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        r = x.astype(np.float32)
    r = np.where(np.isinf(r) & ~np.isinf(x), np.copysign(np.float32(FP32_MAX), x).astype(np.float32), r)
    return np.where(np.abs(r) < FP32_MIN_NORMAL, np.copysign(np.float32(0), r), r).astype(np.float32)


def fp32_to_fp16(x: np.ndarray) -> np.ndarray:
    """SDP's output convertor in FP16 mode: round to nearest even (denormals kept), overflow to +-65504."""
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore"):
        r = x.astype(np.float16)
    sat = np.isinf(r) & ~np.isnan(x)
    return np.where(sat, np.copysign(np.float16(FP16_MAX), x).astype(np.float16), r).astype(np.float16)


def fp16_to_fp32(x: np.ndarray) -> np.ndarray:
    """An FP16 operand to SDP's FP32: exact; infinity becomes the largest finite FP32 (FpWidthInc)."""
    r = np.asarray(x, np.float16).astype(np.float32)
    return np.where(np.isinf(r), np.copysign(np.float32(FP32_MAX), r), r).astype(np.float32)
