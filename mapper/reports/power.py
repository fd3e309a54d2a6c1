"""A run's NVDLA core power over time, from its report (report.json's layers and energy): the power
counter track of the Perfetto trace and the power plot of the HTML report.

Each layer's energy (its units' dynamic energy over its instances) is spread evenly over its span
(start..end); the always-on power and leakage are constant over the whole run. Layers whose spans
overlap add. The profile's integral is the run's core energy (tests/unit/test_power_profile.py)."""

from __future__ import annotations

import itertools
from typing import Any


def power_profile(d: dict[str, Any]) -> list[tuple[int, int, float]]:
    """(start cycle, end cycle, core power in mW) pieces covering 0..total_cycles, in order."""
    clock = d["hw_config"]["clock_mhz"]
    total = d["total_cycles"]
    en = d["energy"]
    units = en["by_unit_uj"]
    base = (units.get("always_on", 0.0) + units.get("leakage", 0.0)) * clock * 1e3 / total if total else 0.0
    delta: dict[int, float] = {0: 0.0, total: 0.0}
    for r in d["layers"]:
        e, a, b = r.get("core_energy_uj", 0.0), r["start"], r["end"]
        if e and b > a:
            p = e * clock * 1e3 / (b - a)  # uJ over (b - a) cycles at clock MHz, in mW
            delta[a] = delta.get(a, 0.0) + p
            delta[b] = delta.get(b, 0.0) - p
    out, level = [], base
    edges = sorted(delta)
    for a, b in itertools.pairwise(edges):
        level += delta[a]
        if b > a:
            out.append((a, b, max(level, 0.0)))
    return out


def counter_events(d: dict[str, Any], *, pid: int = 1) -> list[dict]:
    """The profile as a Chrome / Perfetto counter track ("NVDLA core power (mW)")."""
    clock = d["hw_config"]["clock_mhz"]
    events = [
        {"ph": "C", "pid": pid, "name": "NVDLA core power (mW)", "ts": a / clock, "args": {"mW": round(p, 3)}}
        for a, _, p in power_profile(d)
    ]
    if events:
        end = d["total_cycles"] / clock
        events.append({"ph": "C", "pid": pid, "name": "NVDLA core power (mW)", "ts": end, "args": {"mW": 0.0}})
    return events
