"""The standalone (offline) PDP: memory -> PDP_RDMA -> PDP (pooling windows) -> memory.

Its timing and activity (PdpProcessor), its registers (registers.py) and its bit-exact execution (execute.py),
put together for the program passes by PdpRegisters.
"""

from __future__ import annotations

import dataclasses

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.layers import PdpLayer
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.processors.pdp.execute import execute_pdp
from nvdla_sim.processors.pdp.registers import PdpOp, decode_pdp, pool_spec, write_pdp
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, UnitRegisters, ViewDefaults
from nvdla_sim.units import cdma, pdp
from nvdla_sim.units.lut import LutParams


class PdpRegisters(ViewDefaults):
    kind = "pdp"
    op_type = PdpOp
    starts_on = "NVDLA_PDP"
    takes = ("NVDLA_PDP",)
    units = ("NVDLA_PDP_RDMA", "NVDLA_PDP")  # nvdla/sw kmd/firmware/pdp.c
    done = "PDP_DONE_STATUS"

    def fed_by(self, snap: Snapshots) -> str | None:
        """Not OFF_FLYING: SDP's output on the fly (D_OPERATION_MODE_CFG)."""
        return None if UnitRegisters.of(snap, "NVDLA_PDP").f("D_OPERATION_MODE_CFG_0", "OFF_FLYING") else "sdp"

    def cube(self, snap: Snapshots) -> tuple[int, int, int]:
        """The cube PDP takes (D_DATA_CUBE_IN_*, minus-one encoded)."""
        r = UnitRegisters.of(snap, "NVDLA_PDP")
        return tuple(r.f(f"D_DATA_CUBE_IN_{d}_0", d) + 1 for d in ("WIDTH", "HEIGHT", "CHANNEL"))

    def decode(self, snap: Snapshots, name: str) -> tuple[PdpOp, ...]:
        """An offline pass (OFF_FLYING); a pass on the fly is decoded by the operation that feeds it."""
        if not UnitRegisters.of(snap, "NVDLA_PDP").f("D_OPERATION_MODE_CFG_0", "OFF_FLYING"):
            return ()
        return (decode_pdp(name, snap, flying=False),)

    def emit(self, w: RegisterWriter, op: PdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        write_pdp(w, op)
        return Emitted(("PDP", "PDP_RDMA"), "PDP_0")

    def hw_layer(self, op: PdpOp, name: str) -> PdpLayer:
        return PdpLayer(
            name,
            op.in_w,
            op.in_h,
            op.channels,
            op.precision,
            pool_spec(op),
            input_memory=op.src_memory,
            output_memory=op.dst_memory,
        )

    def timed_layer(self, op: PdpOp, hw: HwConfig, name: str) -> tuple[PdpLayer, TilePlan | None]:
        layer = self.hw_layer(op, name)
        if op.split_num > 1:
            # Split-width mode (a line wider than the PDP line buffer): each part re-reads the
            # kernel-overlap columns of its neighbour (pdp_16x6x16_4x2_split: 20 of 16 columns read).
            read_w = op.in_w + (op.split_num - 1) * max(0, op.kernel_w - op.stride_x)
            layer = dataclasses.replace(layer, width=read_w)
        return layer, None

    def execute(self, op: PdpOp, st: ExecState, name: str) -> None:
        execute_pdp(op, st)

    def fed(self, op: PdpOp) -> bool:
        return op.flying


class PdpProcessor(StreamProcessor):
    label = "PDP"
    name = "pdp"
    layer_type = PdpLayer
    config_sections = ("pdp", "memory", "timing")
    registers = PdpRegisters()

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
