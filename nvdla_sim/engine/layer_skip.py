"""The periodic steady state one level up from tile_pipeline's: runs of alike hardware layers.

engine.conv runs a split layer (and a chain of instances) as hardware layers one after another on shared
memory ports: each layer's items go through run_items, which jumps over a steady state of alike items
inside the layer (tile_pipeline._FastForward). The bands of a long layer are themselves alike: 32,768
tokens of BERT-base's QK^T are 103 hardware layers of the same items but for their fetch ids. This module
finds that steady state across layers the same way, so that a run of alike layers costs a few of them.

The runner is max-plus: what a hardware layer does depends only on its items (their sizes, blocks, writes,
which operand each uses: its own fetches, the previous layer's, or an older one by id), its layer info
and, as times, on the state at its start: when it may fetch and compute, what the rings still hold and
release when, and the memory ports' booked intervals from the earliest time the layer can ask for on. If
that state, relative to the previous layer's end, equals the state p layers before, and the layers from
here on are those p layers before them again (equal signatures), every later layer repeats its twin p
layers before, shifted by the same number of cycles D. The runner then skips whole periods (LayerSkip):
the skipped layers' ends are their twins' plus whole shifts, the counters grow by whole periods, the
ports' intervals after the horizon move, and the previous layer's result is its twin's shifted (what the
rings hold renamed to the last skipped layer's fetches). Exact when every time in the state is on the
binary grid of tile_pipeline.on_grid (float sums exact); tests compare every figure with the skip off
(steady.SteadyState.layers; tests/unit/test_layer_skip.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nvdla_sim.engine.steady import PeriodMemo
from nvdla_sim.engine.tile_pipeline import (
    Item,
    PipelineResult,
    booking_increase,
    on_grid,
    port_booking,
    port_channels,
)
from nvdla_sim.layers import Memory
from nvdla_sim.system.memory import MemoryPort

_MAX_PERIOD = 8  # layers between repeats kept to find a period (bands repeat with period 1 or 2)


def own_fetches(items: Sequence[Item]) -> list[int]:
    """The fetch events a layer's items issue, in order."""
    return [f.event for it in items for f in it.fetches]


def layer_signature(
    items: Sequence[Item],
    previous: Sequence[int],
    keep: frozenset[int],
    extra: tuple,
    event: Callable[[int], int] = int,
) -> tuple:
    """A hardware layer up to its fetch ids: every item's fetches, blocks, writes and operand reads, and each
    operand it uses as its own fetch (by position), the previous layer's (by position) or an older one (by
    id, equal only to itself); the operands it keeps in CBUF; and `extra` (its layer info and what the
    runner books for it). Layers with equal signatures time alike from alike states. `event` maps the
    items' event ids to the layer's (a repeated layer's renumbering: engine.conv.renumbered)."""
    own: dict[int, int] = {}
    prev = {e: q for q, e in enumerate(previous)}
    out = []
    for it in items:
        fetches = []
        for f in it.fetches:
            own[event(f.event)] = len(own)
            # enum members by their values (hashing a member runs Python code; its value's hash is cached)
            fetches.append(
                (f.buffer._value_, f.channel._value_, f.nbytes, f.memory._value_, f.streamed, f.max_bytes_per_cycle)
            )
        uses = tuple([_canonical(event(e), own, prev) for e in it.uses])
        blocks = it.blocks if type(it.blocks) is tuple else tuple(it.blocks)
        out.append(
            (tuple(fetches), uses, blocks, it.write_bytes, it.write_memory._value_, it.drain_reads,
             it.drain_read_memory._value_, it.drain_read_cycles)
        )  # fmt: skip
    return (tuple(out), _kept(keep, own, prev), extra)


def kept_signature(keep: frozenset[int], own_fetches: Sequence[int], previous: Sequence[int]) -> tuple:
    """The part of layer_signature for the operands a layer keeps in CBUF, from its own fetch events (in
    order) and the previous layer's."""
    return _kept(keep, {e: q for q, e in enumerate(own_fetches)}, {e: q for q, e in enumerate(previous)})


def _kept(keep: frozenset[int], own: dict[int, int], prev: dict[int, int]) -> tuple:
    return tuple(sorted((_canonical(e, own, prev) for e in keep), key=repr))


def _canonical(e: int, own: dict[int, int], prev: dict[int, int]) -> tuple:
    if e in own:
        return ("own", own[e])
    if e in prev:
        return ("prev", prev[e])
    return ("old", e)


@dataclass(frozen=True)
class LayerJump:
    """Whole periods of alike layers to skip from the current one."""

    layers: int  # how many (periods x period)
    period: int
    shift: int  # cycles per period
    start: int  # the first layer of the period repeated (a position in the run)
    periods: int
    counters: tuple  # per period: the chain's counters (tile_pipeline.COUNTERS)
    port_counters: tuple[tuple[float, int], ...]  # per period and port channel: (busy cycles, bytes)
    horizon: float  # nothing still to come asks a port for a time before this


