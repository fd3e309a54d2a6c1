"""The tile-plan search against simulating every plan (branch and bound must lose nothing).

Three references, none of them the search: the simulated cycles of every plan in the search space
(candidate_plans), every plan the hardware accepts at all (every data/weight bank count, band height,
kernel tile and order that illegal_reason lets through, enumerated here by brute force), and the bounds'
own promise (no plan simulates faster than its bound, no family member faster than the family's). Random
small layers on a CBUF shrunk to 8 banks of 64 rows, so that layers need several bands and tiles.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper.search.tiling_search import (
    _families,
    _family_lower_bound,
    _rows_lower_bound,
    candidate_plans,
    plan_lower_bound,
    search_plan,
)
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.config import CbufConfig
from nvdla_sim.engine.conv import simulate_conv
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, bytes_per_kernel, footprint, illegal_reason
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import Memory, OperandMode, SdpSpec
from nvdla_sim.units import cdma

SMALL = load_config("nv_small")
HW = dataclasses.replace(SMALL, cbuf=CbufConfig(bank_count=8, bank_depth=64, bank_width_bytes=8))
# nv_full's timing (CSC starts on the first part of its input, 64-channel atoms, 32 kernels per group)
FULL = load_config("nv_full")
HW_FULL = dataclasses.replace(FULL, cbuf=CbufConfig(bank_count=8, bank_depth=32, bank_width_bytes=64))


@st.composite
def layers(draw, max_h: int = 6, max_c: int = 40):
    kernel = draw(st.sampled_from([1, 3]))
    shape = ConvShape(
        in_w=draw(st.integers(kernel, 12)),
        in_h=draw(st.integers(kernel, max_h)),
        in_c=draw(st.integers(1, max_c)),
        out_k=draw(st.integers(1, 40)),
        kernel_w=kernel,
        kernel_h=kernel,
    )
    modes = st.sampled_from(list(OperandMode))
    spec = SdpSpec(bias=draw(modes), scale=draw(modes), relu=draw(st.booleans()))  # operand streams change timing
    memories = st.sampled_from(list(Memory))  # SRAM only where the build has one (the tests map it to DRAM)
    return ConvLayer("l", shape, Precision.INT8, sdp=spec, input_memory=draw(memories), weight_memory=draw(memories))


def on(layer: ConvLayer, hw) -> ConvLayer:
    """The layer with its memories on `hw` (DRAM where the build has no SRAM)."""
    if hw.memory.has_sram:
        return layer
    return dataclasses.replace(layer, input_memory=Memory.DRAM, weight_memory=Memory.DRAM)


def every_legal_plan(layer: ConvLayer, hw) -> list[TilePlan]:
    """Brute force over the plan fields, kept where illegal_reason accepts the plan."""
    s, kpg, banks = layer.shape, hw.kernels_per_atomic(layer.precision), hw.cbuf.bank_count
    tiles = sorted({*range(kpg, s.out_k + 1, kpg), s.out_k})
    plans = [
        TilePlan(db, wb, rows, kernels, order)
        for db in range(1, banks)
        for wb in range(1, banks - db + 1)
        for rows in range(1, s.out_h + 1)
        for kernels in tiles
        for order in LoopOrder
    ]
    return [p for p in plans if illegal_reason(layer, p, hw) is None]


@pytest.mark.parametrize("hw", [HW, HW_FULL], ids=["small", "full"])
@settings(max_examples=40, deadline=None)
@given(layer=layers())
def test_search_equals_simulating_every_candidate_and_the_bounds_hold(hw, layer):
    layer = on(layer, hw)
    plans = candidate_plans(layer, hw)
    if not plans:
        return
    cycles = {p: simulate_conv(layer, hw, p, record_events=False).cycles for p in plans}
    bounds = {p: plan_lower_bound(layer, p, hw) for p in plans}
    assert all(bounds[p] <= c for p, c in cycles.items())
    for fam in _families(layer, hw):
        fam_bound = _family_lower_bound(layer, fam, hw)
        assert _rows_lower_bound(layer, fam.rows, hw) <= fam_bound <= min(bounds[p] for p in fam.plans(hw))
    res = search_plan(layer, hw, 0.0, patience=None)
    assert res.stats.cycles == min(cycles.values())
    assert res.proven_gap == 0.0 and res.candidates == len(plans)


def test_patience_stops_a_gemv_search_within_its_looser_gap():
    """A decode GEMV with a bias (m = 1, 768 -> 768, nv_full): its floor misses the bias reads and the
    writes on the weights' port, so the 0.1% gap is never proven; after 20 plans the search stops once
    within 0.5%, and the plan it returns is within that of the best of every legal plan (the whole
    space, simulated)."""
    layer = ConvLayer("q", ConvShape.matmul(1, 768, 768), Precision.INT8, sdp=SdpSpec(bias=OperandMode.PER_KERNEL))
    patient = search_plan(layer, FULL)
    full = search_plan(layer, FULL, 0.0, budget=None, patience=None)
    assert patient.simulated == 20 < full.simulated and 0.001 < patient.proven_gap <= 0.005
    assert full.stats.cycles <= patient.stats.cycles <= full.stats.cycles * 1.005


@pytest.mark.parametrize("hw", [HW, HW_FULL], ids=["small", "full"])
@settings(max_examples=15, deadline=None)
@given(layer=layers(max_h=12, max_c=64))
def test_search_equals_the_best_of_every_legal_plan(hw, layer):
    """The space leaves out plans it argues are never better (unused banks, uneven bands of the same
    count, data-stationary kernel tiles, spare data banks beside one data tile); the brute force keeps
    them, so an argument that fails shows here."""
    layer = on(layer, hw)
    plans = every_legal_plan(layer, hw)
    if not plans:
        return
    best = min(simulate_conv(layer, hw, p, record_events=False).cycles for p in plans)
    assert search_plan(layer, hw, 0.0, patience=None).stats.cycles == best


# both settings of whether CSC waits for its whole input: the last-band floor counts the input only when it does
STREAMED = [
    dataclasses.replace(h, timing=dataclasses.replace(h.timing, conv_input_before_compute=False)) for h in (HW, HW_FULL)
]


@settings(max_examples=60, deadline=None)
@given(
    layer=layers(),
    hw=st.sampled_from([HW, HW_FULL, *STREAMED]),
    images=st.integers(1, 3),
    stored=st.sampled_from([None, 0.3, 0.7]),
    int16=st.booleans(),
    resident=st.sampled_from([None, "data", "weights"]),
)
def test_the_bounds_hold_for_batches_compressed_weights_int16_and_streamed_input(
    hw, layer, images, stored, int16, resident
):
    """The bounds' arguments where the first property test does not reach: several images sharing the
    kernels, compressed weights (a stored size below the dense one, fetched group by group), INT16, CSC
    starting on part of its input, and an operand left in CBUF by the layer before (DATA_REUSE /
    WEIGHT_REUSE: plans that cannot keep it are refused by the simulator and skipped here). No plan
    simulates faster than its bound, no family member faster than its family's."""
    if resident is not None:
        images = 1  # a batch cannot start from operands left in CBUF
        layer = dataclasses.replace(layer, data_resident=resident == "data", weights_resident=resident == "weights")
    layer = dataclasses.replace(on(layer, hw), images=images)
    if int16 and Precision.INT16 in hw.precisions:
        layer = dataclasses.replace(layer, precision=Precision.INT16)
    if stored is not None:
        dense = cdma.weight_bytes(layer.shape.out_k, bytes_per_kernel(layer), hw)
        layer = dataclasses.replace(layer, weight_bytes=max(1, int(dense * stored)))
    for fam in _families(layer, hw):
        bounds = [plan_lower_bound(layer, p, hw) for p in fam.plans(hw)]
        for plan, bound in zip(fam.plans(hw), bounds, strict=True):
            try:
                cycles = simulate_conv(layer, hw, plan, record_events=False).cycles
            except ShapeError:  # a resident operand this plan cannot keep
                continue
            assert bound <= cycles, plan
        assert _rows_lower_bound(layer, fam.rows, hw) <= _family_lower_bound(layer, fam, hw) <= min(bounds)


