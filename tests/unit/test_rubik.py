"""Rubik (nv_full's reshape engine): its three modes executed on memory against element-level numpy references
written here from NVDLA's feature layout (doc/hw/format.rst: element (w, h, c) of a cube at
base + (c // k) x surface stride + h x line stride + w x 32 + (c % k) x e, k = 32 / e elements an atom of e-byte
elements; a plane's element (w, h) at base + h x line stride + w x e), its registers written and decoded back, its
refusals, and its request count by hand. NVIDIA's own contract (RBK_L0_0) is checked against its golden in
test_loadables_data.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim.config import load_config
from nvdla_sim.engine.stats import Unit
from nvdla_sim.errors import ConfigError, NvdlaError
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.processors import fixed_latency, simulate
from nvdla_sim.processors.registers import ExecState
from nvdla_sim.processors.rubik import RubikLayer
from nvdla_sim.processors.rubik.execute import execute_rubik
from nvdla_sim.processors.rubik.registers import RubikMode, RubikOp, RubikPlane
from nvdla_sim.program.decode import decode_program, describe, from_description
from nvdla_sim.program.emit import emit_program
from nvdla_sim.program.run import run_program
from nvdla_sim.registers.trace_io import SparseMemory, parse_program

FULL = load_config("nv_full")
SRC, DST = 0x8000_0000, 0x8100_0000
DTYPE = {Precision.INT8: np.int8, Precision.INT16: np.int16, Precision.FP16: np.float16}


def _layout(cube: np.ndarray, line: int, surf: int) -> np.ndarray:
    """A W x H x C cube's bytes in NVDLA's feature layout (padding lanes zero)."""
    w, h, c = cube.shape
    e = cube.dtype.itemsize
    k = 32 // e
    s = -(-c // k)
    out = np.zeros((s - 1) * surf + (h - 1) * line + w * 32, np.uint8)
    raw = np.zeros((w, h, s * k), cube.dtype)
    raw[:, :, :c] = cube
    for si in range(s):
        for hi in range(h):
            atoms = raw[:, hi, si * k : (si + 1) * k].copy().view(np.uint8).reshape(-1)
            out[si * surf + hi * line : si * surf + hi * line + w * 32] = atoms
    return out


def _cube(mem: SparseMemory, base: int, w: int, h: int, c: int, line: int, surf: int, dtype) -> np.ndarray:
    e = np.dtype(dtype).itemsize
    k = 32 // e
    out = np.zeros((w, h, c), dtype)
    for si in range(-(-c // k)):
        for hi in range(h):
            atoms = mem.read(base + si * surf + hi * line, w * 32).view(dtype).reshape(w, k)
            n = min(k, c - si * k)
            out[:, hi, si * k : si * k + n] = atoms[:, :n]
    return out


def _planes(mem: SparseMemory, base: int, w: int, h: int, c: int, line: int, planar: int, dtype) -> np.ndarray:
    e = np.dtype(dtype).itemsize
    return np.stack(
        [
            np.stack([mem.read(base + ci * planar + hi * line, w * e).view(dtype) for hi in range(h)], 1)
            for ci in range(c)
        ],
        2,
    )


def _random(rng, shape, precision):
    if precision is Precision.FP16:
        return rng.standard_normal(shape).astype(np.float16)
    info = np.iinfo(DTYPE[precision])
    return rng.integers(info.min, info.max + 1, shape).astype(DTYPE[precision])


def _op(mode, precision, w, h, cin, cout, src, dst, *, sx=1, sy=1, cs0=0):
    return RubikOp(mode, precision, w, h, cin, cout, src, dst, cs0, sy * dst.line_stride, sx, sy)


PRECISIONS = st.sampled_from([Precision.INT8, Precision.INT16, Precision.FP16])


@settings(max_examples=40, deadline=None)
@given(precision=PRECISIONS, w=st.integers(1, 11), h=st.integers(1, 4), sx=st.integers(1, 11), sy=st.integers(1, 3),
       cout=st.integers(1, 40), seed=st.integers(0, 2**31))  # fmt: skip
def test_contract_spreads_channel_groups_over_pixels(precision, w, h, sx, sy, cout, seed):
    """out(w * sx + tx, h * sy + ty, c) = in(w, h, (ty * sx + tx) * S * k + c), S = the output's surfaces."""
    rng = np.random.default_rng(seed)
    dtype = DTYPE[precision]
    k = 32 // np.dtype(dtype).itemsize
    s_out = -(-cout // k)
    cin = sx * sy * s_out * k
    x = _random(rng, (w, h, cin), precision)
    line_in, surf_in = w * 32 + 64, (w * 32 + 64) * h
    line_out = w * sx * 32 + 32
    surf_out = line_out * h * sy
    mem = SparseMemory()
    mem.write(SRC, _layout(x, line_in, surf_in))
    src = RubikPlane(SRC, line_in, surf_in, 0, Memory.DRAM)
    dst = RubikPlane(DST, line_out, surf_out, 0, Memory.DRAM)
    op = _op(RubikMode.CONTRACT, precision, w, h, cin, cout, src, dst, sx=sx, sy=sy, cs0=s_out * surf_in)
    execute_rubik(op, ExecState(mem, FULL))
    got = _cube(mem, DST, w * sx, h * sy, cout, line_out, surf_out, dtype)
    want = np.zeros((w * sx, h * sy, cout), dtype)
    for ty in range(sy):
        for tx in range(sx):
            g = (ty * sx + tx) * s_out * k
            want[tx::sx, ty::sy, :] = x[:, :, g : g + cout]
    assert got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes()


@settings(max_examples=40, deadline=None)
@given(
    precision=PRECISIONS, w=st.integers(1, 150), h=st.integers(1, 3), c=st.integers(1, 40), seed=st.integers(0, 2**31)
)
def test_split_writes_a_plane_per_channel_and_merge_gathers_them_back(precision, w, h, c, seed):
    rng = np.random.default_rng(seed)
    dtype = DTYPE[precision]
    e = np.dtype(dtype).itemsize
    x = _random(rng, (w, h, c), precision)
    line_in = w * 32
    surf_in = line_in * h
    plane_line = -(-w * e // 64) * 64  # 64-byte aligned plane lines (unit description)
    planar = plane_line * h
    mem = SparseMemory()
    mem.write(SRC, _layout(x, line_in, surf_in))
    mem.write(DST, np.full(planar * c, 0xAB, np.uint8))  # the split's zero-fill must overwrite this
    split = _op(RubikMode.SPLIT, precision, w, h, c, c, RubikPlane(SRC, line_in, surf_in, 0, Memory.DRAM),
                RubikPlane(DST, plane_line, 0, planar, Memory.DRAM))  # fmt: skip
    execute_rubik(split, ExecState(mem, FULL))
    planes = _planes(mem, DST, w, h, c, plane_line, planar, dtype)
    assert planes.view(np.uint8).tobytes() == x.view(np.uint8).tobytes()
    tail = -(-w * e // 32) * 32 - w * e  # the rest of each plane line's last 32 bytes: zero
    if tail:
        assert not mem.read(DST + w * e, tail).any()
    back = 0x8200_0000
    merge = _op(RubikMode.MERGE, precision, w, h, c, c, RubikPlane(DST, plane_line, 0, planar, Memory.DRAM),
                RubikPlane(back, line_in, surf_in, 0, Memory.DRAM))  # fmt: skip
    execute_rubik(merge, ExecState(mem, FULL))
    assert bytes(mem.read(back, len(_layout(x, line_in, surf_in)))) == _layout(x, line_in, surf_in).tobytes()


def test_registers_round_trip_and_run_as_a_trace_test(tmp_path):
    """The op's registers written (firmware order) and decoded back (the fields against arnvdla.h: a review's
    reading), and run as a trace test, whose CRC the model computes and meets, timed by its processor: the
    plumbing from registers to execution. What the bytes must be is the property tests' and RBK_L0_0's."""
    rng = np.random.default_rng(1)
    x = _random(rng, (5, 2, 64), Precision.INT16)  # 4 surfaces of 16 channels
    src = RubikPlane(SRC, 5 * 32, 5 * 32 * 2, 0, Memory.DRAM)
    dst = RubikPlane(DST, 10 * 32, 10 * 32 * 4, 0, Memory.DRAM)
    op = _op(RubikMode.CONTRACT, Precision.INT16, 5, 2, 64, 16, src, dst, sx=2, sy=2, cs0=src.surface_stride)
    prog = emit_program("rbk", op, [(SRC, _layout(x, src.line_stride, src.surface_stride))], [(DST, 10 * 32 * 4)], FULL)
    folder = prog.write(tmp_path)
    assert decode_program(parse_program(folder)).operations == [op] and from_description(describe(op)) == op
    run = run_program(folder, FULL)
    assert [c["match"] for c in run.checks] == [True]
    (timing,) = run.operations
    assert timing.kind == "rubik" and timing.stats.traffic.dram_read == timing.stats.traffic.dram_write


def test_rbk_l0_0s_requests_by_hand():
    """NVIDIA's RBK_L0_0: an INT16 contract of an 8 x 8 x 640 cube, x stride 10, y stride 4, to 80 x 32 x 16.
    32 output lines (1 surface x 8 lines x 4); per line, one run of 8 pixels and the x strides in groups of 8
    and 2: two buffer slots, 8 + 2 reads of 8 atoms (32 x 10 = 320 reads, 2,560 atoms); writes (x stride past
    8): per line and input pixel, runs of 8 and 2 atoms (512 writes, 2,560 atoms), each a command and a bubble
    (2 cycles) and its buffer reads, two atoms an entry: Rubik's write side is busy 32 x 8 x ((2 + 4) + (2 + 1))
    = 2,304 cycles. 81,920 bytes each way."""
    layer = RubikLayer("rbk", RubikMode.CONTRACT, 8, 8, 640, 16, Precision.INT16, 10, 4)
    reads, writes = layer.transfers()
    assert (len(reads), sum(reads), len(writes), sum(writes)) == (320, 2560, 512, 2560)
    assert layer.requests()[2] == 64  # slots
    st_ = simulate(layer, FULL)
    assert st_.units[Unit.RUBIK].busy == 2304
    assert st_.traffic.dram_read == st_.traffic.dram_write == 81920


def test_a_single_atom_merge_by_hand():
    """One INT8 pixel of one plane merged, on nv_full's testbench memory (64-byte beats every other cycle,
    32 cycles to the data): the read request at 0, its beat in the buffer at 0 + 32 + 1 = 33; the write
    request starts 2 later (35), its command and bubble (2) and its one buffer read (1) put the whole
    transaction in MCIF at 38, and the memory's write request follows 18 later: 56. With Rubik's launch (22,
    measured) and the interrupt 11 after the last write request: 89 cycles, op enable to interrupt."""
    hw = load_config("nv_full_rtl_tb")
    layer = RubikLayer("m", RubikMode.MERGE, 1, 1, 1, 1, Precision.INT8)
    assert simulate(layer, hw).cycles == 56
    assert sum(fixed_latency(layer, hw)) + 56 == 89


def test_reads_behind_a_slow_memory_wait_for_their_credits():
    """Behind nv_full's 1,200-cycle memory (configs/nv_full.toml), MCIF's 80 read credits bound RBK_L0_0: its
    1,280 read beats (320 reads of 8 atoms, 4 beats each) go out 80 at a time, each credit back one cycle
    after its beat (1,200 + 1 cycles on): at least 16 x 1,201 = 19,216 cycles (Little's law). The writes add
    little beyond."""
    layer = RubikLayer("rbk", RubikMode.CONTRACT, 8, 8, 640, 16, Precision.INT16, 10, 4)
    cycles = simulate(layer, FULL).cycles
    assert 19_216 <= cycles <= 1.05 * 19_216


def test_refusals_name_the_register_or_the_build(tmp_path):
    src = RubikPlane(SRC, 32, 32, 64, Memory.DRAM)
    split = _op(RubikMode.SPLIT, Precision.INT8, 1, 1, 4, 3, src, RubikPlane(DST, 64, 0, 64, Memory.DRAM))
    prog = emit_program("bad", split, [], [(DST, 64)], FULL).write(tmp_path / "a")
    with pytest.raises(NvdlaError, match="C model reads one and its RTL the other"):
        run_program(prog, FULL)
    contract = RubikOp(RubikMode.CONTRACT, Precision.INT8, 1, 1, 64, 32, src, RubikPlane(DST, 64, 64, 0, Memory.DRAM),
                       32, 32, 2, 1)  # CONTRACT_STRIDE_1 32, not 1 x 64  # fmt: skip
    prog = emit_program("bad2", contract, [], [(DST, 64)], FULL).write(tmp_path / "b")
    with pytest.raises(NvdlaError, match="CONTRACT_STRIDE_1 32 bytes"):
        run_program(prog, FULL)
    ok = _op(RubikMode.SPLIT, Precision.INT8, 1, 1, 4, 4, src, RubikPlane(DST, 64, 0, 64, Memory.DRAM))
    prog = emit_program("small", ok, [], [(DST, 64)], FULL).write(tmp_path / "c")
    with pytest.raises(NvdlaError, match="which has no Rubik"):
        run_program(prog, load_config("nv_small_rtl_tb"))
    with pytest.raises(ConfigError, match="has no Rubik"):
        simulate(RubikLayer("r", RubikMode.SPLIT, 4, 4, 8, 8, Precision.INT8), load_config("nv_small"))


def test_split_and_merge_requests_by_hand():
    """A 70 x 2 x 8 cube, lines in pieces of 64 and 6 pixels. INT16 split: reads, per line, 64 and 6 atoms
    (4 requests, 140 atoms, one buffer slot each); writes, per line and piece, each of the 8 planes' piece:
    128 bytes as 4 atoms or 12 as one zero-filled atom (32 requests, 80 atoms), the last plane's releasing
    the slot. On nv_full's 64-byte interface 2 x (32 + 3) = 70 read beats and 16 x (2 + 1) = 48 write beats,
    over its one DRAM channel at a beat a cycle: 118 busy cycles. Rubik's write side: 16 requests of 4 atoms
    read two buffer entries (an INT16 piece past 32 pixels), 16 of one atom one: 16 x (2 + 2) + 16 x (2 + 1)
    = 112 cycles. INT8 merge: reads, per line and piece, each of the 8 planes' piece of 64 or 6 bytes as 2
    atoms or 1 (32 requests, 48 atoms); writes the cube's 2 lines of 64 and 6 atoms (4 requests, 140 atoms)."""
    split = RubikLayer("s", RubikMode.SPLIT, 70, 2, 8, 8, Precision.INT16)
    assert split.transfers() == ([64, 6, 64, 6], ([4] * 8 + [1] * 8) * 2)
    got = simulate(split, FULL)
    assert got.units[Unit.RUBIK].busy == 112 and got.units[Unit.DRAM].busy == 70 + 48
    merge = RubikLayer("m", RubikMode.MERGE, 70, 2, 8, 8, Precision.INT8)
    assert merge.transfers() == (([2] * 8 + [1] * 8) * 2, [64, 6, 64, 6])


def test_a_contract_the_c_model_and_rtl_would_run_apart_is_refused(tmp_path):
    """CONTRACT_STRIDE_0 other than the output's surfaces x the input's surface stride (the C model's fixed
    step between channel groups) and an output wider than the RTL's 13-bit write size."""
    src = RubikPlane(SRC, 64, 128, 0, Memory.DRAM)
    dst = RubikPlane(DST, 128, 256, 0, Memory.DRAM)
    odd = RubikOp(RubikMode.CONTRACT, Precision.INT8, 2, 1, 64, 32, src, dst, 256, 128, 2, 1)  # 256, not 1 x 128
    prog = emit_program("odd", odd, [], [(DST, 256)], FULL).write(tmp_path / "a")
    with pytest.raises(NvdlaError, match="CONTRACT_STRIDE_0 256 bytes, not the output's surfaces x DAIN_SURF_STRIDE"):
        run_program(prog, FULL)
    wide = RubikOp(RubikMode.CONTRACT, Precision.INT8, 4097, 1, 64, 32, RubikPlane(SRC, 4097 * 32, 4097 * 32, 0,
                   Memory.DRAM), RubikPlane(DST, 8194 * 32, 8194 * 32, 0, Memory.DRAM), 4097 * 32, 8194 * 32, 2, 1)  # fmt: skip
    prog = emit_program("wide", wide, [], [(DST, 32)], FULL).write(tmp_path / "b")
    with pytest.raises(NvdlaError, match="contract to 8194 x 1 pixels"):
        run_program(prog, FULL)
