"""What every processor's register view is made of: reading a register snapshot, writing registers, the
state a program's bit-exact execution carries from one operation to the next, and the `RegisterView`
interface the program passes (nvdla_sim.program: decode, emit, execute, run) call instead of naming an
operation.

A processor's register view turns its registers (NVIDIA's NVDLA_<UNIT>.rdl fields, read by name through
nvdla_sim.registers.fields) into a decoded operation (a frozen dataclass of numbers), writes an operation
back as registers, gives the hardware layer the timing model runs for it and executes it bit-exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.registers.fields import field as get_field
from nvdla_sim.registers.fields import pack
from nvdla_sim.registers.trace_io import SparseMemory
from nvdla_sim.units.lut import LutParams
from nvdla_sim.units.memory_format import Surface

# D_*_PRECISION / INPUT_DATA codes of every unit (NVDLA_<UNIT>.rdl: 0 INT8, 1 INT16, 2 FP16)
PRECISION_CODES = {Precision.INT8: 0, Precision.INT16: 1, Precision.FP16: 2}
_PRECISIONS = {code: p for p, code in PRECISION_CODES.items()}
RAM_MC = 1  # RAM_TYPE: 1 = the memory controller interface (nv_small has no CV SRAM)


def precision_of(code: int, what: str) -> Precision:
    """The precision a register's code names; `what` names the register field in the error."""
    try:
        return _PRECISIONS[code]
    except KeyError:
        raise TraceError(f"{what} = {code} is not a precision (0 INT8, 1 INT16, 2 FP16)") from None


Snapshots = dict[str, dict[str, int]]  # unit ("NVDLA_SDP") -> register name -> value, as one layer saw them


class UnitRegisters:
    """One unit's registers in a snapshot, read by field name."""

    def __init__(self, unit: str, values: dict[str, int]) -> None:
        self.unit, self.values = unit, values

    @classmethod
    def of(cls, snap: Snapshots, unit: str) -> UnitRegisters:
        return cls(unit, snap.get(unit, {}))

    def f(self, reg: str, name: str) -> int:
        return get_field(self.values.get(reg, 0), self.unit, reg, name)

    def written(self, reg: str) -> bool:
        return reg in self.values

    def addr(self, low: str, high: str | None = None) -> int:
        lo = self.values.get(low, 0)
        hi = self.values.get(high, 0) if high else 0
        return (hi << 32) | lo

    def surface(self, which: str) -> Surface:
        """A stream unit's source or destination cube (`which`: SRC or DST): D_{which}_BASE_ADDR_LOW/HIGH,
        D_{which}_LINE_STRIDE and D_{which}_SURFACE_STRIDE, as SDP, PDP and CDP (and their RDMAs) name them."""
        return Surface(
            self.addr(f"D_{which}_BASE_ADDR_LOW_0", f"D_{which}_BASE_ADDR_HIGH_0"),
            self.f(f"D_{which}_LINE_STRIDE_0", "STRIDE"),
            self.f(f"D_{which}_SURFACE_STRIDE_0", "STRIDE"),
        )

    def ram(self, reg: str) -> Memory:
        """A DMA's RAM_TYPE: 1 the memory controller (primary MEMIF, DRAM), 0 the CV SRAM (secondary MEMIF);
        a program that never writes it reads the primary memory, as every nv_small test does."""
        return Memory.SRAM if self.written(reg) and self.f(reg, "RAM_TYPE") == 0 else Memory.DRAM


class RegisterWriter:
    """Writes a trace test's register lines (`reg_write(NVDLA_<UNIT>.<REG>, value)`), fields packed by name."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.units: dict[str, None] = {}  # units written to, in order (for their S_POINTER)

    def line(self, text: str) -> None:
        self.lines.append(text)

    def reg(self, unit: str, reg: str, **fields: int) -> None:
        self.units[unit] = None
        self.line(f"reg_write(NVDLA_{unit}.{reg}, 0x{pack('NVDLA_' + unit, reg, **fields):x});")

    def addr(self, unit: str, low: str, high: str, value: int) -> None:
        self.reg(unit, low, ADDR=value & 0xFFFFFFFF)
        self.reg(unit, high, ADDR=value >> 32)

    def surface(self, unit: str, side: str, surf: Surface) -> None:
        """D_<side>_BASE_ADDR_LOW/HIGH, D_<side>_LINE_STRIDE and D_<side>_SURFACE_STRIDE of a unit."""
        self.addr(unit, f"D_{side}_BASE_ADDR_LOW_0", f"D_{side}_BASE_ADDR_HIGH_0", surf.addr)
        self.reg(unit, f"D_{side}_LINE_STRIDE_0", STRIDE=surf.line_stride)
        self.reg(unit, f"D_{side}_SURFACE_STRIDE_0", STRIDE=surf.surface_stride)

    def cube(self, unit: str, w: int, h: int, c: int, suffix: str = "") -> None:
        """D_DATA_CUBE_<suffix>WIDTH/HEIGHT/CHANNEL (minus-one encoded)."""
        self.reg(unit, f"D_DATA_CUBE_{suffix}WIDTH_0", WIDTH=w - 1)
        self.reg(unit, f"D_DATA_CUBE_{suffix}HEIGHT_0", HEIGHT=h - 1)
        self.reg(unit, f"D_DATA_CUBE_{suffix}CHANNEL_0", CHANNEL=c - 1)


@dataclass(frozen=True)
class ProgramLuts:
    """The LUT tables and registers a program's operations use, by the unit that holds them (CDP's and
    SDP's: processors.lut.decode_lut)."""

    cdp: LutParams | None = None
    sdp: LutParams | None = None


