"""The overheads fitted on NVIDIA's primer table (nvdla_sim.energy.calibration, docs/energy.md), checked
against the committed raw figures of the seven primer builds (validation/data/primer_energy.json, written
by `python validation/primer_resnet50.py --energy`) and the primer's own columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_sim import load_config
from nvdla_sim.energy import calibration
from nvdla_sim.energy.model import area, full_rate_pj_per_cycle, peak_power_mw
from nvdla_validation.primer_resnet50 import PRIMER_AREA_POWER, PRIMER_ROWS, config_for

DATA = Path(__file__).resolve().parents[2] / "validation" / "data" / "primer_energy.json"


def _rows() -> list[calibration.PrimerRow]:
    return [calibration.PrimerRow(**r) for r in json.loads(DATA.read_text())["rows"]]


def test_the_committed_rows_are_the_primers_table():
    """NVIDIA's figures in the data file are the table's (primer.html), row for row."""
    rows = _rows()
    assert [r.macs for r in rows] == [m for m, *_ in PRIMER_ROWS]
    for r in rows:
        assert (r.primer_area_mm2_28nm, r.primer_area_mm2_16nm, r.primer_peak_mw, r.primer_average_mw) == (
            PRIMER_AREA_POWER[r.macs]
        )


def test_the_constants_are_the_fit_on_the_four_fit_rows():
    fit = calibration.fit([r for r in _rows() if r.macs in calibration.FIT_ROWS])
    assert fit.area_overhead_28nm == pytest.approx(calibration.AREA_OVERHEAD[28.0], rel=1e-3)
    assert fit.area_overhead_16nm == pytest.approx(calibration.AREA_OVERHEAD[16.0], rel=1e-3)
    assert fit.dynamic_factor == pytest.approx(calibration.DYNAMIC_FACTOR, rel=1e-3)
    assert fit.always_on_factor == pytest.approx(calibration.ALWAYS_ON_FACTOR, rel=1e-3)


def test_the_committed_component_figures_are_the_codes():
    """The raw area and full-rate power in the file are what the components give today (a change to the
    components must re-run the validation and refit)."""
    for r, (macs, (ac, ak), kb, gbs, _) in zip(_rows(), PRIMER_ROWS, strict=True):
        hw = config_for(ac, ak, kb, gbs)
        assert r.components_area_mm2_16nm == pytest.approx(area(hw).components_um2 * 1e-6, rel=1e-6), macs
        assert r.full_rate_mw == pytest.approx(full_rate_pj_per_cycle(hw) * 1e-3 * hw.clock_mhz, rel=1e-6), macs
        assert peak_power_mw(hw) == pytest.approx(calibration.predicted(r, calibration.current())["peak_mw"], rel=1e-3)


# The errors against the primer as docs/energy.md records them (percent; fit rows and predicted rows).
# Area meets issue 28's 15% on every row at both nodes, average power on every row but the largest
# build's, peak power on the two smallest builds only (NVIDIA's peak is a fixed 2.6-2.8x its average).
AREA_WITHIN = 10.0
AVERAGE_WITHIN = {2048: 22.5, 1024: 6.5, 512: 11.5, 256: 3.5, 128: 3.5, 64: 14.0, 32: 2.0}
PEAK_WITHIN = {2048: 50.0, 1024: 46.5, 512: 38.0, 256: 38.0, 128: 21.0, 64: 1.0, 32: 2.5}


@pytest.mark.parametrize("macs", [m for m, *_ in PRIMER_ROWS])
def test_every_row_against_the_primer(macs):
    (row,) = [r for r in _rows() if r.macs == macs]
    p = calibration.predicted(row, calibration.current())

    def err(ours, theirs):
        return abs(100 * (ours / theirs - 1))

    assert err(p["area_mm2_28nm"], row.primer_area_mm2_28nm) <= AREA_WITHIN
    assert err(p["area_mm2_16nm"], row.primer_area_mm2_16nm) <= AREA_WITHIN
    assert err(p["average_mw"], row.primer_average_mw) <= AVERAGE_WITHIN[macs]
    assert err(p["peak_mw"], row.primer_peak_mw) <= PEAK_WITHIN[macs]


def test_area_overhead_between_and_outside_the_fitted_nodes():
    assert calibration.area_overhead(16) == calibration.AREA_OVERHEAD[16.0]
    assert calibration.area_overhead(7) == calibration.AREA_OVERHEAD[16.0]
    assert calibration.area_overhead(45) == calibration.AREA_OVERHEAD[28.0]
    mid = calibration.area_overhead(21)
    assert min(calibration.AREA_OVERHEAD.values()) < mid < max(calibration.AREA_OVERHEAD.values())


def test_a_builds_area_is_its_components_times_the_overhead():
    hw = load_config("nv_small")
    a = area(hw)
    assert a.total_um2 == pytest.approx(calibration.AREA_OVERHEAD[16.0] * a.components_um2)
    assert sum(a.by_block().values()) == pytest.approx(a.total_um2)
