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
from collections import Counter
from functools import lru_cache

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import channel_ops_per_stripe, conv_floor, drain_rate
from nvdla_sim.engine.stats import Bound, LayerStats, Unit, UnitStats
from nvdla_sim.engine.tile_pipeline import (
    BlockRun,
    Buffer,
    Channel,
    Fetch,
    Item,
    PipelineResult,
    item_traffic,
    make_ports,
    run_items,
)
from nvdla_sim.engine.tiling import (
    LoopOrder,
    TilePlan,
    bytes_per_kernel,
    check_plan,
    footprint,
    kernel_tiles,
    layer_gap_cycles,
    row_tiles,
    tile_steps,
)
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer, Memory
from nvdla_sim.units import cacc, cdma, cmac, csc, pdp, sdp


@lru_cache(maxsize=8192)
def _blocks(
    stripes: tuple[int, ...], kernels: int, channel_ops: int, load: int, rate: int, atom_gap: int, stripe_gap: int
) -> tuple[BlockRun, ...]:
    """Block runs per stripe of one kernel group. CACC delivers a stripe's
    output atoms (`kernels` elements each) at the SDP rate, with `atom_gap` idle cycles per atom and
    `stripe_gap` per stripe (TimingConfig, measured on the nv_small RTL)."""
    runs: list[list[int]] = []
    for length in stripes:
        block = [
            channel_ops * csc.stripe_op_cycles(length, load),
            channel_ops * length,
            length * (math.ceil(kernels / rate) + atom_gap) + stripe_gap,
        ]
        if runs and runs[-1][1:] == block:
            runs[-1][0] += 1
        else:
            runs.append([1, *block])
    return tuple(BlockRun(*r) for r in runs)


def group_blocks(layer: ConvLayer, hw: HwConfig, rows: int, kernels: int) -> tuple[BlockRun, ...]:
    """Block runs of one kernel group of `kernels` kernels over a band of `rows` output rows."""
    s, p = layer.shape, layer.precision
    stripes = (
        csc.image_stripes(s.out_w, rows)
        if layer.image_input
        else csc.stripe_lengths(rows * s.out_w, csc.ideal_stripe(hw, p))
    )
    return _blocks(
        stripes,
        min(
            hw.kernels_per_atomic(p), cdma.atom_channels(kernels, layer.out_precision, hw)
        ),  # CACC delivers whole atoms
        channel_ops_per_stripe(layer, hw),
        csc.weight_load_cycles(hw, p),
        drain_rate(layer, hw),
        hw.timing.cacc_atom_gap_cycles,
        hw.timing.cacc_stripe_gap_cycles,
    )


@lru_cache(maxsize=4096)
def core_floor(
    layer: ConvLayer,
    hw: HwConfig,
    rows_per_tile: int,
    kernels_per_tile: int,
    order: LoopOrder,
    ring_groups: int = 0,
    refill_cycles: float = 0.0,
) -> int:
    """Fewest cycles from the first compute to the last drain with bands of `rows_per_tile` output rows and
    tiles of `kernels_per_tile` kernels in `order`. The core runs every block (stripe) of every kernel
    group one after another, and a block cannot start before the one before it has computed and the one
    before that has drained (run_items' one-deep delivery buffer): inside a hardware layer each block
    takes at least the larger of its compute and the previous block's drain. A hardware layer ends when
    its last block has drained, and the next one computes after that at the soonest.

    When a hardware layer streams more kernel groups than its weight ring holds (`ring_groups`), group
    i + ring_groups is fetched only once group i has computed (its CBUF entries released), so its compute
    starts `refill_cycles` (memory latency plus the group's transfer) after that at the soonest: every
    ring_groups groups take at least the larger of ring_groups computes and one compute plus a refill."""
    kpg = hw.kernels_per_atomic(layer.precision)
    tiles = kernel_tiles(layer, kernels_per_tile) if order is LoopOrder.WEIGHT_STATIONARY else [(0, layer.shape.out_k)]
    bands = Counter(r1 - r0 for r0, r1 in row_tiles(layer, rows_per_tile))
    total = 0
    for (rows, n_bands), (kernels, n_tiles) in itertools.product(
        bands.items(), Counter(b - a for a, b in tiles).items()
    ):
        # one hardware layer: its kernel groups in order, a run of full groups and the rest
        chain, prev_d, computes = 0, 0, []
        full, rest = divmod(kernels, kpg)
        for size, count in ((kpg, full), (rest, 1 if rest else 0)):
            if count:
                runs = group_blocks(layer, hw, rows, size)
                first, last_d = _item_chain(runs, prev_d)
                chain += first + (count - 1) * _item_chain(runs, last_d)[0]
                prev_d = last_d
                computes.append(sum(n * c for n, c, _, _ in runs))
        groups = full + (1 if rest else 0)
        if ring_groups and groups > ring_groups:
            c = min(computes)
            jumps, left = divmod(groups - 1, ring_groups)
            chain = max(chain, c + jumps * max(refill_cycles + c, ring_groups * c) + left * c)
        total += (chain + prev_d) * n_bands * n_tiles
    return math.floor(total)


