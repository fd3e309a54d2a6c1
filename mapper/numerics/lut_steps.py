"""The numbers SDP is programmed with for the steps a build with a LUT runs on NVDLA (issue 31, pure numpy).

The mapper lowers (lowering/rules.py) the softmax of INT8 scores on a build with SDP's LUT and
element-wise unit as: QK^T's SDP adds the causal mask (a per-element operand) and writes INT8 scores;
an SDP pass looks up exp in the LUT (no row-max subtraction: the INT8 codes bound the scores); a 1x1
convolution with one all-ones kernel sums each row; an SDP pass looks up 1/sum; PV multiplies the
unnormalised exps by V; the 1/sum is broadcast over each row (a 1x1 convolution with all-ones kernels)
and an SDP pass multiplies PV's output by it (element-wise). GELU runs in the LUT of the SDP behind the
FFN's first convolution. Every intermediate is written at the layer's precision, INT8 here.

What the tables hold, from calibrated scales (accuracy.py calibrates them on the float model's values
at the same steps):

* a table reads integer inputs: LE (linear, 64 intervals) over the input range, LO (linear, 256
  intervals) over its central quarter, LO winning where both hit (`sdp_table`; for INT8 codes both cover
  -128..128 and LO holds one entry per code, so the table is exact up to its 16-bit entries);
* entries are the function's real values times an entry scale putting the largest at 2**14 (headroom
  for interpolation), and the output convertor takes them to the output's INT8 scale;
* exp reads the scores' INT8 codes: entry(c) = exp(c * s_score), but the code -128 holds 0: it is the
  masked scores' code (the mask operand drives them far below the INT8 range and the convertor
  saturates them there), so a real score that quantized to -128 (below -127.5 steps, outside the
  calibrated range) counts as masked too;
* 1/sum reads the row sums' INT8 codes (non-negative): entry(c) = 1 / (max(c, 1/2) * s_sum), a sum
  that rounded to code 0 taken as half a step;
* GELU reads the pre-activation scaled by X2 (the per-channel requantization multipliers) to
  `GELU_INPUT_CODES` steps over its calibrated range, 16 times finer than INT8 (LE steps of 64 codes,
  LO steps of 4 over the central quarter), so the table's interpolation adds little to the INT8 output's
  rounding; beyond the range the end intervals' slopes extrapolate (each with the shift that holds it:
  GELU's upper end rises 8 entries per input step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from nvdla_mapper.numerics.quant import Granularity, multiplier_to_scale_shift, requant_sdp
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.precision import Precision
from nvdla_sim.units.lut import ENTRY_MAX, ENTRY_MIN, LE_ENTRIES, LO_ENTRIES, IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.sdp import Convertor, EwStage, SdpParams

LUT_ENTRY_PEAK = 1 << 14  # table entries span +-2**14 (16-bit entries with headroom for interpolation)
FLOW_SHIFT = 15  # the under/overflow slopes' shift: the largest of the 5-bit signed field (-16..15)
GELU_FINER = 16  # GELU's table input steps: 16 times finer than the output precision's over the same range
GELU_INPUT_CODES = GELU_FINER * 128  # at INT8: the pre-activation's calibrated range in +-2048 steps
MASK_CODE = -128  # the INT8 code masked scores saturate to
# the mask operand: INT8 -128 from E-RDMA through its convertor (scale 2**15 - 1), added by QK^T's SDP
MASK_OPERAND, MASK_CVT = -128, Convertor(0, (1 << 15) - 1, 0)


def sdp_table(
    func: Callable[[np.ndarray], np.ndarray],
    lo: int,
    hi: int,
    out_scale: float,
    *,
    slope_shift: int | None = FLOW_SHIFT,
) -> LutParams:
    """A hybrid SDP LUT over integer inputs [lo, hi): LE (linear, 64 intervals) over the range and LO
    (linear, 256 intervals) over its central quarter, both centred on it (LE's power-of-two span may
    exceed it), LO winning hybrid hits; entries round(func(x) * out_scale) saturated to 16 bits; the end
    slopes continue the outer intervals, as a 16-bit scale over `slope_shift` (None: the largest shift
    in 0..15 whose scale holds the slope, so a steep end is not clipped to one entry per input step)."""
    span = max(hi - lo, 2)
    le_shift = max(0, math.ceil(math.log2(span / (LE_ENTRIES - 1))))
    lo_shift = max(0, math.ceil(math.log2(span / 4 / (LO_ENTRIES - 1))))
    centre = (lo + hi) // 2
    xs = [
        centre - ((LE_ENTRIES - 1) << le_shift) // 2 + (np.arange(LE_ENTRIES, dtype=np.int64) << le_shift),
        centre - ((LO_ENTRIES - 1) << lo_shift) // 2 + (np.arange(LO_ENTRIES, dtype=np.int64) << lo_shift),
    ]
    tables = []
    for x, shift in zip(xs, (le_shift, lo_shift), strict=True):
        e = np.clip(np.round(func(x) * out_scale), ENTRY_MIN, ENTRY_MAX).astype(np.int64)
        step = 1 << shift

        def slope(d: int, step: int = step) -> tuple[int, int]:
            sh = slope_shift
            if sh is None:
                sh = next((k for k in range(FLOW_SHIFT, -1, -1) if abs(d / step) * 2**k < 2**15 - 1), 0)
            return int(np.clip(round(d / step * 2**sh), -(2**15), 2**15 - 1)), sh

        (under, u_shift), (over, o_shift) = slope(int(e[1] - e[0])), slope(int(e[-1] - e[-2]))
        tables.append(LutTable(e, IndexMode.LINEAR, int(x[0]), shift, under, u_shift, over, o_shift))
    return LutParams(tables[0], tables[1], priority=Table.LO, uflow_priority=Table.LE, oflow_priority=Table.LE)


def _to_output(entry_unit: float, out_scale: float) -> Convertor:
    """The output convertor taking values of `entry_unit` per step to `out_scale` per step; a ratio beyond
    its INT16 scale (shift >= 0) cannot be programmed (UnsupportedError)."""
    try:
        scale, shift = multiplier_to_scale_shift(entry_unit / out_scale)
    except ValueError as e:
        raise UnsupportedError(f"SDP output convertor: {e}") from None
    return Convertor(0, scale, shift)


def _lut_pass(func: Callable[[np.ndarray], np.ndarray], out_scale: float) -> SdpParams:
    """A standalone SDP pass over INT8 codes: func's table (codes -128..128, one LO entry per code), its
    entries at LUT_ENTRY_PEAK for the largest value at a code, converted to INT8 at `out_scale`."""
    codes = np.arange(-128, 128, dtype=np.int64)
    peak = float(np.max(np.abs(func(codes))))
    if not peak > 0 or not math.isfinite(peak):
        raise ValueError(f"LUT function has no finite non-zero value over the INT8 codes (peak {peak})")
    lut = sdp_table(func, -128, 128, LUT_ENTRY_PEAK / peak)
    return SdpParams(y=EwStage(lut=lut), cvt=_to_output(peak / LUT_ENTRY_PEAK, out_scale))


@lru_cache(maxsize=1024)  # pure: one table per scales, not one per head (dynamic scales: bounded)
def exp_pass(score_scale: float, exp_scale: float) -> SdpParams:
    """Softmax's exp over INT8 scores of `score_scale` (real score per code, 1/sqrt(d) included), written
    as INT8 at `exp_scale`; the mask's code -128 looks up 0."""
    return _lut_pass(lambda c: np.where(c <= MASK_CODE, 0.0, np.exp(c * score_scale)), exp_scale)


