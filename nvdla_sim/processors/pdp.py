"""The standalone (offline) PDP: memory -> PDP_RDMA -> PDP (pooling windows) -> memory."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork, simulate_stream
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.layers import PdpLayer
from nvdla_sim.processors.base import CoreProcessor
from nvdla_sim.units import cdma, pdp


class PdpProcessor(CoreProcessor):
    label = "PDP"
    name = "pdp"
    layer_type = PdpLayer
    config_sections = ("pdp", "memory", "timing")

    def work(self, layer: PdpLayer, hw: HwConfig) -> StreamWork:
        """PDP steps along each line of windows (pdp.line_positions): a step takes a memory atom's channels,
        a line's flush takes a whole atom of lanes."""
        hw.check_precision(layer.precision)
        ow, oh = layer.pool.out_size(layer.width, layer.height)
        steps, flush = pdp.line_positions(layer.width, layer.height, layer.pool)
        lanes = hw.memory.memory_atomic_bytes // layer.precision.bytes
        return StreamWork(
            in_bytes=cdma.feature_bytes(layer.width, layer.height, layer.channels, layer.precision, hw),
            operand_bytes=0,
            out_bytes=cdma.feature_bytes(ow, oh, layer.channels, layer.precision, hw),
            lane_elements=steps * cdma.atom_channels(layer.channels, layer.precision, hw) + flush * lanes,
            elements=layer.width * layer.height * layer.channels,
            rate=pdp.elements_per_cycle(hw, layer.precision),
            unit=Unit.PDP,
            bound=Bound.PDP,
            input_memory=layer.input_memory,
            output_memory=layer.output_memory,
            precision_bytes=layer.precision.bytes,
        )

    def simulate(self, layer: PdpLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool) -> LayerStats:
        return simulate_stream(self.work(layer, hw), hw, name=layer.name, record_events=record_events)

    def fixed_latency(self, layer: PdpLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: launch, pdp_pipeline, completion)."""
        t = hw.timing
        return t.launch_cycles, t.pdp_pipeline_cycles, t.completion_cycles

    def activity(self, layer: PdpLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        """An adder per input element."""
        return Activity(
            pdp_elements=layer.width * layer.height * layer.channels,
            dram_read_bytes=stats.traffic.dram_read,
            dram_write_bytes=stats.traffic.dram_write,
        )


PDP = PdpProcessor()
