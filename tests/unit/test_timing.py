"""Timing sanity: analytic small cases, compute- and bandwidth-bound limits, and the roofline floor."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_mapper import search_plan
from nvdla_sim import (
    ConvLayer,
    ConvShape,
    Memory,
    PdpLayer,
    PoolMode,
    PoolSpec,
    Precision,
    SdpLayer,
    SdpSpec,
    TilePlan,
    Unit,
    default_plan,
    simulate,
)
from nvdla_sim.engine.tiling import LoopOrder
from nvdla_sim.layers import OperandMode
from nvdla_sim.system.memory import MemoryPort
from nvdla_sim.units.csc import stripe_lengths, weight_load_cycles


def test_memory_port_fills_gaps():
    p = MemoryPort(bytes_per_cycle=10, latency=5)
    assert p.reserve(0, 100) == (0, 10)
    assert p.reserve(20, 50) == (20, 25)
    assert p.reserve(0, 150) == (10, 30)  # fills [10,20) then [25,30)
    assert p.busy_cycles == 30


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), min_size=1, max_size=40))
def test_memory_port_books_the_earliest_free_cycles(requests):
    """Against a calendar of single cycles (a port of one byte a cycle, every request whole bytes): each
    request takes the earliest free cycles at or after its ready time, in booking order; whatever path
    the port takes (appended past every booking, grown from inside its last one, or a walk of the gaps),
    its first and last beat are those cycles', and its busy intervals cover exactly the taken cycles."""
    port = MemoryPort(bytes_per_cycle=1, latency=0)
    taken: set[int] = set()
    for ready, nbytes in requests:
        cycles, t = [], ready
        while len(cycles) < nbytes:
            if t not in taken:
                cycles.append(t)
            t += 1
        taken.update(cycles)
        assert port.reserve(ready, nbytes) == (cycles[0], cycles[-1] + 1)
    booked = {c for s, e in port.booked_after(-1) for c in range(int(s), int(e))}
    assert booked == taken and port.busy_cycles == len(taken)


@given(
    st.sampled_from([0.5, 2.0, 8.0, 64.0]),
    st.lists(st.tuples(st.integers(0, 1200), st.integers(1, 500)), min_size=1, max_size=40),
)
def test_memory_port_at_fractional_times_equals_a_fluid_calendar(rate, requests):
    """At rates and ready times that fall between cycles (quarter cycles; every time a binary fraction, so
    the floats are exact): each booking fills the earliest free time at or after its ready time, compared
    exactly with a calendar of fractions, and the intervals booked merge to the same busy time."""
    from fractions import Fraction

    port = MemoryPort(bytes_per_cycle=rate, latency=0)
    busy: list[tuple[Fraction, Fraction]] = []  # the reference: every booked piece, in time order
    for quarters, nbytes in requests:
        t, need, first = Fraction(quarters, 4), Fraction(nbytes) / Fraction(rate), None
        pieces = []
        for s, e in sorted(busy):
            if e <= t:
                continue
            if s > t:
                take = min(need, s - t)
                pieces.append((t, t + take))
                need -= take
                first = t if first is None else first
                if not need:
                    break
            t = max(t, e)
        if need:
            pieces.append((t, t + need))
            first = t if first is None else first
        busy += pieces
        assert port.reserve(quarters / 4, nbytes) == (first, pieces[-1][1])
    merged: list[list[Fraction]] = []
    for s, e in sorted(busy):
        if merged and merged[-1][1] == s:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    assert [tuple(m) for m in merged] == port.booked_after(-1)


def test_stripe_rule_and_weight_load(nv_full, nv_small):
    # NV_NVDLA_CSC_sg.v: `upper` while 2 x upper are left, all of the rest once <= upper, else `lower`
    assert stripe_lengths(128, 8, 16) == (16,) * 8
    assert stripe_lengths(40, 8, 16) == (16, 8, 16)  # 40 >= 32: 16; 24 in (16, 32): 8; 16 <= 16: the rest
    assert stripe_lengths(7, 8, 16) == (7,)
    assert stripe_lengths(100, 32, 64) == (32, 32, 36)
    assert stripe_lengths(200, 32, 64) == (64, 64, 32, 40)
    assert stripe_lengths(64, 32, 64) == (64,)
    assert stripe_lengths(100, 16, 32) == (32, 32, 16, 20)
    assert weight_load_cycles(nv_full, Precision.INT8) == 16
    assert weight_load_cycles(nv_full, Precision.INT16) == 16
    assert weight_load_cycles(nv_small, Precision.INT8) == 8