def _item_chain(runs: tuple[BlockRun, ...], prev_d: int) -> tuple[int, int]:
    """(the floor of an item's blocks from the hand-over of the block before, whose drain takes `prev_d`,
    to the hand-over of its last block; that block's drain)."""
    chain = 0
    for count, c, _, d in runs:
        chain += max(c, prev_d) + (count - 1) * max(c, d)
        prev_d = d
    return chain, prev_d


def output_bytes(layer: ConvLayer, rows: int, kernels: int, hw: HwConfig) -> int:
    """Bytes written for `rows` output rows of `kernels` kernels; with fused pooling, that band's share
    of the pooled cube (PDP keeps partial windows in its line buffer across row tiles)."""
    s = layer.shape
    if layer.pool is None:
        return cdma.feature_bytes(s.out_w, rows, kernels, layer.out_precision, hw)
    pw, ph = layer.pool.out_size(s.out_w, s.out_h)
    return math.ceil(cdma.feature_bytes(pw, ph, kernels, layer.out_precision, hw) * rows / s.out_h)


def simulate_conv(layer: ConvLayer, hw: HwConfig, plan: TilePlan, *, record_events: bool = True) -> LayerStats:
    """Cycle-approximate run of one convolution-pipeline layer under `plan`."""
    hw.check_precision(layer.precision)
    check_plan(layer, plan, hw)
    s, p = layer.shape, layer.precision
    fp = footprint(layer, plan, hw)
    kpg = hw.kernels_per_atomic(p)
    rate = drain_rate(layer, hw)  # raises UnsupportedError for SDP features the config lacks
    bpk = bytes_per_kernel(layer)
    dense_total = cdma.weight_bytes(s.out_k, bpk)
    w_ratio = 1.0 if layer.weight_bytes is None else layer.weight_bytes / dense_total
    rtiles = row_tiles(layer, plan.rows_per_tile)
    operand_bytes = p.bytes  # a per-element operand (the residual) is a feature cube of the layer's precision

    # Fetch keys: an operand is fetched again whenever its key is new. Every band of rows is a hardware
    # layer of its own (full-input mode), so in data-stationary order each band fetches all its weights
    # again; weight-stationary order keeps a weight tile resident across bands (SKIP_WEIGHT_RLS, then
    # WEIGHT_REUSE) and re-fetches the data per weight tile. Operands the previous hardware layer left in
    # CBUF (layer.data_resident / weights_resident) are never fetched: their keys start out seen.
    ws = plan.order is LoopOrder.WEIGHT_STATIONARY
    weights_resident = ws or len(rtiles) == 1
    _check_resident(layer, plan, fp, len(rtiles))
    items: list[Item] = []
    item_layer: list[int] = []  # the hardware layer of each item (see _hardware_layer)
    item_extra: list[int] = []  # SDP operand bytes each item's pixels read
    seen: dict[tuple, int] = {}
    held: dict[int, tuple[set, set]] = {}  # per hardware layer: the data tiles and kernel groups it uses
    if layer.data_resident:
        seen[("d", 0)] = -1
    if layer.weights_resident:
        seen.update({("w", g0): -1 for g0 in range(0, s.out_k, kpg)})
    fetched_here: set[int] = set()  # fetch events of the current hardware layer (the rest stay resident)
    prefetch_left = 0  # operand bytes the current layer's SDP RDMA latency FIFO still takes up front
    current = -1
    for step in tile_steps(layer, plan, hw):  # the plan's loop nest, shared with run_conv
        d, k = step.data_tile, step.weight_tile
        if _hardware_layer(plan, d, k, len(rtiles)) != current:
            current = _hardware_layer(plan, d, k, len(rtiles))
            fetched_here = set()
            prefetch_left = sdp.operand_prefetch_bytes(hw)
        r0, r1 = step.rows
        i0, i1 = s.input_rows_for(r0, r1)
        pixels = (r1 - r0) * s.out_w
        data_key = ("d", d) if (not ws or len(rtiles) == 1) else ("d", d, k)
        g0, g1 = step.group
        fetches: list[Fetch] = []
        if data_key not in seen:
            seen[data_key] = len(seen)
            nbytes = cdma.input_bytes(layer, i1 - i0, hw)
            fetches.append(
                Fetch(
                    seen[data_key],
                    Buffer.CBUF_DATA,
                    Channel.CDMA_DAT,
                    nbytes,
                    layer.input_memory,
                    f"data rows {i0}-{i1}",
                    not hw.timing.conv_input_before_compute,
                )
            )
        weight_key = ("w", g0) if weights_resident else ("w", g0, d)
        if weight_key not in seen:
            seen[weight_key] = len(seen)
            nbytes = math.ceil(cdma.weight_bytes(g1 - g0, bpk) * w_ratio)
            fetches.append(
                Fetch(
                    seen[weight_key],
                    Buffer.CBUF_WEIGHT,
                    Channel.CDMA_WT,
                    nbytes,
                    layer.weight_memory,
                    f"weights k{g0}-{g1}",
                )
            )
        extra = sdp.operand_read_bytes(layer.sdp, pixels=pixels, channels=g1 - g0, operand_bytes=operand_bytes)
        item_extra.append(extra)
        covered = min(prefetch_left, extra)
        prefetch_left -= covered
        item_layer.append(current)
        fetched_here.update(f.event for f in fetches)
        held.setdefault(current, (set(), set()))[0].add(data_key)
        held[current][1].add(weight_key)
        items.append(
            Item(
                name=f"rows {r0}-{r1} k{g0}-{g1}",
                fetches=tuple(fetches),
                uses=tuple(e for e in (seen[data_key], seen[weight_key]) if e in fetched_here),
                blocks=group_blocks(layer, hw, r1 - r0, g1 - g0),
                write_bytes=output_bytes(layer, r1 - r0, g1 - g0, hw),
                write_memory=layer.output_memory,
                drain_reads=extra - covered,
                drain_read_memory=layer.input_memory,
            )
        )
    extra_reads = sum(item_extra)
    res, dram_busy, hw_layers = _run_hardware_layers(layer, hw, items, item_layer, item_extra, held, fp, record_events)
    cycles = math.ceil(res.end)
    traffic = item_traffic(items, extra_reads=extra_reads, extra_memory=layer.input_memory)
    macs = layer.performed_macs  # what the array does: utilization stays <= 100% under the sparse what-if
    peak = hw.peak_macs_per_cycle(p)
    reads, writes = _compulsory_bytes(layer, hw, w_ratio, extra_reads)
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
        detail={
            "items": len(items),
            # bytes read over the compulsory reads (input, weights and SDP operands once): 1.0 = no re-fetch
            "refetch_factor": round((traffic.dram_read + traffic.sram_read) / max(reads, 1), 4),
            "prologue_cycles": math.ceil(res.first_compute),
            "weight_load_bubbles": res.compute_bubbles,
            "wait_fetch": math.ceil(res.wait_fetch),
            "wait_sdp": math.ceil(res.wait_drain),
            "sdp_elements_per_cycle": rate,
            "data_tiles": fp.n_data_tiles,
            "weight_tiles": fp.n_weight_tiles,
            "hardware_layers": hw_layers,
            "weight_ring_groups": fp.weight_capacity_groups,
            "weight_bytes_fetched": sum(f.nbytes for it in items for f in it.fetches if f.buffer is Buffer.CBUF_WEIGHT),
            "sparse_mac_whatif": layer.sparse_mac,
        },
    )


