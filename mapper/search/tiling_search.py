"""Search CBUF-legal tile plans for a convolution-pipeline layer, minimising simulated cycles.

The space (candidate_plans) is every way NVDLA's convolution pipeline can run the layer as a sequence of
hardware layers in full-input mode: a band height (every band count, split as evenly as it goes), every
CBUF split into data banks and weight banks, including banks left unused (every distinct weight-ring
depth: a deeper ring prefetches more and a shallower one lets the input in sooner on builds that fetch
it whole before computing, NVIDIA's nv_small RTL: tf_proj_m64_k256_n64 runs 12% faster with one weight
bank), and the order across bands: data-stationary (one hardware layer per band, every kernel through
the weight ring) or weight-stationary (a kernel tile stays in CBUF, SKIP_WEIGHT_RLS then WEIGHT_REUSE,
while every band runs against it: one hardware layer per band and kernel tile; with one band, the input
stays, SKIP_DATA_RLS then DATA_REUSE, across the kernel tiles, every tile size, each hardware layer's
kernels streaming through the weight ring when they do not all fit). With one data tile, data banks
past those the tile needs time nothing (14,590 plans checked; property test), so only that split's data
banks are tried.
Both orders and the reuse rules are measured on NVIDIA's RTL (validation/data/nvdla_rtl_reuse.json,
nvdla_rtl_transformer.json).

The search is branch and bound: a family of plans (one band height, order and kernel tile, over every
bank split) has a lower bound that no member beats; families and then plans are visited best bound first
and simulated until the next bound cannot beat the best plan by more than `gap` (a relative optimality
gap: the plan returned is proven within it of the best legal plan). With gap=0 the result equals
simulating every candidate (property test in tests/unit/test_tiling_search.py).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import conv_floor
from nvdla_sim.engine.conv import (
    core_floor,
    group_blocks,
    group_delivery,
    instances_cycles,
    output_bytes,
    regroup_cycles,
    simulate_conv,
    simulate_instances,
)
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.engine.tile_pipeline import make_ports
from nvdla_sim.engine.tiling import (
    Footprint,
    LoopOrder,
    TilePlan,
    bytes_per_kernel,
    footprint,
    illegal_reason,
    row_tiles,
    tile_sizes,
)
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer, Memory
from nvdla_sim.system.memory import memory_model
from nvdla_sim.units import cbuf, cdma, csc, sdp

# Relative optimality gap of search_plan: stop once no remaining plan can be more than this much faster
# than the best simulated one (SearchResult.proven_gap says how close it proved). 0.1%, an eighth of the
# model's median error against NVIDIA's RTL: since session 18's bounds, a GEMV projection's plans all lie
# within 0.05% of their bound, so with gap 0 the search simulated its whole 150-plan budget to return a
# plan proven only to 0.05-0.4%; with 0.1% it stops after a few (TinyLlama's 24 decode steps 13.5 ->
# 5.4 s; GPT-2 128 + 128 on nv_full 336,180,072 -> 336,180,328 cycles, +0.00008%; BERT-base s128 and
# ViT-B/16 unchanged). Tests of the search itself pass gap=0.
DEFAULT_GAP = 0.001
# Plans search_plan simulates at most before it returns the best so far with its proven gap. Where the
# bounds are tight (transformer layers) it stops long before. On the primer's 256-MAC build ResNet-50's
# 1x1 layers with a residual have loose bounds (proven gaps 11-114%): 14x14x256->1024 has 38,051 plans,
# 10,864 with a bound below the best (160 s of simulation); the best of the first 100 simulated is within
# 0.1% of it and the first 500 hold it, on that layer and on 28x28x128->512, 7x7x512->2048 and
# 56x56x256->512 (docs/mapping.md). Over the 51 zoo mappings (17 presets x nv_small/large/full) the
# plan search_plan returns was met within 92 simulations in 95% of 518 searches (27 of those mappings), 236 at
# the 99th percentile (found_at); 150 changes the end-to-end cycles of 9 mappings by at most 0.11%
# (ViT-B/16 on nv_full) against 500, and halves the slowest mapping (ViT-B/16 on nv_large: 8.0 -> 4.3 s).
DEFAULT_BUDGET = 150
# After this many simulated plans the search also stops once no remaining plan can be more than this much
# faster (SearchResult.proven_gap still says how close it proved). The decode step's GEMV layers (m = 1) are
# where it acts: every plan of theirs times within 0.03% of the others, but their floor leaves out the bias
# reads and the output writes that share the port with the weights (0.3-0.4% of a projection, 0.12% of an LM
# head piece), so the 0.1% gap was never proven and each search ran its whole budget: GPT-2 128 + 128 on
# nv_full spent 1.9 of its 2.6 s cold there. With (20, 0.5%) those searches stop after 20 plans; the run
# takes 0.8-1.0 s and its cycles move by +0.01% (345,459,813 -> 345,493,493); 0.5% is within the model's
# per-layer error against NVIDIA's RTL (medians 0.2-0.8% over the suites, docs/validation.md). None: only
# the gap and the budget stop the search (tests of the search itself; gap 0 alone is not exact without it).
DEFAULT_PATIENCE: tuple[int, float] | None = (20, 0.005)


class _PortRate(NamedTuple):
    """A memory port's latency and rate, all the bounds read of it."""

    latency: int
    bytes_per_cycle: float


