"""The tile pipeline shared by every hardware layer: fetch -> compute -> drain -> write, with bounded buffers.

An Item is one unit of work for the core (for a convolution: one kernel group over one data tile). Its
fetches go through DMA channels into named ring buffers (CBUF data, CBUF weights, RDMA buffers); a fetch
may start once the buffer slot it reuses is released (ping-pong when capacity >= 2) and its channel's
previous request is out. The core runs the item's blocks (one per channel op / stripe): each block
computes, then hands its results to a one-deep delivery buffer that drains to SDP (or PDP); its drain may
start `lead` cycles before its compute ends (a stripe's points are delivered as its last channel op
accumulates them); a block's compute cannot start while the delivery buffer still holds the block before
(CACC back-pressure).
Outputs are written as they drain. All memory traffic goes through MemoryPort calendars.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from nvdla_sim.engine.stats import Event, Traffic, Unit
from nvdla_sim.engine.steady import STEADY, PeriodMemo, SteadyState
from nvdla_sim.layers import Memory
from nvdla_sim.system.dram import AccessMix
from nvdla_sim.system.memory import MemoryPort, memory_model


class Buffer(enum.Enum):
    """Ring buffers fetches land in; their capacities (in fetches) bound how far fetching runs ahead."""

    CBUF_DATA = "data"  # CBUF data banks (data tiles)
    CBUF_WEIGHT = "weight"  # CBUF weight banks (kernel groups)
    RDMA = "rdma"  # a stream unit's read DMA latency FIFO (SDP/PDP/CDP input)
    ERDMA = "erdma"  # SDP's element-wise operand read DMA

    __hash__ = object.__hash__  # a member is its own identity; Enum's hash(name) runs Python code per lookup


class Channel(enum.Enum):
    """DMA channels: requests on one channel are issued one after another; channels share the port."""

    CDMA_DAT = "cdma_dat"
    CDMA_WT = "cdma_wt"
    RDMA = "rdma"
    ERDMA = "erdma"

    __hash__ = object.__hash__  # a member is its own identity; Enum's hash(name) runs Python code per lookup


_CHANNELS = tuple(Channel)  # iterating an Enum class runs Python code for every member, every time
_MEMORIES = tuple(Memory)


class BlockRun(NamedTuple):
    """`count` identical blocks of an item (one per stripe of a kernel group, or a stream chunk)."""

    count: int
    compute_cycles: int  # per block, including weight-load bubbles
    useful_ops: int  # atomic ops that do work (compute_cycles less the bubbles)
    drain_cycles: int  # delivering the block's results to SDP (or PDP)
    # cycles before its compute ends that the block's drain may start: CACC delivers each output point of a
    # stripe once its last channel op has accumulated it, so a stripe's delivery starts with that op
    lead: int = 0


class BlocksDone(NamedTuple):
    """Where a run of identical blocks leaves the core (run_blocks)."""

    t: float  # when the assembly buffer takes the next block
    drain_end: float  # when the last block's drain ends
    c_end: float  # when the last block's compute ends
    first_drain: float  # when the first block's drain starts
    wait_drain: float  # cycles blocks waited for the delivery buffer after computing


def run_blocks(t: float, drain_end: float, count: int, c: int, d: int, lead: int) -> BlocksDone:
    """`count` identical blocks (compute `c`, drain `d`, `lead`) whose data is there, from a core free at `t`
    with the delivery buffer busy until `drain_end`. Each block computes, starts draining once its compute
    is `lead` short of its end and the block before has drained, and frees the assembly buffer once it has
    moved to delivery. Block by block until the drain's lead over the core (drain_end - t) repeats; from
    then on every block advances both by the same pace (exact: the recurrence is shift-invariant)."""
    if count == 1:  # the loop's first pass, as it is (most items are one block run of one block)
        c_end = t + c
        d_start = c_end - lead
        if drain_end > d_start:
            d_start = drain_end
        if d_start > c_end:
            return BlocksDone(d_start, d_start + d, c_end, d_start, d_start - c_end)
        return BlocksDone(c_end, d_start + d, c_end, d_start, 0.0)
    first_drain = c_end = 0.0
    wait_drain = 0.0
    k = 0
    while k < count:
        c_end = t + c
        d_start = max(c_end - lead, drain_end)
        wait = max(0, d_start - c_end)
        if k == 0:
            first_drain = d_start
        t_next = max(c_end, d_start)
        end_next = d_start + d
        steady = end_next - t_next == drain_end - t
        pace = t_next - t
        wait_drain += wait
        t, drain_end = t_next, end_next
        k += 1
        if steady and k < count:
            rest = count - k
            wait_drain += rest * wait
            c_end += rest * pace
            t += rest * pace
            drain_end += rest * pace
            k = count
    return BlocksDone(t, drain_end, c_end, first_drain, wait_drain)


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
    drain_read_cycles: float = 0.0  # fewest cycles the RDMAs' credits let drain_reads take (sdp.operand_stream_cycles)


def renumbered(it: Item, first: int, shift: int) -> Item:
    """An item of a repeated hardware layer (engine.conv._Chain.renumber): its fetch events, and the events it uses,
    at or after `first` moved by `shift`."""
    fetches = it.fetches
    if fetches:
        fetches = tuple([_copy(f, event=f.event + shift) for f in fetches])
    return _copy(it, fetches=fetches, uses=tuple([e + shift if e >= first else e for e in it.uses]))


def _new(cls, **fields):
    """A frozen Fetch or Item with every field given, set directly (as _copy: three times faster than the
    constructor; _Chain.add builds one per kernel group of every plan a search simulates). Equal to the
    constructor's (tests/unit/test_layer_skip.py)."""
    new = object.__new__(cls)
    new.__dict__.update(fields)
    return new


