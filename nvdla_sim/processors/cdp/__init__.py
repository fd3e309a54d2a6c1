"""The channel data processor: memory -> CDP_RDMA -> CDP (local response normalisation) -> memory.

Its timing and activity (CdpProcessor), its registers (registers.py) and its bit-exact execution (execute.py),
put together for the program passes by CdpRegisters.
"""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import CdpLayer
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.processors.cdp.execute import execute_cdp
from nvdla_sim.processors.cdp.registers import CdpOp, decode_cdp, write_cdp
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, ViewDefaults
from nvdla_sim.processors.sdp import lane_elements
from nvdla_sim.units import cdma
from nvdla_sim.units import cdp as cdp_unit
from nvdla_sim.units.lut import LutParams


class CdpRegisters(ViewDefaults):
    kind = "cdp"
    op_type = CdpOp
    starts_on = "NVDLA_CDP"
    takes = ("NVDLA_CDP",)
    units = ("NVDLA_CDP_RDMA", "NVDLA_CDP")  # nvdla/sw kmd/firmware/cdp.c
    done = "CDP_DONE_STATUS"

    def decode(self, snap: Snapshots, name: str) -> tuple[CdpOp, ...]:
        return (decode_cdp(name, snap),)

    def emit(self, w: RegisterWriter, op: CdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        if lut is None:
            raise TraceError(f"{name}: a CDP program needs its LUT")
        write_cdp(w, op, lut)
        return Emitted(("CDP_RDMA", "CDP"), "CDP_0")

    def hw_layer(self, op: CdpOp, name: str) -> CdpLayer:
        return CdpLayer(name, op.width, op.height, op.channels, op.precision, window=op.normalz_len)

    def execute(self, op: CdpOp, st: ExecState, name: str) -> None:
        execute_cdp(op, st, name)

    def lut_unit(self, op: CdpOp) -> str | None:
        return "cdp"


class CdpProcessor(StreamProcessor):
    label = "CDP"
    name = "cdp"
    layer_type = CdpLayer
    config_sections = ("cdp", "memory", "timing")
    registers = CdpRegisters()

    def work(self, layer: CdpLayer, hw: HwConfig) -> StreamWork:
        """The cube in and the same cube out, at CDP's throughput."""
        hw.check_precision(layer.precision)
        return stream_work(
            layer, hw, unit=Unit.CDP, bound=Bound.CDP, rate=cdp_unit.elements_per_cycle(hw, layer.precision),
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
