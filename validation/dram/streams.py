"""Request streams of NVDLA's memory access patterns, for a DRAM timing reference (run_dramsim3.py) and the
project's DRAM model to be held to it (issue 58).

A stream is a list of requests (ready cycle, byte address, write?), one DRAM transaction each (a burst: the
device's bus width x its burst length), in the memory's clock cycles (tCK). The devices are DRAMsim3's own
parameter sets (configs/<name>.ini of umd-memsys/DRAMsim3): their geometry is written here so that the
streams can be made without the checkout, and run_dramsim3 checks it against the .ini it runs.

The patterns are those of NVDLA's DMA clients (docs/modelling.md, "Memory"): a weight fetch streams a
contiguous region; a feature fetch reads lines of a cube (a line per row of pixels, surfaces apart); an
output write streams; several clients (CDMA's data and weights, SDP's operands, the write DMA) interleave;
and the worst cases bound them (random rows, two rows of one bank).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

Request = tuple[int, int, bool]  # (ready cycle, byte address, write)


@dataclass(frozen=True)
class Device:
    """A DRAM device set as DRAMsim3's config describes it (its [dram_structure], [timing] tCK and [system])."""

    name: str  # DRAMsim3's configs/<name>.ini
    bus_bits: int
    burst_length: int
    columns: int
    bankgroups: int
    banks_per_group: int
    rows: int
    ranks: int  # DRAMsim3: channel_size / (its devices' size on one rank)
    tck_ns: float
    mapping: str = "rochrababgco"  # most significant field first; DRAMsim3's address_mapping

    @property
    def request_bytes(self) -> int:
        """One transaction: the bus width x the burst length (DRAMsim3's request_size_bytes)."""
        return self.bus_bits // 8 * self.burst_length

    @property
    def burst_cycles(self) -> int:
        """Cycles a burst holds the data bus (double data rate)."""
        return self.burst_length // 2

    def _widths(self) -> dict[str, int]:
        log2 = lambda n: n.bit_length() - 1  # noqa: E731
        return {
            "ch": 0, "ra": log2(self.ranks), "bg": log2(self.bankgroups), "ba": log2(self.banks_per_group),
            "ro": log2(self.rows), "co": log2(self.columns) - log2(self.burst_length),
        }  # fmt: skip

    def address(self, *, row: int = 0, bank: int = 0, bankgroup: int = 0, rank: int = 0, column: int = 0) -> int:
        """The byte address of a transaction at these coordinates (`column` in transactions)."""
        widths, at = self._widths(), {"ro": row, "ba": bank, "bg": bankgroup, "ra": rank, "co": column, "ch": 0}
        addr, pos = 0, self.request_bytes.bit_length() - 1
        for field in reversed([self.mapping[i : i + 2] for i in range(0, 12, 2)]):
            if not 0 <= at[field] < 1 << widths[field]:
                raise ValueError(f"{self.name}: {field} {at[field]} out of range (0..{(1 << widths[field]) - 1})")
            addr |= at[field] << pos
            pos += widths[field]
        return addr

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of one bank: the columns a row holds, in transactions."""
        return self.request_bytes << self._widths()["co"]


# DRAMsim3's configs (umd-memsys/DRAMsim3 configs/*.ini, commit 2981759): x16 parts on a 64-bit bus, one
# channel of 8 GB (two ranks of four 8 Gb devices)
LPDDR4_2400 = Device("LPDDR4_8Gb_x16_2400", 64, 16, 1024, 2, 4, 65536, 2, 0.83)
DDR4_3200 = Device("DDR4_8Gb_x16_3200", 64, 8, 1024, 2, 4, 65536, 2, 0.63)
DEVICES = (LPDDR4_2400, DDR4_3200)

N = 2048  # transactions a stream (a few hundred KB: past the controller's queues and several refreshes)


def _seq(dev: Device, start: int, n: int, write: bool = False, every: int = 0) -> list[Request]:
    return [(i * every, start + i * dev.request_bytes, write) for i in range(n)]


def _interleave(first: list[Request], second: list[Request], ratio: int = 1) -> list[Request]:
    """Two clients' requests taken in turn, `ratio` of the first's to one of the second's (each keeps its
    order), ordered by ready cycle."""
    out = []
    for i, r in enumerate(second):
        out += [*first[i * ratio : (i + 1) * ratio], r]
    return sorted(out, key=lambda r: r[0])  # stable: equal cycles keep the clients' turn


def _lines(dev: Device, start: int, line_bytes: int, stride: int, n: int) -> list[Request]:
    """A feature fetch: lines of `line_bytes` at `stride` apart, n transactions in all."""
    per = line_bytes // dev.request_bytes
    return [(0, start + (i // per) * stride + (i % per) * dev.request_bytes, False) for i in range(n)]


def _random(dev: Device, seed: int, n: int, span: int) -> list[Request]:
    rng = random.Random(seed)
    return [(0, rng.randrange(span // dev.request_bytes) * dev.request_bytes, False) for _ in range(n)]


REGION = 1 << 28  # 256 MB apart: clients' buffers in other rows of every bank


def _mixed(dev: Device, seed: int, n: int) -> list[Request]:
    """A fuzz of the controller's corners: requests 0-6 clocks apart, 30% writes, over 4 rows of every bank
    and rank (row hits, misses and conflicts, reads and writes interleaved). Reads take columns 0-7 and writes
    8-15: a read waiting for the place a full write buffer's first write goes to stalls DRAMsim3 for ever
    (its drain stops at the hazard and its reads wait for the drain), a case the reference cannot time."""
    rng = random.Random(seed)
    out, t = [], 0
    for _ in range(n):
        t += rng.randrange(7)
        write = rng.random() < 0.3
        addr = dev.address(row=rng.randrange(4), bank=rng.randrange(dev.banks_per_group),
                           bankgroup=rng.randrange(dev.bankgroups), rank=rng.randrange(dev.ranks),
                           column=rng.randrange(8) + 8 * write)  # fmt: skip
        out.append((t, addr, write))
    return out


PATTERNS: dict[str, tuple[str, Callable[[Device], list[Request]]]] = {
    "seq_read": ("a weight fetch: one contiguous region, every request ready at once", lambda d: _seq(d, 0, N)),
    "seq_read_half_rate": (
        "the same, a request every other burst time (a client at half the bus's rate)",
        lambda d: _seq(d, 0, N, every=2 * d.burst_cycles),
    ),
    "seq_write": ("an output write: one contiguous region", lambda d: _seq(d, 0, N, write=True)),
    "lines_2k_stride_8k": (
        "a feature fetch: 2 KB lines 8 KB apart (a cube's row of pixels, the rest of the surface skipped)",
        lambda d: _lines(d, 0, 2048, 8192, N),
    ),
    "lines_256_stride_64k": (
        "short lines far apart: 256 B every 64 KB (one atom line of many surfaces)",
        lambda d: _lines(d, 0, 256, 65536, N),
    ),
    "random_read": ("the worst case of reads: random transactions over 1 GB", lambda d: _random(d, 58, N, 1 << 30)),
    "row_conflict": (
        "two rows of one bank in turn (as offered, each request a row miss; the controller may batch them)",
        lambda d: [
            (0, d.address(row=i % 2, column=(i // 2) % (d.row_bytes // d.request_bytes)), False) for i in range(N)
        ],
    ),
    "reads_with_writes_3_to_1": (
        "a convolution's input read and output written back: three reads, then a write to another region",
        lambda d: _interleave(_seq(d, 0, 3 * N // 4), _seq(d, REGION, N // 4, write=True), ratio=3),
    ),
    "weights_and_feature_lines": (
        "CDMA's two clients in turn: weights streaming and 2 KB feature lines 8 KB apart",
        lambda d: _interleave(_seq(d, 0, N // 2), _lines(d, REGION, 2048, 8192, N // 2)),
    ),
    "two_masters_read": (
        "two masters streaming reads from their own regions, in turn",
        lambda d: _interleave(_seq(d, 0, N // 2), _seq(d, REGION, N // 2)),
    ),
    "mixed_fuzz_1": ("a fuzz of the controller's corners (seed 1): see _mixed", lambda d: _mixed(d, 1, N)),
    "mixed_fuzz_2": ("the same, seed 2", lambda d: _mixed(d, 2, N)),
    "mixed_fuzz_3": ("the same, seed 3", lambda d: _mixed(d, 3, N)),
    "two_masters_read_write": (
        "one master streaming reads, the other streaming writes, in turn",
        lambda d: _interleave(_seq(d, 0, N // 2), _seq(d, REGION, N // 2, write=True)),
    ),
}


@dataclass(frozen=True)
class Stream:
    name: str  # <pattern>@<device>
    device: Device
    pattern: str
    what: str

    def requests(self) -> list[Request]:
        return PATTERNS[self.pattern][1](self.device)


STREAMS = tuple(Stream(f"{p}@{d.name}", d, p, what) for d in DEVICES for p, (what, _) in PATTERNS.items())


def trace_text(requests: list[Request]) -> str:
    """The requests as run_dramsim3's driver reads them: "CYCLE 0xADDRESS R|W" a line."""
    return "".join(f"{c} {a:#x} {'W' if w else 'R'}\n" for c, a, w in requests)
