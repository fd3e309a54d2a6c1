"""Loadables run as NVIDIA's DLA firmware runs them (nvdla_sim.program.loadable.firmware and .run).

Loadables written here (tests.unit.test_loadable's writer, descriptors packed field by field): their
outputs against numpy computed here from the same numbers, and the firmware's register accesses against
values worked out by hand from the descriptors and nvdla/sw kmd/firmware (conv.c, sdp.c, pdp.c,
scheduler.c, engine_isr.c). NVIDIA's own regression loadables and goldens: test_loadables_data."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from nvdla_cli.main import main
from nvdla_sim.config import load_config
from nvdla_sim.program.loadable.container import DataType, LoadableError
from nvdla_sim.program.loadable.descriptors import (
    CommonOpDesc,
    Consumer,
    DataCube,
    Event,
    MemType,
    NetworkDesc,
    OpType,
    PdpOpDesc,
    SrcDstSurfaceDesc,
    op_container_size,
    pack,
    sizeof,
    surface_container_size,
    unpack,
)
from nvdla_sim.program.loadable.run import run_loadable
from nvdla_sim.registers.trace_io import RegRead, RegWrite
from tests.unit.test_loadable import _firmware_blobs, write_loadable

HW = "nv_full_rtl_tb"  # 32-byte atoms, the layout the written descriptors hold


def _zero(cls):
    return unpack(cls, bytes(sizeof(cls)))


# ---- a convolution with its SDP pass -----------------------------------------------------------------

RNG = np.random.default_rng(57)
X = RNG.integers(-1, 2, size=(8, 8, 16))  # H, W, C: ternary, so sums over a 3x3x16 window reach +-144
BIAS = np.array([-20, -5, 0, 3, 17, 60, 100, 127])


def _conv_loadable(tmp_path, **kw):
    blobs = _firmware_blobs(with_offset=True)
    blobs["weights"] = bytes([1]) * 1152  # every weight 1: the output is the window's sum, in any packing
    blobs["input"] = _cube_bytes(X.astype(np.int8))
    blobs["bias"] = BIAS.astype(np.int8).tobytes().ljust(16, b"\0")
    tensor = ("out", 7, 64, 2048, DataType.INT8, (1, 8, 8, 8), (1, 256, 2048))
    path = tmp_path / "conv.nvdla"
    path.write_bytes(write_loadable(blobs, [4096], tensors=[tensor], **kw))
    return path


def _expected_conv() -> np.ndarray:
    """numpy: 3x3 all-ones kernels, pad 1, stride 1, + bias per kernel, ReLU, saturated to int8."""
    xp = np.pad(X, ((1, 1), (1, 1), (0, 0)))
    window = sum(xp[dy : dy + 8, dx : dx + 8].sum(axis=2) for dy in range(3) for dx in range(3))
    return np.clip(np.maximum(window[..., None] + BIAS, 0), -128, 127)


def test_a_convolution_loadable_computes_what_numpy_does(tmp_path):
    r = run_loadable(_conv_loadable(tmp_path), load_config(HW))
    expected = _expected_conv().astype(np.int8)
    np.testing.assert_array_equal(_read_cube(r.memory_image.read(r.memory.bases[7] + 64, 2048), expected), expected)
    # one operation on the fly (the convolution with its SDP pass), timed as the driver ran it
    (op,) = r.run.operations
    assert op.operation.processors == ("conv", "sdp") and r.cycles >= op.end > op.start > 0


def _writes(r) -> list[tuple[int, RegWrite]]:
    return [(i, c) for i, c in enumerate(r.program.commands) if isinstance(c, RegWrite)]


def _value(r, unit: str, reg: str) -> int:
    (v,) = {c.value for _, c in _writes(r) if (c.unit, c.reg) == (f"NVDLA_{unit}", reg)}
    return v


def test_the_firmware_programs_the_convolution_as_conv_c_and_sdp_c_do(tmp_path):
    r = run_loadable(_conv_loadable(tmp_path), load_config(HW), outputs=False)
    # conv.c: sizes minus one, WIDTH in [12:0] and HEIGHT in [28:16]; the descriptor's numbers
    assert _value(r, "CDMA", "D_DATAIN_SIZE_0_0") == 7 | 7 << 16
    assert _value(r, "CDMA", "D_DATAIN_SIZE_1_0") == 15
    assert _value(r, "CDMA", "D_WEIGHT_BYTES_0") == 1152 and _value(r, "CDMA", "D_WEIGHT_SIZE_0_0") == 143
    assert _value(r, "CDMA", "D_WEIGHT_SIZE_1_0") == 7 and _value(r, "CSC", "D_ATOMICS_0") == 63
    assert _value(r, "CDMA", "D_DAIN_ADDR_LOW_0_0") == r.memory.bases[5]
    assert _value(r, "CDMA", "D_WEIGHT_ADDR_LOW_0") == r.memory.bases[4]
    assert _value(r, "CDMA", "D_ZERO_PADDING_0") == 1 | 1 << 8 | 1 << 16 | 1 << 24  # left, right, top, bottom
    # sdp.c: on the fly from the convolution, to memory 7 at byte 64; x1 bias per kernel from memory 6
    assert _value(r, "SDP", "D_DST_BASE_ADDR_LOW_0") == r.memory.bases[7] + 64
    assert _value(r, "SDP", "D_FEATURE_MODE_CFG_0") & 0b11 == 0b01  # FLYING_MODE on, OUTPUT_DST memory
    assert _value(r, "SDP_RDMA", "D_BS_BASE_ADDR_LOW_0") == r.memory.bases[6]
    # BRDMA_CFG: DISABLE no, DATA_USE ALU (1 at [2:1]), one byte, per kernel, RAM_TYPE MC (1 at [5])
    assert [c.value for _, c in _writes(r) if c.reg == "D_BRDMA_CFG_0"][-1] == 1 << 1 | 1 << 5
    # scheduler.c: the SDP is enabled first (the convolution waits for its enable), then CACC .. CDMA
    order = [(c.unit, i) for i, c in _writes(r) if c.reg == "D_OP_ENABLE_0"]
    assert [u for u, _ in order] == ["NVDLA_SDP_RDMA", "NVDLA_SDP", "NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B",
                                     "NVDLA_CSC", "NVDLA_CDMA"]  # fmt: skip
    flush = [i for i, c in enumerate(r.program.commands) if c.reg == "S_CBUF_FLUSH_STATUS_0"]
    assert flush and order[1][1] < flush[0] < order[2][1]  # conv.c dla_conv_enable polls the flush first
    # engine_isr.c: CDMA's data and weight done (GLB S_INTR_STATUS bits 16 and 18, unmasked at reset) come
    # first, then the end: CACC's and SDP's group-0 done bits (20 and 0)
    status = [c for c in r.program.commands if isinstance(c, RegRead) and c.reg == "S_INTR_STATUS_0" and c.value]
    assert [c.value for c in status] == [1 << 16 | 1 << 18, 1 << 20 | 1]


def test_the_output_image_is_the_runtimes_dimg(tmp_path):
    # NvDlaImage::serialize: 'DIMG', version 0, format 40 (int8 x32), w, h, c, line, surface, size; then the
    # elements in C, H, W order
    r = run_loadable(_conv_loadable(tmp_path), load_config(HW))
    (image,) = r.outputs
    header = struct.pack("<4sI7I", b"DIMG", 0, 40, 8, 8, 8, 256, 2048, 2048)
    assert image.data == header + _expected_conv().transpose(2, 0, 1).astype(np.int8).tobytes()


def test_the_cli_runs_a_loadable_and_compares_its_golden(tmp_path, capsys):
    path = _conv_loadable(tmp_path)
    golden = tmp_path / "CONV_T_abc123" / "dla"
    golden.mkdir(parents=True)
    data = struct.pack("<4sI7I", b"DIMG", 0, 40, 8, 8, 8, 256, 2048, 2048)
    data += _expected_conv().transpose(2, 0, 1).astype(np.int8).tobytes()
    (golden / "o_000000.dimg").write_bytes(data)
    assert main(["simulate", "--loadable", str(path), "--hw", HW, "--golden", str(golden.parent)]) == 0
    out = capsys.readouterr().out
    assert "match" in out and "MISMATCH" not in out and "conv+sdp" in out
    bad = bytearray(data)
    bad[40] ^= 1
    (golden / "o_000000.dimg").write_bytes(bytes(bad))
    assert main(["simulate", "--loadable", str(path), "--hw", HW, "--golden", str(golden.parent), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["checks"][0]["mismatched_elements"] == 1 and doc["cycles"] >= doc["sequence"]["operations"][0]["end"]
    # --report: the same document, and where the time went, its parts adding up to the cycles
    assert main(["simulate", "--loadable", str(path), "--hw", HW, "--report", str(tmp_path / "rep")]) == 0
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["sequence"] == doc["sequence"]
    split = rep["sequence"]["time_split"]
    parts = ("operations_running", "register_programming_nvdla_idle", "interrupt_and_driver_nvdla_idle", "idle")
    assert sum(split[k] for k in parts) == rep["cycles"]
    assert split["operations_running"] == rep["sequence"]["operations"][0]["cycles"]
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "trace.json").exists()


# ---- two poolings in a row: the scheduler's two register groups ---------------------------------------


def _cube(address: int, w: int, h: int, c: int, bpe: int = 1) -> DataCube:
    line, surfaces = w * 32, -(-c * bpe // 32)
    return dataclasses.replace(_zero(DataCube), type=MemType.MC, address=address, size=surfaces * h * line, width=w,
                               height=h, channel=c, line_stride=line, surf_stride=h * line)  # fmt: skip


def _place(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(byte offsets, bytes) of an H x W x C cube in 32-byte atoms (int8: 32 channels an atom, fp16: 16)."""
    h, w, c = x.shape
    bpe = x.dtype.itemsize
    per = 32 // bpe
    y, i, ch = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    offsets = (ch // per) * h * w * 32 + y * w * 32 + i * 32 + (ch % per) * bpe
    return offsets, x.reshape(h, w, c, 1).view(np.uint8).reshape(h, w, c, bpe)


def _cube_bytes(x: np.ndarray) -> bytes:
    offsets, data = _place(x)
    out = np.zeros(int(offsets.max()) + x.dtype.itemsize, np.uint8)
    for k in range(x.dtype.itemsize):
        out[offsets + k] = data[..., k]
    return out.tobytes()


def _read_cube(raw: np.ndarray, like: np.ndarray) -> np.ndarray:
    offsets, _ = _place(like)
    return np.stack([raw[offsets + k] for k in range(like.dtype.itemsize)], axis=-1).view(like.dtype)[..., 0]


def _pool_loadable(tmp_path, x: np.ndarray, *, second_waits: int = 1, fused_parent: int = -1, rois: int = 1) -> object:
    bpe, precision = x.dtype.itemsize, 2 if x.dtype == np.float16 else 0
    none = Consumer(-1, 0, 0)
    consumers = [none] * 6
    consumers[OpType.PDP] = Consumer(1, Event.OP_COMPLETED, 0)  # the next PDP, when this one completes
    common = [
        dataclasses.replace(_zero(CommonOpDesc), index=0, op_type=OpType.PDP, consumers=tuple(consumers),
                            fused_parent=none),
        dataclasses.replace(_zero(CommonOpDesc), index=1, op_type=OpType.PDP, dependency_count=second_waits,
                            consumers=(none,) * 6, fused_parent=Consumer(fused_parent, 0, 0)),
    ]  # fmt: skip
    pool = dataclasses.replace(_zero(PdpOpDesc), split_num=1, pool_mode=1, pool_width=1, pool_height=1, stride_x=2,
                               stride_y=2, padding_value=(0,) * 7, precision=precision)  # fmt: skip
    ops = [dataclasses.replace(pool, partial_in_width_first=8, partial_width_first=4),
           dataclasses.replace(pool, partial_in_width_first=4, partial_width_first=2)]  # fmt: skip
    surfaces = [SrcDstSurfaceDesc(_cube(4, 8, 8, 32, bpe), _cube(5, 4, 4, 32, bpe)),
                SrcDstSurfaceDesc(_cube(5, 4, 4, 32, bpe), _cube(6, 2, 2, 32, bpe))]  # fmt: skip
    net = dataclasses.replace(
        _zero(NetworkDesc), operation_desc_index=2, surface_desc_index=3, dependency_graph_index=1, lut_data_index=-1,
        roi_array_index=-1, surface_index=-1, stat_list_index=-1, op_head=(-1, -1, -1, 0, -1, -1), num_rois=rois,
        num_operations=2, num_addresses=7, input_layer=-1,
    )  # fmt: skip
    blobs = {
        "net": pack(net),
        "deps": b"".join(pack(c) for c in common),
        "ops": b"".join(pack(o).ljust(op_container_size(), b"\0") for o in ops),
        "surfs": b"".join(pack(s).ljust(surface_container_size(), b"\0") for s in surfaces),
        "input": _cube_bytes(x),
    }
    path = tmp_path / "pools.nvdla"
    path.write_bytes(write_loadable(blobs, [512 * bpe, 128 * bpe]))
    return path


def _maxpool2(x: np.ndarray) -> np.ndarray:
    h, w, c = x.shape
    return x.reshape(h // 2, 2, w // 2, 2, c).max(axis=(1, 3))


@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_two_poolings_use_both_register_groups_and_compute_what_numpy_does(tmp_path, dtype):
    # FP16 max pooling chooses an element, exactly (its average would round in the hardware's adders)
    x = (RNG.integers(-128, 128, size=(8, 8, 32)) * (1 if dtype == np.int8 else 0.37)).astype(dtype)
    r = run_loadable(_pool_loadable(tmp_path, x), load_config(HW))
    expected = _maxpool2(_maxpool2(x))
    got = _read_cube(r.memory_image.read(r.memory.bases[6], 128 * x.dtype.itemsize), expected)
    np.testing.assert_array_equal(got, expected)
    cmds = r.program.commands
    pointers = [(i, c.value) for i, c in enumerate(cmds) if isinstance(c, RegWrite) and c.unit == "NVDLA_PDP"
                and c.reg == "S_POINTER_0"]  # fmt: skip
    enables = [
        i for i, c in enumerate(cmds) if isinstance(c, RegWrite) and (c.unit, c.reg) == ("NVDLA_PDP", "D_OP_ENABLE_0")
    ]
    ends = [i for i, c in enumerate(cmds) if isinstance(c, RegRead) and c.reg == "S_INTR_STATUS_0" and c.value]
    # scheduler.c: each program and each enable sets the producer pointer; the first pooling goes to group 0
    # (the consumer pointer's), the second is dequeued into group 1 and programmed while the first runs
    # (before the first interrupt), and enabled only after it (its dependency: the first's completion)
    assert [v for _, v in pointers] == [0, 0, 1, 1] and pointers[2][0] < ends[0] < pointers[3][0] < enables[1]
    assert [cmds[i].value for i in ends] == [1 << 4, 1 << 5]  # PDP_DONE_STATUS0, then 1
    first, second = r.run.operations
    assert second.start >= first.end and r.cycles >= second.end


def test_a_dependency_never_met_is_a_one_line_error(tmp_path):
    x = np.zeros((8, 8, 32), np.int8)
    with pytest.raises(LoadableError, match="waits for an interrupt, but no enabled operation can raise one"):
        run_loadable(_pool_loadable(tmp_path, x, second_waits=2), load_config(HW))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"fused_parent": 0}, "pdp1's fused parent is operation 0, not a SDP operation"),
        ({"rois": 2}, "2 ROIs, dynamic ROI 0, statistics list -1: only one static ROI"),
    ],
)
def test_descriptors_the_firmware_refuses_are_one_line_errors(tmp_path, kw, message):
    with pytest.raises(LoadableError, match=message):
        run_loadable(_pool_loadable(tmp_path, np.zeros((8, 8, 32), np.int8), **kw), load_config(HW))