def test_a_decode_steps_attention_is_proven_best_by_one_simulation():
    """GPT-2's decode step on nv_full at 131 keys: the 12 heads as pixels against K^T (131 kernels of 768
    channels) and P against V (768 kernels of 131 channels). Each plan's weights come group by group,
    each group's fetch rounded up to whole CBUF entries (131 channels: 4,224 bytes a group, not 4,192),
    and CMAC computes the last full group (its weights in only at 2,880 cycles) before the 3-kernel rest;
    bounds that count both meet the best plan's simulated cycles, so nothing else is simulated (the
    search used to simulate 17 and 64 plans to prove the first it met)."""
    qk = ConvLayer("qk", ConvShape(12, 1, 768, 131, 1, 1), Precision.INT8, sdp=SdpSpec(scale=OperandMode.REG))
    pv = ConvLayer("pv", ConvShape(12, 1, 131, 768, 1, 1), Precision.INT8)
    for layer in (qk, pv):
        found = search_plan(layer, FULL)
        assert found.simulated == 1 and found.proven_gap == 0.0
        assert found.stats.cycles == min(
            simulate_conv(layer, FULL, p, record_events=False).cycles for p in candidate_plans(layer, FULL)
        )


def test_a_positive_gap_stops_early_within_it():
    """With a relative gap the search may return a plan up to that much slower than the best, never more,
    and says how close it proved it."""
    layer = ConvLayer("mm", ConvShape.matmul(96, 200, 40, row=8), Precision.INT8)
    exact = search_plan(layer, HW, 0.0, patience=None)
    loose = search_plan(layer, HW, 0.05)
    assert loose.simulated <= exact.simulated
    assert exact.stats.cycles <= loose.stats.cycles <= exact.stats.cycles * 1.05
    assert loose.proven_gap <= 0.05


