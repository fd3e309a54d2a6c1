"""SDP: single data point processor (functional and cost).

Pipeline (unit_description.rst SDP; spec/manual/NVDLA_SDP.rdl): X1 (BS: ALU, MUL, ReLU) -> X2 (BN: ALU,
MUL, ReLU) -> Y (EW: MUL then ALU, each with a register operand or a streamed one through its convertor,
then LUT) -> output
convertor y = sat(round((x - offset) * scale >> shift)). FP16 mode runs the same stages in FP32 as NVDLA
rounds it (nvdla_sim.floats) and converts to FP16 (no output convertor, as in NVDLA).

Integer X stage widths follow NVIDIA's bit-accurate C model (hw@master:cmod/hls/sdp/sdp_x.cpp, sdp.h) and
are checked against the nv_small RTL's trace tests: the ALU operand is saturated to 32 bits after its left
shift, the ALU result is 33 bits (not saturated), the multiplier 33 x 16 -> 49 bits, and the truncation
(a rounding right shift by the MUL shift, applied even when the multiplier is bypassed: the golden CRCs
of sdp_3x3x33_bn_int8_reg_1, _bn_int8_mem_0 and sdp_5x24x18_bs_int8_mem_0 need it) saturates to 32 bits;
PReLU passes non-negative values through untruncated (kept to 32 bits).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.floats import FP16_OVERFLOW, fp32_add, fp32_to_fp16, to_fp32
from nvdla_sim.layers import Memory, OperandMode, SdpSpec
from nvdla_sim.precision import Precision, saturate, shift_round
from nvdla_sim.units.dram import beat_bytes, credit_bytes_per_cycle
from nvdla_sim.units.lut import LutParams, LutPath, lut_apply

STAGE_BITS = 32
# Beats of an operand stream SDP's RDMA gathers before SDP gets its first value (NV_NVDLA_SDP_RDMA_unpack.v:
# is_pack_last at 4 beats)
RDMA_UNPACK_BEATS = 4


class AluOp(enum.Enum):
    ADD = "add"
    MAX = "max"
    MIN = "min"
    EQL = "eql"  # Y stage only: 0 where equal, 1 elsewhere (cmod sdp_y_core.cpp SDP_ALU_MODE_EQL)

    @property
    def register_name(self) -> str:
        """The name D_DP_*_CFG_0.ALU_ALGO gives the operation (NVDLA_SDP.rdl: MAX, MIN, SUM, EQL), as register
        descriptions store it."""
        return "sum" if self is AluOp.ADD else self.value


@dataclass(frozen=True, eq=False)
class Stage:
    """X1/X2: x = relu(((x alu (operand << alu_shift)) * mul) >> mul_shift). None operands bypass."""

    alu_op: AluOp = AluOp.ADD
    alu_operand: np.ndarray | int | None = None
    alu_shift: int = 0
    mul_operand: np.ndarray | int | None = None
    mul_shift: int = 0
    prelu: bool = False  # multiply only values the ALU left negative (PReLU)
    relu: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.alu_shift <= 63 or not 0 <= self.mul_shift <= 63:
            # 6-bit shifters in the datapath (cmod sdp_x.cpp X_alu/X_trt; the MUL register field is wider)
            raise ValueError("SDP stage shifts out of range: alu_shift 0..63, mul_shift 0..63")


@dataclass(frozen=True, eq=False)
class Convertor:
    """y = round((x - offset) * scale >> shift): the SDP output and EW operand convertors."""

    offset: int = 0
    scale: int = 1
    shift: int = 0

    def __post_init__(self) -> None:
        if not -(1 << 31) <= self.offset < (1 << 31):
            raise ValueError(f"convertor offset must fit INT32, not {self.offset}")
        if not -(1 << 15) <= self.scale < (1 << 15):
            raise ValueError(f"convertor scale must fit INT16, not {self.scale}")
        if not 0 <= self.shift <= 63:
            raise ValueError(f"convertor shift must be in 0..63, not {self.shift}")

    def apply(self, x: np.ndarray) -> np.ndarray:
        return shift_round((np.asarray(x, np.int64) - self.offset) * self.scale, self.shift)


@dataclass(frozen=True, eq=False)
class EwStage:
    """Y (EW): x = lut(alu(mul(x))), each piece optional (None bypasses it).

    Integer path (cmod hls/sdp/sdp_y_core.cpp, sdp_y_cvt.cpp): the multiplier first, x * operand (32 x 32
    bits) rounded half away from zero over 2**mul_truncate (D_DP_EW_TRUNCATE_VALUE, 10 bits) and
    saturated to 32 bits (PReLU passes x >= 0 untouched); then the ALU, x op operand saturated to 32 bits
    (EQL gives 0 where equal, 1 elsewhere); then the LUT (lut.LutPath.SDP). An operand is a 32-bit
    register value, or values streamed from memory (8 or 16 bits) through their convertor, saturated to
    32 bits; a register operand skips the convertor (the RTL converts only the E-RDMA stream)."""

    alu_op: AluOp = AluOp.ADD
    alu_operand: np.ndarray | int | None = None
    alu_cvt: Convertor | None = None  # None: CVT_BYPASS
    mul_operand: np.ndarray | int | None = None
    mul_cvt: Convertor | None = None
    mul_truncate: int = 0
    mul_prelu: bool = False
    lut: LutParams | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.mul_truncate <= 1023:
            raise ValueError(f"SDP EW multiplier truncate must be in 0..1023 (10 bits), not {self.mul_truncate}")


def operand_mode(operand: np.ndarray | int | None) -> OperandMode:
    """Where an operand of x[P, K] comes from: NONE (bypassed), REG (one value), PER_KERNEL (one per
    output channel: shape (K,)) or PER_ELEMENT (shape (P, K), or (H, W, K) for a convolution's output)."""
    if operand is None:
        return OperandMode.NONE
    ndim = np.ndim(operand)
    return OperandMode.REG if ndim == 0 else OperandMode.PER_KERNEL if ndim == 1 else OperandMode.PER_ELEMENT


@dataclass(frozen=True, eq=False)
class SdpParams:
    """Numbers for one SDP pass."""

    x1: Stage | None = None
    x2: Stage | None = None
    y: EwStage | None = None
    cvt: Convertor = field(default_factory=Convertor)
    out_precision: Precision = Precision.INT8

    def window(self, rows: slice, kernels: slice) -> SdpParams:
        """The numbers of a piece of the pass: its output rows (pixels) and kernels. Per-kernel operands keep
        their kernels, per-element ones their rows and kernels; register values and the convertors stay."""

        def cut(v):
            mode = operand_mode(v)
            if mode is OperandMode.PER_KERNEL:
                return np.asarray(v)[kernels]
            if mode is OperandMode.PER_ELEMENT:  # [P, K], or a convolution's [H', W', K] as its P pixels
                a = np.asarray(v)
                return a.reshape(-1, a.shape[-1])[rows, kernels]
            return v

        def stage(st):
            return None if st is None else replace(st, alu_operand=cut(st.alu_operand), mul_operand=cut(st.mul_operand))

        return replace(self, x1=stage(self.x1), x2=stage(self.x2), y=stage(self.y))

    def timing_view(self, precision: Precision) -> SdpSpec:
        """The timing view these numbers program on a layer at `precision`: X1's operands are the bias,
        X2's the scale, Y's the element-wise operand, each stage's the wider source of its two (a
        per-element stream over a per-kernel one over a register value); a stage's two per-kernel
        operands are pairs of one stream."""

        def wider(a, b) -> OperandMode:
            return max(operand_mode(a), operand_mode(b), key=_OPERAND_WIDTH.index)

        def pairs(a, b) -> bool:
            return operand_mode(a) is operand_mode(b) is OperandMode.PER_KERNEL

        x1, x2, y = self.x1 or Stage(), self.x2 or Stage(), self.y or EwStage()
        return SdpSpec(
            bias=wider(x1.alu_operand, x1.mul_operand),
            bias_pairs=pairs(x1.alu_operand, x1.mul_operand),
            scale=wider(x2.mul_operand, x2.alu_operand),
            relu=x1.relu or x2.relu,
            eltwise=wider(y.alu_operand, y.mul_operand),
            eltwise_pairs=pairs(y.alu_operand, y.mul_operand),
            lut=y.lut is not None,
            out_precision=None if self.out_precision is precision else self.out_precision,
        )


_OPERAND_WIDTH = [OperandMode.NONE, OperandMode.REG, OperandMode.PER_KERNEL, OperandMode.PER_ELEMENT]


def check_numbers(spec: SdpSpec, params: SdpParams, precision: Precision, layer: str) -> None:
    """A one-line error where `params` program other operand streams, units or output than the layer's
    timing view `spec` (what its cycles and energy count)."""
    diff = spec.streams().differences(params.timing_view(precision).streams())
    if diff:
        raise UnsupportedError(
            f"layer {layer!r}: its SDP numbers read other streams than its timing view counts ({'; '.join(diff)})"
        )


@dataclass(frozen=True)
class SdpResult:
    values: np.ndarray
    saturations: int


def _alu(op: AluOp, x, b):
    if op is AluOp.ADD:
        return x + b
    if op is AluOp.EQL:
        return np.where(x == b, 0, 1).astype(np.asarray(x).dtype)
    return np.maximum(x, b) if op is AluOp.MAX else np.minimum(x, b)


def _stage_int(x: np.ndarray, st: Stage) -> tuple[np.ndarray, int]:
    sat = 0
    if st.alu_operand is not None:
        operand, n = saturate(np.left_shift(np.asarray(st.alu_operand, np.int64), st.alu_shift), STAGE_BITS)
        sat += n
        x = _alu(st.alu_op, x, operand)  # 33-bit result, not saturated (cmod X_alu)
    prod = x * np.asarray(st.mul_operand, np.int64) if st.mul_operand is not None else x
    rounded = shift_round(prod, st.mul_shift)  # X_trt: applied also when the multiplier is bypassed
    lo, hi = -(1 << (STAGE_BITS - 1)), (1 << (STAGE_BITS - 1)) - 1
    over = (rounded < lo) | (rounded > hi)
    out = np.clip(rounded, lo, hi)
    if st.prelu and st.mul_operand is not None:
        keep = x >= 0  # PReLU: non-negative inputs skip the multiplier and the truncation
        out = np.where(keep, _wrap(x, STAGE_BITS), out)
        over &= ~keep
    n = int(np.count_nonzero(over))
    sat += n
    if st.relu:
        out = np.maximum(out, 0)
    return out, sat


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap to `bits` (a wider value assigned to a narrower register)."""
    m = np.asarray(x, np.int64) & ((1 << bits) - 1)
    return np.where(m >= 1 << (bits - 1), m - (1 << bits), m)


def _relu_float(x: np.ndarray) -> np.ndarray:
    """FP ReLU: negative inputs (-0 included) become +0; NaN passes (cmod hls/sdp/sdp_x.cpp)."""
    return np.where(np.signbit(x) & ~np.isnan(x), np.float32(0), x).astype(np.float32)


def _alu_float(op: AluOp, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The ALU in FP32 (cmod hls/sdp/sdp.h FpAlu): a sum is FpAdd (nvdla_sim.floats.fp32_add: its own
    sign of an exact zero), max and min pick an operand."""
    b = np.asarray(b, np.float64)
    if op is AluOp.ADD:
        return fp32_add(x, b)
    return to_fp32(_alu(op, x, b)).astype(np.float64)


def _stage_float(x: np.ndarray, st: Stage) -> np.ndarray:
    """X1/X2 in FP32 (nvdla_sim.floats.to_fp32 after each operation): the ALU, then the multiplier (PReLU
    passes non-negative inputs); the shifts and the truncation are not used in FP mode (sdp_x.cpp)."""
    x64 = np.asarray(x, np.float64)
    if st.alu_operand is not None:
        x64 = _alu_float(st.alu_op, x64, st.alu_operand)
    if st.mul_operand is not None:
        prod = to_fp32(x64 * np.asarray(st.mul_operand, np.float64)).astype(np.float64)
        x64 = np.where(x64 < 0, prod, x64) if st.prelu else prod
    out = x64.astype(np.float32)
    return _relu_float(out) if st.relu else out


def sdp_apply(x: np.ndarray, params: SdpParams) -> SdpResult:
    """Run SDP on CACC output x[P, K] (int32 or float32)."""
    if np.issubdtype(np.asarray(x).dtype, np.floating):
        return _sdp_float(np.asarray(x, np.float32), params)
    x = np.asarray(x, np.int64)
    sat = 0
    for st in (params.x1, params.x2):
        if st is not None:
            x, n = _stage_int(x, st)
            sat += n
    if params.y is not None:
        x, n = _ew_int(x, params.y)
        sat += n
    out_bits = 8 * params.out_precision.bytes
    if params.out_precision.is_float:
        raise ValueError("integer SDP input cannot produce fp16 output; use the fp16 datapath")
    out, n = saturate(params.cvt.apply(x), out_bits)
    return SdpResult(out.astype(params.out_precision.numpy_dtype), sat + n)


def _ew_operand(v: np.ndarray | int, cvt: Convertor | None) -> tuple[np.ndarray, int]:
    v = np.asarray(v, np.int64)
    return saturate(cvt.apply(v), STAGE_BITS) if cvt is not None else (v, 0)


def _ew_int(x: np.ndarray, y: EwStage) -> tuple[np.ndarray, int]:
    sat = 0
    if y.mul_operand is not None:
        op, n = _ew_operand(y.mul_operand, y.mul_cvt)
        product = x * op  # at most 2**62 in magnitude (two INT32 values)
        # a shift of 64 or more rounds every such product to 0 (|p| / 2**t + 1/2 < 1)
        rounded = shift_round(product, y.mul_truncate) if y.mul_truncate < 64 else np.zeros_like(product)
        lo, hi = -(1 << (STAGE_BITS - 1)), (1 << (STAGE_BITS - 1)) - 1
        keep = x >= 0 if y.mul_prelu else np.zeros(np.shape(rounded), bool)
        sat += n + int(np.count_nonzero(((rounded < lo) | (rounded > hi)) & ~keep))
        x = np.where(keep, x, np.clip(rounded, lo, hi))
    if y.alu_operand is not None:
        op, n = _ew_operand(y.alu_operand, y.alu_cvt)
        x, m = saturate(_alu(y.alu_op, x, op), STAGE_BITS)
        sat += n + m
    if y.lut is not None:
        x, _ = lut_apply(x, y.lut, path=LutPath.SDP)  # already 32 bits
    return x, sat


def _sdp_float(x: np.ndarray, params: SdpParams) -> SdpResult:
    """SDP's FP16 mode on CACC's FP32: X1, X2, then Y (multiplier before ALU) in FP32 rounded to nearest
    even with denormals flushed and overflow saturated; the output convertor is bypassed and the result
    rounded to FP16, saturating at 65504 (cmod hls/sdp/sdp_c.cpp Fp32ToFp16; nvdla_sim.floats). The
    LUT interpolates in FP17 (lut._lookup_fp) and hands on an FP32 holding that FP17 value."""
    for st in (params.x1, params.x2):
        if st is not None:
            x = _stage_float(x, st)
    if params.y is not None:
        y = params.y
        x64 = np.asarray(x, np.float64)
        if y.mul_operand is not None:  # the multiplier before the ALU, as in the integer path
            prod = to_fp32(x64 * np.asarray(y.mul_operand, np.float64)).astype(np.float64)
            x64 = np.where(x64 >= 0, x64, prod) if y.mul_prelu else prod
        if y.alu_operand is not None:
            x64 = _alu_float(y.alu_op, x64, y.alu_operand)
        if y.lut is not None:
            v, _ = lut_apply(x64, y.lut, path=LutPath.SDP)
            x64 = to_fp32(v).astype(np.float64)
        x = x64.astype(np.float32)
    x = np.asarray(x, np.float32)
    out = fp32_to_fp16(x)
    # saturated: what the convertor's rounding would take past 65504 (65504 < |x| < 65520 rounds to it)
    return SdpResult(out, int(np.count_nonzero(np.abs(x) >= FP16_OVERFLOW)))


# ---- cost -----------------------------------------------------------------------------------------


def elements_per_cycle(spec: SdpSpec, hw: HwConfig) -> int:
    """SDP element rate for a pass: the slowest sub-unit in use (bypassed ones do not limit)."""
    rates = [hw.sdp.max_throughput]
    if spec.bias is not OperandMode.NONE or spec.relu:
        rates.append(hw.sdp.bs_throughput)
    if spec.scale is not OperandMode.NONE:
        if hw.sdp.bn_throughput == 0:
            raise UnsupportedError(f"{hw.name} has no SDP BN sub-unit (sdp.bn_throughput = 0) for a per-channel scale")
        rates.append(hw.sdp.bn_throughput)
    if spec.uses_y:
        if hw.sdp.ew_throughput == 0:
            raise UnsupportedError(
                f"{hw.name} has no SDP EW sub-unit (sdp.ew_throughput = 0): eltwise operands and the LUT are unavailable"
            )
        if spec.lut and not hw.sdp.lut:
            raise UnsupportedError(f"{hw.name} has no SDP LUT (sdp.lut = false)")
        rates.append(hw.sdp.ew_throughput)
    return min(rates)


def operand_prefetch_bytes(hw: HwConfig) -> int:
    """Operand bytes an SDP RDMA requests before it waits for SDP to consume: its latency FIFO, one memory
    beat an entry (sdp.operand_fifo_beats: 160 on nv_small, hw@nv_small vmod/nvdla/sdp/
    NV_NVDLA_SDP_BRDMA_lat_fifo.v nv_ram_rwsp_160x514; on the nv_small RTL a fused per-element operand
    stream reads 168 beats at once, then keeps pace with the output: docs/modelling.md "SDP operand
    streams")."""
    return hw.sdp.operand_fifo_beats * hw.memory.dram_width_bits // 8


def _stream_bytes(mode: OperandMode, *, pixels: int, channels: int, operand_bytes: int, pairs: bool = False) -> int:
    """Bytes one operand RDMA reads for a pass: 2 a channel per kernel (4 for (ALU, MUL) pairs), the
    layer's precision per element."""
    if mode is OperandMode.PER_KERNEL:
        return channels * (4 if pairs else 2)
    if mode is OperandMode.PER_ELEMENT:
        return pixels * channels * operand_bytes
    return 0


def operand_read_bytes(spec: SdpSpec, *, pixels: int, channels: int, operand_bytes: int) -> int:
    """Bytes the B/N/E-RDMAs read for one pass over pixels x channels outputs (`operand_bytes` a
    per-element operand unless the spec names its own operand precision)."""
    return sum(_streams_bytes(spec, pixels=pixels, channels=channels, operand_bytes=operand_bytes))


def _streams_bytes(spec: SdpSpec, *, pixels: int, channels: int, operand_bytes: int) -> tuple[int, int, int]:
    """Bytes the B-, N- and E-RDMA each read for one pass over pixels x channels outputs (`operand_bytes` a
    per-element operand unless the spec names its own operand precision)."""
    if spec.operand_precision is not None:
        operand_bytes = spec.operand_precision.bytes
    size = dict(pixels=pixels, channels=channels, operand_bytes=operand_bytes)
    return (
        _stream_bytes(spec.bias, **size, pairs=spec.bias_pairs),
        _stream_bytes(spec.scale, **size),
        _stream_bytes(spec.eltwise, **size, pairs=spec.eltwise_pairs),
    )


def operand_heads(
    spec: SdpSpec, hw: HwConfig, *, pixels: int, channels: int, operand_bytes: int, memory: Memory
) -> tuple[int, ...]:
    """Per operand stream the pass reads (B, N, E-RDMA), the beats SDP waits for before its first value:
    RDMA_UNPACK_BEATS, or the whole stream where it is shorter."""
    beat = beat_bytes(hw, memory)
    sizes = _streams_bytes(spec, pixels=pixels, channels=channels, operand_bytes=operand_bytes)
    return tuple(min(RDMA_UNPACK_BEATS, math.ceil(b / beat)) for b in sizes if b)


def operand_stream_cycles(
    spec: SdpSpec, hw: HwConfig, *, pixels: int, channels: int, operand_bytes: int, memory: Memory, latency: int
) -> float:
    """Fewest cycles the B/N/E-RDMAs' credits let a pass's operand streams take from `memory`: each RDMA
    reads its own stream with sdp.operand_fifo_beats (the E-RDMA sdp.eltwise_fifo_beats) in flight, in
    requests of the port's longest burst (memory.max_burst_beats; dram.credit_bytes_per_cycle), a credit's round
    trip the memory's `latency` (the memory model's: system.memory.memory_model(hw).latency(memory), the
    interconnect's path included). Binds only behind a memory slower than the
    build's PRIMARY_MEMIF_LATENCY (nv_small_256_full's 16 beats of 8 bytes at the testbench's grown
    latency: docs/validation.md 5e)."""
    m = hw.memory
    if memory is Memory.SRAM:
        beat, request_beats = m.sram_width_bits / 8, m.sram_max_burst_beats
    else:
        beat, request_beats = m.dram_width_bits / 8, m.max_burst_beats
    reuse = hw.timing.rdma_credit_reuse_cycles
    sizes = _streams_bytes(spec, pixels=pixels, channels=channels, operand_bytes=operand_bytes)
    credits = (hw.sdp.operand_fifo_beats, hw.sdp.operand_fifo_beats, hw.sdp.erdma_fifo_beats)  # B, N, E-RDMA
    return max(
        nbytes / credit_bytes_per_cycle(c, beat, latency, request_beats, reuse)
        for nbytes, c in zip(sizes, credits, strict=True)
    )


def process_cycles(elements: int, spec: SdpSpec, hw: HwConfig) -> int:
    return math.ceil(elements / elements_per_cycle(spec, hw))