def _copy(obj, **changes):
    """dataclasses.replace for the frozen Fetch and Item, by copying their fields: a frozen dataclass's
    __init__ sets each field through object.__setattr__, about three times slower. Equal (and
    equal-hashing) to replace's result."""
    new = object.__new__(type(obj))
    fields = new.__dict__
    fields.update(obj.__dict__)
    fields.update(changes)
    fields.pop("_field_hash", None)  # a hash values.field_hash cached is the old object's
    return new


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
    skipped: int = 0  # items timed by the periodic steady state rather than one by one (_FastForward)
    last_jump: _Jump | None = None  # the last whole-period jump the run made (extend_periods)


# PipelineResult's counters that add up over runs (a chain of hardware layers: conv._run_hardware_layers)
COUNTERS = (
    "compute_busy", "compute_bubbles", "wait_fetch", "wait_drain", "drain_busy", "fetch_busy", "fetch_wait_port",
    "skipped",
)  # fmt: skip


@dataclass(frozen=True)
class OperandHeads:
    """When a later hardware layer's SDP operand streams start and what SDP waits for before its first
    output (engine.conv._run_hardware_layers; TimingConfig.sdp_rdma_handoff_cycles): the RDMA's first
    request at `start`, each stream's head of `beats` beats requested in turn (one request each, round
    robin, with another reader of the port then in the rotation), a request every `interval` cycles, SDP's
    first output `then_cycles` after the last head beat is in. Another reader is any booking of the port
    overlapping the heads' requests (the layer's own first fetches: CDMA's weights)."""

    start: float
    beats: tuple[int, ...]
    memory: Memory
    interval: float
    then_cycles: int

    def ready(self, port: MemoryPort) -> float:
        """When SDP may take the layer's first atom, the port's bookings so far (the layer's first fetches)
        deciding whether another reader shares the rotation."""
        span = sum(self.beats) * self.interval
        other = any(s < self.start + span and e > self.start for s, e in port.booked_after(self.start))
        left = list(self.beats)
        turn = last = 0
        while any(left):
            for j in range(len(left)):
                if left[j]:
                    left[j] -= 1
                    last = turn
                    turn += 1
            turn += other  # the other reader's request in each round
        return self.start + last * self.interval + port.latency + self.then_cycles


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
    startup: float = 0.0,
    renumber: tuple[int, int] | None = None,
    steady: SteadyState = STEADY,
    operand_heads: OperandHeads | None = None,
) -> PipelineResult:
    """Run the items through fetch -> compute -> drain. `fetch_from` / `compute_from` are the earliest
    times the first fetch and the first compute may start (a later hardware layer on shared ports).
    `held` is what an earlier hardware layer left in the rings (PipelineResult.held): its slots free at
    their release time, or when their last user here computes if they were kept (an item may use a
    held event: an operand reused from CBUF). Events in `keep` stay in CBUF after this run (SKIP_*_RLS).
    `startup`: cycles the first compute starts after its operands are in (csc.startup_cycles).
    `renumber` (first, shift): the items run as renumbered(item, first, shift) would (a repeated hardware
    layer: engine.conv._Chain.renumber), their events moved as they are read rather than copied. `steady`:
    whether (and from how many items) whole periods of a steady state are jumped over (steady.SteadyState).
    `operand_heads`: a later layer's SDP operand streams, which its first output waits for (OperandHeads)."""
    first_moved, shift = renumber if renumber is not None else (0, 0)
    fast_forward = (
        steady.items
        and not record_events
        and len(items) >= steady.min_items
        and all(p.periodic for p in ports.values())  # the memory's state repeats with the traffic
        and _could_run(items)
    )
    if shift and fast_forward:  # the fast-forward reads the items' events: it is given them moved
        items = [renumbered(it, first_moved, shift) for it in items]
        shift = 0
    # Release time of each fetch event = compute end of the last item that uses it.
    last_user: dict[int, int] = {}
    for idx, it in enumerate(items):
        for ev in it.uses:
            last_user[ev + shift if shift and ev >= first_moved else ev] = idx
    released: dict[int, float] = {}
    arrival: dict[int, float] = {}
    first_beat: dict[int, float] = {}
    streamed: set[int] = set()
    per_buffer: dict[Buffer, list[int]] = {}
    for buf, ev, at in held:
        per_buffer.setdefault(buf, []).append(ev)
        released[ev] = at
        arrival[ev] = first_beat[ev] = fetch_from  # fetched by an earlier layer: there before this one starts
    channel_free: dict[Channel, float] = dict.fromkeys(_CHANNELS, fetch_from)
    credit_free = fetch_from  # when SDP's operand RDMAs' credits have paced out the streams booked so far
    events: list[Event] = []

    core_free = compute_from  # when the assembly buffer can take the next block
    first_compute: float | None = None
    drain_end = 0.0
    end = 0.0
    compute_busy = bubbles = drain_busy = 0
    wait_fetch = wait_drain = fetch_busy = fetch_wait_port = 0.0

    ff = _FastForward(items, last_user, capacities, ports) if fast_forward else None
    if ff is not None and not ff.has_runs():
        ff = None  # no run of alike items long enough to look at: nothing to ask after each item
    idx = -1
    jumped = 0
    last_jump = None
    n_items = len(items)
    writes = {mem: port.writes for mem, port in ports.items()}  # the port each memory's writes use
    while idx + 1 < n_items:
        idx += 1
        it = items[idx]
        fetches = it.fetches
        if len(fetches) > 1:
            # Parallel DMA channels share the port; booking the channel with less to move first approximates
            # their round-robin arbitration (it finishes at twice its size, the other at the sum of both):
            # a stable sort by (largest channel last, channel bytes), made key by key
            per_channel: dict[Channel, int] = {}
            for f in fetches:
                per_channel[f.channel] = per_channel.get(f.channel, 0) + f.nbytes
            largest = max(per_channel, key=per_channel.__getitem__)
            shared = len(per_channel) > 1
            if shared:
                rank = {ch: (ch == largest, n) for ch, n in per_channel.items()}
                fetches = [f for key in sorted(set(rank.values())) for f in fetches if rank[f.channel] == key]
        else:
            largest, shared = None, False  # one fetch (or none): nothing alongside on the port
        shared_from: float | None = None  # when the item's first transfer started on the shared port
        for f in fetches:
            buf, ch, ev = f.buffer, f.channel, f.event
            if shift:  # a fetch is its layer's own: moved (renumbered)
                ev += shift
            ring = per_buffer.get(buf)
            if ring is None:
                ring = per_buffer[buf] = []
            cap = capacities[buf]
            ready = channel_free[ch]
            if len(ring) >= cap:
                r = released[ring[-cap]]
                if r > ready:
                    ready = r
            port = ports[f.memory]
            start, last_beat = port.reserve(ready, f.nbytes)
            if f.max_bytes_per_cycle:
                last_beat = max(last_beat, start + f.nbytes / f.max_bytes_per_cycle)
            fetch_wait_port += start - ready
            fetch_busy += last_beat - start
            channel_free[ch] = last_beat
            if shared_from is None:
                shared_from = start
            if shared and ch != largest and f.nbytes:
                # round-robin with a larger transfer alongside: half the port until this channel is done
                last_beat = shared_from + 2 * (last_beat - shared_from)
            latency = port.latency
            arrival[ev] = last_beat + latency
            first_beat[ev] = start + latency
            if f.streamed:
                streamed.add(ev)
            ring.append(ev)
            if record_events:
                events.append(Event(fetch_unit, f.label, int(start), math.ceil(arrival[ev])))
        if operand_heads is not None and idx == 0:  # SDP's first output waits for its operands' heads
            drain_end = max(drain_end, operand_heads.ready(ports[operand_heads.memory]))
        uses = it.uses
        if shift:
            uses = [e + shift if e >= first_moved else e for e in uses]
        need = 0.0
        partial: list[int] = []
        for e in uses:
            if streamed and e in streamed:
                partial.append(e)
            else:
                a = arrival[e]
                if a > need:
                    need = a
        blocks = it.blocks
        n_blocks = max(sum(run[0] for run in blocks), 1) if partial else 1
        if partial:
            need = max(need, *(_share(first_beat[e], arrival[e], 1 / n_blocks) for e in partial))
        start_c = need if need > core_free else core_free
        wait_fetch += start_c - core_free
        if first_compute is None:
            start_c += startup
            first_compute = start_c
        t = start_c
        first_drain = None
        c_end = start_c
        j = 0  # index of the next block in the item (for streamed data shares)
        for count, c, useful, d, lead in blocks:
            compute_busy += count * useful
            bubbles += count * (c - useful)
            drain_busy += count * d
            if not partial or max(_share(first_beat[e], arrival[e], (j + count) / n_blocks) for e in partial) <= t:
                done = run_blocks(t, drain_end, count, c, d, lead)
                if first_drain is None:
                    first_drain = done.first_drain
                t, drain_end, c_end = done.t, done.drain_end, done.c_end
                wait_drain += done.wait_drain
                j += count
                continue
            for _ in range(count):
                if j:
                    ready = max(_share(first_beat[e], arrival[e], (j + 1) / n_blocks) for e in partial)
                    if ready > t:
                        wait_fetch += ready - t
                        t = ready
                one = run_blocks(t, drain_end, 1, c, d, lead)
                if first_drain is None:
                    first_drain = one.first_drain
                t, drain_end, c_end = one.t, one.drain_end, one.c_end
                wait_drain += one.wait_drain
                j += 1
        compute_end = c_end
        core_free = t
        if record_events and blocks:
            events.append(Event(compute_unit, it.name, int(start_c), math.ceil(compute_end)))
            events.append(Event(drain_unit, it.name, int(first_drain), math.ceil(drain_end)))
        for e in uses:
            if last_user[e] == idx:
                released[e] = math.inf if e in keep else compute_end
        item_end = drain_end if blocks else start_c
        if it.drain_reads:  # paced by the drain: the RDMA refills its latency FIFO as SDP consumes
            at = first_drain if first_drain is not None else item_end
            _, r_end = ports[it.drain_read_memory].reserve(at, it.drain_reads)
            item_end = max(item_end, r_end)  # the drain cannot finish before its operands have been read
            if it.drain_read_cycles:  # nor before the RDMAs' credits have paced them out, item after item
                credit_free = max(credit_free, at) + it.drain_read_cycles
                item_end = max(item_end, credit_free)
        if it.write_bytes:
            w_start, w_end = writes[it.write_memory].reserve(
                first_drain if first_drain is not None else item_end, it.write_bytes
            )
            if w_end > item_end:
                item_end = w_end
            if record_events:
                events.append(
                    Event(
                        Unit.DRAM if it.write_memory is Memory.DRAM else Unit.SRAM,
                        f"write {it.name}",
                        int(w_start),
                        math.ceil(w_end),
                    )
                )
        if item_end > end:
            end = item_end
        if ff is not None and ff.may_repeat(idx):
            acc = (compute_busy, bubbles, drain_busy, wait_fetch, wait_drain, fetch_busy, fetch_wait_port)
            jump = ff.after(
                idx,
                core_free,
                drain_end,
                end,
                acc,
                channel_free,
                per_buffer,
                released,
                arrival,
                first_beat,
                credit_free,
            )
            if jump is not None:
                core_free += jump.cycles
                drain_end += jump.cycles
                end += jump.cycles
                compute_busy, bubbles, drain_busy, wait_fetch, wait_drain, fetch_busy, fetch_wait_port = (
                    a + jump.periods * i for a, i in zip(acc, jump.counters, strict=True)
                )
                ff.extend(idx, jump, channel_free, per_buffer, released, arrival, first_beat, streamed)
                credit_free += jump.cycles
                idx += jump.items
                jumped += jump.items
                last_jump = jump
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
            [(buf, e, released.get(e, math.inf)) for buf, ring in per_buffer.items() for e in ring[-capacities[buf] :]]
        ),
        events=events,
        ports=ports,
        skipped=jumped,
        last_jump=last_jump,
    )


