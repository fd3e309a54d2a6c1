"""Rubik, the reshape engine (nv_full; HwConfig.rubik): a deconvolution's output contracted into its
pixels, a feature cube split into one plane per channel, planes merged into a feature cube, memory to memory
beside the convolution pipeline (its own register groups and interrupt, GLB bits 8 and 9).

Registers: registers.py; bit-exact execution: execute.py (both from NVIDIA's C model and RTL, branch nvdlav1);
the register view RubikRegisters and the timing RubikProcessor below.

Timing (timing.py): the requests each mode issues, in the RTL's order (NV_NVDLA_RUBIK_seq_gen.v, cmod
NV_NVDLA_rbk.cpp; RubikLayer.requests): contract reads runs of up to 8 atoms per input line and channel group
and writes each output line whole (x stride up to 8) or in runs of up to 8 atoms; split reads up to 64 atoms
of a surface's line and writes each plane's line in 64-pixel pieces; merge reads each plane's 64-pixel pieces
and writes up to 64 atoms. Each read fills a slot of the two 2 KB reorder buffers, each write reads and
releases slots; an event simulation of the reads (at the memory port's pace, within MCIF's 80 credits), the
buffers, the write side and MCIF's store-and-forward write transactions gives the last write request. Within
0.4% of nv_full's RTL on the 30 programs of `own_programs --suite reshape` (median; worst 2.3%), and 2.1%
over on NVIDIA's RBK_L0_0 (docs/validation.md 5k).
Energy: the bytes it moves through DRAM (its datapath, two 2 KB reorder buffers, is in the build's "other"
area and not priced per action).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import Activity, Bound, CopyDetail, LayerStats, Unit, UnitStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import make_ports
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import ConfigError, ShapeError, TraceError, check_int
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.processors.mcif import check_memories, copy_mix, copy_traffic
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, ViewDefaults
from nvdla_sim.processors.rubik.execute import execute_rubik
from nvdla_sim.processors.rubik.registers import RBK_ATOM_BYTES, RubikMode, RubikOp, decode_rubik, write_rubik
from nvdla_sim.processors.rubik.timing import WRITE_REQUEST_CYCLES, RubikRead, RubikWrite, request_cycles
from nvdla_sim.units.dram import beat_bytes
from nvdla_sim.units.lut import LutParams

MAX_RUBIK_DIM = 8192  # 13-bit size fields (DATAIN_WIDTH/HEIGHT/CHANNEL, DATAOUT_CHANNEL) hold the size - 1
CONTRACT_READ_ATOMS = 8  # a contract's read request: up to 8 atoms of an input line (seq_gen)
CONTRACT_WRITE_ATOMS = 8  # a contract with an x stride past this writes runs of up to 8 atoms (cmod 747-772)
PIECE_PIXELS = 64  # split and merge move lines in pieces of up to 64 pixels (seq_gen, cmod 431-531, 854-1018)


@dataclass(frozen=True)
class RubikLayer:
    """A Rubik reshape of a W x H cube: contract (`in_channels` = sx * sy groups of `out_channels`, whole
    output surfaces each), split or merge (`in_channels` = `out_channels`), between memories."""

    name: str
    mode: RubikMode
    width: int
    height: int
    in_channels: int
    out_channels: int
    precision: Precision
    stride_x: int = 1
    stride_y: int = 1
    source: Memory = Memory.DRAM
    destination: Memory = Memory.DRAM

    def __post_init__(self) -> None:
        if not isinstance(self.mode, RubikMode):
            raise ShapeError(f"{self.name}: rubik mode must be a RubikMode (contract, split, merge), not {self.mode!r}")
        for n in ("width", "height", "in_channels", "out_channels"):
            what = f"{self.name}: rubik {n}"
            check_int(getattr(self, n), what, maximum=MAX_RUBIK_DIM, error=ShapeError, why=" (13-bit size field)")
        for n in ("stride_x", "stride_y"):
            check_int(getattr(self, n), f"{self.name}: rubik {n}", maximum=32, error=ShapeError, why=" (5-bit field)")
        if not isinstance(self.precision, Precision):
            raise ShapeError(f"{self.name}: rubik precision must be a Precision, not {self.precision!r}")

    @property
    def element_bytes(self) -> int:
        return 1 if self.precision is Precision.INT8 else 2

    def surfaces(self, channels: int) -> int:
        return -(-channels * self.element_bytes // RBK_ATOM_BYTES)

    def requests(self) -> tuple[list[RubikRead], list[RubikWrite], int]:
        """The read and write requests in the order the RTL issues them (NV_NVDLA_RUBIK_seq_gen.v, cmod
        NV_NVDLA_rbk.cpp), each read with the reorder-buffer slot it fills, each write with the slots it reads
        and releases and its buffer reads (timing.py), and the number of slots."""
        w, e = self.width, self.element_bytes
        reads: list[RubikRead] = []
        writes: list[RubikWrite] = []
        slots = 0
        pieces = [min(PIECE_PIXELS, w - w0) for w0 in range(0, w, PIECE_PIXELS)]
        per_surface = RBK_ATOM_BYTES // e  # channels (planes) a surface holds

        def atoms(pixels: int) -> int:  # a plane line's piece, in whole atoms
            return -(-pixels * e // RBK_ATOM_BYTES)

        if self.mode is RubikMode.CONTRACT:
            sx, sy = self.stride_x, self.stride_y
            runs = [min(CONTRACT_READ_ATOMS, w - w0) for w0 in range(0, w, CONTRACT_READ_ATOMS)]
            groups = [min(CONTRACT_WRITE_ATOMS, sx - g0) for g0 in range(0, sx, CONTRACT_WRITE_ATOMS)]
            for _ in range(self.surfaces(self.out_channels) * self.height * sy):  # output lines
                line = []  # the line's slots, by run and group
                for n in runs:
                    for nd in groups:  # one slot: a run of pixels of each x offset of the group
                        reads += [RubikRead(n, slots)] * nd
                        line.append(slots)
                        slots += 1
                if sx <= CONTRACT_WRITE_ATOMS:  # the line whole: each run's pixels, x stride atoms each
                    run_slots = tuple(line)
                    writes.append(RubikWrite(w * sx, run_slots, run_slots, w * -(-sx // 2)))
                    continue
                for r, n in enumerate(runs):
                    for g, nd in enumerate(groups):
                        s = line[r * len(groups) + g]
                        for p in range(n):
                            writes.append(RubikWrite(nd, (s,), (s,) if p == n - 1 else (), -(-nd // 2)))
            return reads, writes, slots
        if self.mode is RubikMode.SPLIT:
            first = []
            for _ in range(self.surfaces(self.in_channels) * self.height):
                for n in pieces:
                    reads.append(RubikRead(n, slots))
                    first.append(slots)
                    slots += 1
            for c in range(self.surfaces(self.in_channels)):
                planes = min(per_surface, self.in_channels - c * per_surface)
                for h in range(self.height):
                    for p, n in enumerate(pieces):
                        s = first[(c * self.height + h) * len(pieces) + p]
                        a = atoms(n)
                        reads_of = 1 if e == 1 or a <= 2 else 2  # an INT16 piece past 32 pixels: two entries
                        writes += [RubikWrite(a, (s,), (), reads_of)] * (planes - 1)
                        writes.append(RubikWrite(a, (s,), (s,), reads_of))
            return reads, writes, slots
        for c in range(self.surfaces(self.out_channels)):
            planes = min(per_surface, self.in_channels - c * per_surface)
            for _ in range(self.height):
                for n in pieces:
                    reads += [RubikRead(atoms(n), slots)] * planes
                    writes.append(RubikWrite(n, (slots,), (slots,), -(-n // 2)))
                    slots += 1
        return reads, writes, slots

    def transfers(self) -> tuple[list[int], list[int]]:
        """(atoms of each read request, atoms of each write request), as the RTL issues them."""
        reads, writes, _ = self.requests()
        return [r.atoms for r in reads], [w.atoms for w in writes]

    @property
    def read_bytes(self) -> int:
        return sum(self.transfers()[0]) * RBK_ATOM_BYTES

    @property
    def write_bytes(self) -> int:
        return sum(self.transfers()[1]) * RBK_ATOM_BYTES


class RubikRegisters(ViewDefaults):
    kind = "rubik"
    op_type = RubikOp
    starts_on = "NVDLA_RBK"
    takes = ("NVDLA_RBK",)
    units = ("NVDLA_RBK",)  # nvdla/sw kmd/firmware/rubik.c
    done = "RUBIK_DONE_STATUS"

    def decode(self, snap: Snapshots, name: str) -> tuple[RubikOp, ...]:
        return (decode_rubik(name, snap),)

    def emit(self, w: RegisterWriter, op: RubikOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        write_rubik(w, op)
        return Emitted(("RBK",), "RUBIK_0")

    def hw_layer(self, op: RubikOp, name: str) -> RubikLayer:
        return RubikLayer(
            name, op.mode, op.width, op.height, op.in_channels, op.out_channels, op.precision,
            stride_x=op.stride_x, stride_y=op.stride_y, source=op.src.memory, destination=op.dst.memory,
        )  # fmt: skip

    def execute(self, op: RubikOp, st: ExecState, name: str) -> None:
        execute_rubik(op, st)

    def check(self, op: RubikOp, hw: HwConfig, name: str) -> None:
        """A build without Rubik refuses the operation, as its missing unit would ignore it."""
        if not hw.rubik:
            raise TraceError(f"{name}: a Rubik operation on {hw.name}, which has no Rubik (its config's rubik = false)")


class RubikProcessor:
    name = "rubik"
    label = "Rubik"
    engine = "rubik"  # its own register groups and interrupt, beside the core's pipeline
    copy_atom_bytes = 0
    layer_type = RubikLayer
    config_sections = ("rubik", "memory")
    registers = RubikRegisters()

    def present(self, hw: HwConfig) -> bool:
        return hw.rubik

    def simulate(
        self, layer: RubikLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool,
        steady: SteadyState = STEADY,  # its requests are timed one by one (timing.py): no steady state skipped
    ) -> LayerStats:  # fmt: skip
        if not hw.rubik:
            raise ConfigError(f"{layer.name}: {hw.name} has no Rubik (its config's rubik = false)")
        check_memories(layer.name, hw, layer.source, layer.destination)
        reads, writes, slots = layer.requests()
        rbeat, wbeat = beat_bytes(hw, layer.source), beat_bytes(hw, layer.destination)
        rb, wb = sum(r.atoms for r in reads) * RBK_ATOM_BYTES, sum(w.atoms for w in writes) * RBK_ATOM_BYTES
        # the memory moves whole beats: a request of one 32-byte atom takes a 64-byte beat of nv_full's bus
        traffic = copy_traffic(rb, wb, layer.source, layer.destination)
        ports = make_ports(hw, mix=copy_mix(traffic))
        read_port, write_port = ports[layer.source], ports[layer.destination].writes
        cycles = math.ceil(
            request_cycles(reads, writes, slots, read_port, write_port, read_beat=rbeat, write_beat=wbeat)
        )
        # Rubik's own work: its write side, a request's command and its buffer reads one a cycle
        busy = sum(WRITE_REQUEST_CYCLES + w.buffer_reads for w in writes)
        port_cycles = int(max(p.channel_busy for p in ports.values()))
        bound = Bound.DRAM if port_cycles >= busy else Bound.RUBIK
        units = {
            Unit.RUBIK: UnitStats(busy),
            Unit.DRAM: UnitStats(int(ports[Memory.DRAM].channel_busy)),
        }
        return LayerStats(
            name=layer.name,
            cycles=cycles,
            macs=0,
            peak_macs_per_cycle=0,
            traffic=traffic,
            units=units,
            bound=bound,
            lower_bound_cycles=port_cycles,
            detail=CopyDetail(max(rb, wb)),  # a split's planes or a merge's atoms may be more than it reads
            dram_mix=ports[Memory.DRAM].mix,
        )

    def fixed_latency(self, layer: RubikLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Its launch to the first read request (timing.rubik_launch_cycles, measured on nv_full's RTL) and the
        interrupt after the last write request (timing.completion_cycles: 11 there too); the memory's latency
        is inside the requests' timing (timing.py), so no pipeline."""
        t = hw.timing
        return t.rubik_launch_cycles, 0, t.completion_cycles

    def copy_layer(self, name: str, nbytes: int) -> RubikLayer:
        raise TypeError(f"{self.name} does not copy memory")  # it reshapes (copy_atom_bytes 0), as CoreProcessor

    def activity(self, layer: RubikLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        return Activity(dram_read_bytes=stats.traffic.dram_read, dram_write_bytes=stats.traffic.dram_write)


RUBIK = RubikProcessor()
