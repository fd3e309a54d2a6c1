"""The channel data processor: memory -> CDP_RDMA -> CDP (local response normalisation) -> memory."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.layers import CdpLayer
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.processors.sdp import lane_elements
from nvdla_sim.units import cdma


class CdpProcessor(StreamProcessor):
    label = "CDP"
    name = "cdp"
    layer_type = CdpLayer
    config_sections = ("cdp", "memory", "timing")

    def work(self, layer: CdpLayer, hw: HwConfig) -> StreamWork:
        """The cube in and the same cube out, at CDP's throughput."""
        hw.check_precision(layer.precision)
        return stream_work(
            layer, hw, unit=Unit.CDP, bound=Bound.CDP, rate=hw.cdp.throughput,
            out_bytes=cdma.feature_bytes(layer.width, layer.height, layer.channels, layer.precision, hw),
            lane_elements=lane_elements(layer.width, layer.height, layer.channels, layer.precision, hw),
        )  # fmt: skip

    def fixed_latency(self, layer: CdpLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: launch, cdp_pipeline, completion)."""
        t = hw.timing
        return t.launch_cycles, t.cdp_pipeline_cycles, t.completion_cycles

    def activity(self, layer: CdpLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        """A window sum (an adder per channel of the window) and a multiply per element."""
        n = layer.width * layer.height * layer.channels
        return Activity(cdp_elements=n, cdp_window=layer.window, **dram_activity(stats))


CDP = CdpProcessor()