@lru_cache(maxsize=64)
def _rates(hw: HwConfig) -> dict[Memory, _PortRate]:
    """Every memory port's latency and rate, the most it carries (the memory model's: a run's port may be slower
    for its mix of clients, memory.DramMemory; make_ports builds stateful calendars; the bounds only read)."""
    memory = memory_model(hw)
    return {m: _PortRate(memory.latency(m), memory.bytes_per_cycle(m)) for m in make_ports(hw)}


@dataclass(frozen=True)
class SearchResult:
    plan: TilePlan
    stats: LayerStats  # of the best plan, without timeline events (simulate again to record them)
    candidates: int  # legal plans in the space
    simulated: int  # of which simulated (the rest pruned by their bound)
    proven_gap: float  # the best plan is at most this fraction slower than any legal plan (0: proven best)
    found_at: int = 0  # how many simulations the search had run when it met the plan it returns


@dataclass(frozen=True)
class _Family:
    """Plans that differ only in the CBUF bank split: data banks lo..hi, and for each, weight banks from
    the fewest the order needs to the rest of CBUF (`splits`, every (data, weight) pair that times
    differently)."""

    rows: int
    kernels: int
    order: LoopOrder
    lo: int
    hi: int
    splits: tuple[tuple[int, int], ...]

    def plan(self, data_banks: int, weight_banks: int) -> TilePlan:
        return TilePlan(data_banks, weight_banks, self.rows, self.kernels, self.order)

    def plans(self, hw: HwConfig) -> list[TilePlan]:
        return [self.plan(d, w) for d, w in self.splits]

    @property
    def deep(self) -> TilePlan:
        """The deepest weight ring: fewest data banks, every other bank for weights."""
        return self.plan(*max(self.splits, key=lambda dw: (dw[1], -dw[0])))

    @property
    def shallow(self) -> TilePlan:
        """The shallowest weight ring (the least weight prefetched before the first compute)."""
        return self.plan(*min(self.splits, key=lambda dw: (dw[1], -dw[0])))


