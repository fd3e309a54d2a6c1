"""SDP's Y-stage LUT in FP16 processing precision, and SDP's FP32 sum: expected values worked by hand from
the arithmetic of NVIDIA's HLS source (cmod/hls/sdp/sdp_y_idx.cpp, sdp_y_inp.cpp, include/nvdla_float.h;
docs/fp16_lut.md gives the lines). The programs of validation/nvdla_rtl/own_programs.py's fp16 suite
check the same path on nv_full's RTL (tests/integration/test_nvdla_nv_full.py)."""

from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.floats import fp16_codes, fp17_add, fp17_mul, fp32_add, fp32_code, fp32_to_fp17, fraction_to_fp17
from nvdla_sim.precision import Precision
from nvdla_sim.units import sdp
from nvdla_sim.units.lut import (
    IndexMode,
    LutParams,
    LutPath,
    LutTable,
    Table,
    fp16_function_lut,
    lut_apply,
)

ZERO_LO = LutTable(fp16_codes(np.zeros(257)), IndexMode.LINEAR, fp32_code(1000.0), 0, end=fp32_code(1256.0))


def _le(entries: dict[int, float], **kw) -> LutTable:
    e = np.zeros(65)
    for i, v in entries.items():
        e[i] = v
    kw.setdefault("end", fp32_code(64.0))
    mode = kw.pop("mode", IndexMode.LINEAR)
    start = kw.pop("start", fp32_code(0.0))
    return LutTable(fp16_codes(e), mode, start, **kw)


def _apply(le: LutTable, xs: list[float], lo: LutTable = ZERO_LO, hybrid: Table = Table.LO) -> list[float]:
    params = LutParams(le, lo, priority=hybrid, uflow_priority=Table.LE, oflow_priority=Table.LE)
    return lut_apply(np.array(xs, np.float64), params, path=LutPath.SDP)[0].tolist()


def test_interpolation_rounds_each_weight_and_product_to_fp17():
    """y0 (1 - f) + y1 f with each piece at 11 significant bits, not y0 + (y1 - y0) f.
    y0 = 1, y1 = 3, x = 1 + 2**-12: 1 - f = 0.111111111111b (12 ones) is a tie at 11 bits and rounds to
    even, 1.0; f * 3 = 3 * 2**-12; the sum 1 + 3 * 2**-12 rounds (ulp 2**-10) to 1 + 2**-10. The exact
    value, 1 + 2**-11, would be FP16's tie and round to 1.0.
    y0 = 1000, y1 = 1001, x = 1 + 3 * 2**-12: 1 - f = 1 - 3 * 2**-12 ties again and stays (even) at
    1 - 2**-10; 1000 (1 - 2**-10) = 999.0234 rounds to 999.0 (ulp 0.5); f * 1001 = 1501.5 * 2**-11 ties to
    1502 * 2**-11 = 0.7334; the sum 999.7334 rounds to 999.5, half a unit below the exact 1000.0007."""
    assert _apply(_le({1: 1.0, 2: 3.0}), [1 + 2**-12]) == [1 + 2**-10]
    assert _apply(_le({1: 1000.0, 2: 1001.0}), [1 + 3 * 2**-12]) == [999.5]


def test_flow_ignores_the_shift_and_scales_by_an_fp16_slope():
    """Underflow: y = e[0] + (x - START) * scale, the shift register not used in FP mode:
    2 + (-3 - 0) * 0.5 = 0.5 (INT mode's shift of 7 would divide the term by 128). Overflow from END:
    10 + (70 - 64) * 1.5 = 19 (LO underflows there: one table under and one over is a hybrid, LE by
    priority here)."""
    half, one_half = (int(c) for c in fp16_codes(np.array([0.5, 1.5])))
    le = _le({0: 2.0, 64: 10.0}, uflow_scale=half, uflow_shift=7, oflow_scale=one_half, oflow_shift=-3)
    assert _apply(le, [-3.0, 70.0], hybrid=Table.LE) == [0.5, 19.0]


def test_negative_select_keeps_a_fraction():
    """LO from 0 in steps of 2**-5 (select -5): x = 3/64 is 1.5 steps in, halfway between entries 1 and 2
    (INT mode shifts left and has no fraction)."""
    lo = LutTable(fp16_codes(np.arange(257) * 1.0), IndexMode.LINEAR, fp32_code(0.0), -5, end=fp32_code(8.0))
    le = _le({}, start=fp32_code(-100.0), end=fp32_code(-36.0))  # always overflows: LO hits
    assert _apply(le, [3 / 64, 1 / 32], lo=lo) == [1.5, 1.0]


