"""Quantization, SDP requantize parameters, pruning, NVDLA weight compression and their timing effects."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_mapper import PRESETS, build_graph, map_model
from nvdla_mapper.numerics.quant import (
    Calibration,
    Granularity,
    dequantize,
    entropy_threshold,
    multiplier_to_scale_shift,
    quantize,
    requant_sdp,
    scale_for,
)
from nvdla_mapper.numerics.sparsity import compress, compressed_bytes, decompress, is_2_4, prune_2_4, prune_magnitude
from nvdla_mapper.options import WeightTreatment
from nvdla_mapper.studies.accuracy import QuantSettings, block_accuracy
from nvdla_sim import ConvLayer, ConvShape, NvdlaError, Precision, default_plan, load_config, run_conv, simulate
from nvdla_sim.units import sdp

floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@given(st.lists(floats, min_size=1, max_size=64), st.floats(1e-3, 1e3))
def test_quantize_roundtrip_within_half_step(xs, amax):
    x = np.clip(np.array(xs), -amax, amax)
    s = scale_for(amax)
    q = quantize(x, s)
    assert q.dtype == np.int8
    assert np.all(np.abs(dequantize(q, s) - x) <= s / 2 + 1e-9)


def test_calibration_parse_and_percentile():
    assert Calibration.parse("percentile:99.9").percentile == 99.9
    with pytest.raises(ValueError, match="'percentile:P' with 0 < P <= 100"):
        Calibration.parse("percentile:0")
    x = np.concatenate([np.ones(999), [1000.0]])
    assert Calibration.parse("max").amax(x) == 1000
    assert Calibration.parse("percentile:99").amax(x) < 2


def test_entropy_calibration_by_hand():
    """KL calibration on a 4-bin histogram quantized to 2 levels, worked by hand. |x| = 0.5 x3, 1.5, 3.5 x2
    over [0, 3.5]: bins of 0.875 hold 3, 1, 0, 2. Clipped at 2 bins: P = (3, 1+0+2)/6 = (.5, .5), Q = the
    two bins as two levels, (3, 1)/4: KL = .5 ln(.5/.75) + .5 ln(.5/.25) = 0.143841. At 3 bins: P = (3, 1,
    2)/6, Q merges bins 0-1 (4 over 2 non-empty bins: 2, 2) and keeps bin 2 (empty: 0) while P has 2/6
    there: infinite. At 4 bins: P = (3, 1, 0, 2)/6, Q = (2, 2, 0, 2)/6 (bins 2-3 hold 2 in one non-empty
    bin): KL = .5 ln(.5/(1/3)) + (1/6) ln((1/6)/(1/3)) = 0.087208, the least: the threshold is bin 4's
    upper edge, 3.5 (the max)."""
    x = np.array([0.5, 0.5, 0.5, 1.5, 3.5, -3.5])
    threshold, kl = entropy_threshold(x, bins=4, levels=2)
    assert threshold == 3.5
    assert kl[0] == pytest.approx(0.143841, abs=1e-6) and kl[1] == np.inf and kl[2] == pytest.approx(0.087208, abs=1e-6)


def test_entropy_calibration_clips_outliers_and_leaves_weights_at_max():
    """A million N(0, 1) samples with five at up to 50 sigma: max keeps them (INT8 steps of 0.25 sigma
    and more), entropy clips near 4 sigma; weights keep their max under entropy (TensorRT calibrates
    activations)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1_000_000)
    x[:5] *= 50
    cal = Calibration.parse("entropy")
    assert 3 < float(cal.amax(x)) < 6 < 30 < float(Calibration.parse("max").amax(x))
    w = rng.standard_normal((4, 64))
    assert np.array_equal(cal.weight_amax(w, axis=0), np.abs(w).max(axis=1))
    with pytest.raises(ValueError, match="per tensor"):
        cal.amax(w, axis=0)
    with pytest.raises(ValueError, match="or 'entropy'"):
        Calibration.parse("kl")


@given(st.floats(1e-7, 1e3))
def test_multiplier_scale_shift_precision(m):
    scale, shift = multiplier_to_scale_shift(m)
    assert 1 <= scale < 2**15 and 0 <= shift <= 63
    if m * 2**63 >= 2**14:
        assert abs(scale / 2**shift - m) / m <= 2**-13


@given(st.integers(1, 16), st.integers(0, 2**31), st.sampled_from(list(Granularity)))
def test_requantize_is_close_to_float(k, seed, gran):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-(2**20), 2**20, size=(32, k))
    s_x, s_w, s_y = 0.01, rng.uniform(0.001, 0.01, k), 0.5
    bias = rng.normal(0, 1, k)
    params = requant_sdp(
        s_x, s_w if gran is Granularity.PER_CHANNEL else np.full(k, s_w[0]), s_y, bias=bias, granularity=gran
    )
    got = sdp.sdp_apply(acc, params).values.astype(np.float64)
    sw = s_w if gran is Granularity.PER_CHANNEL else np.full(k, s_w[0])
    real = np.clip((acc * s_x * sw + bias) / s_y, -128, 127)
    assert np.max(np.abs(got - real)) <= 1.01  # one LSB: rounding of multiplier, bias and output