@lru_cache(maxsize=1024)  # pure: one table per scales, not one per head (dynamic scales: bounded)
def recip_pass(sum_scale: float, recip_scale: float) -> SdpParams:
    """Softmax's 1/sum over INT8 row sums of `sum_scale`, written as INT8 at `recip_scale`."""
    return _lut_pass(lambda c: 1.0 / (np.maximum(c, 0.5) * sum_scale), recip_scale)


def requant_pass(in_scale: float, out_scale: float) -> SdpParams:
    """An SDP that only requantizes (the output convertor): values at `in_scale` per step to INT8 at
    `out_scale` (a row sum's accumulator; a broadcast's copy at 1)."""
    return SdpParams(cvt=_to_output(in_scale, out_scale))


def normalize_pass(context_scale: float, recip_scale: float, out_scale: float, recip: np.ndarray) -> SdpParams:
    """The softmax's normalisation of PV's output (INT8 at `context_scale`): Y's multiplier by the
    broadcast 1/sum `recip` (INT8 at `recip_scale`, per element from E-RDMA, no truncation: an INT8
    product fits), converted to INT8 at `out_scale`."""
    return SdpParams(y=EwStage(mul_operand=recip), cvt=_to_output(context_scale * recip_scale, out_scale))


def mask_operand(mask: np.ndarray) -> EwStage:
    """QK^T's SDP Y stage adding the causal mask: MASK_OPERAND where `mask` is set, through its convertor."""
    return EwStage(alu_operand=np.where(mask, MASK_OPERAND, 0).astype(np.int64), alu_cvt=MASK_CVT)


