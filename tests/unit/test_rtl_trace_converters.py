"""The converters that feed NVIDIA's testbenches (validation/nvdla_rtl/run_reference.py): nvdlav1's
input.txn to its nvdla.cpp binary trace, and the log parser's cycle marks. Expected bytes are packed by
hand from the command layout nvdla.cpp reads (hw@nvdlav1:verif/verilator/nvdla.cpp, TraceLoader::load:
1 wait; 2 addr data; 3 addr mask data; 4 addr len bytes namelen name; 5 addr len bytes; 0xFF end)."""

from __future__ import annotations

import struct

import pytest

from nvdla_sim.errors import NvdlaError
from nvdla_validation.nvdla_rtl.run_reference import convert_txn, parse_log


def _test_folder(tmp_path, body: str):
    d = tmp_path / "t"
    d.mkdir()
    (d / "input.txn").write_text(body)
    (d / "in.dat").write_text("Data_size = 0x4\nW = 1\nPrecision = INT8\n0x01 0x02 0x03 0x04\n")
    (d / "out.dat").write_text("dumped memory,start_address=0x80080000 size=0x4\n======\n0x05 0x06 0x07 0x08\n")
    return d / "input.txn"


def test_txn_commands_in_file_order(tmp_path):
    txn = _test_folder(
        tmp_path,
        "# load_mem(addr, offset,  file)\n"
        "load_mem 0x80000000 0x4 in.dat \n"
        "write_reg 0xffff2c0f 0x12 #NVDLA_SDP.D_DATA_CUBE_WIDTH_0some glued text\n"
        "read_reg 0xffff2c0f 0x00001fff 0x00000012 #NVDLA_SDP.D_DATA_CUBE_WIDTH_0\n"
        "write_reg 0xffff2c0e 0x1 #NVDLA_SDP.D_OP_ENABLE_0\n"
        "wait\n"
        "dump_mem 0x80080000 0x4 out.dat\n",
    )
    blob, enables = convert_txn(txn)
    name = b"out.dat.rtl"
    assert blob == (
        struct.pack("=BII", 5, 0x80000000, 4) + bytes([1, 2, 3, 4])
        + struct.pack("=BII", 2, 0xFFFF2C0F, 0x12)
        + struct.pack("=BIII", 3, 0xFFFF2C0F, 0x1FFF, 0x12)
        + struct.pack("=BII", 2, 0xFFFF2C0E, 1)
        + b"\x01"
        + struct.pack("=BII", 4, 0x80080000, 4) + bytes([5, 6, 7, 8]) + struct.pack("=I", len(name)) + name
        + b"\xff"
    )  # fmt: skip
    assert enables == {0xFFFF2C0E: "NVDLA_SDP"}


def test_unknown_txn_command_names_file_and_line(tmp_path):
    txn = _test_folder(tmp_path, "wait\npoke 0x1 0x2\n")
    with pytest.raises(NvdlaError, match=r"input.txn:2: 'poke' is not a traceplayer command"):
        convert_txn(txn)


def test_log_cycle_marks():
    """Two ticks a core clock: op cycles from the op-enable write to the interrupt's last rise."""
    log = "\n".join(
        [
            "(10) write to nvdla: addr ffff2c0f, data 00000012",
            "(20) write to nvdla: addr ffff2c0e, data 00000001",
            "(40) DBB: read request from dla, addr 80000000 burst 1 id 0",
            "(104) DBB: read push: id 0, da 01 02 03 04",
            "(106) DBB: read push: id 0, da 01 02 03 04",
            "(150) DBB: write data from dla (00000000 00000000...)",
            "(220) nvdla-sim: dla_intr 1",
        ]
    )
    marks = parse_log(log, {0xFFFF2C0E: "NVDLA_SDP"})
    assert marks["op_cycles"] == 100 and marks["trace_cycles"] == 105
    assert marks["first_read_cycle"] == 10 and marks["last_write_cycle"] == 65
    assert marks["last_read_latency_cycles"] == 32 and marks["axi_read_requests"] == 1