def _check_resident(layer: ConvLayer, plan: TilePlan, fp, bands: int) -> None:
    """An operand reused from CBUF must be all there: the whole input in one band, or every kernel group
    in the weight banks at once (the RTL keeps what the previous layer fetched, nothing more)."""
    if layer.data_resident and bands > 1:
        raise ShapeError(f"{layer.name}: reused input (DATA_REUSE) must be one band, not {bands} bands of rows")
    groups = fp.groups_per_weight_tile * fp.n_weight_tiles
    if layer.weights_resident and fp.weight_capacity_groups < groups:
        raise ShapeError(
            f"{layer.name}: reused weights (WEIGHT_REUSE) must all be in the weight banks: {groups} kernel groups, "
            f"{plan.weight_banks} banks hold {fp.weight_capacity_groups}"
        )


def _hardware_layer(plan: TilePlan, d: int, k: int, n_bands: int) -> int:
    """Which hardware layer runs data tile `d` with weight tile `k`. The convolution pipeline only runs
    in full-input mode (programming_guide.rst), so every band of output rows is a hardware layer of its
    own ("split H"); weight-stationary order also makes every weight tile one (for k: for band)."""
    return k * n_bands + d if plan.order is LoopOrder.WEIGHT_STATIONARY else d


def _run_hardware_layers(layer, hw, items, item_layer, item_extra, held, fp, record_events):
    """Run the items hardware layer by hardware layer on shared memory ports. Each later layer is enabled in
    the other register group while the previous one runs (a ping-pong driver). Measured on the nv_small
    RTL (validation/data/nvdla_rtl_reuse.json): when CBUF has room for its operands beside the previous
    layer's, the next layer's CDMA fetches as soon as the previous layer's fetches end and its CSC starts
    when the previous layer's last item has drained; so only its compute and drain add time. Without room
    it starts after the previous layer's interrupt and its own launch (layer_gap_cycles). Operands that
    stay resident (DATA/WEIGHT_REUSE) have no fetch in the later layers' items. Returns the summed
    pipeline result (end = the whole run, from the first layer's start to the last layer's last atom),
    the busy time per memory port, and the number of hardware layers."""
    fill = hw.mac.pipeline_cycles + hw.cacc.rmw_cycles
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(item_layer):
        groups.setdefault(g, []).append(i)
    total: PipelineResult | None = None
    ports = make_ports(hw)
    offset = 0.0  # end of the previous layer: its last atom, or its last transfer
    events = []
    prev: tuple[int, PipelineResult] | None = None
    for n, idxs in groups.items():
        group = [items[i] for i in idxs]
        if hw.timing.conv_input_before_compute:
            group = _prefetch_weights(group, fp.weight_capacity_groups)
        if prev is None:
            fetch_from = compute_from = 0.0
        elif _room_beside(held[prev[0]], group, fp):
            fetch_from, compute_from = prev[1].fetch_end, prev[1].end
        else:
            fetch_from = compute_from = float(math.ceil(offset + layer_gap_cycles(hw)))
        # SDP operand streams (bias, residual) are read by the SDP RDMAs alongside: at once until the
        # RDMA's latency FIFO is full (booked here), then paced by the drain (Item.drain_reads)
        prefetch = min(sum(item_extra[i] for i in idxs), sdp.operand_prefetch_bytes(hw))
        if prefetch:
            ports[layer.input_memory].reserve(fetch_from, prefetch)
        res = run_items(
            group,
            capacities={Buffer.CBUF_DATA: fp.data_capacity_tiles, Buffer.CBUF_WEIGHT: fp.weight_capacity_groups},
            ports=ports,
            fetch_unit=Unit.CDMA,
            compute_unit=Unit.CMAC,
            drain_unit=Unit.SDP,
            record_events=record_events,
            fetch_from=fetch_from,
            compute_from=compute_from,
        )
        events += res.events
        # each stripe's delivery block ends with the inter-stripe gap; a layer ends at its last atom
        # (and not before its last transfer on the memory ports: a write or operand read still in flight)
        last_beat = max(port.last_beat for port in ports.values())
        offset = max(math.ceil(res.end) + fill - hw.timing.cacc_stripe_gap_cycles, math.ceil(last_beat))
        prev = (n, res)
        if total is None:
            total = dataclasses.replace(res, events=[])
        else:
            total = dataclasses.replace(
                total,
                compute_busy=total.compute_busy + res.compute_busy,
                compute_bubbles=total.compute_bubbles + res.compute_bubbles,
                wait_fetch=total.wait_fetch + res.wait_fetch,
                wait_drain=total.wait_drain + res.wait_drain,
                drain_busy=total.drain_busy + res.drain_busy,
                fetch_busy=total.fetch_busy + res.fetch_busy,
                fetch_wait_port=total.fetch_wait_port + res.fetch_wait_port,
            )
    assert total is not None
    busy = {mem: port.channel_busy for mem, port in ports.items()}
    return dataclasses.replace(total, end=offset, events=events), busy, len(groups)


