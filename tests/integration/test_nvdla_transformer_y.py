"""The mapper's BERT block on NVIDIA's RTL with SDP's element-wise (Y) unit and LUT: nv_small_256_full,
nv_large, nv_medium_1024_full and nv_full; bit-exact output and cycles, checked in CI without the RTL (issue 29).

validation/data/nvdla_rtl_transformer_y.json (nv_small_256_full, with the testbench memory's latency held
at 32 cycles: run_reference --memory fixed_latency) and nvdla_rtl_transformer_y_nv_large.json
hold what the RTL measured on the programs `python -m nvdla_validation.nvdla_rtl.transformer_programs DIR
--suite y_unit` (`y_unit_large`, `y_unit_medium`) makes: every NVDLA layer of a BERT encoder block (hidden 128, 2 heads,
FFN 512, sequence 64) as the mapper lowers it onto a build with the Y unit, softmax (exp and 1/sum
through the LUT, the normalisation by an element-wise multiply), the fused GELU and the residual adds
included; on nv_full (nvdla_rtl_transformer_y_nv_full.json) also LayerNorm in the steps of
numerics.layernorm_steps, each program with the numbers the steps compute on one seeded input (the
INT8-only builds run LayerNorm on the host: its statistics are INT16). Each program's CRC is the model's;
here they are made again and must still be the ones the RTL met, with the model's cycles close to the
RTL's.
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
Y_STEPS = ("softmax_exp", "softmax_recip", "pv_normalize", "ffn1")
# LayerNorm's steps (numerics.layernorm_steps, the --layernorm nvdla what-if) need INT16: on nv_full only, whose
# suite maps with them; their normalisation (INT16 in, INT8 out) is not a program (SDP has no 16-to-8 mode:
# the RTL hangs on it). The INT8-only builds run LayerNorm on the host since 2026-12-06, their schematic
# steps' rows dropped (merge_rows, the edit recorded)
LN_STEPS = ("sum", "broadcast_mean", "centre", "square", "rsqrt", "broadcast_rstd")
PROGRAMS = {"y_unit": 13, "y_unit_large": 13, "y_unit_medium": 13, "y_unit_full": 31}

# Rows past issue 29's 15% worst case, with what is known of the cause
KNOWN_OUTLIERS: dict[str, str] = {}
# 2026-12-05: nv_small_256_full median 1.2%, p90 2.9%, worst 5.2% with the memory's latency held at 32 cycles
# (26.4% on NVIDIA's testbench memory, whose latency grew to 163 and 316 cycles on attn_o and ffn2: the
# tests on the E-RDMA's credits below); nv_large median 1.2%, p90 3.2%, worst 9.2% since CSC's stripe rule,
# CACC's 64 credits and CSC's first package are modelled (1.9 / 8.2 / 8.2% before, docs/validation.md 5c;
# its SDP passes within 3.2%); nv_medium_1024_full median 0.4%, p90 8.0%, worst 8.0%: its six one-kernel row
# sums (layernorm's sum and sum of squares, 128 channels) at 0.920, 79 cycles short (the RTL's input stream
# slows after 143 beats, docs/validation.md 5c)
# 2026-12-06, the LayerNorm's 21 programs dropped from the INT8-only builds (the host's there): nv_small_256_full
# 0.8 / 1.5 / 5.2%, nv_large 0.5 / 1.9 / 9.4%, nv_medium_1024_full 0.6 / 1.6 / 3.6% over their 13 programs
# nv_medium's p90 miss (8.0%) was its LayerNorm row sums, now the host's. nv_full's LayerNorm steps (the what-if,
# measured 2026-12-06) are timed short: the centring pass 0.870 (INT16 operands over INT8 data), the row sums
# 0.883 (an INT8 convolution writing INT16), the INT16 broadcasts 0.935: 2.9 / 12.4 / 13.0% over the 31
# (0.8 / 3.9 / 12.4% over the 34 before, with the schematic's INT8 steps)
_LN = "the LayerNorm what-if's steps: centre 0.870, sums 0.883, broadcasts 0.935 (INT16 outputs and operands not yet timed)"
MISSES: dict[tuple[str, str], str] = {("y_unit_full", "median"): _LN, ("y_unit_full", "p90"): _LN}


@pytest.mark.parametrize("suite", BUILDS)
def test_committed_provenance_and_every_program_passed_on_the_rtl(suite):
    build, prefix = BUILDS[suite]
    doc, rows = DOCS[suite], ROWS[suite]
    assert doc["command"].startswith(f"python -m nvdla_validation.nvdla_rtl.run_reference SRC --project {build} ")
    assert len(doc["source_commit"]) == 40 and doc["date"] and len(rows) == PROGRAMS[suite]
    assert all(r["status"] == "pass" for r in rows.values()), [n for n, r in rows.items() if r["status"] != "pass"]
    for step in Y_STEPS:  # the layers that use the Y unit, by the mapper's names
        assert f"{prefix}layer0_attn_{step}" in rows or f"{prefix}layer0_{step}" in rows, step
    ln = [f"{prefix}layer0_ln1_{step}" for step in LN_STEPS]
    if suite == "y_unit_full":  # the LayerNorm's steps, run on the RTL, in place of the schematic's
        assert all(n in rows for n in ln) and f"{prefix}layer0_ln1_normalize" not in rows, ln
        edit, v_bias = doc["edits"]  # then (2026-12-07) V^T and PV with V's bias in V^T's own SDP
        assert len(edit["replaced_or_added"]) == 18 and len(edit["dropped"]) == 6 and "16-to-8" in edit["why"]
        assert v_bias["replaced_or_added"] == [f"{prefix}layer0_attn_pv", f"{prefix}layer0_attn_v"]
    else:  # dropped with the edit that says so, and nothing else
        assert not any(n in rows for n in ln)
        (edit,) = doc["edits"]
        assert len(edit["dropped"]) == 21 and all("_ln" in n or "final_norm" in n for n in edit["dropped"])
        assert "host" in edit["why"] and not edit["replaced_or_added"]


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
    """Every SDP pass through the Y unit (the LUT, element-wise operands, the (ALU, MUL) pair stream), and the
    X-only ones; but nv_full's LayerNorm centring pass (INT16 operands over INT8 data, 0.870 of the RTL in
    this block, 0.995 in BERT-base's layer), within issue 29's 15% only."""
    for row in MODEL[suite].values():
        if row.unit == "sdp":
            bound = 0.15 if row.name.endswith("_centre") else 0.035
            assert abs(row.ratio - 1) <= bound, f"{row.name}: model/RTL {row.ratio:.3f}"


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
