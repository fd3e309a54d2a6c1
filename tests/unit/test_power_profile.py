"""The core power over time (mapper/reports/power.py): by hand on a made-up report, and its integral
against the run's energy on a real map; the trace carries it as a counter track."""

from __future__ import annotations

import json

import pytest

from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.reports.files import write_results
from nvdla_mapper.reports.power import power_profile
from nvdla_sim import Precision, load_config


def test_power_by_hand():
    """At 1,000 MHz over 1,000 cycles (1 us): always-on + leakage 2 uJ -> 2,000 mW throughout; layer a
    3 uJ over cycles 0..500 (6,000 mW), layer b 1 uJ over 250..750 (2,000 mW), overlapping a."""
    d = {
        "hw_config": {"clock_mhz": 1000.0},
        "total_cycles": 1000,
        "energy": {"by_unit_uj": {"cmac": 4.0, "always_on": 1.5, "leakage": 0.5}},
        "layers": [
            {"start": 0, "end": 500, "core_energy_uj": 3.0},
            {"start": 250, "end": 750, "core_energy_uj": 1.0},
            {"start": 750, "end": 900, "core_energy_uj": 0.0},  # host work: no NVDLA energy
        ],
    }
    assert power_profile(d) == [
        (0, 250, pytest.approx(8_000.0)),
        (250, 500, pytest.approx(10_000.0)),
        (500, 750, pytest.approx(4_000.0)),
        (750, 1000, pytest.approx(2_000.0)),
    ]


def test_the_profile_integrates_to_the_runs_energy_and_the_trace_carries_it(tmp_path):
    res = map_model(build_graph(PRESETS["bert-base"], seq=32), load_config("nv_full"), precision=Precision.INT8)
    d = json.loads(json.dumps(res.to_dict()))
    clock = d["hw_config"]["clock_mhz"]
    integral_uj = sum(p * (b - a) / clock * 1e-3 for a, b, p in power_profile(d))  # mW x us = nJ
    assert integral_uj == pytest.approx(d["energy"]["batch_core_uj"], rel=1e-4)
    assert power_profile(d)[-1][1] == d["total_cycles"]
    trace = json.loads(write_results(res, tmp_path)["trace"].read_text())["traceEvents"]
    counters = [e for e in trace if e["ph"] == "C"]
    assert counters and all(e["name"] == "NVDLA core power (mW)" for e in counters)
    assert max(e["args"]["mW"] for e in counters) >= d["energy"]["average_core_power_mw"]
