"""Register programs: parsing NVIDIA's trace-test format, decoding registers into layers, timing them."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_sim import SdpLayer, SdpSpec, load_config, simulate
from nvdla_sim.errors import TraceError
from nvdla_sim.precision import Precision
from nvdla_sim.processors.conv.registers import CbufReuse, ConvOp
from nvdla_sim.processors.pdp.registers import PdpOp
from nvdla_sim.processors.sdp.registers import SdpOp
from nvdla_sim.program.decode import decode_program, describe, from_description
from nvdla_sim.program.run import run_program
from nvdla_sim.registers.trace_io import crc32, initial_memory, load_dat, parse_program


def sdp_program(w: int, h: int, c: int, *, extra: str = "", ew_bypass: int = 1, crc: int = 0x12345678) -> str:
    """A pass-through SDP program of our own, in the trace-test syntax."""
    return f"""// our own test program
mem_init(pri_mem, 0x80000000, 0x1000, ALL_ZERO);
mem_load(pri_mem, 0x80000000, "in.dat");
reg_write(NVDLA_SDP_RDMA.D_DATA_CUBE_WIDTH_0, {w - 1});
reg_write(NVDLA_SDP_RDMA.D_DATA_CUBE_HEIGHT_0, {h - 1});
reg_write(NVDLA_SDP_RDMA.D_DATA_CUBE_CHANNEL_0, {c - 1});
reg_write(NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0, 0x80000000);
reg_write(NVDLA_SDP_RDMA.D_BRDMA_CFG_0, 0x1);
reg_write(NVDLA_SDP_RDMA.D_NRDMA_CFG_0, 0x1);
reg_write(NVDLA_SDP_RDMA.D_ERDMA_CFG_0, 0x1);
reg_write(NVDLA_SDP_RDMA.D_PERF_ENABLE_0, 0x0);
reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, {w - 1});
reg_write(NVDLA_SDP.D_DATA_CUBE_HEIGHT_0, {h - 1});
reg_write(NVDLA_SDP.D_DATA_CUBE_CHANNEL_0, {c - 1});
reg_write(NVDLA_SDP.D_DST_BASE_ADDR_LOW_0, 0x80080000);
reg_write(NVDLA_SDP.D_DP_BS_CFG_0, 0x1);
reg_write(NVDLA_SDP.D_DP_BN_CFG_0, 0x1);
reg_write(NVDLA_SDP.D_DP_EW_CFG_0, {ew_bypass});
reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x1);
{extra}reg_write(NVDLA_SDP_RDMA.D_OP_ENABLE_0, 0x1);
reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);
intr_notify(SDP_0, sync_id_0);
check_crc(sync_id_0, 1, 0x80080000, 0x8, {crc:#x});
"""


def write_test(tmp_path: Path, text: str, dat: str = "{\n{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04} ,\n}\n"):
    d = tmp_path / "mytest"
    d.mkdir(exist_ok=True)
    (d / "mytest.cfg").write_text(text)
    (d / "in.dat").write_text(dat)
    return d


def test_parse_commands_and_memory(tmp_path):
    prog = parse_program(write_test(tmp_path, sdp_program(3, 2, 9)))
    assert prog.name == "mytest"
    assert len(prog.writes) == 18  # 16 configuration writes and 2 op enables
    (check,) = prog.checks
    assert (check.kind, check.base, check.size, check.crc) == ("crc", 0x80080000, 8, 0x12345678)
    mem = initial_memory(prog)
    assert list(mem.read(0x80000000, 6)) == [1, 2, 3, 4, 0, 0]
    assert crc32(b"123456789") == 0xCBF43926  # the standard CRC-32 check value


def test_dat_records_at_offsets(tmp_path):
    p = tmp_path / "x.dat"
    p.write_text("{\n{offset:0x4, size:2, payload:0xaa 0xbb},\n{offset:0x0, size:1, payload:0x11},\n}\n")
    assert list(load_dat(p)) == [0x11, 0, 0, 0, 0xAA, 0xBB]
    assert list(load_dat(p, size=8)) == [0x11, 0, 0, 0, 0xAA, 0xBB, 0, 0]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1)", "does not end with ';'"),
        ("mem_fill(pri_mem, 0x0, 0x10);", "unsupported trace command 'mem_fill'"),
        ("mem_init(ext_mem, 0x0, 0x10, ALL_ZERO);", "memory 'ext_mem' is not one of pri_mem"),
        ("mem_init(pri_mem, 0x0, 0x10, RANDOM);", "pattern 'RANDOM' is not supported"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    d = write_test(tmp_path, "// header\n" + line + "\n")
    with pytest.raises(TraceError, match=message) as e:
        parse_program(d)
    assert "mytest.cfg:2:" in str(e.value)


def test_bad_dat_record(tmp_path):
    d = write_test(tmp_path, sdp_program(1, 1, 1), dat="{\n{offset:0x0, size:4, payload:0x01 0x02}\n}\n")
    with pytest.raises(TraceError, match=r"in.dat:2: record says size 4 but has 2 payload bytes"):
        initial_memory(parse_program(d))


def test_not_a_test_folder(tmp_path):
    with pytest.raises(TraceError, match="expected one .cfg trace file"):
        parse_program(tmp_path)


def test_decode_sdp_cube(tmp_path):
    dec = decode_program(parse_program(write_test(tmp_path, sdp_program(3, 2, 9))))
    (op,) = dec.operations
    assert isinstance(op, SdpOp)
    assert (op.width, op.height, op.channels, op.flying, op.x1, op.x2, op.ew_enabled) == (
        3,
        2,
        9,
        False,
        None,
        None,
        False,
    )
    assert op.src.addr == 0x80000000 and op.dst.addr == 0x80080000
    assert dec.unknown == []


def test_unknown_register_is_named_not_ignored(tmp_path):
    d = write_test(tmp_path, sdp_program(1, 1, 8, extra="reg_write(NVDLA_SDP.D_MADE_UP_0, 0x5);\n"))
    assert decode_program(parse_program(d)).unknown == ["NVDLA_SDP.D_MADE_UP_0"]
    hw = load_config("nv_small_rtl_tb")
    with pytest.raises(TraceError, match=r"registers the model does not understand: NVDLA_SDP.D_MADE_UP_0"):
        run_program(d, hw)
    assert run_program(d, hw, strict=False).cycles > 0


def test_eltwise_refused_on_nv_small_like_the_rtl(tmp_path):
    d = write_test(tmp_path, sdp_program(1, 1, 8, ew_bypass=0))
    with pytest.raises(TraceError, match=r"EW_BYPASS=0.*SDP_EW_DISABLE"):
        run_program(d, load_config("nv_small_rtl_tb"))


def test_program_without_enable(tmp_path):
    d = write_test(tmp_path, "reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x1);\n")
    with pytest.raises(TraceError, match="enables no unit"):
        decode_program(parse_program(d))


@given(w=st.integers(1, 64), h=st.integers(1, 64), c=st.integers(1, 200))
def test_description_round_trip(tmp_path_factory, w, h, c):
    d = write_test(tmp_path_factory.mktemp("p"), sdp_program(w, h, c))
    (op,) = decode_program(parse_program(d)).operations
    assert from_description(json.loads(json.dumps(describe(op)))) == op


def _committed_layers(data: str):
    """(stored description, decoded operation) of every layer of a committed RTL data file."""
    doc = json.loads((Path(__file__).parents[2] / "validation/data" / data).read_text())
    return [(d, from_description(d)) for row in doc["rows"] for d in row["layers"]]


def test_round_trip_of_committed_conv_and_pdp_rows():
    layers = _committed_layers("nvdla_rtl_nv_small.json")
    assert all(describe(op) == d for d, op in layers)
    assert {ConvOp, PdpOp, SdpOp} <= {type(op) for _, op in layers}


def test_round_trip_keeps_the_cbuf_reuse_bits():
    """Stored rows of split layers carry SKIP_*_RLS / *_REUSE: read back as the flags, not a dict."""
    layers = _committed_layers("nvdla_rtl_reuse.json")
    assert all(isinstance(op.reuse, CbufReuse) and from_description(describe(op)) == op for _, op in layers)
    seen = {op.reuse for _, op in layers}
    assert CbufReuse(weight_reuse=True) in seen and CbufReuse(skip_data_rls=True) in seen


@pytest.mark.parametrize("channels", [1, 3, 8])
def test_stream_units_process_whole_atoms(channels):
    """nv_small's SDP takes 8 lanes (one 8-byte atom) per pixel whatever the channel count: 1, 3 and 8
    channels cost the same (NVIDIA RTL: sdp_8192x1x1 takes 8 cycles per one-channel pixel)."""
    hw = load_config("nv_small_rtl_tb")
    layer = SdpLayer("s", 64, 16, channels, Precision.INT8, SdpSpec())
    assert simulate(layer, hw).units[next(iter(simulate(layer, hw).units))].busy == 64 * 16 * 8


def test_separate_write_channel_overlaps_reads_and_writes():
    """The testbench takes reads and writes on separate AXI channels; a DRAM shares one port."""
    tb = load_config("nv_small_rtl_tb")
    tb = tb.with_values(**{"sdp.bs_throughput": 8, "sdp.bn_throughput": 8})  # memory-bound, not lane-bound
    shared = tb.with_values(**{"memory.separate_write_channel": False})
    layer = SdpLayer("s", 64, 64, 8, Precision.INT8, SdpSpec())
    assert simulate(layer, shared).cycles > simulate(layer, tb).cycles


def _txn_of(cfg_text: str, golden: bytes) -> str:
    """The same program in nvdlav1's traceplayer syntax (hw@nvdlav1:verif/traces/traceplayer/*/input.txn):
    registers by a made-up address with the name in a comment that runs on into text, as NVIDIA's do."""
    lines = ["# load_mem(addr, offset,  file)", "load_mem 0x80000000 0x1000 in.dat #input"]
    for i, m in enumerate(re.finditer(r"reg_write\((NVDLA_\w+)\.(\w+), (\w+)\);", cfg_text)):
        unit, reg, value = m.groups()
        lines.append(f"write_reg 0xffff{i:04x} {int(value, 0):#x} #{unit}.{reg}SOME, TEXT=1")
        lines.append(f"read_reg 0xffff{i:04x} 0xffffffff {int(value, 0):#x} #{unit}.{reg}")
    lines += ["wait", f"dump_mem 0x80080000 {len(golden):#x} out.dat"]
    return "\n".join(lines) + "\n"


def test_nvdlav1_traceplayer_format(tmp_path):
    """nvdlav1's input.txn: registers named in glued comments, NVIDIA's header-and-bytes .dat files, a
    dump_mem as the golden check. The zero-stride pass-through writes every line onto the first: the
    output's first atom is the input's first (1 2 3 4 0 0 0 0); the model runs it and matches."""
    from nvdla_sim.program.run import run_program

    d = tmp_path / "txn_test"
    d.mkdir()
    golden = bytes([1, 2, 3, 4, 0, 0, 0, 0])
    (d / "input.txn").write_text(_txn_of(sdp_program(8, 8, 32), golden))
    (d / "in.dat").write_text("Data_size = 0x4\nW = 1\nPrecision = INT8\n0x01 0x02 0x03 0x04\n")
    (d / "out.dat").write_text(
        "dumped memory,start_address=0x80080000 size=0x8\nmemory type:dram\n======\n\n"
        + " ".join(f"0x{b:02x}" for b in golden) + "\n\n=====\ndump done\n"
    )  # fmt: skip
    prog = parse_program(d)
    assert prog.name == "txn_test" and len(prog.writes) == 18
    assert ("NVDLA_SDP", "D_DATA_CUBE_WIDTH_0") in {(w.unit, w.reg) for w in prog.writes}
    (check,) = prog.checks
    assert (check.kind, check.base, check.size, check.crc) == ("file", 0x80080000, 8, zlib.crc32(golden))
    assert list(initial_memory(prog).read(0x80000000, 6)) == [1, 2, 3, 4, 0, 0]
    run = run_program(d, load_config("nv_small_rtl_tb"))
    assert [c["match"] for c in run.checks] == [True]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("write_reg 0xffff0001 0x1", "a register given by address (0xffff0001) needs an address map"),
        ("write_reg 0xffff0001 0x1 #NVDLA_SDP.DATA", "no register name ending in _0"),
        ("poke 0x1 0x2", "is not one of load_mem ADDR SIZE FILE"),
        ("load_mem 0x8000000g 0x10 in.dat", "not a number"),
    ],
)
def test_bad_txn_lines_name_file_and_line(tmp_path, line, message):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "input.txn").write_text(f"# header\n{line}\n")
    with pytest.raises(TraceError, match=re.escape("input.txn:2: ") + ".*" + re.escape(message)):
        parse_program(d)
