"""The channel data processor: memory -> CDP_RDMA -> CDP (local response normalisation) -> memory."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork, simulate_stream
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.layers import CdpLayer
from nvdla_sim.processors.base import CoreProcessor
from nvdla_sim.processors.sdp import lane_elements
from nvdla_sim.units import cdma


class CdpProcessor(CoreProcessor):
    label = "CDP"
    name = "cdp"
    layer_type = CdpLayer
    config_sections = ("cdp", "memory", "timing")

    def work(self, layer: CdpLayer, hw: HwConfig) -> StreamWork:
        hw.check_precision(layer.precision)
        in_bytes = cdma.feature_bytes(layer.width, layer.height, layer.channels, layer.precision, hw)
        return StreamWork(
            in_bytes=in_bytes,
            operand_bytes=0,
            out_bytes=in_bytes,
            lane_elements=lane_elements(layer.width, layer.height, layer.channels, layer.precision, hw),
            elements=layer.width * layer.height * layer.channels,
            rate=hw.cdp.throughput,
            unit=Unit.CDP,
            bound=Bound.CDP,
            input_memory=layer.input_memory,
            output_memory=layer.output_memory,
            precision_bytes=layer.precision.bytes,
        )

    def simulate(self, layer: CdpLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool) -> LayerStats:
        return simulate_stream(self.work(layer, hw), hw, name=layer.name, record_events=record_events)

    def fixed_latency(self, layer: CdpLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: launch, cdp_pipeline, completion)."""
        t = hw.timing
        return t.launch_cycles, t.cdp_pipeline_cycles, t.completion_cycles

    def activity(self, layer: CdpLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        """A window sum (an adder per channel of the window) and a multiply per element."""
        return Activity(
            cdp_elements=layer.width * layer.height * layer.channels,
            cdp_window=layer.window,
            dram_read_bytes=stats.traffic.dram_read,
            dram_write_bytes=stats.traffic.dram_write,
        )


CDP = CdpProcessor()