def _room_beside(prev_held: tuple[set, set], nxt: list[Item], fp) -> bool:
    """Whether CBUF holds the next hardware layer's fetches beside what the previous layer holds until its
    end, fetched or kept from before: its data tiles and its kernel groups."""

    def count(buf: Buffer) -> int:
        return sum(f.buffer is buf for it in nxt for f in it.fetches)

    data, weights = count(Buffer.CBUF_DATA), count(Buffer.CBUF_WEIGHT)
    data_ok = data == 0 or len(prev_held[0]) + data <= fp.data_capacity_tiles
    weights_ok = weights == 0 or len(prev_held[1]) + weights <= fp.weight_capacity_groups
    return data_ok and weights_ok


def _prefetch_weights(items: list[Item], capacity: int) -> list[Item]:
    """While CSC waits for the whole input, CDMA's weight channel fetches every kernel group the weight
    ring holds, interleaved with the data (nv_small RTL: the data of own_mm_m64_k64_n32 completes after
    its 768 data and weight atoms, not its 512 data atoms). The first item issues those weight fetches."""
    first = list(items[0].fetches)
    moved = sum(f.buffer is Buffer.CBUF_WEIGHT for f in first)
    out = [items[0]]
    for it in items[1:]:
        if any(f.buffer is Buffer.CBUF_DATA for f in it.fetches):
            out.extend(items[len(out) :])
            break
        take = [f for f in it.fetches if f.buffer is Buffer.CBUF_WEIGHT]
        if moved + len(take) > capacity:
            out.extend(items[len(out) :])
            break
        moved += len(take)
        first.extend(take)
        out.append(dataclasses.replace(it, fetches=tuple(f for f in it.fetches if f.buffer is not Buffer.CBUF_WEIGHT)))
    out[0] = dataclasses.replace(items[0], fetches=tuple(first))
    return out


