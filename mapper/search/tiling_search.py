"""Search CBUF-legal tile plans for a convolution-pipeline layer, minimising simulated cycles.

Candidates (candidate_plans): bands of output rows, each band a full-input hardware layer with the
smallest data-bank count that holds it and every other bank for the weight ring. Candidates are visited
in order of a lower bound (atomic ops after the first band's input can arrive, plus what hardware-layer
boundaries without room in CBUF cannot hide; SDP drain; traffic including the plan's re-fetches) and
pruned once that bound cannot beat the best simulated plan: branch and bound, so the result equals
simulating every candidate (property test in tests/unit/test_tiling_search.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import atomic_ops, conv_floor
from nvdla_sim.engine.conv import output_bytes, simulate_conv
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.engine.tile_pipeline import make_ports
from nvdla_sim.engine.tiling import (
    Footprint,
    LoopOrder,
    TilePlan,
    bytes_per_kernel,
    footprint,
    illegal_reason,
    kernel_tiles,
    layer_gap_cycles,
    row_tiles,
)
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.units import cbuf, cdma
from nvdla_sim.units.dram import MemoryPort


@dataclass(frozen=True)
class SearchResult:
    plan: TilePlan
    stats: LayerStats  # of the best plan, without timeline events (simulate again to record them)
    candidates: int  # legal candidates considered
    simulated: int  # of which simulated (the rest pruned by the bound)


def _halvings(n: int, unit: int = 1) -> list[int]:
    out, v = [], n
    while v >= unit:
        out.append(v)
        nxt = max(unit, math.ceil(v / 2 / unit) * unit)
        if nxt == v:
            break
        v = nxt
    return out


def candidate_plans(layer: ConvLayer, hw: HwConfig) -> list[TilePlan]:
    """Legal plans of the search space, without dominated ones: one hardware layer per band of output
    rows (full-input mode), all kernels through the weight ring.

    For a row tiling, only the smallest data-bank count that holds its band matters: more data banks only
    take banks from the weight ring, and bands are separate hardware layers, so a second band buffered
    beside the first would never be used (with the hardware layers now overlapping when CBUF has room,
    that is no longer strictly true). Weight-stationary order across bands (DATA/WEIGHT_REUSE between
    hardware layers, measured on the RTL: validation/data/nvdla_rtl_reuse.json) and rings shallower than
    every remaining bank are not searched yet: over every legal plan the search took minutes on
    ViT-B/16 (docs/mapping.md, status of issue 27).
    """
    s = layer.shape
    banks, epb = hw.cbuf.bank_count, hw.cbuf_entries_per_bank
    eps = max(cbuf.entry_per_slice(s.in_w, s.in_c, layer.precision, hw), 1)
    rows_opts = set(_halvings(s.out_h))
    for data_banks in range(1, banks):
        r = (data_banks * epb // eps - s.kernel_h_dilated) // s.stride_y + 1
        if 1 <= r <= s.out_h:
            rows_opts.add(r)
    plans: set[TilePlan] = set()
    for rows in rows_opts:
        probe = TilePlan(1, banks - 1, rows, s.out_k)
        data_banks = cbuf.banks_for(footprint(layer, probe, hw).data_tile_entries, hw)
        if data_banks < banks:
            plan = TilePlan(data_banks, banks - data_banks, rows, s.out_k, LoopOrder.DATA_STATIONARY)
            if illegal_reason(layer, plan, hw) is None:
                plans.add(plan)
    return sorted(plans, key=lambda p: (p.data_banks, p.rows_per_tile, p.kernels_per_tile, p.order.value))


def plan_lower_bound(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> int:
    """A floor on simulate_conv(layer, hw, plan).cycles from work and the plan's traffic (hardware layers
    may overlap, so their launches add nothing to the floor)."""
    s = layer.shape
    fp = footprint(layer, plan, hw)
    data = sum(
        cdma.input_bytes(layer, b - a, hw)
        for a, b in (
            s.input_rows_for(r0, min(s.out_h, r0 + plan.rows_per_tile)) for r0 in range(0, s.out_h, plan.rows_per_tile)
        )
    )
    ws = plan.order is LoopOrder.WEIGHT_STATIONARY
    if ws and fp.n_data_tiles > 1:
        data *= fp.n_weight_tiles
    weights = cdma.weight_bytes(s.out_k, bytes_per_kernel(layer))
    if layer.weight_bytes is not None:
        weights = layer.weight_bytes
    if not ws:
        weights *= fp.n_data_tiles  # every band is a hardware layer that fetches its weights
    floor = conv_floor(layer, hw, read_bytes=data + weights, write_bytes=output_bytes(layer, s.out_h, s.out_k, hw))
    port = make_ports(hw)[layer.input_memory]
    serial = _serial_boundaries(layer, plan, hw, fp, port)
    start = _first_compute_floor(layer, plan, hw, fp, port)
    return max(floor, start + atomic_ops(layer, hw) + _tail_cycles(hw) + serial)


def _serial_boundaries(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint, port: MemoryPort) -> int:
    """Cycles no plan hides at its hardware-layer boundaries where the next layer's fetches have no room
    in CBUF beside the previous layer's (simulate_conv's _room_beside): there the next layer starts after
    the previous one's tail, interrupt and launch (layer_gap_cycles), then waits at least one memory
    latency plus its smallest band's input before it computes."""
    s = layer.shape
    bands = fp.n_data_tiles
    data_room = fp.data_capacity_tiles >= 2
    rate, latency = port.bytes_per_cycle, port.latency
    rows = min(b - a for a, b in (s.input_rows_for(r0, r1) for r0, r1 in row_tiles(layer, plan.rows_per_tile)))
    band_in = latency + math.floor(cdma.input_bytes(layer, rows, hw) / rate)
    step = layer_gap_cycles(hw) + _tail_cycles(hw)
    kpg = hw.kernels_per_atomic(layer.precision)
    n_groups = math.ceil(s.out_k / kpg)
    if plan.order is LoopOrder.DATA_STATIONARY:
        if bands == 1 or (data_room and 2 * n_groups <= fp.weight_capacity_groups):
            return 0
        return (bands - 1) * (step + band_in)
    total = 0
    if bands > 1 and not data_room:  # every band after the first of each tile fetches its input
        total += fp.n_weight_tiles * (bands - 1) * (step + band_in)
    sizes = [math.ceil((b - a) / kpg) for a, b in kernel_tiles(layer, plan.kernels_per_tile)]
    for held, fetched in itertools.pairwise(sizes):  # tile boundaries: the next tile's groups
        if (bands > 1 and not data_room) or held + fetched > fp.weight_capacity_groups:
            total += step + (band_in if bands > 1 else latency)
    return total


