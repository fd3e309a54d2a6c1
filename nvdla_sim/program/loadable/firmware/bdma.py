"""The firmware's BDMA (nvdla/sw kmd/firmware bdma.c): each transfer of the operation queued into a
slot, the group started by its launch register; no producer pointers (the slots are shared)."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import MemType, OpType
from nvdla_sim.program.loadable.firmware.base import Csb, FirmwareProcessor, Mask, MemoryLayout, Target, check
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation


def _program_bdma(csb: Csb, net: DlaNetwork, mem: MemoryLayout, op: DlaOperation) -> None:
    """bdma.c dla_bdma_program: each transfer into a slot (after a read of the free slots)."""
    s = op.surface
    check(s.num_transfers <= len(s.transfers), net, op, f"{s.num_transfers} transfers; at most {len(s.transfers)}")
    for t in s.transfers[: s.num_transfers]:
        csb.read("BDMA", "STATUS", 0x14)  # FREE_SLOT: the slots left (20 in the RTL); any non-zero value goes on
        check(t.line_repeat <= 8192 and t.surface_repeat <= 8192, net, op, "BDMA repeats at most 8192")
        check(t.line_size % 32 == 0, net, op, f"BDMA line size {t.line_size} is not a multiple of 32")
        check(t.source_line >= t.line_size and t.destination_line >= t.line_size, net, op, "BDMA line stride < line")
        check(t.source_surface >= t.source_line * t.line_repeat and
               t.destination_surface >= t.destination_line * t.line_repeat, net, op, "BDMA surface stride too small")  # fmt: skip
        csb.address("BDMA", "CFG_SRC_ADDR_LOW", "CFG_SRC_ADDR_HIGH", mem.address(t.source_address))
        csb.address("BDMA", "CFG_DST_ADDR_LOW", "CFG_DST_ADDR_HIGH", mem.address(t.destination_address))
        csb.write("BDMA", "CFG_LINE", (t.line_size >> 5) - 1)
        csb.fields("BDMA", "CFG_CMD", SRC_RAM_TYPE=int(s.source_type == MemType.MC),
                   DST_RAM_TYPE=int(s.destination_type == MemType.MC))  # fmt: skip
        csb.write("BDMA", "CFG_LINE_REPEAT", t.line_repeat - 1)
        csb.write("BDMA", "CFG_SRC_LINE", t.source_line)
        csb.write("BDMA", "CFG_DST_LINE", t.destination_line)
        csb.write("BDMA", "CFG_SURF_REPEAT", t.surface_repeat - 1)
        csb.write("BDMA", "CFG_SRC_SURF", t.source_surface)
        csb.write("BDMA", "CFG_DST_SURF", t.destination_surface)
        csb.write("BDMA", "CFG_OP", 1)


class Bdma(FirmwareProcessor):
    kind = OpType.BDMA
    done = "BDMA_DONE_STATUS"
    mask = Mask.AFTER

    def rdma_needed(self, op: DlaOperation) -> bool:
        return False

    def masks(self, op: DlaOperation) -> Mask:
        return self.mask if op.surface.num_transfers else Mask.NEVER  # dla_bdma_program returns first

    def read_pointers(self, csb: Csb, consumer: int, rdma_consumer: int) -> None:
        csb.read("BDMA", "STATUS", 0)  # GRP0_BUSY: the group the hardware runs next

    def ready(self, op: DlaOperation, other_taken: bool, other_active: bool, other_lut: int) -> bool:
        # dla_bdma_is_ready: the slots are not shadowed per group; wait until the other group is launched
        return not (other_taken and not other_active)

    def set_producer(self, csb: Csb, group: int, rdma_group: int) -> None:
        pass  # dla_bdma_set_producer: nothing to set

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        _program_bdma(csb, t.net, t.mem, op)

    def enable(self, csb: Csb, op: DlaOperation, group: int, rdma_needed: bool) -> int | None:
        if op.surface.num_transfers == 0:
            return None  # dla_bdma_enable: nothing to move, the operation is complete
        return csb.write("BDMA", f"CFG_LAUNCH{group}", 1)


PROCESSOR = Bdma()