def test_exponent_table_hits_and_underflows_with_a_negative_offset_bias():
    """LE exponent-indexed from 0 with index offset -2: x = 0.375 has exponent -2, entry 0, fraction
    0.375 / 2**-2 - 1 = 0.5: 4 * 0.5 + 8 * 0.5 = 6. x = 0.125 (exponent -3) underflows and extrapolates from
    START + 2**offset, which FP mode adds for a negative offset too: 4 + (0.125 - 0.25) * 2 = 3.75."""
    two = int(fp16_codes(np.array([2.0]))[0])
    le = _le({0: 4.0, 1: 8.0}, mode=IndexMode.EXPONENT, start=-2, origin=fp32_code(0.0), uflow_scale=two)
    assert _apply(le, [0.375, 0.125]) == [6.0, 3.75]


def test_fp17_primitives_by_hand():
    # 1 + 2**-11 is a tie between 1 and 1 + 2**-10 at 11 bits: even, 1.0; 2**-31 is below FP17's normals
    assert fp17_add(np.float64(1.0), np.float64(2**-11)) == 1.0
    assert fp17_mul(np.float64(2**-16), np.float64(2**-15)) == 0.0
    assert fp17_mul(np.float64(2.0**20), np.float64(2.0**12)) == 2.0**32 - 2.0**21  # saturates, no inf
    assert fp32_to_fp17(np.float64(2**-30 - 2**-42)) == 2**-30  # rounds up at denormal resolution
    assert fraction_to_fp17(np.float64(31), 35) == 0.0  # below 2**-30
    assert fraction_to_fp17(np.float64(2**34), 35) == 0.5


def test_fp32_sum_of_opposites_takes_the_first_operands_sign():
    """FpAdd's exact zero takes the sign of the larger operand (the first on a tie): -1.5 + 1.5 = -0,
    where IEEE gives +0; FP16 out is 0x8000 (a bias that cancels a negative value)."""
    assert np.signbit(fp32_add(np.float64(-1.5), np.float64(1.5)))
    assert not np.signbit(fp32_add(np.float64(1.5), np.float64(-1.5)))
    st = sdp.Stage(alu_operand=np.float32(1.5))
    out = sdp.sdp_apply(np.array([[-1.5]], np.float32), sdp.SdpParams(x1=st, out_precision=Precision.FP16))
    assert out.values.view(np.uint16).tolist() == [[0x8000]]


def test_function_lut_follows_gelu_within_fp16():
    """A GELU table over [-8, 8] (LE, steps 1/4) and [-4, 4] (LO, steps 1/32): within 2 FP16 units
    of float GELU plus the interpolation's h**2/8 max|f''| (f'' <= 0.8: 1e-4 for LO)."""
    from math import erf, sqrt

    def gelu(x):
        return np.array([v * 0.5 * (1 + erf(v / sqrt(2))) for v in np.ravel(x)])

    lut = fp16_function_lut(gelu, le=(-8.0, -2), lo=(-4.0, -5))
    xs = np.linspace(-12, 12, 4001).astype(np.float32).astype(np.float64)
    got = lut_apply(xs, lut, path=LutPath.SDP)[0]
    want = gelu(xs)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    inside = np.abs(xs) <= 4
    assert np.all(np.abs(got - want)[inside] <= 2 * ulp[inside] + 1e-4)
    assert np.all(np.abs(got - want)[~inside] <= 2 * ulp[~inside] + 0.25**2 / 8 * 0.8 + 1e-3)


def test_fp16_table_needs_its_end_register_and_cdp_refuses_floats():
    le = LutTable(fp16_codes(np.zeros(65)), IndexMode.LINEAR, fp32_code(0.0), 0)
    params = LutParams(le, ZERO_LO)
    with pytest.raises(ValueError, match="END register"):
        lut_apply(np.array([1.0]), params, path=LutPath.SDP)
    with pytest.raises(ValueError, match="CDP's FP16 LUT"):
        lut_apply(np.array([1.0]), params, path=LutPath.CDP)


def test_fp16_output_saturations_are_what_the_rounding_takes_past_65504():
    """FP16's round to nearest even writes 65519 as 65504 (below the half-way point 65520 to the next
    binade's step): not a saturation; 65520 and beyond saturate to 65504 (Fp32ToFp16 gives no infinity)."""
    res = sdp.sdp_apply(np.array([[65519.0, 65520.0, -7e4]], np.float32), sdp.SdpParams(out_precision=Precision.FP16))
    assert res.values.astype(np.float64).tolist() == [[65504.0, 65504.0, -65504.0]] and res.saturations == 2