def _splits(lo: int, hi: int, w_lo: int, banks: int, g_entries: int, cap_limit: int, hw: HwConfig):
    """(data, weight) bank pairs: every data bank count lo..hi with, for each, the most weight banks of
    every distinct ring depth from w_lo banks up to the rest of CBUF. A deeper ring prefetches more
    kernel groups (and on builds that fetch the whole input before computing, delays the first compute:
    NVIDIA's nv_small RTL, tf_proj_m64_k256_n64 runs 12% faster with one weight bank than with 28); past
    `cap_limit` groups (what two hardware layers use) more banks change nothing, and a bank left unused
    is a ring depth of its own."""
    out = []
    epb = hw.cbuf_entries_per_bank
    for d in range(lo, hi + 1):
        seen = set()
        for w in range(banks - d, w_lo - 1, -1):
            depth = min(w * epb // g_entries, cap_limit)
            if depth not in seen:
                seen.add(depth)
                out.append((d, w))
    return tuple(out)


def _families(layer: ConvLayer, hw: HwConfig) -> list[_Family]:
    s = layer.shape
    banks = hw.cbuf.bank_count
    kpg = hw.kernels_per_atomic(layer.precision)
    g_entries = cbuf.weight_entries(min(kpg, s.out_k), bytes_per_kernel(layer), hw)
    tiles = sorted({*range(kpg, s.out_k + 1, kpg), s.out_k}, reverse=True)
    w_min = cbuf.banks_for(g_entries, hw)  # the weight ring holds at least one kernel group
    n_groups = math.ceil(s.out_k / kpg)
    out: list[_Family] = []
    for rows in range(s.out_h, 0, -1):
        probe = footprint(layer, TilePlan(1, banks - 1, rows, s.out_k), hw)
        lo = cbuf.banks_for(probe.data_tile_entries, hw)
        if lo > banks - w_min:
            continue
        one_tile = probe.n_data_tiles == 1
        hi = lo if one_tile else banks - w_min
        ds = _splits(lo, hi, w_min, banks, g_entries, 2 * n_groups, hw)
        out.append(_Family(rows, s.out_k, LoopOrder.DATA_STATIONARY, lo, hi, ds))
        for kernels in tiles:  # with one band: kernel tiles as hardware layers keeping the input (DATA_REUSE)
            if kernels == s.out_k and probe.n_data_tiles == 1:
                continue  # the data-stationary plan itself
            groups = math.ceil(kernels / kpg)
            # over several data tiles the kernel tile stays resident; over one it may stream through the ring
            need = w_min if one_tile else cbuf.banks_for(groups * g_entries, hw)
            if banks - need >= lo:
                top = lo if one_tile else banks - need
                ws = _splits(lo, top, need, banks, g_entries, 2 * groups, hw)
                out.append(_Family(rows, kernels, LoopOrder.WEIGHT_STATIONARY, lo, top, ws))
    return out


def candidate_plans(layer: ConvLayer, hw: HwConfig) -> list[TilePlan]:
    """Every plan of the search space (module docstring), each legal."""
    plans = [p for fam in _families(layer, hw) for p in fam.plans(hw)]
    assert all(illegal_reason(layer, p, hw) is None for p in plans)
    return plans


def plan_lower_bound(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> int:
    """A floor on simulate_conv(layer, hw, plan).cycles from work and the plan's traffic (hardware layers
    may overlap, so their launches add nothing to the floor)."""
    fp = footprint(layer, plan, hw)
    port = _rates(hw)[layer.input_memory]
    start = _first_compute_floor(layer, plan, hw, fp, port)
    return max(
        _traffic_floor(layer, plan, hw, fp),
        _last_band_floor(layer, plan, hw, fp),
        _layer_chain_floor(layer, plan, hw, fp),
        start + _startup(layer, hw) + _core_floor(layer, plan, hw, fp) + _last_tail(layer, plan.rows_per_tile, hw),
    )


def _rows_lower_bound(layer: ConvLayer, rows: int, hw: HwConfig) -> int:
    """A floor on every plan with bands of `rows` output rows, whatever its order, kernel tiles and bank
    split: the input and weights read once; the first band's fill with no weights beside it and the
    fewest SDP operands (one kernel group); the core with the fewest hardware layers (data-stationary:
    splitting a band's kernel groups into more hardware layers only adds drains) and no ring limit."""
    s, kpg = layer.shape, hw.kernels_per_atomic(layer.precision)
    port = _rates(hw)[layer.input_memory]
    band = None if layer.data_resident else _band_sizes(layer, rows)[0]
    start = _fill_cycles(layer, hw, band, 0, min(kpg, s.out_k), port)
    once = TilePlan(1, 1, rows, s.out_k, LoopOrder.WEIGHT_STATIONARY)  # traffic of a plan with one weight tile
    fp = footprint(layer, once, hw)
    core = core_floor(layer, hw, rows, s.out_k, LoopOrder.DATA_STATIONARY)
    return max(_traffic_floor(layer, once, hw, fp), start + _startup(layer, hw) + core + _last_tail(layer, rows, hw))


def _family_lower_bound(layer: ConvLayer, fam: _Family, hw: HwConfig) -> int:
    """A floor on every plan of the family. Traffic does not depend on the bank split; the first compute
    comes soonest with the most data banks (the least weight prefetched beside the input); the core's
    weight ring is largest with the fewest data banks."""
    port = _rates(hw)[layer.input_memory]
    shallow = fam.shallow
    fp_shallow = footprint(layer, shallow, hw)
    start = _first_compute_floor(layer, shallow, hw, fp_shallow, port)
    deep = fam.deep
    fp_deep = footprint(layer, deep, hw)
    one_band = fp_shallow.data_capacity_tiles == 1  # then every split's data ring holds one band
    return max(
        _traffic_floor(layer, deep, hw, fp_deep),
        _last_band_floor(layer, deep, hw, fp_deep),  # the same for every bank split
        _layer_chain_floor(layer, deep, hw, fp_deep),  # likewise
        start
        + _startup(layer, hw)
        + _core_floor(layer, deep, hw, fp_deep, band_ring=one_band)
        + _last_tail(layer, fam.rows, hw),
    )


def _core_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint, *, band_ring: bool = True) -> int:
    """core_floor under the plan, with its weight ring when a hardware layer streams more kernel groups
    than the ring holds (data-stationary order, or a weight-stationary tile over one data tile that does
    not fit the weight banks; over several data tiles a weight-stationary tile stays resident), and with
    its data ring when that holds one band (not with `band_ring` False: a floor for every bank split)."""
    ring, refill = 0, 0.0
    streams = plan.order is LoopOrder.DATA_STATIONARY or fp.weight_capacity_groups < fp.groups_per_weight_tile
    if streams and not layer.weights_resident:
        s, kpg = layer.shape, hw.kernels_per_atomic(layer.precision)
        ring = fp.weight_capacity_groups
        smallest = s.out_k % kpg or kpg  # the last group's kernels
        nbytes = cdma.weight_bytes(min(smallest, s.out_k), bytes_per_kernel(layer), hw)
        if layer.weight_bytes is not None:
            nbytes = math.ceil(nbytes * layer.weight_bytes / cdma.weight_bytes(s.out_k, bytes_per_kernel(layer), hw))
        port = _rates(hw)[layer.weight_memory]
        refill = port.latency + nbytes / port.bytes_per_cycle
    # a data ring of one band that every hardware layer fetches anew: the next band's first data arrives a
    # memory latency after this band's compute released it at the soonest (all of it, when CSC waits for it)
    band_refill = 0.0
    if band_ring and fp.data_capacity_tiles == 1 and fp.n_data_tiles > 1 and not layer.data_resident:
        port = _rates(hw)[layer.input_memory]
        band_refill = float(port.latency)
        if hw.timing.conv_input_before_compute:
            smallest = min(n for n, _ in _band_sizes(layer, plan.rows_per_tile))
            band_refill += cdma.input_bytes(layer, smallest, hw) / port.bytes_per_cycle
    core = core_floor(layer, hw, plan.rows_per_tile, plan.kernels_per_tile, plan.order, ring, refill, band_refill)
    # every hardware layer after the first also waits CSC's startup before its first compute (run_items:
    # after the previous layer's last drain), its first group whole kernel groups or the last tile's rest
    ws = plan.order is LoopOrder.WEIGHT_STATIONARY
    tile = min(size for size, _ in tile_sizes(layer.shape.out_k, plan.kernels_per_tile)) if ws else layer.shape.out_k
    kpg = hw.kernels_per_atomic(layer.precision)
    return core + (_hardware_layers(plan, fp) - 1) * csc.startup_cycles(min(kpg, tile), kpg)


def _plan_reads(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint) -> tuple[int, int]:
    """(input, weight) bytes the plan fetches: every image's input once per weight tile in weight-stationary
    order over several bands, the weights once per band in data-stationary order (group by group, in
    whole CBUF entries: _weight_fetch_bytes); nothing for an operand resident in CBUF. The same for every
    bank split."""
    data = 0 if layer.data_resident else _bands_input_bytes(layer, plan.rows_per_tile, hw) * layer.images
    if _weights_stay(plan, fp):
        data *= fp.n_weight_tiles
    weights = 0 if layer.weights_resident else _weight_fetch_bytes(layer, hw)
    if plan.order is LoopOrder.DATA_STATIONARY:
        weights *= fp.n_data_tiles  # every band is a hardware layer that fetches its weights
    return data, weights


@lru_cache(maxsize=65536)  # pure; every plan of a band height asks (_plan_reads)
def _bands_input_bytes(layer: ConvLayer, rows_per_tile: int, hw: HwConfig) -> int:
    """Input bytes of one image's bands of `rows_per_tile` output rows, each fetched once."""
    return sum(cdma.input_bytes(layer, rows, hw) for rows, _ in _band_sizes(layer, rows_per_tile))


def _weights_stay(plan: TilePlan, fp: Footprint) -> bool:
    """Whether a weight tile stays in CBUF across several bands (weight-stationary order over several
    data tiles: SKIP_WEIGHT_RLS, then WEIGHT_REUSE), the input fetched again per tile."""
    return plan.order is LoopOrder.WEIGHT_STATIONARY and fp.n_data_tiles > 1


def _hardware_layers(plan: TilePlan, fp: Footprint) -> int:
    """The plan's hardware layers: one per band, and in weight-stationary order per kernel tile too
    (engine.conv._hardware_layer)."""
    return fp.n_data_tiles * (fp.n_weight_tiles if plan.order is LoopOrder.WEIGHT_STATIONARY else 1)


def _group_compute(layer: ConvLayer, hw: HwConfig, rows: int, kernels: int) -> int:
    """CMAC cycles of one kernel group of `kernels` kernels over a band of `rows` output rows (0 for none)."""
    return sum(r.count * r.compute_cycles for r in group_blocks(layer, hw, rows, kernels)) if kernels else 0


def _traffic_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint) -> int:
    """conv_floor with the plan's reads (_plan_reads), and the last fetch: it arrives no sooner than its
    port has moved every fetch on it plus one memory latency, and the block that needs it then computes and
    drains (one block at least)."""
    s = layer.shape
    data, weights = _plan_reads(layer, plan, hw, fp)
    written = output_bytes(layer, s.out_h, s.out_k, hw) * layer.images
    floor = conv_floor(layer, hw, read_bytes=data + weights, write_bytes=written)
    per_port = Counter({layer.input_memory: data})
    per_port[layer.weight_memory] += weights
    ports = _rates(hw)
    last = [ports[m].latency + n / ports[m].bytes_per_cycle for m, n in per_port.items() if n]
    if last:
        floor = max(floor, math.floor(max(last)) + _last_block(layer, plan, hw) + _tail_cycles(hw))
    return floor


