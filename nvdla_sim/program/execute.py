"""Bit-exact execution of a decoded NVDLA register program on its memory image.

Each operation reads its cubes from memory in NVDLA's formats (doc/hw/format.rst), computes with the
same functional models the rest of the simulator uses (conv.run_conv, sdp.sdp_apply, pdp.pool,
cdp.lrn), and writes its result with the destination strides, so that the trace test's CRC checks can
be recomputed and compared with NVIDIA's golden values:

- feature data: atoms of `memory_atomic_bytes` (8 on nv_small) holding consecutive channels, lines of
  atoms at the line stride, surfaces of atoms at the surface stride; channels padded to whole atoms;
- direct-convolution weights: kernel groups of `kernels_per_atomic` kernels, each kernel cut into
  1x1x`atomic_c` channel blocks, scanned C' -> K -> W -> H -> C and packed with no gaps;
- SDP operands: per-kernel 1x1xC or per-element cubes with their own strides, 1 or 2 bytes a component,
  two components (ALU, MUL) packed per element when both are used.

Register arithmetic follows NVIDIA's bit-accurate C model (hw@master:cmod), each point cited where used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import run_conv
from nvdla_sim.engine.tiling import LoopOrder, TilePlan
from nvdla_sim.errors import TraceError
from nvdla_sim.floats import fp16_from_codes, fp16_to_fp32, fp32_from_code
from nvdla_sim.layers import ConvLayer, OperandMode
from nvdla_sim.precision import Precision
from nvdla_sim.program.decode import (
    CdpOp,
    ConvOp,
    Decoded,
    EwOperand,
    OperandSource,
    OperandUse,
    Operation,
    PdpOp,
    Rdma,
    SdpOp,
    SdpOperand,
    SdpStageCfg,
    SdpStream,
    decode_lut,
    pool_spec,
)
from nvdla_sim.program.fields import signed
from nvdla_sim.program.trace_io import Check, Program, SparseMemory, crc32, initial_memory
from nvdla_sim.units import pdp as pdp_fn
from nvdla_sim.units import sdp as sdp_fn
from nvdla_sim.units.cdp import LrnParams, lrn
from nvdla_sim.units.lut import LutParams
from nvdla_sim.units.memory_format import elements_per_atom, read_cube, read_dc_weights, write_cube

# PDP padding-value registers: sign bit of the n-element value for INT8 / INT16 data (cmod NV_NVDLA_pdp.cpp
# int_sign_extend widths for D_POOLING_PADDING_VALUE_1..7)
_PDP_PAD_BITS = {Precision.INT8: (8, 9, 10, 10, 11, 11, 11), Precision.INT16: (16, 17, 18, 18, 19, 19, 19)}


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


# ---- SDP ------------------------------------------------------------------------------------------


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


def _apply_sdp(op: SdpOp, x: np.ndarray, mem: SparseMemory, hw: HwConfig, lut: LutParams | None) -> np.ndarray:
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


# ---- operations -----------------------------------------------------------------------------------


@dataclass
class ExecState:
    mem: SparseMemory
    hw: HwConfig
    flying: np.ndarray | None = None  # SDP output handed to PDP on the fly
    kept_data: np.ndarray | None = None  # input the last convolution left in CBUF (SKIP_DATA_RLS)
    kept_weights: np.ndarray | None = None  # weights it left there (SKIP_WEIGHT_RLS)


@dataclass(frozen=True)
class ProgramLuts:
    """The LUT tables and registers a program's operations use: CDP's and SDP's (decode.decode_lut)."""

    cdp: LutParams | None = None
    sdp: LutParams | None = None


def _lut_users(ops: list[Operation]) -> tuple[bool, bool]:
    """Whether any operation uses CDP's LUT, and whether any uses SDP's (alone or behind a convolution)."""
    sdps = [op.sdp if isinstance(op, ConvOp) else op for op in ops]
    return any(isinstance(op, CdpOp) for op in ops), any(isinstance(s, SdpOp) and s.lut_enabled for s in sdps)


def program_luts(ops: list[Operation], lut: LutParams | None, name: str) -> ProgramLuts:
    """The one LUT an emitted program writes, given to the unit whose operations use it."""
    cdp, sdp = _lut_users(ops)
    if cdp and sdp:
        raise TraceError(f"{name}: a program with both a CDP and an SDP LUT pass is not emitted (one LUT per program)")
    return ProgramLuts(cdp=lut if cdp else None, sdp=lut if sdp else None)


