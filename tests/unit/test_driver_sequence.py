"""A driver's register log of a whole network (issue 57): the address maps, the decoder of the driver's
sequence (both register groups, SDP enabled before its convolution, ends read from S_INTR_STATUS) and the
replay in time. The logs here are built from committed operations (NVIDIA's nv_small trace tests as the
RTL rows describe them) in the order NVIDIA's firmware programs them (docs/driver_programs.md); each
expected time is the hand sum of the driver's costs and the model's cycles of each operation alone."""

import json
import re
from pathlib import Path

import pytest

from nvdla_cli.main import main
from nvdla_sim.config import DRIVER_PROFILES, load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import Memory
from nvdla_sim.processors import register_view
from nvdla_sim.processors.registers import RegisterWriter
from nvdla_sim.program.decode import describe, from_description
from nvdla_sim.program.emit import emit_program
from nvdla_sim.program.run import operation_timing, run_program
from nvdla_sim.registers.addresses import address_map
from nvdla_sim.registers.trace_io import parse_program

DATA = Path(__file__).resolve().parents[2] / "validation" / "data"
HW = load_config("nv_small_rtl_tb")
AM = address_map("nv_small")
W, R, IRQ = DRIVER_PROFILES["testbench"]
STATUS = AM.address("NVDLA_GLB", "S_INTR_STATUS_0")
ROWS = {r["name"]: r for r in json.loads((DATA / "nvdla_rtl_nv_small.json").read_text())["rows"]}
CONV = from_description(ROWS["dc_1x1x8_1x1x8x1_int8_0"]["layers"][0])  # with its SDP pass on the fly
CONV2 = from_description(ROWS["dc_13x15x64_5x3x64x16_int8_0"]["layers"][0])
POOL = from_description(ROWS["pdp_1x1x1_3x3_ave_int8_0"]["layers"][0])
_REG = re.compile(r"^reg_write\(NVDLA_(\w+)\.(\w+), (0x[0-9a-f]+)\);$")
# GLB S_INTR_STATUS bits (nvdla/sw kmd/firmware/include/opendla_small.h): SDP group g bit g, PDP 4 + g,
# CACC (a convolution's end) 20 + g; a convolution with its SDP pass raises both
SDP_DONE, PDP_DONE, CACC_DONE = 0, 4, 20


def conv_done(group: int) -> int:
    return 1 << (SDP_DONE + group) | 1 << (CACC_DONE + group)


# the order NVIDIA's firmware enables units (kmd/firmware sdp.c, pdp.c, conv.c): a reader before its unit,
# a convolution's SDP pass before the convolution, CDMA last
FIRMWARE_ENABLES = ["SDP_RDMA", "SDP", "PDP_RDMA", "PDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"]


def test_address_maps_agree_with_the_logs_and_the_unit_bases():
    # nv_small's units from 0x1000 (opendla_small.h, as the KMD's logs write them: 0x7004 CACC's pointer)
    assert AM.register_at(0x7004, "x") == ("NVDLA_CACC", "S_POINTER_0")
    assert AM.register_at(0x100C, "x") == ("NVDLA_GLB", "S_INTR_STATUS_0")
    full = address_map("nv_full")
    # nv_full's CSB map (NVDLA_FACTS: GLB 0x0000, MCIF 0x2000, SRAMIF 0x3000, BDMA 0x4000, CDMA 0x5000, ...)
    for unit, base in (("GLB", 0x0), ("MCIF", 0x2000), ("CVIF", 0x3000), ("BDMA", 0x4000), ("CDMA", 0x5000)):
        assert min(a for (u, _), a in full.addresses.items() if u == f"NVDLA_{unit}") == base
    # gem5-NVDLA's traceplayer lines give the word address and the byte address in the comment
    assert full.register_at(0x2401 << 2, "x") == ("NVDLA_CACC", "S_POINTER_0")  # `0xffff2401 #0x9004`
    with pytest.raises(NvdlaError, match=r"log:7: address 0x7ffc is no NVDLA register in the nv_small"):
        AM.register_at(0x7FFC, "log:7")


