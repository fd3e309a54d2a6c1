"""Named overheads that turn the components' sums (components.py, model.py) into a build's figures,
fitted on four rows of NVIDIA's only published table and checked on the other three (docs/energy.md).

The table: the NVDLA primer's "Example Area and Performance with NVDLA" as nvdla.org publishes it
(nvdla/nvdla.github.io primer.html, commit 0fa0e49a): seven builds (MACs, CBUF, SDRAM bandwidth), silicon
cell area at 28 nm and 16 nm with all memories, and peak / average power at 16 nm on INT8 ResNet-50 at
1 GHz; NVDLA core only (no DRAM). validation/primer_resnet50.py maps ResNet-50 on each build and writes
the components' raw figures to validation/data/primer_energy.json; `fit` below turns the four fit rows
into the constants, and tests/unit/test_calibration.py checks that the constants are that fit and how
every row compares.

The model, three named overheads and nothing fitted per row:
- area = AREA_OVERHEAD[node] x the components' area: what the components leave out (wiring and placement
  density, control, DMA engines, register files, the memories besides CBUF and CACC's buffers), as a
  multiple of what they include. One factor per node the table gives (28 and 16 nm); a constant term was
  tried and fits below zero on both nodes, so it is not in the model.
- core energy = DYNAMIC_FACTOR x the components' energy per action (what the run did) + ALWAYS_ON_FACTOR x
  the build's full-rate switching power (every component acting every cycle, model.full_rate_pj_per_
  cycle) x the run's time (the clock tree and ungated logic, which run whether the units work or not; no
  clock gating is modelled) + the components' leakage x the run's time.
- peak power = every component acting every cycle: (DYNAMIC_FACTOR + ALWAYS_ON_FACTOR) x the full-rate
  switching power + leakage (issue 28's definition). NVIDIA's peak column is 2.62-2.81x its average on
  every row whatever the build's utilization (44-71% by its own frames/s): a fixed ratio this model does
  not share, see docs/energy.md for what that leaves.

The fit rows were chosen before any fit, every other row from the largest: 2048, 512, 128 and 32 MACs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FIT_ROWS = (2048, 512, 128, 32)  # the primer rows the overheads are fitted on; 1024, 256 and 64 are predicted

# Fitted by `fit` on validation/data/primer_energy.json (python validation/primer_resnet50.py --energy,
# 2026-12-04); tests/unit/test_calibration.py recomputes them from that file.
AREA_OVERHEAD = {28.0: 3.1368, 16.0: 4.074}  # cell area / components' area, per node (nm)
DYNAMIC_FACTOR = 0.4465  # NVIDIA's energy per action / the components' (Aladdin, CACTI), at 16 nm
ALWAYS_ON_FACTOR = 0.1861  # always-on power / the build's full-rate switching power, at 16 nm


def area_overhead(node_nm: float) -> float:
    """AREA_OVERHEAD at `node_nm`: the fitted value at 16 and 28 nm, log-linear in the node between them
    and the nearest fitted node's outside (the table gives no other node)."""
    lo, hi = min(AREA_OVERHEAD), max(AREA_OVERHEAD)
    if node_nm <= lo:
        return AREA_OVERHEAD[lo]
    if node_nm >= hi:
        return AREA_OVERHEAD[hi]
    t = (math.log(node_nm) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return math.exp((1 - t) * math.log(AREA_OVERHEAD[lo]) + t * math.log(AREA_OVERHEAD[hi]))


@dataclass(frozen=True)
class PrimerRow:
    """One primer build: the table's figures and the components' raw figures for its ResNet-50 run."""

    macs: int
    primer_area_mm2_28nm: float
    primer_area_mm2_16nm: float
    primer_peak_mw: float
    primer_average_mw: float
    components_area_mm2_28nm: float
    components_area_mm2_16nm: float
    cycles: int  # the run at 1 GHz
    dynamic_uj: float  # the components' energy per action over the run
    leakage_uj: float
    full_rate_mw: float  # every component acting every cycle, at 16 nm


@dataclass(frozen=True)
class Fit:
    area_overhead_28nm: float
    area_overhead_16nm: float
    dynamic_factor: float
    always_on_factor: float


def _ratio_fit(columns: Sequence[Sequence[float]], target: Sequence[float]) -> np.ndarray:
    """Least squares on relative error: every row weighs the same whatever its size."""
    a = np.array(columns, dtype=float).T / np.array(target, dtype=float)[:, None]
    x, *_ = np.linalg.lstsq(a, np.ones(len(target)), rcond=None)
    return x


def fit(rows: Sequence[PrimerRow]) -> Fit:
    """The overheads from the rows given (the caller passes the FIT_ROWS)."""
    (m28,) = _ratio_fit([[r.components_area_mm2_28nm for r in rows]], [r.primer_area_mm2_28nm for r in rows])
    (m16,) = _ratio_fit([[r.components_area_mm2_16nm for r in rows]], [r.primer_area_mm2_16nm for r in rows])
    # average power less leakage = a x dynamic power + g x full-rate power
    seconds = [r.cycles * 1e-9 for r in rows]
    dyn_mw = [r.dynamic_uj / s * 1e-3 for r, s in zip(rows, seconds, strict=True)]
    target = [r.primer_average_mw - r.leakage_uj / s * 1e-3 for r, s in zip(rows, seconds, strict=True)]
    a, g = _ratio_fit([dyn_mw, [r.full_rate_mw for r in rows]], target)
    return Fit(float(m28), float(m16), float(a), float(g))


def predicted(row: PrimerRow, f: Fit) -> dict[str, float]:
    """The calibrated figures of one row: area at 28 and 16 nm, average and peak power at 16 nm (mW)."""
    seconds = row.cycles * 1e-9
    leak_mw = row.leakage_uj / seconds * 1e-3
    return {
        "area_mm2_28nm": f.area_overhead_28nm * row.components_area_mm2_28nm,
        "area_mm2_16nm": f.area_overhead_16nm * row.components_area_mm2_16nm,
        "average_mw": f.dynamic_factor * row.dynamic_uj / seconds * 1e-3
        + f.always_on_factor * row.full_rate_mw
        + leak_mw,
        "peak_mw": (f.dynamic_factor + f.always_on_factor) * row.full_rate_mw + leak_mw,
    }


def current() -> Fit:
    return Fit(AREA_OVERHEAD[28.0], AREA_OVERHEAD[16.0], DYNAMIC_FACTOR, ALWAYS_ON_FACTOR)
