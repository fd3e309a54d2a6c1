import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_sim import PoolMode, PoolSpec, Precision, SdpSpec, UnsupportedError
from nvdla_sim.layers import OperandMode
from nvdla_sim.units import pdp, sdp
from nvdla_sim.units.lut import IndexMode, LutParams, LutPath, LutTable, Table, function_lut, lut_apply


def _round(x: int, s: int) -> int:
    if s == 0:
        return x
    q, r = divmod(abs(x), 1 << s)
    q += r >= (1 << (s - 1))
    return q if x >= 0 else -q


@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=30),
    st.integers(-(2**20), 2**20),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(0, 40),
)
def test_requantize_matches_python_ints(xs, offset, scale, shift):
    params = sdp.SdpParams(cvt=sdp.Convertor(offset, scale, shift), out_precision=Precision.INT8)
    got = sdp.sdp_apply(np.array(xs, np.int64).reshape(1, -1), params).values[0]
    expect = [max(-128, min(127, _round((x - offset) * scale, shift))) for x in xs]
    assert got.tolist() == expect


@given(st.lists(st.integers(-(2**20), 2**20), min_size=2, max_size=16), st.integers(0, 2**31))
def test_bias_scale_relu_eltwise(xs, seed):
    rng = np.random.default_rng(seed)
    x = np.array(xs, np.int64).reshape(1, -1)
    k = x.shape[1]
    bias = rng.integers(-500, 500, size=k)
    mul = rng.integers(-300, 300, size=k)
    ew = rng.integers(-128, 128, size=(1, k))
    params = sdp.SdpParams(
        x1=sdp.Stage(alu_operand=bias, alu_shift=2, relu=True),
        x2=sdp.Stage(mul_operand=mul, mul_shift=4),
        y=sdp.EwStage(alu_operand=ew, alu_cvt=sdp.Convertor(0, 1, 0)),
        cvt=sdp.Convertor(0, 1, 6),
        out_precision=Precision.INT16,
    )
    got = sdp.sdp_apply(x, params).values[0].tolist()
    expect = []
    for i, v in enumerate(xs):
        v = max(v + (int(bias[i]) << 2), 0)
        v = _round(v * int(mul[i]), 4)
        v = v + int(ew[0, i])
        expect.append(max(-32768, min(32767, _round(v, 6))))
    assert got == expect


def _ref_lut(x: int, t: LutTable) -> tuple[int, str]:
    """Scalar linear-table lookup with the hardware's rules (cmod NV_NVDLA_cdp.cpp lookup_lut_int8)."""
    e = [int(v) for v in t.entries]
    n = len(e) - 1
    off = x - t.start
    idx = off >> t.index_shift
    if off <= 0 or idx < 0:
        v, kind = e[0] + _round(off * t.uflow_scale, t.uflow_shift), "under"
    elif idx >= n:
        v, kind = e[n] + _round((x - t.last_x) * t.oflow_scale, t.oflow_shift), "over"
    else:
        frac16 = (off - (idx << t.index_shift)) << (16 - t.index_shift)
        v, kind = e[idx] + _round((e[idx + 1] - e[idx]) * frac16, 16), "hit"
    return max(-32768, min(32767, v)), kind


@given(st.lists(st.integers(-5000, 5000), min_size=1, max_size=50), st.integers(0, 2**31))
def test_lut_interpolation_matches_scalar_reference(xs, seed):
    rng = np.random.default_rng(seed)
    le = LutTable(rng.integers(-30000, 30000, 65), IndexMode.LINEAR, -2048, 6, 300, 4, -200, 3)
    lo = LutTable(rng.integers(-30000, 30000, 257), IndexMode.LINEAR, -512, 2, 100, 2, 50, 1)
    params = LutParams(le, lo, priority=Table.LO, uflow_priority=Table.LE, oflow_priority=Table.LO)
    got, stats = lut_apply(np.array(xs), params, path=LutPath.CDP)
    for x, g in zip(xs, got.tolist(), strict=True):
        vle, kle = _ref_lut(x, le)
        vlo, klo = _ref_lut(x, lo)
        if kle == "under" and klo == "under":
            expect = vle  # uflow priority LE
        elif kle == "over" and klo == "over":
            expect = vlo  # oflow priority LO
        elif (kle == "hit") != (klo == "hit"):
            expect = vle if kle == "hit" else vlo
        else:
            expect = vlo  # both hit, or one under and one over: hybrid priority LO
        assert g == expect
    assert stats.le_hits + stats.lo_hits + stats.hybrid + stats.underflow + stats.overflow == len(xs)


def test_exponent_table():
    e = np.arange(65) * 100
    le = LutTable(e, IndexMode.EXPONENT, 2)  # entry i at 2**(2+i)
    lo = LutTable(np.zeros(257, np.int64), IndexMode.LINEAR, -(10**9), 0)
    y, _ = lut_apply(np.array([4, 6, 8, 12]), LutParams(le, lo, priority=Table.LE), path=LutPath.CDP)
    assert y.tolist() == [0, 50, 100, 150]