def _compulsory_bytes(layer: ConvLayer, hw: HwConfig, w_ratio: float, extra: int) -> tuple[int, int]:
    """(read, write) bytes no plan avoids: input, weights (unless resident in CBUF) and SDP operands once,
    the output once."""
    s = layer.shape
    reads = (
        (0 if layer.data_resident else cdma.input_bytes(layer, s.in_h, hw))
        + (0 if layer.weights_resident else math.ceil(cdma.weight_bytes(s.out_k, bytes_per_kernel(layer)) * w_ratio))
        + extra
    )
    return reads, output_bytes(layer, s.out_h, s.out_k, hw)


def _classify(res, dram_busy: float) -> Bound:
    """The bottleneck is the pipeline stage with the most time: MAC array (split into useful work and
    CBUF weight-load bubbles), SDP drain, or memory (port time, or exposed fetch waits)."""
    stages = {
        Bound.COMPUTE: res.compute_busy + res.compute_bubbles,
        Bound.SDP: res.drain_busy,
        Bound.DRAM: max(dram_busy, res.wait_fetch),
    }
    bound = max(stages, key=lambda b: stages[b])
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
    `pad_value` is the element CSC feeds for padded positions (D_ZERO_PADDING_VALUE)."""
    s, p = layer.shape, layer.precision
    check_plan(layer, plan, hw)
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