class LayerSkip:
    """Finds the steady state of a run of hardware layers (module doc). `signature(pos)` gives the
    signature of the layer at that position of the run (layer_signature, computed once each)."""

    def __init__(self, ports: dict[Memory, MemoryPort], signature: Callable[[int], tuple], layers: int) -> None:
        self.channels = port_channels(ports)
        self._signature = signature
        self.layers = layers
        self.seen = PeriodMemo(_MAX_PERIOD)  # (signature, state) at a layer's start -> (pos, ref, counters, booking)
        self._interned: dict[tuple, int] = {}  # each distinct signature once, as a small number
        self._sigs: dict[int, int] = {}

    def signature(self, pos: int) -> int:
        """The layer's signature, interned (equal numbers: equal signatures)."""
        sig = self._sigs.get(pos)
        if sig is None:
            sig = self._sigs[pos] = self._interned.setdefault(self._signature(pos), len(self._interned))
        return sig

    def at(
        self,
        pos: int,
        *,
        ref: int,
        fetch_from: float,
        compute_from: float,
        held: Sequence,
        previous: Sequence[int],
        live: Callable[[int], bool],
        counters: tuple,
    ) -> LayerJump | None:
        """At the start of the layer at `pos` (nothing booked for it yet): the jump the run can make, or
        None. `ref` is the previous layer's end, `held` what the rings hold (PipelineResult.held),
        `previous` the previous layer's own fetches, `live(e)` whether a layer from here on uses fetch e,
        `counters` the chain's so far."""
        found = self._state(ref, fetch_from, compute_from, held, previous, live)
        if found is None:
            self.seen.clear()
            return None
        state, horizon = found
        key = (self.signature(pos), state)
        booked = port_booking(self.channels)
        before = self.seen.repeat(key, (pos, ref, counters, booked))
        if before is None:
            return None
        pos0, ref0, counters0, booked0 = before
        p, shift = pos - pos0, ref - ref0
        if shift <= 0 or not on_grid(shift):
            return None
        port_inc = booking_increase(booked0, booked)
        for (tag, *_), (_, moved) in zip(state[3], port_inc, strict=True):
            if tag == "idle" and moved:  # its last beat would move with layers the jump does not book
                return None
        n = 0  # layers from here that repeat the layer p before them
        while pos + n < self.layers and self.signature(pos + n) == self.signature(pos0 + n):
            n += 1
        periods = n // p
        if periods < 1:
            return None
        inc = tuple(b - a for a, b in zip(counters0, counters, strict=True))
        # every addend and every total on the grid: then adding the periods one by one is exact, as the
        # layer-by-layer run adds them (each partial sum lies between the start and the total)
        sums = [(v, now) for v, now in zip(inc, counters, strict=True)]
        sums += [(b, q.busy_cycles) for (b, _), q in zip(port_inc, self.channels, strict=True)]
        sums.append((shift, ref))
        if not all(on_grid(v) and v >= 0 and on_grid(now + v * periods) for v, now in sums):
            return None
        return LayerJump(periods * p, p, shift, pos0, periods, inc, port_inc, horizon)

    def _state(self, ref: int, fetch_from: float, compute_from: float, held: Sequence, previous: Sequence[int], live):
        """Every time the layers still to come can see, relative to `ref`, and the horizon; None when a time
        is off the grid. A ring slot whose operand no later layer uses is only a time (its id is never
        asked again), and a time before the horizon is only free (every fetch still to come is ready
        later); a ring's oldest such free slots are left out: a fetch that waits for one of them waits for
        nothing, as when the ring is not yet full (a ring that holds several layers' kernel groups fills
        over several layers before their states repeat)."""
        horizon = min(fetch_from, compute_from)
        absolute = [ref, fetch_from, compute_from]
        prev = {e: q for q, e in enumerate(previous)}
        rings = []
        for buf, e, t in held:
            who = ("slot",) if not live(e) else ("prev", prev[e]) if e in prev else ("old", e)
            if t == math.inf:
                slot = (buf, who, "kept")
            elif t <= horizon:  # free before anything still to come asks for a slot
                slot = (buf, who, "free")
                if who == ("slot",) and (not rings or rings[-1][0] is not buf):
                    continue  # a ring's oldest free slots: a fetch that waits for one waits for none
            else:
                slot = (buf, who, t - ref)
                absolute.append(t)
            rings.append(slot)
        channels = []
        for q in self.channels:
            tail = q.booked_after(horizon)
            if tail:
                channels.append(("busy", tuple((max(s, horizon) - ref, e - ref) for s, e in tail)))
                absolute.extend(v for interval in tail for v in interval)
            else:  # nothing after the horizon: its last beat stays put while it stays idle
                channels.append(("idle",))
        if not all(on_grid(v) for v in absolute):
            return None
        return (fetch_from - ref, compute_from - ref, tuple(rings), tuple(channels)), horizon

    def jump(self, jump: LayerJump, ends: list[int], prev: PipelineResult, last_fetches: Sequence[int], previous):
        """Apply `jump`: the skipped layers' ends appended, the ports' intervals after the horizon moved,
        and the previous layer's result as the last skipped layer's (its twin's shifted; the rings' operands
        of the previous layer renamed to `last_fetches`, the last skipped layer's own fetches, from
        `previous`, the previous layer's). Returns that result."""
        by = jump.periods * jump.shift
        for j in range(jump.layers):
            ends.append(ends[jump.start + j % jump.period] + (j // jump.period + 1) * jump.shift)
        for q, (busy, moved) in zip(self.channels, jump.port_counters, strict=True):
            q.jump(jump.horizon, by, busy=jump.periods * busy, nbytes=jump.periods * moved)
        rename = dict(zip(previous, last_fetches, strict=True))
        held = tuple((b, rename.get(e, e), t + by) for b, e, t in prev.held)
        return dataclasses.replace(prev, end=prev.end + by, fetch_end=prev.fetch_end + by, held=held, events=[])
