"""Weight blobs that are not whole 128-byte blocks between hardware layers, as NVIDIA's RTL ran them
(validation/nvdla_rtl/align_programs.py; committed rows of nv_small, nv_small_256_full and nv_large), and the
search space that leaves such kernel tiles out. Checked in CI without the RTL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_mapper.search.tiling_search import candidate_plans
from nvdla_sim import load_config
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, illegal_reason
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.precision import Precision
from nvdla_validation.nvdla_rtl.align_programs import SHAPES, SPLITS, case_name, expected_to_fail, programs

DATA = Path(__file__).resolve().parents[2] / "validation" / "data"
BUILDS = {"nv_small": "nvdla_rtl_weight_align.json", "nv_small_256_full": "nvdla_rtl_weight_align_nv_small_256_full.json",
          "nv_large": "nvdla_rtl_weight_align_nv_large.json"}  # fmt: skip
STATUS = {b: {r["name"]: r["status"] for r in json.loads((DATA / f).read_text())["rows"]} for b, f in BUILDS.items()}


CONFIGS = {
    "nv_small": "nv_small_rtl_tb",
    "nv_small_256_full": "nv_small_256_full_rtl_tb",
    "nv_large": "nv_large_rtl_tb",
}


@pytest.mark.parametrize("build", BUILDS)
def test_a_fetch_after_a_lagging_blob_fails_and_nothing_else(build):
    """Every one of the 44 programs per build, as the RTL ran them: a program fails exactly when its second
    hardware layer fetches weights after a blob that left CSC's weight pointer behind CDMA's
    (cdma.weight_pointer_lag: the 128-byte padding spans a CBUF entry of 8, 32 or 64 bytes). On nv_large
    80- and 96-byte blobs pad within their second 64-byte entry and pass."""
    hw = load_config(CONFIGS[build])
    st = STATUS[build]
    assert len(st) == len(SHAPES) * len(SPLITS)
    for c, k in SHAPES:
        for split in SPLITS:
            assert (st[case_name(split, c, k)] == "fail") == expected_to_fail(split, c, k, hw), (build, split, c, k)
    assert sum(s == "fail" for s in st.values()) == {"nv_small": 26, "nv_small_256_full": 26, "nv_large": 21}[build]


def test_pointer_lag_by_hand():
    """A 64-byte blob is fetched as 128: 16 entries of 8 bytes written, 8 read (nv_small); 4 and 2 of 32; 2
    and 1 of 64. An 80-byte blob: 2 entries of 64 written and 2 read (nv_large), 4 and 3 of 32."""
    from nvdla_sim.units.cdma import weight_pointer_lag

    assert [weight_pointer_lag(64, e) for e in (8, 32, 64)] == [8, 2, 1]
    assert [weight_pointer_lag(80, e) for e in (8, 32, 64)] == [6, 1, 0]
    assert [weight_pointer_lag(b, 64) for b in (96, 128, 160, 192, 256)] == [0, 0, 1, 1, 0]


def test_the_programs_are_the_ones_the_rtl_ran():
    doc = json.loads((DATA / BUILDS["nv_small"]).read_text())
    crcs = {r["name"]: [c["golden_crc"] for c in r["checks"]] for r in doc["rows"]}
    for p in programs():
        assert [crc for _, _, crc in p.expected] == crcs[p.name], p.name


def test_kernel_tiles_of_any_blob_are_in_the_space_and_emitted_without_lag():
    """The emitter writes D_WEIGHT_BYTES in whole CBUF entries (cdma.weight_bytes), the fix measured below,
    so a kernel tile of any blob size leaves no pointer lag and the search keeps it. The one-channel
    broadcast (the mapper's layernorm mean): tiles of 16 kernels are 16-byte blobs, two 8-byte entries
    on nv_small (with 128-byte blocks it would lag by 14 entries)."""
    from nvdla_sim.program.emit import Alloc, conv_layer
    from nvdla_sim.units.cdma import weight_pointer_lag

    hw = load_config("nv_small")
    layer = ConvLayer("bc", ConvShape.matmul(64, 1, 128), Precision.INT8)
    tiles = TilePlan(1, 8, layer.shape.out_h, 16, LoopOrder.WEIGHT_STATIONARY)
    assert illegal_reason(layer, tiles, hw) is None
    assert any(p.order is LoopOrder.WEIGHT_STATIONARY and p.kernels_per_tile < 128 for p in candidate_plans(layer, hw))
    assert weight_pointer_lag(16, 8) == 14 and weight_pointer_lag(16, 8, register_unit=8) == 0
    op = conv_layer(ConvShape.matmul(64, 1, 16), Precision.INT8, hw, Alloc(next_addr=0x80000000))[0]
    assert op.weight_bytes == 16


@pytest.mark.parametrize("build", BUILDS)
def test_weight_bytes_in_whole_entries_remove_the_lag(build):
    """The candidate fix, as the RTL ran it: the same 44 programs with D_WEIGHT_BYTES rounded up to the
    build's CBUF entry instead of 128 bytes (CDMA then writes exactly the entries CSC reads) all pass, on
    all three builds (26, 26 and 21 fail with 128-byte blocks); today's programs are the ones that ran."""
    hw = load_config(CONFIGS[build])
    doc = json.loads((DATA / BUILDS[build].replace("weight_align", "weight_align_entries")).read_text())
    assert "--tests-dir build/align_e_" in doc["command"]
    rows = {r["name"]: r for r in doc["rows"]}
    progs = programs(hw, entry_weight_bytes=True)
    assert sorted(p.name for p in progs) == sorted(rows) and len(rows) == len(SHAPES) * len(SPLITS)
    assert all(r["status"] == "pass" for r in rows.values())
    for p in progs:
        assert [crc for _, _, crc in p.expected] == [c["golden_crc"] for c in rows[p.name]["checks"]], p.name
        for layer in rows[p.name]["layers"]:
            s = layer["shape"]
            blob = s["out_k"] * s["in_c"] * s["kernel_w"] * s["kernel_h"]
            assert layer["weight_bytes"] == -(-blob // hw.cbuf_entry_bytes) * hw.cbuf_entry_bytes