def test_gelu_lut_accuracy():
    gelu = lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))  # noqa: E731
    in_scale, out_scale = 1 / 256, 1 / 256
    params = function_lut(gelu, q_min=-6 * 256, q_max=6 * 256, in_scale=in_scale, out_scale=out_scale)
    q = np.arange(-8 * 256, 8 * 256)
    y, _ = lut_apply(q, params, path=LutPath.CDP)
    err = np.abs(y * out_scale - gelu(q * in_scale))
    assert err.max() < 0.03


def test_sdp_rates_and_missing_units(nv_full, nv_small):
    assert sdp.elements_per_cycle(SdpSpec(), nv_full) == 16
    assert sdp.elements_per_cycle(SdpSpec(bias=OperandMode.PER_KERNEL, relu=True), nv_full) == 16
    assert sdp.elements_per_cycle(SdpSpec(lut=True), nv_full) == 4
    with pytest.raises(UnsupportedError, match="nv_small has no SDP EW sub-unit"):
        sdp.elements_per_cycle(SdpSpec(eltwise=OperandMode.PER_ELEMENT), nv_small)


@given(
    st.integers(2, 9),
    st.integers(2, 9),
    st.integers(1, 5),
    st.sampled_from(list(PoolMode)),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(-20, 20),
    st.integers(0, 2**31),
)
def test_pooling_matches_reference(w, h, c, mode, k, stride, pad, pad_value, seed):
    """Average: (window sum + pad_value per padded position) times the width then the height reciprocal,
    each product rounded (PDP registers D_RECIP_KERNEL_WIDTH/HEIGHT); max/min over valid elements."""
    if k > min(w, h) or pad >= k:
        return
    x = np.random.default_rng(seed).integers(-128, 128, size=(h, w, c)).astype(np.int8)
    spec = PoolSpec(mode, k, k, stride, stride, pad, pad, pad, pad)
    got = pdp.pool(x, spec, Precision.INT8, pad_value=pad_value if mode is PoolMode.AVG else None)
    ow, oh = spec.out_size(w, h)
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * stride - pad, j * stride - pad
            ys = [y for y in range(y0, y0 + k) if 0 <= y < h]
            xs = [q for q in range(x0, x0 + k) if 0 <= q < w]
            win = x[ys][:, xs].astype(np.int64).reshape(-1, c)
            if mode is PoolMode.MAX:
                ref = win.max(0)
            elif mode is PoolMode.MIN:
                ref = win.min(0)
            else:
                padded = k * k - len(ys) * len(xs)
                s = win.sum(0) + pad_value * padded
                ref = np.array(
                    [max(-128, min(127, _round(_round(int(v) * pdp.recip(k), 16) * pdp.recip(k), 16))) for v in s]
                )
            np.testing.assert_array_equal(got[i, j], ref)


def test_pdp_takes_throughput_bytes_a_cycle():
    """PDP_THROUGHPUT counts bytes of its 8 x throughput-bit data path (nvdlav1 NV_NVDLA_PDP_core.v:
    64 data bits on nv_full's PDP_THROUGHPUT_8): 8 INT8, 4 INT16 or FP16 elements a cycle; nv_small's 1."""
    from nvdla_sim import load_config
    from nvdla_sim.precision import Precision
    from nvdla_sim.units.pdp import elements_per_cycle

    full, small = load_config("nv_full"), load_config("nv_small")
    assert [elements_per_cycle(full, p) for p in (Precision.INT8, Precision.INT16, Precision.FP16)] == [8, 4, 4]
    assert elements_per_cycle(small, Precision.INT8) == 1


def test_cdp_takes_throughput_bytes_a_cycle():
    """CDP_THROUGHPUT counts bytes as PDP's does (nvdlav1 NV_NVDLA_cdp.v:115: 64 data bits on nv_full's
    CDP_THROUGHPUT_8): 8 INT8, 4 INT16 or FP16 elements a cycle; nv_small's 1. An INT16 LRN over 2,048
    elements (NVIDIA's CDP_L0_0 shape, 8 x 8 x 32) keeps CDP busy 2,048 / 4 = 512 cycles on nv_full, 256 at INT8."""
    from nvdla_sim import load_config
    from nvdla_sim.engine.stats import Unit
    from nvdla_sim.layers import CdpLayer
    from nvdla_sim.precision import Precision
    from nvdla_sim.processors import simulate
    from nvdla_sim.units.cdp import elements_per_cycle

    full, small = load_config("nv_full"), load_config("nv_small")
    assert [elements_per_cycle(full, p) for p in (Precision.INT8, Precision.INT16, Precision.FP16)] == [8, 4, 4]
    assert elements_per_cycle(small, Precision.INT8) == 1
    busy = {p: simulate(CdpLayer("lrn", 8, 8, 32, p), full, record_events=False).units[Unit.CDP].busy
            for p in (Precision.INT8, Precision.INT16)}  # fmt: skip
    assert busy == {Precision.INT8: 256, Precision.INT16: 512}
