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
FP16_OVERFLOW = 65520.0  # the smallest magnitude FP16's round to nearest even takes past FP16_MAX


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


def fp16_round_away(x: np.ndarray) -> np.ndarray:
    """A float to FP16 as nvdla/sw's runtime converts (umd/external/include/half.h 1.11 as it configures it:
    round to nearest, ties away from zero; denormals kept; overflow to infinity)."""
    x = np.asarray(x, np.float64)
    small = np.abs(x) < 2.0**-14  # FP16 denormals: a multiple of 2**-24
    r = np.where(small, np.copysign(np.floor(np.abs(x) * 2.0**24 + 0.5) * 2.0**-24, x), round_away(x, 11))
    with np.errstate(over="ignore"):
        return r.astype(np.float16)


def fp16_to_fp32(x: np.ndarray) -> np.ndarray:
    """An FP16 operand to SDP's FP32: exact; infinity becomes the largest finite FP32 (FpWidthInc)."""
    r = np.asarray(x, np.float16).astype(np.float32)
    return np.where(np.isinf(r), np.copysign(np.float32(FP32_MAX), r), r).astype(np.float32)


# ---- FP32 addition as SDP's FpAdd does it, and the LUT's FP17 (docs/fp16_lut.md) ----------------------
# The SDP Y-stage LUT interpolates in FP17: 1 sign, 6 exponent (bias 31) and 10 mantissa bits, no
# denormals and no infinity (cmod/hls/sdp/sdp.h L168-172); every operation rounds to nearest even on 11
# significant bits, flushes results below 2**-30 to a signed zero and saturates at 2**32 - 2**21
# (cmod/hls/include/nvdla_float.h FpMul<6,10> L1283, FpAdd<6,10> L1657).

FP17_MAX = 2.0**32 - 2.0**21
FP17_MIN = 2.0**-30  # the smallest normal FP17
FP17_BITS = 11  # significant bits


def _rne(v: np.ndarray, bits: int) -> np.ndarray:
    """v (float64) rounded to `bits` significant bits, ties to even."""
    m, e = np.frexp(v)
    return np.ldexp(np.rint(np.ldexp(m, bits)), e - bits)


def _zero_sign(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NVDLA's sign of an exact-zero sum: the operand of larger magnitude's, the first one's on a tie
    (so x + (-x) is +0 for x > 0 and -0 for x < 0, where IEEE gives +0)."""
    return np.where(r == 0, np.copysign(0.0, np.where(np.abs(a) >= np.abs(b), a, b)), r)


def fp32_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SDP's FP32 addition (FpAdd<8,23>, nvdla_float.h L974): IEEE round to nearest even, overflow to the
    largest finite FP32, results below 2**-126 to zero, and the zero sign of _zero_sign. Returns float64
    holding FP32 values."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return _zero_sign(to_fp32(a + b).astype(np.float64), a, b)


def _sat17(r: np.ndarray) -> np.ndarray:
    return np.where(np.abs(r) >= 2.0**32, np.copysign(FP17_MAX, r), r)


def fp17_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FpAdd<6,10>: a + b on 11 significant bits (the float64 sum, then one rounding: innocuous, 53 >=
    2 * 11 + 2), below 2**-30 to zero, saturating, zero sign as _zero_sign."""
    v = a + b
    return _zero_sign(np.where(np.abs(v) < FP17_MIN, 0.0, _sat17(_rne(v, FP17_BITS))), a, b)


def fp17_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FpMul<6,10>: the exact product rounded to 11 significant bits; zero (sign a ^ b) when an operand
    is zero, when the operands' exponents sum below -31 or the rounded product is below 2**-30."""
    ea = np.frexp(np.where(a == 0, 1.0, a))[1] - 1  # floor(log2 |a|)
    eb = np.frexp(np.where(b == 0, 1.0, b))[1] - 1
    r = _sat17(_rne(a * b, FP17_BITS))  # a * b is exact in float64 (11 x 11 bits)
    tiny = (a == 0) | (b == 0) | (ea + eb < -31) | (np.abs(r) < FP17_MIN)
    return np.where(tiny, np.copysign(0.0, np.copysign(1.0, a) * np.copysign(1.0, b)), r)


def fp32_to_fp17(v: np.ndarray) -> np.ndarray:
    """Fp32ToFp17 (FpWidthDec, no denormals): nearest even on 11 bits, saturating; below 2**-30 zero,
    except 2**-30 - 2**-41 <= |v| < 2**-30, which rounds up to 2**-30 (at denormal resolution)."""
    v = np.asarray(v, np.float64)
    av = np.abs(v)
    small = np.where(av >= FP17_MIN - 2.0**-41, np.copysign(FP17_MIN, v), np.copysign(0.0, v))
    return np.where(av < FP17_MIN, small, _sat17(_rne(v, FP17_BITS)))


def fp16_to_fp17(h: np.ndarray) -> np.ndarray:
    """Fp16ToFp17: exact (FP16 denormals become FP17 normals); infinity the largest FP17."""
    v = np.asarray(h, np.float16).astype(np.float64)
    return np.where(np.isinf(v), np.copysign(FP17_MAX, v), v)


def fraction_to_fp17(f: np.ndarray, bits: int) -> np.ndarray:
    """FpFractionToFloat<bits,6,10>: the integer fraction f / 2**bits at 11 significant bits (nearest
    even), zero below 2**-30."""
    f = np.asarray(f, np.float64)
    return np.where(f < 2.0 ** (bits - 30), 0.0, _rne(f / 2.0**bits, FP17_BITS))


def fp16_codes(values: np.ndarray) -> np.ndarray:
    """FP16 values as the signed 16-bit register codes that hold their bit patterns."""
    return np.asarray(values, np.float16).view(np.int16).astype(np.int64)


def fp16_from_codes(codes: np.ndarray) -> np.ndarray:
    """The FP16 values whose bit patterns 16-bit register codes (signed or not) hold."""
    return (np.asarray(codes, np.int64) & 0xFFFF).astype(np.uint16).view(np.float16)


def fp32_code(value: float) -> int:
    """An FP32 value as the signed 32-bit register code holding its bit pattern."""
    return int(np.array([value], np.float32).view(np.int32)[0])


def fp32_from_code(code: int) -> float:
    """The FP32 value a 32-bit register code (signed or not) holds."""
    return float(np.array([code & 0xFFFFFFFF], np.uint32).view(np.float32)[0])