def test_analytic_small_matmul(nv_small):
    """16x8x8 on nv_small: one kernel group, one channel block, one 16-long stripe.

    Weights 64 B (D_WEIGHT_BYTES in whole 8-byte CBUF entries: 64 B) + data 128 B arrive over an 8 B/cycle
    port with 50 cycles latency; the stripe computes in 16 cycles, its one channel op, which delivers each
    of its 16 output atoms as it finishes it, at 8 + 1 cycles each (nv_small's CACC reads the next delivery
    entry only after the last left), writes 128 B, plus 7 + 11 pipeline fill; the 38-cycle gap after a
    stripe does not follow the last one. CSC pops the first package's 8 kernels alone and its data
    max(8, 2) cycles later, 6 more than the one-kernel package in the measured pipeline (csc.startup_cycles).
    """
    layer = ConvLayer("mm", ConvShape.matmul(16, 8, 8), Precision.INT8)
    st = simulate(layer, nv_small, TilePlan(16, 16, 1, 8, LoopOrder.DATA_STATIONARY))
    # weights (8 beats) and data (16) interleaved round-robin on the port: the data's last beat leaves at
    # 24; CSC waits for the band's whole input: +50 latency
    compute_start = 24 + 50 + 6
    drain_end = compute_start + 16 * 9  # the drain starts with the stripe's (last) channel op
    assert st.cycles == drain_end + 7 + 11
    assert st.macs == 16 * 8 * 8
    assert st.traffic.dram_read == 64 + 128 and st.traffic.dram_write == 128


def test_compute_bound_approaches_peak(hw):
    layer = ConvLayer("ffn", ConvShape.matmul(512, 1024, 1024), Precision.INT8)
    st = search_plan(layer, hw).stats
    assert st.bound.value == "compute"
    assert st.mac_utilization > 0.9


def test_bandwidth_bound_approaches_dram(nv_full):
    # A GEMV (one token): every weight byte is used once -> DRAM-bound at 64 B/cycle.
    layer = ConvLayer("gemv", ConvShape.matmul(1, 4096, 4096), Precision.INT8)
    st = search_plan(layer, nv_full).stats
    bytes_ = st.traffic.dram_total
    assert st.cycles >= bytes_ / nv_full.dram_bytes_per_cycle
    assert st.cycles < 1.1 * bytes_ / nv_full.dram_bytes_per_cycle + nv_full.memory.dram_latency_cycles + 100