def port_channels(ports: dict[Memory, MemoryPort]) -> list[MemoryPort]:
    """Every channel of the memory ports (each port, then its write channel where it has one), in the order
    a jump's port counters follow (_Jump.port_counters)."""
    return [q for port in ports.values() for q in (port, port.write_port) if q is not None]


def extend_periods(res: PipelineResult, periods: int) -> PipelineResult | None:
    """`res` as the same run would have ended with `periods` more periods of the steady state its last
    jump skipped (periods x its items more identical items before the run's tail): exact for the same
    reason as the jump (_FastForward: past the repeating state every item repeats the one a period before,
    shifted; the tail after the jump sees the same relative state), provided the run was cut so that the
    tail after the jump is the same (a whole number of periods taken away). The ports' counters grow, their
    intervals after the jump move; None when a sum would leave the binary grid (exactness not assured)."""
    j = res.last_jump
    if j is None or periods < 0:
        return None
    by = periods * j.shift
    inc = [periods * c for c in j.counters]
    ports = port_channels(res.ports)
    if not all(on_grid(v) for v in (by, res.end + by, *inc[3:], *(periods * b for b, _ in j.port_counters))):
        return None
    for port, (busy, moved) in zip(ports, j.port_counters, strict=True):
        port.jump(j.horizon + j.cycles, by, busy=periods * busy, nbytes=periods * moved)
    compute_busy, bubbles, drain_busy, wait_fetch, wait_drain, fetch_busy, fetch_wait_port = (
        a + b
        for a, b in zip(
            (res.compute_busy, res.compute_bubbles, res.drain_busy, res.wait_fetch, res.wait_drain, res.fetch_busy,
             res.fetch_wait_port),
            inc,
            strict=True,
        )
    )  # fmt: skip
    return dataclasses.replace(
        res, end=res.end + by, compute_busy=compute_busy, compute_bubbles=bubbles, drain_busy=drain_busy,
        wait_fetch=wait_fetch, wait_drain=wait_drain, fetch_busy=fetch_busy, fetch_wait_port=fetch_wait_port,
        fetch_end=res.fetch_end + by, held=tuple((b, e, t + by) for b, e, t in res.held),
        skipped=res.skipped + periods * j.period,
    )  # fmt: skip


