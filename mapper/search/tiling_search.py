"""Search CBUF-legal tile plans for a convolution-pipeline layer, minimising simulated cycles.

Candidates: every data/weight bank split (weights take all banks data does not), output-row tile sizes
(whole height, halvings, and the largest sizes that fit one or two tiles in the data banks), kernel tile
sizes (whole K and halvings in kernel-group units) and both loop orders. Candidates are visited in order
of a roofline lower bound (atomic ops, SDP drain, traffic including the plan's re-fetches over the
fastest port) and pruned once that bound cannot beat the best simulated plan: branch and bound, so the
result equals exhaustive search (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import conv_floor
from nvdla_sim.engine.conv import output_bytes, simulate_conv
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, bytes_per_kernel, footprint, illegal_reason, layer_gap_cycles
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.units import cbuf, cdma


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
    beside the first would never be used. Weight-stationary order across bands (DATA/WEIGHT_REUSE between
    hardware layers) is left out of the search until it is measured on the RTL.
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
    """A floor on simulate_conv(layer, hw, plan).cycles from work and the plan's traffic."""
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
    layers = fp.n_data_tiles * (fp.n_weight_tiles if ws else 1)
    floor = conv_floor(layer, hw, read_bytes=data + weights, write_bytes=output_bytes(layer, s.out_h, s.out_k, hw))
    return floor + (layers - 1) * layer_gap_cycles(hw)


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
