"""What every processor's firmware programming shares: the register writer, where the loadable's memories
sit, the checks the firmware makes of a descriptor, and the interface each processor's module implements
(nvdla/sw kmd/firmware dla_engine_internal.h `struct dla_processor`: its program, enable, rdma_check,
is_ready and set_producer functions)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nvdla_sim.program.loadable.container import Loadable, LoadableError, TaskEntry
from nvdla_sim.program.loadable.descriptors import DataCube, Event, MemType, OpType, Precision
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation
from nvdla_sim.registers.fields import FIELDS
from nvdla_sim.registers.trace_io import Command, RegRead, RegWrite

WORD = 0xFFFFFFFF


@dataclass(frozen=True)
class MemoryLayout:
    """Where each of the loadable's memories sits in the NVDLA's address space (the IOVA the KMD gives
    it), and the task's address list resolved through it (dla_get_dma_address)."""

    loadable: Loadable
    task: TaskEntry  # the task whose address list `address` reads by default (the DLA task)
    bases: dict[int, int]  # memory id -> base address

    def address(self, index: int, task: TaskEntry | None = None) -> int:
        """Address list entry `index` of the DLA task, or of `task` (the firmware's dla_get_dma_address;
        the emulator's addressList[index])."""
        task = task or self.task
        if not 0 <= index < len(task.address_list):
            raise LoadableError(
                f"{self.loadable.path}: task {task.id}'s address list entry {index} is out of range (the task "
                f"has {len(task.address_list)})"
            )
        entry = self.loadable.address(task.address_list[index])
        if entry.mem_id not in self.bases:
            raise LoadableError(
                f"{self.loadable.path}: address entry {entry.id} is in memory {entry.mem_id}, which the loadable lacks"
            )
        return self.bases[entry.mem_id] + entry.offset

    def cube(self, cube: DataCube) -> int:
        """A data cube's address: its address entry plus its own offset (dla_get_dma_cube_address)."""
        return self.address(cube.address) + cube.offset