def _group_fetch_bytes(layer: ConvLayer, kernels: int, hw: HwConfig) -> int:
    """Bytes of one kernel group's weight fetch as engine.conv books it: the group's dense bytes in whole
    CBUF entries (cdma.weight_bytes), times the stored share when the weights are compressed, rounded up."""
    dense = cdma.weight_bytes(kernels, bytes_per_kernel(layer), hw)
    if layer.weight_bytes is None:
        return dense
    return math.ceil(dense * layer.weight_bytes / cdma.weight_bytes(layer.shape.out_k, bytes_per_kernel(layer), hw))


def _weight_fetch_bytes(layer: ConvLayer, hw: HwConfig) -> int:
    """Bytes of every kernel group's fetch once (engine.conv fetches the weights group by group): more
    than the blob in whole CBUF entries when a kernel's bytes do not fill whole entries (131 INT8
    channels on nv_full: 4,224 bytes a 32-kernel group, not 4,192), and at least a compressed size."""
    full, rest = divmod(layer.shape.out_k, hw.kernels_per_atomic(layer.precision))
    return full * _group_fetch_bytes(layer, hw.kernels_per_atomic(layer.precision), hw) + (
        _group_fetch_bytes(layer, rest, hw) if rest else 0
    )


def _last_band_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint) -> int:
    """A floor from the plan's last items (the kernel groups it runs against its last band), whatever
    the order the ports serve fetches in: CMAC computes items one after another, and an item computes only
    once every fetch it or an item before it uses has arrived whole, so the m-th of those items starts no
    sooner than a memory latency after its port has moved every byte but those fetched for the items
    after it (a port moves at most its rate); then it and every later item compute, and the last block
    drains (a hardware layer boundary between them only adds). The input counts only where CSC waits for
    it whole (TimingConfig.conv_input_before_compute: otherwise an item may start on part of its band); SDP operand reads and
    writes sharing the port are left out. Over the layer's run of equal kernel groups the floor is linear
    in m, so its ends (the first item, the last full group, the rest) are the candidates. Independent
    of the bank split. It catches what the last fetch alone misses: a decode step's attention layer whose
    last kernel group is small, computed after a full group whose weights came just before."""
    kpg = hw.kernels_per_atomic(layer.precision)
    # the items that run last, one after another: over several bands (weight-stationary) the last kernel
    # tile's groups against the last band; else the last band's groups of every kernel tile
    k0 = (layer.shape.out_k - 1) // plan.kernels_per_tile * plan.kernels_per_tile if _weights_stay(plan, fp) else 0
    full, rest = divmod(layer.shape.out_k - k0, kpg)
    out_rows = _band_sizes(layer, plan.rows_per_tile)[-1][1]
    ports = _rates(hw)
    # bytes every item uses, per port (as the timing model fetches them)
    data, weights = _plan_reads(layer, plan, hw, fp)
    if not hw.timing.conv_input_before_compute:
        data = 0
    # this layer's items fetch their own kernel groups unless a weight tile stays from the first band
    fetched_here = not layer.weights_resident and not _weights_stay(plan, fp)
    c_full, c_rest = _group_compute(layer, hw, out_rows, kpg), _group_compute(layer, hw, out_rows, rest)
    g_full, g_rest = _group_fetch_bytes(layer, kpg, hw), _group_fetch_bytes(layer, rest, hw) if rest else 0
    last = group_blocks(layer, hw, out_rows, rest or kpg)[-1]
    best = 0.0
    for m in {0, max(full - 1, 0), full + (1 if rest else 0) - 1}:  # the m-th item (kernel group) of the layer
        after = (max(full - 1 - m, 0) * g_full + (g_rest if m < full else 0)) if fetched_here else 0
        computed = max(full - m, 0) * c_full + c_rest
        per_port = Counter({layer.input_memory: data})
        per_port[layer.weight_memory] += weights - after
        arrive = max((ports[p].latency + n / ports[p].bytes_per_cycle for p, n in per_port.items() if n), default=0.0)
        best = max(best, math.floor(arrive) + computed + last.drain_cycles - last.lead)
    return int(best) + _last_tail(layer, plan.rows_per_tile, hw)