@settings(max_examples=15, deadline=None)
@given(layer=layers(max_h=12, max_c=64), extra=st.integers(1, 6))
def test_with_one_data_tile_spare_data_banks_time_nothing(layer, extra):
    """The space tries one data-bank count when the layer is one data tile (the fewest that hold it): a
    plan with more data banks and the same weight banks simulates to the same cycles."""
    layer = on(layer, HW)
    for plan in every_legal_plan(layer, HW):
        if footprint(layer, plan, HW).n_data_tiles != 1:
            continue
        wider = dataclasses.replace(plan, data_banks=plan.data_banks + extra)
        if illegal_reason(layer, wider, HW) is None:
            one = simulate_conv(layer, HW, plan, record_events=False).cycles
            assert simulate_conv(layer, HW, wider, record_events=False).cycles == one, (plan, wider)


def test_weight_stationary_kernel_tiles_over_one_band_are_in_the_space():
    """Found by the brute-force test: over one band, kernel tiles of 16 as hardware layers that keep the
    input (their kernels streaming through a 4-bank weight ring: two groups need 7 banks) ran 3 cycles
    faster than one hardware layer (each hardware layer's SDP operand prefetch starts afresh). Tiles of
    22-channel 3x3 kernels are 3,168-byte weight blobs: in 128-byte blocks NVIDIA's RTL mishandled them
    between hardware layers (docs/validation.md 5f); with D_WEIGHT_BYTES in whole CBUF entries they are
    legal again, and the search still finds the brute force's best."""
    layer = on(
        ConvLayer("l", ConvShape(4, 6, 22, 25, 3, 3), Precision.INT8, sdp=SdpSpec(scale=OperandMode.PER_KERNEL)), HW
    )
    ws16 = TilePlan(2, 4, 4, 16, LoopOrder.WEIGHT_STATIONARY)
    assert illegal_reason(layer, ws16, HW) is None
    assert any(
        (p.rows_per_tile, p.kernels_per_tile, p.order) == (4, 16, ws16.order) for p in candidate_plans(layer, HW)
    )
    wide = on(dataclasses.replace(layer, shape=dataclasses.replace(layer.shape, in_c=16, out_k=32)), HW)  # 2,304 B
    assert any((p.rows_per_tile, p.kernels_per_tile, p.order) == (4, 16, ws16.order) for p in candidate_plans(wide, HW))
    best = min(simulate_conv(layer, HW, p, record_events=False).cycles for p in every_legal_plan(layer, HW))
    assert search_plan(layer, HW, 0.0, patience=None).stats.cycles == best


@pytest.mark.parametrize(
    ("tokens", "row", "n", "inputs", "weights"),
    [(4, 2, 32, Memory.SRAM, Memory.DRAM), (16, 16, 100, Memory.DRAM, Memory.SRAM)],
)
def test_the_bounds_hold_with_the_input_and_weights_in_two_memories(tokens, row, n, inputs, weights):
    """Input and weights in different memories move side by side over two ports: the traffic floor takes
    both ports' rates (before 2026-12-05 it moved every byte over one: on nv_small_256_full_rtl_tb's two
    8-byte ports the first case's bound was 3,456 cycles against 3,330 simulated; found by review)."""
    hw = load_config("nv_small_256_full_rtl_tb")
    layer = ConvLayer(
        "l", ConvShape.matmul(tokens, 768, n, row=row), Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL),
        input_memory=inputs, weight_memory=weights,
    )  # fmt: skip
    for plan in candidate_plans(layer, hw):
        assert plan_lower_bound(layer, plan, hw) <= simulate_conv(layer, hw, plan, record_events=False).cycles, plan