@dataclass(frozen=True)
class GeluTable:
    """GELU in the LUT behind a convolution: X2 takes the accumulator to `pre_scale` per step
    (GELU_INPUT_CODES steps over the calibrated pre-activation range), the table holds func there, the
    convertor writes INT8 at the output scale."""

    pre_scale: float
    lut: LutParams
    entry_unit: float


@lru_cache(maxsize=1024)  # pure: one table per scales, not one per head (dynamic scales: bounded)
def gelu_table(
    func: Callable[[np.ndarray], np.ndarray], pre_amax: float, *, input_codes: int = GELU_INPUT_CODES
) -> GeluTable:
    """func's table over +-`input_codes` steps of the calibrated pre-activation range `pre_amax`."""
    pre = pre_amax / input_codes
    codes = np.linspace(-input_codes, input_codes, 4097).round().astype(np.int64)
    peak = max(float(np.max(np.abs(func(codes * pre)))), 1e-12)
    lut = sdp_table(lambda c: func(c * pre), -input_codes, input_codes, LUT_ENTRY_PEAK / peak, slope_shift=None)
    return GeluTable(pre, lut, peak / LUT_ENTRY_PEAK)


def table_pass(table: GeluTable, out_scale: float, *, out_precision: Precision = Precision.INT8) -> SdpParams:
    """The table alone over values already at its input steps, converted to `out_precision` at `out_scale`."""
    return SdpParams(y=EwStage(lut=table.lut), cvt=_to_output(table.entry_unit, out_scale), out_precision=out_precision)


def activated_conv_sdp(
    s_x: float,
    s_w: np.ndarray,
    out_scale: float,
    table: GeluTable,
    *,
    bias: np.ndarray | None,
    granularity: Granularity = Granularity.PER_CHANNEL,
    out_precision: Precision = Precision.INT8,
) -> SdpParams:
    """The SDP behind a convolution with a LUT activation: X1 the bias, X2 the requantization to the
    table's input steps (per channel, or one register multiplier for weights scaled per tensor), Y the
    table, the convertor to `out_precision` at `out_scale` (s_x: the accumulator's activation scale, CACC's
    truncation included)."""
    x = requant_sdp(s_x, s_w, table.pre_scale, bias=bias, granularity=Granularity.PER_CHANNEL)
    x2 = x.x2
    if granularity is Granularity.PER_TENSOR:  # one weight scale: every kernel's multiplier is the same
        x2 = replace(x2, mul_operand=int(np.asarray(x2.mul_operand).reshape(-1)[0]))
    return SdpParams(
        x1=x.x1, x2=x2, y=EwStage(lut=table.lut), cvt=_to_output(table.entry_unit, out_scale),
        out_precision=out_precision,
    )  # fmt: skip
