"""Register-program execution: memory formats, the hardware's SDP/LUT/CDP arithmetic, LUT programming."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim import Precision
from nvdla_sim.config import load_config
from nvdla_sim.processors.lut import decode_lut
from nvdla_sim.registers.trace_io import Program, RegWrite, SparseMemory
from nvdla_sim.units import sdp
from nvdla_sim.units.cdp import LrnParams, lrn
from nvdla_sim.units.lut import IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.memory_format import Surface, read_cube, read_dc_weights, write_cube
from nvdla_sim.units.sdp import AluOp
from tests.unit.test_precision import _ref_round as _round

NV_SMALL = load_config("nv_small")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 20), st.integers(0, 3), st.integers(0, 2**31))
def test_feature_cube_round_trip_and_addressing(w, h, c, gap, seed):
    nv_small = NV_SMALL
    """Element (x, y, ch) sits at addr + (ch // 8) * surface_stride + y * line_stride + x * 8 + ch % 8."""
    atom = nv_small.memory.memory_atomic_bytes
    surf = Surface(0x1000, (w + gap) * atom, (w + gap) * atom * (h + 1))
    cp = -(-c // atom) * atom
    cube = np.random.default_rng(seed).integers(-128, 128, (h, w, cp)).astype(np.int8)
    mem = SparseMemory()
    write_cube(mem, surf, cube, Precision.INT8, nv_small)
    np.testing.assert_array_equal(read_cube(mem, surf, w, h, c, Precision.INT8, nv_small), cube)
    y, x, ch = h - 1, w - 1, c - 1
    addr = surf.addr + (ch // atom) * surf.surface_stride + y * surf.line_stride + x * atom + ch % atom
    assert mem.read(addr, 1).view(np.int8)[0] == cube[y, x, ch]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(1, 3), st.integers(1, 3), st.integers(1, 19), st.integers(0, 2**31))
def test_dc_weight_format(k, kh, kw, c, seed):
    nv_small = NV_SMALL
    """format.rst: groups of 8 kernels (nv_small INT8), 1x1x8 channel blocks, C' -> K -> W -> H -> C."""
    wts = np.random.default_rng(seed).integers(-128, 128, (k, kh, kw, c)).astype(np.int8)
    flat = []
    for g0 in range(0, k, 8):
        for c0 in range(0, c, 8):
            for r in range(kh):
                for s in range(kw):
                    for kk in range(g0, min(k, g0 + 8)):
                        flat.extend(wts[kk, r, s, c0 : c0 + 8].tolist())
    mem = SparseMemory()
    mem.write(0x2000, np.array(flat, np.int8).view(np.uint8))
    np.testing.assert_array_equal(read_dc_weights(mem, 0x2000, k, kh, kw, c, Precision.INT8, nv_small), wts)


def test_sdp_stage_widths_are_the_hardwares():
    """ALU result is 33 bits (no saturation before the multiplier); the MUL shift truncates even when the
    multiplier is bypassed; the output saturates to 32 bits."""
    wide = sdp.Stage(alu_operand=1, alu_shift=20, mul_operand=-1)  # (INT32_MAX + 2**20) * -1, then saturate
    cvt = sdp.Convertor(offset=-(2**31), scale=1, shift=0)
    assert sdp.sdp_apply(np.array([[2**31 - 1]]), sdp.SdpParams(x1=wide, cvt=cvt)).values[0, 0] == 0
    bypass = sdp.Stage(alu_op=sdp.AluOp.MAX, alu_operand=2, mul_shift=1)
    got = sdp.sdp_apply(np.array([[5, -7]]), sdp.SdpParams(x1=bypass)).values
    assert got.tolist() == [[3, 1]]  # round(max(5, 2) / 2), round(max(-7, 2) / 2)
    prelu = sdp.Stage(alu_operand=-10, mul_operand=3, mul_shift=1, prelu=True)  # PReLU on the ALU's output
    assert sdp.sdp_apply(np.array([[25, 4]]), sdp.SdpParams(x1=prelu)).values.tolist() == [[15, -9]]


def _linear_lut(entries_le, entries_lo, start=0, le_shift=0, lo_shift=0) -> LutParams:
    le = LutTable(np.array(entries_le), IndexMode.LINEAR, start, le_shift, end=start + (64 << le_shift))
    lo = LutTable(np.array(entries_lo), IndexMode.LINEAR, start, lo_shift, end=start + (256 << lo_shift))
    return LutParams(le, lo, priority=Table.LE, uflow_priority=Table.LE, oflow_priority=Table.LE)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-128, 127), min_size=1, max_size=20),
    st.sampled_from([3, 5, 7, 9]),
    st.integers(-128, 127),
    st.integers(1, 300),
    st.integers(0, 6),
    st.integers(0, 2**31),
)
def test_lrn_matches_scalar_reference(xs, window, offset, scale, shift, seed):
    _check_lrn(xs, window, offset, scale, shift, seed, Precision.INT8)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-(2**15), 2**15 - 1), min_size=1, max_size=20),
    st.sampled_from([3, 5, 7, 9]),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(1, 300),
    st.integers(0, 12),
    st.integers(0, 2**31),
)
def test_lrn_int16_matches_scalar_reference(xs, window, offset, scale, shift, seed):
    """INT16 (cmod cdp_icvt.h, cdp_ocvt.h): a 16-bit input offset, 17-bit convertor, 32-bit output offset,
    16-bit result; the LUT steps are INT8's."""
    _check_lrn(xs, window, offset, scale, shift, seed, Precision.INT16)


