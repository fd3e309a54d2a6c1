"""The mutation list still applies to the RTL sources, and the committed mutation run covers it."""

import json
from pathlib import Path

from nvdla_rtl import mutate

DATA = Path(__file__).resolve().parents[2] / "validation" / "data" / "rtl_mutation.json"


def test_every_mutant_applies_once_and_changes_the_source():
    assert len(mutate.MUTANTS) >= 25 and len({m.id for m in mutate.MUTANTS}) == len(mutate.MUTANTS)
    for m in mutate.MUTANTS:
        src = (mutate.HERE / m.file).read_text()
        assert mutate.mutated_source(m) != src, m.id


def test_committed_run_covers_the_list_and_kills_at_least_95_percent():
    data = json.loads(DATA.read_text())
    assert {r["id"] for r in data["mutants"]} == {m.id for m in mutate.MUTANTS}
    killed = [r for r in data["mutants"] if r["status"] != "survived"]
    assert len(killed) / len(data["mutants"]) >= 0.95
    assert all(r.get("note") for r in data["mutants"] if r["status"] == "survived")  # each survivor explained