def test_a_loadable_for_another_atom_size_is_refused(tmp_path, capsys):
    # nv_small's atom is 8 bytes: the 8x8x16 int8 input needs two surfaces, past the cube's 2048 bytes
    path = _conv_loadable(tmp_path)
    assert main(["simulate", "--loadable", str(path), "--hw", "nv_small_rtl_tb"]) == 2
    err = capsys.readouterr().err
    assert "conv0's input 8x8x16" in err and "8-byte atoms: a loadable compiled for another build?" in err
    assert err.count("\n") == 1


def test_flags_that_need_a_loadable(capsys):
    assert main(["simulate", "--golden", "x"]) == 2
    assert "--golden goes with --loadable" in capsys.readouterr().err
    assert main(["simulate", "--loadable", "x", "--m", "4"]) == 2
    assert "--m describes a layer" in capsys.readouterr().err


def test_the_firmwares_accesses_written_as_a_driver_log_replay_the_same(tmp_path, capsys):
    """--registers writes the firmware's accesses as a kernel-mode driver's log (byte addresses of the build's
    map); --trace-test reads it back as any driver's log and times it to the same cycles."""
    path, log = _conv_loadable(tmp_path), tmp_path / "conv" / "output.txn"
    assert main(["simulate", "--loadable", str(path), "--hw", HW, "--registers", str(log), "--json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    text = log.read_text()
    assert text.startswith("read_reg 0x") and "write_reg 0x" in text and "# NVDLA_CDMA.D_OP_ENABLE_0" in text
    assert main(["simulate", "--trace-test", str(log), "--hw", HW, "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["cycles"] == direct["cycles"] and len(replayed["sequence"]["operations"]) == 1


def _sc_log(r, hw, corrupt: bool = False) -> str:
    """A virtual platform's sc.log of a run, in nvdla/vp's adaptor format: NVDLA's reads of the loadable's
    memories (8-byte transfers, each group a little-endian word), the firmware's register accesses, and
    NVDLA's writes of the output."""
    from nvdla_sim.registers.addresses import address_map

    am = address_map(hw.driver.address_map)

    def line(port: str, write: bool, addr: int, data: bytes) -> str:
        words = " ".join(f"{int.from_bytes(data[i : i + 4], 'little'):08x}" for i in range(0, len(data), 4))
        return f"100 ms: Info: nvdla.{port}_adaptor: GP: iswrite={int(write)} addr={addr:#x} len={len(data)} " \
               f"data=0x {words} resp=TLM_OK_RESPONSE"  # fmt: skip

    out = ["100 ms: Info: NV_NVDLA_cdma.cpp: a C model message, left out"]
    lo = r.net.loadable
    for m in lo.memories:
        data = lo.contents(m.id).ljust(-(-m.size // 8) * 8, b"\0") if m.contents else b""
        out += [line("dbb", False, r.memory.bases[m.id] + i, data[i : i + 8]) for i in range(0, len(data), 8)]
    for c in r.program.commands:
        out.append(line("csb", isinstance(c, RegWrite), am.address(c.unit, c.reg), c.value.to_bytes(4, "little")))
    base = r.memory.bases[7] + 64
    written = bytearray(r.memory_image.read(base, 2048))
    if corrupt:
        written[3] ^= 0x40
    out += [line("dbb", True, base + i, bytes(written[i : i + 8])) for i in range(0, 2048, 8)]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("corrupt", [False, True])
def test_a_virtual_platforms_log_replays_and_checks_every_byte_it_wrote(tmp_path, capsys, corrupt):
    """sc.log: the csb adaptor's lines are the driver's accesses by address, the dbb adaptor's NVDLA's memory
    traffic; the operations run on the memory as first read, and each byte the log wrote is compared."""
    from nvdla_sim.program.run import run_program

    hw = load_config(HW)
    r = run_loadable(_conv_loadable(tmp_path), hw)
    log = tmp_path / "vp" / "sc.log"
    log.parent.mkdir()
    log.write_text(_sc_log(r, hw, corrupt=corrupt))
    run = run_program(log.parent, hw)
    assert run.cycles == r.cycles and len(run.sequence.operations) == 1
    (check,) = run.checks
    assert check["bytes_written"] == 2048 and check["mismatched_bytes"] == int(corrupt)
    assert main(["simulate", "--trace-test", str(log), "--hw", HW]) == int(corrupt)  # exit 1 on a difference
    assert ("MISMATCH" in capsys.readouterr().out) == corrupt


def test_a_virtual_platforms_log_with_a_failed_transfer_is_refused(tmp_path):
    from nvdla_sim.errors import TraceError
    from nvdla_sim.program.run import run_program

    log = tmp_path / "sc.log"
    log.write_text("1 ms: Info: nvdla.csb_adaptor: GP: iswrite=1 addr=0x1004 len=4 data=0x 00000000 "
                   "resp=TLM_ADDRESS_ERROR_RESPONSE\n")  # fmt: skip
    with pytest.raises(TraceError, match=r"sc.log:1: the transfer failed \(TLM_ADDRESS_ERROR_RESPONSE\)"):
        run_program(log, load_config(HW))


def test_the_linux_driver_profile_adds_its_measured_wake_up_to_each_interrupt(tmp_path):
    """linux_x86_vm: each interrupt's reaction is the thread wake-up bench_host.py measured (handoff_us in
    validation/data/host_x86_vm.json), at the config's clock: one operation, one wake-up more than the
    testbench's profile."""
    from nvdla_sim.config import DRIVER_INTERRUPT_US

    measured = json.loads((Path(__file__).resolve().parents[2] / "validation/data/host_x86_vm.json").read_text())
    assert DRIVER_INTERRUPT_US["linux_x86_vm"] == measured["handoff_us"]
    path = _conv_loadable(tmp_path)
    base = run_loadable(path, load_config(HW), outputs=False)
    hw = load_config(HW).with_values(**{"driver.profile": "linux_x86_vm"})
    linux = run_loadable(path, hw, outputs=False)
    assert linux.run.costs[2] == measured["handoff_us"] * hw.clock_mhz
    assert linux.cycles - base.cycles == round(measured["handoff_us"] * hw.clock_mhz)


def test_the_adaptors_data_field_as_nvdla_vp_prints_it(tmp_path):
    """gp2str (nvdla/vp): whole words as 32-bit numbers, the bytes before the first word boundary and after
    the last one by one (ab_cd), a byte not enabled as XX; CV-SRAM transfers are read and left out of the
    check; a malformed group, a long word or a wrong length is a one-line error."""
    from nvdla_sim.errors import TraceError
    from nvdla_sim.program.run import run_program
    from nvdla_sim.registers.trace_io import MemAccess, memory_from_transfers, parse_program

    def log(*lines: str) -> Path:
        p = tmp_path / "sc.log"
        p.write_text("\n".join([*lines, "1 ms: Info: nvdla.csb_adaptor: GP: iswrite=1 addr=0x1004 len=4 "
                                "data=0x 00000000 resp=TLM_OK_RESPONSE"]) + "\n")  # fmt: skip
        return p

    p = log("1 ms: Info: nvdla.dbb_adaptor: GP: iswrite=0 addr=0x80000003 len=6 data=0x ab 11223344 cd "
            "resp=TLM_OK_RESPONSE",
            "1 ms: Info: nvdla.dbb_adaptor: GP: iswrite=1 addr=0x80000010 len=4 data=0x 01_XX_03_04 "
            "resp=TLM_OK_RESPONSE",
            "1 ms: Info: nvdla.sram_adaptor: GP: iswrite=1 addr=0x40 len=4 data=0x 00000001 resp=TLM_OK_RESPONSE")  # fmt: skip
    prog = parse_program(p, address_map="nv_small")
    reads = [c for c in prog.commands if isinstance(c, MemAccess)]
    assert reads[0].data == bytes([0xAB, 0x44, 0x33, 0x22, 0x11, 0xCD]) and reads[0].enabled is None
    assert reads[1].enabled == (True, False, True, True) and reads[2].sram
    first, last, wrote = memory_from_transfers(prog)
    assert first.read(0x80000003, 6).tobytes() == reads[0].data
    assert last.read(0x80000010, 4).tolist() == [1, 0, 3, 4] and wrote[0x80000010 // 4096].sum() == 3
    for bad, message in [
        ("data=0x 123456789", "'123456789' is not a data group"),
        ("data=0x zz", "not an adaptor transfer"),
        ("len=8 data=0x 11223344", "len=8, but its data holds 4 bytes"),
    ]:
        line = f"1 ms: Info: nvdla.dbb_adaptor: GP: iswrite=0 addr=0x0 len=4 {bad} resp=TLM_OK_RESPONSE"
        line = line.replace("len=4 len=8", "len=8")
        with pytest.raises(TraceError, match=message):
            run_program(log(line), load_config("nv_small_rtl_tb"))


def test_switching_the_host_profile_brings_its_figures():
    """with_values(host.profile) takes the new profile's figures, not the old ones under the new name; a model
    switch leaves the other model's table."""
    hw = load_config("nv_full").with_values(**{"host.profile": "x86_vm_measured"})
    assert hw.host.model == "per_element" and hw.host.mem_gbs == 23.0 and "measured" in hw.host.source
    back = hw.with_values(**{"host.model": "roofline"})
    assert back.host.model == "roofline" and back.host.ns_per_element == ()