# Skip ahead over runs of identical items once the pipeline repeats itself (_FastForward, when the run's
# steady.SteadyState allows it: tests compare against the item-by-item run, steady.ONE_BY_ONE)
_MIN_AHEAD = 16  # nor is a state looked at with fewer identical items still to come
_MAX_PERIOD = 64  # states of a run kept to find its period (ring slots and port phases repeat every few items)
_GRID = 2.0**-16  # every time in a repeating state must be a multiple of this (and below _LIMIT): then the
_LIMIT = 2.0**34  # float sums and maxima the items make are exact, and a shifted state evolves shifted


def on_grid(v: float) -> bool:
    return abs(v) < _LIMIT and (v / _GRID).is_integer()


def up_to_grid(v: float) -> float:
    """`v` rounded up to the grid (a multiple of 2**-16 cycle): a duration that is not a dyadic fraction
    (a rate's quotient: sdp.operand_stream_cycles) kept exact under the sums a run makes, so runs of
    identical items that it paces can still be skipped."""
    return math.ceil(v / _GRID) * _GRID


def port_booking(channels: Sequence[MemoryPort]) -> tuple[tuple[float, int], ...]:
    """Each port channel's (busy cycles, bytes moved) so far."""
    return tuple((q.busy_cycles, q.bytes_moved) for q in channels)


