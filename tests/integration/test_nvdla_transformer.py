"""The mapper's transformer layers on NVIDIA's nv_small RTL: bit-exact output and cycles, checked in CI.

validation/data/nvdla_rtl_transformer.json holds what the RTL measured on the programs that
validation/nvdla_rtl/transformer_programs.py makes with the mapper (`nvdla map ... --emit-program`):
every one passed its CRC check, whose value is the model's. Here the programs are made again (no RTL,
no NVIDIA files): each CRC must still be the one the RTL met, the model's cycles must stay close to the
RTL's, and each program's cycles must be the mapper's for that layer.
"""

from __future__ import annotations

import pytest

from nvdla_validation.nvdla_rtl.compare import TARGETS, compare, distribution, load_rows
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
    assert sum(n.startswith("tf_split_") for n in ROWS) >= 2


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return [r for r in generate(tmp_path_factory.mktemp("tf")) if r["name"]]


def test_the_programs_are_the_ones_the_rtl_ran(programs):
    assert sorted(p["name"] for p in programs) == sorted(ROWS), "regenerate the data: the suite changed"
    for p in programs:
        committed = [f"0x{c['golden_crc']:08x}" for c in ROWS[p["name"]]["checks"]]
        assert [c["crc"] for c in p["checks"]] == committed, f"{p['name']}: the model's bytes changed"


def test_each_program_times_as_the_mapper_costs_its_layer(programs):
    """The stored register description, timed by the model, is the emitter's prediction; the bands of a
    split layer add up to the mapper's cycles for one instance of it."""
    model = {r.name: r.model_cycles for r in compare(DOC)}
    per_task: dict[tuple[str, str], list[dict]] = {}
    for p in programs:
        assert model[p["name"]] == p["model_cycles"], p["name"]
        per_task.setdefault((p["case"], p["task"]), []).append(p)
    for (_, task), ps in per_task.items():
        assert sum(p["model_cycles"] for p in ps) == ps[0]["mapper_cycles_per_instance"], task


def test_model_cycles_close_to_the_committed_rtl_cycles():
    """Median 0.05%, worst 1.9% today (a band of a split K=3072 projection); the issue's targets are 5% / 25%."""
    d = distribution(compare(DOC))
    assert d["n"] == len(ROWS)
    assert d["median"] <= TARGETS["median"] and d["worst"] <= TARGETS["worst"], d
    assert d["median"] <= 0.005 and d["worst"] <= 0.03, d
