"""The mapper's BERT block on NVIDIA's RTL with SDP's element-wise (Y) unit and LUT: nv_small_256_full,
nv_large and nv_medium_1024_full; bit-exact output and cycles, checked in CI without the RTL (issue 29).

validation/data/nvdla_rtl_transformer_y.json (nv_small_256_full) and nvdla_rtl_transformer_y_nv_large.json
hold what the RTL measured on the programs `python -m nvdla_validation.nvdla_rtl.transformer_programs DIR
--suite y_unit` (`y_unit_large`, `y_unit_medium`) makes: every NVDLA layer of a BERT encoder block (hidden 128, 2 heads,
FFN 512, sequence 64) as the mapper lowers it onto a build with the Y unit, softmax (exp and 1/sum
through the LUT, the normalisation by an element-wise multiply), layernorm (square, rsqrt through the
LUT, normalisation with a pair of element-wise operands), the fused GELU and the residual adds included.
Each program's CRC is the model's; here they are made again and must still be the ones the RTL met, with
the model's cycles close to the RTL's.
"""

from __future__ import annotations

import pytest

from nvdla_sim import load_config
from nvdla_validation.nvdla_rtl.compare import compare, distribution, load_rows, manifest_mismatches
from nvdla_validation.nvdla_rtl.transformer_programs import SUITES, generate

BUILDS = {
    "y_unit": ("nv_small_256_full", "tfy_block_"),
    "y_unit_large": ("nv_large", "tfyl_block_"),
    "y_unit_medium": ("nv_medium_1024_full", "tfym_block_"),
}
DOCS = {s: load_rows(SUITES[s][1]) for s in BUILDS}
ROWS = {s: {r["name"]: r for r in DOCS[s]["rows"]} for s in BUILDS}
MODEL = {s: {r.name: r for r in compare(DOCS[s], load_config(SUITES[s][0]))} for s in BUILDS}
Y_STEPS = ("softmax_exp", "softmax_recip", "pv_normalize", "ln1_square", "ln1_rsqrt", "ln1_normalize", "ffn1")

# Rows past issue 29's 15% worst case, with what is known of the cause (docs/validation.md section 5e): the
# E-RDMA may have 16 beats in flight (MCIF tieoff_depth_sdp_e), sized for PRIMARY_MEMIF_LATENCY 64, and the
# testbench's read latency grows by one cycle each time CDMA holds r_rready low (to 163 and 316 cycles
# here), so the operand stream runs at 128 B per latency + ~27 cycles; the model has neither.
KNOWN_OUTLIERS = {
    "tfy_block_layer0_attn_o": "per-element E-RDMA operand on the fly, credit-bound at the testbench's grown latency",
    "tfy_block_layer0_ffn2": "per-element E-RDMA operand on the fly, credit-bound at the testbench's grown latency",
}
# 2026-12-05: nv_small_256_full median 1.1%, p90 2.9%, worst 26.4% (the outliers above); nv_large median
# 1.3%, p90 3.5%, worst 9.2% since CSC's stripe rule and CACC's 64 credits are modelled (1.9 / 8.2 / 8.2%
# before, docs/validation.md 5c; its SDP passes within 3.2%)
# nv_medium_1024_full (2026-12-05): median 1.95%, p90 8.0%, worst 8.0%: its six one-kernel row sums (layernorm's
# sum and sum of squares, 128 channels) at 0.920, 79 cycles short (the prologue of docs/validation.md 5c)
MISSES = {
    ("y_unit", "worst"): "tfy_block_layer0_attn_o (KNOWN_OUTLIERS)",
    ("y_unit_medium", "p90"): "8.0%: the one-kernel row sums at 0.920",
}


@pytest.mark.parametrize("suite", BUILDS)
def test_committed_provenance_and_every_program_passed_on_the_rtl(suite):
    build, prefix = BUILDS[suite]
    doc, rows = DOCS[suite], ROWS[suite]
    assert doc["command"].startswith(f"python -m nvdla_validation.nvdla_rtl.run_reference SRC --project {build} ")
    assert len(doc["source_commit"]) == 40 and doc["date"] and len(rows) == 34
    assert all(r["status"] == "pass" for r in rows.values()), [n for n, r in rows.items() if r["status"] != "pass"]
    for step in Y_STEPS:  # the layers that use the Y unit, by the mapper's names
        assert f"{prefix}layer0_attn_{step}" in rows or f"{prefix}layer0_{step}" in rows, step


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return {s: [r for r in generate(tmp_path_factory.mktemp(s), s) if r["name"]] for s in BUILDS}


@pytest.mark.parametrize("suite", BUILDS)
def test_the_programs_are_the_ones_the_rtl_ran(programs, suite):
    """Same names, same expected CRCs as the committed rows (else: regenerate the data, the suite or the
    model's bytes changed)."""
    assert manifest_mismatches(programs[suite], DOCS[suite]) == []


@pytest.mark.parametrize("suite", BUILDS)
def test_each_program_times_as_the_mapper_costs_its_layer(programs, suite):
    for p in programs[suite]:
        assert MODEL[suite][p["name"]].model_cycles == p["model_cycles"] == p["mapper_cycles_per_instance"], p["name"]


@pytest.mark.parametrize("suite", BUILDS)
def test_standalone_y_unit_passes_are_within_3_5_percent(suite):
    """Every SDP pass through the Y unit (the LUT, element-wise operands, the (ALU, MUL) pair stream)."""
    for row in MODEL[suite].values():
        if row.unit == "sdp":
            assert abs(row.ratio - 1) <= 0.035, f"{row.name}: model/RTL {row.ratio:.3f}"


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OUTLIERS[k.split("/")[1]]))
        if k.split("/")[1] in KNOWN_OUTLIERS
        else k
        for k in (f"{s}/{n}" for s in BUILDS for n in sorted(ROWS[s]))
    ],
)
def test_each_program_within_issue_29s_worst_case(key):
    suite, name = key.split("/")
    row = MODEL[suite][name]
    assert row.error <= 0.15, f"{name}: model {row.model_cycles} vs RTL {row.rtl_cycles} ({row.ratio:.3f})"


@pytest.mark.parametrize(
    "suite, measure, target",
    [
        pytest.param(s, m, t, marks=pytest.mark.xfail(strict=True, reason=MISSES[(s, m)]))
        if (s, m) in MISSES
        else (s, m, t)
        for s in BUILDS
        for m, t in (("median", 0.02), ("p90", 0.05), ("worst", 0.15))
    ],
)
def test_model_cycles_meet_issue_29s_targets(suite, measure, target):
    d = distribution(list(MODEL[suite].values()))
    assert d["n"] == len(ROWS[suite])
    assert d[measure] <= target, d
