"""The firmware's Rubik (nvdla/sw kmd/firmware rubik.c): a reshape from memory to memory, one unit with its
producer pointer and op enable, no reader of its own."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import MemType, OpType
from nvdla_sim.program.loadable.firmware.base import Csb, FirmwareProcessor, Target, check, ram
from nvdla_sim.program.loadable.network import DlaOperation

CONTRACT, SPLIT, MERGE = 0, 1, 2  # dla_rubik_op_desc.mode (RUBIK_MODE_*)
_BPE = (1, 2, 2)  # map_bpe: bytes an element of INT8, INT16, FP16


def _program_rubik(csb: Csb, t: Target, op: DlaOperation) -> None:
    """rubik.c processor_rubik_program."""
    r, s = op.op, op.surface
    src, dst = s.src_data, s.dst_data
    check(src.type != MemType.HW and dst.type != MemType.HW, t.net, op, "Rubik reads and writes memory")
    check(r.mode in (CONTRACT, SPLIT, MERGE), t.net, op, f"Rubik mode {r.mode}: 0 contract, 1 split, 2 merge")
    check(r.precision in (0, 1, 2), t.net, op, f"Rubik precision {r.precision}: 0 int8, 1 int16, 2 fp16")
    csb.fields("RBK", "D_MISC_CFG", RUBIK_MODE=r.mode, IN_PRECISION=r.precision)
    csb.fields("RBK", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=ram(src))
    csb.fields("RBK", "D_DATAIN_SIZE_0", DATAIN_WIDTH=src.width - 1, DATAIN_HEIGHT=src.height - 1)
    csb.fields("RBK", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=src.channel - 1)
    csb.address("RBK", "D_DAIN_ADDR_LOW", "D_DAIN_ADDR_HIGH", t.mem.cube(src))
    if r.mode == MERGE:
        check(src.plane_stride != 0 and src.plane_stride % 32 == 0, t.net, op,
              f"a Rubik merge's planar stride {src.plane_stride} must be a non-zero multiple of 32")  # fmt: skip
        csb.write("RBK", "D_DAIN_PLANAR_STRIDE", src.plane_stride)
    else:
        csb.write("RBK", "D_DAIN_SURF_STRIDE", src.surf_stride)
    csb.write("RBK", "D_DAIN_LINE_STRIDE", src.line_stride)
    csb.fields("RBK", "D_DAOUT_RAM_TYPE", DATAOUT_RAM_TYPE=ram(dst))
    csb.fields("RBK", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channel - 1)
    csb.address("RBK", "D_DAOUT_ADDR_LOW", "D_DAOUT_ADDR_HIGH", t.mem.cube(dst))
    csb.write("RBK", "D_DAOUT_LINE_STRIDE", dst.line_stride)
    if r.mode != SPLIT:
        csb.write("RBK", "D_DAOUT_SURF_STRIDE", dst.surf_stride)
        if r.mode == CONTRACT:
            csb.write("RBK", "D_CONTRACT_STRIDE_0", ((dst.channel * _BPE[r.precision] + 31) >> 5) * src.surf_stride)
            csb.write("RBK", "D_CONTRACT_STRIDE_1", r.stride_y * dst.line_stride)
            csb.fields("RBK", "D_DECONV_STRIDE", DECONV_X_STRIDE=r.stride_x - 1, DECONV_Y_STRIDE=r.stride_y - 1)
    else:
        csb.write("RBK", "D_DAOUT_PLANAR_STRIDE", dst.plane_stride)


class Rubik(FirmwareProcessor):
    kind = OpType.RUBIK
    units = ("RBK",)
    done = "RUBIK_DONE_STATUS"

    def rdma_needed(self, op: DlaOperation) -> bool:
        return False  # dla_rubik_rdma_check

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        _program_rubik(csb, t, op)


PROCESSOR = Rubik()