def _registers(op, group: int) -> list[str]:
    """The op's register writes as the firmware issues them: S_POINTER of each unit, its registers, the
    enables (last unit of the pipeline first)."""
    lines: list[str] = []
    emitted = register_view(op).emit(RegisterWriter(lines), op, HW, None, "t")
    writes = [m.groups() for m in map(_REG.match, lines) if m]
    units = dict.fromkeys([u for u, _, _ in writes] + list(emitted.enables))
    out = [_w(u, "S_POINTER_0", group) for u in units if u != "GLB"]
    out += [_w(u, reg, int(v, 16)) for u, reg, v in writes]
    return out + [_w(u, "D_OP_ENABLE_0", 1) for u in sorted(emitted.enables, key=FIRMWARE_ENABLES.index)]


def _w(unit: str, reg: str, value: int) -> str:
    return f"write_reg {AM.address('NVDLA_' + unit, reg):#x} {value:#010x}  # actual addr: ..."


def _done(bits: int) -> list[str]:
    """The driver's interrupt service: it reads S_INTR_STATUS and writes it back to clear it."""
    return [f"read_reg {STATUS:#x} 0xffffffff {bits:#010x}", _w("GLB", "S_INTR_STATUS_0", bits)]


def _log(tmp_path, lines: list[str]):
    d = tmp_path / "net"
    d.mkdir()
    (d / "output.txn").write_text("\n".join(lines) + "\n")
    return d


def test_sequential_log_decodes_and_replays_to_the_hand_sum(tmp_path):
    first, second = _registers(CONV, 0), _registers(POOL, 0)
    log = _log(tmp_path, first + _done(conv_done(0)) + second + _done(1 << PDP_DONE))
    run = run_program(log, HW)
    ops = run.sequence.operations
    assert [o.operation.processors for o in ops] == [("conv", "sdp"), ("pdp",)]
    assert [describe(o) for o in run.decoded.operations] == [describe(CONV), describe(POOL)]
    c1, c2 = (operation_timing(op, HW).cycles for op in (CONV, POOL))
    # writes of the first op, its run, the status read and the clear, the second op's writes, its run, ...
    want = len(first) * W + c1 + IRQ + R + W + len(second) * W + c2 + IRQ + R + W
    assert run.cycles == round(want)
    assert ops[1].start == pytest.approx(len(first) * W + c1 + R + W + len(second) * W)
    assert run.sequence.busy_by_processor() == {"conv": c1, "sdp": c1, "pdp": c2}


def test_ping_pong_groups_run_the_next_op_when_the_processor_frees(tmp_path):
    """The second convolution is programmed into group 1 and enabled while the first runs: it starts at the
    first one's end, and the driver reads both ends."""
    first, second = _registers(CONV2, 0), _registers(CONV, 1)
    run = run_program(_log(tmp_path, first + second + _done(conv_done(0)) + _done(conv_done(1))), HW)
    a, b = run.sequence.operations
    c1, c2 = operation_timing(CONV2, HW).cycles, operation_timing(CONV, HW).cycles
    assert (a.operation.groups, b.operation.groups) == ((0, 0), (1, 1))
    assert c1 > len(second) * W  # the second is enabled while the first runs ...
    assert b.start == pytest.approx(a.end) == pytest.approx(len(first) * W + c1)  # ... and waits for it
    # the first end's read and clear happen while the second runs; the second's read waits for it
    assert run.cycles == round(len(first) * W + c1 + c2 + R + W)


