"""Register programs of our own on NVIDIA's nv_small RTL: bit-exact output and cycles, checked in CI.

validation/data/nvdla_rtl_own.json holds what the RTL measured on the programs
validation/nvdla_rtl/own_programs.py generates (deterministic seeds): every one passed its CRC check,
whose value is the model's. Here the programs are generated again (no RTL, no NVIDIA files) and run
through the model: each CRC must still be the one the RTL met, and the cycles must stay close.
"""

from __future__ import annotations

import pytest

from nvdla_sim.config import load_config
from nvdla_sim.program.run import run_program
from nvdla_validation.nvdla_rtl.compare import OWN_DATA, compare, distribution, load_rows
from nvdla_validation.nvdla_rtl.own_programs import HW, SUITE, generate

DOC = load_rows(OWN_DATA)
ROWS = {r["name"]: r for r in DOC["rows"]}


def test_committed_provenance_and_every_program_passed_on_the_rtl():
    assert DOC["command"].startswith("python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir")
    assert len(DOC["source_commit"]) == 40 and DOC["date"]
    assert sorted(ROWS) == sorted(s.name for s in SUITE), "regenerate the data: the suite changed"
    assert all(r["status"] == "pass" for r in ROWS.values()), [n for n, r in ROWS.items() if r["status"] != "pass"]
    kinds = {s.kind for s in SUITE}
    assert kinds == {"conv", "sdp", "pdp", "cdp"}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own")
    generate(folder)
    return folder


@pytest.mark.parametrize("name", sorted(ROWS))
def test_model_output_is_the_bytes_the_rtl_wrote(name, programs):
    run = run_program(programs / name, load_config(HW))
    committed = [c["golden_crc"] for c in ROWS[name]["checks"]]
    assert [c["golden_crc"] for c in run.checks] == committed, f"{name}: the generated program changed"
    assert all(c["match"] for c in run.checks), f"{name}: model CRC {run.checks} differs from the RTL's"


def test_model_cycles_close_to_the_committed_rtl_cycles():
    """Median 0.3%, p90 1.4%, worst 3.8% today (a 1x1 matmul family, projections with bias, 3x3 and
    strided convolutions, PDP padding probes, offline SDP, CDP LRN)."""
    d = distribution(compare(DOC))
    assert d["n"] == len(SUITE)
    assert d["median"] <= 0.01 and d["p90"] <= 0.03 and d["worst"] <= 0.06, d
