"""LayerNorm and RMSNorm in the steps NVDLA runs them (numerics.layernorm_steps): worked by hand on one
row, against float LayerNorm (hypothesis), the rsqrt table against 1 / sqrt, and the convolutions through
the bit-exact datapath as the mapper tiles them on nv_full."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nvdla_mapper.lowering.rules import LoweringContext, matmul_layout
from nvdla_mapper.numerics import layernorm_steps as L
from nvdla_mapper.numerics.quant import quantize, scale_for
from nvdla_mapper.search.tiling_search import search_plan
from nvdla_sim import ConvLayer, Precision, load_config
from nvdla_sim.engine.conv import run_conv
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.units.lut import LutPath, lut_apply
from nvdla_sim.units.sdp import sdp_apply


def conv_ref(name, a, w, params, precision):
    """A 1x1 convolution as integer arithmetic (no CACC truncation: these sums fit 32 bits), then SDP."""
    return sdp_apply(np.asarray(a, np.int64) @ np.asarray(w, np.int64).T, params).values.astype(np.int64)


def sdp_ref(name, codes, params):
    return sdp_apply(np.asarray(codes, np.int64), params).values.astype(np.int64)


def float_layernorm(x, gamma, beta, eps, rms=False):
    d = x if rms else x - x.mean(axis=1, keepdims=True)
    y = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * gamma
    return y if beta is None else y + beta


def test_one_row_by_hand():
    """x = 1.0, 2.0, 3.0, 4.0 as codes 10..40 of step 0.1: the mean 25 codes is -3,200 in steps of
    0.1 / 128 (the sum 100 times -128 / 4, a convertor of -16,384 over 2**9); centred,
    128 x - 3,200 = -1,920, -640, 640, 1,920; the largest deviation 1.5 is 1,920 steps, whose square
    3,686,400 needs T = 7 bits off to fit INT16 (28,800 = 1,920**2 / 128, 3,200 = 640**2 / 128); the
    row sum 64,000 in steps of (0.1 / 128)**2 2**7 is 4 x 1.25, the variance; rstd = 1 / sqrt(1.25) =
    0.894427; the outputs (-1.5, -0.5, 0.5, 1.5) rstd = -1.3416, -0.4472, 0.4472, 1.3416 are INT8
    codes -85, -28, 28, 85 at a step of 2 / 127 (gamma 1, beta 0)."""
    x = np.array([[10, 20, 30, 40]])
    rng = L.NormRange(dev_max=1.5, var_min=1.25, var_max=1.25)
    run = L.run_layernorm("ln", x, 0.1, np.ones(4), np.zeros(4), 0.0, rng, 2 / 127, conv_ref, sdp_ref)
    assert L.mean_convertor(4).scale == -16384 and L.mean_convertor(4).shift == 9
    assert run.steps["sum"].tolist() == [[-3200]]
    assert run.steps["broadcast_mean"].tolist() == [[-3200] * 4]
    assert run.steps["centre"].tolist() == [[-1920, -640, 640, 1920]]
    assert L.square_truncate(1920) == 7
    assert run.steps["square"].tolist() == [[28800, 3200, 3200, 28800]]
    table = L.rsqrt_table(4, (0.1 / 128) ** 2 * 2**7, 0.0, rng)
    rstd = run.steps["rsqrt"][0, 0] * table.rstd_scale
    assert rstd == pytest.approx(1 / math.sqrt(1.25), rel=1e-3)
    assert (run.steps["broadcast_rstd"] == run.steps["rsqrt"][0, 0]).all()
    assert run.out.tolist() == [[-85, -28, 28, 85]]


def test_rms_row_by_hand():
    """RMSNorm of codes 10, -10, 20, -20 (step 0.1): squares 100, 100, 400, 400 (T = 0: 400 fits INT16),
    their sum 1,000 in steps of 0.01 is 4 x 2.5; rstd = 1 / sqrt(2.5) = 0.632456; with gamma 2 the
    outputs 1.2649, -1.2649, 2.5298, -2.5298 are codes 51, -51, 102, -102 at a step of 3 / 121."""
    x = np.array([[10, -10, 20, -20]])
    rng = L.NormRange(dev_max=2.0, var_min=2.5, var_max=2.5)
    run = L.run_layernorm("rms", x, 0.1, np.full(4, 2.0), None, 0.0, rng, 3 / 121, conv_ref, sdp_ref, rms=True)
    assert set(run.steps) == set(L.RMSNORM_STEPS)
    assert run.steps["square"].tolist() == [[100, 100, 400, 400]]
    table = L.rsqrt_table(4, 0.01, 0.0, rng)
    assert run.steps["rsqrt"][0, 0] * table.rstd_scale == pytest.approx(1 / math.sqrt(2.5), rel=1e-3)
    assert run.out.tolist() == [[51, -51, 102, -102]]


# rstd's measured relative error where the calibrated row variances span `ratio` times (the module docstring)
RSQRT_ERROR = [(4, 0.0003), (16, 0.0016), (50, 0.005), (100, 0.0055), (225, 0.016), (450, 0.016), (1000, 0.053)]


@pytest.mark.parametrize(("ratio", "bound"), RSQRT_ERROR)
def test_rsqrt_table_against_one_over_sqrt(ratio, bound):
    """Over calibrated variances spanning `ratio`, every row sum's rstd (the LUT and its convertor) is
    within `bound` of 1 / sqrt (the figures the module docstring gives)."""
    n, sq = 768, 1e-3
    table = L.rsqrt_table(n, sq, 0.0, L.NormRange(1.0, 1.0, float(ratio)))
    v = np.unique(np.geomspace(n / sq, n * ratio / sq, 4000).astype(np.int64))
    out, _ = lut_apply(v, table.lut, path=LutPath.SDP)
    rel = table.cvt.apply(out) * table.rstd_scale * np.sqrt(v * sq / n) - 1
    assert np.max(np.abs(rel)) <= bound
    assert np.max(np.abs(rel)) > bound / 4  # the bound is the measured figure, not a loose one


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 6),
    n=st.sampled_from([4, 31, 64, 128, 200]),
    rms=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_against_float_layernorm(m, n, rms, seed):
    """Rows scaled 1 to 2 times, gamma around 1 and beta around 0: every output code is within 0.6 of an
    INT8 step of float LayerNorm (RMSNorm) of the INT8 input (rounding alone: 0.5), plus rstd's measured
    relative error (RSQRT_ERROR) at the largest output where the rows' variances span more: a short row's
    sample variance varies (4 elements: a span past 4 times, seed 412 came to 0.629 steps)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (m, n)) * rng.uniform(1, 2, (m, 1)) + (0 if rms else rng.normal(0, 1, (m, 1)))
    gamma, beta = rng.normal(1, 0.3, n), None if rms else rng.normal(0, 0.2, n)
    s_x = float(scale_for(np.abs(x).max()))
    qx = quantize(x, s_x)
    ref = float_layernorm(qx * s_x, gamma, beta, 1e-5, rms)
    s_y = float(scale_for(np.abs(ref).max()))
    rng_ = L.norm_range(qx * s_x, rms=rms)
    run = L.run_layernorm("ln", qx, s_x, gamma, beta, 1e-5, rng_, s_y, conv_ref, sdp_ref, rms=rms)
    span = rng_.var_max / rng_.var_min
    assume(span <= RSQRT_ERROR[-1][0])
    rel = next(bound for ratio, bound in RSQRT_ERROR if span <= ratio)
    assert np.max(np.abs(run.out - ref / s_y)) <= 0.6 + rel * np.max(np.abs(ref / s_y))


