"""BDMA's register view (nv_full): a transfer decoded from its CFG_ registers when CFG_OP.EN queues it, written
back, copied byte for byte, timed by its processor. The expected fields are read off the registers by hand
(NVDLA_BDMA.rdl: 32-byte atoms, SIZE + 1 atoms a line, NUMBER + 1 lines and surfaces)."""

import numpy as np
import pytest

from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import Memory
from nvdla_sim.processors.bdma.registers import BdmaOp
from nvdla_sim.program.decode import decode_program, describe, from_description
from nvdla_sim.program.emit import emit_program
from nvdla_sim.program.run import run_program
from nvdla_sim.registers.trace_io import parse_program
from nvdla_sim.units.memory_format import Surface

FULL = load_config("nv_full")

# a traceplayer test in nvdlav1's form (registers named in the comments, as NVIDIA's sanity tests write them)
TXN = """\
write_reg 0xffff100b 0x800 #NVDLA_BDMA.CFG_DST_SURF_0
write_reg 0xffff1008 0x100 #NVDLA_BDMA.CFG_DST_LINE_0
write_reg 0xffff100a 0x800 #NVDLA_BDMA.CFG_SRC_SURF_0
write_reg 0xffff1007 0x100 #NVDLA_BDMA.CFG_SRC_LINE_0
write_reg 0xffff1009 0x1 #NVDLA_BDMA.CFG_SURF_REPEAT_0
write_reg 0xffff1006 0x7 #NVDLA_BDMA.CFG_LINE_REPEAT_0
write_reg 0xffff1004 0x7 #NVDLA_BDMA.CFG_LINE_0
write_reg 0xffff1005 0x3 #NVDLA_BDMA.CFG_CMD_0
write_reg 0xffff1001 0x0 #NVDLA_BDMA.CFG_SRC_ADDR_HIGH_0
write_reg 0xffff1000 0x80000000 #NVDLA_BDMA.CFG_SRC_ADDR_LOW_0
write_reg 0xffff1003 0x0 #NVDLA_BDMA.CFG_DST_ADDR_HIGH_0
write_reg 0xffff1002 0x81000000 #NVDLA_BDMA.CFG_DST_ADDR_LOW_0
write_reg 0xffff100c 0x1 #NVDLA_BDMA.CFG_OP_0
write_reg 0xffff100d 0x1 #NVDLA_BDMA.CFG_LAUNCH0_0
wait
"""


def _txn(tmp_path, text=TXN):
    d = tmp_path / "bdma"
    d.mkdir()
    (d / "input.txn").write_text(text)
    return d


def test_a_queued_transfer_decodes_to_its_registers(tmp_path):
    (op,) = decode_program(parse_program(_txn(tmp_path))).operations
    # CFG_LINE 7: 8 atoms = 256 bytes; CFG_LINE_REPEAT 7: 8 lines; CFG_SURF_REPEAT 1: 2 surfaces; CMD 3: MC both
    assert op == BdmaOp(Surface(0x80000000, 0x100, 0x800), Surface(0x81000000, 0x100, 0x800), 256, 8, 2,
                        Memory.DRAM, Memory.DRAM)  # fmt: skip
    assert op.bytes == 256 * 8 * 2 and from_description(describe(op)) == op


def test_each_cfg_op_write_queues_its_own_transfer(tmp_path):
    second = TXN.replace("wait\n", "") + "write_reg 0xffff1004 0x0 #NVDLA_BDMA.CFG_LINE_0\n"
    second += "write_reg 0xffff100c 0x1 #NVDLA_BDMA.CFG_OP_0\nwait\n"
    ops = decode_program(parse_program(_txn(tmp_path, second))).operations
    assert [o.line_bytes for o in ops] == [256, 32]  # the second keeps every register but its 1-atom line


def test_emitted_transfer_copies_bit_exactly_and_times_by_its_processor(tmp_path):
    op = BdmaOp(Surface(0x80000000, 96, 384), Surface(0x80100000, 64, 256), 64, 4, 3, Memory.DRAM, Memory.DRAM)
    src = np.arange(0x80000000, 0x80000000 + 1152, dtype=np.int64).astype(np.uint8)
    prog = emit_program("bdma_copy", op, [(0x80000000, src)], [(0x80100000, 768)], FULL)
    folder = prog.write(tmp_path)
    run = run_program(folder, FULL)
    assert [c["match"] for c in run.checks] == [True]  # the model's copy, CRC'd by the program's own check
    got = decode_program(parse_program(folder)).operations
    assert got == [op]
    # every line: 64 of its source's 96-byte stride, into 64-byte lines; 3 surfaces at their own strides
    want = np.concatenate([src[s * 384 + r * 96 : s * 384 + r * 96 + 64] for s in range(3) for r in range(4)])
    from nvdla_sim.program.execute import execute_program

    mem, _ = execute_program(parse_program(folder), decode_program(parse_program(folder)), FULL)
    assert bytes(mem.read(0x80100000, 768)) == want.tobytes()
    (timing,) = run.operations
    # its timing from its places: the source lines start at s x 384 + r x 96 (mod 256: 0, 96, 192, 32 | 128,
    # 224, 64, 160 | 0, 96, 192, 32), those crossing a 64-byte block read as two beats: 18 read beats, one a
    # cycle on nv_full's 64-byte port (0-17), the last back 1,200 later (1,217); the last line's 64-byte
    # transaction written 17 after: 1,234
    assert timing.kind == "bdma" and timing.stats.cycles == 1_234


def test_a_build_without_bdma_refuses_a_transfer(tmp_path):
    with pytest.raises(NvdlaError, match=r"a BDMA transfer on nv_small_rtl_tb, which has no BDMA"):
        run_program(_txn(tmp_path), load_config("nv_small_rtl_tb"))
