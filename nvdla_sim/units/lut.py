"""SDP/CDP lookup table: two tables with linear interpolation and linear extrapolation (functional).

Follows doc/hw/v1/ias/lut-programming.rst: an "LE" table of 65 entries (linear or exponent index) and an
"LO" table of 257 entries (linear index), 16-bit entries, linear interpolation between neighbours,
out-of-range values extrapolated from the end entry with a programmable slope (scale, shift); priority
bits pick the table when both hit or both miss.

The integer path is the hardware's, as NVIDIA's bit-accurate C model computes it for CDP
(hw@master:cmod/cdp/NV_NVDLA_cdp.cpp lookup_lut_int8) and as checked on the nv_small RTL's cdp_* trace
tests: a linear index is (x - start) >> index_select (a negative select shifts left and has no fraction);
an exponent index is floor(log2(x - origin)) - index_offset; x at or below the start is an underflow and
an index past the last entry an overflow; the fraction is scaled to 16 bits (truncating when the index
step is wider than 2**16) and the interpolation rounded half away from zero; extrapolation multiplies the
distance from the table end by the slope scale and divides by 2**shift (a 5-bit signed shift) with
rounding; every result saturates to 16 bits. When one table hits and the other misses, the hit wins; both
under (over) flowing pick the underflow (overflow) priority; otherwise the hybrid priority.

SDP's Y-stage LUT (LutPath.SDP) indexes and picks the same way but keeps more bits, as NVIDIA's HLS
source of the RTL computes it (hw@master:cmod/hls/sdp/sdp_y_idx.cpp, sdp_y_inp.cpp, and the table
read and flow operands in cmod/hls_wrapper/sdp_hls_wrapper.cpp sdp_y): a 35-bit fraction
(yLutFracSize) taken from the bits below the index, an interpolation y0 (2**35 - f) + y1 f rounded half
away from zero over 2**35 and saturated to 32 bits (not 16); an out-of-range value is
y0 + ((x - (offset + bias)) * scale >> shift) with the start (underflow) or end (overflow) register as
offset, bias 2**index_offset for an underflow of an exponent LE table with a positive index offset (0
otherwise), the shift a 5-bit signed value (negative shifts left), saturated to 32 bits. A linear index
for a negative index select is shifted left and has no fraction.

In FP16 processing precision (float inputs; SDP only) the same registers hold other formats, and the
tables hold register codes either way: entries and slope scales are FP16 bit patterns, START and END
FP32 ones, the shifts are ignored, and the interpolation runs in NVDLA's FP17 (_lookup_fp; bit by bit
in docs/fp16_lut.md, from NVIDIA's HLS source and checked on nv_full's RTL). fp16_table and
fp16_function_lut build such tables from a function.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvdla_sim.floats import (
    fp16_codes,
    fp16_from_codes,
    fp16_to_fp17,
    fp17_add,
    fp17_mul,
    fp32_add,
    fp32_code,
    fp32_from_code,
    fp32_to_fp17,
    fraction_to_fp17,
)
from nvdla_sim.precision import shift_round

LE_ENTRIES = 65
LO_ENTRIES = 257
ENTRY_MIN, ENTRY_MAX = -(1 << 15), (1 << 15) - 1


class IndexMode(enum.Enum):
    LINEAR = "linear"
    EXPONENT = "exponent"


class LutPath(enum.Enum):
    """Which unit's interpolation datapath evaluates the tables (their index and pick logic is shared)."""

    CDP = "cdp"  # 16-bit fraction, 16-bit result (cmod NV_NVDLA_cdp.cpp lookup_lut_int8)
    SDP = "sdp"  # 35-bit fraction, 32-bit result (cmod hls/sdp/sdp_y_idx.cpp, sdp_y_inp.cpp)


class Table(enum.Enum):
    LE = "le"
    LO = "lo"


