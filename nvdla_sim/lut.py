"""SDP/CDP lookup table: two tables with linear interpolation and linear extrapolation (functional).

Follows doc/hw/v1/ias/lut-programming.rst: an "LE" table of 65 entries (linear or exponent index) and an
"LO" table of 257 entries (linear index), 16-bit entries, linear interpolation between neighbours,
out-of-range values extrapolated from the end entry with a programmable slope (scale, shift); a priority
bit picks the table when both hit or both miss. Integer inputs use integer arithmetic with round-half-
away-from-zero; float inputs (FP16 mode) the same formulas in float64.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .precision import shift_round

LE_ENTRIES = 65
LO_ENTRIES = 257
ENTRY_MIN, ENTRY_MAX = -(1 << 15), (1 << 15) - 1


class IndexMode(enum.Enum):
    LINEAR = "linear"
    EXPONENT = "exponent"


class Table(enum.Enum):
    LE = "le"
    LO = "lo"


@dataclass(frozen=True, eq=False)
class LutTable:
    """One table. LINEAR: entry i sits at start + i * 2**index_shift. EXPONENT: entry i at 2**(start + i)."""

    entries: np.ndarray
    mode: IndexMode
    start: int
    index_shift: int = 0
    uflow_scale: int = 0  # slope below the table: y = e[0] + (x - x0) * scale >> shift
    uflow_shift: int = 0
    oflow_scale: int = 0  # slope above the table: y = e[-1] + (x - xN) * scale >> shift
    oflow_shift: int = 0

    def __post_init__(self) -> None:
        e = np.asarray(self.entries)
        if e.ndim != 1 or len(e) < 2:
            raise ValueError("LUT table needs a 1-D array of at least 2 entries")
        if e.min() < ENTRY_MIN or e.max() > ENTRY_MAX:
            raise ValueError("LUT entries must fit in 16 bits (-32768..32767)")
        if self.mode is IndexMode.EXPONENT and self.start < 0:
            raise ValueError("exponent-mode LUT start (exp_start) must be >= 0 for integer inputs")
        if not 0 <= self.index_shift <= 31:
            raise ValueError(f"LUT index_shift must be in 0..31, not {self.index_shift}")

    @property
    def first_x(self) -> int:
        return self.start if self.mode is IndexMode.LINEAR else 1 << self.start

    @property
    def last_x(self) -> int:
        n = len(self.entries) - 1
        return self.start + (n << self.index_shift) if self.mode is IndexMode.LINEAR else 1 << (self.start + n)


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


def _lookup(t: LutTable, x: np.ndarray, is_float: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (value, hit, under) for every x; value already extrapolated outside the table."""
    e = np.asarray(t.entries, np.int64)
    n = len(e) - 1
    if t.mode is IndexMode.LINEAR:
        if is_float:
            pos = (x - t.start) / float(1 << t.index_shift)
            idx = np.floor(pos)
            frac_f = pos - idx
        else:
            off = x - t.start
            idx = np.right_shift(off, t.index_shift)
            frac = off - np.left_shift(idx, t.index_shift)
    else:
        if is_float:
            safe = np.where(x > 0, x, 1.0)
            k = np.floor(np.log2(safe))
            idx = k - t.start
            frac_f = safe / np.exp2(k) - 1.0
        else:
            safe = np.where(x > 0, x, 1)
            k = np.floor(np.log2(safe.astype(np.float64))).astype(np.int64)
            # Guard float rounding of log2 for large ints.
            k = np.where(np.left_shift(np.int64(1), k + 1) <= safe, k + 1, k)
            k = np.where(np.left_shift(np.int64(1), k) > safe, k - 1, k)
            idx = k - t.start
        idx = np.where(x > 0, idx, -1)
    under = idx < 0
    if is_float:
        beyond_end = frac_f > 0
    elif t.mode is IndexMode.LINEAR:
        beyond_end = frac > 0
    else:
        beyond_end = safe > np.left_shift(np.int64(1), np.clip(idx + t.start, 0, 62))
    over = (idx > n) | ((idx == n) & beyond_end)
    hit = ~under & ~over
    ci = np.clip(idx, 0, n - 1).astype(np.int64)
    lo_e, hi_e = e[ci], e[ci + 1]
    at_end = idx == n
    if is_float:
        val = np.where(at_end, e[n], lo_e + (hi_e - lo_e) * frac_f)
        under_v = e[0] + (x - t.first_x) * (t.uflow_scale / float(1 << t.uflow_shift))
        over_v = e[n] + (x - t.last_x) * (t.oflow_scale / float(1 << t.oflow_shift))
    else:
        if t.mode is IndexMode.LINEAR:
            interp = lo_e + shift_round((hi_e - lo_e) * frac, t.index_shift)
        else:
            kk = np.clip(idx + t.start, 0, 62)
            base = np.left_shift(np.int64(1), kk)
            num = (hi_e - lo_e) * (safe - base)
            interp = lo_e + _div_round(num, base)
        val = np.where(at_end, e[n], interp)
        under_v = e[0] + shift_round((x - t.first_x) * t.uflow_scale, t.uflow_shift)
        over_v = e[n] + shift_round((x - min(t.last_x, 1 << 62)) * t.oflow_scale, t.oflow_shift)
    val = np.where(under, under_v, np.where(over, over_v, val))
    return val, hit, under


def _div_round(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    q = (np.abs(num) + den // 2) // den
    return np.where(num < 0, -q, q)


def lut_apply(x: np.ndarray, params: LutParams) -> tuple[np.ndarray, LutStats]:
    """Evaluate the LUT on x (int64 or float array). Returns (y, hit statistics)."""
    is_float = np.issubdtype(np.asarray(x).dtype, np.floating)
    x = np.asarray(x, np.float64 if is_float else np.int64)
    le_v, le_hit, le_under = _lookup(params.le, x, is_float)
    lo_v, lo_hit, lo_under = _lookup(params.lo, x, is_float)
    both = le_hit & lo_hit
    pick_le_hit = np.where(both, params.priority is Table.LE, le_hit)
    neither = ~le_hit & ~lo_hit
    under_both = neither & le_under & lo_under
    pick_le_miss = np.where(under_both, params.uflow_priority is Table.LE, params.oflow_priority is Table.LE)
    pick_le = np.where(neither, pick_le_miss, pick_le_hit)
    y = np.where(pick_le, le_v, lo_v)
    stats = LutStats(
        le_hits=int(np.count_nonzero(le_hit & pick_le & ~neither)),
        lo_hits=int(np.count_nonzero(lo_hit & ~pick_le & ~neither)),
        hybrid=int(np.count_nonzero(both)),
        underflow=int(np.count_nonzero(under_both)),
        overflow=int(np.count_nonzero(neither & ~under_both)),
    )
    if not is_float:
        y = np.round(y).astype(np.int64)
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
