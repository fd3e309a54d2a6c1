"""Rubik's timing: an event simulation of its requests through the reorder buffers and the write path, from
the structure of NVIDIA's RTL (nvdla/hw branch nvdlav1, vmod/nvdla/rubik and nocif) and measured on nv_full's
RTL (docs/validation.md 5k; validation/data/nvdla_rtl_reshape_nv_full.json).

The requests (RubikLayer.requests, in NV_NVDLA_RUBIK_seq_gen.v's order): the read requests, each filling one
of the reorder buffer's "slots" (one rf_wr_cmd: a contract's run of up to 8 pixels of one x-stride group, a
split's read of up to 64 pixels, a merge's 64-pixel piece of up to one surface's planes); the write requests,
each reading one or more slots and releasing those it reads last.

* Reads: seq_gen never waits for the buffers (rd_req_vld = rd_req_tmp & rf_wr_cmd_rdy, a 256-deep command
  FIFO, seq_gen.v 553, rf_wcmd.v 112): one read beat goes out after the other at the memory port's pace,
  limited only by MCIF's READ_CREDITS latency-FIFO credits (a credit returns when dr2drc moves its beat into
  the buffers); the data returns the memory's latency later.
* Buffers: two slots of 2 KB (rf_core.v: two banks of 32 x 64 B); a slot's beats are written one a cycle
  once the slot two before it is released (rf_full, rf_ctrl.v 234, 461-480).
* Write side: a write request starts once its first slot is whole (+ SLOT_TO_WRITE) and the previous request
  is done; it takes WRITE_REQUEST_CYCLES plus its buffer reads (one entry a cycle, rf_ctrl.v 355), and
  releases each slot it reads last in step with those reads (a contract line's slots one after another).
* Memory writes: MCIF splits a request into transactions that end on 256-byte boundaries and grants one only
  once all its beats are in (store and forward, NV_NVDLA_MCIF_WRITE_IG_arb.v 608); each beat is one write
  request on the memory port, TRANSACTION_TO_WRITE after its transaction is whole; the write side runs at
  most WRITE_LEAD beats ahead of the memory's write requests (its 4-deep FIFOs on the way).

Times are relative to the first read request; the processor adds the launch before it and the completion
after the last write request (RubikProcessor.fixed_latency). Without addresses a request is taken as
starting on a beat and a 256-byte boundary (on the 30 programs measured, 0.5% further from the RTL, median,
than with their addresses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nvdla_sim.processors.mcif import ATOM_BYTES, write_transactions
from nvdla_sim.system.memory import MemoryPort

# MCIF's read latency-FIFO credits for Rubik's client: a read beat waits for one (nvdlav1
# vmod/nvdla/nocif/NV_NVDLA_MCIF_READ_ig.v 277, checked in MCIF_READ_IG_bpt.v 209-236, 336-337)
READ_CREDITS = 80
# Fitted on nv_full's RTL (the 30 programs of own_programs --suite reshape; run.log's AXI request times):
# a write request's cycles beyond its buffer reads: its command packet and one bubble through the write
# path's one-entry stages (NV_NVDLA_RUBIK_wr_req.v 149-243; 1 gives a worst 23.5% on the 30 programs)
WRITE_REQUEST_CYCLES = 2
# a write request's start after its first slot's last beat is written (with TRANSACTION_TO_WRITE, only their
# sum, about 20 cycles, is determined by the measurements: the first write request came 23 to 30 cycles
# after the last read beat of the slot it needs, the spread being the transaction's store and forward)
SLOT_TO_WRITE = 2
TRANSACTION_TO_WRITE = 18  # a write transaction whole in MCIF's FIFO to its first write request
WRITE_LEAD = 16  # write beats the write side may run ahead of the memory's write requests (>= 16 fits alike)


@dataclass(frozen=True)
class RubikRead:
    atoms: int
    slot: int  # the buffer slot it fills


@dataclass(frozen=True)
class RubikWrite:
    atoms: int
    slots: tuple[int, ...]  # the slots it reads, in order
    releases: tuple[int, ...]  # the slots it reads last (released as it reads them)
    buffer_reads: int  # buffer entries it reads, one a cycle


def beats(atoms: int, beat_bytes: int) -> int:
    """Memory beats of a request of `atoms` starting on a beat."""
    return math.ceil(atoms * ATOM_BYTES / beat_bytes)


def request_cycles(
    reads: list[RubikRead],
    writes: list[RubikWrite],
    slots: int,
    read_port: MemoryPort,
    write_port: MemoryPort,
    *,
    read_beat: int,
    write_beat: int,
) -> float:
    """The cycle of the last write request, from the first read request, of Rubik's requests on these
    memory ports (module doc): reads booked on `read_port` as they go out, writes on `write_port`."""
    read_beats = [r.slot for r in reads for _ in range(beats(r.atoms, read_beat))]
    in_slot = [0] * slots
    for s in read_beats:
        in_slot[s] += 1
    ready: list[float | None] = [None] * slots
    release = [math.inf] * slots
    written: list[float] = []  # per read beat: when it is written into its slot
    filled = [0] * slots
    latency = read_port.latency
    state = {"next": 0, "ask": 0.0, "last": -math.inf}

    def fill(slot: int) -> None:
        """Read until `slot` is whole (reads run ahead, in order, as far as they can)."""
        while ready[slot] is None:
            k = state["next"]
            s = read_beats[k]
            ask = state["ask"]
            if k >= READ_CREDITS:  # a credit comes back when its beat is written into the buffers
                ask = max(ask, written[k - READ_CREDITS] + 1)
            first, state["ask"] = read_port.reserve(ask, read_beat)
            gate = release[s - 2] + 1 if s >= 2 else -math.inf
            if gate == math.inf:
                raise AssertionError("a slot was needed before the slot two before it was released")
            t = max(first + latency + 1, state["last"] + 1, gate)
            written.append(t)
            state["last"] = t
            filled[s] += 1
            if filled[s] == in_slot[s]:
                ready[s] = t
            state["next"] = k + 1

    write_requests: list[float] = []  # each memory write request (one a beat)
    side_free = -math.inf  # when the write side finishes its previous request
    for w in writes:
        fill(w.slots[0])
        start = max(side_free, ready[w.slots[0]] + SLOT_TO_WRITE)
        if len(write_requests) >= WRITE_LEAD:
            start = max(start, write_requests[len(write_requests) - WRITE_LEAD])
        per_slot = w.buffer_reads / len(w.slots)
        for i, s in enumerate(w.slots[1:], 1):  # a contract line's later slots, read one after another
            if i >= 2:
                release[w.slots[i - 2]] = start + WRITE_REQUEST_CYCLES - 1 + (i - 1) * per_slot
            fill(s)
            start = max(start, ready[s] + SLOT_TO_WRITE - 1 - i * per_slot)
        side_free = start + WRITE_REQUEST_CYCLES + w.buffer_reads
        for s in w.releases:
            release[s] = start + WRITE_REQUEST_CYCLES - 1 + (w.slots.index(s) + 1) * per_slot
        for upto, n in write_transactions(0, w.atoms, write_beat):  # without addresses: from a boundary
            whole = start + WRITE_REQUEST_CYCLES + math.ceil(upto * w.buffer_reads / w.atoms)
            for _ in range(n):
                first, _ = write_port.reserve(whole + TRANSACTION_TO_WRITE, write_beat)
                write_requests.append(first)
    return write_requests[-1] if write_requests else 0.0