def _first_compute_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint, port: MemoryPort) -> int:
    """No compute starts before the first band's whole input is in (CSC waits for it:
    TimingConfig.conv_input_before_compute, measured). CDMA fetches the kernel groups the weight ring
    holds alongside, round-robin on the same port, so the input arrives one memory latency plus (input
    + the smaller of input and those weights) / port rate after the start."""
    if not hw.timing.conv_input_before_compute or layer.data_resident:
        return 0
    s = layer.shape
    i0, i1 = s.input_rows_for(0, min(s.out_h, plan.rows_per_tile))
    data = cdma.input_bytes(layer, i1 - i0, hw)
    weights = 0
    if layer.input_memory is layer.weight_memory and not layer.weights_resident and layer.weight_bytes is None:
        kpg = hw.kernels_per_atomic(layer.precision)
        first_layer = (
            fp.groups_per_weight_tile if plan.order is LoopOrder.WEIGHT_STATIONARY else math.ceil(s.out_k / kpg)
        )
        kernels = min(s.out_k, min(fp.weight_capacity_groups, first_layer) * kpg)
        weights = kernels * bytes_per_kernel(layer)
    return port.latency + math.floor((data + min(data, weights)) / port.bytes_per_cycle)


def _tail_cycles(hw: HwConfig) -> int:
    """After its last atomic op a layer ends no sooner than the MAC pipeline and CACC drain it (simulate_conv
    ends a hardware layer at its last item's end plus this)."""
    return max(0, hw.mac.pipeline_cycles + hw.cacc.rmw_cycles - hw.timing.cacc_stripe_gap_cycles)


@lru_cache(maxsize=4096)
def search_plan(layer: ConvLayer, hw: HwConfig) -> SearchResult:
    """Best plan by simulated cycles (ties: fewer DRAM bytes, then fewer data banks)."""
    plans = candidate_plans(layer, hw)
    if not plans:
        raise ShapeError(
            f"{layer.name}: no CBUF-legal tiling on {hw.name} ({hw.cbuf.bank_count} banks x "
            f"{hw.cbuf_entries_per_bank} entries): one output row or one kernel group does not fit; "
            "split the layer's input channels"
        )
    ranked = sorted(plans, key=lambda pl: plan_lower_bound(layer, pl, hw))
    best: tuple[tuple[int, ...], TilePlan, LayerStats] | None = None
    simulated = 0
    for plan in ranked:
        if best is not None and plan_lower_bound(layer, plan, hw) > best[0][0]:
            break
        st = simulate_conv(layer, hw, plan, record_events=False)
        simulated += 1
        traffic = st.traffic.dram_total + st.traffic.sram_read + st.traffic.sram_write
        key = (st.cycles, traffic, plan.data_banks, -plan.rows_per_tile, -plan.kernels_per_tile)
        if best is None or key < best[0]:
            best = (key, plan, st)
    assert best is not None
    return SearchResult(best[1], best[2], len(plans), simulated)


def exhaustive_plan(layer: ConvLayer, hw: HwConfig) -> tuple[TilePlan, int]:
    """Reference for tests: simulate every candidate; return (best plan, its cycles)."""
    best = None
    for plan in candidate_plans(layer, hw):
        c = simulate_conv(layer, hw, plan, record_events=False).cycles
        if best is None or c < best[1]:
            best = (plan, c)
    if best is None:
        raise ShapeError(f"{layer.name}: no legal tiling on {hw.name}")
    return best


def naive_plan(layer: ConvLayer, hw: HwConfig) -> TilePlan:
    """A plan with no reuse thinking: CBUF split in half, one output row and one kernel group per tile,
    weight-stationary (so data is re-fetched for every kernel group). Falls back to legal variants."""
    s = layer.shape
    kpg = hw.kernels_per_atomic(layer.precision)
    half = hw.cbuf.bank_count // 2
    for order in (LoopOrder.WEIGHT_STATIONARY, LoopOrder.DATA_STATIONARY):
        for db in range(half, hw.cbuf.bank_count):
            plan = TilePlan(db, hw.cbuf.bank_count - db, 1, min(kpg, s.out_k), order)
            if illegal_reason(layer, plan, hw) is None:
                return plan
    return search_plan(layer, hw).plan