def test_our_cfg_program_for_nvdlav1s_testbench(tmp_path):
    """A .cfg program on nvdlav1's testbench: memory first, registers by CSB word address (with the
    traces' 0xffff misc bits), a wait, a done-bit clear and its read-back per interrupt, a dump per CRC
    check."""
    from nvdla_sim.registers.trace_io import parse_program
    from nvdla_validation.nvdla_rtl.run_reference import convert_v1

    d = tmp_path / "p"
    d.mkdir()
    (d / "in.dat").write_text("{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04}\n")
    (d / "p.cfg").write_text(
        "mem_init(pri_mem, 0x80000000, 0x8, ALL_ZERO);\n"
        'mem_load(pri_mem, 0x80000000, "in.dat");\n'
        "reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x12);\n"
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);\n"
        "intr_notify(SDP_0, sync_id_0);\n"
        "check_crc(sync_id_0, 1, 0x80000100, 0x4, 0x12345678);\n"
    )
    regs = {
        "NVDLA_SDP": {"D_DATA_CUBE_WIDTH_0": {"addr": 0xB03C}, "D_OP_ENABLE_0": {"addr": 0xB038}},
        "NVDLA_GLB": {"S_INTR_STATUS_0": {"addr": 0x000C, "SDP_DONE_STATUS0": {"field": 1 << 0}}},
    }
    blob, enables, dumps = convert_v1(parse_program(d), regs)
    assert blob == (
        struct.pack("=BII", 5, 0x80000000, 8) + bytes(8)
        + struct.pack("=BII", 5, 0x80000000, 4) + bytes([1, 2, 3, 4])
        + struct.pack("=BII", 2, 0xFFFF2C0F, 0x12)
        + struct.pack("=BII", 2, 0xFFFF2C0E, 1)
        + b"\x01" + struct.pack("=BII", 2, 0xFFFF0003, 1) + struct.pack("=BIII", 3, 0xFFFF0003, 1, 0)
        + struct.pack("=BII", 4, 0x80000100, 4) + bytes(4) + struct.pack("=I", 10) + b"check0.rtl"
        + b"\xff"
    )  # fmt: skip
    assert enables == {0xFFFF2C0E: "NVDLA_SDP"} and dumps == [("check0.rtl", 0x12345678)]


def test_register_map_from_nvdlav1s_header():
    """nvdlav1 generates no opendla.py; its C model's arnvdla.h gives byte addresses and field masks (its
    unit bases differ from master's). Units split by the longest known prefix (SDP_RDMA before SDP)."""
    from nvdla_validation.nvdla_rtl.run_reference import registers_from_header

    header = "\n".join(
        [
            "#define NVDLA_SDP_RDMA_D_OP_ENABLE_0                    _MK_ADDR_CONST(0xa008)",
            "#define NVDLA_SDP_D_OP_ENABLE_0                 _MK_ADDR_CONST(0xb038)",
            "#define NVDLA_GLB_S_INTR_STATUS_0                       _MK_ADDR_CONST(0xc)",
            "#define NVDLA_GLB_S_INTR_STATUS_0_CACC_DONE_STATUS1_SHIFT                        _MK_SHIFT_CONST(21)",
            "#define NVDLA_GLB_S_INTR_STATUS_0_CACC_DONE_STATUS1_FIELD                        "
            "_MK_FIELD_CONST(0x1, NVDLA_GLB_S_INTR_STATUS_0_CACC_DONE_STATUS1_SHIFT)",
        ]
    )
    regs = registers_from_header(header)
    assert regs["NVDLA_SDP_RDMA"]["D_OP_ENABLE_0"] == {"addr": 0xA008}
    assert regs["NVDLA_SDP"]["D_OP_ENABLE_0"]["addr"] == 0xB038
    assert regs["NVDLA_GLB"]["S_INTR_STATUS_0"] == {"addr": 0xC, "CACC_DONE_STATUS1": {"field": 1 << 21}}