@dataclass(frozen=True, eq=False)
class LutTable:
    """One table, as register codes. LINEAR: entry i sits at start + i * 2**index_shift. EXPONENT: entry i
    at origin + 2**(start + i). In FP16 mode entries and scales are FP16 codes and start (LINEAR), origin
    and end FP32 codes (fp16_table)."""

    entries: np.ndarray
    mode: IndexMode
    start: int
    index_shift: int = 0
    uflow_scale: int = 0  # slope below the table: y = e[0] + (x - x0) * scale >> shift
    uflow_shift: int = 0
    oflow_scale: int = 0  # slope above the table: y = e[-1] + (x - xN) * scale >> shift
    oflow_shift: int = 0
    origin: int = 0  # EXPONENT: the x the exponent is taken from (LE_START register)
    end: int | None = None  # the x overflow extrapolates from (LE/LO_END register); None: the last entry's x

    def __post_init__(self) -> None:
        e = np.asarray(self.entries)
        if e.ndim != 1 or len(e) < 2:
            raise ValueError("LUT table needs a 1-D array of at least 2 entries")
        if e.min() < ENTRY_MIN or e.max() > ENTRY_MAX:
            raise ValueError("LUT entries must fit in 16 bits (-32768..32767)")
        if self.mode is IndexMode.EXPONENT and not -128 <= self.start <= 127:
            raise ValueError(f"exponent-mode LUT start (index offset) must fit 8 bits signed, not {self.start}")
        if not -128 <= self.index_shift <= 127:
            raise ValueError(
                f"LUT index_shift must be in -128..127 (8-bit signed index select), not {self.index_shift}"
            )
        for name in ("uflow_shift", "oflow_shift"):
            if not -16 <= getattr(self, name) <= 31:
                raise ValueError(f"LUT {name} must be in -16..31, not {getattr(self, name)}")

    @property
    def first_x(self) -> int:
        if self.mode is IndexMode.LINEAR:
            return self.start
        return self.origin + (1 << self.start if self.start >= 0 else 0)

    @property
    def last_x(self) -> int:
        if self.end is not None:
            return self.end
        n = len(self.entries) - 1
        if self.mode is IndexMode.LINEAR:
            return self.start + (n << self.index_shift if self.index_shift >= 0 else n >> -self.index_shift)
        return self.origin + (1 << min(max(self.start + n, 0), 62))  # the END register is 38 bits anyway


@dataclass(frozen=True, eq=False)
class LutParams:
    le: LutTable
    lo: LutTable
    priority: Table = Table.LO  # hybrid hit: which table wins
    uflow_priority: Table = Table.LO
    oflow_priority: Table = Table.LO

    def __post_init__(self) -> None:
        if len(self.le.entries) != LE_ENTRIES:
            raise ValueError(f"LE table must have {LE_ENTRIES} entries, not {len(self.le.entries)}")
        if len(self.lo.entries) != LO_ENTRIES:
            raise ValueError(f"LO table must have {LO_ENTRIES} entries, not {len(self.lo.entries)}")
        if self.lo.mode is not IndexMode.LINEAR:
            raise ValueError("the LO table supports linear indexing only")


@dataclass(frozen=True)
class LutStats:
    le_hits: int
    lo_hits: int
    hybrid: int
    underflow: int
    overflow: int


def _lookup(t: LutTable, x: np.ndarray, is_float: bool, path: LutPath) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (value, hit, under) for every x; value already extrapolated outside the table."""
    if is_float:
        if path is not LutPath.SDP:
            raise ValueError("CDP's FP16 LUT is not modelled (LRN runs INT8 and INT16)")
        return _lookup_fp(t, x)
    return _lookup_sdp(t, x) if path is LutPath.SDP else _lookup_int(t, x)


INTERP_BITS = 16  # the interpolation fraction's width
EXTRAP_BITS = 56  # saturation of the scaled extrapolation term (cmod INTERP_INTERMIDIATE_BITS_INT8)
OUT_BITS = 16


def _sat(v: np.ndarray, bits: int) -> np.ndarray:
    """Saturate to a `bits`-wide two's-complement value."""
    lim = 1 << (bits - 1)
    return np.clip(v, -lim, lim - 1)


