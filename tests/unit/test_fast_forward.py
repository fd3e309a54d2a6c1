"""The periodic steady state of run_items (tile_pipeline._FastForward): jumping over identical items must
give exactly what timing them one by one gives (the reference: the same function with
SteadyState(items=False)), and it must actually jump where items repeat."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nvdla_sim.engine.tile_pipeline as tp
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.engine.conv import simulate_conv
from nvdla_sim.engine.stats import Unit
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import BlockRun, Buffer, Channel, Fetch, Item, run_items
from nvdla_sim.engine.tiling import LoopOrder, TilePlan
from nvdla_sim.layers import Memory, SdpLayer
from nvdla_sim.processors import simulate
from nvdla_sim.system.memory import MemoryPort, memory_model

ITEM_BY_ITEM = SteadyState(items=False)  # the reference: no jump over alike items
EVERY_CHUNK = SteadyState(stream_cut=0)  # streams run chunk by chunk (with their jumps), not cut


def _stream(
    n: int, nbytes: int, compute: int, drain: int, cap: int, bpc: float, latency: int, write: int,
    steady: SteadyState = STEADY,
):  # fmt: skip
    items = [
        Item(
            f"i{i}",
            (Fetch(i, Buffer.CBUF_DATA, Channel.CDMA_DAT, nbytes, Memory.DRAM, "f"),),
            (i,),
            (BlockRun(1, compute, compute, drain),),
            write,
            Memory.DRAM,
        )
        for i in range(n)
    ]
    ports = {Memory.DRAM: MemoryPort(bpc, latency)}
    res = run_items(
        items, capacities={Buffer.CBUF_DATA: cap}, ports=ports, fetch_unit=Unit.CDMA, compute_unit=Unit.CMAC,
        drain_unit=Unit.SDP, record_events=False, steady=steady,
    )  # fmt: skip
    return res, ports[Memory.DRAM]


def test_fetch_bound_stream_by_hand():
    """100 items each fetching 256 B over an 8 B/cycle port (32 cycles) with 50 cycles of latency, computing
    10 and draining 5 cycles. With three slots the port is the bottleneck (item i + 3 needs item i's slot
    at 32 i + 92, the channel is free only at 32 i + 96): item i's data arrives at 32 (i + 1) + 50, so the
    last ends at 32 x 100 + 50 + 10 + 5 = 3,265. With two slots each slot turns in 32 + 50 + 10 = 92
    cycles: odd item i computes until 124 + 92 (i - 1) / 2, item 99 until 4,632, drained at 4,637. The
    runs jump over all but the items before the steady state and the last."""
    res, port = _stream(100, 256, 10, 5, 3, 8.0, 50, 0)
    assert res.end == 32 * 100 + 50 + 10 + 5
    assert res.compute_busy == 100 * 10 and res.drain_busy == 100 * 5
    assert port.busy_cycles == 100 * 32 and port.bytes_moved == 100 * 256
    assert res.skipped > 90
    res, _ = _stream(100, 256, 10, 5, 2, 8.0, 50, 0)
    assert res.end == 124 + 92 * 49 + 5
    assert res.skipped > 90


def test_compute_bound_stream_by_hand():
    """Compute 40 cycles per item, fetch 8 cycles, one slot: an item's fetch waits for the previous item's
    compute to release the slot. Item 0: fetch 0-8, arrives 18 (latency 10), computes 18-58; item i's
    fetch starts when item i-1 releases, 58 + 48 (i - 1) for i >= 1, arrives 18 later and computes 40:
    each item takes 8 + 10 + 40 = 58 cycles after the release, so the last of 50 ends at 58 x 50 + 0 drain."""
    res, _ = _stream(50, 64, 40, 0, 1, 8.0, 10, 0)
    assert res.end == 58 * 50
    assert res.skipped > 40


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 60),
    nbytes=st.integers(0, 2000),
    compute=st.integers(0, 50),
    drain=st.integers(0, 50),
    cap=st.integers(1, 5),
    bpc=st.sampled_from([8.0, 32.0, 64.0, 20.0, 12.5]),
    latency=st.integers(0, 300),
    write=st.integers(0, 1000),
)
def test_stream_equals_item_by_item(n, nbytes, compute, drain, cap, bpc, latency, write):
    a, pa = _stream(n, nbytes, compute, drain, cap, bpc, latency, write)
    b, pb = _stream(n, nbytes, compute, drain, cap, bpc, latency, write, ITEM_BY_ITEM)
    assert dataclasses.replace(a, skipped=0, ports={}, last_jump=None) == dataclasses.replace(b, ports={})
    assert (pa.busy_cycles, pa.bytes_moved, pa.last_beat) == (pb.busy_cycles, pb.bytes_moved, pb.last_beat)


def _same_stats(a, b) -> None:
    assert (a.cycles, a.traffic, a.units, a.bound, a.detail, a.plan) == (
        b.cycles,
        b.traffic,
        b.units,
        b.bound,
        b.detail,
        b.plan,
    )


@settings(max_examples=40, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large", "nv_small_256_full_rtl_tb"]),
    rows=st.integers(1, 20),
    k=st.sampled_from([8, 64, 200, 768, 3072]),
    n=st.integers(1, 1200),
    pick=st.integers(0, 10_000),
)
def test_convolutions_equal_item_by_item(hw, rows, k, n, pick):
    """Every plan of the search space, on every build: the same stats with and without the jumps."""
    from nvdla_mapper.search.tiling_search import candidate_plans

    cfg = load_config(hw)
    layer = ConvLayer("mm", ConvShape.matmul(16 * rows, k, n, row=16), Precision.INT8)
    plans = candidate_plans(layer, cfg)
    plan = plans[pick % len(plans)]
    a = simulate_conv(layer, cfg, plan, record_events=False)
    b = simulate_conv(layer, cfg, plan, record_events=False, steady=ITEM_BY_ITEM)
    _same_stats(a, b)


@pytest.mark.parametrize("hw", ["nv_small", "nv_full"])
def test_large_layers_jump_and_agree(hw, monkeypatch):
    """A long matmul (many kernel groups) and a long SDP stream with a per-element operand: the jumps
    happen, and nothing changes. (A run whose rings are still filling when it ends has no steady state
    and is timed item by item.)"""
    import nvdla_sim.engine.conv as conv
    import nvdla_sim.engine.simulate as sim
    from nvdla_mapper.search.tiling_search import search_plan
    from nvdla_sim.layers import OperandMode, SdpSpec

    skipped = []

    def counting(items, **kw):
        res = run_items(items, **kw)
        skipped.append(res.skipped)
        return res

    monkeypatch.setattr(conv, "run_items", counting)
    monkeypatch.setattr(sim, "run_items", counting)
    cfg = load_config(hw)
    # more kernel groups than the weight ring holds (nv_full's ring takes 60 of 128): a steady state
    layer = ConvLayer("mm", ConvShape.matmul(64, 256, 8192, row=16), Precision.INT8)
    plan = search_plan(layer, cfg).plan
    stream = SdpLayer("s", 512, 64, 64, Precision.INT8, SdpSpec(bias=OperandMode.PER_ELEMENT, relu=True))
    for run in (
        lambda steady: simulate_conv(layer, cfg, plan, record_events=False, steady=steady),
        lambda steady: simulate(stream, cfg, record_events=False, steady=steady),
    ):
        skipped.clear()
        a = run(STEADY)
        assert sum(skipped) > 0
        b = run(ITEM_BY_ITEM)
        _same_stats(a, b)


def test_credit_paced_operand_streams_jump_and_agree(monkeypatch):
    """A decode step's GEMV with a per-kernel bias on nv_full: past the SDP RDMA's prefetch each item's
    bias streams at the credits' pace (sdp.operand_stream_cycles, not a dyadic fraction of a cycle: 64
    bytes in 7.5875 cycles here, rounded up to the 2**-16 grid), so the credit clock is part of the
    state. The run jumps over most of its 256 kernel groups (before the rounding it skipped 134: once
    the clock left the grid every later item ran one by one), and gives what timing them one by one gives."""
    import nvdla_sim.engine.conv as conv
    from nvdla_sim.layers import OperandMode, SdpSpec
    from nvdla_sim.units import sdp

    skipped = []

    def counting(items, **kw):
        res = run_items(items, **kw)
        skipped.append((len(items), res.skipped))
        return res

    monkeypatch.setattr(conv, "run_items", counting)
    cfg = load_config("nv_full")
    spec = SdpSpec(bias=OperandMode.PER_KERNEL)
    layer = ConvLayer("gemv", ConvShape.matmul(1, 768, 8192, row=1), Precision.INT8, sdp=spec)
    paced = sdp.operand_stream_cycles(
        spec,
        cfg,
        pixels=1,
        channels=32,
        operand_bytes=1,
        memory=Memory.DRAM,
        latency=memory_model(cfg).latency(Memory.DRAM),
    )
    assert not tp.on_grid(paced) and tp.on_grid(tp.up_to_grid(paced)) and 0 < tp.up_to_grid(paced) - paced < 2**-16
    plan = TilePlan(1, 15, 1, 8192, LoopOrder.DATA_STATIONARY)
    a = simulate_conv(layer, cfg, plan, record_events=False)
    assert skipped == [(256, skipped[0][1])] and skipped[0][1] > 200
    b = simulate_conv(layer, cfg, plan, record_events=False, steady=ITEM_BY_ITEM)
    _same_stats(a, b)


def _stream_stats(st) -> tuple:
    return (st.cycles, st.traffic, st.units, st.bound, st.lower_bound_cycles, st.detail)


@settings(max_examples=25, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large", "nv_small_256_full_rtl_tb"]),
    kind=st.sampled_from(["lut", "residual", "normalize", "bias", "pool"]),
    w=st.sampled_from([63, 64]),
    h=st.integers(64, 200),
    c=st.integers(600, 2000),  # over 1,024 chunks of 2 KB: every example is cut
    fp16=st.booleans(),
)
def test_long_streams_cut_to_whole_periods_equal_every_chunk(hw, kind, w, h, c, fp16):
    """A stream of more chunks than SteadyState.stream_cut is timed from a cut of it and whole periods of its
    steady state (extend_periods): every figure equals running every chunk."""
    from nvdla_sim.layers import OperandMode, PdpLayer, PoolMode, PoolSpec, SdpSpec

    cfg = load_config(hw)
    p = Precision.FP16 if fp16 and Precision.FP16 in cfg.precisions else Precision.INT8
    specs = {
        "lut": SdpSpec(lut=True),
        "residual": SdpSpec(eltwise=OperandMode.PER_ELEMENT),
        "normalize": SdpSpec(bias=OperandMode.PER_KERNEL, scale=OperandMode.PER_KERNEL, eltwise=OperandMode.PER_ELEMENT),
        "bias": SdpSpec(bias=OperandMode.PER_ELEMENT, relu=True),
    }  # fmt: skip
    if kind == "pool":
        if w < 2 or h < 2:  # a 2 x 2 window needs two pixels each way
            return
        layer = PdpLayer("p", w, h, c, p, PoolSpec(PoolMode.MAX, 2, 2, 1, 1))
    else:
        if (specs[kind].uses_y and cfg.sdp.ew_throughput == 0) or (specs[kind].lut and not cfg.sdp.lut):
            return
        layer = SdpLayer("s", w, h, c, p, specs[kind])
    a = simulate(layer, cfg, record_events=False)
    b = simulate(layer, cfg, record_events=False, steady=EVERY_CHUNK)
    assert a.detail.chunks > 1024
    assert _stream_stats(a) == _stream_stats(b)


def test_a_long_stream_is_cut():
    """BERT-base's softmax exp at 8,192 tokens on nv_full (393,216 chunks) runs a cut of about a
    thousand chunks and the same figures."""
    import nvdla_sim.engine.simulate as sim
    from nvdla_sim.layers import SdpSpec

    cfg = load_config("nv_full")
    layer = SdpLayer("exp", 64, 1536, 8192, Precision.INT8, SdpSpec(lut=True))
    ran = []
    real = sim.run_items

    def counting(items, **kw):
        ran.append(len(items))
        return real(items, **kw)

    sim.run_items = counting
    try:
        a = simulate(layer, cfg, record_events=False)
    finally:
        sim.run_items = real
    assert a.detail.chunks == 64 * 1536 * 8192 // 2048 and max(ran) < 2 * STEADY.stream_cut
    # SDP-bound: 805,306,368 elements at nv_full's 4 LUT elements a cycle, plus the first chunk's fetch
    elements = 64 * 1536 * 8192
    assert cfg.sdp.ew_throughput == 4 and 0 < a.cycles - elements // 4 < 2_000
    assert a.traffic.dram_read == elements and a.traffic.dram_write == elements


@pytest.mark.parametrize("hw", ["nv_small", "nv_full"])
def test_every_skip_off_gives_the_same_figures(hw):
    """steady.ONE_BY_ONE (no jump over items or layers, no stream cut: every item and chunk timed) against
    the default on a banded matmul and a stream longer than the default's cut: the same figures."""
    from nvdla_mapper.search.tiling_search import search_plan
    from nvdla_sim.engine.steady import ONE_BY_ONE
    from nvdla_sim.layers import SdpSpec

    cfg = load_config(hw)
    layer = ConvLayer("mm", ConvShape.matmul(512, 256, 1024, row=16), Precision.INT8)
    plan = search_plan(layer, cfg).plan
    a = simulate_conv(layer, cfg, plan, record_events=False)
    b = simulate_conv(layer, cfg, plan, record_events=False, steady=ONE_BY_ONE)
    _same_stats(a, b)
    stream = SdpLayer("exp", 64, 64, 1024, Precision.INT8, SdpSpec(relu=True))
    a, b = (simulate(stream, cfg, record_events=False, steady=s) for s in (STEADY, ONE_BY_ONE))
    assert a.detail.chunks > STEADY.stream_cut and _stream_stats(a) == _stream_stats(b)
