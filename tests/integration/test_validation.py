"""Guard the agreement with the NVDLA primer's published ResNet-50 figures (docs/validation.md)."""

import pytest

from nvdla_mapper.frontends.cnn import resnet50
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision
from nvdla_validation.primer_resnet50 import PRIMER_AREA_POWER, PRIMER_ROWS, config_for


@pytest.mark.parametrize("row", [PRIMER_ROWS[0], PRIMER_ROWS[3]], ids=lambda r: f"{r[0]}macs")
def test_resnet50_within_2x_of_the_published_primer_rows(row):
    macs, (ac, ak), cbuf_kb, gbs, fps = row
    hw = config_for(ac, ak, cbuf_kb, gbs)
    assert hw.peak_macs_per_cycle(Precision.INT8) == macs and hw.cbuf_bytes == cbuf_kb * 1024
    res = map_model(resnet50(1), hw, precision=Precision.INT8, batch=1, seq=0)
    ratio = (1e3 / res.latency_ms) / fps
    assert 0.5 < ratio < 2.0, f"{macs} MACs: {1e3 / res.latency_ms:.1f} fps vs primer {fps}"
    # average power at 16 nm against NVIDIA's (the overheads' fit and every row's error: test_calibration)
    power = res.energy()["average_core_power_mw"]
    assert 0.75 < power / PRIMER_AREA_POWER[macs][3] < 1.25, f"{macs} MACs: {power:.1f} mW"
