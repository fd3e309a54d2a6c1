"""Rubik and BDMA programs of our own on NVIDIA's nv_full RTL (issue 59), checked in CI.

validation/data/nvdla_rtl_reshape_nv_full.json holds what the RTL measured on the programs of
`own_programs --suite reshape` (deterministic seeds): each passed its CRC check, whose value is the model's,
so Rubik's three modes in INT8, INT16 and FP16 (odd shapes, padded strides, x strides past 8, lines past 64
pixels) and BDMA's copies are bit-exact on the RTL. Here the programs are generated again (no RTL, no NVIDIA
files) and run through the model: each CRC must still be the one the RTL met, and Rubik's cycles are held
to the issue's bar (median 2%, p90 5%, worst 15%).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from nvdla_sim.config import load_config
from nvdla_sim.program.run import run_program
from nvdla_validation.nvdla_rtl.own_programs import SUITES, generate

DOC = json.loads((Path(__file__).resolve().parents[2] / "validation/data/nvdla_rtl_reshape_nv_full.json").read_text())
ROWS = {r["name"]: r for r in DOC["rows"]}
HW = load_config("nv_full_rtl_tb")


def test_every_program_passed_on_the_rtl():
    assert len(DOC["source_commit"]) == 40 and DOC["date"] and "--suite reshape" in DOC["command"]
    assert sorted(ROWS) == sorted(s.name for s in SUITES["reshape"]), "regenerate the data: the suite changed"
    assert all(r["status"] == "pass" for r in ROWS.values())
    assert {s.kind for s in SUITES["reshape"]} == {"rubik", "bdma"}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reshape")
    generate(folder, hw=HW, suite="reshape")
    return folder


@pytest.mark.parametrize("name", sorted(ROWS))
def test_model_output_is_the_bytes_the_rtl_wrote(name, programs):
    run = run_program(programs / name, HW)
    assert [c["golden_crc"] for c in run.checks] == [c["golden_crc"] for c in ROWS[name]["checks"]]
    assert all(c["match"] for c in run.checks), f"{name}: the model's bytes differ from the RTL's"


def test_rubiks_cycles_within_the_issue_bar(programs):
    """Op enable to interrupt, model against RTL, each Rubik program, within issue 59's bar (median 2%, p90 5%,
    worst 15%). Measured 2026-12-07 with the requests' event timing (processors/rubik/timing.py): median
    0.38%, p90 1.61%, worst 2.34% (the contract 9 x 2 x 40 with y stride 4, 9 cycles short); the timing read
    from the RTL's structure alone was 4-34% under."""
    err = sorted(
        abs(run_program(programs / n, HW).operations[0].cycles / r["op_cycles"] - 1)
        for n, r in ROWS.items()
        if n.startswith("own_rbk")
    )
    assert len(err) == 30
    assert statistics.median(err) < 0.02 and err[math.ceil(0.9 * len(err)) - 1] < 0.05 and err[-1] < 0.15
    assert err[-1] < 0.025  # as measured: a change of the timing that loses ground shows here


def test_bdmas_cycles_are_the_rtls(programs):
    """BDMA's copies, CFG_LAUNCH0 to the interrupt: its requests' timing (processors/bdma/timing.py) gives the
    RTL's cycles on all four (measured 2026-12-07: 80, 596, 596 and 156; the lines crossing 64-byte blocks
    and 256-byte transactions of the padded ones included); within a cycle is what it held then."""
    rows = {n: r for n, r in ROWS.items() if n.startswith("own_bdma")}
    assert len(rows) == 4 and all(r.get("op_cycles") for r in rows.values())
    for n, r in rows.items():
        assert abs(run_program(programs / n, HW).operations[0].cycles - r["op_cycles"]) <= 1, n
