"""The convolution pipeline: CDMA -> CBUF -> CSC -> CMAC -> CACC -> SDP (-> PDP on the fly) -> memory.

Its timing is engine.conv (the tile pipeline under a tiling plan), its work counts engine.conv.conv_activity.
"""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import conv_activity, simulate_conv
from nvdla_sim.engine.stats import Activity, ConvDetail, LayerStats
from nvdla_sim.engine.tiling import TilePlan, default_plan
from nvdla_sim.layers import ConvLayer
from nvdla_sim.processors.base import CoreProcessor
from nvdla_sim.processors.sdp import stage_ops


class ConvProcessor(CoreProcessor):
    label = "CONV"
    name = "conv"
    layer_type = ConvLayer
    config_sections = ("mac", "cbuf", "csc", "cacc", "sdp", "pdp", "memory", "timing")

    def simulate(self, layer: ConvLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool) -> LayerStats:
        return simulate_conv(layer, hw, plan or default_plan(layer, hw), record_events=record_events)

    def fixed_latency(self, layer: ConvLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: conv_launch_cycles, conv_pipeline_cycles, completion_cycles)."""
        t = hw.timing
        return t.conv_launch_cycles, t.conv_pipeline_cycles, t.completion_cycles

    def activity(self, layer: ConvLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        """MACs the array performs; CSC's CBUF reads (conv_activity) and CDMA's CBUF writes (what the run
        fetched); CACC's accumulations and outputs; SDP's stages and PDP's adds on every output."""
        if stats.plan is None or not isinstance(stats.detail, ConvDetail):
            raise ValueError(f"{layer.name}: convolution stats without their plan and detail")
        act = conv_activity(layer, stats.plan, hw)
        alu, mul = stage_ops(layer.sdp)
        return Activity(
            macs=layer.performed_macs,
            mac_precision=layer.precision,
            cbuf_read_bytes=act.cbuf_read_bytes,
            cbuf_write_bytes=stats.detail.data_bytes_fetched + stats.detail.weight_bytes_fetched,
            cacc_partial_sums=act.partial_sums,
            cacc_outputs=act.outputs,
            sdp_elements=act.outputs,
            sdp_alu_ops=alu,
            sdp_mul_ops=mul,
            pdp_elements=act.outputs if layer.pool is not None else 0,
            dram_read_bytes=stats.traffic.dram_read,
            dram_write_bytes=stats.traffic.dram_write,
        )


CONV = ConvProcessor()