def _shift_div(v: np.ndarray, shift: int) -> np.ndarray:
    """v / 2**shift rounded half away from zero (a negative shift multiplies), saturated to EXTRAP_BITS."""
    return _sat(shift_round(v, shift) if shift >= 0 else np.left_shift(v, -shift), EXTRAP_BITS)


def _lookup_int(t: LutTable, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    e = np.asarray(t.entries, np.int64)
    n = len(e) - 1
    if t.mode is IndexMode.LINEAR:
        rel = x - t.start
        if t.index_shift >= 0:
            sel = min(t.index_shift, 62)
            idx = np.right_shift(rel, sel)
            frac = rel - np.left_shift(idx, sel)
            frac16 = _scale_frac(frac, sel)
        else:
            idx = np.left_shift(rel, min(-t.index_shift, 20))
            frac16 = np.zeros_like(rel)
        under = (rel <= 0) | (idx < 0)
    else:
        rel = x - t.origin
        safe = np.where(rel > 0, rel, 1)
        k = _floor_log2(safe)
        idx = k - t.start
        frac16 = _scale_frac(safe - np.left_shift(np.int64(1), k), k)
        under = (rel <= 0) | (idx < 0)
    over = ~under & (idx >= n)
    hit = ~under & ~over
    ci = np.clip(idx, 0, n - 1).astype(np.int64)
    interp = e[ci] + _shift_div((e[ci + 1] - e[ci]) * frac16, INTERP_BITS)
    under_v = e[0] + _shift_div((x - t.first_x) * t.uflow_scale, t.uflow_shift)
    over_v = e[n] + _shift_div((x - t.last_x) * t.oflow_scale, t.oflow_shift)
    val = np.where(under, under_v, np.where(over, over_v, interp))
    return _sat(val, OUT_BITS), hit, under


SDP_FRAC_BITS = 35  # yLutFracSize (cmod hls/sdp/sdp.h)
SDP_OUT_BITS = 32  # yInpOutSize


def _lookup_sdp(t: LutTable, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SDP Y-stage LUT on 32-bit integers (sdp_y_idx.cpp, sdp_y_inp.cpp)."""
    e = np.asarray(t.entries, np.int64)
    n = len(e) - 1
    if t.mode is IndexMode.LINEAR:
        under = x <= t.start
        u = np.where(under, 0, x - t.start)  # below 2**32: x and the start are 32-bit
        sel = t.index_shift
        if sel >= 0:
            idx = np.right_shift(u, min(sel, 63))
            f = u & ((1 << min(sel, 63)) - 1)
            frac = (
                np.left_shift(f, SDP_FRAC_BITS - sel)
                if sel <= SDP_FRAC_BITS
                else np.right_shift(f, sel - SDP_FRAC_BITS)
            )
        else:  # a negative select shifts left (u << 20 already passes every table's end)
            idx = np.left_shift(u, min(-sel, 20))
            frac = np.zeros_like(u)
    else:
        rel = x - t.origin
        under0 = rel <= 0
        safe = np.where(under0, 1, rel)
        k = _floor_log2(safe)
        idx = k - t.start
        under = under0 | (idx < 0)
        frac = np.left_shift(safe - np.left_shift(np.int64(1), k), SDP_FRAC_BITS - k)
    over = ~under & (idx >= n)
    hit = ~under & ~over
    ci = np.clip(idx, 0, n - 1).astype(np.int64)
    frac = np.where(hit, frac, 0)
    interp = shift_round(e[ci] * ((1 << SDP_FRAC_BITS) - frac) + e[ci + 1] * frac, SDP_FRAC_BITS)
    # out of range: y0 + (x - (offset + bias)) * scale >> shift; the flow offset is the START register
    # (underflow) or END (overflow); bias 2**index_offset for an exponent table's underflow
    bias = (1 << (t.start & 31)) if t.mode is IndexMode.EXPONENT and t.start > 0 else 0  # (uint32_t)1 << offset
    under_x = (t.origin if t.mode is IndexMode.EXPONENT else t.start) + bias
    under_v = e[0] + _flow_term((x - under_x) * t.uflow_scale, t.uflow_shift)
    over_v = e[n] + _flow_term((x - t.last_x) * t.oflow_scale, t.oflow_shift)
    val = np.where(under, under_v, np.where(over, over_v, interp))
    return _sat(val, SDP_OUT_BITS), hit, under


def _flow_term(v: np.ndarray, shift: int) -> np.ndarray:
    """IntSignedShiftRight<50, 5, 32>: v / 2**shift rounded half away from zero (a negative shift
    multiplies), saturated to 32 bits. Before a left shift |v| is clipped to 2**46, so that it stays inside
    int64 (anything that large saturates either way)."""
    if shift < 0:
        v = np.clip(v, -(1 << 46), 1 << 46)
    return _sat(shift_round(v, shift), SDP_OUT_BITS)


def _lookup_fp(t: LutTable, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SDP Y-stage LUT in FP16 processing precision (docs/fp16_lut.md; sdp_y_idx.cpp, sdp_y_inp.cpp,
    nvdla_float.h), x float64 holding FP32 values. The registers are read as the hardware reads them in
    this mode: entries and slope scales as FP16 bit patterns, START and END as FP32 ones, the index
    selects and offset as integers, the slope shifts not at all. x - START is an FP32 subtraction; an
    underflow is a difference not above zero (or, exponent-indexed, an exponent below the offset); a
    linear index is the difference times 2**-select (a negative select still leaves a fraction), an
    exponent index its FP32 exponent less the offset; the fraction is 35 bits, truncated. A hit is
    y0 (1 - f) + y1 f with each weight, product and the sum rounded to FP17; a miss is
    y0 + (x - (offset + bias)) * scale in FP17, offset START (underflow) or END (overflow), bias
    2**offset for an exponent table's underflow (any offset, unlike INT mode)."""
    if t.end is None:
        raise ValueError("an FP16 LUT table needs its END register (LutTable.end)")
    e = fp16_to_fp17(fp16_from_codes(t.entries))
    n = len(e) - 1
    exponent = t.mode is IndexMode.EXPONENT
    start = fp32_from_code(t.origin if exponent else t.start)
    d = fp32_add(x, -np.float64(start))
    under = ~(d > 0)  # negative, +-0 or NaN
    if exponent:
        if t.start <= -127:
            raise ValueError(f"an FP16 exponent table's index offset must be above -127 (its 2**offset), not {t.start}")
        m, ex = np.frexp(np.where(under, 1.0, d))
        k = ex - 1  # the FP32 difference's unbiased exponent
        under = under | (k < t.start)
        idx = (k - t.start).astype(np.float64)
        frac = (2.0 * m - 1.0) * 2.0**SDP_FRAC_BITS  # the 23-bit mantissa << 12: exact
    else:
        pos = np.ldexp(np.where(under, 0.0, d), -t.index_shift)  # exact
        idx = np.floor(pos)
        frac = np.floor((pos - idx) * 2.0**SDP_FRAC_BITS)
    over = ~under & (idx >= n)
    hit = ~under & ~over
    ci = np.clip(idx, 0, n - 1).astype(np.int64)
    f = np.where(hit, frac, 0.0)
    w0 = np.where(f == 0, 1.0, fraction_to_fp17(2.0**SDP_FRAC_BITS - f, SDP_FRAC_BITS))
    interp = fp17_add(fp17_mul(w0, e[ci]), fp17_mul(fraction_to_fp17(f, SDP_FRAC_BITS), e[ci + 1]))
    scales = fp16_to_fp17(fp16_from_codes(np.array([t.uflow_scale, t.oflow_scale])))
    bias = 2.0**t.start if exponent else 0.0
    under_at = fp32_add(np.float64(start), np.float64(bias))
    over_at = fp32_add(np.float64(fp32_from_code(t.end)), 0.0)

    def flow(y0: float, at: np.ndarray, scale: float) -> np.ndarray:
        return fp17_add(np.full_like(x, y0), fp17_mul(fp32_to_fp17(fp32_add(x, -at)), np.float64(scale)))

    val = np.where(under, flow(e[0], under_at, scales[0]), np.where(over, flow(e[n], over_at, scales[1]), interp))
    return val, hit, under


def _floor_log2(v: np.ndarray) -> np.ndarray:
    """floor(log2(v)) for positive int64 v, exact (cmod IntLog2: the leading one's position)."""
    k = np.floor(np.log2(v.astype(np.float64))).astype(np.int64)
    k = np.where(np.left_shift(np.int64(1), np.minimum(k + 1, 62)) <= v, k + 1, k)  # guard log2 rounding
    return np.where(np.left_shift(np.int64(1), k) > v, k - 1, k)


def _scale_frac(frac: np.ndarray, bits: int | np.ndarray) -> np.ndarray:
    """A `bits`-wide fraction as a 16-bit one (the low bits truncated when wider)."""
    b = np.asarray(bits, np.int64)
    up = np.left_shift(frac, np.clip(INTERP_BITS - b, 0, 62))
    down = np.right_shift(frac, np.clip(b - INTERP_BITS, 0, 62))
    return np.where(b <= INTERP_BITS, up, down)


def lut_apply(x: np.ndarray, params: LutParams, *, path: LutPath) -> tuple[np.ndarray, LutStats]:
    """Evaluate the LUT on x (int64 or float array) with `path`'s datapath. Returns (y, hit statistics)."""
    is_float = np.issubdtype(np.asarray(x).dtype, np.floating)
    x = np.asarray(x, np.float64 if is_float else np.int64)
    le_v, le_hit, le_under = _lookup(params.le, x, is_float, path)
    lo_v, lo_hit, lo_under = _lookup(params.lo, x, is_float, path)
    le_over, lo_over = ~le_hit & ~le_under, ~lo_hit & ~lo_under
    under_both = le_under & lo_under
    over_both = le_over & lo_over
    one_hit = le_hit ^ lo_hit
    pick_le = np.where(
        under_both,
        params.uflow_priority is Table.LE,
        np.where(over_both, params.oflow_priority is Table.LE, np.where(one_hit, le_hit, params.priority is Table.LE)),
    )
    y = np.where(pick_le, le_v, lo_v)
    hybrid = ~under_both & ~over_both & ~one_hit
    stats = LutStats(
        le_hits=int(np.count_nonzero(one_hit & le_hit)),
        lo_hits=int(np.count_nonzero(one_hit & lo_hit)),
        hybrid=int(np.count_nonzero(hybrid)),
        underflow=int(np.count_nonzero(under_both)),
        overflow=int(np.count_nonzero(over_both)),
    )
    if not is_float:
        y = np.asarray(y, np.int64)
    return y, stats


def linear_table(
    func: Callable[[np.ndarray], np.ndarray],
    *,
    entries: int,
    q_start: int,
    index_shift: int,
    in_scale: float,
    out_scale: float,
) -> LutTable:
    """Sample func at q_start + i*2**index_shift (input units of in_scale), quantised by out_scale.

    End slopes are the secant of the last/first interval, so extrapolation continues the curve.
    """
    q = q_start + (np.arange(entries, dtype=np.int64) << index_shift)
    e = np.clip(np.round(func(q * in_scale) / out_scale), ENTRY_MIN, ENTRY_MAX).astype(np.int64)
    step = 1 << index_shift
    shift = 16
    lo_slope = round((int(e[1]) - int(e[0])) / step * (1 << shift))
    hi_slope = round((int(e[-1]) - int(e[-2])) / step * (1 << shift))
    return LutTable(e, IndexMode.LINEAR, int(q_start), index_shift, lo_slope, shift, hi_slope, shift)


def function_lut(
    func: Callable[[np.ndarray], np.ndarray],
    *,
    q_min: int,
    q_max: int,
    in_scale: float,
    out_scale: float,
    dense_fraction: float = 0.25,
) -> LutParams:
    """Build a hybrid LUT for func over integer inputs [q_min, q_max]: LE covers the whole range coarsely,
    LO covers the central `dense_fraction` of it finely (wins on hybrid hits)."""
    if q_max <= q_min:
        raise ValueError(f"LUT range must be non-empty, got [{q_min}, {q_max}]")
    span = q_max - q_min
    le_shift = max(0, int(np.ceil(np.log2(max(span / (LE_ENTRIES - 1), 1)))))
    le = linear_table(
        func, entries=LE_ENTRIES, q_start=q_min, index_shift=le_shift, in_scale=in_scale, out_scale=out_scale
    )
    dense = max(1, int(span * dense_fraction))
    lo_shift = max(0, int(np.ceil(np.log2(max(dense / (LO_ENTRIES - 1), 1)))))
    centre = (q_min + q_max) // 2
    lo_start = centre - ((LO_ENTRIES - 1) << lo_shift) // 2
    lo = linear_table(
        func,
        entries=LO_ENTRIES,
        q_start=lo_start,
        index_shift=lo_shift,
        in_scale=in_scale,
        out_scale=out_scale,
    )
    return LutParams(le=le, lo=lo, priority=Table.LO, uflow_priority=Table.LE, oflow_priority=Table.LE)


def fp16_table(
    func: Callable[[np.ndarray], np.ndarray], *, entries: int, x_start: float, index_select: int
) -> LutTable:
    """A linear table for SDP's FP16 mode: func at x_start + i * 2**index_select as FP16 entries, START
    and END as FP32, the end slopes (the first and last intervals' secants) as FP16 scales; FP mode
    ignores the slope shifts (docs/fp16_lut.md section 1). A negative select makes intervals below 1."""
    step = 2.0**index_select
    xs = np.float32(x_start) + np.arange(entries) * step
    ys = np.asarray(func(xs.astype(np.float64)), np.float64)
    e = ys.astype(np.float16)
    if not np.all(np.isfinite(e)):
        raise ValueError(f"FP16 LUT entries must be finite FP16 (|y| <= 65504) over [{xs[0]}, {xs[-1]}]")
    under, over = ((float(e[1]) - float(e[0])) / step, (float(e[-1]) - float(e[-2])) / step)
    codes = fp16_codes(e)
    return LutTable(
        codes,
        IndexMode.LINEAR,
        fp32_code(float(xs[0])),
        index_select,
        int(fp16_codes(np.array([under]))[0]),
        0,
        int(fp16_codes(np.array([over]))[0]),
        0,
        end=fp32_code(float(xs[-1])),
    )


def fp16_function_lut(
    func: Callable[[np.ndarray], np.ndarray], *, le: tuple[float, int], lo: tuple[float, int]
) -> LutParams:
    """A hybrid FP16 LUT for func: LE from le[0] in steps of 2**le[1] (64 intervals), LO from lo[0] in
    steps of 2**lo[1] (256, meant to be the denser one: it wins where both hit); beyond both tables the
    LE table's end slopes extrapolate."""
    return LutParams(
        le=fp16_table(func, entries=LE_ENTRIES, x_start=le[0], index_select=le[1]),
        lo=fp16_table(func, entries=LO_ENTRIES, x_start=lo[0], index_select=lo[1]),
        priority=Table.LO,
        uflow_priority=Table.LE,
        oflow_priority=Table.LE,
    )
