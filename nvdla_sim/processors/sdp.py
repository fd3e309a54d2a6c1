"""The standalone (offline) SDP: memory -> SDP_RDMA (and its B/N/E-RDMA operands) -> SDP -> memory."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.layers import OperandMode, SdpLayer, SdpSpec
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.units import cdma, sdp


def stage_ops(spec: SdpSpec) -> tuple[int, int]:
    """(ALU, MUL) operations per output element of the SDP stages a layer uses; the output converter is a
    multiply (scale) on every element."""
    alu = int(spec.bias is not OperandMode.NONE) + int(spec.relu) + int(spec.eltwise is not OperandMode.NONE)
    mul = 1 + int(spec.scale is not OperandMode.NONE) + int(spec.lut)
    return alu, mul


def lane_elements(width: int, height: int, channels: int, precision, hw: HwConfig) -> int:
    """Elements a stream's datapath processes: SDP, PDP and CDP take whole memory atoms, so a cube's channels
    are padded to the atom (8 INT8 lanes on nv_small), and the padding lanes cost their cycles too. Measured
    on NVIDIA's nv_small RTL: sdp_8192x1x1_pass_through (1 channel) takes 8 cycles per pixel, as 8 channels do."""
    return width * height * cdma.atom_channels(channels, precision, hw)


class SdpProcessor(StreamProcessor):
    label = "SDP"
    name = "sdp"
    layer_type = SdpLayer
    config_sections = ("sdp", "memory", "timing")

    def work(self, layer: SdpLayer, hw: HwConfig) -> StreamWork:
        """The cube through the stages the layer uses (their slowest rate), with its operands read beside it
        by B/N/E-RDMA, written at its output precision."""
        hw.check_precision(layer.precision)
        operands = sdp.operand_read_bytes(
            layer.sdp, pixels=layer.width * layer.height, channels=layer.channels, operand_bytes=layer.precision.bytes
        )
        return stream_work(
            layer, hw, unit=Unit.SDP, bound=Bound.SDP, rate=sdp.elements_per_cycle(layer.sdp, hw),
            out_bytes=cdma.feature_bytes(layer.width, layer.height, layer.channels, layer.out_precision, hw),
            lane_elements=lane_elements(layer.width, layer.height, layer.channels, layer.precision, hw),
            operand_bytes=operands,
        )  # fmt: skip

    def fixed_latency(self, layer: SdpLayer, hw: HwConfig) -> tuple[int, int, int]:
        """Measured on the nv_small RTL (TimingConfig: launch, sdp_pipeline (+ sdp_y_pipeline when the Y
        stage is used), completion)."""
        t = hw.timing
        extra = t.sdp_y_pipeline_cycles if layer.sdp.uses_y else 0
        return t.launch_cycles, t.sdp_pipeline_cycles + extra, t.completion_cycles

    def activity(self, layer: SdpLayer, stats: LayerStats, hw: HwConfig) -> Activity:
        alu, mul = stage_ops(layer.sdp)
        return Activity(sdp_elements=layer.elements, sdp_alu_ops=alu, sdp_mul_ops=mul, **dram_activity(stats))


SDP = SdpProcessor()