def execute(
    ops: list[Operation], mem: SparseMemory, hw: HwConfig, *, name: str = "program", luts: ProgramLuts = ProgramLuts()
) -> None:
    """Run the operations in order on `mem` (modified in place) with the program's LUTs."""
    st = ExecState(mem, hw)
    for op in ops:
        _EXECUTE[type(op)](op, st, name, luts)


def execute_program(prog: Program, decoded: Decoded, hw: HwConfig) -> tuple[SparseMemory, list[dict]]:
    """The program's memory after its operations, and its CRC/file checks recomputed on it."""
    mem = initial_memory(prog)
    ops = decoded.operations
    cdp, sdp = _lut_users(ops)
    luts = ProgramLuts(
        cdp=decode_lut(prog, "NVDLA_CDP") if cdp else None, sdp=decode_lut(prog, "NVDLA_SDP") if sdp else None
    )
    execute(ops, mem, hw, name=prog.name, luts=luts)
    return mem, check_results(prog.checks, mem)


def _conv(op: ConvOp, st: ExecState, name: str, luts: ProgramLuts) -> None:
    s, p, hw = op.shape, op.precision, st.hw
    if op.pixel_input:
        raise TraceError(f"{name}: image (pixel) input is not executed bit-exactly yet; only feature-data convolutions")
    if op.compressed_weights:
        raise TraceError(f"{name}: compressed weights (CDMA.D_WEIGHT_FORMAT_0=1) are not executed bit-exactly")
    if op.batches > 1:
        raise TraceError(f"{name}: multi-batch convolution (CDMA.D_BATCH_NUMBER_0) is not executed bit-exactly")
    if op.reuse.data_reuse:
        data = _kept(st.kept_data, (s.in_h, s.in_w, s.in_c), "input", "DATA", name)
    else:
        data = read_cube(st.mem, op.data, s.in_w, s.in_h, s.in_c, p, hw)[:, :, : s.in_c]
    if op.reuse.weight_reuse:
        weights = _kept(st.kept_weights, (s.out_k, s.kernel_h, s.kernel_w, s.in_c), "weights", "WEIGHT", name)
    else:
        weights = read_dc_weights(st.mem, op.weight_addr, s.out_k, s.kernel_h, s.kernel_w, s.in_c, p, hw)
    st.kept_data = data if op.reuse.skip_data_rls else None
    st.kept_weights = weights if op.reuse.skip_weight_rls else None
    layer = ConvLayer(name=name, shape=s, precision=p)
    plan = TilePlan(op.data_banks, op.weight_banks, s.out_h, s.out_k, LoopOrder.DATA_STATIONARY)
    if p.is_float:  # the padding value's 16 bits as an FP16
        pad = fp16_from_codes(np.array([op.pad_value]))[0]
    else:  # cmod csc: INT8 takes the low 8 bits
        pad = signed(op.pad_value & 0xFF, 8) if p is Precision.INT8 else signed(op.pad_value, 16)
    acc, _ = run_conv(layer, data, weights, hw, plan, truncate=op.clip_truncate, pad_value=pad)
    epa = elements_per_atom(op.sdp.out_precision, hw)
    cube = np.zeros((s.out_h, s.out_w, math.ceil(s.out_k / epa) * epa), np.float32 if p.is_float else np.int64)
    cube[:, :, : s.out_k] = acc  # kernels past K in the last group compute 0
    _after_sdp(op.sdp, _apply_sdp(op.sdp, cube, st.mem, hw, luts.sdp), st)
    if op.pdp is not None:  # pooling on the fly, fed by the SDP pass
        _pdp(op.pdp, st, name, luts)


def _kept(kept: np.ndarray | None, shape: tuple[int, ...], what: str, field: str, name: str) -> np.ndarray:
    """The operand a convolution reuses from CBUF: what the previous one kept, of the same shape."""
    if kept is None:
        raise TraceError(
            f"{name}: {field}_REUSE=1 but the previous convolution released its {what} (set SKIP_{field}_RLS=1 there)"
        )
    if kept.shape != shape:
        raise TraceError(f"{name}: {field}_REUSE=1 reuses {what} of shape {kept.shape}, but this layer's is {shape}")
    return kept


