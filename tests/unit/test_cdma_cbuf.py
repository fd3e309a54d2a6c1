import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_sim import Precision, ShapeError
from nvdla_sim.units import cbuf, cdma

dims = st.tuples(st.integers(1, 5), st.integers(1, 9), st.integers(1, 150))


@given(dims, st.sampled_from([Precision.INT8, Precision.INT16]), st.integers(0, 2**31))
def test_feature_memory_roundtrip(hw, shape, prec, seed):
    if prec not in hw.precisions:
        prec = Precision.INT8
    rng = np.random.default_rng(seed)
    lo, hi = prec.int_range
    x = rng.integers(lo, hi + 1, size=shape).astype(prec.numpy_dtype)
    buf = cdma.to_feature_memory(x, prec, hw)
    assert buf.size == cdma.feature_bytes(shape[1], shape[0], shape[2], prec, hw)
    np.testing.assert_array_equal(cdma.from_feature_memory(buf, shape, prec, hw), x)


@given(dims, st.integers(0, 2**31))
def test_cbuf_entries_roundtrip_and_count(hw, shape, seed):
    x = np.random.default_rng(seed).integers(-128, 128, size=shape).astype(np.int8)
    ent = cbuf.pack_feature_rows(x, Precision.INT8, hw)
    assert len(ent) == cbuf.data_entries(shape[1], shape[0], shape[2], Precision.INT8, hw)
    np.testing.assert_array_equal(cbuf.unpack_feature_rows(ent, shape, Precision.INT8, hw), x)
    store = cbuf.CbufStore(hw)
    if len(ent) <= len(store.mem):
        store.write(0, ent)
        np.testing.assert_array_equal(store.read(0, len(ent)), ent)


def test_entry_per_slice_matches_compiler_formula(nv_full):
    # nv_full: 4 memory atoms (32 B) per 128-B entry; C=96 int8 = 3 atoms -> 3/4-filled entries: W entries
    assert cbuf.entry_per_slice(10, 96, Precision.INT8, nv_full) == 10
    assert cbuf.entry_per_slice(10, 32, Precision.INT8, nv_full) == 3  # 1/4 filled: ceil(10/4)
    assert cbuf.entry_per_slice(10, 64, Precision.INT8, nv_full) == 5  # 1/2 filled
    assert cbuf.entry_per_slice(10, 128, Precision.INT8, nv_full) == 10


@given(st.integers(1, 40), st.integers(1, 3), st.integers(1, 3), st.integers(1, 140), st.integers(0, 2**31))
def test_weight_memory_roundtrip(hw, k, r, s, c, seed):
    w = np.random.default_rng(seed).integers(-128, 128, size=(k, r, s, c)).astype(np.int8)
    buf = cdma.to_weight_memory(w, Precision.INT8, hw)
    assert buf.size == cdma.weight_bytes(k, r * s * c)
    np.testing.assert_array_equal(cdma.from_weight_memory(buf, w.shape, Precision.INT8, hw), w)


def test_bank_split_errors(nv_small):
    with pytest.raises(ShapeError, match="exceeds 32 banks of nv_small"):
        cbuf.check_bank_split(20, 13, nv_small)
    with pytest.raises(ShapeError, match="overflows 32 banks"):
        cbuf.CbufStore(nv_small).write(31, np.zeros((600, 8), np.uint8))
