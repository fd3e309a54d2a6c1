"""PDP's registers (NVDLA_PDP.rdl, NVDLA_PDP_RDMA.rdl): a pooling pass, offline (PDP_RDMA reads the cube) or
on the fly behind SDP."""

from __future__ import annotations

from dataclasses import dataclass

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import Memory, PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors.registers import (
    PRECISION_CODES,
    RAM_MC,
    RegisterWriter,
    Snapshots,
    UnitRegisters,
    precision_of,
)
from nvdla_sim.units.memory_format import Surface

_POOL_METHOD = {0: PoolMode.AVG, 1: PoolMode.MAX, 2: PoolMode.MIN}  # D_OPERATION_MODE_CFG_0.POOLING_METHOD
_METHOD_CODE = {m: code for code, m in _POOL_METHOD.items()}


@dataclass(frozen=True)
class PdpOp:
    """PDP registers: pooling window, padding values, split mode, source and destination."""

    OMITTED_AT_DEFAULT = ("src_memory", "dst_memory")  # rows recorded before RAM_TYPE was decoded lack them

    in_w: int
    in_h: int
    channels: int
    out_w: int
    out_h: int
    method: PoolMode
    kernel_w: int
    kernel_h: int
    stride_x: int
    stride_y: int
    pad_left: int
    pad_right: int
    pad_top: int
    pad_bottom: int
    pad_values: tuple[int, ...]
    recip_w: int
    recip_h: int
    split_num: int
    partial_in: tuple[int, int, int]  # first, mid, last input widths (split mode)
    partial_out: tuple[int, int, int]
    flying: bool
    src: Surface | None
    dst: Surface
    precision: Precision
    src_memory: Memory = Memory.DRAM  # PDP_RDMA.D_SRC_RAM_CFG_0.RAM_TYPE
    dst_memory: Memory = Memory.DRAM  # PDP.D_DST_RAM_CFG_0.RAM_TYPE


def decode_pdp(name: str, snap: Snapshots, *, flying: bool) -> PdpOp:
    """A pooling pass from PDP's (and, offline, PDP_RDMA's) registers."""
    pdp, rdma = UnitRegisters.of(snap, "NVDLA_PDP"), UnitRegisters.of(snap, "NVDLA_PDP_RDMA")
    method = _POOL_METHOD.get(pdp.f("D_OPERATION_MODE_CFG_0", "METHOD"))
    if method is None:
        raise TraceError(f"{name}: PDP.D_OPERATION_MODE_CFG_0.POOLING_METHOD must be 0 (average), 1 (max) or 2 (min)")
    k = "D_POOLING_KERNEL_CFG_0"
    p = "D_POOLING_PADDING_CFG_0"
    piw, pow_ = "D_PARTIAL_WIDTH_IN_0", "D_PARTIAL_WIDTH_OUT_0"
    return PdpOp(
        in_w=pdp.f("D_DATA_CUBE_IN_WIDTH_0", "WIDTH") + 1,
        in_h=pdp.f("D_DATA_CUBE_IN_HEIGHT_0", "HEIGHT") + 1,
        channels=pdp.f("D_DATA_CUBE_IN_CHANNEL_0", "CHANNEL") + 1,
        out_w=pdp.f("D_DATA_CUBE_OUT_WIDTH_0", "WIDTH") + 1,
        out_h=pdp.f("D_DATA_CUBE_OUT_HEIGHT_0", "HEIGHT") + 1,
        method=method,
        kernel_w=pdp.f(k, "KERNEL_WIDTH") + 1,
        kernel_h=pdp.f(k, "KERNEL_HEIGHT") + 1,
        stride_x=pdp.f(k, "STRIDE_WIDTH") + 1,
        stride_y=pdp.f(k, "STRIDE_HEIGHT") + 1,
        pad_left=pdp.f(p, "LEFT"),
        pad_right=pdp.f(p, "RIGHT"),
        pad_top=pdp.f(p, "TOP"),
        pad_bottom=pdp.f(p, "BOTTOM"),
        pad_values=tuple(pdp.f(f"D_POOLING_PADDING_VALUE_{i}_CFG_0", "VALUE") for i in range(1, 8)),
        recip_w=pdp.f("D_RECIP_KERNEL_WIDTH_0", "RECIP"),
        recip_h=pdp.f("D_RECIP_KERNEL_HEIGHT_0", "RECIP"),
        split_num=pdp.f("D_OPERATION_MODE_CFG_0", "SPLIT_NUM") + 1,
        partial_in=(pdp.f(piw, "FIRST"), pdp.f(piw, "MID"), pdp.f(piw, "LAST")),
        partial_out=(pdp.f(pow_, "FIRST"), pdp.f(pow_, "MID"), pdp.f(pow_, "LAST")),
        flying=flying,
        src=None if flying else rdma.surface("SRC"),
        dst=pdp.surface("DST"),
        precision=precision_of(pdp.f("D_DATA_FORMAT_0", "INPUT_DATA"), "PDP.D_DATA_FORMAT_0.INPUT_DATA"),
        src_memory=Memory.DRAM if flying else rdma.ram("D_SRC_RAM_CFG_0"),
        dst_memory=pdp.ram("D_DST_RAM_CFG_0"),
    )


