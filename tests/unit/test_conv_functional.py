"""The tiled convolution/matmul through CMAC -> CACC -> SDP equals a plain numpy reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper import candidate_plans
from nvdla_sim import ConvLayer, ConvShape, Precision, ShapeError, default_plan, load_config, run_conv
from nvdla_sim.layers import OperandMode, SdpSpec
from nvdla_sim.precision import saturate, shift_round
from nvdla_sim.units import cacc, cmac
from nvdla_sim.units.sdp import Convertor, SdpParams, Stage


def reference_conv(x, w, s: ConvShape):
    """Direct float-free convolution in int64: x[H,W,C], w[K,R,S,C] -> [H',W',K]."""
    xp = np.pad(x.astype(np.int64), ((s.pad_top, s.pad_bottom), (s.pad_left, s.pad_right), (0, 0)))
    out = np.zeros((s.out_h, s.out_w, s.out_k), np.int64)
    for r in range(s.kernel_h):
        for q in range(s.kernel_w):
            patch = xp[
                r * s.dilation_y : r * s.dilation_y + s.stride_y * (s.out_h - 1) + 1 : s.stride_y,
                q * s.dilation_x : q * s.dilation_x + s.stride_x * (s.out_w - 1) + 1 : s.stride_x,
            ]
            out += patch @ w[:, r, q, :].astype(np.int64).T
    return out


def test_mac_result_width(hw):
    x = np.full((1, hw.mac.atomic_c), -128, np.int8)
    w = np.full((1, hw.mac.atomic_c), -128, np.int8)
    ps = cmac.atomic_op(x, w, Precision.INT8)
    assert int(ps[0, 0]) < 1 << (cmac.mac_result_bits(hw, Precision.INT8) - 1)


def test_cacc_saturates_at_34_bits():
    big = np.full((1, 1), (1 << 32), np.int64)
    res = cacc.accumulate([big] * 5, Precision.INT8)
    assert res.acc_saturations >= 1 and res.out_saturations == 1
    assert res.values[0, 0] == (1 << 31) - 1
    res16 = cacc.accumulate([big] * 5, Precision.INT16)
    assert res16.acc_saturations == 0


@given(
    st.integers(1, 40),
    st.integers(1, 200),
    st.integers(1, 70),
    st.integers(0, 2**31),
)
def test_matmul_tilings_are_bit_exact(hw, m, k, n, seed):
    rng = np.random.default_rng(seed)
    layer = ConvLayer("mm", ConvShape.matmul(m, k, n), Precision.INT8)
    x = rng.integers(-128, 128, size=(1, m, k)).astype(np.int8)
    w = rng.integers(-128, 128, size=(n, 1, 1, k)).astype(np.int8)
    ref = reference_conv(x, w, layer.shape)
    plans = candidate_plans(layer, hw)
    for plan in [default_plan(layer, hw), *plans[:: max(1, len(plans) // 3)]]:
        out, sat = run_conv(layer, x, w, hw, plan)
        np.testing.assert_array_equal(out.astype(np.int64), ref)
        assert sat == 0


@pytest.mark.parametrize("cfg", ["nv_small", "nv_full"])
@settings(max_examples=12, deadline=None)
@given(
    st.integers(3, 12),
    st.integers(3, 12),
    st.integers(1, 80),
    st.integers(1, 40),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(0, 1),
    st.integers(1, 2),
    st.integers(0, 2**31),
)
def test_conv_with_stride_pad_dilation_is_bit_exact(cfg, w_, h_, c, k, ks, stride, pad, dil, seed):
    """A sample of the legal tilings of a strided, padded, dilated convolution give the reference numbers."""
    try:
        shape = ConvShape.square(w_, h_, c, k, kernel=ks, stride=stride, pad=pad, dilation=dil)
    except ShapeError:
        return  # kernel larger than the padded input: not a layer
    hw = load_config(cfg)
    rng = np.random.default_rng(seed)
    layer = ConvLayer("conv", shape, Precision.INT8)
    x = rng.integers(-128, 128, size=(h_, w_, c)).astype(np.int8)
    wt = rng.integers(-128, 128, size=(k, ks, ks, c)).astype(np.int8)
    ref = reference_conv(x, wt, shape)
    plans = candidate_plans(layer, hw)  # thousands on nv_full: an even sample of about eight
    for plan in plans[:: max(1, len(plans) // 8)]:
        out, _ = run_conv(layer, x, wt, hw, plan)
        np.testing.assert_array_equal(out.astype(np.int64), ref)


def test_int16_and_fp16_paths(nv_full):
    rng = np.random.default_rng(1)
    layer16 = ConvLayer("mm16", ConvShape.matmul(8, 100, 20), Precision.INT16)
    x = rng.integers(-32768, 32768, size=(1, 8, 100)).astype(np.int16)
    w = rng.integers(-32768, 32768, size=(20, 1, 1, 100)).astype(np.int16)
    out, sat = run_conv(layer16, x, w, nv_full, default_plan(layer16, nv_full), truncate=8)
    ref, ref_sat = saturate(shift_round(reference_conv(x, w, layer16.shape), 8), 32)
    np.testing.assert_array_equal(out, ref)
    assert sat == ref_sat
    layerf = ConvLayer("mmf", ConvShape.matmul(8, 100, 20), Precision.FP16)
    xf = rng.standard_normal((1, 8, 100)).astype(np.float16)
    wf = rng.standard_normal((20, 1, 1, 100)).astype(np.float16)
    outf, _ = run_conv(layerf, xf, wf, nv_full, default_plan(layerf, nv_full))
    prods = xf.astype(np.float64)[0][:, None, :] * wf.astype(np.float64)[:, 0, 0, :][None]
    reff = prods.sum(axis=2)
    # CMAC's block float: every product aligned to its atom's largest exponent, whose unit is at most
    # 2**-20 of the largest product (a normal mantissa has 11 bits a side), and truncated by up to two
    # units (the sum and carry vectors each); CACC's and the FP32 hand-off's roundings on top
    bound = 2 * 100 * np.abs(prods).max(axis=2) * 2.0**-20 + np.abs(reff) * 2.0**-22
    assert np.all(np.abs(outf[0] - reff) <= bound)
    assert np.any(outf[0] != reff.astype(np.float32))  # not float arithmetic


def test_fused_sdp_requantize(nv_full):
    rng = np.random.default_rng(7)
    layer = ConvLayer(
        "mm", ConvShape.matmul(16, 64, 32), Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL, relu=True)
    )
    x = rng.integers(-128, 128, size=(1, 16, 64)).astype(np.int8)
    w = rng.integers(-128, 128, size=(32, 1, 1, 64)).astype(np.int8)
    bias = rng.integers(-1000, 1000, size=32)
    params = SdpParams(x1=Stage(alu_operand=bias, relu=True), cvt=Convertor(offset=0, scale=3, shift=10))
    out, _ = run_conv(layer, x, w, nv_full, default_plan(layer, nv_full), sdp_params=params)
    acc = reference_conv(x, w, layer.shape)[0] + bias
    expect = np.clip(shift_round(np.maximum(acc, 0) * 3, 10), -128, 127)
    np.testing.assert_array_equal(out[0], expect)


def test_shape_errors():
    from nvdla_sim import ShapeError

    with pytest.raises(ShapeError, match="in_c must be an integer in 1..8192"):
        ConvShape.matmul(4, 10000, 4)
    with pytest.raises(ShapeError, match="exceeds padded input"):
        ConvShape(in_w=2, in_h=2, in_c=1, out_k=1, kernel_w=3, kernel_h=3)


def test_cacc_int16_accumulator_saturates_at_48_bits():
    big = np.full((1, 1), (1 << 46), np.int64)
    res = cacc.accumulate([big] * 3, Precision.INT16, truncate=16)
    assert res.acc_saturations == 2  # 2**46 + 2**46 already exceeds 2**47 - 1; the third add saturates again
    assert res.values[0, 0] == (2**31 - 1)  # (2**47 - 1) >> 16 rounds to 2**31, then saturates


def test_one_loop_nest_orders_timing_and_function():
    """tile_steps is the plan's loop nest for both sides: 4 output rows in bands of 2, 20 kernels in
    tiles of 16 (kernel groups of 8 on nv_small). Data-stationary runs each band against every group;
    weight-stationary runs each weight tile against every band. run_conv follows either order to the
    same bits, equal to a plain numpy convolution."""
    from nvdla_sim.engine.tiling import LoopOrder, TilePlan, tile_steps

    hw = load_config("nv_small")
    layer = ConvLayer("c", ConvShape.square(4, 4, 32, 20, kernel=1), Precision.INT8)  # 128-byte weight tiles
    ds = TilePlan(4, 8, 2, 16, LoopOrder.DATA_STATIONARY)
    ws = TilePlan(4, 8, 2, 16, LoopOrder.WEIGHT_STATIONARY)
    assert [(t.data_tile, t.group) for t in tile_steps(layer, ds, hw)] == [
        (0, (0, 8)), (0, (8, 16)), (0, (16, 20)), (1, (0, 8)), (1, (8, 16)), (1, (16, 20))
    ]  # fmt: skip
    assert [(t.data_tile, t.group) for t in tile_steps(layer, ws, hw)] == [
        (0, (0, 8)), (0, (8, 16)), (1, (0, 8)), (1, (8, 16)), (0, (16, 20)), (1, (16, 20))
    ]  # fmt: skip
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (4, 4, 32)).astype(np.int8)
    w = rng.integers(-128, 128, (20, 1, 1, 32)).astype(np.int8)
    a, _ = run_conv(layer, x, w, hw, ds)
    b, _ = run_conv(layer, x, w, hw, ws)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, reference_conv(x, w, layer.shape))
