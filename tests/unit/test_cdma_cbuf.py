import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_sim import Precision, ShapeError
from nvdla_sim.units import cbuf, cdma, memory_format

dims = st.tuples(st.integers(1, 5), st.integers(1, 9), st.integers(1, 150))


@given(dims, st.sampled_from([Precision.INT8, Precision.INT16]), st.integers(0, 3), st.integers(0, 2**31))
def test_feature_format_places_each_element_where_format_rst_says(hw, shape, prec, gap, seed):
    """doc/hw/format.rst, feature data: element (x, y, c) sits at surface c // E (E elements per memory
    atom), at addr + surface * surface_stride + y * line_stride + x * atom + (c % E) * bytes; the lanes
    past C in the last surface are zero. Strides with gaps between lines test the strides, not a packing."""
    if prec not in hw.precisions:
        prec = Precision.INT8
    h, w, c = shape
    atom = hw.memory.memory_atomic_bytes
    e = atom // prec.bytes
    line = w * atom + gap * atom
    surf = memory_format.Surface(addr=64, line_stride=line, surface_stride=h * line + gap * atom)
    rng = np.random.default_rng(seed)
    lo, hi = prec.int_range
    x = rng.integers(lo, hi + 1, size=shape).astype(prec.numpy_dtype)
    img = memory_format.feature_image(x, surf, prec, hw)
    surfaces = -(-c // e)
    assert img.size == surfaces * surf.surface_stride
    raw = img.view(np.uint8)
    for yy, xx, cc in {(0, 0, 0), (h - 1, w - 1, c - 1), (h // 2, w // 2, c // 2)}:
        off = (cc // e) * surf.surface_stride + yy * line + xx * atom + (cc % e) * prec.bytes
        assert raw[off : off + prec.bytes].view(prec.numpy_dtype)[0] == x[yy, xx, cc]
    pad = (surfaces - 1) * surf.surface_stride + (c % e) * prec.bytes if c % e else None
    if pad is not None:
        assert not raw[pad : pad + (e - c % e) * prec.bytes].any()
    mem = _Bytes(img.size + 64)
    mem.write(64, img)
    back = memory_format.read_cube(mem, surf, w, h, c, prec, hw)
    np.testing.assert_array_equal(back[:, :, :c], x)


class _Bytes:
    """A flat byte store (the read/write interface of the program runner's memory)."""

    def __init__(self, n: int) -> None:
        self.buf = np.zeros(n, np.uint8)

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        return self.buf[addr : addr + nbytes].copy()

    def write(self, addr: int, data: np.ndarray) -> None:
        self.buf[addr : addr + len(data)] = data


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
def test_dc_weights_are_laid_out_as_format_rst_says(hw, k, r, s, c, seed):
    """format.rst, "Basic Weight for Direct Convolution": kernel groups of kernels_per_atomic kernels; in a
    group, channel blocks of atomic_c; in a block, (r, s), then kernel, then channel. Element (kk, rr, ss, ch)
    is found by counting the blocks before it, independently of the packer's loops."""
    w = np.random.default_rng(seed).integers(-128, 128, size=(k, r, s, c)).astype(np.int8)
    flat = memory_format.dc_weight_bytes(w, Precision.INT8, hw).view(np.int8)
    assert flat.size == k * r * s * c
    kpg, ac = hw.kernels_per_atomic(Precision.INT8), hw.mac.atomic_c

    def offset(kk: int, rr: int, ss: int, ch: int) -> int:
        g0 = kk // kpg * kpg
        g = min(kpg, k - g0)  # kernels in this group
        before_group = g0 * r * s * c
        c0 = ch // ac * ac
        before_block = g * r * s * c0  # earlier channel blocks of the group (each g x r x s x its width)
        cc = min(ac, c - c0)
        return before_group + before_block + ((rr * s + ss) * g + (kk - g0)) * cc + (ch - c0)

    for kk, rr, ss, ch in {(0, 0, 0, 0), (k - 1, r - 1, s - 1, c - 1), (k // 2, r // 2, s // 2, c // 2)}:
        assert flat[offset(kk, rr, ss, ch)] == w[kk, rr, ss, ch]
    mem = _Bytes(flat.size + 128)
    mem.write(128, flat.view(np.uint8))
    np.testing.assert_array_equal(memory_format.read_dc_weights(mem, 128, k, r, s, c, Precision.INT8, hw), w)
    e = hw.cbuf_entry_bytes  # D_WEIGHT_BYTES: the packed blob in whole CBUF entries (cdma.weight_bytes)
    assert cdma.weight_bytes(k, r * s * c, hw) == -(-flat.size // e) * e


def test_bank_split_errors(nv_small):
    with pytest.raises(ShapeError, match="exceeds 32 banks of nv_small"):
        cbuf.check_bank_split(20, 13, nv_small)
    with pytest.raises(ShapeError, match="overflows 32 banks"):
        cbuf.CbufStore(nv_small).write(31, np.zeros((600, 8), np.uint8))


def test_weight_bytes_fetched_by_hand():
    """D_WEIGHT_BYTES in whole CBUF entries, an atomic-C slice at the widest precision (projects.spec
    CBUF_ENTRY_WIDTH): 8 bytes on nv_small (8 x INT8), 64 on nv_large (64 x INT8), 128 on nv_full (64 x
    INT16/FP16); 3 kernels of 5 bytes are 15 bytes of blob."""
    from nvdla_sim import load_config

    small, large, full = (load_config(n) for n in ("nv_small", "nv_large", "nv_full"))
    assert [cdma.weight_bytes(3, 5, h) for h in (small, large, full)] == [16, 64, 128]
    assert [cdma.weight_bytes(1, 129, h) for h in (small, large, full)] == [136, 192, 256]
    assert cdma.weight_bytes(32, 64, small) == cdma.weight_bytes(32, 64, full) == 2048
