"""The tile pipeline shared by every hardware layer: fetch -> compute -> drain -> write, with bounded buffers.

An Item is one unit of work for the core (for a convolution: one kernel group over one data tile). Its
fetches go through DMA channels into named ring buffers (CBUF data, CBUF weights, RDMA buffers); a fetch
may start once the buffer slot it reuses is released (ping-pong when capacity >= 2) and its channel's
previous request is out. The core runs the item's blocks (one per channel op / stripe): each block
computes, then hands its results to a one-deep delivery buffer that drains to SDP (or PDP); a block's
compute cannot start while the delivery buffer still holds the block before (CACC back-pressure).
Outputs are written as they drain. All memory traffic goes through MemoryPort calendars.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from nvdla_sim.engine.stats import Event, Traffic, Unit
from nvdla_sim.layers import Memory
from nvdla_sim.units.dram import MemoryPort


class Buffer(enum.Enum):
    """Ring buffers fetches land in; their capacities (in fetches) bound how far fetching runs ahead."""

    CBUF_DATA = "data"  # CBUF data banks (data tiles)
    CBUF_WEIGHT = "weight"  # CBUF weight banks (kernel groups)
    RDMA = "rdma"  # a stream unit's read DMA latency FIFO (SDP/PDP/CDP input)
    ERDMA = "erdma"  # SDP's element-wise operand read DMA


class Channel(enum.Enum):
    """DMA channels: requests on one channel are issued one after another; channels share the port."""

    CDMA_DAT = "cdma_dat"
    CDMA_WT = "cdma_wt"
    RDMA = "rdma"
    ERDMA = "erdma"


class BlockRun(NamedTuple):
    """`count` identical blocks of an item (one per stripe of a kernel group, or a stream chunk)."""

    count: int
    compute_cycles: int  # per block, including weight-load bubbles
    useful_ops: int  # atomic ops that do work (compute_cycles less the bubbles)
    drain_cycles: int  # delivering the block's results to SDP (or PDP)


@dataclass(frozen=True)
class Fetch:
    event: int  # unique id of this fetch (refetches get new ids)
    buffer: Buffer  # ring buffer it lands in
    channel: Channel  # DMA channel that issues it (sequential within a channel)
    nbytes: int
    memory: Memory
    label: str
    streamed: bool = False  # consumers may start on the first part (CSC polls CBUF per stripe)
    max_bytes_per_cycle: float = 0.0  # the receiving DMA's own rate limit (0: the port's); the port is free
    # for other channels in the cycles it leaves (cdma.feature_ingest_bytes_per_cycle)


@dataclass(frozen=True)
class Item:
    name: str
    fetches: tuple[Fetch, ...]  # fetches this item triggers
    uses: tuple[int, ...]  # fetch events whose data the item needs (including its own)
    blocks: Sequence[BlockRun]
    write_bytes: int
    write_memory: Memory
    drain_reads: int = 0  # bytes SDP's RDMAs read as the item drains (operand streams), on the input memory
    drain_read_memory: Memory = Memory.DRAM


@dataclass
class PipelineResult:
    end: float
    compute_busy: int
    compute_bubbles: int  # compute cycles that were not useful (weight-load bubbles)
    wait_fetch: float
    wait_drain: float
    drain_busy: int
    fetch_busy: float
    fetch_wait_port: float
    first_compute: float = 0.0  # when the core first had work: the layer's exposed fetch prologue
    fetch_end: float = 0.0  # when the last fetch's last beat left the memory port
    # what the rings hold at the end, oldest first: (buffer, fetch event, release time; inf = kept)
    held: tuple[tuple[Buffer, int, float], ...] = ()
    events: list[Event] = field(default_factory=list)
    ports: dict[Memory, MemoryPort] = field(default_factory=dict)


def run_items(
    items: Sequence[Item],
    *,
    capacities: dict[Buffer, int],
    ports: dict[Memory, MemoryPort],
    fetch_unit: Unit,
    compute_unit: Unit,
    drain_unit: Unit,
    record_events: bool = True,
    fetch_from: float = 0.0,
    compute_from: float = 0.0,
    held: Sequence[tuple[Buffer, int, float]] = (),
    keep: frozenset[int] = frozenset(),
) -> PipelineResult:
    """Run the items through fetch -> compute -> drain. `fetch_from` / `compute_from` are the earliest
    times the first fetch and the first compute may start (a later hardware layer on shared ports).
    `held` is what an earlier hardware layer left in the rings (PipelineResult.held): its slots free at
    their release time, or when their last user here computes if they were kept (an item may use a
    held event: an operand reused from CBUF). Events in `keep` stay in CBUF after this run (SKIP_*_RLS)."""
    # Release time of each fetch event = compute end of the last item that uses it.
    last_user: dict[int, int] = {}
    for idx, it in enumerate(items):
        for ev in it.uses:
            last_user[ev] = idx
    released: dict[int, float] = {}
    arrival: dict[int, float] = {}
    first_beat: dict[int, float] = {}
    streamed: set[int] = set()
    per_buffer: dict[Buffer, list[int]] = {}
    for buf, ev, at in held:
        per_buffer.setdefault(buf, []).append(ev)
        released[ev] = at
        arrival[ev] = first_beat[ev] = fetch_from  # fetched by an earlier layer: there before this one starts
    channel_free: dict[Channel, float] = dict.fromkeys(Channel, fetch_from)
    events: list[Event] = []

    core_free = compute_from  # when the assembly buffer can take the next block
    first_compute: float | None = None
    drain_end = 0.0
    end = 0.0
    compute_busy = bubbles = drain_busy = 0
    wait_fetch = wait_drain = fetch_busy = fetch_wait_port = 0.0

    for idx, it in enumerate(items):
        # Parallel DMA channels share the port; booking the channel with less to move first approximates
        # their round-robin arbitration (it finishes at twice its size, the other at the sum of both).
        per_channel: dict[Channel, int] = {}
        for f in it.fetches:
            per_channel[f.channel] = per_channel.get(f.channel, 0) + f.nbytes
        largest = max(per_channel, key=lambda c: per_channel[c], default=None)
        shared_from: float | None = None  # when the item's first transfer started on the shared port
        for f in sorted(it.fetches, key=lambda f: (f.channel == largest, per_channel[f.channel])):
            ring = per_buffer.setdefault(f.buffer, [])
            cap = capacities[f.buffer]
            ready = channel_free[f.channel]
            if len(ring) >= cap:
                ready = max(ready, released[ring[-cap]])
            port = ports[f.memory]
            start, last_beat = port.reserve(ready, f.nbytes)
            if f.max_bytes_per_cycle:
                last_beat = max(last_beat, start + f.nbytes / f.max_bytes_per_cycle)
            fetch_wait_port += start - ready
            fetch_busy += last_beat - start
            channel_free[f.channel] = last_beat
            if shared_from is None:
                shared_from = start
            if f.channel != largest and len(per_channel) > 1 and f.nbytes:
                # round-robin with a larger transfer alongside: half the port until this channel is done
                last_beat = shared_from + 2 * (last_beat - shared_from)
            arrival[f.event] = last_beat + port.latency
            first_beat[f.event] = start + port.latency
            if f.streamed:
                streamed.add(f.event)
            ring.append(f.event)
            if record_events:
                events.append(Event(fetch_unit, f.label, int(start), math.ceil(arrival[f.event])))
        whole = [e for e in it.uses if e not in streamed]
        partial = [e for e in it.uses if e in streamed]
        need = max((arrival[e] for e in whole), default=0.0)
        n_blocks = max(sum(run[0] for run in it.blocks), 1)
        if partial:
            need = max(need, *(_share(first_beat[e], arrival[e], 1 / n_blocks) for e in partial))
        start_c = max(core_free, need)
        wait_fetch += start_c - core_free
        if first_compute is None:
            first_compute = start_c
        t = start_c
        first_drain = None
        c_end = start_c
        j = 0  # index of the next block in the item (for streamed data shares)
        for count, c, useful, d in it.blocks:
            compute_busy += count * useful
            bubbles += count * (c - useful)
            drain_busy += count * d
            last_ready = max((_share(first_beat[e], arrival[e], (j + count) / n_blocks) for e in partial), default=0.0)
            if last_ready <= t:
                # Closed form for a run of identical blocks whose data has arrived: after the first block,
                # each block starts max(c, d) after the previous one (compute- or drain-paced).
                d_start = max(t + c, drain_end)
                wait_drain += d_start - (t + c) + (count - 1) * (max(c, d) - c)
                if first_drain is None:
                    first_drain = d_start
                pace = max(c, d)
                c_end = d_start + (count - 2) * pace + c if count >= 2 else t + c
                t = d_start + (count - 1) * pace
                drain_end = t + d
                j += count
                continue
            for _ in range(count):
                if partial and j:
                    ready = max(_share(first_beat[e], arrival[e], (j + 1) / n_blocks) for e in partial)
                    if ready > t:
                        wait_fetch += ready - t
                        t = ready
                c_end = t + c
                d_start = max(c_end, drain_end)
                drain_end = d_start + d
                wait_drain += d_start - c_end
                if first_drain is None:
                    first_drain = d_start
                t = d_start  # assembly buffer frees when the block moves to delivery
                j += 1
        compute_end = c_end
        core_free = t
        if record_events and it.blocks:
            events.append(Event(compute_unit, it.name, int(start_c), math.ceil(compute_end)))
            events.append(Event(drain_unit, it.name, int(first_drain), math.ceil(drain_end)))
        for e in it.uses:
            if last_user[e] == idx:
                released[e] = math.inf if e in keep else compute_end
        item_end = drain_end if it.blocks else start_c
        if it.drain_reads:  # paced by the drain: the RDMA refills its latency FIFO as SDP consumes
            at = first_drain if first_drain is not None else item_end
            _, r_end = ports[it.drain_read_memory].reserve(at, it.drain_reads)
            item_end = max(item_end, r_end)  # the drain cannot finish before its operands have been read
        if it.write_bytes:
            port = ports[it.write_memory].writes
            w_start, w_end = port.reserve(first_drain if first_drain is not None else item_end, it.write_bytes)
            item_end = max(item_end, w_end)
            if record_events:
                events.append(
                    Event(
                        Unit.DRAM if it.write_memory is Memory.DRAM else Unit.SRAM,
                        f"write {it.name}",
                        int(w_start),
                        math.ceil(w_end),
                    )
                )
        end = max(end, item_end)
    return PipelineResult(
        end=end,
        compute_busy=compute_busy,
        compute_bubbles=bubbles,
        wait_fetch=wait_fetch,
        wait_drain=wait_drain,
        drain_busy=drain_busy,
        fetch_busy=fetch_busy,
        fetch_wait_port=fetch_wait_port,
        first_compute=first_compute or 0.0,
        fetch_end=max(channel_free.values()),
        held=tuple(
            (buf, e, released.get(e, math.inf)) for buf, ring in per_buffer.items() for e in ring[-capacities[buf] :]
        ),
        events=events,
        ports=ports,
    )


def item_traffic(items: Sequence[Item], *, extra_reads: int = 0, extra_memory: Memory = Memory.DRAM) -> Traffic:
    """Bytes the items read (fetches, plus `extra_reads` from `extra_memory`) and write, per memory."""
    reads = dict.fromkeys(Memory, 0)
    writes = dict.fromkeys(Memory, 0)
    reads[extra_memory] += extra_reads
    for it in items:
        for f in it.fetches:
            reads[f.memory] += f.nbytes
        writes[it.write_memory] += it.write_bytes
    return Traffic(reads[Memory.DRAM], writes[Memory.DRAM], reads[Memory.SRAM], writes[Memory.SRAM])


def _share(first: float, last: float, fraction: float) -> float:
    """When `fraction` of a streamed transfer has arrived."""
    return first + (last - first) * fraction


def make_ports(hw) -> dict[Memory, MemoryPort]:
    ports = {Memory.DRAM: MemoryPort(hw.dram_bytes_per_cycle, hw.memory.dram_latency_cycles)}
    if hw.memory.has_sram:
        ports[Memory.SRAM] = MemoryPort(hw.sram_bytes_per_cycle, hw.memory.sram_latency_cycles)
    if hw.memory.separate_write_channel:
        for port in ports.values():
            port.write_port = MemoryPort(port.bytes_per_cycle, 0)
    return ports
