"""Request streams of NVDLA's memory access patterns, for a DRAM timing reference (run_dramsim3.py) and the
project's DRAM model to be held to it (issue 58).

A stream is a list of requests (ready cycle, byte address, write?), one DRAM transaction each (a burst: the
device's bus width x its burst length), in the memory's clock cycles (tCK). The devices are the DRAM model's
(nvdla_sim.system.dram.DEVICES), DRAMsim3's own parameter sets (configs/<name>.ini of umd-memsys/DRAMsim3):
run_dramsim3 checks every figure of each against the .ini it runs.

The patterns are those of NVDLA's DMA clients (docs/modelling.md, "Memory"): a weight fetch streams a
contiguous region; a feature fetch reads lines of a cube (a line per row of pixels, surfaces apart); an
output write streams; several clients (CDMA's data and weights, SDP's operands, the write DMA) interleave;
and the worst cases bound them (random rows, two rows of one bank).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from nvdla_sim.system.dram import DEVICES as DRAM_DEVICES
from nvdla_sim.system.dram import AccessMix, DramDevice

Request = tuple[int, int, bool]  # (ready cycle, byte address, write)


# The DRAM model's devices (nvdla_sim.system.dram.DEVICES: DRAMsim3's parameter sets, commit 2981759, x16
# parts on a 64-bit bus, one channel of 8 GB in two ranks of four 8 Gb devices), by DRAMsim3's configs/<name>.ini
# HBM2: DRAMsim3's HBM2_8Gb_x128.ini with one channel of its eight (run_dramsim3 writes it as
# HBM2_8Gb_x128_1ch.ini: `channels = 1`, its other values as they are), the DRAM model timing one channel
DRAMSIM3_CONFIG = {"LPDDR4-2400": "LPDDR4_8Gb_x16_2400", "DDR4-3200": "DDR4_8Gb_x16_3200",
                   "HBM2-2000": "HBM2_8Gb_x128_1ch"}  # fmt: skip
ONE_CHANNEL_OF = {"HBM2_8Gb_x128_1ch": "HBM2_8Gb_x128"}  # a derived .ini: the DRAMsim3 .ini it is one channel of
LPDDR4_2400, DDR4_3200 = DRAM_DEVICES["LPDDR4-2400"], DRAM_DEVICES["DDR4-3200"]
HBM2_2000 = DRAM_DEVICES["HBM2-2000"]
DEVICES = (LPDDR4_2400, DDR4_3200, HBM2_2000)

N = 2048  # transactions a stream (a few hundred KB: past the controller's queues and several refreshes)


def _seq(dev: DramDevice, start: int, n: int, write: bool = False, every: int = 0) -> list[Request]:
    return [(i * every, start + i * dev.request_bytes, write) for i in range(n)]


def _interleave(first: list[Request], second: list[Request], ratio: int = 1) -> list[Request]:
    """Two clients' requests taken in turn, `ratio` of the first's to one of the second's (each keeps its
    order), ordered by ready cycle."""
    out = []
    for i, r in enumerate(second):
        out += [*first[i * ratio : (i + 1) * ratio], r]
    return sorted(out, key=lambda r: r[0])  # stable: equal cycles keep the clients' turn


def _lines(dev: DramDevice, start: int, line_bytes: int, stride: int, n: int) -> list[Request]:
    """A feature fetch: lines of `line_bytes` at `stride` apart, n transactions in all."""
    per = line_bytes // dev.request_bytes
    return [(0, start + (i // per) * stride + (i % per) * dev.request_bytes, False) for i in range(n)]


def _random(dev: DramDevice, seed: int, n: int, span: int) -> list[Request]:
    rng = random.Random(seed)
    return [(0, rng.randrange(span // dev.request_bytes) * dev.request_bytes, False) for _ in range(n)]


REGION = 1 << 28  # 256 MB apart: clients' buffers in other rows of every bank


def _mixed(dev: DramDevice, seed: int, n: int) -> list[Request]:
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


PATTERNS: dict[str, tuple[str, Callable[[DramDevice], list[Request]]]] = {
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


# The access mixes of NVDLA's runs under the dram memory model (dram.AccessMix: each DMA client's share of a
# run's bytes in sixteenths, R a reader, W the writer), as `python -m nvdla_validation.dram.nvdla_mixes` lists
# them for the README job and a GPT-2 decode step on configs/nv_full_lpddr4.toml (2026-12-07); each runs as
# the model measures it (AccessMix.requests: the clients in weighted turn, each walking its own buffer)
NVDLA_MIXES = ("R16", "R14 R1 W1", "R11 R4 W2", "R8 W8", "R12 R2 W2", "R4 R4 W8", "R6 R3 W6", "R8 R4 W4",
               "R6 R6 W3", "R13 R1 R1 W1", "R10 R3 R1 W2", "R14 W1", "R9 R7", "R14 R1", "R11 R5", "R5 R5 W5",
               "R15 R1", "R15 W1")  # fmt: skip
PATTERNS |= {
    "mix_" + label.replace(" ", "_"): (
        f"NVDLA's DMA clients in a run, {label} (nvdla_mixes.py)",
        lambda d, label=label: AccessMix.parse(label).requests(d),
    )
    for label in NVDLA_MIXES
}


@dataclass(frozen=True)
class Stream:
    name: str  # <pattern>@<DRAMsim3 config>
    device: DramDevice
    pattern: str
    what: str

    @property
    def dramsim3_config(self) -> str:
        return DRAMSIM3_CONFIG[self.device.name]

    def requests(self) -> list[Request]:
        return PATTERNS[self.pattern][1](self.device)


STREAMS = tuple(
    Stream(f"{p}@{DRAMSIM3_CONFIG[d.name]}", d, p, what) for d in DEVICES for p, (what, _) in PATTERNS.items()
)


def trace_text(requests: list[Request]) -> str:
    """The requests as run_dramsim3's driver reads them: "CYCLE 0xADDRESS R|W" a line."""
    return "".join(f"{c} {a:#x} {'W' if w else 'R'}\n" for c, a, w in requests)
