"""BDMA's timing: its reads and writes as NVIDIA's RTL issues them (nvdla/hw branch nvdlav1, vmod/nvdla/bdma and
nocif), measured on nv_full's RTL (docs/validation.md 5k: every read and write request of our own programs
reproduced to the cycle).

* Reads: the load unit asks for each line whole (NV_NVDLA_BDMA_load.v 395-439), lines and surfaces back to
  back; MCIF cuts a request at 256-byte boundaries and issues one memory beat per block it covers (nv_full's
  single-beat reads), at the memory port's pace, within BDMA's READ_CREDITS latency-FIFO credits (a credit
  back when its beat moves on to the store); the data returns the memory's latency later.
* Packing: MCIF's read egress packs a line's 32-byte atoms densely, a DMA beat's worth at a time (two on
  nv_full's 64-byte DBB; NV_NVDLA_MCIF_READ_eg.v 1051-1089): the store's beat j holds the line's atoms 2j and
  2j + 1 there, in once both have returned.
* Writes: the store sends each line as one write request; MCIF cuts it into transactions that end on 256-byte
  boundaries (MCIF_WRITE_IG_bpt.v 539-640) and grants one only once all its data is in (store and forward,
  MCIF_WRITE_IG_arb.v 400); READ_TO_WRITE after the last read beat a transaction needs, one memory write
  request per 64-byte block it covers, at the write port's pace.

Times are from the first read request; the processor adds the launch before it (timing.bdma_launch_cycles:
20 on nv_full's RTL, CFG_LAUNCH0 to the first read) and the interrupt after the last write request
(timing.completion_cycles: 11 there).
"""

from __future__ import annotations

from dataclasses import dataclass

from nvdla_sim.processors.mcif import ATOM_BYTES, TRANSACTION_BYTES, write_transactions
from nvdla_sim.system.memory import MemoryPort

# BDMA's read latency-FIFO credits in MCIF (nvdlav1 NV_NVDLA_MCIF_READ_ig.v: tieoff_lat_fifo_depth 245,
# checked in MCIF_READ_IG_bpt.v 219-236, 337; returned as the store takes a beat, NV_NVDLA_BDMA_store.v 443)
READ_CREDITS = 245
# the last read beat a write transaction needs, returned, to its first write request: 17 cycles on every
# transaction of the four programs measured (store, MCIF's write ingress and arbiter; not broken down)
READ_TO_WRITE = 17


@dataclass(frozen=True)
class BdmaPlaces:
    """Where a copy's lines start, modulo the 256-byte transactions (what its timing depends on): the first
    line's offset and the line and surface strides, for the source and the destination."""

    src_offset: int = 0
    src_line: int = 0
    src_surface: int = 0
    dst_offset: int = 0
    dst_line: int = 0
    dst_surface: int = 0

    @classmethod
    def of(cls, src: tuple[int, int, int], dst: tuple[int, int, int]) -> BdmaPlaces:
        """From each side's (address, line stride, surface stride)."""
        return cls(*(v % TRANSACTION_BYTES for v in (*src, *dst)))


ALIGNED = BdmaPlaces()


def request_cycles(
    line_bytes: int, lines: int, surfaces: int, places: BdmaPlaces,
    read_port: MemoryPort, write_port: MemoryPort, *, read_beat: int, write_beat: int,
) -> float:  # fmt: skip
    """The cycle of the last write request, from the first read request (module doc)."""
    atoms = line_bytes // ATOM_BYTES
    starts = [(s, ln) for s in range(surfaces) for ln in range(lines)]
    back: list[float] = []  # each read beat's data, returned
    ask = 0.0
    line_atoms: list[list[float]] = []  # per line, when each of its atoms is in
    for s, ln in starts:
        a = (places.src_offset + s * places.src_surface + ln * places.src_line) % TRANSACTION_BYTES
        first_block = a // read_beat
        times = []
        for _ in range(first_block, (a + line_bytes - 1) // read_beat + 1):
            k = len(back)
            if k >= READ_CREDITS:
                ask = max(ask, back[k - READ_CREDITS] + 1)  # its credit, back as the store takes the beat
            first, ask = read_port.reserve(ask, read_beat)
            back.append(first + read_port.latency)
            times.append(back[-1])
        line_atoms.append([times[(a + i * ATOM_BYTES) // read_beat - first_block] for i in range(atoms)])
    last = 0.0
    for (s, ln), ready in zip(starts, line_atoms, strict=True):
        d = (places.dst_offset + s * places.dst_surface + ln * places.dst_line) % TRANSACTION_BYTES
        per = max(1, write_beat // ATOM_BYTES)  # atoms a beat of the store (two on nv_full's 64-byte DBB)
        beats = [max(ready[per * j : per * j + per]) for j in range(-(-atoms // per))]  # the store's beats
        for end, n in write_transactions(d, atoms, write_beat):
            t = beats[(end - 1) // per] + READ_TO_WRITE
            for _ in range(n):
                t, _ = write_port.reserve(t, write_beat)
                last = max(last, t)
    return last
