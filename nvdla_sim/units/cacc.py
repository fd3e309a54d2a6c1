"""CACC: convolution accumulator (functional and cost).

Accumulates partial sums of a channel op in INT34 (int8) / INT48 (int16) with saturation, then
rounds right by CLIP_TRUNCATE and saturates to INT32 for SDP (unit_description.rst CACC; D_CLIP_CFG,
D_OUT_SATURATION). FP16 accumulates CMAC's block-float values in a 48-bit float rounded to 39 significant
bits, ties away from zero, after every addition, and hands SDP an FP32 rounded from it on its guard bit
(nvdla/hw branch nvdlav1 NV_NVDLA_CACC_CALC_fp_48b.v; nvdla_sim.floats); no truncation or saturation.
Output drains to SDP at NVDLA_SDP_MAX_THROUGHPUT elements/cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvdla_sim.floats import add_round_away, round_away
from nvdla_sim.precision import Precision, saturate, shift_round

ACC_BITS = {Precision.INT8: 34, Precision.INT16: 48}
FP_ACC_BITS = 39  # FP16 mode: significant bits of the 40-bit two's-complement accumulator mantissa (s1.38)
OUT_BITS = 32


@dataclass(frozen=True)
class CaccResult:
    values: np.ndarray  # int32 (integer modes) or float32 (fp16 mode)
    acc_saturations: int  # additions that hit the accumulator range
    out_saturations: int  # outputs clamped to INT32 (D_OUT_SATURATION)
    rounding_ties: int = 0  # outputs exactly half-way before the CLIP_TRUNCATE shift (rounded away from 0)


def accumulate(
    partials: list[np.ndarray] | np.ndarray, precision: Precision, *, truncate: int = 0, acc_bits: int | None = None
) -> CaccResult:
    """Accumulate partial sums in CSC order (list or leading axis), then round/saturate for SDP.
    `acc_bits`: the accumulator width (NVDLA's INT34 / INT48 unless a narrower build is asked for)."""
    if not 0 <= truncate <= 31:
        raise ValueError(f"CACC clip_truncate must be in 0..31 (5-bit field), not {truncate}")
    if precision.is_float:
        total = np.zeros_like(np.asarray(partials[0], np.float64))
        for p in partials:
            total = add_round_away(total, p, FP_ACC_BITS)
        return CaccResult(round_away(total, 24).astype(np.float32), 0, 0)
    bits = acc_bits or ACC_BITS[precision]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    acc = np.zeros_like(np.asarray(partials[0], np.int64))
    acc_sat = 0
    for p in partials:
        s = acc + p
        acc_sat += int(np.count_nonzero((s < lo) | (s > hi)))
        acc = np.clip(s, lo, hi)
    rounded = shift_round(acc, truncate)
    out, out_sat = saturate(rounded, OUT_BITS)
    ties = int(np.count_nonzero((np.abs(acc) & ((1 << truncate) - 1)) == (1 << truncate) // 2)) if truncate else 0
    return CaccResult(out.astype(np.int32), acc_sat, out_sat, ties)