def _layer_chain_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint) -> int:
    """A floor from the plan's hardware layers one after another in two ping-pong register groups
    (engine.conv._run_hardware_layers): layer n is enabled, and fetches, no sooner than layer n-2's end
    plus its completion, the driver's reprogramming and the launch (timing: completion_cycles +
    driver_reprogram_cycles + conv_launch_cycles); it computes once its first item's fetches are in (a
    memory latency at the soonest, and its band's whole input where CSC waits for it: TimingConfig.
    conv_input_before_compute) and ends after every item has computed and the last block drained. So the
    last layer ends no sooner than the chain n-1, n-3, ... of those spans. Many small hardware layers
    (one-row bands x small kernel tiles: 2,048 layers for a 2,048-token QK^T) are ruled out by it."""
    kpg = hw.kernels_per_atomic(layer.precision)
    n_layers = _hardware_layers(plan, fp)
    if n_layers < 3:
        return 0
    ports = _rates(hw)
    bands = set(_band_sizes(layer, plan.rows_per_tile))  # (input rows, output rows)
    ws = plan.order is LoopOrder.WEIGHT_STATIONARY
    tiles = {size for size, _ in tile_sizes(layer.shape.out_k, plan.kernels_per_tile)} if ws else {layer.shape.out_k}
    # what each hardware layer's first item fetches (every layer but the first, where they differ)
    data = not layer.data_resident and (not ws or fp.n_data_tiles > 1)
    weights = not layer.weights_resident and not _weights_stay(plan, fp)
    span = math.inf
    for in_rows, rows in bands:
        for kernels in tiles:
            full, rest = divmod(kernels, kpg)
            last = group_blocks(layer, hw, rows, rest or kpg)[-1]
            work = full * _group_compute(layer, hw, rows, kpg) + _group_compute(layer, hw, rows, rest)
            work += last.drain_cycles - last.lead + _tail_cycles(hw)
            fill = 0.0
            if data:
                port = ports[layer.input_memory]
                whole = cdma.input_bytes(layer, in_rows, hw) if hw.timing.conv_input_before_compute else 0
                fill = max(fill, port.latency + whole / port.bytes_per_cycle)
            if weights:
                port = ports[layer.weight_memory]
                first = _group_fetch_bytes(layer, min(kpg, kernels), hw)
                fill = max(fill, port.latency + first / port.bytes_per_cycle)
            span = min(span, math.floor(fill) + work)
    return int((n_layers - 1) // 2 * (regroup_cycles(hw) + span) + span)


def _last_block(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> int:
    """The fewest cycles any block of the plan takes to compute and drain (its drain starts `lead` cycles
    before its compute ends at the soonest)."""
    kpg, k = hw.kernels_per_atomic(layer.precision), layer.shape.out_k
    sizes = {min(kpg, k), k % kpg or kpg}
    heights = {rows for _, rows in _band_sizes(layer, plan.rows_per_tile)}
    return min(
        r.compute_cycles + r.drain_cycles - r.lead
        for rows in heights
        for size in sizes
        for r in group_blocks(layer, hw, rows, size)
    )


@lru_cache(maxsize=65536)  # pure; every bound of every plan asks
def _band_sizes(layer: ConvLayer, rows_per_tile: int) -> tuple[tuple[int, int], ...]:
    """(input rows, output rows) of every band."""
    s = layer.shape
    spans = [(s.input_rows_for(r0, r1), r1 - r0) for r0, r1 in row_tiles(layer, rows_per_tile)]
    return tuple((i1 - i0, rows) for (i0, i1), rows in spans)


def _first_compute_floor(layer: ConvLayer, plan: TilePlan, hw: HwConfig, fp: Footprint, port: _PortRate) -> int:
    """The first hardware layer's fill (_fill_cycles): its first band's input beside the kernel groups its
    weight ring prefetches."""
    s = layer.shape
    kpg = hw.kernels_per_atomic(layer.precision)
    first_layer = min(plan.kernels_per_tile, s.out_k) if plan.order is LoopOrder.WEIGHT_STATIONARY else s.out_k
    band = None if layer.data_resident else _band_sizes(layer, plan.rows_per_tile)[0]
    return _fill_cycles(layer, hw, band, min(fp.weight_capacity_groups * kpg, first_layer), first_layer, port)


def _fill_cycles(
    layer: ConvLayer, hw: HwConfig, band: tuple[int, int] | None, kernels: int, out_kernels: int, port: _PortRate
) -> int:
    """From a hardware layer's first fetch to its first compute, when it fetches the input of a band of
    (input rows, output rows) (None: no input) and `kernels` kernels, and computes `out_kernels` kernels.
    SDP's operand RDMAs (bias, residual) first fill their latency FIFOs on the input's port (simulate_conv
    books that at the layer's start). Where CSC waits for the band's whole input (TimingConfig.
    conv_input_before_compute, measured on nv_small) while CDMA fetches the weights alongside,
    round-robin when they share the port, the input arrives one memory latency plus (input + the smaller
    of input and those weights) / port rate after that. Otherwise CSC starts on the first part of the
    input. Either way it never starts before its first kernel group has arrived whole. Nothing to wait
    for when nothing is fetched. `port` is the input's."""
    data = cdma.input_bytes(layer, band[0], hw) if band is not None else 0
    weights = 0
    if not layer.weights_resident and layer.weight_bytes is None:
        weights = kernels * bytes_per_kernel(layer)
    if not data and not weights:
        return 0
    operands = 0
    if band is not None:
        pixels = band[1] * layer.shape.out_w
        read = sdp.operand_read_bytes(
            layer.sdp, pixels=pixels, channels=out_kernels, operand_bytes=layer.precision.bytes
        )
        operands = min(read, sdp.operand_prefetch_bytes(hw))
    first = min(weights, hw.kernels_per_atomic(layer.precision) * bytes_per_kernel(layer))
    shared = layer.input_memory is layer.weight_memory
    if not shared:  # the weights come over their own port
        w_port = _rates(hw)[layer.weight_memory]
        group = w_port.latency + math.floor(first / w_port.bytes_per_cycle) if first else 0
        wait_data = hw.timing.conv_input_before_compute and data
        own = port.latency + math.floor((operands + (data if wait_data else 0)) / port.bytes_per_cycle) if data else 0
        return max(group, own)
    # the first kernel group whole, the input alongside it round-robin
    group = port.latency + math.floor((operands + first + min(first, data)) / port.bytes_per_cycle)
    if not hw.timing.conv_input_before_compute or not data:
        return group
    # and the whole input, the weights alongside it (a decode step's attention on nv_small: 64 bytes of
    # query against a 512-byte first group, which comes last)
    return max(group, port.latency + math.floor((operands + data + min(data, weights)) / port.bytes_per_cycle))


def _startup(layer: ConvLayer, hw: HwConfig) -> int:
    """What CSC's first package adds before a plan's first compute, beyond its operands (csc.startup_cycles):
    every plan's first kernel group has min(kernels per group, K) kernels (kernel tiles are whole groups)."""
    kpg = hw.kernels_per_atomic(layer.precision)
    return csc.startup_cycles(min(kpg, layer.shape.out_k), kpg)


def _last_tail(layer: ConvLayer, rows_per_tile: int, hw: HwConfig) -> int:
    """_tail_cycles for the plan's last item, whose stripe gap is known: every plan with bands of
    `rows_per_tile` rows ends with the last band against the last kernel group (K mod the group size, or a
    whole group; kernel tiles are whole groups), and simulate_conv ends it its own gap short of the fill."""
    kpg = hw.kernels_per_atomic(layer.precision)
    rows = _band_sizes(layer, rows_per_tile)[-1][1]
    gap = group_delivery(layer, hw, rows, layer.shape.out_k % kpg or kpg)[1]
    return hw.mac.pipeline_cycles + hw.cacc.rmw_cycles - gap


def _tail_cycles(hw: HwConfig) -> int:
    """A hardware layer ends at its last atom: the MAC pipeline and CACC after its last block's delivery,
    less the largest stripe gap core_floor may count in that delivery (simulate_conv ends a hardware layer
    at its last item's end plus this, less the gap its last stripe has; it may be negative)."""
    return hw.mac.pipeline_cycles + hw.cacc.rmw_cycles - hw.timing.cacc_stripe_gap_cycles


@lru_cache(maxsize=4096)
def search_plan(
    layer: ConvLayer,
    hw: HwConfig,
    gap: float = DEFAULT_GAP,
    budget: int | None = DEFAULT_BUDGET,
    patience: tuple[int, float] | None = DEFAULT_PATIENCE,
) -> SearchResult:
    """Best plan by simulated cycles (ties: _preference), proven within `gap` of the best legal plan, or,
    once `patience[0]` plans have been simulated, within `patience[1]`, or, once `budget` plans have been
    simulated (None: no limit), the best so far with the gap its bound proves (SearchResult.proven_gap)."""
    families = _families(layer, hw)
    if not families:
        raise ShapeError(
            f"{layer.name}: no CBUF-legal tiling on {hw.name} ({hw.cbuf.bank_count} banks x "
            f"{hw.cbuf_entries_per_bank} entries): one output row or one kernel group does not fit; "
            "split the layer's input channels"
        )
    by_rows: dict[int, list[_Family]] = {}
    for fam in families:
        by_rows.setdefault(fam.rows, []).append(fam)
    order = itertools.count()  # ties in the heap: nodes to expand first, then plans in _preference order
    # nodes: a band height (all its families), a family (all its bank splits), a plan
    heap: list[tuple[int, int, int | _Family | TilePlan]] = [
        (_rows_lower_bound(layer, rows, hw), _EXPAND, next(order), rows) for rows in by_rows
    ]
    heapq.heapify(heap)
    best: tuple[tuple[int, ...], TilePlan, LayerStats] | None = None
    simulated = found_at = 0
    seen: dict[tuple, LayerStats] = {}
    while heap and (best is None or heap[0][0] * (1 + gap) < best[0][0]):
        if budget is not None and simulated >= budget and best is not None:
            break
        patient = patience is not None and best is not None and simulated >= patience[0]
        if patient and heap[0][0] * (1 + patience[1]) >= best[0][0]:
            break
        _, _, _, node = heapq.heappop(heap)
        if isinstance(node, int):
            for fam in by_rows[node]:
                reads = sum(_plan_reads(layer, fam.deep, hw, footprint(layer, fam.deep, hw)))
                heapq.heappush(heap, (_family_lower_bound(layer, fam, hw), (reads, math.inf), next(order), fam))
            continue
        if isinstance(node, _Family):
            for plan in node.plans(hw):
                reads = sum(_plan_reads(layer, plan, hw, footprint(layer, plan, hw)))
                heapq.heappush(
                    heap, (plan_lower_bound(layer, plan, hw), (reads, *_preference(plan)), next(order), plan)
                )
            continue
        twin = _timing_key(layer, node, hw)
        if twin in seen:  # times exactly as a plan already simulated
            st = dataclasses.replace(seen[twin], plan=node)
        else:
            st = seen[twin] = simulate_conv(layer, hw, node, record_events=False)
            simulated += 1
        traffic = st.traffic.dram_total + st.traffic.sram_read + st.traffic.sram_write
        key = (st.cycles, traffic, *_preference(node))
        if best is None or key < best[0]:
            best = (key, node, st)
            found_at = simulated
    assert best is not None
    proven = max(0.0, best[0][0] / heap[0][0] - 1) if heap else 0.0
    size = sum(len(fam.splits) for fam in families)
    return SearchResult(best[1], best[2], size, simulated, round(proven, 6), found_at)


@lru_cache(maxsize=4096)
def planned_like(layer: ConvLayer, like: ConvLayer, hw: HwConfig) -> SearchResult:
    """The plan search_plan finds for `like` (the same layer at another size: attention against a KV
    cache at its length bucket, options.KvPlan), its kernel tiles and bands cut to this layer's kernels
    and rows, simulated on this layer; this layer's own search where `like` has no legal plan or that plan
    is not legal for this layer. `candidates`, `simulated` and `proven_gap` are those of the search that
    chose the plan."""
    cut = _cut_plan(layer, like, hw)
    if cut is None:
        return search_plan(layer, hw)
    found, plan = cut
    return dataclasses.replace(found, plan=plan, stats=simulate_conv(layer, hw, plan, record_events=False))


@lru_cache(maxsize=1024)
def planned_like_instances(layer: ConvLayer, like: ConvLayer, hw: HwConfig, count: int) -> tuple[SearchResult, int]:
    """planned_like, and the cycles of `count` instances of the layer under its plan (engine.conv.
    instances_cycles): from one run of the instances where the plan is the one found for `like`
    (conv.simulate_instances: the first instance is the layer alone)."""
    cut = _cut_plan(layer, like, hw)
    if cut is None:
        found = search_plan(layer, hw)
        return found, instances_cycles(layer, found.plan, hw, count)
    found, plan = cut
    st, span = simulate_instances(layer, hw, plan, count)
    return dataclasses.replace(found, plan=plan, stats=st), span


def _cut_plan(layer: ConvLayer, like: ConvLayer, hw: HwConfig) -> tuple[SearchResult, TilePlan] | None:
    """The search of `like` and its plan with kernel tiles and bands cut to the layer; None where the
    layer takes its own search (`like` has no CBUF-legal tiling, or the cut plan is not legal here)."""
    try:
        found = search_plan(like, hw)
    except ShapeError:  # the bucket's layer does not fit CBUF at all: the layer is planned at its own size
        return None
    s = layer.shape
    kernels, rows = min(found.plan.kernels_per_tile, s.out_k), min(found.plan.rows_per_tile, s.out_h)
    plan = dataclasses.replace(found.plan, kernels_per_tile=kernels, rows_per_tile=rows)
    if illegal_reason(layer, plan, hw) is not None:
        return None
    return found, plan


_EXPAND = (math.inf,)  # heap ties: simulate a plan before expanding a band height of equal bound (a plan
# at its bound then ends the search before nodes that only tie it are expanded); families and plans of
# equal bound go in order of the bytes they read (_plan_reads), so that of the plans that meet one
# bound the one that moves the least is met first (BERT-base's V^T projection on nv_full: 65 plans tie
# at 40,362 cycles, weight-stationary reading 786,432 bytes, data-stationary 1,867,776), plans before
# families of equal reads


def _preference(plan: TilePlan) -> tuple:
    """Among plans that time the same: the deepest weight ring (a deeper ring than the model needs also
    absorbs the weight releases a clock-gated RTL loses, docs/validation.md), then fewer data
    banks, taller bands and larger kernel tiles (fewer hardware layers)."""
    return (-plan.weight_banks, plan.data_banks, -plan.rows_per_tile, -plan.kernels_per_tile)


def _timing_key(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> tuple:
    """What simulate_conv's timing depends on besides the layer: the plan's loop nest and how many data
    tiles and kernel groups CBUF holds, where holding more than two hardware layers' worth changes
    nothing (the rings never fill, weight prefetch takes what a layer has, and there is room beside the
    previous layer). Plans with equal keys take equal cycles."""
    fp = footprint(layer, plan, hw)
    kpg = hw.kernels_per_atomic(layer.precision)
    per_layer = (
        fp.groups_per_weight_tile if plan.order is LoopOrder.WEIGHT_STATIONARY else math.ceil(layer.shape.out_k / kpg)
    )
    return (
        plan.rows_per_tile,
        plan.kernels_per_tile,
        plan.order,
        min(fp.data_capacity_tiles, 2),
        min(fp.weight_capacity_groups, 2 * per_layer),
    )


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
