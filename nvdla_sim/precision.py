"""Precisions and the integer rounding/saturation primitives shared by every functional model."""

from __future__ import annotations

import enum

import numpy as np


class Precision(enum.Enum):
    """Datapath precision of a hardware layer (NVDLA v1: int8, int16, fp16)."""

    INT8 = "int8"
    INT16 = "int16"
    FP16 = "fp16"

    @property
    def bytes(self) -> int:
        """Bytes per element in memory and CBUF."""
        return 1 if self is Precision.INT8 else 2

    @property
    def is_float(self) -> bool:
        return self is Precision.FP16

    @property
    def numpy_dtype(self) -> type[np.generic]:
        return {Precision.INT8: np.int8, Precision.INT16: np.int16, Precision.FP16: np.float16}[self]

    @property
    def int_range(self) -> tuple[int, int]:
        """Inclusive (min, max) of the integer type; FP16 reports the finite float16 range."""
        if self is Precision.FP16:
            return (-65504, 65504)
        bits = 8 * self.bytes
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)

    @classmethod
    def parse(cls, text: str) -> Precision:
        try:
            return cls(text.lower())
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown precision {text!r}; valid: {valid}") from None


def shift_round(x: np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """Arithmetic right shift by `shift` bits, rounding half away from zero (NVDLA convertor rounding).

    `shift` may be 0 (identity) or negative (left shift), at most 63. Works on int64 arrays for |x| < 2**63
    (the rounding bit is read, not added: |x| + 2**(shift-1) would overflow for a product of two INT32
    extremes, 2**62, over 2**63).
    """
    x = np.asarray(x, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if np.all(s == 0):
        return x.copy()
    left = np.left_shift(x, np.maximum(-s, 0))
    sr = np.maximum(s, 0)
    ax = np.abs(x)
    half_bit = np.where(sr > 0, np.right_shift(ax, np.maximum(sr - 1, 0)) & 1, 0)  # floor(|x| / 2**s + 1/2)
    mag = np.right_shift(ax, sr) + half_bit
    right = np.where(x < 0, -mag, mag)
    return np.where(s > 0, right, left)


def saturate(x: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """Clamp to a signed `bits`-wide range; return (clamped int64 array, number of saturated elements)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    x = np.asarray(x, dtype=np.int64)
    count = int(np.count_nonzero((x < lo) | (x > hi)))
    return np.clip(x, lo, hi), count
