"""SDP's Y (element-wise) stage and its LUT, integer path: expected values by hand from the arithmetic of
NVIDIA's HLS source (hw@master cmod/hls/sdp/sdp_y_core.cpp, sdp_y_cvt.cpp, sdp_y_idx.cpp, sdp_y_inp.cpp),
and a plain-Python reference of that source (arbitrary-precision ints, one value at a time) for the
property tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nvdla_sim.precision import Precision
from nvdla_sim.units import sdp
from nvdla_sim.units.lut import IndexMode, LutParams, LutPath, LutTable, Table, lut_apply

I32 = (-(2**31), 2**31 - 1)


def _y(x, y: sdp.EwStage, out: Precision, cvt: sdp.Convertor) -> list[int]:
    params = sdp.SdpParams(y=y, cvt=cvt, out_precision=out)
    return sdp.sdp_apply(np.array([x], np.int64), params).values[0].tolist()


def _ypass(x, y: sdp.EwStage) -> list[int]:
    """The Y stage's 32-bit output (the convertor scale 1 >> 0 into INT32 is not available, so check the
    stage directly)."""
    out, _ = sdp._ew_int(np.array(x, np.int64), y)
    return out.tolist()


def test_multiplier_runs_before_the_alu():
    # (1000 * 3) / 2**1 = 1500, then + 7 = 1507; the other order would give (1007 * 3) / 2 = 1511 (rounded)
    y = sdp.EwStage(mul_operand=3, mul_truncate=1, alu_operand=7)
    assert _ypass([1000], y) == [1507]


def test_multiplier_rounds_half_away_from_zero_and_saturates_to_32_bits():
    y = sdp.EwStage(mul_operand=1, mul_truncate=1)
    assert _ypass([-5, 5, -4], y) == [-3, 3, -2]  # -2.5 -> -3, 2.5 -> 3, -2 stays
    big = sdp.EwStage(mul_operand=8)
    assert _ypass([2**30, -(2**30)], big) == [I32[1], I32[0]]


def test_truncate_of_64_and_more_gives_zero():
    y = sdp.EwStage(mul_operand=2**31 - 1, mul_truncate=1023)
    assert _ypass([2**31 - 1, -(2**31)], y) == [0, 0]


def test_prelu_passes_non_negative_values():
    y = sdp.EwStage(mul_operand=3, mul_truncate=1, mul_prelu=True)
    assert _ypass([5, 0, -6], y) == [5, 0, -9]


def test_alu_max_min_eql_and_saturation():
    assert _ypass([3, 9], sdp.EwStage(alu_op=sdp.AluOp.MAX, alu_operand=5)) == [5, 9]
    assert _ypass([3, 9], sdp.EwStage(alu_op=sdp.AluOp.MIN, alu_operand=5)) == [3, 5]
    assert _ypass([5, 6, -5], sdp.EwStage(alu_op=sdp.AluOp.EQL, alu_operand=5)) == [0, 1, 1]
    assert _ypass([2**31 - 10], sdp.EwStage(alu_operand=100)) == [I32[1]]


def test_streamed_operand_goes_through_its_convertor():
    # (10 - 4) * 3 = 18, / 2**1 = 9; the ALU adds it
    y = sdp.EwStage(alu_operand=np.array([[10]]), alu_cvt=sdp.Convertor(4, 3, 1))
    assert _ypass([[100]], y) == [[109]]
    # a convertor result past 32 bits saturates: (32767 + 2**31) * 32767
    y = sdp.EwStage(mul_operand=np.array([[32767]]), mul_cvt=sdp.Convertor(-(2**31), 32767, 0))
    assert _ypass([[1]], y) == [[I32[1]]]


def _linear(entries, start, select, **slopes) -> LutTable:
    return LutTable(np.asarray(entries, np.int64), IndexMode.LINEAR, start, select, **slopes)


def _params(le: LutTable, lo: LutTable, **prio) -> LutParams:
    return LutParams(le, lo, **prio)


FAR_LO = _linear(np.zeros(257), 2**30, 0)  # never hit below 2**30: LE decides
FAR_LE = _linear(np.zeros(65), 2**30, 0)


def test_linear_interpolation_keeps_35_fraction_bits():
    e = np.zeros(65, np.int64)
    e[1], e[2] = 100, 201
    le = _linear(e, 0, 2)  # entries every 4
    # x = 5: index 1, remainder 1 of 4 -> fraction 2**33 of 2**35: 100 * 3/4 + 201 / 4 = 125.25 -> 125
    # x = 6: 100 / 2 + 201 / 2 = 150.5 -> 151 (half away from zero)
    y, stats = lut_apply(np.array([5, 6]), _params(le, FAR_LO, uflow_priority=Table.LE), path=LutPath.SDP)
    assert y.tolist() == [125, 151]
    assert stats.le_hits == 2


def test_results_are_32_bits_wide_not_16():
    e = np.full(65, 30000, np.int64)
    le = _linear(e, 0, 0, oflow_scale=100, oflow_shift=0, end=64)
    # x = 1064: past the end by 1000 -> 30000 + 1000 * 100 = 130000 (CDP's datapath would saturate at 32767)
    # (LE over, LO under: neither both-under nor both-over, so the hybrid priority picks)
    y, _ = lut_apply(np.array([1064]), _params(le, FAR_LO, priority=Table.LE), path=LutPath.SDP)
    assert y.tolist() == [130000]


def test_flow_shift_is_signed_and_rounds():
    e = np.zeros(65, np.int64)
    e[0] = 10
    le = _linear(e, 100, 0, uflow_scale=3, uflow_shift=2)
    lo = _linear(np.zeros(257), 100, 0, uflow_scale=1, uflow_shift=-3)
    # x = 95 (at or below the start: underflow): 10 + (95 - 100) * 3 / 4 = 10 - 3.75 -> 10 - 4 = 6
    y, _ = lut_apply(np.array([95]), _params(le, lo, uflow_priority=Table.LE), path=LutPath.SDP)
    assert y.tolist() == [6]
    # the LO table's negative shift multiplies: 0 + (95 - 100) * 1 * 8 = -40
    y, _ = lut_apply(np.array([95]), _params(le, lo, uflow_priority=Table.LO), path=LutPath.SDP)
    assert y.tolist() == [-40]


def test_exponent_index_fraction_and_underflow_bias():
    e = np.arange(65, dtype=np.int64) * 500
    le = LutTable(e, IndexMode.EXPONENT, 0, 0, uflow_scale=1, uflow_shift=0, origin=0, end=2**40)
    # x = 12 = 2**3 + 4: index 3, fraction 4 / 8 -> (1500 + 2000) / 2 = 1750
    y, _ = lut_apply(np.array([12]), _params(le, FAR_LO, uflow_priority=Table.LE), path=LutPath.SDP)
    assert y.tolist() == [1750]
    # index offset 3 and origin 10: x = 12 is 2 above the origin, index 1 < 3: underflow, extrapolated
    # from origin + 2**3 = 18: 0 + (12 - 18) * 1 = -6
    le3 = LutTable(e, IndexMode.EXPONENT, 3, 0, uflow_scale=1, uflow_shift=0, origin=10, end=2**40)
    y, _ = lut_apply(np.array([12]), _params(le3, FAR_LO, uflow_priority=Table.LE), path=LutPath.SDP)
    assert y.tolist() == [-6]


# ---- property: the vectorized datapath against a one-value-at-a-time reference of the HLS source --------


def _rnd(v: int, s: int) -> int:
    """Round half away from zero of v / 2**s (s < 0 multiplies): ac_fixed AC_RND_INF."""
    if s <= 0:
        return v << -s
    q, r = divmod(abs(v), 1 << s)
    q += r >= 1 << (s - 1)
    return q if v >= 0 else -q


def _sat(v: int, bits: int = 32) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def _ref_index(t: LutTable, x: int) -> tuple[str, int, int]:
    """(flow: 'u', 'o' or 'h', index, 35-bit fraction), sdp_y_idx.cpp integer branches."""
    depth = len(t.entries)
    if t.mode is IndexMode.LINEAR:
        if x <= t.start:
            return "u", 0, 0
        u = x - t.start
        sel = t.index_shift
        idx = u >> sel if sel >= 0 else u << -sel
        if idx >= depth - 1:
            return "o", depth - 1, 0
        f = u & ((1 << sel) - 1) if sel >= 0 else 0
        return "h", idx, (f << (35 - sel) if sel <= 35 else f >> (sel - 35)) if sel >= 0 else 0
    if x <= t.origin:
        return "u", 0, 0
    sub = x - t.origin
    k = sub.bit_length() - 1
    if k < t.start:
        return "u", 0, 0
    if k - t.start >= depth - 1:
        return "o", depth - 1, 0
    return "h", k - t.start, (sub - (1 << k)) << (35 - k)


def _ref_lut(p: LutParams, x: int) -> int:
    le, lo = _ref_index(p.le, x), _ref_index(p.lo, x)
    if le[0] == "u" and lo[0] == "u":
        pick = p.uflow_priority
    elif le[0] == "o" and lo[0] == "o":
        pick = p.oflow_priority
    elif (le[0] == "h") != (lo[0] == "h"):
        pick = Table.LE if le[0] == "h" else Table.LO
    else:
        pick = p.priority
    t, (flow, idx, frac) = (p.le, le) if pick is Table.LE else (p.lo, lo)
    e = [int(v) for v in t.entries]
    if flow == "h":
        return _sat(_rnd(e[idx] * ((1 << 35) - frac) + e[idx + 1] * frac, 35))
    if flow == "u":
        bias = (1 << t.start) if t.mode is IndexMode.EXPONENT and t.start > 0 else 0
        offset = (t.origin if t.mode is IndexMode.EXPONENT else t.start) + bias
        return _sat(e[0] + _sat(_rnd((x - offset) * t.uflow_scale, t.uflow_shift)))
    return _sat(e[-1] + _sat(_rnd((x - t.last_x) * t.oflow_scale, t.oflow_shift)))


i32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def tables(draw, depth: int, *, exponent: bool = False) -> LutTable:
    e = np.array(draw(st.lists(st.integers(-(2**15), 2**15 - 1), min_size=depth, max_size=depth)), np.int64)
    slopes = {
        "uflow_scale": draw(st.integers(-(2**15), 2**15 - 1)),
        "uflow_shift": draw(st.integers(-16, 15)),
        "oflow_scale": draw(st.integers(-(2**15), 2**15 - 1)),
        "oflow_shift": draw(st.integers(-16, 15)),
        "end": draw(i32),
    }
    if exponent:
        # index offsets past 31 put the table above every 32-bit input (the C model's 32-bit underflow
        # bias 1 << offset is then undefined); 31 is the largest meaningful one
        return LutTable(e, IndexMode.EXPONENT, draw(st.integers(-8, 31)), 0, origin=draw(i32), **slopes)
    return LutTable(e, IndexMode.LINEAR, draw(i32), draw(st.integers(-12, 40)), **slopes)


@settings(max_examples=200, deadline=None)
@given(
    le=st.one_of(tables(65), tables(65, exponent=True)),
    lo=tables(257),
    prio=st.tuples(*[st.sampled_from(list(Table))] * 3),
    xs=st.lists(i32, min_size=1, max_size=24),
)
def test_sdp_lut_matches_the_reference(le, lo, prio, xs):
    p = LutParams(le, lo, priority=prio[0], uflow_priority=prio[1], oflow_priority=prio[2])
    got, _ = lut_apply(np.array(xs, np.int64), p, path=LutPath.SDP)
    assert got.tolist() == [_ref_lut(p, x) for x in xs]


@settings(max_examples=200, deadline=None)
@given(
    xs=st.lists(i32, min_size=1, max_size=16),
    mul=st.one_of(st.none(), i32),
    alu=st.one_of(st.none(), i32),
    truncate=st.integers(0, 1023),
    prelu=st.booleans(),
    algo=st.sampled_from(list(sdp.AluOp)),
)
@example(xs=[-(2**31)], mul=-(2**31), alu=None, truncate=63, prelu=False, algo=sdp.AluOp.ADD)  # 2**62 / 2**63: 1
@example(xs=[-(2**31)], mul=-(2**31), alu=None, truncate=64, prelu=False, algo=sdp.AluOp.ADD)  # and / 2**64: 0
def test_y_core_matches_the_reference(xs, mul, alu, truncate, prelu, algo):
    y = sdp.EwStage(alu_op=algo, alu_operand=alu, mul_operand=mul, mul_truncate=truncate, mul_prelu=prelu)
    expect = []
    for x in xs:
        if mul is not None and not (prelu and x >= 0):
            x = _sat(_rnd(x * mul, truncate))
        if alu is not None:
            x = {
                sdp.AluOp.ADD: lambda a, b: a + b,
                sdp.AluOp.MAX: max,
                sdp.AluOp.MIN: min,
                sdp.AluOp.EQL: lambda a, b: int(a != b),
            }[algo](x, alu)
            x = _sat(x)
        expect.append(x)
    assert _ypass(xs, y) == expect


def test_y_output_through_the_convertor_to_int8():
    # Y output 1507 -> convertor (x - 7) * 1 >> 4 = 93.75 -> 94
    y = sdp.EwStage(mul_operand=3, mul_truncate=1, alu_operand=7)
    assert _y([1000], y, out=Precision.INT8, cvt=sdp.Convertor(7, 1, 4)) == [94]


def test_bad_truncate_is_refused():
    with pytest.raises(ValueError, match="truncate must be in 0..1023"):
        sdp.EwStage(mul_truncate=1024)