def booking_increase(before: tuple, now: tuple) -> tuple[tuple[float, int], ...]:
    """What each port channel booked between two port_booking()s."""
    return tuple((b[0] - a[0], b[1] - a[1]) for a, b in zip(before, now, strict=True))


@dataclass(frozen=True)
class _Jump:
    """Whole periods of a steady state to skip (_FastForward.after) and what they add."""

    periods: int
    period: int  # items per period
    shift: float  # cycles per period
    counters: tuple  # per period: run_items' counters (compute_busy ... fetch_wait_port)
    port_counters: tuple[tuple[float, int], ...]  # per period and port: (busy cycles, bytes)
    horizon: float  # nothing still to come asks a port or a ring slot for a time before this

    @property
    def items(self) -> int:
        return self.periods * self.period

    @property
    def cycles(self) -> float:
        return self.periods * self.shift


def _could_run(items: Sequence[Item]) -> bool:
    """Whether some _MIN_AHEAD + 1 consecutive items might be alike (_FastForward._alike): two items with
    fetches, or two without and using the same operands. A necessary condition, checked on the items'
    fields alone (a layer whose weights the first item prefetched has no such run)."""
    run = 1
    for x, y in itertools.pairwise(items):
        if (x.fetches and y.fetches) or (not x.fetches and not y.fetches and x.uses == y.uses):
            run += 1
            if run > _MIN_AHEAD:
                return True
        else:
            run = 1
    return False