@dataclass
class ExecState:
    """What a program's bit-exact execution carries from one operation to the next."""

    mem: SparseMemory
    hw: HwConfig
    luts: ProgramLuts = ProgramLuts()
    flying: np.ndarray | None = None  # an output handed on the fly to the next operation (SDP -> PDP)
    kept_data: np.ndarray | None = None  # input the last convolution left in CBUF (SKIP_DATA_RLS)
    kept_weights: np.ndarray | None = None  # weights it left there (SKIP_WEIGHT_RLS)


@dataclass(frozen=True)
class Emitted:
    """What writing an operation's registers leaves to the program: the units to enable, in the order the
    driver enables them (the last unit of the pipeline first), and the interrupt that ends it."""

    enables: tuple[str, ...]
    interrupt: str  # GLB's done-interrupt name for register group 0 ("SDP_0")


class RegisterView(Protocol):
    """A processor's registers: decode, write, time and execute its operations."""

    kind: str  # the operation's name in descriptions and results ("conv", "sdp", ...)
    op_type: type  # the decoded operation: a frozen dataclass of register numbers
    starts_on: str  # the unit whose D_OP_ENABLE starts the operation ("NVDLA_CDMA")
    takes: tuple[str, ...]  # the enabled units its operation accounts for (a convolution takes SDP's pass)
    # the units one operation of the processor programs and enables, in the driver's enable order (the one
    # that starts it last); what a driver's sequence groups into one operation (program/sequence.py)
    units: tuple[str, ...]
    # GLB S_INTR_STATUS's done field of the processor, register group g's bit f"{done}{g}" ("SDP_DONE_STATUS")
    done: str
    # the register whose write of 1 to starts_on takes the operation's snapshot (BDMA: CFG_OP, queueing a
    # transfer; the others D_OP_ENABLE)
    enable_register: str
    # whether its two register groups are chosen by S_POINTER (BDMA's by the launch register instead)
    pointer_groups: bool
    # without pointer groups: (register, group) pairs whose write of 1 launches the operations queued since
    # the last launch as that group (BDMA's CFG_LAUNCH0/1)
    launch_registers: tuple[tuple[str, int], ...]

    def decode(self, snap: Snapshots, name: str) -> tuple:
        """The operations a layer's snapshot holds for this processor (with what it feeds on the fly)."""
        ...

    def emit(self, w: RegisterWriter, op, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        """Write the operation's registers (and its LUT's, `lut`)."""
        ...

    def hw_layer(self, op, name: str):
        """The model's hardware layer for the operation (nvdla_sim.layers)."""
        ...

    def timed_layer(self, op, hw: HwConfig, name: str) -> tuple[object, TilePlan | None]:
        """The layer the timing model runs for the operation, and its tiling plan where it has one."""
        ...

    def execute(self, op, st: ExecState, name: str) -> None:
        """Run the operation bit-exactly on st.mem."""
        ...

    def check(self, op, hw: HwConfig, name: str) -> None:
        """Refuse what the build lacks, as its RTL would."""
        ...

    def lut_unit(self, op) -> str | None:
        """The ProgramLuts field of the LUT the operation reads ("sdp", "cdp"), or None."""
        ...

    def feeds(self, op) -> bool:
        """Whether the operation hands its output on the fly to the next one."""
        ...

    def fed(self, op) -> bool:
        """Whether the operation takes its input on the fly from the previous one."""
        ...

    def chain_cycles(self, ops: list, hw: HwConfig, name: str) -> int | None:
        """A program of two or more of its operations run in sequence (ping-pong register groups), timed as
        one chain from the first op enable to the last interrupt; None where they are not timed so."""
        ...

    def fed_by(self, snap: Snapshots) -> str | None:
        """The kind of processor whose output this one's programmed registers take on the fly (an SDP
        pass on the fly takes the convolution's), or None: read from memory."""
        ...

    def hands_on(self, snap: Snapshots) -> bool:
        """Whether the programmed registers hand the output on the fly to the next processor (SDP to PDP)."""
        ...

    def cube(self, snap: Snapshots) -> tuple[int, int, int] | None:
        """(width, height, channels) of the cube the programmed registers hand on or take on the fly, or None
        where the processor does neither (a decoded driver's chain is checked by it)."""
        ...


class ViewDefaults:
    """What most register views share (a view overrides what differs): the hardware layer timed as it is,
    no build check, no LUT, nothing taken or handed on the fly."""

    enable_register = "D_OP_ENABLE_0"
    pointer_groups = True
    launch_registers: tuple[tuple[str, int], ...] = ()

    def timed_layer(self, op, hw: HwConfig, name: str) -> tuple[object, TilePlan | None]:
        return self.hw_layer(op, name), None

    def check(self, op, hw: HwConfig, name: str) -> None:
        return None

    def lut_unit(self, op) -> str | None:
        return None

    def feeds(self, op) -> bool:
        return False

    def fed(self, op) -> bool:
        return False

    def chain_cycles(self, ops: list, hw: HwConfig, name: str) -> int | None:
        return None

    def fed_by(self, snap: Snapshots) -> str | None:
        return None

    def hands_on(self, snap: Snapshots) -> bool:
        return False

    def cube(self, snap: Snapshots) -> tuple[int, int, int] | None:
        return None
