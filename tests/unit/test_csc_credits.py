"""CSC's stripe limits and CACC's delivery credits per build, against the values NVIDIA's RTL holds, and the
stripe gap they decide, against hand arithmetic and a write period read off the nv_large RTL's log."""

from __future__ import annotations

import pytest

from nvdla_sim import load_config
from nvdla_sim.engine.conv import group_delivery
from nvdla_sim.engine.tile_pipeline import BlockRun
from nvdla_sim.errors import ConfigError
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.precision import Precision
from nvdla_sim.units.csc import stripe_gaps


@pytest.mark.parametrize(
    ("config", "limits", "image", "credits"),
    [
        # branch nv_small vmod/nvdla/csc/NV_NVDLA_CSC.h: CSC_ATOMK_HEX 7'h8, CSC_ATOMK_MUL2_HEX 7'h10,
        # CSC_IMG_STRIPE = CSC_ATOMK_MUL2_HEX, NVDLA_CC_CREDIT_SIZE = CSC_ATOMK*2
        ("nv_small", (8, 16), 16, 16),
        ("nv_small_rtl_tb", (8, 16), 16, 16),
        # master, generated outdir/nv_small_256_full NV_NVDLA_CSC_sg.v: lower 7'h8, upper 7'h10,
        # credit_cnt reset 32 (atomic_c / atomic_k = 4: CSC_ATOMK*4)
        ("nv_small_256_full_rtl_tb", (8, 16), 32, 32),
        # master, generated outdir/nv_large NV_NVDLA_CSC_sg.v: lower 7'h20, upper 7'h40, image 7'h40,
        # credit_cnt reset 64
        ("nv_large", (32, 64), 64, 64),
        ("nv_large_rtl_tb", (32, 64), 64, 64),
        # master, generated outdir/nv_medium_1024_full NV_NVDLA_CSC_sg.v (32 x 32 MACs): lower 7'h20,
        # upper 7'h40, image 7'h40, credit_cnt reset 64
        ("nv_medium_1024_full_rtl_tb", (32, 64), 64, 64),
        # branch nvdlav1 NV_NVDLA_CSC_sg.v: lower 7'h10, upper 7'h20 (no batching), image 7'h40,
        # credit_cnt reset 9'h100
        ("nv_full", (16, 32), 64, 256),
    ],
)
def test_limits_are_the_rtl_s(config, limits, image, credits):
    hw = load_config(config)
    assert hw.stripe_limits == limits
    assert hw.image_stripe == image
    assert hw.cacc_credit_atoms == credits


def test_gap_where_two_stripes_overflow_the_credits():
    # nv_small: 16 credits, 38-cycle gap, 9-cycle atoms. (16, 8): the 8 wait for 8 of the 16 to leave,
    # and the other 8 atoms (72 cycles) hide the latency; (8, 16) and (16, next group's 16) wait for all.
    assert stripe_gaps((16, 8, 16), 16, 38, 9) == (0, 38, 38)
    assert stripe_gaps((16, 16), 16, 38, 9) == (38, 38)
    # two 16-point stripes fit nv_small_256_full's 32 credits: no gap at all
    assert stripe_gaps((16, 16, 8), 32, 38, 3) == (0, 0, 0)
    # nv_large: one 64-point stripe per kernel group fills the 64 credits; 32-point stripes fit two
    assert stripe_gaps((64,), 64, 38, 3) == (38,)
    assert stripe_gaps((32, 32), 64, 38, 3) == (0, 0)
    # partly hidden: (64, 60) leaves 4 atoms x 3 cycles still to deliver: 38 - 12
    assert stripe_gaps((64, 60), 64, 38, 3) == (26, 38)


def test_nv_large_kernel_groups_are_230_cycles_apart():
    """tfyl_block_layer0_attn_q on NVIDIA's nv_large RTL (64 tokens x 128 -> 128, runs-nv_large/run.log): each
    kernel group's 64 output atoms are written 3 cycles apart, and the next group's first 41 cycles after its
    last: a period of 64 x 3 + 38 = 230 cycles (20,368 - 19,908 ticks / 2). One 64-point stripe per group."""
    hw = load_config("nv_large_rtl_tb")
    layer = ConvLayer("attn_q", ConvShape.matmul(64, 128, 128), Precision.INT8)
    blocks, tail = group_delivery(layer, hw, layer.shape.out_h, 32)
    # compute: 2 channel ops of 64 points; drain 64 atoms x (32 / 16 + 1) + the gap; lead: the last op
    assert blocks == (BlockRun(1, 128, 128, 64 * 3 + 38, 64),)
    assert tail == 38
    # the drain, not the compute, paces the groups: the write period the RTL shows
    assert max(blocks[0].compute_cycles, blocks[0].drain_cycles) == 230


def test_bad_csc_values_are_named():
    hw = load_config("nv_large")
    with pytest.raises(ConfigError, match="csc.stripe_upper must equal csc.stripe_lower or twice it"):
        hw.with_values(**{"csc.stripe_lower": 16, "csc.stripe_upper": 48})
    with pytest.raises(ConfigError, match=r"csc.credit_atoms \(32\) must hold the longest stripe"):
        hw.with_values(**{"csc.credit_atoms": 32})
    with pytest.raises(ConfigError, match="csc.stripe_lower must be a positive integer, not .16."):
        hw.with_values(**{"csc.stripe_lower": "16"})


@pytest.mark.parametrize(
    ("first", "kpg", "startup"), [(1, 32, 0), (2, 32, 0), (8, 8, 6), (32, 32, 30), (64, 32, 30), (5, 8, 3)]
)
def test_first_package_startup_by_hand(first, kpg, startup):
    """NV_NVDLA_CSC_sg.v: the first package of a layer pops its weights alone and its data max(K, 2)
    cycles later, K = its kernels (at most a kernel group); the 2 of a one-kernel package are already in
    the measured pipeline constant."""
    from nvdla_sim.units.csc import startup_cycles

    assert startup_cycles(first, kpg) == startup


def test_first_package_delays_a_layer_once(monkeypatch):
    """nv_large, a 1x1 layer of 64 pixels, 64 channels and 32 kernels (one hardware layer, one kernel group):
    its first compute, and so its end, comes 30 cycles later than without the start-up; its 32 kernels in
    two kernel tiles (two hardware layers) pay it twice."""
    import dataclasses

    import nvdla_sim.units.csc as csc
    from nvdla_mapper.search.tiling_search import search_plan
    from nvdla_sim.engine.conv import simulate_conv
    from nvdla_sim.engine.tiling import LoopOrder, TilePlan

    hw = load_config("nv_large_rtl_tb")
    layer = ConvLayer("l", ConvShape.matmul(64, 64, 32, row=64), Precision.INT8)
    plan = search_plan(layer, hw).plan
    with_startup = simulate_conv(layer, hw, plan).cycles
    monkeypatch.setattr(csc, "startup_cycles", lambda first, kpg: 0)
    assert with_startup - simulate_conv(layer, hw, plan).cycles == 30
    monkeypatch.undo()
    two = dataclasses.replace(layer, shape=ConvShape.matmul(64, 64, 64, row=64))
    tiles = TilePlan(plan.data_banks, plan.weight_banks, plan.rows_per_tile, 32, LoopOrder.WEIGHT_STATIONARY)
    a = simulate_conv(two, hw, tiles).cycles
    monkeypatch.setattr(csc, "startup_cycles", lambda first, kpg: 0)
    assert a - simulate_conv(two, hw, tiles).cycles == 60