class _FastForward:
    """Periodic steady state of run_items over identical items (one hardware layer's kernel groups, a
    stream unit's chunks): the pipeline is max-plus, so once the state after item i (every time that can
    still matter: channels, rings, delivery, the memory ports' booked intervals, all relative to the core's
    free time) equals the state after item i - p, every later item of the run repeats the item p before
    it, shifted by the same D. The run then jumps whole periods to just before the run ends (or before a
    shared operand's last user): every skipped fetch gets the arrival and release of its twin a period
    before plus D, the counters their per-period increase, the ports' intervals past the horizon (the
    earliest time anything still to come can ask for) move by the jump. Exact when every time is on a
    binary grid (float sums exact); anything else (items that differ, a time off the grid, a shared
    operand still in flight) runs item by item."""

    def __init__(self, items, last_user, capacities, ports) -> None:
        self.items = items
        self.last_user = last_user
        self.capacities = capacities
        self.ports = port_channels(ports)
        self._sigs: dict[int, tuple | None] = {}
        self._run_last: dict[int, int] = {}
        self.seen = PeriodMemo(_MAX_PERIOD)  # state after an item of the run -> (item, core_free, counters, booking)
        self.last = -1  # the item the last state is of

    def sig(self, i: int) -> tuple | None:
        """What item i's timing depends on besides the state (None: an item whose operand later items use)."""
        if i in self._sigs:
            return self._sigs[i]
        it = self.items[i]
        own = {f.event: q for q, f in enumerate(it.fetches)}
        out = None
        if all(self.last_user.get(e) == i for e in own):
            uses = tuple(("own", own[e]) if e in own else ("old", e) for e in it.uses)
            fetch = tuple(
                (f.buffer, f.channel, f.nbytes, f.memory, f.streamed, f.max_bytes_per_cycle) for f in it.fetches
            )
            out = (
                fetch, uses, tuple(it.blocks), it.write_bytes, it.write_memory,
                it.drain_reads, it.drain_read_memory, it.drain_read_cycles,
            )  # fmt: skip
        self._sigs[i] = out
        return out

    def run_last(self, i: int) -> int:
        """The last item of the run of items with item i's signature (each item compared once)."""
        if i not in self._run_last:
            j = i
            while j + 1 < len(self.items) and self._alike(j, j + 1):
                j += 1
            for k in range(i, j + 1):
                self._run_last[k] = j
        return self._run_last[i]

    def _alike(self, a: int, b: int) -> bool:
        """Whether items a and b have one signature (not None). Items without fetches of their own use
        operands by id only: different ids, different signatures (told apart without building them, as
        the items whose weights the first one prefetched, engine.conv._prefetch_weights)."""
        x, y = self.items[a], self.items[b]
        if not x.fetches and not y.fetches and x.uses != y.uses:
            return False
        sig = self.sig(a)
        return sig is not None and self.sig(b) == sig

    def has_runs(self) -> bool:
        """Whether some run of alike items is long enough for may_repeat (runs found here are cached)."""
        i = 0
        while i < len(self.items):
            last = self.run_last(i)
            if last - i >= _MIN_AHEAD:
                return True
            i = last + 1
        return False

    def may_repeat(self, idx: int) -> bool:
        """Whether the state after item idx is worth looking at (after): enough identical items follow it
        (an item whose signature is None ends its run). Else what was seen is forgotten."""
        last = self._run_last.get(idx)
        if last is None:
            last = self.run_last(idx)
        if last - idx < _MIN_AHEAD:
            if self.seen.seen:
                self.seen.clear()
            return False
        return True

    def after(
        self, idx, core_free, drain_end, end, acc, channel_free, per_buffer, released, arrival, first_beat, credit_free
    ):
        """After item idx, where may_repeat(idx): the jump the run can make from here, or None."""
        sig = self.sig(idx)
        if self.seen and self.last != idx - 1:
            self.seen.clear()
        self.last = idx
        found = self._state(
            sig, core_free, drain_end, end, channel_free, per_buffer, released, arrival, first_beat, credit_free
        )
        if found is None:
            self.seen.clear()
            return None
        state, horizon = found
        booked = port_booking(self.ports)
        before = self.seen.repeat(state, (idx, core_free, acc, booked))
        if before is None:
            return None
        i0, t0, acc0, booked0 = before
        p = idx - i0
        shift = core_free - t0
        if shift <= 0 or not on_grid(shift):
            return None
        stop = self.run_last(idx) - 1  # the run's last item runs item by item
        for kind, e in sig[1]:
            if kind == "old":  # so does a shared operand's last user (it releases the operand)
                stop = min(stop, self.last_user[e] - 1)
        periods = (stop - idx) // p
        if periods < 1:
            return None
        inc = tuple(a - b for a, b in zip(acc, acc0, strict=True))
        port_inc = booking_increase(booked0, booked)
        if not all(on_grid(v * periods) for v in (*inc[3:], *(b for b, _ in port_inc))):
            return None
        return _Jump(periods, p, shift, inc, port_inc, horizon)

    def _state(
        self, sig, core_free, drain_end, end, channel_free, per_buffer, released, arrival, first_beat, credit_free
    ):
        """Every time that can still matter after an item, relative to core_free, and the horizon (the
        earliest time still to be asked for); None when a time is off the grid or a shared operand has not
        arrived yet."""
        t = core_free
        channels = {f[1] for f in sig[0]}
        horizon = min([t, *(channel_free[c] for c in channels)])
        for c, v in channel_free.items():
            if c not in channels and v > horizon:
                return None
        for kind, e in sig[1]:
            if kind == "old" and (arrival.get(e, 0.0) > horizon or first_beat.get(e, 0.0) > horizon):
                return None
        absolute = [t, drain_end, end, horizon, *(channel_free[c] for c in channels)]
        rel = [drain_end - t, end - t, horizon - t, *(channel_free[c] - t for c in sorted(channels, key=str))]
        if sig[7]:  # the operand RDMAs' credit clock
            absolute.append(credit_free)
            rel.append(credit_free - t)
        elif credit_free > horizon:
            return None
        rings = []
        for buf, ring in per_buffer.items():
            slots: list = []
            for e in ring[-self.capacities[buf] :]:
                r = released.get(e)
                if r is None:
                    slots.append(("held", e))  # a shared operand, released by a later item
                elif r == math.inf:
                    slots.append(("kept", e))
                elif r <= horizon:
                    slots.append(None)  # free before anything still to come asks
                else:
                    slots.append(r - t)
                    absolute.append(r)
            while slots and slots[0] is None:
                del slots[0]
            rings.append((buf, tuple(slots)))
        booked = []
        for port in self.ports:
            tail = port.booked_after(horizon)
            booked.append(tuple((max(s, horizon) - t, e - t) for s, e in tail))
            absolute.extend(v for interval in tail for v in interval)
        if not all(on_grid(v) for v in absolute):
            return None
        return (tuple(rel), tuple(rings), tuple(booked)), horizon

    def extend(self, idx, jump: _Jump, channel_free, per_buffer, released, arrival, first_beat, streamed):
        """Apply `jump` after item idx: the channels and the ports' intervals past the horizon move by the
        jump; the fetches of the last skipped items, as many as a ring can still ask about, enter their
        rings with the times of their twin in the last period before the jump plus a whole number of
        shifts (the earlier ones are never asked again)."""
        p, shift, skipped = jump.period, jump.shift, jump.items
        for c in {f.channel for f in self.items[idx].fetches}:
            channel_free[c] += jump.cycles
        per_item = Counter(f.buffer for f in self.items[idx].fetches)
        keep = max((math.ceil((self.capacities[b] + 1) / n) for b, n in per_item.items()), default=0)
        for j in range(max(idx + 1, idx + skipped + 1 - keep), idx + skipped + 1):
            twin = idx - p + 1 + (j - idx - 1) % p  # the item of the last period before the jump it repeats
            later = (j - twin) // p * shift
            for f, g in zip(self.items[twin].fetches, self.items[j].fetches, strict=True):
                e, n = f.event, g.event
                arrival[n] = arrival[e] + later
                first_beat[n] = first_beat[e] + later
                released[n] = released[e] + later
                if f.streamed:
                    streamed.add(n)
                per_buffer[g.buffer].append(n)
        for buf, ring in per_buffer.items():  # only the newest slots of a ring are ever asked again
            del ring[: max(0, len(ring) - self.capacities[buf] - 1)]
        for port, (busy, moved) in zip(self.ports, jump.port_counters, strict=True):
            port.jump(jump.horizon, jump.cycles, busy=jump.periods * busy, nbytes=jump.periods * moved)