def test_groups_run_alternately_whatever_the_enable_order(tmp_path):
    """Group 1's pooling is enabled before group 0's: the hardware still runs group 0's first."""
    g1, g0 = _registers(POOL, 1), _registers(POOL, 0)
    run = run_program(_log(tmp_path, g1 + g0 + _done(1 << PDP_DONE) + _done(1 << (PDP_DONE + 1))), HW)
    by_group = {o.operation.groups[0]: o for o in run.sequence.operations}
    assert by_group[0].start == pytest.approx((len(g1) + len(g0)) * W)
    assert by_group[1].start == pytest.approx(by_group[0].end)
    assert by_group[1].operation.ended_at > by_group[0].operation.ended_at


def test_cli_prints_the_network_cycles_and_each_operation(tmp_path, capsys):
    log = _log(tmp_path, _registers(CONV, 0) + _done(conv_done(0)) + _registers(POOL, 0) + _done(1 << PDP_DONE))
    assert main(["simulate", "--trace-test", str(log / "output.txn"), "--hw", "nv_small_rtl_tb", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cycles"] == run_program(log, HW).cycles
    seq = doc["sequence"]
    assert seq["driver_profile"] == "testbench" and [o["processors"] for o in seq["operations"]] == [
        ["conv", "sdp"],
        ["pdp"],
    ]
    assert seq["register_writes"] == len(_registers(CONV, 0)) + len(_registers(POOL, 0)) + 2
    assert main(["simulate", "--trace-test", str(log), "--hw", "nv_small_rtl_tb"]) == 0
    assert "as the driver ran it" in capsys.readouterr().out


def test_bad_logs_get_one_line_errors(tmp_path):
    d = tmp_path / "a"
    d.mkdir()
    (d / "output.txn").write_text("write_reg 0x7ffc 0x1\n")
    with pytest.raises(NvdlaError, match=r"output.txn:1: address 0x7ffc is no NVDLA register"):
        parse_program(d, address_map="nv_small")
    with pytest.raises(NvdlaError, match=r"output.txn:1: a register given by address .* \[driver\] address_map"):
        parse_program(d)
    # group 1 used twice and group 0 once more than never: the hardware alternates from group 0
    lines = _registers(POOL, 1) + _registers(POOL, 1) + _done(1 << (PDP_DONE + 1))
    with pytest.raises(NvdlaError, match=r"pdp enables 0 operations in register group 0 and 2 in group 1"):
        run_program(_log(tmp_path, lines), HW)


SDP_TO_PDP, PDP_ON_THE_FLY = (from_description(d) for d in ROWS["sdp_pdp_32x16x32_pass_through_int8_0"]["layers"])
SDP_ALONE = from_description(ROWS["sdp_1x1x1_pass_through_int8"]["layers"][0])


def test_a_chain_into_pdp_ends_at_both_bits_and_leaves_sdp_order_intact(tmp_path):
    """An SDP pass handing its output to PDP raises SDP's and PDP's done bits; both belong to the chain, so
    the offline SDP passes after it take the next SDP bits (group 1, then group 0)."""
    chain = _registers(PDP_ON_THE_FLY, 0) + _registers(SDP_TO_PDP, 0)
    lines = chain + _registers(SDP_ALONE, 1) + _done(1 << SDP_DONE | 1 << PDP_DONE)
    lines += _registers(SDP_ALONE, 0) + _done(1 << (SDP_DONE + 1)) + _done(1 << SDP_DONE)
    run = run_program(_log(tmp_path, lines), HW)
    ops = run.sequence.operations
    assert [o.operation.processors for o in ops] == [("sdp", "pdp"), ("sdp",), ("sdp",)]
    assert all(o.operation.ended_at is not None for o in ops)
    # the offline pass in group 1 runs after the chain (SDP is busy), the one in group 0 after it
    assert ops[1].start == pytest.approx(ops[0].end) and ops[2].start >= ops[1].end


def test_interrupt_cost_and_bits_shown_again_without_a_clear(tmp_path):
    """The driver's interrupt cycles are added where a read waits for an end; a done bit read again
    before the driver clears it is not a second end."""
    hw = HW.with_values(**{"driver.interrupt_cycles": 100})
    first, second = _registers(POOL, 0), _registers(POOL, 1)
    status_again = [f"read_reg {STATUS:#x} 0xffffffff {1 << PDP_DONE:#010x}"]
    lines = first + status_again + second + _done(1 << PDP_DONE) + _done(1 << (PDP_DONE + 1))
    run = run_program(_log(tmp_path, lines), hw)
    a, b = run.sequence.operations
    c = operation_timing(POOL, HW).cycles
    assert a.operation.ended_at == len(first) and b.operation.ended_at > a.operation.ended_at
    assert a.seen == pytest.approx(len(first) * W + c + 100 + R)  # the first read waits for the end + 100
    # the second is enabled at a.seen + its writes and runs c; the read showing bit 4 again and its clear
    # pass while it runs; the last read waits for its end + 100, then the clear
    assert b.end == pytest.approx(a.seen + len(second) * W + c)
    assert run.cycles == round(b.end + 100 + R + W)


def test_trace_tests_with_checks_stay_trace_tests(tmp_path):
    """A traceplayer test that reads S_INTR_STATUS without `wait` and checks a dump is not a driver's log;
    its comment-less reads are skipped without an address map, as before."""
    from nvdla_sim.registers.trace_io import Check

    d = tmp_path / "t"
    d.mkdir()
    (d / "golden.dat").write_text("0x00 0x00\n")
    (d / "input.txn").write_text(
        "write_reg 0xffff2c02 0x1 #NVDLA_PDP.D_OP_ENABLE_0\n"
        "read_reg 0xffff0003 0x10 0x10 #NVDLA_GLB.S_INTR_STATUS_0\n"
        "read_reg 0xffff0003 0xffffffff 0x0\n"
        "dump_mem 0x80000000 0x2 golden.dat\n"
    )
    prog = parse_program(d)
    assert not prog.driver_log and any(isinstance(c, Check) for c in prog.commands)
    assert len(prog.commands) == 3  # the write, the named read, the check


def test_a_log_cut_short_names_its_file_and_line(tmp_path):
    sdp_first = [line for line in _registers(CONV, 0) if "0x3010" not in line]  # no CDMA enable: cut short
    log = _log(tmp_path, sdp_first)
    with pytest.raises(NvdlaError, match=r"output.txn:\d+: 1 sdp operations take their input on the fly .*cut short"):
        run_program(log, HW)


def test_bdma_transfers_run_as_the_group_their_launch_starts(tmp_path):
    """nv_full: two transfers queued by CFG_OP.EN, started by CFG_LAUNCH0, end at BDMA's group-0 done bit
    (S_INTR_STATUS bit 6); the launch is one operation whose transfers run in turn; a launch with nothing
    queued is refused."""
    from nvdla_sim.processors.bdma.registers import BdmaOp, write_bdma
    from nvdla_sim.units.memory_format import Surface

    full = load_config("nv_full")
    am = address_map("nv_full")
    a = BdmaOp(Surface(0x80000000, 256, 2048), Surface(0x81000000, 256, 2048), 256, 8, 1, Memory.DRAM, Memory.DRAM)
    b = BdmaOp(Surface(0x80010000, 64, 64), Surface(0x81010000, 64, 64), 64, 1, 1, Memory.DRAM, Memory.DRAM)
    writes: list[str] = []
    for op in (a, b):
        lines: list[str] = []
        write_bdma(RegisterWriter(lines), op)
        writes += [w for w in lines if "CFG_LAUNCH" not in w]  # queue both, launch once
    log = [
        f"write_reg {am.address('NVDLA_' + u, r):#x} {int(v, 16):#x}"
        for u, r, v in (_REG.match(w).groups() for w in writes)
    ]
    log.append(f"write_reg {am.address('NVDLA_BDMA', 'CFG_LAUNCH0_0'):#x} 0x1")
    status = am.address("NVDLA_GLB", "S_INTR_STATUS_0")
    log += [f"read_reg {status:#x} 0xffffffff 0x40", f"write_reg {status:#x} 0x40"]
    run = run_program(_log(tmp_path, log), full)
    (t,) = run.sequence.operations
    assert t.operation.processors == ("bdma",) and t.operation.ops == (a, b)
    each = [operation_timing(op, full).cycles for op in (a, b)]
    assert t.cycles == sum(each) and t.start == pytest.approx(len(log[:-2]) * W)
    (tmp_path / "c").mkdir()
    with pytest.raises(
        NvdlaError, match=r"output.txn:1: NVDLA_BDMA.CFG_LAUNCH0_0 launches a group with nothing queued"
    ):
        run_program(_log(tmp_path / "c", [log[-3]]), full)


def test_overlap_and_the_timeline(tmp_path, capsys):
    """A convolution and a pooling enabled back to back run at once on their own processors: the pooling
    runs inside the convolution (each timed alone), so the overlap is the pooling's whole run; the Perfetto
    trace holds a track per processor and the driver's bursts and waits."""
    conv, pool = _registers(CONV2, 0), _registers(POOL, 0)
    lines = conv + pool + _done(conv_done(0)) + _done(1 << PDP_DONE)
    log = _log(tmp_path, lines)
    seq = run_program(log, HW).sequence
    c, p = seq.operations
    assert c.start == pytest.approx(len(conv) * W) and p.start == pytest.approx((len(conv) + len(pool)) * W)
    assert p.end < c.end and seq.overlap_cycles() == round(p.end - p.start)
    trace = tmp_path / "t.json"
    assert main(["simulate", "--trace-test", str(log), "--hw", "nv_small_rtl_tb", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = [e["name"] for e in events if e.get("ph") == "X"]
    assert sum(n.startswith("net.") for n in names) == 3  # pdp; conv+sdp on two tracks
    assert any(n.startswith("wait for") for n in names) and any(n.startswith("registers (") for n in names)
    capsys.readouterr()


def test_trace_of_a_trace_test_is_refused(tmp_path, capsys):
    folder = emit_program("pool", POOL, [], [], HW).write(tmp_path)
    args = ["simulate", "--trace-test", str(folder), "--hw", "nv_small_rtl_tb", "--trace", str(tmp_path / "t.json")]
    assert main(args) == 2
    assert "--trace with --trace-test writes the timeline of a driver's log" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_cdma_input_conversion_is_taken_only_as_the_identity(tmp_path):
    """NVIDIA's compiler enables CDMA's input conversion as the identity (the public LeNet-5 log: scale 1,
    offset 0, truncate 0), which changes nothing; any other conversion is refused, not ignored."""
    cvt = [_w("CDMA", "D_CVT_CFG_0", 1), _w("CDMA", "D_CVT_SCALE_0", 1)]
    first = _registers(CONV, 0)
    identity = [*first[:-1], *cvt, *first[-1:]]  # before CDMA's enable
    run = run_program(_log(tmp_path, identity + _done(conv_done(0))), HW)
    assert [describe(o) for o in run.decoded.operations] == [describe(CONV)]
    scaled = [*first[:-1], _w("CDMA", "D_CVT_CFG_0", 1), _w("CDMA", "D_CVT_SCALE_0", 3), *first[-1:]]
    (tmp_path / "b").mkdir()
    with pytest.raises(NvdlaError, match=r"CDMA's input conversion \(D_CVT_CFG.EN with scale 3, offset 0"):
        run_program(_log(tmp_path / "b", scaled + _done(conv_done(0))), HW)


def test_time_split_of_a_sequential_log_is_the_hand_split(tmp_path):
    """Where the time goes, by hand: two operations one after the other with a 100-cycle interrupt. The
    operations run c1 + c2; every access happens while NVDLA is idle (the first op's writes; the status read,
    its clear and the second's writes; the last read and clear); each end costs the interrupt's 100."""
    hw = HW.with_values(**{"driver.interrupt_cycles": 100})
    first, second = _registers(CONV, 0), _registers(POOL, 0)
    run = run_program(_log(tmp_path, first + _done(conv_done(0)) + second + _done(1 << PDP_DONE)), hw)
    split = run.sequence.time_split()
    c1, c2 = (operation_timing(op, HW).cycles for op in (CONV, POOL))
    assert split.running == c1 + c2  # whole cycles, as the model times each operation
    assert split.registers == round((len(first) + len(second)) * W + 2 * (R + W))
    assert split.interrupt == 200 and split.hidden_registers == 0
    assert split.running + split.registers + split.interrupt + split.idle == run.cycles  # exactly
    assert run.sequence.to_dict()["time_split"]["interrupt_and_driver_nvdla_idle"] == 200


def test_time_split_hides_the_next_groups_writes(tmp_path):
    """Ping-pong: the second convolution's writes go to group 1 while the first runs, so they are hidden;
    the first end's read and clear are hidden too (the second runs then)."""
    first, second = _registers(CONV2, 0), _registers(CONV, 1)
    run = run_program(_log(tmp_path, first + second + _done(conv_done(0)) + _done(conv_done(1))), HW)
    split = run.sequence.time_split()
    assert split.hidden_registers == round(len(second) * W + R + W)
    assert abs(split.registers - (len(first) * W + R + W)) <= 1  # the first op's writes, the last read + clear
    assert split.running + split.registers + split.interrupt + split.idle == run.cycles


def test_report_writes_where_the_time_goes(tmp_path, capsys):
    """`--report DIR` of a driver's log: report.json is the --json document, report.html its time split
    (the hand split of test_time_split_of_a_sequential_log_is_the_hand_split: no interrupt, every access
    exposed) and operations, trace.json the Perfetto timeline."""
    first, second = _registers(CONV, 0), _registers(POOL, 0)
    log = _log(tmp_path, first + _done(conv_done(0)) + second + _done(1 << PDP_DONE))
    out = tmp_path / "rep"
    assert main(["simulate", "--trace-test", str(log), "--hw", "nv_small_rtl_tb", "--report", str(out)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--trace-test", str(log), "--hw", "nv_small_rtl_tb", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads((out / "report.json").read_text()) == printed
    c1, c2 = (operation_timing(op, HW).cycles for op in (CONV, POOL))
    split = printed["sequence"]["time_split"]
    assert split["operations_running"] == c1 + c2
    assert split["register_programming_nvdla_idle"] == round((len(first) + len(second)) * W + 2 * (R + W))
    page = (out / "report.html").read_text()
    assert f"<td>{c1 + c2:,}</td>" in page and 'id="operations"' in page and "net.1" in page
    assert "plot-timeline" in page
    names = [e["name"] for e in json.loads((out / "trace.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    assert sum(n.startswith("net.") for n in names) == 3


def test_report_is_refused_where_there_is_no_sequence(tmp_path, capsys):
    folder = emit_program("pool", POOL, [], [], HW).write(tmp_path)
    args = ["simulate", "--trace-test", str(folder), "--hw", "nv_small_rtl_tb", "--report", str(tmp_path / "r")]
    assert main(args) == 2
    assert "--report with --trace-test writes the timeline of a driver's log" in capsys.readouterr().err
    assert main(["simulate", "--op", "matmul", "--m", "8", "--k", "8", "--n", "8", "--report", str(tmp_path)]) == 2
    assert "--report" in capsys.readouterr().err
    (tmp_path / "afile").write_text("")
    log = _log(tmp_path, _registers(POOL, 0) + _done(1 << PDP_DONE))
    assert main(["simulate", "--trace-test", str(log), "--report", str(tmp_path / "afile")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