def test_steps_on_the_datapath_as_the_mapper_tiles_them():
    """The convolutions through engine.conv.run_conv (CMAC, CACC, SDP) in the layout and plan the mapper
    picks on nv_full give the integer arithmetic's codes at every step."""
    hw = load_config("nv_full")
    ctx = LoweringContext.of(hw=hw, precision=Precision.INT8)

    def conv_hw(name, a, w, params, precision):
        m, k = a.shape
        c = LoweringContext.of(hw=hw, precision=precision, host=ctx.host)
        layer = ConvLayer(name, matmul_layout(m, k, w.shape[0], c), precision, params.timing_view(precision))
        plan = search_plan(layer, hw).plan
        dt = np.int8 if precision is Precision.INT8 else np.int16
        x3 = a.astype(dt).reshape(layer.shape.in_h, layer.shape.in_w, k)
        y, _ = run_conv(layer, x3, w.astype(dt).reshape(w.shape[0], 1, 1, k), hw, plan, sdp_params=params)
        return y.reshape(m, -1).astype(np.int64)

    rng = np.random.default_rng(7)
    x = rng.normal(0, 1.5, (16, 96))
    s_x = float(scale_for(np.abs(x).max()))
    qx = quantize(x, s_x)
    gamma, beta = rng.normal(1, 0.2, 96), rng.normal(0, 0.1, 96)
    args = (qx, s_x, gamma, beta, 1e-5, L.norm_range(qx * s_x), 0.03)
    ref = L.run_layernorm("ln", *args, conv_ref, sdp_ref)
    got = L.run_layernorm("ln", *args, conv_hw, sdp_ref)
    for step in L.LAYERNORM_STEPS:
        assert np.array_equal(got.steps[step], ref.steps[step]), step


def test_an_eps_beyond_x1_is_a_one_line_error():
    with pytest.raises(UnsupportedError, match="layernorm eps"):
        L.rsqrt_table(768, 1e-12, 1.0, L.NormRange(1.0, 1.0, 2.0))
