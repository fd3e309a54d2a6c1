"""Convolution-pipeline hardware layer: timing (tiles through CDMA/CBUF/CSC/CMAC/CACC/SDP) and function.

Timing: the plan's loop nest becomes pipeline Items, one per (data tile, kernel group), in the order
CSC runs them (kernel group -> stripe -> channel block -> kernel position, hw cmod csc). Each item's
blocks are its channel ops: a stripe of L output points over ceil(C/atomic_c) x R x S stripe ops costs
max(L, weight_load) cycles per stripe op and drains L x kernels results to SDP.
Function: the same loop nest over numpy arrays through cmac.atomic_op, cacc.accumulate and sdp_apply, so
tests can check that tiling never changes the numbers.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import channel_ops_per_stripe, conv_floor, drain_rate
from nvdla_sim.engine.layer_skip import LayerSkip, kept_signature, layer_signature, own_fetches
from nvdla_sim.engine.stats import Bound, ConvDetail, LayerStats, TimeBreakdown, Traffic, Unit, UnitStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import (
    COUNTERS,
    BlockRun,
    Buffer,
    Channel,
    Fetch,
    Item,
    OperandHeads,
    PipelineResult,
    _copy,
    _new,
    item_traffic,
    make_ports,
    renumbered,
    run_blocks,
    run_items,
    up_to_grid,
)
from nvdla_sim.engine.tiling import (
    Footprint,
    LoopOrder,
    TilePlan,
    bytes_per_kernel,
    check_plan,
    data_tiles,
    footprint,
    kernel_tiles,
    layer_gap_cycles,
    tile_nest,
    tile_sizes,
    tile_steps,
)
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer, Memory
from nvdla_sim.system.dram import AccessMix
from nvdla_sim.system.memory import memory_model
from nvdla_sim.units import cacc, cdma, cmac, csc, pdp, sdp
from nvdla_sim.units.dram import beat_bytes


@lru_cache(maxsize=8192)
def _blocks(
    stripes: tuple[int, ...],
    kernels: int,
    channel_ops: int,
    load: int,
    rate: int,
    cacc_rate: int,
    atom_gap: int,
    credits: int,
    stripe_gap: int,
) -> tuple[tuple[BlockRun, ...], int]:
    """(block runs per stripe of one kernel group, the gap after its last stripe). CACC sends a stripe's
    output atoms (`kernels` elements each) over its `cacc_rate`-wide path to SDP with `atom_gap` idle
    cycles after each, starting with the stripe's last channel op (each point is delivered once that op
    has accumulated it: the block's `lead`), and the stripe's gap after it (csc.stripe_gaps: `stripe_gap`
    less what the next stripe's credits hide). SDP takes them at `rate` (its slowest sub-unit in use, or
    PDP's): an atom takes the longer of the two. Behind a slower SDP both gaps are hidden: the atom gap
    (nv_small_256_full's LUT on the fly, 1 element/cycle behind a 2-wide path: exactly 1.000 a cycle on
    the RTL) and the stripe gap (SDP still holds atoms when the credits return: nv_large's FFN1 with GELU
    on the LUT and attention output with the residual from E-RDMA, docs/validation.md 5c)."""
    path = math.ceil(kernels / cacc_rate) + atom_gap
    atom = max(math.ceil(kernels / rate), path)
    gaps = csc.stripe_gaps(stripes, credits, stripe_gap if atom == path else 0, atom)
    runs: list[list[int]] = []
    for length, gap in zip(stripes, gaps, strict=True):
        block = [
            channel_ops * csc.stripe_op_cycles(length, load),
            channel_ops * length,
            length * atom + gap,
            length,  # lead: the last channel op's points are delivered as they are accumulated
        ]
        if runs and runs[-1][1:] == block:
            runs[-1][0] += 1
        else:
            runs.append([1, *block])
    return tuple(BlockRun(*r) for r in runs), gaps[-1]


@lru_cache(maxsize=65536)  # pure; called per item of every plan the search simulates
def group_delivery(layer: ConvLayer, hw: HwConfig, rows: int, kernels: int) -> tuple[tuple[BlockRun, ...], int]:
    """(block runs of one kernel group of `kernels` kernels over a band of `rows` output rows, the stripe gap
    after the group's last block: for a next group, which a hardware layer's last group does not have)."""
    s, p = layer.shape, layer.precision
    stripes = (
        csc.image_stripes(s.out_w, rows, hw.image_stripe)
        if layer.image_input
        else csc.stripe_lengths(rows * s.out_w, *hw.stripe_limits)
    )
    return _blocks(
        stripes,
        min(
            hw.kernels_per_atomic(p), cdma.atom_channels(kernels, layer.out_precision, hw)
        ),  # CACC delivers whole atoms
        channel_ops_per_stripe(layer, hw),
        csc.weight_load_cycles(hw, p),
        drain_rate(layer, hw),
        hw.sdp.max_throughput,  # the CACC -> SDP width
        hw.timing.cacc_atom_gap_cycles,
        hw.cacc_credit_atoms,
        hw.timing.cacc_stripe_gap_cycles,
    )


def group_blocks(layer: ConvLayer, hw: HwConfig, rows: int, kernels: int) -> tuple[BlockRun, ...]:
    """Block runs of one kernel group of `kernels` kernels over a band of `rows` output rows."""
    return group_delivery(layer, hw, rows, kernels)[0]


@lru_cache(maxsize=4096)
def core_floor(
    layer: ConvLayer,
    hw: HwConfig,
    rows_per_tile: int,
    kernels_per_tile: int,
    order: LoopOrder,
    ring_groups: int = 0,
    refill_cycles: float = 0.0,
    band_refill_cycles: float = 0.0,
) -> int:
    """Fewest cycles from the first compute to the last drain with bands of `rows_per_tile` output rows and
    tiles of `kernels_per_tile` kernels in `order`. The core runs every block (stripe) of every kernel
    group one after another, as run_items does (run_blocks: the one-deep delivery buffer, drains that start
    `lead` before their compute ends) with every operand already there: waiting for a fetch only delays
    that max-plus recurrence. A hardware layer ends when its last block has drained, and the next one
    computes after that at the soonest.

    When a hardware layer streams more kernel groups than its weight ring holds (`ring_groups`), group
    i + ring_groups is fetched only once group i has computed (its CBUF entries released), so its compute
    starts `refill_cycles` (memory latency plus the group's transfer) after that at the soonest: every
    ring_groups groups take at least the larger of ring_groups computes and one compute plus a refill.
    Likewise with `band_refill_cycles` (a data ring of one band, which each hardware layer fetches anew):
    the next hardware layer's band is fetched only once this one has computed, and computes no sooner
    than that refill after."""
    kpg = hw.kernels_per_atomic(layer.precision)
    s = layer.shape
    tiles = tile_sizes(s.out_k, kernels_per_tile) if order is LoopOrder.WEIGHT_STATIONARY else ((s.out_k, 1),)
    bands = tuple((rows, n * layer.images) for rows, n in tile_sizes(s.out_h, rows_per_tile))
    total = 0.0
    excess = 0.0  # the most a band refill adds to one hardware layer: the last has no next band
    for (rows, n_bands), (kernels, n_tiles) in itertools.product(bands, tiles):
        # one hardware layer: its kernel groups in order, a run of full groups and the rest
        chain, lag, idle, computes = 0.0, 0.0, 0.0, []
        full, rest = divmod(kernels, kpg)
        for size, count in ((kpg, full), (rest, 1 if rest else 0)):
            if count:
                runs = group_blocks(layer, hw, rows, size)
                elapsed, lag, idle = _items_chain(runs, lag, count)
                chain += elapsed
                computes.append(sum(r.count * r.compute_cycles for r in runs))
        end = chain + lag  # the last drain's end
        computed = chain - idle  # the last block's compute end
        groups = full + (1 if rest else 0)
        if ring_groups and groups > ring_groups:
            c = min(computes)
            jumps, left = divmod(groups - 1, ring_groups)
            ring = c + jumps * max(refill_cycles + c, ring_groups * c) + left * c  # the last compute's end
            last = runs[-1]
            end = max(end, ring + last.drain_cycles - last.lead)
            computed = max(computed, ring)
        pace = max(end, computed + band_refill_cycles)
        excess = max(excess, pace - end)
        total += pace * n_bands * n_tiles
    return math.floor(total - excess)


def _items_chain(runs: tuple[BlockRun, ...], lag: float, count: int) -> tuple[float, float, float]:
    """(cycles from the first of `count` items' first hand-over to the hand-over after their last block,
    the drain's lag behind that hand-over, the hand-over's lag behind the last block's compute end) for
    items of `runs` whose data is there, starting with the drain `lag` cycles behind (run_blocks, block by
    block; items until the lag repeats, then whole)."""
    elapsed = idle = 0.0
    done = 0
    while done < count:
        t, end, c_end = 0.0, lag, 0.0
        for r in runs:
            out = run_blocks(t, end, r.count, r.compute_cycles, r.drain_cycles, r.lead)
            t, end, c_end = out.t, out.drain_end, out.c_end
        done += 1
        elapsed += t
        idle = t - c_end
        if end - t == lag:  # the next items repeat this one
            elapsed += (count - done) * t
            done = count
        lag = end - t
    return elapsed, lag, idle


def output_bytes(layer: ConvLayer, rows: int, kernels: int, hw: HwConfig) -> int:
    """Bytes written for `rows` output rows of `kernels` kernels; with fused pooling, that band's share
    of the pooled cube (PDP keeps partial windows in its line buffer across row tiles)."""
    s = layer.shape
    if layer.pool is None:
        return cdma.feature_bytes(s.out_w, rows, kernels, layer.out_precision, hw)
    pw, ph = layer.pool.out_size(s.out_w, s.out_h)
    return math.ceil(cdma.feature_bytes(pw, ph, kernels, layer.out_precision, hw) * rows / s.out_h)


@dataclasses.dataclass(frozen=True)
class _HwLayerInfo:
    """What the hardware-layer runner needs of one hardware layer besides its items."""

    data_capacity: int  # data tiles the data banks hold
    weight_capacity: int  # kernel groups the weight ring holds
    banks: tuple[int, int]  # (data banks, weight banks): a change between layers empties the rings
    input_memory: Memory
    startup: int = 0  # cycles CSC's first package adds before the first compute (csc.startup_cycles)
    # per SDP operand stream, the beats of its head (sdp.operand_heads): what a later layer's first output
    # waits for (_run_hardware_layers)
    operand_heads: tuple[int, ...] = ()


@dataclasses.dataclass
class _Chain:
    """Items of one or more convolutions run as a sequence of hardware layers (a split layer's plan, or a
    program's layers in ping-pong register groups), built layer by layer with one event numbering, so an
    operand one layer keeps in CBUF (SKIP_*_RLS) and the next reuses (*_REUSE) is one fetch event."""

    items: list[Item] = dataclasses.field(default_factory=list)
    item_layer: list[int] = dataclasses.field(default_factory=list)  # each item's hardware layer (global)
    item_extra: list[int] = dataclasses.field(default_factory=list)  # SDP operand bytes each item's pixels read
    item_tail_gap: list[int] = dataclasses.field(default_factory=list)  # the stripe gap after each item's last block
    info: dict[int, _HwLayerInfo] = dataclasses.field(default_factory=dict)
    events: int = 0
    layers: int = 0
    last_data: int = -1  # the data event the last hardware layer used
    last_weights: dict[int, int] = dataclasses.field(default_factory=dict)  # its weight events by first kernel
    named: bool = True  # items and fetches carry names (for timeline events; building them costs time)
    # hardware layers built as repeats (_repeat): layer -> (first, shift). Their places in `items` hold the
    # items of the explicit layer they repeat (the same objects: every size, block and write is equal);
    # their own fetch events are those at or after `first` moved by `shift` (renumbered)
    renumber: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    last_added: tuple | None = None  # ((layer, plan, hw), its last hardware layer as `before` in add)

    def add(self, layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> Footprint:
        """Append `layer` run under `plan`. Fetch keys: an operand is fetched again whenever its key is new.
        Every band of rows is a hardware layer of its own (full-input mode), so in data-stationary order each
        band fetches all its weights again; weight-stationary order keeps a weight tile resident across bands
        (SKIP_WEIGHT_RLS, then WEIGHT_REUSE) and re-fetches the data per weight tile. Operands the previous
        hardware layer left in CBUF (layer.data_resident / weights_resident) are its fetch events (or none
        when the chain starts with them: left by a layer not in it)."""
        hw.check_precision(layer.precision)
        check_plan(layer, plan, hw)
        drain_rate(layer, hw)  # raises UnsupportedError for SDP features the config lacks
        s, p = layer.shape, layer.precision
        fp = footprint(layer, plan, hw)
        kpg = hw.kernels_per_atomic(p)
        bpk = bytes_per_kernel(layer)
        w_ratio = _weight_ratio(layer, hw)
        n_data = fp.n_data_tiles
        ws = plan.order is LoopOrder.WEIGHT_STATIONARY
        weights_resident = ws or n_data == 1
        _check_resident(layer, plan, fp, n_data)
        seen: dict[tuple, int] = {}
        if layer.data_resident:
            seen[("d", 0)] = self.last_data
        if layer.weights_resident:
            seen.update({("w", g0): self.last_weights.get(g0, -1) for g0 in range(0, s.out_k, kpg)})
        info = _HwLayerInfo(
            fp.data_capacity_tiles, fp.weight_capacity_groups, (plan.data_banks, plan.weight_banks), layer.input_memory
        )
        prefetch_left = 0  # operand bytes the current layer's SDP RDMA latency FIFO still takes up front
        current = -1
        first = self.layers

        # per (output rows, kernels) of an item, rows of input, kernels of a group: the layer and hw are this
        # call's (hashing them is slow; plain dicts: a functools.cache wrapper costs more to make than to use)
        items_of: dict[tuple[int, int], tuple[tuple[BlockRun, ...], int, int, int, float]] = {}
        inputs_of: dict[int, int] = {}
        groups_of: dict[int, int] = {}

        heads_by_cube: dict[tuple[int, int], tuple[int, ...]] = {}

        def heads_of(rows: int, kernels: int) -> tuple[int, ...]:  # of a hardware layer's SDP cube
            heads = heads_by_cube.get((rows, kernels))
            if heads is None:
                heads = heads_by_cube[rows, kernels] = sdp.operand_heads(
                    layer.sdp, hw, pixels=rows * s.out_w, channels=kernels, operand_bytes=p.bytes,
                    memory=layer.input_memory,
                )  # fmt: skip
            return heads

        def per_item(rows: int, kernels: int) -> tuple[tuple[BlockRun, ...], int, int, int, float]:
            made = items_of.get((rows, kernels))
            if made is None:
                pixels = rows * s.out_w
                extra = sdp.operand_read_bytes(layer.sdp, pixels=pixels, channels=kernels, operand_bytes=p.bytes)
                credit = sdp.operand_stream_cycles(
                    layer.sdp, hw, pixels=pixels, channels=kernels, operand_bytes=p.bytes, memory=layer.input_memory,
                    latency=memory_model(hw).latency(layer.input_memory),
                )  # fmt: skip
                blocks, tail_gap = group_delivery(layer, hw, rows, kernels)
                made = items_of[rows, kernels] = (
                    blocks,
                    output_bytes(layer, rows, kernels, hw),
                    extra,
                    tail_gap,
                    credit,
                )
            return made

        # a data fetch may be consumed in part (CSC polls CBUF per stripe) unless CSC waits for the whole band
        streamed = not hw.timing.conv_input_before_compute
        ingest = 0.0 if layer.image_input else cdma.feature_ingest_bytes_per_cycle(hw, layer.input_memory)

        def input_bytes(rows: int) -> int:
            if rows not in inputs_of:
                inputs_of[rows] = cdma.input_bytes(layer, rows, hw)
            return inputs_of[rows]

        def group_bytes(kernels: int) -> int:
            if kernels not in groups_of:
                groups_of[kernels] = math.ceil(cdma.weight_bytes(kernels, bpk, hw) * w_ratio)
            return groups_of[kernels]

        rtiles, ktiles = data_tiles(layer, plan.rows_per_tile), kernel_tiles(layer, plan.kernels_per_tile)
        # the previous hardware layer: (its key, first item, items, first event); the last one of the
        # previous add when that was the same layer under the same plan (a chain of instances)
        before = self.last_added[1] if self.last_added and self.last_added[0] == (layer, plan, hw) else None
        # one hardware layer a (data tile, weight tile) pair, but in data-stationary order with kernel tiles
        # (outside the search's space) a band's tiles are one
        whole = ws or len(ktiles) == 1
        # the plan's loop nest (tile_nest, shared with tile_steps and run_conv)
        for d, k in tile_nest(plan, len(rtiles), len(ktiles)):
            image_no, (r0, r1) = rtiles[d]
            k0, k1 = ktiles[k]
            i0, i1 = s.input_rows_for(r0, r1)
            data_key = ("d", d) if (not ws or n_data == 1) else ("d", d, k)
            weight_keys = [(g0, ("w", g0) if weights_resident else ("w", g0, d)) for g0 in range(k0, k1, kpg)]
            if first + _hardware_layer(plan, d, k, n_data) != current:
                current = first + _hardware_layer(plan, d, k, n_data)
                heads = heads_of(r1 - r0, (k1 - k0) if whole else s.out_k)
                self.info[current] = dataclasses.replace(
                    info, startup=csc.startup_cycles(min(kpg, k1 - k0), kpg), operand_heads=heads
                )
                self.last_weights = {}
                prefetch_left = sdp.operand_prefetch_bytes(hw)
            # what the layer's items are made of: alike layers (the bands of a split layer) differ only in
            # their own fetch events, and the items of one are the previous one's with those renumbered
            kept = (None,) * len(weight_keys) if not seen else tuple([seen.get(w) for _, w in weight_keys])
            key = (r1 - r0, i1 - i0, k1 - k0, seen.get(data_key), kept)
            start, first_event = len(self.items), self.events
            if before is not None and before[0] == key and whole and not self.named:
                self._repeat(before, current)
                e = first_event  # its own fetches, in the order the items issue them: the data, then each group
                for q in (data_key, *[w for _, w in weight_keys]):
                    if q not in seen:
                        seen[q], e = e, e + 1
                assert e == self.events
                self.last_data = seen[data_key]
                self.last_weights = {g0 - k0: seen[w] for g0, w in weight_keys}
                before = (key, start, len(self.items) - start, first_event)
                continue
            image = f"image {image_no} " if layer.images > 1 and self.named else ""
            named, items, item_extra, item_tail_gap = self.named, self.items, self.item_extra, self.item_tail_gap
            item_layer, last_weights = self.item_layer, self.last_weights
            for g0, weight_key in weight_keys:
                g1 = min(k1, g0 + kpg)
                fetches: list[Fetch] = []
                if data_key not in seen:
                    seen[data_key] = self._event()
                    fetches.append(
                        _new(
                            Fetch, event=seen[data_key], buffer=Buffer.CBUF_DATA, channel=Channel.CDMA_DAT,
                            nbytes=input_bytes(i1 - i0), memory=layer.input_memory,
                            label=f"data {image}rows {i0}-{i1}" if named else "", streamed=streamed,
                            max_bytes_per_cycle=ingest,
                        )
                    )  # fmt: skip
                d = seen[data_key]
                w = seen.get(weight_key)
                if w is None:
                    w = seen[weight_key] = self.events
                    self.events = w + 1
                    fetches.append(
                        _new(
                            Fetch, event=w, buffer=Buffer.CBUF_WEIGHT, channel=Channel.CDMA_WT,
                            nbytes=group_bytes(g1 - g0), memory=layer.weight_memory,
                            label=f"weights k{g0}-{g1}" if named else "", streamed=False, max_bytes_per_cycle=0.0,
                        )
                    )  # fmt: skip
                blocks, write_bytes, extra, tail_gap, credit = per_item(r1 - r0, g1 - g0)
                item_extra.append(extra)
                item_tail_gap.append(tail_gap)
                covered = min(prefetch_left, extra)
                prefetch_left -= covered
                item_layer.append(current)
                last_weights[g0 - k0] = w
                items.append(
                    _new(
                        Item,
                        name=f"{image}rows {r0}-{r1} k{g0}-{g1}" if named else "",
                        fetches=tuple(fetches),
                        uses=(d, w) if d >= 0 and w >= 0 else tuple(e for e in (d, w) if e >= 0),  # -1: left before
                        blocks=blocks,
                        write_bytes=write_bytes,
                        write_memory=layer.output_memory,
                        drain_reads=extra - covered,
                        drain_read_memory=layer.input_memory,
                        # what the prefetch did not cover streams at the credits' pace
                        drain_read_cycles=up_to_grid(credit * (extra - covered) / extra) if extra else 0.0,
                    )
                )
            if weight_keys:
                self.last_data = seen[data_key]
            before = (key, start, len(self.items) - start, first_event)
        self.layers = current + 1
        self.last_added = ((layer, plan, hw), before)
        return fp

    def add_instances(self, layer: ConvLayer, plan: TilePlan, hw: HwConfig, count: int) -> None:
        """Append `count` independent instances of `layer` under `plan` (instances_cycles)."""
        for _ in range(count):
            self.add(layer, plan, hw)

    def _repeat(self, before: tuple, current: int) -> None:
        """Append hardware layer `current` as a repeat of the one `before` describes (key, first item, items,
        first own event): the same items, their own fetch events renumbered past the last one (events
        older than that layer's are the same operands). Kept as the explicit layer's items and a
        renumbering (`renumber`, renumbered): a run of alike layers the runner skips is never built."""
        _, start, count, first_event = before
        own = self.events - first_event  # the previous layer's own fetch events
        first, shift = self.renumber.get(self.item_layer[start], (first_event, 0))
        self.renumber[current] = (first, shift + own)
        self.items.extend(self.items[start : start + count])
        self.item_extra.extend(self.item_extra[start : start + count])
        self.item_tail_gap.extend(self.item_tail_gap[start : start + count])
        self.item_layer.extend([current] * count)
        self.events += own

    def _event(self) -> int:
        self.events += 1
        return self.events - 1

    def items_as_run(self) -> list[Item]:
        """Every item with the fetch events it runs with (repeated layers' renumbered)."""
        return [
            renumbered(it, *self.renumber[g]) if g in self.renumber else it
            for it, g in zip(self.items, self.item_layer, strict=True)
        ]

    def run(
        self, hw: HwConfig, record_events: bool, *, first_layers: int = 0, first_run: list | None = None,
        steady: SteadyState = STEADY,
    ):  # fmt: skip
        return _run_hardware_layers(
            hw, self.items, self.item_layer, self.item_extra, self.item_tail_gap, self.info, record_events,
            self.renumber, first_layers, first_run, steady,
        )  # fmt: skip

    def traffic(self, operand_memory: Memory) -> Traffic:
        """Bytes the chain's fetches, SDP operand reads (from `operand_memory`) and writes move."""
        return item_traffic(self.items, extra_reads=sum(self.item_extra), extra_memory=operand_memory)


def _weight_ratio(layer: ConvLayer, hw: HwConfig) -> float:
    """Stored over dense weight bytes (compressed weights read fewer bytes)."""
    if layer.weight_bytes is None:
        return 1.0
    return layer.weight_bytes / cdma.weight_bytes(layer.shape.out_k, bytes_per_kernel(layer), hw)


@dataclasses.dataclass(frozen=True)
class ChainStats:
    """Convolutions run one after another as hardware layers in ping-pong register groups."""

    cycles: int  # from the first layer's start to the last layer's last atom
    layer_ends: tuple[int, ...]  # each hardware layer's last atom
    traffic: Traffic


def simulate_chain(
    steps: Sequence[tuple[ConvLayer, TilePlan]], hw: HwConfig, *, steady: SteadyState = STEADY
) -> ChainStats:
    """Time convolutions (each under its plan) as one sequence of hardware layers, the way a split layer's
    plan runs (simulate_conv) and the way a program's layers run in ping-pong register groups: each next
    layer fetches into what the previous one releases, keeps what it set to keep (SKIP_*_RLS) for a layer
    that reuses it (a layer with data_resident / weights_resident takes the previous layer's operand)."""
    chain = _Chain(named=False)
    for layer, plan in steps:
        chain.add(layer, plan, hw)
    res, _, ends = chain.run(hw, False, steady=steady)
    return ChainStats(math.ceil(res.end), ends, chain.traffic(steps[0][0].input_memory))


@dataclasses.dataclass(frozen=True)
class ConvActivity:
    """What a convolution's units do under a plan, counted for its energy (nvdla_sim.energy)."""

    atomic_ops: int  # CMAC atomic operations: one data atom against one kernel group (padded channels too)
    weight_loads: int  # stripe operations: a kernel group's weights for one block loaded into CMAC
    cbuf_read_bytes: int  # data atoms and weights CSC reads from CBUF
    partial_sums: int  # CACC accumulations: atomic ops x kernels of their group
    outputs: int  # output elements CACC delivers to SDP


@lru_cache(maxsize=4096)  # pure; the same layer recurs in every block and decode step
def conv_activity(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> ConvActivity:
    """Count the plan's work over its items (group_blocks, as simulate_conv times them): each atomic op
    reads one data atom (atomic_c elements) from CBUF; each stripe op loads its kernel group's weights for
    one block (kernels x atomic_c elements). The plan's items (tile_steps) are every band against every
    kernel group of every kernel tile, in whatever order: counted per (band height, group size), times how
    many items have them (tile_sizes), not item by item (tests/unit/test_layer_skip.py compares the two)."""
    p = layer.precision
    atom = hw.mac.atomic_c * p.bytes
    channel_ops = channel_ops_per_stripe(layer, hw)
    kpg = hw.kernels_per_atomic(p)
    s = layer.shape
    groups: dict[int, int] = {}  # kernel group size -> groups of that size over every kernel tile
    for tile, n_tiles in tile_sizes(s.out_k, plan.kernels_per_tile):
        for size, n in tile_sizes(tile, kpg):
            groups[size] = groups.get(size, 0) + n * n_tiles
    ops = loads = read = sums = outputs = 0
    for rows, n_bands in tile_sizes(s.out_h, plan.rows_per_tile):
        for kernels, n_groups in groups.items():
            count = n_bands * layer.images * n_groups
            runs = group_blocks(layer, hw, rows, kernels)
            item_ops = sum(r.count * r.useful_ops for r in runs)
            item_loads = sum(r.count for r in runs) * channel_ops
            ops += count * item_ops
            loads += count * item_loads
            read += count * (item_ops * atom + item_loads * kernels * atom)
            sums += count * item_ops * kernels
            outputs += count * rows * s.out_w * kernels
    return ConvActivity(ops, loads, read, sums, outputs)


def instances_cycles(
    layer: ConvLayer, plan: TilePlan, hw: HwConfig, count: int, *, steady: SteadyState = STEADY
) -> int:
    """Cycles of `count` independent instances of a layer (heads, groups: their own input and weights)
    under `plan`, run back to back in ping-pong register groups (simulate_chain: the next instance
    fetches into what the previous one releases; its compute follows the previous one's). The instances are
    one chain of hardware layers, whose steady state the layer skip finds and jumps over (engine.steady: the
    chain of identical instances settles into a period, two instances for the two register groups)."""
    _check_instances(layer, count)
    chain = _Chain(named=False)
    chain.add_instances(layer, plan, hw, count)
    return math.ceil(chain.run(hw, False, steady=steady)[0].end)


def _check_instances(layer: ConvLayer, count: int) -> None:
    if count < 1:
        raise ShapeError(f"{layer.name}: instances must be >= 1, not {count}")
    if layer.data_resident or layer.weights_resident:
        raise ShapeError(f"{layer.name}: independent instances cannot take operands left in CBUF (*_REUSE)")


def simulate_conv(
    layer: ConvLayer, hw: HwConfig, plan: TilePlan, *, record_events: bool = True, steady: SteadyState = STEADY
) -> LayerStats:
    """Cycle-approximate run of one convolution-pipeline layer under `plan` (`steady`: how its steady states
    are skipped, steady.SteadyState)."""
    chain = _Chain(named=record_events)
    fp = chain.add(layer, plan, hw)
    res, dram_busy, layer_ends = chain.run(hw, record_events, steady=steady)
    return _conv_stats(layer, hw, plan, fp, chain.items, chain.item_extra, (res, dram_busy, layer_ends))


def simulate_instances(layer: ConvLayer, hw: HwConfig, plan: TilePlan, count: int) -> tuple[LayerStats, int]:
    """simulate_conv(layer, hw, plan, record_events=False) and instances_cycles(layer, plan, hw, count) from
    one run: the chain's first instance runs as the layer alone (nothing before it; the runner is taken at
    the end of its last hardware layer, before the next instance books anything), so the single layer's
    figures are the chain's at that point (tests/unit/test_conv_instances.py compares the two)."""
    if count < 2:  # one instance is the layer alone
        single = simulate_conv(layer, hw, plan, record_events=False)
        return single, single.cycles
    _check_instances(layer, count)
    chain = _Chain(named=False)
    fp = chain.add(layer, plan, hw)
    items, extra, layers = len(chain.items), list(chain.item_extra), chain.layers
    chain.add_instances(layer, plan, hw, count - 1)
    first_run: list = []
    res, _, _ = chain.run(hw, False, first_layers=layers, first_run=first_run)
    single = _conv_stats(layer, hw, plan, fp, chain.items[:items], extra, first_run[0])
    return single, math.ceil(res.end)


def _conv_stats(layer: ConvLayer, hw: HwConfig, plan: TilePlan, fp: Footprint, items, item_extra, run) -> LayerStats:
    """A layer's figures from its run under `plan`: its items and their SDP operand bytes as built
    (_Chain), and the runner's (result, its ports' use, hardware layer ends)."""
    res, use, layer_ends = run
    dram_busy = use.busy
    rate = drain_rate(layer, hw)
    p = layer.precision
    extra_reads = sum(item_extra)
    cycles = math.ceil(res.end)
    traffic = item_traffic(items, extra_reads=extra_reads, extra_memory=layer.input_memory)
    macs = layer.performed_macs  # what the array does: utilization stays <= 100% under the sparse what-if
    peak = hw.peak_macs_per_cycle(p)
    reads, writes = _compulsory_bytes(layer, hw, _weight_ratio(layer, hw), extra_reads)
    lower = conv_floor(layer, hw, read_bytes=reads, write_bytes=writes)
    bound = _classify(res, max(dram_busy.values()))
    units = {
        Unit.CDMA: UnitStats(math.ceil(res.fetch_busy), math.ceil(res.fetch_wait_port)),
        Unit.CSC: UnitStats(res.compute_busy + res.compute_bubbles, math.ceil(res.wait_fetch + res.wait_drain)),
        Unit.CMAC: UnitStats(res.compute_busy, math.ceil(res.compute_bubbles + res.wait_fetch + res.wait_drain)),
        Unit.CACC: UnitStats(res.compute_busy, math.ceil(res.wait_drain)),  # assembly; delivery shows as SDP
        Unit.SDP: UnitStats(res.drain_busy, 0),
        Unit.DRAM: UnitStats(math.ceil(dram_busy[Memory.DRAM]), 0),
    }
    if layer.pool is not None:
        units[Unit.PDP] = UnitStats(res.drain_busy, 0)
    if hw.memory.has_sram:
        units[Unit.SRAM] = UnitStats(math.ceil(dram_busy[Memory.SRAM]), 0)
    return LayerStats(
        name=layer.name,
        cycles=cycles,
        macs=macs,
        peak_macs_per_cycle=peak,
        traffic=traffic,
        units=units,
        bound=bound,
        lower_bound_cycles=lower,
        events=tuple(res.events),
        plan=plan,
        dram_mix=use.dram_mix,
        detail=ConvDetail(
            items=len(items),
            refetch_factor=round((traffic.dram_read + traffic.sram_read) / max(reads, 1), 4),
            prologue_cycles=math.ceil(res.first_compute),
            weight_load_bubbles=res.compute_bubbles,
            wait_fetch=math.ceil(res.wait_fetch),
            wait_sdp=math.ceil(res.wait_drain),
            time_breakdown=_breakdown(res),
            sdp_elements_per_cycle=rate,
            data_tiles=fp.n_data_tiles,
            weight_tiles=fp.n_weight_tiles,
            hardware_layers=len(layer_ends),
            hardware_layer_ends=tuple(layer_ends),
            weight_ring_groups=fp.weight_capacity_groups,
            weight_bytes_fetched=sum(f.nbytes for it in items for f in it.fetches if f.buffer is Buffer.CBUF_WEIGHT),
            data_bytes_fetched=sum(f.nbytes for it in items for f in it.fetches if f.buffer is Buffer.CBUF_DATA),
            sparse_mac_whatif=layer.sparse_mac,
        ),
    )


def _check_resident(layer: ConvLayer, plan: TilePlan, fp, bands: int) -> None:
    """An operand reused from CBUF must be all there: the whole input in one band, or every kernel group
    in the weight banks at once (the RTL keeps what the previous layer fetched, nothing more). `bands`:
    the plan's data tiles."""
    if layer.data_resident and bands > 1:
        raise ShapeError(f"{layer.name}: reused input (DATA_REUSE) must be one band, not {bands} bands of rows")
    groups = fp.groups_per_weight_tile * fp.n_weight_tiles
    if layer.weights_resident and fp.weight_capacity_groups < groups:
        raise ShapeError(
            f"{layer.name}: reused weights (WEIGHT_REUSE) must all be in the weight banks: {groups} kernel groups, "
            f"{plan.weight_banks} banks hold {fp.weight_capacity_groups}"
        )


def _hardware_layer(plan: TilePlan, d: int, k: int, n_bands: int) -> int:
    """Which hardware layer runs data tile `d` (of `n_bands`: bands of rows of every image) with weight
    tile `k`. The convolution pipeline only runs in full-input mode (programming_guide.rst), so every band
    of output rows (of each image) is a hardware layer of its own ("split H"); weight-stationary order
    also makes every weight tile one (for k: for band)."""
    return k * n_bands + d if plan.order is LoopOrder.WEIGHT_STATIONARY else d


def regroup_cycles(hw: HwConfig) -> int:
    """From a hardware layer's end to the enable of the layer after next in the same ping-pong register
    group: completion, the driver's reprogramming and the launch (measured on the nv_small RTL with
    NVIDIA's testbench driver)."""
    t = hw.timing
    return t.completion_cycles + t.driver_reprogram_cycles + t.conv_launch_cycles


def _run_hardware_layers(
    hw, items, item_layer, item_extra, item_tail_gap, info: dict[int, _HwLayerInfo], record_events, renumber=None,
    first_layers: int = 0, first_run: list | None = None, steady: SteadyState = STEADY,
):  # fmt: skip
    """Run the items hardware layer by hardware layer on shared memory ports. Each later layer is enabled in
    the other register group while the previous one runs (a ping-pong driver), so layer n is enabled once
    layer n-2 has ended and the driver has reprogrammed its group (completion + driver_reprogram_cycles)
    and launched it (conv_launch_cycles). Measured on the nv_small RTL (validation/data/nvdla_rtl_reuse.json,
    nvdla_rtl_transformer.json): the next layer's CDMA fetches as soon as the previous layer's fetches end,
    into the CBUF slots the previous layer releases (a kernel group as its last band finishes with it, a
    band of input at its end; kept operands stay, SKIP_*_RLS), and its CSC starts when the previous layer's
    last item has drained. Operands that stay resident (DATA/WEIGHT_REUSE) are not fetched again. A layer
    with another CBUF bank split starts after the previous one's interrupt and its own launch
    (layer_gap_cycles; reuse_split_change on the RTL), its rings empty. Returns the
    summed pipeline result (end = the whole run, from the first layer's start to the last layer's last
    atom), the busy time per memory port, and each hardware layer's end. `renumber` (_Chain.renumber):
    the layers whose items are an explicit layer's with their events renumbered (built only to run).
    With `first_layers`, `first_run` receives what this returns as it stood after that many layers (no skip
    across them)."""
    fill = hw.mac.pipeline_cycles + hw.cacc.rmw_cycles
    regroup = regroup_cycles(hw)
    renumber = renumber or {}
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(item_layer):
        groups.setdefault(g, []).append(i)
    last_layer: dict[int, int] = {}  # the hardware layer that uses a fetch event last
    for g, idxs in groups.items():
        first, shift = renumber.get(g, (0, 0))
        for i in idxs:
            for e in items[i].uses:
                last_layer[e + shift if shift and e >= first else e] = g
    total: PipelineResult | None = None
    ports = make_ports(hw, items)
    offset = 0.0  # end of the previous layer: its last atom, or its last transfer
    events = []
    prev: PipelineResult | None = None
    ends: list[float] = []
    layers = list(groups.items())

    prefetched: dict[tuple, list[Item]] = {}

    def group_of(pos: int) -> list[Item]:
        if not hw.timing.conv_input_before_compute:
            return raw_of(pos)
        n, idxs = layers[pos]
        capacity = info[n].weight_capacity
        # an explicit layer's items with the weights moved, once for it and its repeats, which take them
        # renumbered (moving fetches between items and renumbering their events commute)
        key = (id(items[idxs[0]]), len(idxs), capacity)
        base = prefetched.get(key)
        if base is None:
            base = prefetched[key] = _prefetch_weights([items[i] for i in idxs], capacity)
        return base

    def raw_of(pos: int) -> list[Item]:
        return [items[i] for i in layers[pos][1]]

    def moved(pos: int):  # how the layer's events are renumbered from those its items hold
        return _moved(*renumber.get(layers[pos][0], (0, 0)))

    def events_of(pos: int, events) -> list[int]:  # events its items hold, as the layer's
        first, shift = renumber.get(layers[pos][0], (0, 0))
        return [e + shift if e >= first else e for e in events] if shift else list(events)

    @cache
    def fetches_of(pos: int) -> list[int]:  # in the items' order (before _prefetch_weights moves any)
        if pos < 0:
            return []
        return events_of(pos, own_fetches([items[i] for i in layers[pos][1]]))

    @cache
    def keep_of(pos: int) -> frozenset[int]:
        n, idxs = layers[pos]
        used = events_of(pos, [e for i in idxs for e in items[i].uses])
        return frozenset(e for e in used if last_layer[e] > n)

    def prefetch_of(pos: int) -> int:
        # SDP operand streams (bias, residual) are read by the SDP RDMAs alongside: at once until the
        # RDMA's latency FIFO is full (booked at the layer's start), then paced by the drain (Item.drain_reads)
        return min(sum(item_extra[i] for i in layers[pos][1]), sdp.operand_prefetch_bytes(hw))

    repeated_items: dict[tuple, tuple] = {}

    def signature(pos: int) -> tuple:
        n, idxs = layers[pos]
        changed = pos > 0 and info[n - 1].banks != info[n].banks
        extra = (info[n], changed, prefetch_of(pos), item_tail_gap[idxs[-1]])
        # of the items as built: _prefetch_weights is a function of them and the ring (in info)
        raw = [items[i] for i in idxs]
        if n not in renumber:
            return layer_signature(raw, fetches_of(pos - 1), keep_of(pos), extra)
        # a repeat: each event its items use is its own (renumbered) or older than the layer it repeats
        # (kept as is), never the previous layer's, so its items' part is that of every repeat of the same
        # items and renumbering threshold
        key = (id(raw[0]), len(raw), renumber[n][0])
        part = repeated_items.get(key)
        if part is None:
            part = repeated_items[key] = layer_signature(raw, fetches_of(pos - 1), frozenset(), (), moved(pos))[0]
        return (part, kept_signature(keep_of(pos), fetches_of(pos), fetches_of(pos - 1)), extra)

    skip = (
        LayerSkip(ports, signature, len(layers))
        if steady.layers
        and not record_events
        and all(p.periodic for p in ports.values())
        and len(layers) >= steady.min_layers
        and len(items) >= steady.min_chain_items
        else None
    )
    pos = 0
    while pos < len(layers):
        n, idxs = layers[pos]
        lay = info[n]
        fetch_from = compute_from = 0.0
        held = prev.held if prev is not None else ()
        if prev is not None and info[n - 1].banks != lay.banks:
            fetch_from = compute_from = float(math.ceil(offset + layer_gap_cycles(hw)))
            held = ()
        elif prev is not None:
            fetch_from, compute_from = prev.fetch_end, prev.end
        if len(ends) >= 2:  # its register group is the one layer n-2 ran in
            enabled = math.ceil(ends[-2] + regroup)
            fetch_from, compute_from = max(fetch_from, enabled), max(compute_from, enabled)
        if skip is not None and prev is not None and total is not None and len(ends) >= max(2, first_layers):
            counters = tuple(getattr(total, c) for c in COUNTERS)
            jump = skip.at(
                pos, ref=int(offset), fetch_from=fetch_from, compute_from=compute_from, held=held,
                previous=fetches_of(pos - 1), live=lambda e, n=n: last_layer.get(e, -1) >= n, counters=counters,
            )  # fmt: skip
            if jump is not None:  # whole periods of alike layers (layer_skip): their twins' times, shifted
                last = pos + jump.layers - 1
                prev = skip.jump(jump, ends, prev, fetches_of(last), fetches_of(pos - 1))
                grown = {c: v + jump.periods * i for c, v, i in zip(COUNTERS, counters, jump.counters, strict=True)}
                grown["skipped"] = total.skipped + sum(len(layers[q][1]) for q in range(pos, last + 1))
                total = dataclasses.replace(total, **grown)
                offset = ends[-1]
                pos = last + 1
                continue
        prefetch = prefetch_of(pos)
        if prefetch:
            ports[lay.input_memory].reserve(fetch_from, prefetch)
        heads = None
        if lay.operand_heads and prev is not None and info[n - 1].banks == lay.banks:
            # SDP's RDMA takes this layer's streams once the previous layer's are done (TimingConfig)
            t_rdma = ends[-1] - fill - hw.timing.sdp_rdma_handoff_cycles
            if len(ends) >= 2:
                t_rdma = max(t_rdma, enabled)
            port = ports[lay.input_memory]
            heads = OperandHeads(
                t_rdma, lay.operand_heads, lay.input_memory, beat_bytes(hw, lay.input_memory) / port.bytes_per_cycle,
                hw.timing.sdp_operand_head_cycles,
            )  # fmt: skip
        res = run_items(
            group_of(pos),  # built only for the layers run (not those a jump skips)
            renumber=renumber.get(n),
            capacities={Buffer.CBUF_DATA: lay.data_capacity, Buffer.CBUF_WEIGHT: lay.weight_capacity},
            ports=ports,
            fetch_unit=Unit.CDMA,
            compute_unit=Unit.CMAC,
            drain_unit=Unit.SDP,
            record_events=record_events,
            fetch_from=fetch_from,
            compute_from=compute_from,
            held=held,
            keep=keep_of(pos),
            startup=lay.startup,
            steady=steady,
            operand_heads=heads,
        )
        events += res.events
        # a stripe's delivery block ends with its gap before the next; a layer ends at its last atom
        # (and not before its last transfer on the memory ports: a write or operand read still in flight)
        last_beat = max(port.last_beat for port in ports.values())
        offset = max(math.ceil(res.end) + fill - item_tail_gap[idxs[-1]], math.ceil(last_beat))
        prev = res
        ends.append(offset)
        if total is None:
            total = dataclasses.replace(res, events=[])
        else:
            total = dataclasses.replace(total, **{c: getattr(total, c) + getattr(res, c) for c in COUNTERS})
        pos += 1
        if first_run is not None and pos == first_layers:
            first_run.append(
                (dataclasses.replace(total, end=offset, events=list(events)), _port_use(ports), tuple(ends))
            )
    assert total is not None
    return dataclasses.replace(total, end=offset, events=events), _port_use(ports), tuple(ends)


class _PortUse(NamedTuple):
    busy: dict[Memory, float]  # each memory port's busy cycles so far (its busier channel)
    dram_mix: AccessMix | None  # the DRAM clients' mix its DRAM port runs at (the dram memory model; else None)


def _port_use(ports) -> _PortUse:
    return _PortUse({mem: port.channel_busy for mem, port in ports.items()}, ports[Memory.DRAM].mix)


def _moved(first: int, shift: int):
    """A repeated hardware layer's renumbering (_Chain.renumber) as a function of an event id: the events
    at or after `first` moved by `shift` (renumbered writes the same rule into its items)."""
    return lambda e: e + shift if e >= first else e


def _prefetch_weights(items: list[Item], capacity: int) -> list[Item]:
    """While CSC waits for the whole input, CDMA's weight channel fetches every kernel group the weight
    ring holds, interleaved with the data (nv_small RTL: the data of own_mm_m64_k64_n32 completes after
    its 768 data and weight atoms, not its 512 data atoms). The first item issues those weight fetches."""
    first = list(items[0].fetches)
    moved = sum(f.buffer is Buffer.CBUF_WEIGHT for f in first)
    out = [items[0]]
    data, weight = Buffer.CBUF_DATA, Buffer.CBUF_WEIGHT
    for it in items[1:]:
        fetches = it.fetches
        take = [f for f in fetches if f.buffer is weight]
        rest = () if len(take) == len(fetches) else tuple(f for f in fetches if f.buffer is not weight)
        if (rest and any(f.buffer is data for f in rest)) or moved + len(take) > capacity:
            out.extend(items[len(out) :])
            break
        moved += len(take)
        first.extend(take)
        out.append(_copy(it, fetches=rest))
    out[0] = _copy(items[0], fetches=tuple(first))
    return out


def _compulsory_bytes(layer: ConvLayer, hw: HwConfig, w_ratio: float, extra: int) -> tuple[int, int]:
    """(read, write) bytes no plan avoids: every image's input, the weights (unless resident in CBUF) and
    SDP operands once, every image's output once."""
    s = layer.shape
    reads = (
        (0 if layer.data_resident else cdma.input_bytes(layer, s.in_h, hw) * layer.images)
        + (
            0
            if layer.weights_resident
            else math.ceil(cdma.weight_bytes(s.out_k, bytes_per_kernel(layer), hw) * w_ratio)
        )
        + extra
    )
    return reads, output_bytes(layer, s.out_h, s.out_k, hw) * layer.images


def _breakdown(res) -> TimeBreakdown:
    parts = (res.compute_busy, res.compute_bubbles, math.ceil(res.wait_fetch), math.ceil(res.wait_drain))
    return TimeBreakdown(*parts, other=max(0, math.ceil(res.end) - sum(parts)))


def _classify(res, dram_busy: float) -> Bound:
    """The bottleneck is the pipeline stage with the most time: MAC array (split into useful work and
    CBUF weight-load bubbles), SDP drain, or memory (port time, or exposed fetch waits). When no stage
    fills three quarters of the run but the core's work and its waits for fetches fill nine tenths, the
    two ran in turn (re-fetch with no room to run ahead, register-group waits): SERIAL."""
    core = res.compute_busy + res.compute_bubbles
    stages = {
        Bound.COMPUTE: core,
        Bound.SDP: res.drain_busy,
        Bound.DRAM: max(dram_busy, res.wait_fetch),
    }
    bound = max(stages, key=lambda b: stages[b])
    if res.end and stages[bound] < 0.75 * res.end and core + res.wait_fetch >= 0.9 * res.end and res.wait_fetch:
        return Bound.SERIAL
    if bound is Bound.COMPUTE and res.compute_bubbles > res.compute_busy:
        return Bound.CBUF
    return bound


# ---- functional -------------------------------------------------------------------------------------


def run_conv(
    layer: ConvLayer,
    data: np.ndarray,
    weights: np.ndarray,
    hw: HwConfig,
    plan: TilePlan,
    *,
    sdp_params: sdp.SdpParams | None = None,
    truncate: int = 0,
    pad_value: int = 0,
) -> tuple[np.ndarray, int]:
    """Bit-exact result of the layer: data[H, W, C], weights[K, R, S, C] -> output[H', W', K'] and
    saturation count. Computed tile by tile in the plan's order through CMAC/CACC/SDP (and PDP).
    `pad_value` is the element CSC feeds for padded positions (D_ZERO_PADDING_VALUE). A layer of several
    images takes data[images, H, W, C] and returns output[images, H', W', K']: each image's hardware
    layers compute it alone (the plan's kept weights are the same kernels)."""
    s, p = layer.shape, layer.precision
    check_plan(layer, plan, hw)
    if layer.images > 1:
        if data.shape[:1] != (layer.images,):
            raise ValueError(f"data shape {data.shape} must start with the layer's {layer.images} images")
        one = dataclasses.replace(layer, images=1)
        runs = [
            run_conv(one, x, weights, hw, plan, sdp_params=sdp_params, truncate=truncate, pad_value=pad_value)
            for x in data
        ]
        return np.stack([r[0] for r in runs]), sum(r[1] for r in runs)
    if sdp_params is not None:  # the numbers must be the ones the layer's timing counts (each image's run)
        sdp.check_numbers(layer.sdp, sdp_params, p, layer.name)
    if data.shape != (s.in_h, s.in_w, s.in_c):
        raise ValueError(f"data shape {data.shape} != (H, W, C) = {(s.in_h, s.in_w, s.in_c)}")
    if weights.shape != (s.out_k, s.kernel_h, s.kernel_w, s.in_c):
        raise ValueError(f"weights shape {weights.shape} != (K, R, S, C) = {(s.out_k, s.kernel_h, s.kernel_w, s.in_c)}")
    ac = hw.mac.atomic_c
    pad_val = pad_value
    padded = np.full(
        (s.in_h + s.pad_top + s.pad_bottom, s.in_w + s.pad_left + s.pad_right, s.in_c), pad_val, data.dtype
    )
    padded[s.pad_top : s.pad_top + s.in_h, s.pad_left : s.pad_left + s.in_w] = data
    acc_dtype = np.float32 if p.is_float else np.int32
    out = np.zeros((s.out_h, s.out_w, s.out_k), acc_dtype)
    saturations = 0
    for step in tile_steps(layer, plan, hw):  # the plan's loop nest, as simulate_conv times it
        (r0, r1), (g0, g1) = step.rows, step.group
        partials = []
        for cb in range(0, s.in_c, ac):
            for r in range(s.kernel_h):
                for q in range(s.kernel_w):
                    ys = np.arange(r0, r1) * s.stride_y + r * s.dilation_y
                    xs = np.arange(s.out_w) * s.stride_x + q * s.dilation_x
                    atoms = padded[ys][:, xs, cb : cb + ac].reshape(-1, min(ac, s.in_c - cb))
                    partials.append(cmac.atomic_op(atoms, weights[g0:g1, r, q, cb : cb + ac], p))
        res = cacc.accumulate(partials, p, truncate=truncate)
        saturations += res.acc_saturations + res.out_saturations
        out[r0:r1, :, g0:g1] = res.values.reshape(r1 - r0, s.out_w, g1 - g0)
    if sdp_params is None:
        result = out
    else:
        flat = out.reshape(-1, s.out_k)
        sres = sdp.sdp_apply(flat, _flatten_operands(sdp_params, s.out_h * s.out_w, s.out_k))
        saturations += sres.saturations
        result = sres.values.reshape(s.out_h, s.out_w, s.out_k)
    if layer.pool is not None:
        if sdp_params is None:
            result = pdp.pool(result, layer.pool, p, bits=cacc.OUT_BITS)
        else:
            result = pdp.pool(result, layer.pool, layer.out_precision)
    return result, saturations


def _flatten_operands(params: sdp.SdpParams, pixels: int, k: int) -> sdp.SdpParams:
    """Per-element operands given as [H', W', K] become [P, K]."""

    def fix(v):
        if isinstance(v, np.ndarray) and v.ndim == 3:
            return v.reshape(pixels, k)
        return v

    y = params.y
    if y is not None:
        y = dataclasses.replace(y, alu_operand=fix(y.alu_operand), mul_operand=fix(y.mul_operand))
    stages = []
    for st in (params.x1, params.x2):
        stages.append(
            None
            if st is None
            else dataclasses.replace(st, alu_operand=fix(st.alu_operand), mul_operand=fix(st.mul_operand))
        )
    return dataclasses.replace(params, x1=stages[0], x2=stages[1], y=y)
