"""The SDP numbers of the steps a LUT build runs on NVDLA (mapper/numerics/lut_steps.py), through the
bit-exact SDP model, against values worked by hand and float functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper.numerics import lut_steps
from nvdla_mapper.numerics.reference import gelu_tanh
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.units.sdp import EwStage, SdpParams, Stage, sdp_apply


def _run(codes, params):
    return sdp_apply(np.asarray(codes, np.int64).reshape(1, -1), params).values.ravel()


def test_exp_pass_by_hand():
    """Scores of 0.05 per code, exps written at exp(127 * 0.05) / 127 per code (the largest score's exp
    at 127). By hand: code 100 -> exp(5) = 148.41; the table holds round(148.41 * 2**14 / exp(6.35)) =
    round(4247.4) = 4247; the convertor's multiplier is 127 / 2**14 (scale 32512, shift 22): 4247 * 127 /
    16384 = 32.92 -> 33 (127 exp(-1.35) = 32.92). Code 127 -> 2**14 -> 127; code 0 -> 127 exp(-6.35) =
    0.22 -> 0; the mask's code -128 -> 0."""
    params = lut_steps.exp_pass(0.05, math.exp(6.35) / 127)
    assert (params.cvt.scale, params.cvt.shift) == (32512, 22)
    assert params.y.lut.lo.entries[100 + 128] == 4247
    assert list(_run([-128, 0, 100, 127], params)) == [0, 0, 33, 127]


@given(t=st.floats(0.005, 0.2), headroom=st.floats(1.0, 4.0))
@settings(max_examples=40, deadline=None)
def test_exp_pass_is_exp_rounded(t, headroom):
    """Every code's output is exp(c t) at the exp scale, rounded (within the 16-bit entries' rounding)
    and saturated at 127; the mask's code is 0."""
    s_e = headroom * math.exp(127 * t) / 127
    codes = np.arange(-128, 128)
    got = _run(codes, lut_steps.exp_pass(t, s_e))
    want = np.minimum(np.exp(codes * t) / s_e, 127)
    assert got[0] == 0
    assert np.all(np.abs(got[1:] - want[1:]) <= 0.5 + 1e-2 * max(1.0, headroom))


def test_recip_pass_by_hand():
    """Row sums of 0.5 per code, 1/sum written at 2 / 127 per code (1/sum's largest, at code 1, to 127):
    code 1 -> 2 -> 127; code 4 -> 0.5 -> 31.75 -> 32; code 127 -> 1/63.5 -> 1.0 -> 1; code 0 (a sum
    below half a step) taken as half a step -> 4 -> saturated at 127."""
    params = lut_steps.recip_pass(0.5, 2 / 127)
    assert list(_run([0, 1, 4, 127], params)) == [127, 127, 32, 1]


def test_normalize_pass_by_hand():
    """PV's output at 0.1 per code times 1/sum at 0.02 per code, written at 0.01 per code: the
    multiplier 0.2 (scale 26214, shift 17). 50 * 30 = 1500 -> 300; -7 * 127 = -889 -> -177.8 -> -128
    (saturated); 3 * 2 = 6 -> 1.2 -> 1."""
    params = lut_steps.normalize_pass(0.1, 0.02, 0.01, np.array([[30, 127, 2]]))
    assert list(sdp_apply(np.array([[50, -7, 3]]), params).values.ravel()) == [127, -128, 1]
    params = lut_steps.normalize_pass(0.1, 0.02, 0.1, np.array([[30, 127, 2]]))  # multiplier 0.02
    assert list(sdp_apply(np.array([[50, -7, 3]]), params).values.ravel()) == [30, -18, 0]


def test_an_unreachable_multiplier_is_refused():
    """The output convertor's scale is INT16 with a shift >= 0: a multiplier of 2**16 cannot be programmed."""
    with pytest.raises(UnsupportedError, match="too large for an INT16 scale"):
        lut_steps.normalize_pass(2.0**8, 2.0**8, 1.0, np.zeros((1, 1)))


def test_mask_operand_saturates_the_masked_scores():
    """QK^T's SDP: the mask operand (-128 through a convertor of scale 32767: -4,194,176) added before an
    output convertor of multiplier 1/1024 takes any accumulator within +-2**20 to -128."""
    acc = np.array([[2**20, -(2**20), 5000]])
    mask = np.array([[True, True, False]])
    params = SdpParams(y=lut_steps.mask_operand(mask), cvt=lut_steps.requant_pass(1 / 1024, 1.0).cvt)
    assert list(sdp_apply(acc, params).values.ravel()) == [-128, -128, 5]


def test_sdp_table_covers_int8_codes_exactly():
    """For INT8 codes both tables span -128..128 and LO holds one entry per code (no interpolation)."""
    lut = lut_steps.sdp_table(lambda c: c * 3.0, -128, 128, 1.0)
    assert (lut.lo.start, lut.lo.index_shift, lut.le.start, lut.le.index_shift) == (-128, 0, -128, 2)
    assert list(_run([-128, -5, 0, 127], SdpParams(y=EwStage(lut=lut)))) == [-128, -15, 0, 127]


def test_gelu_in_the_lut_behind_a_convolution():
    """GELU fused into a matmul's SDP: X1 the bias, X2 the requantization to 2,048 steps over the
    pre-activation's range, the table, the convertor to INT8. Against GELU computed in float on the same
    accumulator: every output within one code, most exact."""
    rng = np.random.default_rng(3)
    acc = rng.integers(-40_000, 40_000, (64, 16))
    s_x, s_w = 0.02, np.full(16, 0.001)
    bias = rng.normal(0, 0.1, 16)
    real = acc * s_x * s_w + bias
    pre_amax, out = float(np.abs(real).max()), float(gelu_tanh(real).max()) / 127
    table = lut_steps.gelu_table(gelu_tanh, pre_amax)
    params = lut_steps.activated_conv_sdp(s_x, s_w, out, table, bias=bias)
    got = sdp_apply(acc, params).values
    want = np.clip(np.round(gelu_tanh(real) / out), -128, 127)
    assert np.abs(got - want).max() <= 1 and (got == want).mean() > 0.95
    assert isinstance(params.x2, Stage) and params.y.lut is table.lut


def test_gelu_extrapolates_past_its_range_with_its_own_slope():
    """Past the calibrated range (8.0 here: 2,048 steps of 1/256) GELU is x itself; its table's upper end
    rises 2**14 / 8 per unit (8 entries per input step), so its overflow slope takes shift 11 (8 x 2**11 =
    16,384 < 2**15): at 10 and 16, written at 20 / 127 per code, the LUT gives 10 and 16 to within a step
    (a 2**15 shift would clip the slope to one entry per step: 8.25 and 9.0)."""
    table = lut_steps.gelu_table(gelu_tanh, 8.0)
    assert (table.lut.le.oflow_shift, table.lut.le.oflow_scale) == (11, 16384)
    out = 20.0 / 127
    codes = np.round(np.array([10.0, 16.0]) / table.pre_scale).astype(np.int64)
    got = _run(codes, lut_steps.table_pass(table, out)) * out
    assert np.abs(got - [10.0, 16.0]).max() <= out