@given(st.integers(1, 40), st.integers(1, 60), st.floats(0, 0.95), st.integers(0, 2**31))
def test_compressed_weights_decode_to_originals(k, c, sparsity, seed):
    w = np.random.default_rng(seed).integers(-128, 128, size=(k, c)).astype(np.int8)
    w = prune_magnitude(w, sparsity)
    comp = compress(w, kernels_per_group=32)
    np.testing.assert_array_equal(decompress(comp), w)
    density = np.count_nonzero(w) / w.size
    est = compressed_bytes(w.size, density=density, element_bytes=1, kernel_groups=comp.group_sizes.size)
    assert est == comp.nbytes


@given(st.integers(1, 9), st.integers(1, 30), st.integers(0, 2**31))
def test_prune_2_4_keeps_two_largest(k, c, seed):
    w = np.random.default_rng(seed).standard_normal((k, c))
    p = prune_2_4(w)
    assert is_2_4(p)
    kept = p != 0
    assert np.all(p[kept] == w[kept])
    for g0 in range(0, c - c % 4, 4):  # full groups keep exactly the two largest magnitudes
        grp = np.abs(w[:, g0 : g0 + 4])
        assert np.all(np.sort(grp, axis=1)[:, 2:].sum(1) == pytest.approx(np.abs(p[:, g0 : g0 + 4]).sum(1)))


def test_unpruned_model_numbers_and_cycles_unchanged():
    hw = load_config("nv_full")
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, size=(40, 1, 1, 96)).astype(np.int8)
    np.testing.assert_array_equal(decompress(compress(w, kernels_per_group=32)), w)
    np.testing.assert_array_equal(prune_magnitude(w, 0.0), w)
    layer = ConvLayer("mm", ConvShape.matmul(16, 96, 40), Precision.INT8)
    x = rng.integers(-128, 128, size=(1, 16, 96)).astype(np.int8)
    plan = default_plan(layer, hw)
    a, _ = run_conv(layer, x, w, hw, plan)
    b, _ = run_conv(layer, x, decompress(compress(w, kernels_per_group=32)), hw, plan)
    np.testing.assert_array_equal(a, b)
    g = build_graph(PRESETS["bert-base"], seq=32)
    base = map_model(g, hw, precision=Precision.INT8, batch=1, seq=32)
    same = map_model(g, hw, precision=Precision.INT8, batch=1, seq=32, weights=WeightTreatment())
    assert base.total_cycles == same.total_cycles and same.baseline_cycles is None


def test_compression_saves_cycles_when_weight_fetch_bound():
    hw = load_config("nv_full")
    gemv = ConvLayer("gemv", ConvShape.matmul(1, 4096, 4096), Precision.INT8)
    dense = simulate(gemv, hw)
    packed = ConvLayer(
        "gemv",
        gemv.shape,
        Precision.INT8,
        weight_bytes=compressed_bytes(4096 * 4096, density=0.5, element_bytes=1, kernel_groups=128),
    )
    comp = simulate(packed, hw)
    assert comp.traffic.dram_read < 0.7 * dense.traffic.dram_read
    assert comp.cycles < 0.7 * dense.cycles  # DRAM-bound: time follows bytes
    big = ConvLayer("ffn", ConvShape.matmul(512, 1024, 1024), Precision.INT8)
    big_c = ConvLayer("ffn", big.shape, Precision.INT8, weight_bytes=600_000)
    assert simulate(big_c, hw).cycles >= 0.97 * simulate(big, hw).cycles  # compute-bound: nothing to gain


def test_sparse_mac_whatif_halves_mac_work():
    hw = load_config("nv_full")
    layer = ConvLayer("ffn", ConvShape.matmul(512, 1024, 1024), Precision.INT8)
    sparse = ConvLayer("ffn", layer.shape, Precision.INT8, sparse_mac=True)
    a, b = simulate(layer, hw), simulate(sparse, hw)
    assert b.lower_bound_cycles == a.lower_bound_cycles // 2
    assert b.cycles < 0.6 * a.cycles and b.detail.sparse_mac_whatif


def test_weight_treatment_validation():
    with pytest.raises(NvdlaError, match="--prune must be 2:4 or magnitude:S"):
        WeightTreatment("3:4")
    with pytest.raises(NvdlaError, match="needs --prune 2:4"):
        WeightTreatment("", False, True)
    g = build_graph(PRESETS["bert-base"], seq=8)
    with pytest.raises(NvdlaError, match="nv_large has no weight compression"):
        map_model(
            g, load_config("nv_large"), precision=Precision.INT8, batch=1, seq=8, weights=WeightTreatment("2:4", True)
        )


def test_int8_block_accuracy(nv_full):
    spec = PRESETS["bert-base"]
    errs = {e.name: e for e in block_accuracy(spec, nv_full, QuantSettings(), seq=32)}
    assert errs["block_out"].cosine > 0.99 and errs["q"].rel < 0.1
    dyn = {e.name: e for e in block_accuracy(spec, nv_full, QuantSettings(dynamic=True), seq=32)}
    assert dyn["block_out"].cosine > 0.99
    pruned = {e.name: e for e in block_accuracy(spec, nv_full, QuantSettings(prune="2:4"), seq=32)}
    assert pruned["q"].rel > errs["q"].rel  # pruning random weights adds error on top of quantization
