"""The mapper's transformer layers on NVIDIA's nv_small RTL: bit-exact output and cycles, checked in CI.

validation/data/nvdla_rtl_transformer.json holds what the RTL measured on the programs that
validation/nvdla_rtl/transformer_programs.py makes with the mapper (`nvdla map ... --emit-program`):
every one passed its CRC check, whose value is the model's. A layer the mapper splits is one program of
its hardware layers in the plan's order (ping-pong register groups, the driver waiting for a group's
interrupt before reusing it). Here the programs are made again (no RTL, no NVIDIA files): each CRC must
still be the one the RTL met, the model's cycles must stay close to the RTL's (one layer: op enable to
interrupt; several: first op enable to last interrupt), and each program's cycles must be the mapper's.
"""

from __future__ import annotations

import pytest

from nvdla_validation.nvdla_rtl.compare import TARGETS, compare, distribution, load_rows, manifest_mismatches
from nvdla_validation.nvdla_rtl.transformer_programs import DATA, generate

DOC = load_rows(DATA)
ROWS = {r["name"]: r for r in DOC["rows"]}


def test_committed_provenance_and_every_program_passed_on_the_rtl():
    assert DOC["command"].startswith("python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir")
    assert len(DOC["source_commit"]) == 40 and DOC["date"]
    assert all(r["status"] == "pass" for r in ROWS.values()), [n for n, r in ROWS.items() if r["status"] != "pass"]
    for m in (64, 128):  # the projection grid, attention at two lengths, the block, a split layer
        for k in (256, 768):
            for n in (64, 768):
                assert f"tf_proj_m{m}_k{k}_n{n}_proj" in ROWS
        assert {f"tf_attn_s{m}_layer0_attn_qk", f"tf_attn_s{m}_layer0_attn_pv"} <= set(ROWS)
    assert sum(n.startswith("tf_block_layer0_") for n in ROWS) == 8
    assert ROWS["tf_split_m64_k3072_n64_proj"]["interrupts"] >= 2  # the split layer: several hardware layers
    assert sum(r["interrupts"] > 1 for r in ROWS.values()) >= 5


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return [r for r in generate(tmp_path_factory.mktemp("tf")) if r["name"]]


def test_the_programs_are_the_ones_the_rtl_ran(programs):
    """Same names, same expected CRCs as the committed rows (else: regenerate the data, the suite or the
    model's bytes changed)."""
    assert manifest_mismatches(programs, DOC) == []


def test_each_program_times_as_the_mapper_costs_its_layer(programs):
    """The stored register description, timed by the model (one hardware layer: op enable to interrupt;
    several: the chain of hardware layers, first op enable to last interrupt), is the emitter's prediction
    and the mapper's cycles for one instance of the task; one interrupt per hardware layer."""
    model = {r.name: r.model_cycles for r in compare(DOC)}
    for p in programs:
        assert model[p["name"]] == p["model_cycles"] == p["mapper_cycles_per_instance"], p["name"]
        assert ROWS[p["name"]]["interrupts"] == p["hardware_layers"], p["name"]


def test_model_cycles_close_to_the_committed_rtl_cycles():
    """Median 0.14%, worst 3.7% (2026-12-05: QK^T and PV at sequence 64 as two kernel tiles keeping the
    input, which the RTL runs 3.6% faster than the model; 0.06% / 2.2% with the plans before,
    docs/validation.md section 5); the issue's targets are 5% / 25%."""
    d = distribution(compare(DOC))
    assert d["n"] == len(ROWS)
    assert d["median"] <= TARGETS["median"] and d["worst"] <= TARGETS["worst"], d
    assert d["median"] <= 0.005 and d["worst"] <= 0.04, d


def test_the_full_search_beats_the_previous_plans_on_the_rtl():
    """The same layers under the plans of the search before issue 27 (full-K data-stationary, every
    bank beside the input to weights), as measured on the RTL then (validation/data, 2026-12-03): the
    plans chosen now are faster on the RTL itself, not only in the model."""
    before = {
        "tf_proj_m64_k256_n64_proj": 24878,
        "tf_proj_m128_k256_n64_proj": 45361,
        "tf_proj_m128_k768_n768_proj": 1213042,
        "tf_attn_s128_layer0_attn_pv": 22813,
        "tf_split_m64_k3072_n64_proj": 106818 + 106818 + 74030,  # three bands, each a program of its own
    }
    for name, old in before.items():
        assert ROWS[name]["span_cycles"] < old, name
