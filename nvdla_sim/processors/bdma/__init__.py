"""The bridge DMA: copies between memories (DRAM and on-chip SRAM), line by line and surface by surface, beside
the convolution pipeline (its own register groups and interrupt; nv_full has it, nv_small does not:
HwConfig.bdma).

Registers: registers.py (a transfer, queued by CFG_OP.EN), execute.py (the byte copy), BdmaRegisters below.

Timing (timing.py): its read beats as MCIF cuts each line at 256-byte boundaries, within BDMA's read credits,
at the memory port's pace; its write transactions, each whole before its write requests go out; the launch and
the interrupt around them (timing.bdma_launch_cycles, completion_cycles). On nv_full's RTL every read and write
request of four programs of our own to the cycle, and NVIDIA's BDMA_L0_0 (docs/validation.md 5k). Where the
copy's places are not known (the mapper's copies) its lines are taken as starting on 256-byte boundaries.
Energy: the bytes it moves through DRAM (its engine's own datapath, a few buffers, is in the build's
"other" area and not priced per action).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import Activity, Bound, CopyDetail, LayerStats, Unit, UnitStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import make_ports
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import ConfigError, ShapeError, TraceError, check_int
from nvdla_sim.layers import Memory
from nvdla_sim.processors.bdma.execute import execute_bdma
from nvdla_sim.processors.bdma.registers import BdmaOp, decode_bdma, write_bdma
from nvdla_sim.processors.bdma.timing import ALIGNED, BdmaPlaces, request_cycles
from nvdla_sim.processors.mcif import check_memories, copy_mix, copy_traffic
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, ViewDefaults
from nvdla_sim.units.dram import beat_bytes
from nvdla_sim.units.lut import LutParams

# Bridge DMA (NVDLA_BDMA.rdl, nv_full): a copy moves lines of 32-byte atoms, CFG_LINE.SIZE + 1 of them a line
# (13 bits), CFG_LINE_REPEAT.NUMBER + 1 lines a surface and CFG_SURF_REPEAT.NUMBER + 1 surfaces (24 bits each)
BDMA_ATOM_BYTES = 32
MAX_BDMA_LINE_ATOMS = 1 << 13
MAX_BDMA_REPEAT = 1 << 24


@dataclass(frozen=True)
class BdmaLayer:
    """A bridge-DMA copy: `surfaces` surfaces of `lines` lines of `line_bytes` each, read from `source` and
    written to `destination` (each line and surface at its own stride in either: BDMA's CFG_SRC/DST_LINE
    and _SURF registers), as NVIDIA's firmware programs one BDMA transfer (kmd/firmware/bdma.c)."""

    name: str
    line_bytes: int
    lines: int = 1
    surfaces: int = 1
    source: Memory = Memory.DRAM
    destination: Memory = Memory.DRAM
    places: BdmaPlaces = ALIGNED  # where its lines start modulo 256 bytes (a program's addresses and strides)

    def __post_init__(self) -> None:
        top = MAX_BDMA_LINE_ATOMS * BDMA_ATOM_BYTES
        lb = self.line_bytes
        if not isinstance(lb, int) or not 1 <= lb <= top or lb % BDMA_ATOM_BYTES:
            raise ShapeError(
                f"{self.name}: bdma line_bytes must be a multiple of {BDMA_ATOM_BYTES} in {BDMA_ATOM_BYTES}..{top} "
                f"(CFG_LINE.SIZE counts 32-byte atoms in 13 bits), not {lb!r}"
            )
        for n in ("source", "destination"):
            if not isinstance(getattr(self, n), Memory):
                raise ShapeError(f"{self.name}: bdma {n} must be a Memory (dram or sram), not {getattr(self, n)!r}")
        for n in ("lines", "surfaces"):
            what = f"{self.name}: bdma {n}"
            check_int(getattr(self, n), what, maximum=MAX_BDMA_REPEAT, error=ShapeError, why=" (24-bit repeat)")

    @property
    def bytes(self) -> int:
        """Bytes the copy reads (and writes)."""
        return self.line_bytes * self.lines * self.surfaces

    @classmethod
    def of_bytes(cls, name: str, nbytes: int) -> BdmaLayer:
        """A copy of `nbytes` (whole 32-byte atoms) programmed as the fewest lines: the longest line whose
        atoms divide the copy's, then as many lines a surface as divide the rest."""
        if not isinstance(nbytes, int) or nbytes < 1 or nbytes % BDMA_ATOM_BYTES:
            raise ShapeError(f"{name}: a bdma copy moves whole {BDMA_ATOM_BYTES}-byte atoms, not {nbytes!r} bytes")
        line, lines, surfaces = _bdma_shape(nbytes // BDMA_ATOM_BYTES)
        return cls(name, line * BDMA_ATOM_BYTES, lines, surfaces)


@lru_cache(maxsize=4096)
def _bdma_shape(atoms: int) -> tuple[int, int, int]:
    """(atoms a line, lines a surface, surfaces) of a copy of `atoms`: each the largest divisor in range."""
    line = next(d for d in range(min(atoms, MAX_BDMA_LINE_ATOMS), 0, -1) if atoms % d == 0)
    rest = atoms // line
    lines = next(d for d in range(min(rest, MAX_BDMA_REPEAT), 0, -1) if rest % d == 0)
    if rest // lines > MAX_BDMA_REPEAT:
        raise ShapeError(
            f"a bdma copy of {atoms} atoms does not fit one transfer: no line of up to 2^13 atoms and repeat of up"
            " to 2^24 lines leave at most 2^24 surfaces; split the copy"
        )
    return line, lines, rest // lines


class BdmaRegisters(ViewDefaults):
    """A transfer's registers: each write of CFG_OP.EN = 1 queues one (its snapshot is the operation)."""

    kind = "bdma"
    op_type = BdmaOp
    starts_on = "NVDLA_BDMA"
    takes = ("NVDLA_BDMA",)
    units = ("NVDLA_BDMA",)
    done = "BDMA_DONE_STATUS"  # per launch group (CFG_LAUNCH0/1), GLB S_INTR_STATUS bits 6 and 7
    enable_register = "CFG_OP_0"
    pointer_groups = False  # a group is the transfers queued before a CFG_LAUNCH0/1 write
    launch_registers = (("CFG_LAUNCH0_0", 0), ("CFG_LAUNCH1_0", 1))

    def decode(self, snap: Snapshots, name: str) -> tuple[BdmaOp, ...]:
        return (decode_bdma(snap),)

    def emit(self, w: RegisterWriter, op: BdmaOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        write_bdma(w, op)
        return Emitted((), "BDMA_0")  # queued and launched by its CFG_ writes: no op-enable register

    def hw_layer(self, op: BdmaOp, name: str) -> BdmaLayer:
        places = BdmaPlaces.of(
            (op.src.addr, op.src.line_stride, op.src.surface_stride),
            (op.dst.addr, op.dst.line_stride, op.dst.surface_stride),
        )
        return BdmaLayer(name, op.line_bytes, op.lines, op.surfaces, op.src_memory, op.dst_memory, places)

    def execute(self, op: BdmaOp, st: ExecState, name: str) -> None:
        execute_bdma(op, st)

    def check(self, op: BdmaOp, hw: HwConfig, name: str) -> None:
        """A build without BDMA refuses the transfer, as its missing unit would ignore it."""
        if not hw.bdma:
            raise TraceError(f"{name}: a BDMA transfer on {hw.name}, which has no BDMA (its config's bdma = false)")


class BdmaProcessor:
    name = "bdma"
    label = "BDMA"
    engine = "bdma"  # its own queue beside the core (BDMA_CFG_LAUNCH0/1: two groups of its own)
    copy_atom_bytes = BDMA_ATOM_BYTES
    layer_type = BdmaLayer
    config_sections = ("bdma", "memory")
    registers = BdmaRegisters()

    def present(self, hw: HwConfig) -> bool:
        return hw.bdma

    def _check(self, layer: BdmaLayer, hw: HwConfig) -> None:
        if not hw.bdma:
            raise ConfigError(f"{layer.name}: {hw.name} has no BDMA (its config's bdma = false)")
        check_memories(layer.name, hw, layer.source, layer.destination)

    def simulate(
        self, layer: BdmaLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool,
        steady: SteadyState = STEADY,  # its requests are timed one by one (timing.py): no steady state skipped
    ) -> LayerStats:  # fmt: skip
        self._check(layer, hw)
        traffic = copy_traffic(layer.bytes, layer.bytes, layer.source, layer.destination)
        ports = make_ports(hw, mix=copy_mix(traffic))
        read_port, write_port = ports[layer.source], ports[layer.destination].writes
        cycles = math.ceil(
            request_cycles(
                layer.line_bytes, layer.lines, layer.surfaces, layer.places, read_port, write_port,
                read_beat=beat_bytes(hw, layer.source), write_beat=beat_bytes(hw, layer.destination),
            )
        )  # fmt: skip
        dram_cycles = int(ports[Memory.DRAM].channel_busy)
        sram_cycles = int(ports[Memory.SRAM].channel_busy) if Memory.SRAM in ports else 0
        units = {Unit.BDMA: UnitStats(cycles), Unit.DRAM: UnitStats(dram_cycles)}
        if sram_cycles:
            units[Unit.SRAM] = UnitStats(sram_cycles)
        return LayerStats(
            name=layer.name,
            cycles=cycles,
            macs=0,
            peak_macs_per_cycle=0,
            traffic=traffic,
            units=units,
            bound=Bound.DRAM,  # the memory's pace and latency (its credits cover the latency they were sized for)
            lower_bound_cycles=max(dram_cycles, sram_cycles),
            detail=CopyDetail(layer.bytes),
            dram_mix=ports[Memory.DRAM].mix,
        )

    def fixed_latency(self, layer: BdmaLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Its launch to the first read request (timing.bdma_launch_cycles: 20 on nv_full's RTL) and the interrupt
        after the last write request (timing.completion_cycles: 11 there, as for the stream processors); the
        memory's latency is inside the requests' timing (timing.py), so no pipeline."""
        t = hw.timing
        return t.bdma_launch_cycles, 0, t.completion_cycles

    def copy_layer(self, name: str, nbytes: int) -> BdmaLayer:
        """A copy of `nbytes`: BDMA moves whole 32-byte atoms, so a piece that ends inside one moves all of it."""
        return BdmaLayer.of_bytes(name, -(-nbytes // BDMA_ATOM_BYTES) * BDMA_ATOM_BYTES)

    def activity(self, layer: BdmaLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        return Activity(dram_read_bytes=stats.traffic.dram_read, dram_write_bytes=stats.traffic.dram_write)


BDMA = BdmaProcessor()