def _check_lrn(xs, window, offset, scale, shift, seed, precision):
    conv_bits, out_bits = (9, 8) if precision is Precision.INT8 else (17, 16)
    rng = np.random.default_rng(seed)
    le = rng.integers(-3000, 3000, 65)
    index_shift = 14 if precision is Precision.INT8 else 30
    lut = _linear_lut(le, np.zeros(257, np.int64), le_shift=index_shift)
    p = LrnParams(window, lut, in_offset=offset, in_scale=scale, in_shift=shift, out_offset=3, out_scale=5, out_shift=9)
    got = lrn(np.array(xs), p, precision).tolist()
    lim = 1 << (conv_bits - 1)
    a = [max(-lim, min(lim - 1, _round((x - offset) * scale, shift))) for x in xs]
    for i in range(len(xs)):
        s = sum(a[j] ** 2 for j in range(i - window // 2, i + window // 2 + 1) if 0 <= j < len(xs))
        idx = s >> index_shift
        if s <= 0:
            v = int(le[0])
        elif idx >= 64:
            v = int(le[64])
        else:
            frac = s - (idx << index_shift)  # to a 16-bit fraction, as the RTL keeps it
            frac16 = frac >> (index_shift - 16) if index_shift > 16 else frac << (16 - index_shift)
            v = int(le[idx]) + _round((int(le[idx + 1]) - int(le[idx])) * frac16, 16)
        out_lim = 1 << (out_bits - 1)
        y = max(-out_lim, min(out_lim - 1, _round((v * a[i] - 3) * 5, 9)))
        assert got[i] == y, (i, xs, s)


def test_decode_lut_programs_tables_with_auto_increment():
    w = [RegWrite("NVDLA_CDP", "S_LUT_ACCESS_CFG_0", 0x30000 | 2, 1)]  # write, LO table, address 2
    w += [RegWrite("NVDLA_CDP", "S_LUT_ACCESS_DATA_0", v, 2) for v in (7, 0xFFFF, 9)]
    w += [RegWrite("NVDLA_CDP", "S_LUT_ACCESS_CFG_0", 0x20000, 3)]  # write, LE table, address 0
    w += [RegWrite("NVDLA_CDP", "S_LUT_ACCESS_DATA_0", 5, 4)]
    w += [
        RegWrite("NVDLA_CDP", "S_LUT_CFG_0", 0x1 | 0x40, 5),  # LE linear, hybrid priority LO
        RegWrite("NVDLA_CDP", "S_LUT_INFO_0", (0x3E << 16) | (3 << 8), 6),  # LO select -2, LE select 3
        RegWrite("NVDLA_CDP", "S_LUT_LE_START_HIGH_0", 0x3F, 7),  # 38-bit signed: -2**32 + low
        RegWrite("NVDLA_CDP", "S_LUT_LE_SLOPE_SHIFT_0", 0x1F, 8),  # 5-bit signed uflow shift -1
        RegWrite("NVDLA_CDP", "D_OP_ENABLE_0", 1, 9),
        RegWrite("NVDLA_CDP", "S_LUT_ACCESS_DATA_0", 99, 10),  # after the enable: not this operation's
    ]
    lut = decode_lut(Program("t", None, w))
    assert lut.lo.entries[2:5].tolist() == [7, -1, 9] and lut.lo.entries[5] == 0
    assert lut.le.entries[0] == 5 and lut.le.mode is IndexMode.LINEAR
    assert (lut.le.index_shift, lut.lo.index_shift) == (3, -2)
    assert lut.le.start == -(2**32) and lut.le.uflow_shift == -1
    assert lut.priority is Table.LO and lut.uflow_priority is Table.LE


def test_sdp_lut_registers_and_one_lut_per_program():
    """SDP's START/END are single 32-bit registers and its index selects 8-bit signed; a program that
    rewrites a unit's LUT between two of its operations is refused (one LUT per program is modelled),
    as is emitting one that needs both a CDP and an SDP LUT."""
    import pytest

    from nvdla_sim.errors import TraceError
    from nvdla_sim.processors.cdp.registers import CdpOp
    from nvdla_sim.processors.sdp.registers import SdpEwCfg, SdpOp
    from nvdla_sim.program.execute import program_luts

    w = [
        RegWrite("NVDLA_SDP", "S_LUT_ACCESS_CFG_0", 0x20000, 1),  # write, LE table, address 0
        RegWrite("NVDLA_SDP", "S_LUT_ACCESS_DATA_0", 0x8000, 2),  # -32768
        RegWrite("NVDLA_SDP", "S_LUT_CFG_0", 0x1, 3),  # LE linear
        RegWrite("NVDLA_SDP", "S_LUT_INFO_0", (0x80 << 16) | (0x7F << 8), 4),  # LO select -128, LE 127
        RegWrite("NVDLA_SDP", "S_LUT_LE_START_0", 0xFFFFFFFE, 5),  # -2 (32-bit signed)
        RegWrite("NVDLA_SDP", "S_LUT_LE_END_0", 0x7FFFFFFF, 6),
        RegWrite("NVDLA_SDP", "D_OP_ENABLE_0", 1, 7),
    ]
    lut = decode_lut(Program("s", None, w), "NVDLA_SDP")
    assert lut.le.entries[0] == -32768 and (lut.le.start, lut.le.last_x) == (-2, 2**31 - 1)
    assert (lut.le.index_shift, lut.lo.index_shift) == (127, -128)
    again = [*w, RegWrite("NVDLA_SDP", "S_LUT_LE_START_0", 3, 8), RegWrite("NVDLA_SDP", "D_OP_ENABLE_0", 1, 9)]
    with pytest.raises(TraceError, match=r"s:9: NVDLA_SDP's LUT is reprogrammed between two of its operations"):
        decode_lut(Program("s", None, again), "NVDLA_SDP")
    ew = SdpEwCfg(None, AluOp.ADD, None, False, 0, True)  # the LUT alone
    surf = Surface(0, 8, 8)
    sop = SdpOp(1, 1, 8, False, surf, surf, False, *(Precision.INT8,) * 3, None, None, True, True, 0, 1, 0, (), ew)
    cop = CdpOp(1, 1, 8, 3, False, False, 0, 1, 0, 0, 1, 0, surf, surf, Precision.INT8)
    assert program_luts([sop], lut, "p").sdp is lut and program_luts([cop], lut, "p").cdp is lut
    with pytest.raises(TraceError, match="both a CDP and an SDP LUT pass"):
        program_luts([sop, cop], lut, "p")
