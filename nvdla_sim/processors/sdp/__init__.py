"""The standalone (offline) SDP: memory -> SDP_RDMA (and its B/N/E-RDMA operands) -> SDP -> memory.

Its timing and activity (SdpProcessor), its registers (registers.py) and its bit-exact execution (execute.py),
put together for the program passes by SdpRegisters.
"""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import OperandMode, SdpLayer, SdpSpec
from nvdla_sim.processors.base import StreamProcessor, dram_activity, stream_work
from nvdla_sim.processors.lut import write_lut
from nvdla_sim.processors.pdp.registers import decode_pdp
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, UnitRegisters, ViewDefaults
from nvdla_sim.processors.sdp.execute import execute_sdp
from nvdla_sim.processors.sdp.registers import SdpOp, decode_sdp, sdp_spec, write_sdp
from nvdla_sim.units import cdma, sdp
from nvdla_sim.units.lut import LutParams


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


def check_sdp(op: SdpOp, hw: HwConfig, name: str) -> None:
    """Refuse an SDP pass that uses what the build lacks, as the RTL does (nv_small has no SDP EW or LUT)."""
    if op.ew_enabled and hw.sdp.ew_throughput == 0:
        raise TraceError(
            f"{name}: the program enables SDP's element-wise (Y) unit (SDP.D_DP_EW_CFG_0.EW_BYPASS=0), which "
            f"{hw.name} does not have (sdp.ew_throughput = 0; nv_small is built with SDP_EW_DISABLE)"
        )
    if op.lut_enabled and not hw.sdp.lut:
        raise TraceError(f"{name}: the program enables the SDP LUT, which {hw.name} does not have (sdp.lut = false)")


def emit_sdp_lut(w: RegisterWriter, op: SdpOp, lut: LutParams | None, name: str) -> None:
    """The LUT's registers of a pass through it (SDP.S_LUT_*)."""
    if op.lut_enabled:
        if lut is None:
            raise TraceError(f"{name}: an SDP pass through the LUT needs its tables (lut=)")
        write_lut(w, "SDP", lut)


class SdpRegisters(ViewDefaults):
    kind = "sdp"
    op_type = SdpOp
    starts_on = "NVDLA_SDP"
    takes = ("NVDLA_SDP",)
    units = ("NVDLA_SDP_RDMA", "NVDLA_SDP")  # nvdla/sw kmd/firmware/sdp.c enables SDP_RDMA, then SDP
    done = "SDP_DONE_STATUS"

    def fed_by(self, snap: Snapshots) -> str | None:
        """FLYING_MODE ON: the convolution's output (D_FEATURE_MODE_CFG)."""
        return "conv" if UnitRegisters.of(snap, "NVDLA_SDP").f("D_FEATURE_MODE_CFG_0", "FLYING_MODE") else None

    def hands_on(self, snap: Snapshots) -> bool:
        """OUTPUT_DST PDP: the output goes to PDP on the fly."""
        return bool(UnitRegisters.of(snap, "NVDLA_SDP").f("D_FEATURE_MODE_CFG_0", "OUTPUT_DST"))

    def cube(self, snap: Snapshots) -> tuple[int, int, int]:
        """The cube SDP takes and hands on (D_DATA_CUBE_*, minus-one encoded)."""
        r = UnitRegisters.of(snap, "NVDLA_SDP")
        return tuple(r.f(f"D_DATA_CUBE_{d}_0", d) + 1 for d in ("WIDTH", "HEIGHT", "CHANNEL"))

    def decode(self, snap: Snapshots, name: str) -> tuple:
        """An offline pass, and the PDP pass it feeds on the fly (OUTPUT_DST = PDP)."""
        op = decode_sdp(name, snap, flying=False)
        return (op, decode_pdp(name, snap, flying=True)) if op.to_pdp else (op,)

    def emit(self, w: RegisterWriter, op: SdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        emit_sdp_lut(w, op, lut, name)
        write_sdp(w, op)
        return Emitted(("SDP", "SDP_RDMA"), "SDP_0")

    def hw_layer(self, op: SdpOp, name: str) -> SdpLayer:
        return SdpLayer(
            name,
            op.width,
            op.height,
            op.channels,
            op.in_precision,
            sdp_spec(op),
            input_memory=op.src_memory,
            output_memory=op.dst_memory,
        )

    def execute(self, op: SdpOp, st: ExecState, name: str) -> None:
        execute_sdp(op, st, name)

    def check(self, op: SdpOp, hw: HwConfig, name: str) -> None:
        check_sdp(op, hw, name)

    def lut_unit(self, op: SdpOp) -> str | None:
        return "sdp" if op.lut_enabled else None

    def feeds(self, op: SdpOp) -> bool:
        return op.to_pdp


class SdpProcessor(StreamProcessor):
    label = "SDP"
    name = "sdp"
    layer_type = SdpLayer
    config_sections = ("sdp", "memory", "timing")
    registers = SdpRegisters()

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
