"""Register-program back end: emit -> parse -> decode gives back the operation (random legal layers)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvdla_sim.config import load_config
from nvdla_sim.errors import ShapeError, TraceError
from nvdla_sim.layers import ConvShape, OperandMode, PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors.cdp.registers import CdpOp
from nvdla_sim.processors.lut import decode_lut
from nvdla_sim.processors.pdp.registers import PdpOp
from nvdla_sim.processors.sdp.registers import (
    EwOperand,
    OperandSource,
    OperandUse,
    Rdma,
    SdpEwCfg,
    SdpOperand,
    SdpStageCfg,
    SdpStream,
)
from nvdla_sim.program.decode import decode_program
from nvdla_sim.program.emit import Alloc, conv_layer, emit_program, place, sdp_pass
from nvdla_sim.program.execute import execute_program
from nvdla_sim.registers.trace_io import parse_program
from nvdla_sim.units.lut import IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.memory_format import cube_size, dc_weight_bytes, feature_image
from nvdla_sim.units.pdp import recip
from nvdla_sim.units.sdp import AluOp

HW = load_config("nv_small_rtl_tb")
P = Precision.INT8
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _round_trip(prog, tmp_path):
    d = prog.write(tmp_path)
    parsed = parse_program(d)
    decoded = decode_program(parsed)
    assert decoded.unknown == []
    _, checks = execute_program(parsed, decoded, HW)
    assert [c["model_crc"] for c in checks] == [crc for _, _, crc in prog.expected]
    return parsed, decoded.operations


@st.composite
def stages(draw, mode: OperandMode):
    def operand(source):  # register operands (per layer); memory operands are tested with their streams
        return SdpOperand(source, draw(st.integers(-(2**15), 2**15 - 1)), draw(st.integers(0, 20)), mode, 2)

    if draw(st.booleans()):
        return None
    alu = operand(OperandSource.REG) if draw(st.booleans()) else None
    mul = operand(OperandSource.REG) if draw(st.booleans()) else None
    return SdpStageCfg(
        alu, draw(st.sampled_from([AluOp.MAX, AluOp.MIN, AluOp.ADD])), mul, draw(st.booleans()) and mul is not None,
        draw(st.booleans()), mul_shift=mul.shift if mul else draw(st.integers(0, 8)),
    )  # fmt: skip


@SETTINGS
@given(
    st.integers(1, 12), st.integers(1, 6), st.integers(1, 20), st.integers(1, 20), st.integers(1, 3),
    st.integers(1, 2), st.integers(0, 1), stages(OperandMode.PER_KERNEL), stages(OperandMode.PER_KERNEL),
    st.tuples(st.integers(-1000, 1000), st.integers(-300, 300), st.integers(0, 20)),
    st.integers(0, 2**31),
)  # fmt: skip
def test_conv_round_trip(tmp_path_factory, w, h, c, k, kernel, stride, pad, x1, x2, cvt, seed):
    if kernel > w + 2 * pad or kernel > h + 2 * pad:
        return
    shape = ConvShape.square(w, h, c, k, kernel=kernel, stride=stride, pad=pad)
    rng = np.random.default_rng(seed)
    op, din, waddr, oaddr = conv_layer(shape, P, HW, Alloc(), x1=x1, x2=x2, cvt=cvt, clip=int(rng.integers(0, 12)))
    x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
    wts = rng.integers(-128, 128, (k, kernel, kernel, c)).astype(np.int8)
    prog = emit_program(
        "t", op, [(din.addr, feature_image(x, din, P, HW)), (waddr, dc_weight_bytes(wts, P, HW))],
        [(oaddr, cube_size(op.out, k, P, HW))], HW,
    )  # fmt: skip
    _, ops = _round_trip(prog, tmp_path_factory.mktemp("conv"))
    assert ops == [op]


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 8), st.integers(1, 24), stages(OperandMode.PER_KERNEL), st.integers(0, 2**31))
def test_offline_sdp_round_trip_with_a_memory_operand(tmp_path_factory, w, h, c, x2, seed):
    a = Alloc()
    src = place(a, w, h, c, P, HW)
    opnd = place(a, w, h, c, P, HW)
    dst = place(a, w, h, c, P, HW)
    stream = SdpStream(
        Rdma.BRDMA, OperandMode.PER_ELEMENT, 1, opnd.addr, opnd.line_stride, opnd.surface_stride, OperandUse.MUL
    )
    x1 = SdpStageCfg(
        None, AluOp.ADD, SdpOperand(OperandSource.MEM, 0, 3, OperandMode.PER_ELEMENT, 1), False, True, mul_shift=3
    )
    op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, x1=x1, x2=x2, cvt=(5, 77, 9), streams=(stream,))
    rng = np.random.default_rng(seed)
    cube = lambda: rng.integers(-128, 128, (h, w, c)).astype(np.int8)  # noqa: E731
    prog = emit_program(
        "s", op, [(src.addr, feature_image(cube(), src, P, HW)), (opnd.addr, feature_image(cube(), opnd, P, HW))],
        [(dst.addr, cube_size(dst, c, P, HW))], HW,
    )  # fmt: skip
    _, ops = _round_trip(prog, tmp_path_factory.mktemp("sdp"))
    assert ops == [op]


@SETTINGS
@given(
    st.integers(1, 16), st.integers(1, 12), st.integers(1, 24), st.sampled_from(list(PoolMode)),
    st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(0, 3),
    st.integers(0, 3), st.integers(0, 2**31),
)  # fmt: skip
def test_pdp_round_trip(tmp_path_factory, w, h, c, mode, kw, kh, sx, sy, pad_w, pad_h, seed):
    pad_w, pad_h = min(pad_w, kw - 1), min(pad_h, kh - 1)
    try:
        spec = PoolSpec(mode, kw, kh, sx, sy, pad_w, pad_w, pad_h, pad_h)
        ow, oh = spec.out_size(w, h)
    except ShapeError:
        return
    a = Alloc()
    src = place(a, w, h, c, P, HW)
    dst = place(a, ow, oh, c, P, HW)
    rng = np.random.default_rng(seed)
    pads = tuple(int(v) for v in rng.integers(-100, 100, 7))
    op = PdpOp(
        w, h, c, ow, oh, mode, kw, kh, sx, sy, pad_w, pad_w, pad_h, pad_h, tuple(v & 0x7FFFF for v in pads),
        recip(kw), recip(kh), 1, (0, 0, 0), (0, 0, 0), False, src, dst, P,
    )  # fmt: skip
    x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
    prog = emit_program("p", op, [(src.addr, feature_image(x, src, P, HW))], [(dst.addr, cube_size(dst, c, P, HW))], HW)
    _, ops = _round_trip(prog, tmp_path_factory.mktemp("pdp"))
    assert ops == [op]


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 40), st.sampled_from([3, 5, 7, 9]), st.booleans(),
       st.integers(0, 2**31))  # fmt: skip
def test_cdp_round_trip_with_its_lut(tmp_path_factory, w, h, c, window, exponent, seed):
    rng = np.random.default_rng(seed)
    le_e = rng.integers(-30000, 30000, 65)
    if exponent:
        le = LutTable(le_e, IndexMode.EXPONENT, 3, 0, 100, -2, -50, 3, origin=-5, end=1 << 36)
    else:
        le = LutTable(le_e, IndexMode.LINEAR, -100, 7, 100, 2, -50, 3, end=-100 + (64 << 7))
    lo = LutTable(rng.integers(-30000, 30000, 257), IndexMode.LINEAR, 16, -1, 7, 4, 9, 0, end=16 + 128)
    lut = LutParams(le, lo, priority=Table.LE, uflow_priority=Table.LO, oflow_priority=Table.LE)
    a = Alloc()
    src = place(a, w, h, c, P, HW)
    dst = place(a, w, h, c, P, HW)
    op = CdpOp(w, h, c, window, False, False, 7, 300, 6, -9, 11, 12, src, dst, P)
    x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
    prog = emit_program("c", op, [(src.addr, feature_image(x, src, P, HW))], [(dst.addr, cube_size(dst, c, P, HW))],
                        HW, lut=lut)  # fmt: skip
    parsed, ops = _round_trip(prog, tmp_path_factory.mktemp("cdp"))
    assert ops == [op]
    got = decode_lut(parsed)
    for t, u in ((got.le, le), (got.lo, lo)):
        np.testing.assert_array_equal(t.entries, u.entries)
        assert (t.mode, t.start, t.index_shift, t.origin, t.last_x) == (
            u.mode,
            u.start,
            u.index_shift,
            u.origin,
            u.last_x,
        )
        assert (t.uflow_scale, t.uflow_shift, t.oflow_scale, t.oflow_shift) == (
            u.uflow_scale, u.uflow_shift, u.oflow_scale, u.oflow_shift,
        )  # fmt: skip
    assert (got.priority, got.uflow_priority, got.oflow_priority) == (Table.LE, Table.LO, Table.LE)


def test_weights_stream_but_the_input_must_fit_one_cbuf_load():
    """Full input, partial weight: 576 KB of weights through a 128 KB CBUF is one layer; an input of
    192 KB (64 x 3072) is not (it is split into bands of rows, one program each)."""
    op, *_ = conv_layer(ConvShape.matmul(64, 768, 768), P, HW, Alloc())
    assert op.data_banks == 12 and op.weight_banks == 20
    with pytest.raises(ShapeError, match="CBUF banks for its input"):
        conv_layer(ConvShape.matmul(64, 3072, 64, row=64), P, HW, Alloc())


@pytest.mark.parametrize(
    ("w", "h", "c", "k", "kernel", "stride", "pad"), [(5, 4, 11, 10, 3, 1, 1), (7, 6, 20, 3, 2, 2, 0)]
)
def test_a_conv_programs_expected_crc_is_that_of_an_independent_convolution(tmp_path, w, h, c, k, kernel, stride, pad):
    """The CRC an emitted convolution program expects, and the bytes the executor writes, equal those of
    an output computed by a plain numpy convolution (tests/unit/test_conv_functional.reference_conv) and
    placed by format.rst's address formula by hand; inputs in {-1, 0, 1} keep the sums inside INT8, so
    the identity SDP neither rounds nor saturates. (The round-trip tests above compare the executor with
    itself; this one does not.)"""
    import zlib

    from tests.unit.test_conv_functional import reference_conv

    shape = ConvShape.square(w, h, c, k, kernel=kernel, stride=stride, pad=pad)
    rng = np.random.default_rng(1)
    x = rng.integers(-1, 2, (h, w, c)).astype(np.int8)
    wts = rng.integers(-1, 2, (k, kernel, kernel, c)).astype(np.int8)
    op, din, waddr, oaddr = conv_layer(shape, P, HW, Alloc())
    size = cube_size(op.out, k, P, HW)
    prog = emit_program("t", op, [(din.addr, feature_image(x, din, P, HW)), (waddr, dc_weight_bytes(wts, P, HW))],
                        [(oaddr, size)], HW)  # fmt: skip
    ref = reference_conv(x, wts, shape)
    assert np.abs(ref).max() <= 127
    atom = HW.memory.memory_atomic_bytes  # INT8: one byte per channel, `atom` channels per surface
    image = np.zeros(size, np.uint8)
    for y in range(shape.out_h):
        for xx in range(shape.out_w):
            for ch in range(k):
                image[(ch // atom) * op.out.surface_stride + y * op.out.line_stride + xx * atom + ch % atom] = np.int8(
                    ref[y, xx, ch]
                ).view(np.uint8)
    assert prog.expected == [(oaddr, size, zlib.crc32(image.tobytes()))]
    parsed = parse_program(prog.write(tmp_path))
    mem, checks = execute_program(parsed, decode_program(parsed), HW)
    np.testing.assert_array_equal(mem.read(oaddr, size), image)


HW_Y = load_config("nv_small_256_full_rtl_tb")  # a build with SDP's element-wise unit and LUT


@st.composite
def ew_operands(draw, source: OperandSource) -> EwOperand:
    return EwOperand(
        source,
        value=draw(st.integers(-(2**31), 2**31 - 1)) if source is OperandSource.REG else 0,
        cvt_bypass=draw(st.booleans()) if source is OperandSource.MEM else True,
        cvt_offset=draw(st.integers(-(2**31), 2**31 - 1)),
        cvt_scale=draw(st.integers(-(2**15), 2**15 - 1)),
        cvt_truncate=draw(st.integers(0, 63)),
    )


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 40), st.data(), st.integers(0, 2**31))
def test_sdp_y_round_trip(tmp_path_factory, w, h, c, data, seed):
    """An SDP pass through the Y stage (register or E-RDMA operands, their convertors, the SDP LUT) is
    written, parsed, decoded to the same operation and LUT, and executed to the CRCs it was emitted with."""
    rng = np.random.default_rng(seed)
    stream_use = data.draw(st.sampled_from([None, OperandUse.ALU, OperandUse.MUL, OperandUse.BOTH]))
    mem = OperandSource.MEM

    def source(which: OperandUse) -> OperandSource:
        uses = stream_use is OperandUse.BOTH or stream_use is which
        return mem if uses else OperandSource.REG

    alu = data.draw(st.one_of(st.none(), ew_operands(source(OperandUse.ALU))))
    mul = data.draw(st.one_of(st.none(), ew_operands(source(OperandUse.MUL))))
    lut_on = data.draw(st.booleans())
    ew = SdpEwCfg(
        alu, data.draw(st.sampled_from(list(AluOp))), mul, data.draw(st.booleans()), data.draw(st.integers(0, 1023)),
        lut_on,
    )  # fmt: skip
    a = Alloc()
    src, dst = place(a, w, h, c, P, HW_Y), place(a, w, h, c, P, HW_Y)
    inputs = [(src.addr, feature_image(rng.integers(-128, 128, (h, w, c)).astype(np.int8), src, P, HW_Y))]
    streams = ()
    if stream_use is not None and ((alu and alu.source is mem) or (mul and mul.source is mem)):
        comps = 2 if stream_use is OperandUse.BOTH else 1
        line = w * HW_Y.memory.memory_atomic_bytes * comps
        surfaces = -(-c // HW_Y.memory.memory_atomic_bytes)
        addr = a.take(surfaces * line * h)
        raw = rng.integers(0, 256, surfaces * line * h).astype(np.uint8)
        inputs.append((addr, raw))
        streams = (SdpStream(Rdma.ERDMA, OperandMode.PER_ELEMENT, 1, addr, line, line * h, use=stream_use),)
    elif (alu and alu.source is mem) or (mul and mul.source is mem):
        return  # a memory operand needs its stream
    op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, cvt=(3, 5, 2), streams=streams, ew=ew)
    lut = None
    if lut_on:
        le = LutTable(rng.integers(-30000, 30000, 65), IndexMode.LINEAR, -100, 2, 100, -2, -50, 3, end=156)
        lo = LutTable(rng.integers(-30000, 30000, 257), IndexMode.LINEAR, -64, -1, 7, 4, 9, 0, end=64)
        lut = LutParams(le, lo, priority=Table.LE, uflow_priority=Table.LO, oflow_priority=Table.LE)
    prog = emit_program("y", op, inputs, [(dst.addr, cube_size(dst, c, P, HW_Y))], HW_Y, lut=lut)
    d = prog.write(tmp_path_factory.mktemp("y"))
    parsed = parse_program(d)
    decoded = decode_program(parsed)
    assert decoded.unknown == [] and decoded.operations == [op]
    _, checks = execute_program(parsed, decoded, HW_Y)
    assert [ch["model_crc"] for ch in checks] == [crc for _, _, crc in prog.expected]
    if lut_on:
        got = decode_lut(parsed, "NVDLA_SDP")
        for t, u in ((got.le, lut.le), (got.lo, lut.lo)):
            np.testing.assert_array_equal(t.entries, u.entries)
            assert (t.start, t.index_shift, t.last_x, t.uflow_scale, t.uflow_shift, t.oflow_scale, t.oflow_shift) == (
                u.start, u.index_shift, u.last_x, u.uflow_scale, u.uflow_shift, u.oflow_scale, u.oflow_shift,
            )  # fmt: skip


def test_x_stages_refuse_eql():
    a = Alloc()
    src, dst = place(a, 2, 2, 8, P, HW), place(a, 2, 2, 8, P, HW)
    x1 = SdpStageCfg(SdpOperand(OperandSource.REG, 3, 0), AluOp.EQL, None, False, False)
    op = sdp_pass(2, 2, 8, flying=False, src=src, dst=dst, x1=x1)
    with pytest.raises(TraceError, match="EQL is the EW"):
        emit_program("x", op, [], [(dst.addr, 64)], HW)
