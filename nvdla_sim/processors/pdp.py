"""The standalone (offline) PDP: memory -> PDP_RDMA -> PDP (pooling windows) -> memory."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.layers import PdpLayer
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.units import cdma, pdp


class PdpProcessor(StreamProcessor):
    label = "PDP"
    name = "pdp"
    layer_type = PdpLayer
    config_sections = ("pdp", "memory", "timing")

    def work(self, layer: PdpLayer, hw: HwConfig) -> StreamWork:
        """PDP steps along each line of windows (pdp.line_positions): a step takes a memory atom's channels,
        a line's flush takes a whole atom of lanes; it writes the pooled cube."""
        hw.check_precision(layer.precision)
        ow, oh = layer.pool.out_size(layer.width, layer.height)
        steps, flush = pdp.line_positions(layer.width, layer.height, layer.pool)
        lanes = hw.memory.memory_atomic_bytes // layer.precision.bytes
        return stream_work(
            layer, hw, unit=Unit.PDP, bound=Bound.PDP, rate=pdp.elements_per_cycle(hw, layer.precision),
            out_bytes=cdma.feature_bytes(ow, oh, layer.channels, layer.precision, hw),
            lane_elements=steps * cdma.atom_channels(layer.channels, layer.precision, hw) + flush * lanes,
        )  # fmt: skip

    def fixed_latency(self, layer: PdpLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: launch, pdp_pipeline, completion)."""
        t = hw.timing
        return t.launch_cycles, t.pdp_pipeline_cycles, t.completion_cycles

    def activity(self, layer: PdpLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        """An adder per input element."""
        return Activity(pdp_elements=layer.width * layer.height * layer.channels, **dram_activity(stats))


PDP = PdpProcessor()
