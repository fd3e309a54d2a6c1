"""The mapper's BERT block on NVIDIA's nv_small_256_full RTL, SDP's element-wise (Y) unit and LUT included:
bit-exact output and cycles, checked in CI without the RTL (issue 29).

validation/data/nvdla_rtl_transformer_y.json holds what the RTL measured on the programs
`python -m nvdla_validation.nvdla_rtl.transformer_programs DIR --suite y_unit` makes: every NVDLA layer of a
BERT encoder block (hidden 128, 2 heads, FFN 512, sequence 64) as the mapper lowers it onto a build with
the Y unit, softmax (exp and 1/sum through the LUT, the normalisation by an element-wise multiply),
layernorm (square, rsqrt through the LUT, normalisation with a pair of element-wise operands), the
fused GELU and the residual adds included. Each program's CRC is the model's; here they are made again
and must still be the ones the RTL met, with the model's cycles close to the RTL's.
"""

from __future__ import annotations

import pytest

from nvdla_sim import load_config
from nvdla_validation.nvdla_rtl.compare import compare, distribution, load_rows, manifest_mismatches
from nvdla_validation.nvdla_rtl.transformer_programs import DATA_Y, HW_Y, generate

DOC = load_rows(DATA_Y)
ROWS = {r["name"]: r for r in DOC["rows"]}
Y_STEPS = ("softmax_exp", "softmax_recip", "pv_normalize", "ln1_square", "ln1_rsqrt", "ln1_normalize", "ffn1")


def test_committed_provenance_and_every_program_passed_on_the_rtl():
    assert DOC["command"].startswith(
        "python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_small_256_full --tests-dir"
    )
    assert len(DOC["source_commit"]) == 40 and DOC["date"]
    assert all(r["status"] == "pass" for r in ROWS.values()), [n for n, r in ROWS.items() if r["status"] != "pass"]
    for step in Y_STEPS:  # the layers that use the Y unit, by the mapper's names
        assert f"tfy_block_layer0_attn_{step}" in ROWS or f"tfy_block_layer0_{step}" in ROWS, step


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return [r for r in generate(tmp_path_factory.mktemp("tfy"), "y_unit") if r["name"]]


def test_the_programs_are_the_ones_the_rtl_ran(programs):
    """Same names, same expected CRCs as the committed rows (else: regenerate the data, the suite or the
    model's bytes changed)."""
    assert manifest_mismatches(programs, DOC) == []


def test_each_program_times_as_the_mapper_costs_its_layer(programs):
    model = {r.name: r.model_cycles for r in compare(DOC, load_config(HW_Y))}
    for p in programs:
        assert model[p["name"]] == p["model_cycles"] == p["mapper_cycles_per_instance"], p["name"]


# Rows past issue 29's 15% worst case, with what is known of the cause (docs/validation.md section 5e): the
# E-RDMA may have 16 beats in flight (MCIF tieoff_depth_sdp_e), sized for PRIMARY_MEMIF_LATENCY 64, and the
# testbench's read latency grows by one cycle each time CDMA holds r_rready low (to 163 and 316 cycles
# here), so the operand stream runs at 128 B per latency + ~27 cycles; the model has neither.
KNOWN_OUTLIERS = {
    "tfy_block_layer0_attn_o": "per-element E-RDMA operand on the fly, credit-bound at the testbench's grown latency",
    "tfy_block_layer0_ffn2": "per-element E-RDMA operand on the fly, credit-bound at the testbench's grown latency",
}


def test_standalone_y_unit_passes_are_within_3_percent():
    """Every SDP pass through the Y unit (the LUT, element-wise operands, the (ALU, MUL) pair stream)."""
    for row in compare(DOC, load_config(HW_Y)):
        if row.unit == "sdp":
            assert abs(row.ratio - 1) <= 0.03, f"{row.name}: model/RTL {row.ratio:.3f}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OUTLIERS[n])) if n in KNOWN_OUTLIERS else n
        for n in sorted(ROWS)
    ],
)
def test_each_program_within_issue_29s_worst_case(name):
    row = next(r for r in compare(DOC, load_config(HW_Y)) if r.name == name)
    assert row.error <= 0.15, f"{name}: model {row.model_cycles} vs RTL {row.rtl_cycles} ({row.ratio:.3f})"


def test_model_cycles_meet_issue_29s_median_and_90th_percentile():
    """Median 1.2%, 90th percentile 2.9% (2026-12-04); the worst case is a known outlier (above)."""
    d = distribution(compare(DOC, load_config(HW_Y)))
    assert d["n"] == len(ROWS)
    assert d["median"] <= 0.02 and d["p90"] <= 0.05, d


@pytest.mark.xfail(strict=True, reason="worst 25.2%: tfy_block_layer0_attn_o (KNOWN_OUTLIERS)")
def test_model_cycles_meet_issue_29s_worst_case():
    assert distribution(compare(DOC, load_config(HW_Y)))["worst"] <= 0.15
