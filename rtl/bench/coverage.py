"""Functional coverage of the datapath benches (cocotb-coverage): the corners a bench run must reach.

Each bench run samples once, at its end, what it saw (`sample`) and exports its coverage database to
YAML; `merged` adds up the runs of a regression (cocotb_coverage.merge_coverage) and `report` lists
every named point with its bins hit.
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml
from cocotb_coverage.coverage import CoverPoint, coverage_db, merge_coverage

# name -> what it means; each point is covered by one hit of its bin(s)
POINTS = {
    "datapath.precision": "both integer precisions ran (int8, int16)",
    "datapath.acc_saturation": "an accumulation hit the CACC accumulator range",
    "datapath.out_saturation": "a result was clamped to INT32 (D_OUT_SATURATION)",
    "datapath.rounding_tie": "a result was exactly half-way before the CLIP_TRUNCATE shift",
    "datapath.swap_waits": "a swap atom waited because the shadow weight set was not full",
    "datapath.backpressure_on_stripe_last": "the sink held off the last output point of a stripe",
    "datapath.gap_at_stripe_boundary": "the data stream paused right before a new stripe",
    "datapath.reset_mid_stripe": "reset came while a stripe was part way through",
}


@CoverPoint("datapath.precision", xf=lambda ev: ev["precision"], bins=["int8", "int16"])
@CoverPoint("datapath.acc_saturation", xf=lambda ev: ev["acc_saturations"] > 0, bins=[True])
@CoverPoint("datapath.out_saturation", xf=lambda ev: ev["out_saturations"] > 0, bins=[True])
@CoverPoint("datapath.rounding_tie", xf=lambda ev: ev["rounding_ties"] > 0, bins=[True])
@CoverPoint("datapath.swap_waits", xf=lambda ev: ev["swap_waits"], bins=[True])
@CoverPoint("datapath.backpressure_on_stripe_last", xf=lambda ev: ev["backpressure_last"], bins=[True])
@CoverPoint("datapath.gap_at_stripe_boundary", xf=lambda ev: ev["gap_at_boundary"], bins=[True])
@CoverPoint("datapath.reset_mid_stripe", xf=lambda ev: ev["reset_mid_stripe"], bins=[True])
def sample(ev: dict) -> None:
    """One bench run's events (see POINTS)."""


def export(path: str | Path) -> None:
    coverage_db.export_to_yaml(filename=str(path))


def merged(files: list[Path], out: Path) -> dict[str, tuple[int, int]]:
    """Merge the runs' coverage files; name -> (bins hit, bins) for every named point."""
    merge_coverage(logging.getLogger("nvdla.coverage").debug, str(out), *map(str, files))
    db = yaml.safe_load(out.read_text())
    return {name: (int(db[name]["coverage"]), int(db[name]["size"])) for name in POINTS if name in db}


def report(cov: dict[str, tuple[int, int]]) -> str:
    lines = [f"  {'cover point':<40} {'hit':>7}  meaning"]
    for name, meaning in POINTS.items():
        hit, size = cov.get(name, (0, 0))
        lines.append(f"  {name:<40} {hit:>3}/{size:<3}  {meaning}")
    total = sum(h for h, _ in cov.values()), sum(s for _, s in cov.values())
    lines.append(f"  {'all named points':<40} {total[0]:>3}/{total[1]:<3}  {100 * total[0] / max(total[1], 1):.0f}%")
    return "\n".join(lines)
