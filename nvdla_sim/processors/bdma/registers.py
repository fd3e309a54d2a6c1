"""BDMA's registers (NVDLA_BDMA.rdl, nv_full): one transfer, as the CFG_ registers hold it when a write of
CFG_OP.EN = 1 queues it (nvdla/sw kmd/firmware/bdma.c); CFG_LAUNCH0/1 start the queued transfers of a group.

Addresses and strides are byte values whose low 5 bits the registers drop (32-byte atoms): V32 and STRIDE
fields start at bit 5. A line is CFG_LINE.SIZE + 1 atoms, a surface CFG_LINE_REPEAT.NUMBER + 1 lines, a
transfer CFG_SURF_REPEAT.NUMBER + 1 surfaces; CFG_CMD's RAM types say which memory each side is in.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvdla_sim.layers import Memory
from nvdla_sim.processors.registers import RAM_MC, RegisterWriter, Snapshots, UnitRegisters
from nvdla_sim.units.memory_format import Surface

BDMA_ATOM_BYTES = 32  # the registers' address and stride granule


@dataclass(frozen=True)
class BdmaOp:
    """One BDMA transfer: `surfaces` surfaces of `lines` lines of `line_bytes`, from src to dst."""

    src: Surface
    dst: Surface
    line_bytes: int
    lines: int
    surfaces: int
    src_memory: Memory
    dst_memory: Memory

    @property
    def bytes(self) -> int:
        return self.line_bytes * self.lines * self.surfaces


def decode_bdma(snap: Snapshots) -> BdmaOp:
    r = UnitRegisters.of(snap, "NVDLA_BDMA")

    def addr(side: str) -> int:
        low = r.f(f"CFG_{side}_ADDR_LOW_0", "V32") * BDMA_ATOM_BYTES
        return (r.f(f"CFG_{side}_ADDR_HIGH_0", "V8") << 32) | low

    def surface(side: str) -> Surface:
        line, surf = (r.f(f"CFG_{side}_{what}_0", "STRIDE") * BDMA_ATOM_BYTES for what in ("LINE", "SURF"))
        return Surface(addr(side), line, surf)

    def memory(field: str) -> Memory:
        return Memory.DRAM if r.f("CFG_CMD_0", field) == RAM_MC else Memory.SRAM

    return BdmaOp(
        surface("SRC"),
        surface("DST"),
        (r.f("CFG_LINE_0", "SIZE") + 1) * BDMA_ATOM_BYTES,
        r.f("CFG_LINE_REPEAT_0", "NUMBER") + 1,
        r.f("CFG_SURF_REPEAT_0", "NUMBER") + 1,
        memory("SRC_RAM_TYPE"),
        memory("DST_RAM_TYPE"),
    )


def write_bdma(w: RegisterWriter, op: BdmaOp) -> None:
    """The transfer's CFG_ registers, then CFG_OP.EN (queue it) and CFG_LAUNCH0 (start group 0)."""
    for side, s in (("SRC", op.src), ("DST", op.dst)):
        w.reg("BDMA", f"CFG_{side}_ADDR_LOW_0", V32=(s.addr & 0xFFFFFFFF) // BDMA_ATOM_BYTES)
        w.reg("BDMA", f"CFG_{side}_ADDR_HIGH_0", V8=s.addr >> 32)
        w.reg("BDMA", f"CFG_{side}_LINE_0", STRIDE=s.line_stride // BDMA_ATOM_BYTES)
        w.reg("BDMA", f"CFG_{side}_SURF_0", STRIDE=s.surface_stride // BDMA_ATOM_BYTES)
    w.reg("BDMA", "CFG_LINE_0", SIZE=op.line_bytes // BDMA_ATOM_BYTES - 1)
    w.reg("BDMA", "CFG_LINE_REPEAT_0", NUMBER=op.lines - 1)
    w.reg("BDMA", "CFG_SURF_REPEAT_0", NUMBER=op.surfaces - 1)
    w.reg(
        "BDMA",
        "CFG_CMD_0",
        SRC_RAM_TYPE=int(op.src_memory is Memory.DRAM),
        DST_RAM_TYPE=int(op.dst_memory is Memory.DRAM),
    )
    w.reg("BDMA", "CFG_OP_0", EN=1)
    w.reg("BDMA", "CFG_LAUNCH0_0", GRP0_LAUNCH=1)
