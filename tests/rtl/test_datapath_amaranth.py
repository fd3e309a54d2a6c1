"""The Amaranth datapath in amaranth.sim equals the nvdla_sim golden model, values and cycles."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_rtl.amaranth_sim import run_amaranth
from nvdla_rtl.sdp_x1 import SDP_STAGES, sdp_ports
from nvdla_sim import Precision, load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.rtl_model.datapath_model import (
    datapath_outputs,
    datapath_params,
    datapath_timing,
    random_pattern,
    requant_outputs,
    stripe_beats,
)
from nvdla_sim.units.sdp import Convertor, SdpParams, Stage


def _check(p, x, w, ready, truncate=0, dat_valid=(), wt_valid=()):
    beats, sets = stripe_beats(x, w, p)
    timing = datapath_timing(beats, sum(len(s) for s in sets), ready, p, dat_valid=dat_valid, wt_valid=wt_valid)
    # a design that hangs fails here within a few times the model's run, not after a million cycles
    run = run_amaranth(p, beats, sets, ready, truncate=truncate, dat_valid=dat_valid, wt_valid=wt_valid,
                       max_cycles=2 * timing.last_out + 100)  # fmt: skip
    expect = datapath_outputs(beats, sets, p, truncate=truncate)
    assert run.values == [(px, last, [int(a) for a in v]) for px, last, v in expect]
    stripes = -(-x.shape[0] // p.stripe_max)
    assert sum(1 for _, last, _ in run.values if last) == stripes  # out.last once per stripe
    assert run.accept_cycles == timing.accept_cycles
    assert run.output_cycles == timing.output_cycles
    return timing


@settings(max_examples=8, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 30),
    st.integers(1, 8),
    st.floats(0.3, 1.0),
    st.floats(0.3, 1.0),
    st.floats(0.2, 1.0),
    st.integers(0, 6),
    st.integers(0, 2**31),
)
def test_random_tiles_with_gaps_and_backpressure(
    nv_small, pixels, channels, kernels, ready_prob, dat_prob, wt_prob, truncate, seed
):
    """Constrained-random valid gaps on the data and weight streams with random output back-pressure."""
    p = datapath_params(nv_small, Precision.INT8)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (pixels, channels))
    w = rng.integers(-128, 128, (kernels, channels))
    ready, dat_valid, wt_valid = (random_pattern(rng, 6000, q) for q in (ready_prob, dat_prob, wt_prob))
    _check(p, x, w, ready, truncate, dat_valid, wt_valid)


def test_gaps_stretch_the_run_as_the_model_says(nv_small):
    """Data offered every other cycle: the stripe takes twice as long, and the model knows it exactly."""
    p = datapath_params(nv_small, Precision.INT8)
    rng = np.random.default_rng(1)
    x, w = rng.integers(-128, 128, (16, 8)), rng.integers(-128, 128, (8, 8))
    every_other = [t % 2 == 0 for t in range(200)]
    base = _check(p, x, w, [True] * 200)
    gapped = _check(p, x, w, [True] * 200, dat_valid=every_other)
    assert gapped.cycles == base.cycles + 15  # 16 accepts two cycles apart instead of one


def test_no_backpressure_latency(nv_small):
    """Back-to-back input, sink always ready: last output = last accept + CMAC stages + CACC register."""
    p = datapath_params(nv_small, Precision.INT8)
    rng = np.random.default_rng(0)
    x, w = rng.integers(-128, 128, (16, 8)), rng.integers(-128, 128, (8, 8))
    timing = _check(p, x, w, [True] * 100)
    # the first swap waits for 8 weight beats (one cell per cycle)
    assert timing.first_in == p.cells
    assert timing.last_out == timing.accept_cycles[-1] + p.latency
    assert timing.cycles == 16 + p.latency


def test_int16_output_saturation():
    hw = load_config("nv_small").with_values(precisions=["int8", "int16"])
    p = datapath_params(hw, Precision.INT16)
    x = np.full((3, 16), 32767)
    w = np.full((p.cells, 16), 32767)
    w[1] = -32768
    _check(p, x, w, [True] * 200)
    out = datapath_outputs(*stripe_beats(x, w, p), p)
    assert out[0][2][0] == 2**31 - 1 and out[0][2][1] == -(2**31)


def test_bad_params():
    p = datapath_params(load_config("nv_small"), Precision.INT8)
    with pytest.raises(ValueError, match="pipeline must be >= 2"):
        type(p)(**{**p.__dict__, "pipeline": 1})
    with pytest.raises(ValueError, match="integer-only"):
        datapath_params(load_config("nv_full"), Precision.FP16)


@settings(max_examples=6, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 24),
    st.integers(1, 8),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_sdp_x1_requantizes_bit_exact(nv_small, pixels, channels, kernels, use_mul, relu, seed):
    """CMAC + CACC + SDP X1 (bias, multiplier, truncation, ReLU, output convertor to INT8) against
    nvdla_sim.units.sdp.sdp_apply, values and cycles, under gaps and back-pressure."""
    p = datapath_params(nv_small, Precision.INT8)
    rng = np.random.default_rng(seed)
    x, w = rng.integers(-128, 128, (pixels, channels)), rng.integers(-128, 128, (kernels, channels))
    bias = rng.integers(-(1 << 15), 1 << 15, p.cells)
    mul = rng.integers(-(1 << 15), 1 << 15, p.cells) if use_mul else None
    params = SdpParams(
        x1=Stage(alu_operand=bias, alu_shift=int(rng.integers(0, 20)), mul_operand=mul,
                 mul_shift=int(rng.integers(0, 24)), relu=relu),
        cvt=Convertor(offset=int(rng.integers(-1000, 1000)), scale=int(rng.integers(1, 1 << 15)),
                      shift=int(rng.integers(8, 30))),
    )  # fmt: skip
    ready, dat_valid = random_pattern(rng, 6000, 0.7), random_pattern(rng, 6000, 0.8)
    beats, sets = stripe_beats(x, w, p)
    timing = datapath_timing(beats, sum(len(s) for s in sets), ready, p, dat_valid=dat_valid, sdp_stages=SDP_STAGES)
    run = run_amaranth(p, beats, sets, ready, dat_valid=dat_valid, sdp=sdp_ports(params, p),
                       max_cycles=2 * timing.last_out + 100)  # fmt: skip
    expect = requant_outputs(beats, sets, p, params)
    assert run.values == [(px, last, [int(a) for a in v]) for px, last, v in expect]
    assert run.accept_cycles == timing.accept_cycles and run.output_cycles == timing.output_cycles
    assert all(-128 <= a <= 127 for _, _, v in run.values for a in v)


def test_sdp_x1_refuses_what_it_does_not_build(nv_small):
    p = datapath_params(nv_small, Precision.INT8)
    with pytest.raises(NvdlaError, match="X1 stage and the output convertor only"):
        sdp_ports(SdpParams(x2=Stage(relu=True)), p)
    with pytest.raises(NvdlaError, match="not PReLU"):
        sdp_ports(SdpParams(x1=Stage(mul_operand=3, prelu=True)), p)


def test_sdp_x1_bias_shift_saturates_to_int32(nv_small):
    """bias << alu_shift beyond INT32 saturates before the add (cmod X_alu), in the RTL as in the model:
    full-scale biases shifted by 20 and 31."""
    p = datapath_params(nv_small, Precision.INT8)
    rng = np.random.default_rng(31)
    x, w = rng.integers(-128, 128, (6, 16)), rng.integers(-128, 128, (8, 16))
    bias = np.array([32767, -32768, 1, -1, 20000, -20000, 0, 16384])
    beats, sets = stripe_beats(x, w, p)
    for shift in (20, 31):
        params = SdpParams(x1=Stage(alu_operand=bias, alu_shift=shift, mul_shift=16), cvt=Convertor(scale=1))
        timing = datapath_timing(beats, sum(len(s) for s in sets), [True] * 400, p, sdp_stages=SDP_STAGES)
        run = run_amaranth(p, beats, sets, [True] * 400, sdp=sdp_ports(params, p), max_cycles=2 * timing.last_out)
        expect = requant_outputs(beats, sets, p, params)
        assert run.values == [(px, last, [int(a) for a in v]) for px, last, v in expect]
        assert {v[0] for _, _, v in run.values} == {127} and {v[1] for _, _, v in run.values} == {-128}
