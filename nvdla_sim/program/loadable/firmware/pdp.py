"""The firmware's PDP (nvdla/sw kmd/firmware pdp.c): pooling from memory through PDP_RDMA (with its
split widths) or on the fly from SDP, to memory."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import MemType, OpType, Precision
from nvdla_sim.program.loadable.firmware.base import (
    WORD,
    Csb,
    FirmwareProcessor,
    MemoryLayout,
    Target,
    check,
    check_layout,
    ram,
)
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation

# pdp.c recip_kernel_size: 1/k for k = 1..8, INT8/INT16 (16-bit fraction) and FP16
_RECIP = (
    (0x10000, 0x8000, 0x5555, 0x4000, 0x3333, 0x2AAA, 0x2492, 0x2000),
    (0x7C00, 0x7800, 0x7555, 0x7400, 0x7266, 0x7155, 0x7092, 0x7000),
)
_PARTIAL = ("FIRST", "MID", "LAST")


def _program_pdp(csb: Csb, net: DlaNetwork, mem: MemoryLayout, op: DlaOperation, atom: int) -> None:
    """pdp.c processor_pdp_program (validate_pdp_configs' checks included)."""
    p, s = op.op, op.surface
    check(s.dst_data.type != MemType.HW, net, op, "PDP's output must go to memory")
    check(1 <= p.stride_x <= 8 and 1 <= p.stride_y <= 8, net, op, f"stride {p.stride_x}x{p.stride_y}: 1..8")
    check(p.pool_width < 8 and p.pool_height < 8, net, op, "pooling kernel larger than 8")
    check(p.pool_mode < 3, net, op, f"pool_mode {p.pool_mode}: 0 average, 1 max, 2 min")
    check(p.split_num <= 64, net, op, f"split_num {p.split_num}: at most 64 (MAX_SPLIT_NUM)")
    fly = s.src_data.type == MemType.HW
    check_layout(net, op, s.src_data, p.precision, atom, "input")
    check_layout(net, op, s.dst_data, p.precision, atom, "output")
    src = 0 if fly else mem.cube(s.src_data)
    dst = mem.cube(s.dst_data) if s.dst_data.address != -1 else 0

    def minus1(v: int) -> int:
        return 0 if v == 0 else v - 1

    partial_in = {k: minus1(getattr(p, f"partial_in_width_{k.lower()}")) for k in _PARTIAL}
    if not fly:
        csb.write("PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", s.src_data.width - 1)
        csb.write("PDP_RDMA", "D_DATA_CUBE_IN_HEIGHT", s.src_data.height - 1)
        csb.write("PDP_RDMA", "D_DATA_CUBE_IN_CHANNEL", s.src_data.channel - 1)
        csb.write("PDP_RDMA", "D_SRC_BASE_ADDR_HIGH", src >> 32)
        csb.write("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", src & WORD)
        csb.write("PDP_RDMA", "D_SRC_LINE_STRIDE", s.src_data.line_stride)
        csb.write("PDP_RDMA", "D_SRC_SURFACE_STRIDE", s.src_data.surf_stride)
        csb.fields("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=p.precision)
        csb.fields("PDP_RDMA", "D_SRC_RAM_CFG", RAM_TYPE=ram(s.src_data))
        csb.fields("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=p.split_num - 1)
        csb.fields("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=p.pool_width, STRIDE_WIDTH=p.stride_x - 1)
        csb.fields("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=p.pad_left)
        csb.fields("PDP_RDMA", "D_PARTIAL_WIDTH_IN", **partial_in)
    else:
        check(p.split_num == 1, net, op, "PDP on the fly cannot be split")
    csb.fields("PDP", "D_DATA_CUBE_IN_WIDTH", WIDTH=s.src_data.width - 1)
    csb.fields("PDP", "D_DATA_CUBE_IN_HEIGHT", HEIGHT=s.src_data.height - 1)
    csb.fields("PDP", "D_DATA_CUBE_IN_CHANNEL", CHANNEL=s.src_data.channel - 1)
    csb.fields("PDP", "D_DATA_CUBE_OUT_WIDTH", WIDTH=s.dst_data.width - 1)
    csb.fields("PDP", "D_DATA_CUBE_OUT_HEIGHT", HEIGHT=s.dst_data.height - 1)
    csb.fields("PDP", "D_DATA_CUBE_OUT_CHANNEL", CHANNEL=s.dst_data.channel - 1)
    csb.fields("PDP", "D_OPERATION_MODE_CFG", METHOD=p.pool_mode, OFF_FLYING=int(not fly),
               SPLIT_NUM=p.split_num - 1)  # fmt: skip
    csb.fields("PDP", "D_PARTIAL_WIDTH_IN", **partial_in)
    csb.fields("PDP", "D_PARTIAL_WIDTH_OUT",
               **{k: minus1(getattr(p, f"partial_width_{k.lower()}")) for k in _PARTIAL})  # fmt: skip
    csb.fields("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=p.pool_width, KERNEL_HEIGHT=p.pool_height,
               STRIDE_WIDTH=p.stride_x - 1, STRIDE_HEIGHT=p.stride_y - 1)  # fmt: skip
    fp16 = int(p.precision == Precision.FP16)
    csb.write("PDP", "D_RECIP_KERNEL_WIDTH", _RECIP[fp16][p.pool_width])
    csb.write("PDP", "D_RECIP_KERNEL_HEIGHT", _RECIP[fp16][p.pool_height])
    if fp16:
        check(not any(p.padding_value), net, op, "FP16 pooling needs zero padding values")
    csb.fields("PDP", "D_POOLING_PADDING_CFG", LEFT=p.pad_left, RIGHT=p.pad_right, TOP=p.pad_top, BOTTOM=p.pad_bottom)
    for i in range(7):
        csb.write("PDP", f"D_POOLING_PADDING_VALUE_{i + 1}_CFG", p.padding_value[i])
    if not fly:
        csb.write("PDP", "D_SRC_LINE_STRIDE", s.src_data.line_stride)
        csb.write("PDP", "D_SRC_SURFACE_STRIDE", s.src_data.surf_stride)
    csb.write("PDP", "D_DST_BASE_ADDR_LOW", dst & WORD)
    csb.write("PDP", "D_DST_BASE_ADDR_HIGH", dst >> 32)
    csb.write("PDP", "D_DST_LINE_STRIDE", s.dst_data.line_stride)
    csb.write("PDP", "D_DST_SURFACE_STRIDE", s.dst_data.surf_stride)
    csb.fields("PDP", "D_DST_RAM_CFG", RAM_TYPE=ram(s.dst_data))
    csb.fields("PDP", "D_DATA_FORMAT", INPUT_DATA=p.precision)


class Pdp(FirmwareProcessor):
    kind = OpType.PDP
    units = ("PDP",)
    rdma = "PDP_RDMA"
    done = "PDP_DONE_STATUS"

    def rdma_needed(self, op: DlaOperation) -> bool:
        return op.surface.src_data.type != MemType.HW  # dla_pdp_rdma_check: offline

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        _program_pdp(csb, t.net, t.mem, op, t.atom)


PROCESSOR = Pdp()
