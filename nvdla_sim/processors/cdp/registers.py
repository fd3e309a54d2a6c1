"""CDP's registers (NVDLA_CDP.rdl, NVDLA_CDP_RDMA.rdl): local response normalisation across channels, its LUT
in S_LUT_* (processors.lut)."""

from __future__ import annotations

from dataclasses import dataclass

from nvdla_sim.precision import Precision
from nvdla_sim.processors.lut import write_lut
from nvdla_sim.processors.registers import (
    PRECISION_CODES,
    RAM_MC,
    RegisterWriter,
    Snapshots,
    UnitRegisters,
    precision_of,
)
from nvdla_sim.registers.fields import signed
from nvdla_sim.units.lut import LutParams
from nvdla_sim.units.memory_format import Surface


@dataclass(frozen=True)
class CdpOp:
    """CDP (local response normalisation across channels) registers."""

    width: int
    height: int
    channels: int
    normalz_len: int  # 3, 5, 7 or 9
    sqsum_bypass: bool
    mul_bypass: bool
    datin_offset: int
    datin_scale: int
    datin_shift: int
    datout_offset: int
    datout_scale: int
    datout_shift: int
    src: Surface
    dst: Surface
    precision: Precision


def decode_cdp(name: str, snap: Snapshots) -> CdpOp:
    cdp, rdma = UnitRegisters.of(snap, "NVDLA_CDP"), UnitRegisters.of(snap, "NVDLA_CDP_RDMA")
    return CdpOp(
        width=rdma.f("D_DATA_CUBE_WIDTH_0", "WIDTH") + 1,
        height=rdma.f("D_DATA_CUBE_HEIGHT_0", "HEIGHT") + 1,
        channels=rdma.f("D_DATA_CUBE_CHANNEL_0", "CHANNEL") + 1,
        normalz_len=3 + 2 * cdp.f("D_LRN_CFG_0", "NORMALZ_LEN"),
        sqsum_bypass=bool(cdp.f("D_FUNC_BYPASS_0", "SQSUM_BYPASS")),
        mul_bypass=bool(cdp.f("D_FUNC_BYPASS_0", "MUL_BYPASS")),
        datin_offset=cdp.f("D_DATIN_OFFSET_0", "OFFSET"),
        datin_scale=cdp.f("D_DATIN_SCALE_0", "SCALE"),
        datin_shift=cdp.f("D_DATIN_SHIFTER_0", "SHIFT"),
        datout_offset=signed(cdp.f("D_DATOUT_OFFSET_0", "OFFSET"), 32),
        datout_scale=cdp.f("D_DATOUT_SCALE_0", "SCALE"),
        datout_shift=cdp.f("D_DATOUT_SHIFTER_0", "SHIFT"),
        src=rdma.surface("SRC"),
        dst=cdp.surface("DST"),
        precision=precision_of(rdma.f("D_DATA_FORMAT_0", "INPUT_DATA"), "CDP_RDMA.D_DATA_FORMAT_0.INPUT_DATA"),
    )


def write_cdp(b: RegisterWriter, op: CdpOp, lut: LutParams) -> None:
    p = PRECISION_CODES[op.precision]
    write_lut(b, "CDP", lut)
    b.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH_0", WIDTH=op.width - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT_0", HEIGHT=op.height - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL_0", CHANNEL=op.channels - 1)
    b.surface("CDP_RDMA", "SRC", op.src)
    b.reg("CDP_RDMA", "D_SRC_DMA_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("CDP_RDMA", "D_DATA_FORMAT_0", INPUT_DATA=p)
    b.reg("CDP", "D_FUNC_BYPASS_0", SQSUM_BYPASS=int(op.sqsum_bypass), MUL_BYPASS=int(op.mul_bypass))
    b.surface("CDP", "DST", op.dst)
    b.reg("CDP", "D_DST_DMA_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("CDP", "D_DATA_FORMAT_0", INPUT_DATA=p)
    b.reg("CDP", "D_LRN_CFG_0", NORMALZ_LEN=(op.normalz_len - 3) // 2)
    b.reg("CDP", "D_DATIN_OFFSET_0", OFFSET=op.datin_offset & 0xFFFF)
    b.reg("CDP", "D_DATIN_SCALE_0", SCALE=op.datin_scale & 0xFFFF)
    b.reg("CDP", "D_DATIN_SHIFTER_0", SHIFT=op.datin_shift)
    b.reg("CDP", "D_DATOUT_OFFSET_0", OFFSET=op.datout_offset & 0xFFFFFFFF)
    b.reg("CDP", "D_DATOUT_SCALE_0", SCALE=op.datout_scale & 0xFFFF)
    b.reg("CDP", "D_DATOUT_SHIFTER_0", SHIFT=op.datout_shift)
