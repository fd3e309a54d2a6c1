"""The span a replayed program is timed over on NVIDIA's testbench and in the model
(validation/nvdla_rtl/driver_log_rtl.timed_rows): from the first register write to the last access's
completion on both sides, so reads before the first write (the firmware's pointer reads, whose issue the
testbench's log does not show) are left out of both. Hand arithmetic on a made-up log."""

from pathlib import Path
from types import SimpleNamespace

from nvdla_sim.registers.trace_io import Program, RegRead, RegWrite
from nvdla_validation.nvdla_rtl.driver_log_rtl import rtl_marks, timed_rows

PROG = Program("p", Path("."), [
    RegRead("NVDLA_SDP", "S_POINTER_0", 0, 0xFFFFFFFF, 1),
    RegRead("NVDLA_SDP_RDMA", "S_POINTER_0", 0, 0xFFFFFFFF, 2),
    RegWrite("NVDLA_SDP", "S_POINTER_0", 0, 3),
    RegWrite("NVDLA_SDP", "D_DATA_CUBE_WIDTH_0", 7, 4),
    RegRead("NVDLA_GLB", "S_INTR_MASK_0", 0, 0xFFFFFFFF, 5),
    RegWrite("NVDLA_SDP", "D_OP_ENABLE_0", 1, 6),
])  # fmt: skip
# the testbench counts two ticks a core clock
LOG = """(40) read response from nvdla: 00000000
(80) read response from nvdla: 00000000
(82) write to nvdla: addr 00002401, data 00000000
(84) write to nvdla: addr 00002409, data 00000007
(130) read response from nvdla: 00000000
(132) write to nvdla: addr 0000240e, data 00000001
"""
# the model's replay: 100 cycles from its first access, 19.9 a read
SEQ = SimpleNamespace(cycles=100.0, costs=(2.25, 19.9, 0.0), operations=())


def test_marks_are_core_clocks():
    assert rtl_marks(LOG) == ([41, 42, 66], [20, 40, 65])


def test_both_spans_start_at_the_first_write():
    row = timed_rows(PROG, LOG, SEQ)
    assert row["rtl_cycles"] == 66 - 41  # the last access (a write at 66) minus the first write (41)
    assert row["model_cycles"] == round(100 - 2 * 19.9)  # the two pointer reads before the first write left out
    assert (row["writes"], row["reads"]) == (3, 3) and row["operations"] == []


def test_a_log_the_rtl_did_not_finish_names_the_counts():
    short = "\n".join(LOG.splitlines()[:4])
    assert timed_rows(PROG, short, SEQ) == {"reason": "the RTL issued 2/3 writes and completed 2/3 reads"}
