"""SDP's operand RDMAs stream through a fixed number of credits (beats in flight): behind a memory slower
than the build's PRIMARY_MEMIF_LATENCY a fused residual or bias stream runs at credits x beat / round trip
(dram.credit_bytes_per_cycle, sdp.operand_stream_cycles; docs/validation.md 5e)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.engine.conv import simulate_conv
from nvdla_sim.engine.steady import SteadyState
from nvdla_sim.errors import ConfigError
from nvdla_sim.layers import Memory, OperandMode, SdpSpec
from nvdla_sim.processors import simulate
from nvdla_sim.system.memory import memory_model
from nvdla_sim.units import sdp
from nvdla_sim.units.dram import credit_bytes_per_cycle

RESIDUAL = SdpSpec(bias=OperandMode.PER_KERNEL, eltwise=OperandMode.PER_ELEMENT)


def _with_latency(hw, latency: int):
    return dataclasses.replace(hw, memory=dataclasses.replace(hw.memory, dram_latency_cycles=latency))


def _dram_stream_cycles(spec: SdpSpec, hw, *, pixels: int, channels: int) -> float:
    """sdp.operand_stream_cycles of INT8 operands from DRAM, at the memory model's latency."""
    latency = memory_model(hw).latency(Memory.DRAM)
    return sdp.operand_stream_cycles(
        spec, hw, pixels=pixels, channels=channels, operand_bytes=1, memory=Memory.DRAM, latency=latency
    )


def test_credit_rate_by_hand():
    """nv_small_256_full's E-RDMA: 16 beats of 8 bytes, requests of one 32-byte atom (4 beats). At a
    163-cycle latency a credit comes back with the burst's last beat 163 + 3 cycles after its request and
    leaves again 14 cycles later: 128 bytes per 180 cycles (NVIDIA's testbench log, attn_o: four requests
    every 186.8 cycles at that latency, the two streams' beats interleaved)."""
    assert credit_bytes_per_cycle(16, 8, 163, 4, 14) == pytest.approx(128 / 180)
    assert credit_bytes_per_cycle(16, 8, 32, 4, 14) == pytest.approx(128 / 49)


def test_residual_stream_cycles_by_hand():
    """attn_o's residual: 64 pixels x 128 channels of INT8, 8,192 bytes = 64 rounds of the 16 credits, 180
    cycles a round at a latency of 163; its per-kernel bias (128 x 2 bytes through the B-RDMA, 2 rounds)
    is the shorter stream."""
    hw = _with_latency(load_config("nv_small_256_full_rtl_tb"), 163)
    got = _dram_stream_cycles(RESIDUAL, hw, pixels=64, channels=128)
    assert got == pytest.approx(64 * 180)
    bias_only = dataclasses.replace(RESIDUAL, eltwise=OperandMode.NONE)
    got = _dram_stream_cycles(bias_only, hw, pixels=64, channels=128)
    assert got == pytest.approx(256 / 128 * 180)


def test_nv_full_erdma_has_half_the_credits_of_its_b_and_n_rdmas():
    """nvdlav1's MCIF: tieoff_lat_fifo_depth 160 for the B/N-RDMAs, 80 for the E-RDMA, 64-byte beats; an
    atom (32 bytes) is one beat. At its 1,200-cycle PRIMARY_MEMIF_LATENCY: 80 x 64 / 1,214 bytes a cycle."""
    hw = load_config("nv_full")
    assert (hw.sdp.operand_fifo_beats, hw.sdp.erdma_fifo_beats) == (160, 80)
    per_element = SdpSpec(eltwise=OperandMode.PER_ELEMENT)
    got = _dram_stream_cycles(per_element, hw, pixels=128, channels=768)
    assert got == pytest.approx(128 * 768 / (80 * 64 / 1214))
    as_bias = SdpSpec(bias=OperandMode.PER_ELEMENT)
    got = _dram_stream_cycles(as_bias, hw, pixels=128, channels=768)
    assert got == pytest.approx(128 * 768 / (160 * 64 / 1214))


def test_a_credit_bound_layer_costs_a_round_per_extra_latency_cycle():
    """attn_o (1x1, 64 pixels, 128 -> 128) with its residual, credit-bound: the stream is 8,192 / 128 = 64
    rounds, so each cycle more of memory latency costs 64 cycles (within 2%: the rest of the pipeline)."""
    hw = load_config("nv_small_256_full_rtl_tb")
    layer = ConvLayer("attn_o", ConvShape.matmul(64, 128, 128, row=64), Precision.INT8, sdp=RESIDUAL)
    c400 = simulate(layer, _with_latency(hw, 400)).cycles
    c500 = simulate(layer, _with_latency(hw, 500)).cycles
    assert (c500 - c400) == pytest.approx(64 * 100, rel=0.02)
    # at the testbench's 32 cycles the credits do not bind (the EW stage's one element a cycle does)
    quick = dataclasses.replace(hw, timing=dataclasses.replace(hw.timing, rdma_credit_reuse_cycles=0))
    assert simulate(layer, hw).cycles == simulate(layer, quick).cycles


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 12),
    k=st.sampled_from([32, 128, 512]),
    n=st.sampled_from([64, 128, 384]),
    latency=st.sampled_from([32, 200, 700]),
    pick=st.integers(0, 10_000),
)
def test_credit_bound_convolutions_equal_item_by_item(rows, k, n, latency, pick):
    """The credit clock is part of the steady state the pipeline jumps over: every plan gives the same
    stats with and without the jumps."""
    from nvdla_mapper.search.tiling_search import candidate_plans

    hw = _with_latency(load_config("nv_small_256_full_rtl_tb"), latency)
    layer = ConvLayer("mm", ConvShape.matmul(16 * rows, k, n, row=16), Precision.INT8, sdp=RESIDUAL)
    plans = candidate_plans(layer, hw)
    plan = plans[pick % len(plans)]
    a = simulate_conv(layer, hw, plan, record_events=False)
    b = simulate_conv(layer, hw, plan, record_events=False, steady=SteadyState(items=False))
    assert (a.cycles, a.traffic, a.units, a.bound, a.detail) == (b.cycles, b.traffic, b.units, b.bound, b.detail)


def test_bad_fifo_depths_are_refused_by_name():
    sdp_cfg = load_config("nv_full").sdp
    with pytest.raises(ConfigError, match="sdp.eltwise_fifo_beats must be"):
        dataclasses.replace(sdp_cfg, eltwise_fifo_beats=2)
    assert dataclasses.replace(sdp_cfg, eltwise_fifo_beats=None).erdma_fifo_beats == sdp_cfg.operand_fifo_beats
