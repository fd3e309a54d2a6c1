"""Rubik, the reshape engine (nv_full; HwConfig.rubik): a deconvolution's output contracted into its
pixels, a feature cube split into one plane per channel, planes merged into a feature cube, memory to memory
beside the convolution pipeline (its own register groups and interrupt, GLB bits 8 and 9).

Registers: registers.py; bit-exact execution: execute.py (both from NVIDIA's C model and RTL, branch nvdlav1);
the register view RubikRegisters and the timing RubikProcessor below.

Timing (from the RTL's structure, nvdla/hw nvdlav1 vmod/nvdla/rubik; not yet measured on it): a read request
of n atoms takes ceil(n x 32 / beat) cycles of the read return, a write request one command cycle and
ceil(n x 32 / beat) data cycles on its one write channel (NV_NVDLA_RUBIK_wr_req.v: command and data share a
515-bit packet), with `beat` the width in bytes of the interface the side uses (DBB for DRAM, SRAMIF). The requests each mode issues
(NV_NVDLA_RUBIK_seq_gen.v, cmod NV_NVDLA_rbk.cpp): contract reads runs of up to 8 atoms per input line and
channel group, and writes each output line whole (x stride up to 8) or in runs of up to 8 atoms; split reads
up to 64 atoms of a surface's line, and writes each plane's line in 64-pixel pieces; merge reads each plane's
64-pixel pieces and writes up to 64 atoms. The operation takes the longest of its read cycles, its write
cycles and its beats on the memory ports (whole beats: a one-atom request takes a 64-byte beat of
nv_full's bus; writes on the write channel where the memory has one), the last write request after the last
read, plus the stream processors' launch and completion and one memory latency.
Energy: the bytes it moves through DRAM (its datapath, two 2 KB reorder buffers, is in the build's "other"
area and not priced per action).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import Activity, Bound, CopyDetail, LayerStats, Traffic, Unit, UnitStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import make_ports
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import ConfigError, ShapeError, TraceError, check_int
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, ViewDefaults
from nvdla_sim.processors.rubik.execute import execute_rubik
from nvdla_sim.processors.rubik.registers import RBK_ATOM_BYTES, RubikMode, RubikOp, decode_rubik, write_rubik
from nvdla_sim.system.memory import memory_model
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

    def transfers(self) -> tuple[list[int], list[int]]:
        """(atoms of each read request, atoms of each write request), as the RTL issues them."""
        w, e = self.width, self.element_bytes
        pieces = [min(PIECE_PIXELS, w - w0) for w0 in range(0, w, PIECE_PIXELS)]
        if self.mode is RubikMode.CONTRACT:
            lines = self.surfaces(self.out_channels) * self.height * self.stride_y  # output lines
            runs = [min(CONTRACT_READ_ATOMS, w - w0) for w0 in range(0, w, CONTRACT_READ_ATOMS)]
            reads = runs * (lines * self.stride_x)
            sx = self.stride_x
            if sx <= CONTRACT_WRITE_ATOMS:
                writes = [w * sx] * lines
            else:
                writes = [min(CONTRACT_WRITE_ATOMS, sx - t0) for t0 in range(0, sx, CONTRACT_WRITE_ATOMS)] * (lines * w)
            return reads, writes
        if self.mode is RubikMode.SPLIT:
            reads = pieces * (self.surfaces(self.in_channels) * self.height)
            writes = [-(-max(RBK_ATOM_BYTES, p * e) // RBK_ATOM_BYTES) for p in pieces] * (
                self.out_channels * self.height
            )
            return reads, writes
        reads = [-(-p * e // RBK_ATOM_BYTES) for p in pieces] * (self.in_channels * self.height)
        writes = pieces * (self.surfaces(self.out_channels) * self.height)
        return reads, writes

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
        steady: SteadyState = STEADY,  # a reshape has no steady state to skip: its time is a formula
    ) -> LayerStats:  # fmt: skip
        if not hw.rubik:
            raise ConfigError(f"{layer.name}: {hw.name} has no Rubik (its config's rubik = false)")
        if Memory.SRAM in (layer.source, layer.destination) and not hw.memory.has_sram:
            raise ConfigError(f"{layer.name}: {hw.name} has no on-chip SRAM (memory.sram_width_bits = 0)")
        beat = {Memory.DRAM: hw.memory.dram_width_bits // 8, Memory.SRAM: hw.memory.sram_width_bits // 8}
        reads, writes = layer.transfers()
        rbeat, wbeat = beat[layer.source], beat[layer.destination]
        read_beats = [math.ceil(n * RBK_ATOM_BYTES / rbeat) for n in reads]
        write_beats = [math.ceil(n * RBK_ATOM_BYTES / wbeat) for n in writes]
        read_cycles, write_cycles = sum(read_beats), sum(1 + b for b in write_beats)
        rb, wb = sum(reads) * RBK_ATOM_BYTES, sum(writes) * RBK_ATOM_BYTES  # what transfers() counted, once
        # the memory moves whole beats: a request of one 32-byte atom takes a 64-byte beat of nv_full's bus
        ports = make_ports(hw)
        read_port, write_port = ports[layer.source], ports[layer.destination].writes
        read_port.reserve(0.0, sum(read_beats) * rbeat)
        read_time = max(read_cycles, read_port.last_beat)
        last = make_ports(hw)[layer.destination].writes  # the last write request alone, once its data is read
        last.reserve(0.0, write_beats[-1] * wbeat)
        last_write = max(1 + write_beats[-1], last.last_beat)
        write_port.reserve(0.0, sum(write_beats) * wbeat)
        write_time = max(write_cycles, write_port.last_beat)
        cycles = math.ceil(max(read_time + last_write, write_time))
        port_cycles = int(max(p.last_beat for p in ports.values()))
        bound = (
            Bound.DRAM
            if max(read_port.last_beat, write_port.last_beat) >= max(read_cycles, write_cycles)
            else Bound.RUBIK
        )
        src, dst = layer.source is Memory.DRAM, layer.destination is Memory.DRAM
        traffic = Traffic(dram_read=rb * src, dram_write=wb * dst, sram_read=rb * (not src), sram_write=wb * (not dst))
        units = {
            Unit.RUBIK: UnitStats(max(read_cycles, write_cycles)),
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
        )

    def fixed_latency(self, layer: RubikLayer, hw: HwConfig) -> tuple[int, int, int]:
        """The stream processors' launch and completion (TimingConfig, measured on nv_small's RDMAs; on nv_full's
        RTL Rubik's first read comes 22 cycles after its enable and its interrupt 12 after its last write), and
        the first read's memory latency as its pipeline."""
        t = hw.timing
        return t.launch_cycles, memory_model(hw).latency(layer.source), t.completion_cycles

    def copy_layer(self, name: str, nbytes: int) -> RubikLayer:
        raise TypeError(f"{self.name} does not copy memory")  # it reshapes (copy_atom_bytes 0), as CoreProcessor

    def activity(self, layer: RubikLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        return Activity(dram_read_bytes=stats.traffic.dram_read, dram_write_bytes=stats.traffic.dram_write)


RUBIK = RubikProcessor()