def memory_layout(loadable: Loadable, task: TaskEntry, base: int = 0x8000_0000, align: int = 0x1000) -> MemoryLayout:
    """Each memory at the next `align`ed address from `base` (its own alignment where larger), in id order."""
    bases, at = {}, base
    for m in loadable.memories:
        a = max(align, m.alignment or 1)
        at = -(-at // a) * a
        bases[m.id] = at
        at += m.size
    return MemoryLayout(loadable, task, bases)


# ---- the register writer ----------------------------------------------------------------------------


class Csb:
    """The firmware's register accesses, as a driver log's commands (units and registers named as the
    register table names them: NVDLA_<UNIT>, <REG>_0)."""

    def __init__(self) -> None:
        self.commands: list[Command] = []

    def write(self, unit: str, reg: str, value: int) -> int:
        self.commands.append(RegWrite(f"NVDLA_{unit}", f"{reg}_0", value & WORD, len(self.commands) + 1))
        return len(self.commands) - 1

    def read(self, unit: str, reg: str, value: int) -> None:
        self.commands.append(RegRead(f"NVDLA_{unit}", f"{reg}_0", value & WORD, WORD, len(self.commands) + 1))

    def fields(self, unit: str, reg: str, **values: int) -> None:
        """A register written as the firmware composes it: each value shifted to its field and OR-ed, not
        masked (C's `(v << SHIFT(...)) | ...`; a field the firmware masks is given masked)."""
        spec = FIELDS.get((f"NVDLA_{unit}", f"{reg}_0"))
        if spec is None:
            raise KeyError(f"internal: no register NVDLA_{unit}.{reg}_0 in the register table")
        word = 0
        for name, v in values.items():
            if name not in spec:
                raise KeyError(f"internal: NVDLA_{unit}.{reg}_0 has no field {name}; fields: {', '.join(spec)}")
            word |= (v & WORD) << spec[name][1]
        self.write(unit, reg, word)

    def address(self, unit: str, low: str, high: str, value: int) -> None:
        self.write(unit, low, value & WORD)
        self.write(unit, high, value >> 32)


def masked(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


# dla_data_cube.type -> the RAM_TYPE field (MC 1, CV 0; the firmware indexes past its 2-entry table for an
# on-the-fly cube, whose RAM type the hardware never reads: written as MC here)
def ram(cube: DataCube) -> int:
    return 0 if cube.type == MemType.CV else 1


FEATURE = 36  # dla_interface.h FORMAT_FEATURE: conv data_format of feature data (below it: image formats)
BYPASS = {True: 0, False: 1}  # map_bypass: a stage used is "bypass NO" (0)


def check(ok: bool, net: DlaNetwork, op: DlaOperation, what: str) -> None:
    if not ok:
        raise LoadableError(f"{net.loadable.path}: {op.name}: {what}")


def check_layout(net: DlaNetwork, op: DlaOperation, cube: DataCube, precision: int, atom: int, what: str) -> None:
    """A feature cube in memory laid out for this build's atom (doc/hw/format.rst: atoms of `atom` bytes
    holding consecutive channels, lines of atoms, surfaces of lines): each line holds its pixels' atoms and
    the cube's size holds its surfaces. The firmware checks only alignment; a loadable compiled for another
    atom size (nv_small's 8 bytes, nv_full's 32) fails here instead of computing on misread data."""
    check(precision in Precision._value2member_map_, net, op, f"{what} precision {precision}: 0 int8, 1 int16, 2 fp16")
    check(
        cube.type in MemType._value2member_map_,
        net,
        op,
        f"{what} memory type {cube.type}: 0 DRAM, 1 SRAM, 2 on the fly",
    )
    check(max(cube.width, cube.height, cube.channel) <= 8192, net, op, f"{what} {cube.whc} is past 8192 in a dimension")
    if cube.type == MemType.HW or cube.address < 0 or not cube.width:
        return
    per_atom = atom // (1 if precision == Precision.INT8 else 2)
    surfaces = -(-cube.channel // per_atom)
    extent = (surfaces - 1) * cube.surf_stride + (cube.height - 1) * cube.line_stride + cube.width * atom
    if cube.line_stride < cube.width * atom or (cube.size and extent > cube.size):
        raise LoadableError(
            f"{net.loadable.path}: {op.name}'s {what} {cube.whc} ({Precision(precision).name.lower()}, line stride "
            f"{cube.line_stride}, surface stride {cube.surf_stride}, {cube.size} bytes) does not hold its data in "
            f"this build's {atom}-byte atoms: a loadable compiled for another build?"
        )


@dataclass(frozen=True)
class Target:
    """What a processor's programming reads besides its operation: the network, where its memories are,
    and the build's atom (engine->config_data->atom_size)."""

    net: DlaNetwork
    mem: MemoryLayout
    atom: int


class Mask(enum.Enum):
    """When a processor's dla_*_program clears its done bits in GLB S_INTR_MASK (dla_enable_intr)."""

    NEVER = "never"  # conv.c: CACC's done interrupt is left as it is
    BEFORE = "before"  # sdp.c, pdp.c, cdp.c, rubik.c: before the registers
    AFTER = "after"  # bdma.c: after the transfers' slots


class FirmwareProcessor:
    """One processor as the firmware drives it (struct dla_processor). The defaults are the stream
    processors' (SDP, PDP, CDP): a unit and its RDMA, each with a producer pointer, enabled reader first."""

    kind: OpType
    units: tuple[str, ...] = ()  # producer pointer and op enable, in the firmware's order; units[0]'s pointer is read
    rdma: str | None = None  # the reader with its own pointer and group
    done: str = ""  # its GLB S_INTR_STATUS done field, without the group digit
    mask: Mask = Mask.BEFORE
    # interrupts an operation raises before its done bit, each a status field (without the group digit) and the
    # event the firmware signals with it (engine_isr.c: CDMA's data and weight done for a convolution)
    early: tuple[tuple[str, Event], ...] = ()

    def early_bits(self, group: int) -> int:
        status = FIELDS[("NVDLA_GLB", "S_INTR_STATUS_0")]
        return sum(1 << status[f"{name}{group}"][1] for name, _ in self.early)

    def masks(self, op: DlaOperation) -> Mask:
        """When this operation's programming clears the done bits' interrupt mask."""
        return self.mask

    def done_bit(self, group: int) -> int:
        return 1 << FIELDS[("NVDLA_GLB", "S_INTR_STATUS_0")][f"{self.done}{group}"][1]

    def rdma_needed(self, op: DlaOperation) -> bool:
        """dla_*_rdma_check: whether the operation reads memory through the RDMA."""
        return self.rdma is not None

    def lut_index(self, op: DlaOperation) -> int:
        """The LUT the operation uses (-1: none); SDP and CDP share one LUT between their two groups."""
        return -1

    def read_pointers(self, csb: Csb, consumer: int, rdma_consumer: int) -> None:
        """engine.c utils_get_free_group: the hardware's consumer pointers, read from S_POINTER [16]."""
        csb.read(self.units[0], "S_POINTER", consumer << 16)
        if self.rdma is not None:
            csb.read(self.rdma, "S_POINTER", rdma_consumer << 16)

    def ready(self, op: DlaOperation, other_taken: bool, other_active: bool, other_lut: int) -> bool:
        """dla_*_is_ready: a LUT different from the other group's waits until that group is done with it."""
        lut = self.lut_index(op)
        return lut == -1 or other_lut == lut or (other_lut == -1 and not other_active)

    def set_producer(self, csb: Csb, group: int, rdma_group: int) -> None:
        for unit in self.units:
            csb.write(unit, "S_POINTER", group)
        if self.rdma is not None:
            csb.write(self.rdma, "S_POINTER", rdma_group)

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        """dla_*_program: the operation's registers into the producer group."""
        raise NotImplementedError

    def enable(self, csb: Csb, op: DlaOperation, group: int, rdma_needed: bool) -> int | None:
        """dla_*_enable: the op enables, reader first; the command index of the one that starts the operation
        (None: nothing to run, completed at once)."""
        if rdma_needed:
            csb.write(self.rdma, "D_OP_ENABLE", 1)
        return csb.write(self.units[-1], "D_OP_ENABLE", 1)
