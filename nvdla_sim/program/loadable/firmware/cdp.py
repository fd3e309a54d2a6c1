"""The firmware's CDP (nvdla/sw kmd/firmware cdp.c): local response normalisation from memory to
memory through CDP_RDMA, with its LUT."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import MemType, OpType
from nvdla_sim.program.loadable.firmware.base import (
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


def _program_cdp(csb: Csb, net: DlaNetwork, mem: MemoryLayout, op: DlaOperation, atom: int) -> None:
    """cdp.c processor_cdp_program."""
    c, s = op.op, op.surface
    check(s.src_data.type != MemType.HW and s.dst_data.type != MemType.HW, net, op, "CDP reads and writes memory")
    check(c.in_precision == c.out_precision, net, op, "CDP does not convert precision")
    check_layout(net, op, s.src_data, c.in_precision, atom, "input")
    check_layout(net, op, s.dst_data, c.out_precision, atom, "output")
    src, dst = mem.cube(s.src_data), mem.cube(s.dst_data)
    table = network_lut(net, op, c.lut_index) if c.lut_index >= 0 else None
    csb.fields("CDP_RDMA", "D_DATA_CUBE_WIDTH", WIDTH=s.src_data.width - 1)
    csb.fields("CDP_RDMA", "D_DATA_CUBE_HEIGHT", HEIGHT=s.src_data.height - 1)
    csb.fields("CDP_RDMA", "D_DATA_CUBE_CHANNEL", CHANNEL=s.src_data.channel - 1)
    csb.address("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", src)
    csb.write("CDP_RDMA", "D_SRC_LINE_STRIDE", s.src_data.line_stride)
    csb.write("CDP_RDMA", "D_SRC_SURFACE_STRIDE", s.src_data.surf_stride)
    csb.fields("CDP_RDMA", "D_SRC_DMA_CFG", RAM_TYPE=ram(s.src_data))
    csb.fields("CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=c.in_precision)
    if table is not None:
        update_lut(csb, "CDP", table, c.in_precision)
    csb.address("CDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH", dst)
    csb.write("CDP", "D_DST_LINE_STRIDE", s.dst_data.line_stride)
    csb.write("CDP", "D_DST_SURFACE_STRIDE", s.dst_data.surf_stride)
    csb.fields("CDP", "D_DST_DMA_CFG", RAM_TYPE=ram(s.dst_data))
    csb.fields("CDP", "D_DATA_FORMAT", INPUT_DATA=c.in_precision)
    csb.fields("CDP", "D_LRN_CFG", NORMALZ_LEN=int((c.local_size - 1) / 2) - 1)  # map_local_size
    csb.fields("CDP", "D_DATIN_OFFSET", OFFSET=c.in_cvt.offset)
    csb.fields("CDP", "D_DATIN_SCALE", SCALE=c.in_cvt.scale)
    csb.fields("CDP", "D_DATIN_SHIFTER", SHIFT=c.in_cvt.truncate)
    csb.fields("CDP", "D_DATOUT_OFFSET", OFFSET=c.out_cvt.offset)
    csb.fields("CDP", "D_DATOUT_SCALE", SCALE=c.out_cvt.scale)
    csb.fields("CDP", "D_DATOUT_SHIFTER", SHIFT=c.out_cvt.truncate)
    csb.fields("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS=int(bool(c.bypass_sqsum)), MUL_BYPASS=int(bool(c.bypass_out_mul)))


class Cdp(FirmwareProcessor):
    kind = OpType.CDP
    units = ("CDP",)
    rdma = "CDP_RDMA"
    done = "CDP_DONE_STATUS"

    def rdma_needed(self, op: DlaOperation) -> bool:
        return True  # dla_cdp_rdma_check

    def lut_index(self, op: DlaOperation) -> int:
        return op.op.lut_index

    def set_producer(self, csb: Csb, group: int, rdma_group: int) -> None:
        csb.write("CDP", "S_POINTER", group)
        csb.write("CDP_RDMA", "S_POINTER", group)  # dla_cdp_set_producer: the group, not the RDMA's (equal here)

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        _program_cdp(csb, t.net, t.mem, op, t.atom)


PROCESSOR = Cdp()