def item_traffic(items: Sequence[Item], *, extra_reads: int = 0, extra_memory: Memory = Memory.DRAM) -> Traffic:
    """Bytes the items read (fetches, plus `extra_reads` from `extra_memory`) and write, per memory."""
    reads = dict.fromkeys(_MEMORIES, 0)
    writes = dict.fromkeys(_MEMORIES, 0)
    reads[extra_memory] += extra_reads
    for it in items:
        for f in it.fetches:
            reads[f.memory] += f.nbytes
        writes[it.write_memory] += it.write_bytes
    return Traffic(reads[Memory.DRAM], writes[Memory.DRAM], reads[Memory.SRAM], writes[Memory.SRAM])


def _share(first: float, last: float, fraction: float) -> float:
    """When `fraction` of a streamed transfer has arrived."""
    return first + (last - first) * fraction


def make_ports(hw, items: Sequence[Item] = (), *, mix: AccessMix | None = None) -> dict[Memory, MemoryPort]:
    """Fresh ports for a run of `items` (or a run of another kind whose DRAM clients are `mix`), as the
    config's memory model makes them (nvdla_sim.system.memory); a model whose DRAM rate depends on the run's
    mix of clients is given theirs (items_mix)."""
    return memory_model(hw).ports(_run_mix(hw, items, mix=mix))


def _run_mix(hw, items: Sequence[Item] = (), *, mix: AccessMix | None = None) -> AccessMix | None:
    """The DRAM clients' mix a run's ports are made for (`mix`, else its items'), where the memory model's
    rate depends on it (None where it does not, or where the run gives neither)."""
    if not memory_model(hw).mixes:
        return None
    return mix or (items_mix(items) if items else None)


def items_mix(items: Sequence[Item]) -> AccessMix:
    """The DRAM's clients in a run of `items`: each DMA channel's reads, SDP's operand streams and the writes."""
    reads = dict.fromkeys(_CHANNELS, 0)
    operands = writes = 0
    dram = Memory.DRAM
    for it in items:
        for f in it.fetches:
            if f.memory is dram:
                reads[f.channel] += f.nbytes
        if it.drain_read_memory is dram:
            operands += it.drain_reads
        if it.write_memory is dram:
            writes += it.write_bytes
    return AccessMix.of([*reads.values(), operands], writes)
