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


# ---- the reordering experiment (driver_log_rtl.convolutions_early) on a made-up nv_small log ----

LOG_LINES = [
    "write_reg 0x3004 0x00000000",  # 1 CDMA producer group 0: convolution A's registers
    "write_reg 0x3014 0x00000000",  # 2
    "write_reg 0x3004 0x00000001",  # 3 group 1: B's registers, before A is enabled
    "write_reg 0x3014 0x00000000",  # 4
    "write_reg 0x3004 0x00000000",  # 5 A's enable: pointer, CBUF flush poll, D_OP_ENABLE
    "read_reg 0x300c 0xffffffff 0x00000001",  # 6
    "write_reg 0x3010 0x00000001",  # 7
    "read_reg 0x100c 0xffffffff 0x00140001",  # 8 the driver waits for A's end
    "write_reg 0x100c 0x00140001",  # 9
    "write_reg 0x3004 0x00000001",  # 10 B's enable
    "read_reg 0x300c 0xffffffff 0x00000001",  # 11
    "write_reg 0x3010 0x00000001",  # 12
    "read_reg 0x100c 0xffffffff 0x00280002",  # 13 B's end
    "write_reg 0x100c 0x00280002",  # 14
    "write_reg 0x3004 0x00000000",  # 15 C's registers in group 0, after A ended
    "write_reg 0x3014 0x00000000",  # 16
    "read_reg 0x1004 0xffffffff 0x00000000",  # 17
    "write_reg 0x3004 0x00000000",  # 18 C's enable
    "read_reg 0x300c 0xffffffff 0x00000001",  # 19
    "write_reg 0x3010 0x00000001",  # 20
]


def test_each_convolution_is_enabled_while_the_previous_runs(tmp_path):
    from nvdla_sim.registers.trace_io import parse_program
    from nvdla_validation.nvdla_rtl.driver_log_rtl import convolutions_early

    log = tmp_path / "output.txn"
    log.write_text("\n".join(LOG_LINES) + "\n")
    prog = parse_program(log, address_map="nv_small")
    out = convolutions_early(prog, log.read_text()).splitlines()
    # B was written before A's enable: it goes just after A's; C just after its own registers (line 16),
    # which come after B's enable; every line kept once
    order = [1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 8, 9, 13, 14, 15, 16, 18, 19, 20, 17]
    assert out == [LOG_LINES[n - 1] for n in order]


def test_the_two_convolution_reproduction_swaps_register_groups():
    """stall_two_convolutions: S_POINTER producers flipped, each group-0 status bit moved to its group-1
    neighbour and back (SDP 0/1, PDP 4/5, CDMA data 16/17, weights 18/19, CACC 20/21), other lines as they are."""
    from nvdla_validation.nvdla_rtl.stall_two_convolutions import VARIANTS, swapped

    assert swapped("write_reg 0x3004 0x00000001  # x") == "write_reg 0x3004 0x00000000  # x"
    assert swapped("read_reg 0x100c 0xffffffff 0x00280002") == "read_reg 0x100c 0xffffffff 0x00140001"
    assert swapped("write_reg 0x100c 0x00000010") == "write_reg 0x100c 0x00000020"
    assert swapped("write_reg 0x3014 0x00000001") == "write_reg 0x3014 0x00000001"  # a D_ register
    assert swapped("read_reg 0x100c 0xffffffff 0x80000000") == "read_reg 0x100c 0xffffffff 0x80000000"
    # both variants hold the same lines, once each; only FC1's enable moves
    a, b = VARIANTS["after_end"], VARIANTS["while_running"]
    assert sorted(a) == sorted(b) and len(set(a)) == len(a)