def test_fc_weight_load_bubbles_on_sram(nv_full):
    """FC from on-chip SRAM: one atomic op per 16-cycle weight load -> MAC efficiency 1/16 (unit_description)."""
    layer = ConvLayer(
        "fc", ConvShape.matmul(1, 4096, 1024), Precision.INT8, weight_memory=Memory.SRAM, input_memory=Memory.SRAM
    )
    st = simulate(layer, nv_full, default_plan(layer, nv_full))
    atomics = math.ceil(4096 / 64) * (1024 // 32)
    assert st.detail.weight_load_bubbles == atomics * 15
    assert st.traffic.sram_read > 0 and st.traffic.dram_read == 0


def test_sdp_bound_attention_scores(nv_full):
    """QK^T with head dim 64: 2 atomic ops per 16-output stripe but 32 cycles to drain 16x32 results."""
    layer = ConvLayer("qk", ConvShape.matmul(512, 64, 512), Precision.INT8)
    st = search_plan(layer, nv_full).stats
    assert st.bound.value == "sdp"
    assert st.cycles >= 512 * 512 / 16


@given(
    st.sampled_from(["nv_small", "nv_large", "nv_full"]),
    st.integers(1, 300),
    st.integers(1, 1500),
    st.integers(1, 600),
    st.booleans(),
)
def test_never_faster_than_roofline(configs, name, m, k, n, lut):
    hw = configs[name]
    spec = SdpSpec(lut=lut and hw.sdp.lut, bias=OperandMode.PER_KERNEL)
    layer = ConvLayer("mm", ConvShape.matmul(m, k, n), Precision.INT8, spec)
    for plan in (default_plan(layer, hw), search_plan(layer, hw).plan):
        st = simulate(layer, hw, plan, record_events=False)
        assert st.cycles >= st.lower_bound_cycles
        assert st.cycles >= st.macs / hw.peak_macs_per_cycle(Precision.INT8)
        t = st.traffic  # reads and writes share the port, or overlap on a separate write channel
        moved = max(t.dram_read, t.dram_write) if hw.memory.separate_write_channel else t.dram_total
        assert st.cycles >= moved / hw.dram_bytes_per_cycle
        assert st.units[Unit.CMAC].busy <= st.cycles


@pytest.fixture(scope="module")
def configs():
    from nvdla_sim import load_config

    return {n: load_config(n) for n in ("nv_small", "nv_large", "nv_full")}


def test_standalone_sdp_and_pdp(nv_full):
    sd = simulate(SdpLayer("softmax_exp", 128, 12, 128, Precision.INT8, SdpSpec(lut=True)), nv_full)
    elems = 128 * 12 * 128
    assert sd.cycles >= elems / 4 and sd.cycles < elems / 4 * 1.1 + 2000
    pd = simulate(PdpLayer("pool", 56, 56, 64, Precision.INT8, PoolSpec(PoolMode.MAX, 2, 2, 2, 2)), nv_full)
    assert pd.cycles >= 56 * 56 * 64 / 8
    assert pd.traffic.dram_write == 28 * 28 * 64


def test_events_are_ordered_and_inside_run(nv_full):
    st = simulate(ConvLayer("mm", ConvShape.matmul(128, 768, 768), Precision.INT8), nv_full)
    assert st.events
    for e in st.events:
        assert 0 <= e.start <= e.end <= st.cycles


@given(
    st.lists(
        st.tuples(st.integers(1, 20), st.integers(1, 40), st.integers(0, 40), st.integers(1, 60), st.integers(0, 40)),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 5),
    st.integers(0, 5000),
)
def test_run_closed_form_equals_block_loop(runs, items, nbytes):
    """Runs of identical blocks (closed form) schedule exactly like the same blocks one by one, with a drain
    that may start before the compute ends (lead)."""
    from nvdla_sim.engine.tile_pipeline import BlockRun, Buffer, Channel, Fetch, Item, run_items

    runs = [BlockRun(n, c, min(u, c), d, min(lead, c)) for n, c, u, d, lead in runs]
    expanded = [
        BlockRun(1, r.compute_cycles, r.useful_ops, r.drain_cycles, r.lead) for r in runs for _ in range(r.count)
    ]

    def go(blocks):
        its = [
            Item(
                f"i{i}",
                (Fetch(i, Buffer.CBUF_DATA, Channel.CDMA_DAT, nbytes, Memory.DRAM, "f", streamed=True),),
                (i,),
                blocks,
                64,
                Memory.DRAM,
            )
            for i in range(items)
        ]
        ports = {Memory.DRAM: MemoryPort(8.0, 50)}
        return run_items(
            its,
            capacities={Buffer.CBUF_DATA: 2},
            ports=ports,
            fetch_unit=Unit.CDMA,
            compute_unit=Unit.CMAC,
            drain_unit=Unit.SDP,
            record_events=False,
        )

    a, b = go(tuple(runs)), go(tuple(expanded))
    assert a.end == pytest.approx(b.end, abs=1e-6)
    assert (a.compute_busy, a.compute_bubbles, a.drain_busy) == (b.compute_busy, b.compute_bubbles, b.drain_busy)
    assert a.wait_drain == pytest.approx(b.wait_drain, abs=1e-6)
    assert a.wait_fetch == pytest.approx(b.wait_fetch, abs=1e-6)


# ---- convolution delivery and PDP steps measured on the nv_small RTL (docs/modelling.md) ----------


def test_pdp_steps_follow_the_rtl_probes():
    """Per surface: lines x max(in, out width), plus one output-width pass per output row with at least
    stride_y padded lines below its window (own_pdp_* and the b/c/e probes of docs/modelling.md)."""
    from nvdla_sim.layers import PoolMode, PoolSpec
    from nvdla_sim.units.pdp import line_positions

    def steps(w, h, k, s, pads):
        return line_positions(w, h, PoolSpec(PoolMode.AVG, k, k, 1, s, *pads))

    assert steps(16, 16, 8, 1, (0, 0, 0, 7)) == (16 * 16, 7 * 9)  # 7 flush rows of 9 columns
    assert steps(16, 16, 8, 3, (0, 0, 0, 7)) == (16 * 16, 2 * 9)  # the row with 1 padded line is not one
    assert steps(16, 16, 8, 7, (0, 0, 0, 7)) == (16 * 16, 0)
    assert steps(16, 16, 8, 1, (0, 0, 6, 0)) == (16 * 16, 0)  # top padding costs nothing
    assert line_positions(16, 16, PoolSpec(PoolMode.AVG, 8, 1, 1, 1, 7, 7, 0, 0)) == (16 * 23, 0)  # wider output


def test_timing_flags_are_validated():
    import dataclasses

    from nvdla_sim.config import TimingConfig
    from nvdla_sim.errors import ConfigError

    with pytest.raises(ConfigError, match="timing.conv_input_before_compute must be true or false"):
        TimingConfig(conv_input_before_compute=1)
    with pytest.raises(ConfigError, match="cacc_stripe_gap_cycles"):
        dataclasses.replace(TimingConfig(), cacc_stripe_gap_cycles=-1)


def test_matmul_delivery_closed_form():
    """A delivery-bound 1x1 layer on nv_small: the whole input, then stripes of 16 output atoms at 9
    cycles each plus 38 between stripes (own_mm_m64_k8_n8 on the RTL: 1004 cycles, model 1000)."""
    from nvdla_sim import ConvLayer, ConvShape, Precision, load_config, simulate
    from nvdla_sim.engine.tiling import LoopOrder, TilePlan

    hw = load_config("nv_small_rtl_tb")
    layer = ConvLayer("mm", ConvShape.matmul(256, 8, 8, row=16), Precision.INT8)
    stats = simulate(layer, hw, TilePlan(1, 31, 16, 8, LoopOrder.DATA_STATIONARY), record_events=False)
    stripes = 256 // 16
    delivery = stripes * (16 * 9 + 38) - 38
    fetch = (256 * 8 + 128) / 4  # input then (interleaved) weights at 4 B/cycle
    assert abs(stats.cycles - (fetch + 32 + 16 + delivery)) <= 40
    base = simulate(layer, load_config("nv_small"), TilePlan(1, 31, 16, 8, LoopOrder.DATA_STATIONARY))
    assert base.cycles > delivery  # nv_small.toml carries the same measured delivery parameters


def test_refetch_factor_counts_weights_read_again_per_band(configs):
    """Bytes read over the compulsory reads. A 128 x 256 x 256 INT8 matmul on nv_full (64-pixel rows, so
    2 output rows) tiled one row per band in data-stationary order fetches its 65,536 weight bytes once
    per band: (32,768 input + 2 x 65,536) / (32,768 + 65,536) = 1.6667. With every row in one band the
    weights are read once: 1.0."""
    from nvdla_sim.engine.conv import simulate_conv
    from nvdla_sim.engine.tiling import LoopOrder, TilePlan

    hw = configs["nv_full"]
    layer = ConvLayer("mm", ConvShape.matmul(128, 256, 256), Precision.INT8)
    assert (layer.shape.in_w, layer.shape.out_h) == (64, 2)
    two_bands = simulate_conv(layer, hw, TilePlan(2, 4, 1, 256, LoopOrder.DATA_STATIONARY))
    assert two_bands.traffic.dram_read == 32_768 + 2 * 65_536
    assert two_bands.detail.refetch_factor == pytest.approx(163_840 / 98_304, abs=1e-4)
    one_band = simulate_conv(layer, hw, TilePlan(2, 4, 2, 256, LoopOrder.DATA_STATIONARY))
    assert one_band.detail.refetch_factor == 1.0


def test_cdma_feature_ingest_blocks_one_cycle_per_cbuf_entry():
    """nv_small_256_full: 32-byte CBUF entries from 8-byte beats, one blocked response cycle per entry
    (NV_NVDLA_CDMA_dc.v is_blocking): 32 / (4 + 1) = 6.4 B/cycle, so a one-kernel reduction's 8 KB input
    takes 8192 / 6.4 = 1280 cycles instead of 8192 / 8 = 1024: 256 more, as the RTL's 254 blocked cycles."""
    import dataclasses

    from nvdla_sim.config import load_config
    from nvdla_sim.engine.conv import simulate_conv
    from nvdla_sim.engine.tiling import default_plan
    from nvdla_sim.layers import ConvLayer, ConvShape, Memory
    from nvdla_sim.precision import Precision
    from nvdla_sim.units import cdma

    hw = load_config("nv_small_256_full_rtl_tb")
    assert cdma.feature_ingest_bytes_per_cycle(hw, Memory.DRAM) == 6.4
    assert cdma.feature_ingest_bytes_per_cycle(load_config("nv_full"), Memory.DRAM) == 0.0  # not measured there
    free = dataclasses.replace(hw, timing=dataclasses.replace(hw.timing, cdma_entry_blocked_cycles=0))
    layer = ConvLayer("rowsum", ConvShape.matmul(64, 128, 1), Precision.INT8)

    def fetch(h) -> tuple[int, int]:
        st = simulate_conv(layer, h, default_plan(layer, h), record_events=True)
        (ev,) = [e for e in st.events if e.name.startswith("data")]
        return ev.end - ev.start, st.cycles

    (blocked, cycles), (port, cycles_free) = fetch(hw), fetch(free)
    latency = hw.memory.dram_latency_cycles
    assert (blocked - latency, port - latency) == (1280, 1024)
    assert cycles - cycles_free == 256


def test_cacc_atom_gap_hides_behind_a_slower_sdp():
    """An output atom takes max(kernels / SDP rate, kernels / CACC->SDP width + gap): on nv_small_256_full
    (2-wide path, gap 1) 8 kernels through the LUT (1 element/cycle) take 8 cycles, not 8 + 1; with only
    the bias stage (2 a cycle) 8 / 2 + 1 = 5. Stripes of 16 output points: 128 and 80 cycles."""
    from nvdla_sim.config import load_config
    from nvdla_sim.engine.conv import group_blocks
    from nvdla_sim.layers import ConvLayer, ConvShape, SdpSpec
    from nvdla_sim.precision import Precision

    hw = load_config("nv_small_256_full_rtl_tb")
    drains = []
    for spec in (SdpSpec(lut=True), SdpSpec(bias=OperandMode.PER_KERNEL)):
        (run,) = group_blocks(ConvLayer("f", ConvShape.matmul(64, 128, 16), Precision.INT8, spec), hw, 1, 8)
        drains.append((run.count, run.drain_cycles))
    assert drains == [(4, 16 * 8), (4, 16 * 5)]


def test_operand_prefetch_is_the_builds_latency_fifo():
    """Beats in flight per SDP operand RDMA times the beat: nv_small 160 x 8 B, nv_small_256_full 16 x 8 B
    (MCIF tieoff_depth_sdp_e 16), nv_large 256 x 32 B (256); a config below the spec's minimum of 4 is refused."""
    import dataclasses

    from nvdla_sim.config import ConfigError, SdpConfig, load_config
    from nvdla_sim.units import sdp

    got = {
        n: sdp.operand_prefetch_bytes(load_config(n))
        for n in ("nv_small_rtl_tb", "nv_small_256_full_rtl_tb", "nv_large_rtl_tb")
    }
    assert got == {"nv_small_rtl_tb": 1280, "nv_small_256_full_rtl_tb": 128, "nv_large_rtl_tb": 8192}
    with pytest.raises(ConfigError, match="sdp.operand_fifo_beats must be"):
        dataclasses.replace(load_config("nv_large").sdp, operand_fifo_beats=2)
    assert isinstance(load_config("nv_full").sdp, SdpConfig)
