"""Rubik's registers (NVDLA_RBK, nv_full: nvdla/hw nvdlav1 cmod/include/arnvdla.h; nvdla/sw
kmd/firmware/include/opendla_initial.h): one reshape, as its producer group holds it at D_OP_ENABLE.

Addresses and strides are byte values whose low 5 bits the registers drop (32-byte atoms: the [31:5] fields);
sizes are stored minus one. D_MISC_CFG says the mode (0 contract, 1 split, 2 merge) and the element's
precision (0 INT8, 1 INT16, 2 FP16: Rubik moves bytes, so FP16 is INT16's two bytes).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.processors.registers import PRECISION_CODES, RegisterWriter, Snapshots, UnitRegisters, precision_of

RBK_ATOM_BYTES = 32  # the registers' address and stride granule, and Rubik's data atom (nv_full)
MAX_OUTPUT = 8192  # a contract's output width and height (the RTL's 13-bit write size; the unit's 8192 limit)


class RubikMode(enum.Enum):
    """D_MISC_CFG.RUBIK_MODE."""

    CONTRACT = 0  # a deconvolution's output: each group of sx * sy channel blocks spread over sx x sy pixels
    SPLIT = 1  # a feature cube into one plane per channel
    MERGE = 2  # one plane per channel into a feature cube


@dataclass(frozen=True)
class RubikPlane:
    """One side of a reshape in memory: its byte address and line, surface and planar strides (each the
    register's value; a stride a mode does not read is whatever the register held)."""

    addr: int
    line_stride: int
    surface_stride: int
    planar_stride: int
    memory: Memory


@dataclass(frozen=True)
class RubikOp:
    """One Rubik operation's registers."""

    mode: RubikMode
    precision: Precision
    width: int  # DATAIN_WIDTH + 1
    height: int  # DATAIN_HEIGHT + 1
    in_channels: int  # DATAIN_CHANNEL + 1
    out_channels: int  # DATAOUT_CHANNEL + 1
    src: RubikPlane
    dst: RubikPlane
    contract_stride_0: int  # contract: bytes between the input's channel groups of one output pixel offset
    contract_stride_1: int  # contract: the output's stride of a line of sy output lines (the C model's)
    stride_x: int  # DECONV_X_STRIDE + 1
    stride_y: int  # DECONV_Y_STRIDE + 1

    @property
    def element_bytes(self) -> int:
        return 1 if self.precision is Precision.INT8 else 2

    @property
    def atom_elements(self) -> int:
        return RBK_ATOM_BYTES // self.element_bytes


def _memory(r: UnitRegisters, reg: str, name: str) -> Memory:
    return Memory.DRAM if r.f(reg, name) == 1 else Memory.SRAM  # 1 MCIF (the DRAM port), 0 CVIF (SRAM)


def _plane(r: UnitRegisters, side: str, ram: str, ram_field: str) -> RubikPlane:
    def stride(what: str) -> int:
        reg = f"D_{side}_{what}_STRIDE_0"
        return r.f(reg, f"{side}_{what}_STRIDE") * RBK_ATOM_BYTES

    low = r.f(f"D_{side}_ADDR_LOW_0", f"{side}_ADDR_LOW") * RBK_ATOM_BYTES
    high = r.f(f"D_{side}_ADDR_HIGH_0", f"{side}_ADDR_HIGH")
    return RubikPlane((high << 32) | low, stride("LINE"), stride("SURF"), stride("PLANAR"), _memory(r, ram, ram_field))


def decode_rubik(name: str, snap: Snapshots) -> RubikOp:
    """The operation the registers hold. Where NVIDIA's C model and RTL read different registers for the same
    thing (the channel count of a split or merge; a contract's input group stride and output line stride),
    the program must give both the same value, as the firmware does; otherwise it is refused, not guessed;
    so is a contract whose output the RTL would truncate."""
    r = UnitRegisters.of(snap, "NVDLA_RBK")
    code = r.f("D_MISC_CFG_0", "RUBIK_MODE")
    if code not in RubikMode._value2member_map_:
        raise TraceError(f"{name}: RBK.D_MISC_CFG_0.RUBIK_MODE = {code}: 0 contract, 1 split or 2 merge")
    op = RubikOp(
        mode=RubikMode(code),
        precision=precision_of(r.f("D_MISC_CFG_0", "IN_PRECISION"), "RBK.D_MISC_CFG_0.IN_PRECISION"),
        width=r.f("D_DATAIN_SIZE_0_0", "DATAIN_WIDTH") + 1,
        height=r.f("D_DATAIN_SIZE_0_0", "DATAIN_HEIGHT") + 1,
        in_channels=r.f("D_DATAIN_SIZE_1_0", "DATAIN_CHANNEL") + 1,
        out_channels=r.f("D_DATAOUT_SIZE_1_0", "DATAOUT_CHANNEL") + 1,
        src=_plane(r, "DAIN", "D_DAIN_RAM_TYPE_0", "DATAIN_RAM_TYPE"),
        dst=_plane(r, "DAOUT", "D_DAOUT_RAM_TYPE_0", "DATAOUT_RAM_TYPE"),
        contract_stride_0=r.f("D_CONTRACT_STRIDE_0_0", "CONTRACT_STRIDE_0") * RBK_ATOM_BYTES,
        contract_stride_1=r.f("D_CONTRACT_STRIDE_1_0", "CONTRACT_STRIDE_1") * RBK_ATOM_BYTES,
        stride_x=r.f("D_DECONV_STRIDE_0", "DECONV_X_STRIDE") + 1,
        stride_y=r.f("D_DECONV_STRIDE_0", "DECONV_Y_STRIDE") + 1,
    )
    if op.mode is not RubikMode.CONTRACT and op.in_channels != op.out_channels:
        raise TraceError(
            f"{name}: a Rubik {op.mode.name.lower()} with DATAIN_CHANNEL {op.in_channels - 1} and DATAOUT_CHANNEL "
            f"{op.out_channels - 1}: NVIDIA's C model reads one and its RTL the other; program them equal"
        )
    groups = -(-op.out_channels * op.element_bytes // RBK_ATOM_BYTES) * op.src.surface_stride
    if op.mode is RubikMode.CONTRACT and op.contract_stride_0 != groups:
        raise TraceError(
            f"{name}: a Rubik contract with CONTRACT_STRIDE_0 {op.contract_stride_0} bytes, not the output's "
            f"surfaces x DAIN_SURF_STRIDE ({groups}): the RTL steps the input's channel groups by CONTRACT_STRIDE_0 "
            "and the C model by that product, which then disagree"
        )
    if op.mode is RubikMode.CONTRACT and max(op.width * op.stride_x, op.height * op.stride_y) > MAX_OUTPUT:
        raise TraceError(
            f"{name}: a Rubik contract to {op.width * op.stride_x} x {op.height * op.stride_y} pixels: past "
            f"{MAX_OUTPUT} the RTL's 13-bit write size truncates an output line the C model writes whole"
        )
    if op.mode is RubikMode.CONTRACT and op.contract_stride_1 != op.stride_y * op.dst.line_stride:
        raise TraceError(
            f"{name}: a Rubik contract with CONTRACT_STRIDE_1 {op.contract_stride_1} bytes, not DECONV_Y_STRIDE + 1 "
            f"({op.stride_y}) x DAOUT_LINE_STRIDE ({op.dst.line_stride}): the RTL steps output lines by the line "
            "stride and the C model by CONTRACT_STRIDE_1, which then disagree"
        )
    return op


def write_rubik(w: RegisterWriter, op: RubikOp) -> None:
    """The operation's registers, in the order NVIDIA's firmware writes them (rubik.c processor_rubik_program)."""
    w.reg("RBK", "D_MISC_CFG_0", RUBIK_MODE=op.mode.value, IN_PRECISION=PRECISION_CODES[op.precision])
    w.reg("RBK", "D_DAIN_RAM_TYPE_0", DATAIN_RAM_TYPE=int(op.src.memory is Memory.DRAM))
    w.reg("RBK", "D_DATAIN_SIZE_0_0", DATAIN_WIDTH=op.width - 1, DATAIN_HEIGHT=op.height - 1)
    w.reg("RBK", "D_DATAIN_SIZE_1_0", DATAIN_CHANNEL=op.in_channels - 1)
    for side, p in (("DAIN", op.src), ("DAOUT", op.dst)):
        w.reg("RBK", f"D_{side}_ADDR_LOW_0", **{f"{side}_ADDR_LOW": (p.addr & 0xFFFFFFFF) // RBK_ATOM_BYTES})
        w.reg("RBK", f"D_{side}_ADDR_HIGH_0", **{f"{side}_ADDR_HIGH": p.addr >> 32})
        for what, value in (("LINE", p.line_stride), ("SURF", p.surface_stride), ("PLANAR", p.planar_stride)):
            w.reg("RBK", f"D_{side}_{what}_STRIDE_0", **{f"{side}_{what}_STRIDE": value // RBK_ATOM_BYTES})
    w.reg("RBK", "D_DAOUT_RAM_TYPE_0", DATAOUT_RAM_TYPE=int(op.dst.memory is Memory.DRAM))
    w.reg("RBK", "D_DATAOUT_SIZE_1_0", DATAOUT_CHANNEL=op.out_channels - 1)
    w.reg("RBK", "D_CONTRACT_STRIDE_0_0", CONTRACT_STRIDE_0=op.contract_stride_0 // RBK_ATOM_BYTES)
    w.reg("RBK", "D_CONTRACT_STRIDE_1_0", CONTRACT_STRIDE_1=op.contract_stride_1 // RBK_ATOM_BYTES)
    w.reg("RBK", "D_DECONV_STRIDE_0", DECONV_X_STRIDE=op.stride_x - 1, DECONV_Y_STRIDE=op.stride_y - 1)
