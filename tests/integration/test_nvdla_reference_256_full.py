"""The model against NVIDIA's nv_small_256_full RTL (master branch: 32x8 MACs, SDP element-wise unit and
LUT), from the committed measurements (no Verilator needed): issue 29's first build beyond nv_small.

validation/data/nvdla_rtl_nv_small_256_full.json holds one row per NVIDIA trace test of that build,
measured by `python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_small_256_full`; each
row is re-timed with configs/nv_small_256_full_rtl_tb.toml. all 75 tests meet issue 29's
targets; a test beyond them would be listed with what is known (docs/validation.md 5b) and
marked xfail strict, so a fix makes this file fail until the list is updated.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvdla_sim import load_config
from nvdla_validation.nvdla_rtl.compare import compare, distribution, load_rows

DATA = Path(__file__).resolve().parents[2] / "validation" / "data" / "nvdla_rtl_nv_small_256_full.json"
DOC = load_rows(DATA)
ROWS = {r.name: r for r in compare(DOC, load_config("nv_small_256_full_rtl_tb"))}


def test_provenance_and_pass_fail():
    """75 of the build's 85 tests are in the stored mirror (the img_* data is missing); all 75 pass on the
    RTL (sdp_13x4x29_ew_lut_int8 loads its element-wise operand through the secondary port, sec_mem)."""
    assert DOC["command"] == "python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_small_256_full"
    assert len(DOC["source_commit"]) == 40 and DOC["testbench_memory"]["beat_bytes"] == 8
    assert len(DOC["rows"]) == 75
    assert all(r.rtl_status == "pass" and r.refused is None for r in ROWS.values())


# Beyond issue 29's 15% worst case, with what is known of the cause (none: dc_8192x1x1_2x3x1x41 was 1.22x
# with nv_small's stripe gap, which this build's two-stripe delivery-buffer credit pool hides)
KNOWN_OUTLIERS: dict[str, str] = {}


def test_the_build_meets_issue_29s_targets():
    """Median |model/RTL - 1| <= 2%, 90th percentile <= 5%, worst <= 15% (issue 29) over the 75 tests:
    SDP (five with the element-wise unit, four of them with its LUT), PDP, CDP and
    twelve convolutions; the element-wise and LUT tests within 5%."""
    rows = [r for r in ROWS.values() if r.rtl_status == "pass" and r.name not in KNOWN_OUTLIERS]
    d = distribution(rows)
    assert d["n"] == 75
    assert d["median"] <= 0.02 and d["p90"] <= 0.05 and d["worst"] <= 0.15, d
    for name in ("sdp_3x3x33_ew_le_exp_int8", "sdp_3x3x32_ew_lo_lin_int8", "sdp_3x3x33_ew_int8_reg_0",
                 "sdp_13x4x29_ew_lut_int8"):  # fmt: skip
        assert abs(ROWS[name].ratio - 1) <= 0.05, (name, ROWS[name].ratio)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OUTLIERS[n])) if n in KNOWN_OUTLIERS else n
        for n in sorted(ROWS)
        if ROWS[n].rtl_status == "pass"
    ],
)
def test_each_row_within_the_worst_case(name):
    row = ROWS[name]
    assert row.error <= 0.15, f"{name}: model {row.model_cycles} vs RTL {row.rtl_cycles} ({row.ratio:.3f})"


def test_model_output_bytes_match_nvidia_golden(tmp_path_factory):
    """Bit-exactness on this build (needs NVIDIA's trace tests: NVDLA_HW_SRC, a checkout or mirror): every
    test the model executes matches NVIDIA's golden CRCs, 70 of 70 on 2026-12-04 (32x8 convolutions
    included); the five with the SDP element-wise unit are timed but not executed (the model refuses
    them by name)."""
    from nvdla_sim.errors import NvdlaError
    from nvdla_sim.program.run import run_program
    from nvdla_validation.nvdla_rtl.run_reference import extract_tests

    src = os.environ.get("NVDLA_HW_SRC")
    if not src:
        pytest.skip("set NVDLA_HW_SRC to an nvdla/hw checkout or mirror to check the model's output bytes")
    root = extract_tests(Path(src), Path(os.environ.get("NVDLA_HW_WORK", tmp_path_factory.mktemp("hw"))),
                         "nv_small_256_full")  # fmt: skip
    hw = load_config("nv_small_256_full_rtl_tb")
    checked, refused = 0, []
    for r in DOC["rows"]:
        try:
            run = run_program(root / r["name"], hw)
        except NvdlaError as e:
            refused.append((r["name"], str(e)))
            continue
        bad = [c for c in run.checks if not c["match"]]
        assert run.checks and not bad, f"{r['name']}: model CRC differs from NVIDIA's golden: {bad}"
        checked += 1
    assert checked == 70, refused
    assert len(refused) == 5 and all("element-wise" in why for _, why in refused), refused
