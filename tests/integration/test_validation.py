"""Guard the agreement with the NVDLA primer's published ResNet-50 figures (docs/validation.md)."""

import pytest

from nvdla_mapper.frontends.cnn import resnet50
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision
from nvdla_validation.primer_resnet50 import PRIMER_AREA_POWER, PRIMER_ROWS, config_for


@pytest.mark.parametrize("row", [PRIMER_ROWS[0], PRIMER_ROWS[3]], ids=lambda r: f"{r[0]}macs")
def test_resnet50_within_10_percent_of_the_published_primer_rows(row):
    """ResNet-50 INT8 batch 1 at 1 GHz on the primer's 2048- and 256-MAC builds: frames/s within 10% of
    NVIDIA's published 269 and 46 (as of 2026-12-07: 249.3, 0.93x, and 46.65, 1.01x; docs/validation.md)."""
    macs, (ac, ak), cbuf_kb, gbs, fps = row
    hw = config_for(ac, ak, cbuf_kb, gbs)
    assert hw.peak_macs_per_cycle(Precision.INT8) == macs and hw.cbuf_bytes == cbuf_kb * 1024
    assert hw.clock_mhz == 1000  # the primer's 1 GHz: a frame a second per 1e9 cycles
    res = map_model(resnet50(1), hw, precision=Precision.INT8, batch=1, seq=0)
    ours = 1e9 / res.total_cycles
    assert ours == pytest.approx(fps, rel=0.10), f"{macs} MACs: {ours:.1f} fps vs primer {fps}"
    # average power at 16 nm against NVIDIA's (the overheads' fit and every row's error: test_calibration)
    power = res.energy().average_core_power_mw
    assert 0.75 < power / PRIMER_AREA_POWER[macs][3] < 1.25, f"{macs} MACs: {power:.1f} mW"
