"""The convolution pipeline: CDMA -> CBUF -> CSC -> CMAC -> CACC -> SDP (-> PDP on the fly) -> memory.

Its timing is engine.conv (the tile pipeline under a tiling plan), its work counts engine.conv.conv_activity;
its registers are registers.py, its bit-exact execution execute.py, put together for the program passes by
ConvRegisters.
"""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import conv_activity, simulate_chain, simulate_conv
from nvdla_sim.engine.stats import Activity, ConvDetail, LayerStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, default_plan, illegal_reason
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.processors.base import CoreProcessor
from nvdla_sim.processors.conv.execute import execute_conv
from nvdla_sim.processors.conv.registers import INTR_MASK, ConvOp, decode_conv, write_conv
from nvdla_sim.processors.pdp.registers import pool_spec, write_pdp
from nvdla_sim.processors.registers import Emitted, ExecState, RegisterWriter, Snapshots, UnitRegisters, ViewDefaults
from nvdla_sim.processors.sdp import check_sdp, emit_sdp_lut, stage_ops
from nvdla_sim.processors.sdp.registers import sdp_spec, write_sdp
from nvdla_sim.units.lut import LutParams


class ConvRegisters(ViewDefaults):
    kind = "conv"
    op_type = ConvOp
    starts_on = "NVDLA_CDMA"
    takes = ("NVDLA_CDMA", "NVDLA_SDP")  # its SDP pass (and a PDP pass on the fly) are part of it
    # NVIDIA's firmware enables CACC, CMAC_A, CMAC_B, CSC and CDMA (nvdla/sw kmd/firmware/conv.c); CACC's done
    # bit ends the convolution (its SDP pass has its own)
    units = ("NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CSC", "NVDLA_CDMA")
    done = "CACC_DONE_STATUS"

    def hands_on(self, snap: Snapshots) -> bool:
        """A convolution's output always goes on to SDP on the fly (CACC -> SDP)."""
        return True

    def cube(self, snap: Snapshots) -> tuple[int, int, int]:
        """The output cube CACC hands to SDP (D_DATAOUT_SIZE, minus-one encoded)."""
        r = UnitRegisters.of(snap, "NVDLA_CACC")
        size = r.f("D_DATAOUT_SIZE_0_0", "WIDTH"), r.f("D_DATAOUT_SIZE_0_0", "HEIGHT")
        return size[0] + 1, size[1] + 1, r.f("D_DATAOUT_SIZE_1_0", "CHANNEL") + 1

    def decode(self, snap: Snapshots, name: str) -> tuple[ConvOp, ...]:
        return (decode_conv(name, snap),)

    def emit(self, w: RegisterWriter, op: ConvOp, hw: HwConfig, lut: LutParams | None, name: str) -> Emitted:
        """GLB's interrupt mask, the SDP LUT, SDP's, the convolution's and PDP's registers, then CBUF's
        flush poll (as NVIDIA's convolution tests do); enabled from the last unit back to CDMA."""
        w.reg("GLB", "S_INTR_MASK_0", MASK=INTR_MASK)
        emit_sdp_lut(w, op.sdp, lut, name)
        rdma = write_sdp(w, op.sdp)
        write_conv(w, op, hw)
        if op.pdp is not None:
            write_pdp(w, op.pdp)
        w.line("poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0, 0x1);")
        enables = (["PDP"] if op.pdp else []) + ["SDP"] + (["SDP_RDMA"] if rdma else [])
        return Emitted((*enables, "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"), "PDP_0" if op.pdp else "SDP_0")

    def hw_layer(self, op: ConvOp, name: str) -> ConvLayer:
        pool = pool_spec(op.pdp) if op.pdp is not None else None
        return ConvLayer(
            name,
            op.shape,
            op.precision,
            sdp_spec(op.sdp),
            pool=pool,
            input_memory=op.data_memory,
            weight_memory=op.weight_memory,
            output_memory=op.pdp.dst_memory if op.pdp is not None else op.sdp.dst_memory,
            image_input=op.pixel_input,
            weight_bytes=op.weight_bytes,  # D_WEIGHT_BYTES: what CDMA fetches (padding, or compression, included)
            data_resident=op.reuse.data_reuse,
            weights_resident=op.reuse.weight_reuse,
        )

    def timed_layer(self, op: ConvOp, hw: HwConfig, name: str) -> tuple[ConvLayer, TilePlan]:
        """The layer and its one-hardware-layer plan (the program's CBUF split), refused with a one-line error
        when the split does not fit the model's config."""
        layer = self.hw_layer(op, name)
        plan = TilePlan(op.data_banks, op.weight_banks, op.shape.out_h, op.shape.out_k, LoopOrder.DATA_STATIONARY)
        reason = illegal_reason(layer, plan, hw)
        if reason is not None:
            raise TraceError(f"{name}: the program's CBUF split does not fit the model's {hw.name}: {reason}")
        return layer, plan

    def execute(self, op: ConvOp, st: ExecState, name: str) -> None:
        execute_conv(op, st, name)

    def check(self, op: ConvOp, hw: HwConfig, name: str) -> None:
        check_sdp(op.sdp, hw, name)

    def lut_unit(self, op: ConvOp) -> str | None:
        return "sdp" if op.sdp.lut_enabled else None

    def chain_cycles(self, ops: list[ConvOp], hw: HwConfig, name: str) -> int | None:
        """Convolutions in sequence (CBUF reuse between them) as one chain of hardware layers
        (engine.conv.simulate_chain) and one layer's fixed latencies; None when one pools on the fly."""
        if any(op.pdp is not None for op in ops):
            return None
        steps = [self.timed_layer(op, hw, f"{name}.{i}") for i, op in enumerate(ops)]
        return simulate_chain(steps, hw).cycles + sum(CONV.fixed_latency(steps[0][0], hw))


class ConvProcessor(CoreProcessor):
    label = "CONV"
    name = "conv"
    layer_type = ConvLayer
    config_sections = ("mac", "cbuf", "csc", "cacc", "sdp", "pdp", "memory", "timing")
    registers = ConvRegisters()

    def simulate(
        self, layer: ConvLayer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool,
        steady: SteadyState = STEADY,
    ) -> LayerStats:  # fmt: skip
        return simulate_conv(layer, hw, plan or default_plan(layer, hw), record_events=record_events, steady=steady)

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
