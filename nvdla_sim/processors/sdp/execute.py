"""SDP's bit-exact execution: the pass's operands (register values, or B/N/E-RDMA streams read from memory in
NVDLA's operand formats: per-kernel 1x1xC or per-element cubes, 1 or 2 bytes a component, two components
(ALU, MUL) packed per element when both are used) and units.sdp.sdp_apply's arithmetic (NVIDIA's cmod
sdp_x.cpp, sdp_y_core.cpp, each point cited where used)."""

from __future__ import annotations

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import TraceError
from nvdla_sim.floats import fp16_from_codes, fp16_to_fp32, fp32_from_code
from nvdla_sim.layers import OperandMode
from nvdla_sim.precision import Precision
from nvdla_sim.processors.registers import ExecState
from nvdla_sim.processors.sdp.registers import (
    EwOperand,
    OperandSource,
    OperandUse,
    Rdma,
    SdpOp,
    SdpOperand,
    SdpStageCfg,
    SdpStream,
)
from nvdla_sim.registers.trace_io import SparseMemory
from nvdla_sim.units import sdp as sdp_fn
from nvdla_sim.units.lut import LutParams
from nvdla_sim.units.memory_format import elements_per_atom, read_cube, write_cube


def _operand(
    mem: SparseMemory, stream: SdpStream, which: OperandUse, w: int, h: int, cp: int, p: Precision, hw: HwConfig
) -> np.ndarray:
    """One SDP operand from memory: [cp] per kernel or [h, w, cp] per element (int16 values)."""
    comps = 2 if stream.use is OperandUse.BOTH else 1
    if stream.use is not OperandUse.BOTH and stream.use is not which:
        raise TraceError(
            f"SDP_RDMA.D_{stream.rdma.tag}RDMA_CFG_0.DATA_USE is {stream.use.name} but the {which.name} "
            "operand is programmed to come from memory"
        )
    dt = np.dtype("i1") if stream.size_bytes == 1 else np.dtype("<i2")
    pick = 0 if comps == 1 or which is OperandUse.ALU else 1  # pairs packed (ALU, MUL) per element
    if stream.mode is OperandMode.PER_KERNEL:
        vals = mem.read(stream.addr, cp * comps * stream.size_bytes).view(dt).astype(np.int64)
        return vals.reshape(cp, comps)[:, pick]
    epa = elements_per_atom(p, hw)
    atom = epa * comps * stream.size_bytes  # BytesPerAtom = ElementPerAtom x components x bytes
    out = np.zeros((h, w, cp), np.int64)
    for s in range(cp // epa):
        for y in range(h):
            raw = mem.read(stream.addr + s * stream.surface_stride + y * stream.line_stride, w * atom)
            out[y, :, s * epa : (s + 1) * epa] = raw.view(dt).reshape(w, epa, comps)[:, :, pick]
    return out


def sdp_params(
    op: SdpOp, mem: SparseMemory, w: int, h: int, cp: int, hw: HwConfig, *, lut: LutParams | None = None
) -> sdp_fn.SdpParams:
    """The numbers of an SDP pass: register operands, or operands streamed from memory; `lut` is the
    program's SDP LUT when the pass uses it."""
    streams = {s.rdma: s for s in op.operand_streams}
    proc = op.proc_precision

    def value(o: SdpOperand | EwOperand | None, rdma: Rdma, which: OperandUse) -> np.ndarray | int | None:
        if o is None:
            return None
        if o.source is OperandSource.REG:
            if not proc.is_float:
                return o.value
            if isinstance(o, EwOperand):  # FP mode: EW register operands are FP32 bits (sdp_y_core.cpp)
                return np.float32(fp32_from_code(o.value))
            return fp16_to_fp32(fp16_from_codes(np.array([o.value])))[0]
        if rdma not in streams:
            raise TraceError(f"SDP {which.name} operand comes from memory but {rdma.name} is disabled")
        v = _operand(mem, streams[rdma], which, w, h, cp, proc, hw)
        if proc.is_float:  # FP16 operands, exactly as FP32 (sdp_x.cpp, sdp_y_cvt.cpp)
            v = fp16_to_fp32(fp16_from_codes(v))
        return v.reshape(h * w, cp) if v.ndim == 3 else v

    def stage(cfg: SdpStageCfg | None, rdma: Rdma) -> sdp_fn.Stage | None:
        if cfg is None:
            return None
        # 6-bit shifters (cmod sdp_hls_wrapper.cpp passes the MUL shift as ACINTF(6))
        return sdp_fn.Stage(
            alu_op=cfg.alu_algo,
            alu_operand=value(cfg.alu, rdma, OperandUse.ALU),
            alu_shift=(cfg.alu.shift if cfg.alu else 0) & 63,
            mul_operand=value(cfg.mul, rdma, OperandUse.MUL),
            mul_shift=cfg.mul_shift & 63,
            prelu=cfg.prelu and cfg.mul is not None,
            relu=cfg.relu,
        )

    def ew_cvt(o: EwOperand | None) -> sdp_fn.Convertor | None:
        if o is None or o.source is OperandSource.REG or o.cvt_bypass:
            return None
        return sdp_fn.Convertor(o.cvt_offset, o.cvt_scale, o.cvt_truncate)

    y = None
    if op.ew_enabled:
        ew = op.ew
        if ew is None:
            raise TraceError("SDP Y stage enabled but its registers were not decoded (a row recorded before they were)")
        if ew.lut and lut is None:
            raise TraceError(
                "SDP LUT enabled but the program's SDP LUT was not decoded (decode_lut(prog, 'NVDLA_SDP'))"
            )
        y = sdp_fn.EwStage(
            alu_op=ew.alu_algo,
            alu_operand=value(ew.alu_operand, Rdma.ERDMA, OperandUse.ALU),
            alu_cvt=ew_cvt(ew.alu_operand),
            mul_operand=value(ew.mul_operand, Rdma.ERDMA, OperandUse.MUL),
            mul_cvt=ew_cvt(ew.mul_operand),
            mul_truncate=ew.truncate,
            mul_prelu=ew.mul_prelu,
            lut=lut if ew.lut else None,
        )
    x1, x2 = stage(op.x1, Rdma.BRDMA), stage(op.x2, Rdma.NRDMA)
    return sdp_fn.SdpParams(
        x1=x1,
        x2=x2,
        y=y,
        cvt=sdp_fn.Convertor(op.cvt_offset, op.cvt_scale, op.cvt_shift),
        out_precision=op.out_precision,
    )


def apply_sdp(op: SdpOp, x: np.ndarray, mem: SparseMemory, hw: HwConfig, lut: LutParams | None) -> np.ndarray:
    """SDP over x [h, w, c] as the program's registers say, refusing what the hardware does not do."""
    if op.proc_precision is Precision.INT16 and op.out_precision is Precision.INT8:
        # SDP's write DMA converts 8 to 16 bits but has no 16-to-8 mode (hw@nvdlav1 vmod/nvdla/sdp/
        # NV_NVDLA_SDP_WDMA_cmd.v: cfg_mode_16to8 commented out); measured, nv_full's RTL hangs on it
        raise TraceError(
            "SDP writes INT8 only from INT8 data: its write DMA has no 16-to-8 mode "
            "(D_DATA_FORMAT_0 PROC_PRECISION int16 with OUT_PRECISION int8; NVIDIA's nv_full RTL hangs on it)"
        )
    return sdp_values(op, x, mem, hw, lut)


def sdp_values(op: SdpOp, x: np.ndarray, mem: SparseMemory, hw: HwConfig, lut: LutParams | None) -> np.ndarray:
    """What the SDP arithmetic makes of x [h, w, c] under the pass's registers (no check of the mode)."""
    h, w, cp = x.shape
    params = sdp_params(op, mem, w, h, cp, hw, lut=lut)
    flat = x.reshape(h * w, cp)
    res = sdp_fn.sdp_apply(flat if np.issubdtype(flat.dtype, np.floating) else flat.astype(np.int64), params)
    return res.values.reshape(h, w, cp)


def execute_sdp(op: SdpOp, st: ExecState, name: str) -> None:
    """An offline SDP pass: its cube from memory through the stages, to memory or on to PDP."""
    x = read_cube(st.mem, op.src, op.width, op.height, op.channels, op.in_precision, st.hw)
    if op.in_precision.is_float != op.proc_precision.is_float:
        raise TraceError(
            f"{name}: SDP reads {op.in_precision.value} data for {op.proc_precision.value} processing; "
            "an offline pass is modelled with both float (FP16) or both integer"
        )
    # FP16 data enters SDP's FP32 exactly (cmod NV_NVDLA_sdp.cpp Fp16ToFp32)
    x = fp16_to_fp32(x) if op.in_precision.is_float else x.astype(np.int64)
    after_sdp(op, apply_sdp(op, x, st.mem, st.hw, st.luts.sdp), st)


def after_sdp(op: SdpOp, out: np.ndarray, st: ExecState) -> None:
    """An SDP pass's output: written to its destination, or handed to PDP on the fly."""
    if op.to_pdp:
        st.flying = out
    else:
        write_cube(st.mem, op.dst, out, op.out_precision, st.hw)
