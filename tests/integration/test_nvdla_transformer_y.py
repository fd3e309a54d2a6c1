"""The mapper's BERT block on NVIDIA's RTL with SDP's element-wise (Y) unit and LUT: nv_small_256_full,
nv_large and nv_medium_1024_full; bit-exact output and cycles, checked in CI without the RTL (issue 29).

validation/data/nvdla_rtl_transformer_y.json (nv_small_256_full, with the testbench memory's latency held
at 32 cycles: run_reference --memory fixed_latency) and nvdla_rtl_transformer_y_nv_large.json
hold what the RTL measured on the programs `python -m nvdla_validation.nvdla_rtl.transformer_programs DIR
--suite y_unit` (`y_unit_large`, `y_unit_medium`) makes: every NVDLA layer of a BERT encoder block (hidden 128, 2 heads,
FFN 512, sequence 64) as the mapper lowers it onto a build with the Y unit, softmax (exp and 1/sum
through the LUT, the normalisation by an element-wise multiply), layernorm (square, rsqrt through the
LUT, normalisation with a pair of element-wise operands), the fused GELU and the residual adds included.
Each program's CRC is the model's; here they are made again and must still be the ones the RTL met, with
the model's cycles close to the RTL's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from nvdla_sim import load_config
from nvdla_validation.nvdla_rtl.compare import compare, distribution, load_rows, manifest_mismatches
from nvdla_validation.nvdla_rtl.transformer_programs import DATA, SUITES, generate

BUILDS = {
    "y_unit": ("nv_small_256_full", "tfy_block_"),
    "y_unit_large": ("nv_large", "tfyl_block_"),
    "y_unit_medium": ("nv_medium_1024_full", "tfym_block_"),
    "y_unit_full": ("nv_full", "tfyf_block_"),
}
DOCS = {s: load_rows(SUITES[s][1]) for s in BUILDS}
ROWS = {s: {r["name"]: r for r in DOCS[s]["rows"]} for s in BUILDS}
MODEL = {s: {r.name: r for r in compare(DOCS[s], load_config(SUITES[s][0]))} for s in BUILDS}
Y_STEPS = ("softmax_exp", "softmax_recip", "pv_normalize", "ln1_square", "ln1_rsqrt", "ln1_normalize", "ffn1")

# Rows past issue 29's 15% worst case, with what is known of the cause
KNOWN_OUTLIERS: dict[str, str] = {}
# 2026-12-05: nv_small_256_full median 1.2%, p90 2.9%, worst 5.2% with the memory's latency held at 32 cycles
# (26.4% on NVIDIA's testbench memory, whose latency grew to 163 and 316 cycles on attn_o and ffn2: the
# tests on the E-RDMA's credits below); nv_large median 1.2%, p90 3.2%, worst 9.2% since CSC's stripe rule,
# CACC's 64 credits and CSC's first package are modelled (1.9 / 8.2 / 8.2% before, docs/validation.md 5c;
# its SDP passes within 3.2%); nv_medium_1024_full median 0.4%, p90 8.0%, worst 8.0%: its six one-kernel row
# sums (layernorm's sum and sum of squares, 128 channels) at 0.920, 79 cycles short (the RTL's input stream
# slows after 143 beats, docs/validation.md 5c)
MISSES = {
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


# The same 34 programs on NVIDIA's own testbench memory, whose read pipeline grows by a cycle for every cycle
# the DLA holds r_rready low (docs/validation.md 5e): the residual adds behind attn_o and ffn2 then stream
# through the E-RDMA's 16 credits at a latency of 163 and 316 cycles (each row's last_read_latency_cycles).
NVIDIA_MEMORY = json.loads(DATA.with_name("nvdla_rtl_transformer_y_nvidia_memory.json").read_text())
GROWN = ("tfy_block_layer0_attn_o", "tfy_block_layer0_ffn2")


def test_nvidia_memory_rows_differ_only_where_its_latency_grew():
    """Same programs, same CRCs, all bit-exact; cycles identical but for the rows whose reads waited on the
    grown latency (the two residual adds and the softmax row sum)."""
    assert "NVIDIA's" in NVIDIA_MEMORY["testbench_memory"]["read_latency_growth"]
    assert "ours" in DOCS["y_unit"]["testbench_memory"]["read_latency_growth"]
    nvidia = {r["name"]: r for r in NVIDIA_MEMORY["rows"]}
    fixed = ROWS["y_unit"]
    assert set(nvidia) == set(fixed) and all(r["status"] == "pass" for r in nvidia.values())
    assert all(nvidia[n]["checks"] == fixed[n]["checks"] for n in fixed)
    differ = {n for n in fixed if nvidia[n]["op_cycles"] != fixed[n]["op_cycles"]}
    assert differ == {*GROWN, "tfy_block_layer0_attn_softmax_rowsum"}
    for n in GROWN:
        assert fixed[n]["last_read_latency_cycles"] == 32 < 150 < nvidia[n]["last_read_latency_cycles"]


@pytest.mark.parametrize("name", GROWN)
def test_erdma_credits_time_the_residual_at_the_grown_latency(name):
    """sdp.operand_stream_cycles: 16 beats of 8 bytes in flight (tieoff_depth_sdp_e), a credit reused 14
    cycles after its burst's last beat. Given the latency the RTL's memory had reached, the model times the
    layer within 5% of NVIDIA's testbench; at the nominal 32 cycles it is 19-27% short of it."""
    row = next(r for r in NVIDIA_MEMORY["rows"] if r["name"] == name)
    hw = load_config("nv_small_256_full_rtl_tb")
    grown = dataclasses.replace(
        hw, memory=dataclasses.replace(hw.memory, dram_latency_cycles=row["last_read_latency_cycles"])
    )
    doc = dict(NVIDIA_MEMORY, rows=[row])
    (at_grown,) = compare(doc, grown)
    (at_nominal,) = compare(doc, hw)
    assert abs(at_grown.ratio - 1) <= 0.05, at_grown
    assert at_nominal.ratio < 0.85, at_nominal
