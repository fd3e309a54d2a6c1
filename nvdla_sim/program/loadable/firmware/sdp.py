"""The firmware's SDP (nvdla/sw kmd/firmware sdp.c): SDP_RDMA's readers for the offline input and the
X1, X2 and Y operands, the three stages' ALU, multiplier and activation, the LUT and the output convertor."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import Activation, MemType, OpType, Precision, SdpOperandMode, SdpOpKind
from nvdla_sim.program.loadable.firmware.base import (
    BYPASS,
    WORD,
    Csb,
    FirmwareProcessor,
    MemoryLayout,
    Target,
    check,
    check_layout,
    ram,
)
from nvdla_sim.program.loadable.firmware.lut import network_lut, update_lut
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation


def _rdma_stage(stage) -> bool:
    """Whether an SDP stage reads its operand through SDP_RDMA (sdp.c: enabled, an operation, not per layer)."""
    return bool(stage.enable and stage.type != SdpOpKind.NONE and stage.mode != SdpOperandMode.PER_LAYER)


# sdp.c maps, indexed by the descriptor's value
_DATA_USE = {SdpOpKind.NONE: 0, SdpOpKind.MUL: 0, SdpOpKind.ADD: 1, SdpOpKind.BOTH: 2}  # map_op_type
_DATA_MODE = {SdpOperandMode.PER_LAYER: 1, SdpOperandMode.PER_KERNEL: 0, SdpOperandMode.PER_POINT: 1}  # map_op_mode
# map_proc_precision[dst][src]
_PROC = ((0, 0, 2), (0, 1, 2), (0, 1, 2))


def _sdp_rdma_needed(op: DlaOperation) -> bool:
    """sdp.c dla_sdp_rdma_check: offline, or a stage reading memory (enabled, not per layer)."""
    s, o = op.surface, op.op
    fly = s.src_data.type == MemType.HW
    reads = any(x.enable and x.mode != SdpOperandMode.PER_LAYER for x in (o.x1_op, o.x2_op, o.y_op))
    return not fly or reads


def _program_sdp(csb: Csb, net: DlaNetwork, mem: MemoryLayout, op: DlaOperation, rdma_needed: bool, atom: int) -> None:
    """sdp.c processor_sdp_program (its dla_enable_intr is the caller's)."""
    o, s = op.op, op.surface
    fly = s.src_data.type == MemType.HW
    out_dma = s.dst_data.type != MemType.HW
    check_layout(net, op, s.src_data, o.src_precision, atom, "input")
    check_layout(net, op, s.dst_data, o.dst_precision, atom, "output")
    for label, stage in (("x1", o.x1_op), ("x2", o.x2_op), ("y", o.y_op)):
        check(stage.type in SdpOpKind._value2member_map_ and stage.mode in SdpOperandMode._value2member_map_ and
              stage.precision < 3 and stage.alu_type < 4, net, op,
              f"{label} stage type {stage.type}, mode {stage.mode}, precision {stage.precision}, ALU {stage.alu_type}: "
              "not the firmware's (dla_interface.h SDP_OP_*, SDP_OP_PER_*, PRECISION_*, SDP_ALU_OP_*)")  # fmt: skip
    stages = (
        ("BRDMA", "BS", o.x1_op, s.x1_data),
        ("NRDMA", "BN", o.x2_op, s.x2_data),
        ("ERDMA", "EW", o.y_op, s.y_data),
    )
    reads = {name: _rdma_stage(stage) for name, _, stage, _ in stages}
    table = network_lut(net, op, o.lut_index) if o.lut_index >= 0 else None
    csb.fields("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=0)
    for name, _, _, _ in stages:  # map_ena[1]: DISABLE NO, rewritten below when SDP_RDMA runs
        csb.write("SDP_RDMA", f"D_{name}_CFG", 0)
    winograd = int(o.conv_mode == 1)
    proc = _PROC[o.dst_precision][o.src_precision]
    csb.fields("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=int(fly), WINOGRAD=winograd,
               IN_PRECISION=o.src_precision, OUT_PRECISION=o.dst_precision, PROC_PRECISION=proc,
               BATCH_NUMBER=o.batch_num - 1)  # fmt: skip
    if rdma_needed:
        csb.write("SDP_RDMA", "D_DATA_CUBE_WIDTH", s.src_data.width - 1)
        csb.write("SDP_RDMA", "D_DATA_CUBE_HEIGHT", s.src_data.height - 1)
        csb.write("SDP_RDMA", "D_DATA_CUBE_CHANNEL", s.src_data.channel - 1)
        if not fly:
            csb.address("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", mem.cube(s.src_data))
            csb.write("SDP_RDMA", "D_SRC_LINE_STRIDE", s.src_data.line_stride)
            csb.write("SDP_RDMA", "D_SRC_SURFACE_STRIDE", s.src_data.surf_stride)
            csb.write("SDP_RDMA", "D_SRC_DMA_CFG", ram(s.src_data))
        for name, short, stage, cube in stages:
            csb.fields("SDP_RDMA", f"D_{name}_CFG", DISABLE=int(not reads[name]), DATA_USE=_DATA_USE[stage.type],
                       DATA_SIZE=int(stage.precision != Precision.INT8), DATA_MODE=_DATA_MODE[stage.mode],
                       RAM_TYPE=ram(cube))  # fmt: skip
            if reads[name]:
                csb.address("SDP_RDMA", f"D_{short}_BASE_ADDR_LOW", f"D_{short}_BASE_ADDR_HIGH", mem.cube(cube))
                csb.write("SDP_RDMA", f"D_{short}_LINE_STRIDE", cube.line_stride)
                csb.write("SDP_RDMA", f"D_{short}_SURFACE_STRIDE", cube.surf_stride)
    if table is not None:
        update_lut(csb, "SDP", table, o.src_precision)
    csb.write("SDP", "D_DATA_CUBE_WIDTH", s.src_data.width - 1)
    csb.write("SDP", "D_DATA_CUBE_HEIGHT", s.src_data.height - 1)
    csb.write("SDP", "D_DATA_CUBE_CHANNEL", s.src_data.channel - 1)
    if out_dma:
        dst = mem.cube(s.dst_data)
        csb.write("SDP", "D_DST_BASE_ADDR_HIGH", dst >> 32)
        csb.write("SDP", "D_DST_BASE_ADDR_LOW", dst & WORD)
        csb.write("SDP", "D_DST_LINE_STRIDE", s.dst_data.line_stride)
        csb.write("SDP", "D_DST_SURFACE_STRIDE", s.dst_data.surf_stride)
    for _, short, stage, _ in stages[:2]:  # the BS and BN stages
        csb.fields("SDP", f"D_DP_{short}_CFG", BYPASS=BYPASS[bool(stage.enable)],
                   ALU_BYPASS=BYPASS[stage.type not in (SdpOpKind.MUL, SdpOpKind.NONE)], ALU_ALGO=stage.alu_type,
                   MUL_BYPASS=BYPASS[stage.type not in (SdpOpKind.ADD, SdpOpKind.NONE)],
                   MUL_PRELU=int(stage.act == Activation.PRELU), RELU_BYPASS=BYPASS[stage.act == Activation.RELU])  # fmt: skip
        if stage.enable:
            per_layer = stage.mode == SdpOperandMode.PER_LAYER
            if stage.type in (SdpOpKind.ADD, SdpOpKind.BOTH):
                csb.fields("SDP", f"D_DP_{short}_ALU_CFG", SRC=int(not per_layer), SHIFT=stage.shift_value)
            if per_layer:
                csb.write("SDP", f"D_DP_{short}_ALU_SRC_VALUE", stage.alu_operand)
                csb.write("SDP", f"D_DP_{short}_MUL_SRC_VALUE", stage.mul_operand)
            csb.fields("SDP", f"D_DP_{short}_MUL_CFG", SRC=int(not per_layer), SHIFT=stage.truncate)
    y = o.y_op
    csb.fields("SDP", "D_DP_EW_CFG", BYPASS=BYPASS[bool(y.enable)],
               ALU_BYPASS=BYPASS[y.type not in (SdpOpKind.MUL, SdpOpKind.NONE)], ALU_ALGO=y.alu_type,
               MUL_BYPASS=BYPASS[y.type not in (SdpOpKind.ADD, SdpOpKind.NONE)],
               MUL_PRELU=int(y.act == Activation.PRELU), LUT_BYPASS=BYPASS[y.act == Activation.LUT])  # fmt: skip
    if y.enable:
        per_layer = y.mode == SdpOperandMode.PER_LAYER
        for part, cvt, operand in (("ALU", y.cvt.alu_cvt, y.alu_operand), ("MUL", y.cvt.mul_cvt, y.mul_operand)):
            if y.type not in ((SdpOpKind.ADD, SdpOpKind.BOTH) if part == "ALU" else (SdpOpKind.MUL, SdpOpKind.BOTH)):
                continue
            csb.fields("SDP", f"D_DP_EW_{part}_CFG", SRC=int(not per_layer), CVT_BYPASS=BYPASS[bool(cvt.enable)])
            if per_layer:
                csb.write("SDP", f"D_DP_EW_{part}_SRC_VALUE", operand)
            else:
                csb.write("SDP", f"D_DP_EW_{part}_CVT_OFFSET_VALUE", cvt.offset)
                csb.write("SDP", f"D_DP_EW_{part}_CVT_SCALE_VALUE", cvt.scale)
                csb.write("SDP", f"D_DP_EW_{part}_CVT_TRUNCATE_VALUE", cvt.truncate)
        csb.write("SDP", "D_DP_EW_TRUNCATE_VALUE", y.truncate)
    csb.fields("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=int(fly), OUTPUT_DST=int(not out_dma), WINOGRAD=winograd,
               BATCH_NUMBER=o.batch_num - 1)  # fmt: skip
    csb.write("SDP", "D_DST_DMA_CFG", ram(s.dst_data))
    if o.batch_num > 1:
        csb.write("SDP", "D_DST_BATCH_STRIDE", o.batch_stride)
    csb.fields("SDP", "D_DATA_FORMAT", PROC_PRECISION=proc, OUT_PRECISION=o.dst_precision)
    csb.write("SDP", "D_CVT_OFFSET", o.out_cvt.offset)
    csb.write("SDP", "D_CVT_SCALE", o.out_cvt.scale)
    csb.write("SDP", "D_CVT_SHIFT", o.out_cvt.truncate)


class Sdp(FirmwareProcessor):
    kind = OpType.SDP
    units = ("SDP",)
    rdma = "SDP_RDMA"
    done = "SDP_DONE_STATUS"

    def rdma_needed(self, op: DlaOperation) -> bool:
        return _sdp_rdma_needed(op)

    def lut_index(self, op: DlaOperation) -> int:
        return op.op.lut_index

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        _program_sdp(csb, t.net, t.mem, op, rdma_needed, t.atom)


PROCESSOR = Sdp()