def write_pdp(b: RegisterWriter, op: PdpOp) -> None:
    """PDP's registers, and PDP_RDMA's for an offline pass."""
    p = PRECISION_CODES[op.precision]
    if not op.flying:
        b.cube("PDP_RDMA", op.in_w, op.in_h, op.channels, suffix="IN_")
        b.reg("PDP_RDMA", "D_FLYING_MODE_0", OFF_FLYING=1)
        b.surface("PDP_RDMA", "SRC", op.src)
        b.reg("PDP_RDMA", "D_SRC_RAM_CFG_0", RAM_TYPE=RAM_MC)
        b.reg("PDP_RDMA", "D_DATA_FORMAT_0", INPUT_DATA=p)
        b.reg("PDP_RDMA", "D_OPERATION_MODE_CFG_0", SPLIT_NUM=op.split_num - 1)
        b.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG_0", KERNEL_WIDTH=op.kernel_w - 1, STRIDE_WIDTH=op.stride_x - 1)
        b.reg("PDP_RDMA", "D_POOLING_PADDING_CFG_0", PAD_WIDTH=op.pad_left)
        first, mid, last = op.partial_in
        b.reg("PDP_RDMA", "D_PARTIAL_WIDTH_IN_0", FIRST=first, MID=mid, LAST=last)
        b.surface("PDP", "SRC", op.src)
    b.cube("PDP", op.in_w, op.in_h, op.channels, suffix="IN_")
    b.reg("PDP", "D_DATA_CUBE_OUT_WIDTH_0", WIDTH=op.out_w - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT_0", HEIGHT=op.out_h - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL_0", CHANNEL=op.channels - 1)
    b.reg(
        "PDP",
        "D_OPERATION_MODE_CFG_0",
        METHOD=_METHOD_CODE[op.method],
        OFF_FLYING=int(not op.flying),
        SPLIT_NUM=op.split_num - 1,
    )
    first, mid, last = op.partial_in
    b.reg("PDP", "D_PARTIAL_WIDTH_IN_0", FIRST=first, MID=mid, LAST=last)
    first, mid, last = op.partial_out
    b.reg("PDP", "D_PARTIAL_WIDTH_OUT_0", FIRST=first, MID=mid, LAST=last)
    b.reg(
        "PDP",
        "D_POOLING_KERNEL_CFG_0",
        KERNEL_WIDTH=op.kernel_w - 1,
        KERNEL_HEIGHT=op.kernel_h - 1,
        STRIDE_WIDTH=op.stride_x - 1,
        STRIDE_HEIGHT=op.stride_y - 1,
    )
    b.reg("PDP", "D_RECIP_KERNEL_WIDTH_0", RECIP=op.recip_w)
    b.reg("PDP", "D_RECIP_KERNEL_HEIGHT_0", RECIP=op.recip_h)
    b.reg("PDP", "D_POOLING_PADDING_CFG_0", LEFT=op.pad_left, TOP=op.pad_top, RIGHT=op.pad_right, BOTTOM=op.pad_bottom)
    for i, v in enumerate(op.pad_values, 1):
        b.reg("PDP", f"D_POOLING_PADDING_VALUE_{i}_CFG_0", VALUE=v & 0x7FFFF)
    b.surface("PDP", "DST", op.dst)
    b.reg("PDP", "D_DST_RAM_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("PDP", "D_DATA_FORMAT_0", INPUT_DATA=p)


def pool_spec(op: PdpOp) -> PoolSpec:
    """The timing view of a pooling pass's window."""
    return PoolSpec(
        mode=op.method,
        kernel_w=op.kernel_w,
        kernel_h=op.kernel_h,
        stride_x=op.stride_x,
        stride_y=op.stride_y,
        pad_left=op.pad_left,
        pad_right=op.pad_right,
        pad_top=op.pad_top,
        pad_bottom=op.pad_bottom,
    )