def _sdp(op: SdpOp, st: ExecState, name: str, luts: ProgramLuts) -> None:
    x = read_cube(st.mem, op.src, op.width, op.height, op.channels, op.in_precision, st.hw)
    if op.in_precision.is_float != op.proc_precision.is_float:
        raise TraceError(
            f"{name}: SDP reads {op.in_precision.value} data for {op.proc_precision.value} processing; "
            "an offline pass is modelled with both float (FP16) or both integer"
        )
    # FP16 data enters SDP's FP32 exactly (cmod NV_NVDLA_sdp.cpp Fp16ToFp32)
    x = fp16_to_fp32(x) if op.in_precision.is_float else x.astype(np.int64)
    _after_sdp(op, _apply_sdp(op, x, st.mem, st.hw, luts.sdp), st)


def _after_sdp(op: SdpOp, out: np.ndarray, st: ExecState) -> None:
    if op.to_pdp:
        st.flying = out
    else:
        write_cube(st.mem, op.dst, out, op.out_precision, st.hw)


def _pdp(op: PdpOp, st: ExecState, name: str, luts: ProgramLuts) -> None:
    if op.flying:
        if st.flying is None:
            raise TraceError("PDP is programmed on the fly but no SDP pass feeds it")
        x, st.flying = st.flying[: op.in_h, : op.in_w], None
    else:
        x = read_cube(st.mem, op.src, op.in_w, op.in_h, op.channels, op.precision, st.hw)
    spec = pool_spec(op)
    bits = _PDP_PAD_BITS.get(op.precision)
    if bits is None:
        raise TraceError("PDP FP16 pooling is not executed bit-exactly")
    pads = [signed(v & ((1 << b) - 1), b) for v, b in zip(op.pad_values, bits, strict=True)]
    out = pdp_fn.pool(x, spec, op.precision, recips=(op.recip_w, op.recip_h), pad_values=pads)
    if out.shape[:2] != (op.out_h, op.out_w):
        raise TraceError(
            f"PDP.D_DATA_CUBE_OUT_WIDTH/HEIGHT say {op.out_w}x{op.out_h} but the window gives "
            f"{out.shape[1]}x{out.shape[0]}"
        )
    write_cube(st.mem, op.dst, out, op.precision, st.hw)


def _cdp(op: CdpOp, st: ExecState, name: str, luts: ProgramLuts) -> None:
    lut = luts.cdp
    if lut is None:
        raise TraceError(f"{name}: a CDP operation needs the program's LUT (decode.decode_lut)")
    x = read_cube(st.mem, op.src, op.width, op.height, op.channels, op.precision, st.hw).astype(np.int64)
    x[..., op.channels :] = signed(op.datin_offset & 0xFF, 8)  # padding channels enter as the offset (cmod)
    params = LrnParams(
        window=op.normalz_len,
        lut=lut,
        in_offset=op.datin_offset,
        in_scale=op.datin_scale,
        in_shift=op.datin_shift,
        out_offset=op.datout_offset,
        out_scale=op.datout_scale,
        out_shift=op.datout_shift,
        sqsum_bypass=op.sqsum_bypass,
        mul_bypass=op.mul_bypass,
    )
    try:
        out = lrn(x, params, op.precision)
    except ValueError as e:
        raise TraceError(f"CDP: {e}") from None
    write_cube(st.mem, op.dst, out, op.precision, st.hw)


# ---- checks ---------------------------------------------------------------------------------------


# one executor per operation kind (each: op, state, program name, the CDP's LUT)
_EXECUTE: dict[type, Callable[..., None]] = {ConvOp: _conv, SdpOp: _sdp, PdpOp: _pdp, CdpOp: _cdp}


def check_results(checks: list[Check], mem: SparseMemory) -> list[dict]:
    """Each CRC/file check recomputed on the model's memory: kind, base, size, golden and model CRC, match."""
    rows = []
    for c in checks:
        if c.kind == "nothing":
            continue
        got = crc32(mem.read(c.base, c.size))
        rows.append(
            {
                "kind": c.kind,
                "base": c.base,
                "size": c.size,
                "golden_crc": c.crc,
                "model_crc": got,
                "match": got == c.crc,
            }
        )
    return rows
