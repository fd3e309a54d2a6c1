"""Decode an NVDLA register program into the model's hardware layers.

The register file is replayed in order; each D_OP_ENABLE write snapshots its unit's registers. The
enabled units then form operations, as the hardware chains them (unit_description.rst "Pipelines"):

- CDMA enabled: a convolution-pipeline layer (CDMA, CSC, CMAC, CACC) with SDP on the fly, and PDP on the
  fly when SDP's OUTPUT_DST is PDP;
- SDP enabled without CDMA: an offline SDP layer reading memory through SDP_RDMA (+ PDP on the fly);
- PDP enabled with OFF_FLYING: an offline PDP layer; CDP: an offline LRN layer.

Registers the model does not understand are collected by name (`Decoded.unknown`) and refused by the
strict entry points, never ignored silently. Each operation has a `describe()` dict (plain numbers,
what validation/data rows store) and `from_description()` to rebuild it without the trace files.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import (
    ConvLayer,
    ConvShape,
    Memory,
    OperandMode,
    PdpLayer,
    PoolMode,
    PoolSpec,
    SdpLayer,
    SdpSpec,
)
from nvdla_sim.precision import Precision
from nvdla_sim.program.fields import field as get_field
from nvdla_sim.program.fields import is_known, signed
from nvdla_sim.program.trace_io import Program, RegWrite
from nvdla_sim.units.lut import LE_ENTRIES, LO_ENTRIES, IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.memory_format import Surface
from nvdla_sim.units.sdp import AluOp

_PRECISIONS = {0: Precision.INT8, 1: Precision.INT16, 2: Precision.FP16}


class OperandSource(enum.Enum):
    """D_DP_{BS,BN}_{ALU,MUL}_CFG_0.SRC: a register value, or a stream from memory (an SDP RDMA)."""

    REG = "reg"
    MEM = "mem"


class Rdma(enum.Enum):
    """The SDP read DMAs: B (X1 operands), N (X2 operands), E (the element-wise unit's operand)."""

    BRDMA = "brdma"
    NRDMA = "nrdma"
    ERDMA = "erdma"

    @property
    def tag(self) -> str:
        return self.value[0].upper()


class OperandUse(enum.Enum):
    """D_{B,N,E}RDMA_CFG_0.DATA_USE: which operand(s) of the stage a stream feeds."""

    MUL = "mul"
    ALU = "alu"
    BOTH = "both"


# D_DP_{BS,BN,EW}_CFG_0.ALU_ALGO's codes, as units.sdp.AluOp (the register names the sum SUM; descriptions,
# what validation/data rows store, keep the register's names)
_ALU_NAMES = {AluOp.MAX: "max", AluOp.MIN: "min", AluOp.ADD: "sum", AluOp.EQL: "eql"}
_ALU_BY_NAME = {name: op for op, name in _ALU_NAMES.items()}


_STREAM_USE = {0: OperandUse.MUL, 1: OperandUse.ALU, 2: OperandUse.BOTH}  # DATA_USE (NVDLA_SDP_RDMA.rdl)
# X stages: code 3 (EQL) sums, as the X datapath has no comparator (cmod hls/sdp/sdp_x.cpp: MAX, MIN,
# else SUM); the Y stage compares (sdp_y_core.cpp SDP_ALU_MODE_EQL)
_ALU_ALGO = {0: AluOp.MAX, 1: AluOp.MIN, 2: AluOp.ADD, 3: AluOp.ADD}
_EW_ALU_ALGO = {0: AluOp.MAX, 1: AluOp.MIN, 2: AluOp.ADD, 3: AluOp.EQL}
_POOL_METHOD = {0: PoolMode.AVG, 1: PoolMode.MAX, 2: PoolMode.MIN}  # D_OPERATION_MODE_CFG_0.POOLING_METHOD


@dataclass(frozen=True)
class SdpOperand:
    """One X1/X2 ALU or MUL operand: a register value or a stream from memory (B/N RDMA)."""

    source: OperandSource
    value: int = 0  # register operand (signed 16-bit)
    shift: int = 0  # ALU left shift / MUL right shift (truncate)
    mode: OperandMode = OperandMode.PER_KERNEL  # PER_KERNEL or PER_ELEMENT for memory operands
    size_bytes: int = 1


@dataclass(frozen=True)
class SdpStream:
    """An operand stream of B/N/E-RDMA: per-kernel (1x1xC) or per-element (a W x H x C cube) operands, one
    or two components (ALU and/or MUL, packed in pairs when both) of 1 or 2 bytes (doc/hw/format.rst)."""

    rdma: Rdma
    mode: OperandMode  # PER_KERNEL or PER_ELEMENT
    size_bytes: int
    addr: int
    line_stride: int = 0
    surface_stride: int = 0
    use: OperandUse = OperandUse.ALU


@dataclass(frozen=True)
class SdpStageCfg:
    """X1 (BS) or X2 (BN) stage registers."""

    alu: SdpOperand | None  # None: ALU bypassed
    alu_algo: AluOp
    mul: SdpOperand | None
    prelu: bool
    relu: bool
    mul_shift: int = 0  # MUL_CFG.SHIFT: the truncation after the multiplier, applied even when it is bypassed


@dataclass(frozen=True)
class EwOperand:
    """One Y-stage (EW) ALU or MUL operand: a 32-bit register value, or the E-RDMA stream through its
    convertor (D_DP_EW_{ALU,MUL}_CVT_*: y = (x - offset) * scale >> truncate; bypassed when cvt_bypass)."""

    source: OperandSource
    value: int = 0  # D_DP_EW_*_SRC_VALUE (signed 32-bit)
    cvt_bypass: bool = True
    cvt_offset: int = 0
    cvt_scale: int = 1
    cvt_truncate: int = 0


@dataclass(frozen=True)
class SdpEwCfg:
    """The Y (EW) stage registers: D_DP_EW_CFG_0 and its operands; the LUT's own registers and tables are
    read by decode_lut."""

    alu_operand: EwOperand | None  # None: ALU bypassed
    alu_algo: AluOp
    mul_operand: EwOperand | None  # None: MUL bypassed
    mul_prelu: bool
    truncate: int  # D_DP_EW_TRUNCATE_VALUE: the multiplier's rounding right shift
    lut: bool


@dataclass(frozen=True)
class SdpOp:
    """SDP registers for one pass: cube, source (memory or flying from CACC), stages and the convertor."""

    width: int
    height: int
    channels: int
    flying: bool
    src: Surface | None
    dst: Surface | None  # None when the output goes to PDP
    to_pdp: bool
    proc_precision: Precision
    out_precision: Precision
    in_precision: Precision
    x1: SdpStageCfg | None
    x2: SdpStageCfg | None
    ew_enabled: bool
    lut_enabled: bool
    cvt_offset: int
    cvt_scale: int
    cvt_shift: int
    operand_streams: tuple[SdpStream, ...] = ()
    ew: SdpEwCfg | None = None  # the Y stage's numbers (rows recorded before they were decoded: None)
    src_memory: Memory = Memory.DRAM  # SDP_RDMA.D_SRC_DMA_CFG_0.RAM_TYPE (offline passes)
    dst_memory: Memory = Memory.DRAM  # SDP.D_DST_DMA_CFG_0.RAM_TYPE


@dataclass(frozen=True)
class CbufReuse:
    """What a convolution keeps in and takes from CBUF across hardware layers (CDMA and CSC D_MISC_CFG):
    DATA_REUSE / WEIGHT_REUSE use the input / weights the previous layer left there, which it kept by
    SKIP_DATA_RLS / SKIP_WEIGHT_RLS instead of releasing them at its end."""

    data_reuse: bool = False
    weight_reuse: bool = False
    skip_data_rls: bool = False
    skip_weight_rls: bool = False

    FIELDS = ("DATA_REUSE", "WEIGHT_REUSE", "SKIP_DATA_RLS", "SKIP_WEIGHT_RLS")

    def registers(self) -> dict[str, int]:
        return dict(zip(self.FIELDS, (int(v) for v in dataclasses.astuple(self)), strict=True))


@dataclass(frozen=True)
class ConvOp:
    """Direct-convolution registers (CDMA / CSC / CACC) with the fused SDP (and PDP) pass."""

    shape: ConvShape
    precision: Precision
    pixel_input: bool
    data_banks: int
    weight_banks: int
    entries_per_slice: int
    fetch_grain: int
    weight_bytes: int
    compressed_weights: bool
    data: Surface
    weight_addr: int
    pad_value: int
    clip_truncate: int
    out: Surface
    sdp: SdpOp
    pdp: PdpOp | None = None
    batches: int = 1
    reuse: CbufReuse = CbufReuse()
    data_memory: Memory = Memory.DRAM  # CDMA.D_DAIN_RAM_TYPE_0
    weight_memory: Memory = Memory.DRAM  # CDMA.D_WEIGHT_RAM_TYPE_0


@dataclass(frozen=True)
class PdpOp:
    """PDP registers: pooling window, padding values, split mode, source and destination."""

    in_w: int
    in_h: int
    channels: int
    out_w: int
    out_h: int
    method: PoolMode
    kernel_w: int
    kernel_h: int
    stride_x: int
    stride_y: int
    pad_left: int
    pad_right: int
    pad_top: int
    pad_bottom: int
    pad_values: tuple[int, ...]
    recip_w: int
    recip_h: int
    split_num: int
    partial_in: tuple[int, int, int]  # first, mid, last input widths (split mode)
    partial_out: tuple[int, int, int]
    flying: bool
    src: Surface | None
    dst: Surface
    precision: Precision
    src_memory: Memory = Memory.DRAM  # PDP_RDMA.D_SRC_RAM_CFG_0.RAM_TYPE
    dst_memory: Memory = Memory.DRAM  # PDP.D_DST_RAM_CFG_0.RAM_TYPE


@dataclass(frozen=True)
class CdpOp:
    """CDP (local response normalisation across channels) registers."""

    width: int
    height: int
    channels: int
    normalz_len: int  # 3, 5, 7 or 9
    sqsum_bypass: bool
    mul_bypass: bool
    datin_offset: int
    datin_scale: int
    datin_shift: int
    datout_offset: int
    datout_scale: int
    datout_shift: int
    src: Surface
    dst: Surface
    precision: Precision


Operation = ConvOp | SdpOp | PdpOp | CdpOp


@dataclass
class Decoded:
    operations: list[Operation]
    unknown: list[str] = field(default_factory=list)  # "UNIT.REG" written but not understood
    enables: list[str] = field(default_factory=list)  # units enabled, in order


# ---- register file ---------------------------------------------------------------------------------


class _Regs:
    def __init__(self, unit: str, values: dict[str, int]) -> None:
        self.unit, self.values = unit, values

    def f(self, reg: str, name: str) -> int:
        return get_field(self.values.get(reg, 0), self.unit, reg, name)

    def written(self, reg: str) -> bool:
        return reg in self.values

    def addr(self, low: str, high: str | None = None) -> int:
        lo = self.values.get(low, 0)
        hi = self.values.get(high, 0) if high else 0
        return (hi << 32) | lo


def decode_program(prog: Program) -> Decoded:
    """Decode every operation of `prog`, in the order they were enabled: register snapshots at each unit's
    op-enable write, from the register group its S_POINTER selects. A unit enabled again starts the next
    hardware layer (a program of several layers alternates the two ping-pong groups)."""
    state: dict[tuple[str, int], dict[str, int]] = {}
    group: dict[str, int] = {}
    layers: list[dict[str, dict[str, int]]] = [{}]
    unknown: list[str] = []
    enables: list[str] = []
    for c in prog.commands:
        if not isinstance(c, RegWrite):
            continue
        if not is_known(c.unit, c.reg):
            name = f"{c.unit}.{c.reg}"
            if name not in unknown:
                unknown.append(name)
        if c.reg == "S_POINTER_0":
            group[c.unit] = c.value & 1  # PRODUCER: the group CSB writes go to
            continue
        regs = state.setdefault((c.unit, group.get(c.unit, 0)), {})
        regs[c.reg] = c.value
        if c.reg == "D_OP_ENABLE_0" and c.value & 1:
            if c.unit in layers[-1]:
                layers.append({})
            layers[-1][c.unit] = dict(regs)
            enables.append(c.unit)
    if not enables:
        raise TraceError(f"{prog.name}: the program enables no unit (no D_OP_ENABLE write of 1)")
    ops: list[Operation] = []
    for snap in layers:
        enabled = set(snap)
        for (unit, _), regs in state.items():  # units never enabled still feed their neighbours (SDP_RDMA off)
            snap.setdefault(unit, dict(regs))
        ops += _operations(prog.name, snap, enabled)
    return Decoded(ops, unknown, enables)


def _regs(snap: dict[str, dict[str, int]], unit: str) -> _Regs:
    return _Regs(unit, snap.get(unit, {}))


def _operations(name: str, snap: dict[str, dict[str, int]], enabled: set[str]) -> list[Operation]:
    ops: list[Operation] = []
    if "NVDLA_CDMA" in enabled:
        ops.append(_conv(name, snap))
    elif "NVDLA_SDP" in enabled:
        sdp = _sdp(name, snap, flying=False)
        ops.append(sdp)
        if sdp.to_pdp:
            ops.append(_pdp(name, snap, flying=True))
    if "NVDLA_PDP" in enabled and _regs(snap, "NVDLA_PDP").f("D_OPERATION_MODE_CFG_0", "OFF_FLYING"):
        ops.append(_pdp(name, snap, flying=False))
    if "NVDLA_CDP" in enabled:
        ops.append(_cdp(name, snap))
    if not ops:
        raise TraceError(f"{name}: enabled units {sorted(enabled)} form no operation the model knows")
    return ops


def _precision(code: int, what: str) -> Precision:
    try:
        return _PRECISIONS[code]
    except KeyError:
        raise TraceError(f"{what} = {code} is not a precision (0 INT8, 1 INT16, 2 FP16)") from None


def _conv(name: str, snap: dict[str, dict[str, int]]) -> ConvOp:
    cdma, csc, cacc = (_regs(snap, u) for u in ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CACC"))
    if cdma.f("D_MISC_CFG_0", "CONV_MODE"):
        raise TraceError(f"{name}: Winograd convolution (CDMA.D_MISC_CFG_0.CONV_MODE=1) is not modelled")
    prec = _precision(cdma.f("D_MISC_CFG_0", "PROC_PRECISION"), "CDMA.D_MISC_CFG_0.PROC_PRECISION")
    in_w = cdma.f("D_DATAIN_SIZE_0_0", "WIDTH") + 1
    in_h = cdma.f("D_DATAIN_SIZE_0_0", "HEIGHT") + 1
    in_c = cdma.f("D_DATAIN_SIZE_1_0", "CHANNEL") + 1
    kw = csc.f("D_WEIGHT_SIZE_EXT_0_0", "WIDTH") + 1
    kh = csc.f("D_WEIGHT_SIZE_EXT_0_0", "HEIGHT") + 1
    k = csc.f("D_WEIGHT_SIZE_EXT_1_0", "KERNEL") + 1
    pad = "D_ZERO_PADDING_0"
    shape = ConvShape(
        in_w=in_w,
        in_h=in_h,
        in_c=in_c,
        out_k=k,
        kernel_w=kw,
        kernel_h=kh,
        stride_x=cdma.f("D_CONV_STRIDE_0", "X") + 1,
        stride_y=cdma.f("D_CONV_STRIDE_0", "Y") + 1,
        pad_left=cdma.f(pad, "LEFT"),
        pad_right=cdma.f(pad, "RIGHT"),
        pad_top=cdma.f(pad, "TOP"),
        pad_bottom=cdma.f(pad, "BOTTOM"),
        dilation_x=csc.f("D_DILATION_EXT_0", "X") + 1,
        dilation_y=csc.f("D_DILATION_EXT_0", "Y") + 1,
    )
    ow = csc.f("D_DATAOUT_SIZE_0_0", "WIDTH") + 1
    oh = csc.f("D_DATAOUT_SIZE_0_0", "HEIGHT") + 1
    if (ow, oh) != (shape.out_w, shape.out_h):
        raise TraceError(
            f"{name}: CSC.D_DATAOUT_SIZE_0 says {ow}x{oh} but the input, kernel, stride and padding give "
            f"{shape.out_w}x{shape.out_h}"
        )
    sdp = _sdp(name, snap, flying=True)
    pdp = _pdp(name, snap, flying=True) if sdp.to_pdp else None
    return ConvOp(
        shape=shape,
        precision=prec,
        pixel_input=bool(cdma.f("D_DATAIN_FORMAT_0", "DATAIN_FORMAT")),
        data_banks=cdma.f("D_BANK_0", "DATA_BANK") + 1,
        weight_banks=cdma.f("D_BANK_0", "WEIGHT_BANK") + 1,
        entries_per_slice=cdma.f("D_ENTRY_PER_SLICE_0", "ENTRIES") + 1,
        fetch_grain=cdma.f("D_FETCH_GRAIN_0", "GRAINS") + 1,
        weight_bytes=cdma.f("D_WEIGHT_BYTES_0", "BYTES"),
        compressed_weights=bool(cdma.f("D_WEIGHT_FORMAT_0", "COMPRESSED")),
        data=Surface(
            cdma.addr("D_DAIN_ADDR_LOW_0_0", "D_DAIN_ADDR_HIGH_0_0"),
            cdma.f("D_LINE_STRIDE_0", "STRIDE"),
            cdma.f("D_SURF_STRIDE_0", "STRIDE"),
        ),
        weight_addr=cdma.addr("D_WEIGHT_ADDR_LOW_0", "D_WEIGHT_ADDR_HIGH_0"),
        pad_value=cdma.f("D_ZERO_PADDING_VALUE_0", "VALUE"),
        clip_truncate=cacc.f("D_CLIP_CFG_0", "TRUNCATE"),
        out=Surface(
            cacc.f("D_DATAOUT_ADDR_0", "ADDR"), cacc.f("D_LINE_STRIDE_0", "STRIDE"), cacc.f("D_SURF_STRIDE_0", "STRIDE")
        ),
        sdp=sdp,
        pdp=pdp,
        batches=cdma.f("D_BATCH_NUMBER_0", "BATCHES") + 1,
        reuse=_reuse(name, cdma, csc),
        data_memory=_ram(cdma, "D_DAIN_RAM_TYPE_0"),
        weight_memory=_ram(cdma, "D_WEIGHT_RAM_TYPE_0"),
    )


def _ram(regs: _Regs, reg: str) -> Memory:
    """A DMA's RAM_TYPE: 1 the memory controller (primary MEMIF, DRAM), 0 the CV SRAM (secondary MEMIF);
    a program that never writes it reads the primary memory, as every nv_small test does."""
    return Memory.SRAM if regs.written(reg) and regs.f(reg, "RAM_TYPE") == 0 else Memory.DRAM


def _reuse(name: str, cdma: _Regs, csc: _Regs) -> CbufReuse:
    """The CBUF reuse bits, which CDMA (fetch) and CSC (sequencing) must agree on."""
    flags = [bool(cdma.f("D_MISC_CFG_0", f)) for f in CbufReuse.FIELDS]
    for f, v in zip(CbufReuse.FIELDS, flags, strict=True):
        if bool(csc.f("D_MISC_CFG_0", f)) != v:
            raise TraceError(f"{name}: CDMA.D_MISC_CFG_0.{f}={int(v)} but CSC's is {int(not v)}; they must be equal")
    return CbufReuse(*flags)


def _stage(sdp: _Regs, rdma: _Regs, tag: str, rdma_tag: str) -> SdpStageCfg | None:
    cfg = f"D_DP_{tag}_CFG_0"
    if sdp.f(cfg, "BYPASS"):
        return None
    rdma_cfg = f"D_{rdma_tag}RDMA_CFG_0"
    stream_mode = OperandMode.PER_ELEMENT if rdma.f(rdma_cfg, "DATA_MODE") else OperandMode.PER_KERNEL
    stream_size = 2 if rdma.f(rdma_cfg, "DATA_SIZE") else 1

    def operand(kind: str) -> SdpOperand:
        c = f"D_DP_{tag}_{kind}_CFG_0"
        v = f"D_DP_{tag}_{kind}_SRC_VALUE_0"
        if not sdp.f(c, "SRC"):  # a register operand: one 16-bit value for the whole layer
            value = signed(sdp.f(v, "OPERAND"), 16)
            return SdpOperand(OperandSource.REG, value, sdp.f(c, "SHIFT"), OperandMode.PER_KERNEL, 2)
        return SdpOperand(
            OperandSource.MEM, signed(sdp.f(v, "OPERAND"), 16), sdp.f(c, "SHIFT"), stream_mode, stream_size
        )

    algo = _ALU_ALGO.get(sdp.f(cfg, "ALU_ALGO"), AluOp.ADD)
    return SdpStageCfg(
        alu=None if sdp.f(cfg, "ALU_BYPASS") else operand("ALU"),
        alu_algo=algo,
        mul=None if sdp.f(cfg, "MUL_BYPASS") else operand("MUL"),
        prelu=bool(sdp.f(cfg, "MUL_PRELU")),
        relu=not sdp.f(cfg, "RELU_BYPASS"),
        mul_shift=sdp.f(f"D_DP_{tag}_MUL_CFG_0", "SHIFT"),
    )


def _ew(sdp: _Regs) -> SdpEwCfg | None:
    cfg = "D_DP_EW_CFG_0"
    if sdp.f(cfg, "BYPASS"):
        return None

    def operand(kind: str) -> EwOperand:
        c = f"D_DP_EW_{kind}_CFG_0"
        return EwOperand(
            source=OperandSource.MEM if sdp.f(c, "SRC") else OperandSource.REG,
            value=signed(sdp.f(f"D_DP_EW_{kind}_SRC_VALUE_0", "OPERAND"), 32),
            cvt_bypass=bool(sdp.f(c, "CVT_BYPASS")),
            cvt_offset=signed(sdp.f(f"D_DP_EW_{kind}_CVT_OFFSET_VALUE_0", "OFFSET"), 32),
            cvt_scale=signed(sdp.f(f"D_DP_EW_{kind}_CVT_SCALE_VALUE_0", "SCALE"), 16),
            cvt_truncate=sdp.f(f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE_0", "TRUNCATE"),
        )

    return SdpEwCfg(
        alu_operand=None if sdp.f(cfg, "ALU_BYPASS") else operand("ALU"),
        alu_algo=_EW_ALU_ALGO[sdp.f(cfg, "ALU_ALGO")],
        mul_operand=None if sdp.f(cfg, "MUL_BYPASS") else operand("MUL"),
        mul_prelu=bool(sdp.f(cfg, "MUL_PRELU")),
        truncate=sdp.f("D_DP_EW_TRUNCATE_VALUE_0", "TRUNCATE"),
        lut=not sdp.f(cfg, "LUT_BYPASS"),
    )


def _sdp(name: str, snap: dict[str, dict[str, int]], *, flying: bool) -> SdpOp:
    sdp, rdma = _regs(snap, "NVDLA_SDP"), _regs(snap, "NVDLA_SDP_RDMA")
    if bool(sdp.f("D_FEATURE_MODE_CFG_0", "FLYING_MODE")) != flying:
        where = "from CACC (on the fly)" if flying else "from memory"
        raise TraceError(
            f"{name}: SDP.D_FEATURE_MODE_CFG_0.FLYING_MODE disagrees with the enabled units (input {where})"
        )
    if sdp.f("D_FEATURE_MODE_CFG_0", "WINOGRAD"):
        raise TraceError(f"{name}: SDP Winograd output (SDP.D_FEATURE_MODE_CFG_0.WINOGRAD=1) is not modelled")
    to_pdp = bool(sdp.f("D_FEATURE_MODE_CFG_0", "OUTPUT_DST"))
    x1 = _stage(sdp, rdma, "BS", "B")
    x2 = _stage(sdp, rdma, "BN", "N")
    ew = _ew(sdp)
    ew_enabled = ew is not None
    used = {
        "B": x1 is not None and any(o is not None and o.source is OperandSource.MEM for o in (x1.alu, x1.mul)),
        "N": x2 is not None and any(o is not None and o.source is OperandSource.MEM for o in (x2.alu, x2.mul)),
        # E-RDMA only where a Y operand comes from memory (a convolution whose SDP reads nothing from memory
        # leaves SDP_RDMA unwritten, so its DISABLE field reads 0: a LUT alone behind the sums of squares)
        "E": ew_enabled
        and any(o is not None and o.source is OperandSource.MEM for o in (ew.alu_operand, ew.mul_operand)),
    }
    streams = []
    for tag, regs in (("B", "BS"), ("N", "BN"), ("E", "EW")):  # B/N/E-RDMA and their base registers
        cfg = f"D_{tag}RDMA_CFG_0"
        if used[tag] and not rdma.f(cfg, "DISABLE"):
            streams.append(
                SdpStream(
                    rdma=Rdma(f"{tag.lower()}rdma"),
                    mode=OperandMode.PER_ELEMENT if rdma.f(cfg, "DATA_MODE") else OperandMode.PER_KERNEL,
                    size_bytes=2 if rdma.f(cfg, "DATA_SIZE") else 1,
                    addr=rdma.addr(f"D_{regs}_BASE_ADDR_LOW_0", f"D_{regs}_BASE_ADDR_HIGH_0"),
                    line_stride=rdma.f(f"D_{regs}_LINE_STRIDE_0", "STRIDE"),
                    surface_stride=rdma.f(f"D_{regs}_SURFACE_STRIDE_0", "STRIDE"),
                    use=_STREAM_USE.get(rdma.f(cfg, "DATA_USE"), OperandUse.ALU),
                )
            )
    proc_prec = _precision(sdp.f("D_DATA_FORMAT_0", "PROC_PRECISION"), "SDP.D_DATA_FORMAT_0.PROC_PRECISION")
    src = None
    in_prec = proc_prec  # on the fly, SDP takes CACC's output at its processing precision
    if not flying:
        src = _surface(rdma, "SRC")
        in_prec = _precision(
            rdma.f("D_FEATURE_MODE_CFG_0", "IN_PRECISION"), "SDP_RDMA.D_FEATURE_MODE_CFG_0.IN_PRECISION"
        )
    dst = None if to_pdp else _surface(sdp, "DST")
    return SdpOp(
        width=sdp.f("D_DATA_CUBE_WIDTH_0", "WIDTH") + 1,
        height=sdp.f("D_DATA_CUBE_HEIGHT_0", "HEIGHT") + 1,
        channels=sdp.f("D_DATA_CUBE_CHANNEL_0", "CHANNEL") + 1,
        flying=flying,
        src=src,
        dst=dst,
        to_pdp=to_pdp,
        proc_precision=proc_prec,
        out_precision=_precision(sdp.f("D_DATA_FORMAT_0", "OUT_PRECISION"), "SDP.D_DATA_FORMAT_0.OUT_PRECISION"),
        in_precision=in_prec,
        x1=x1,
        x2=x2,
        ew_enabled=ew_enabled,
        lut_enabled=ew_enabled and not sdp.f("D_DP_EW_CFG_0", "LUT_BYPASS"),
        cvt_offset=signed(sdp.f("D_CVT_OFFSET_0", "OFFSET"), 32),
        cvt_scale=signed(sdp.f("D_CVT_SCALE_0", "SCALE"), 16),
        cvt_shift=sdp.f("D_CVT_SHIFT_0", "SHIFT"),
        operand_streams=tuple(streams),
        ew=ew,
        src_memory=Memory.DRAM if flying else _ram(rdma, "D_SRC_DMA_CFG_0"),
        dst_memory=Memory.DRAM if to_pdp else _ram(sdp, "D_DST_DMA_CFG_0"),
    )


def _pdp(name: str, snap: dict[str, dict[str, int]], *, flying: bool) -> PdpOp:
    pdp, rdma = _regs(snap, "NVDLA_PDP"), _regs(snap, "NVDLA_PDP_RDMA")
    method = _POOL_METHOD.get(pdp.f("D_OPERATION_MODE_CFG_0", "METHOD"))
    if method is None:
        raise TraceError(f"{name}: PDP.D_OPERATION_MODE_CFG_0.POOLING_METHOD must be 0 (average), 1 (max) or 2 (min)")
    k = "D_POOLING_KERNEL_CFG_0"
    p = "D_POOLING_PADDING_CFG_0"
    piw, pow_ = "D_PARTIAL_WIDTH_IN_0", "D_PARTIAL_WIDTH_OUT_0"
    src = None
    if not flying:
        src = _surface(rdma, "SRC")
    return PdpOp(
        in_w=pdp.f("D_DATA_CUBE_IN_WIDTH_0", "WIDTH") + 1,
        in_h=pdp.f("D_DATA_CUBE_IN_HEIGHT_0", "HEIGHT") + 1,
        channels=pdp.f("D_DATA_CUBE_IN_CHANNEL_0", "CHANNEL") + 1,
        out_w=pdp.f("D_DATA_CUBE_OUT_WIDTH_0", "WIDTH") + 1,
        out_h=pdp.f("D_DATA_CUBE_OUT_HEIGHT_0", "HEIGHT") + 1,
        method=method,
        kernel_w=pdp.f(k, "KERNEL_WIDTH") + 1,
        kernel_h=pdp.f(k, "KERNEL_HEIGHT") + 1,
        stride_x=pdp.f(k, "STRIDE_WIDTH") + 1,
        stride_y=pdp.f(k, "STRIDE_HEIGHT") + 1,
        pad_left=pdp.f(p, "LEFT"),
        pad_right=pdp.f(p, "RIGHT"),
        pad_top=pdp.f(p, "TOP"),
        pad_bottom=pdp.f(p, "BOTTOM"),
        pad_values=tuple(pdp.f(f"D_POOLING_PADDING_VALUE_{i}_CFG_0", "VALUE") for i in range(1, 8)),
        recip_w=pdp.f("D_RECIP_KERNEL_WIDTH_0", "RECIP"),
        recip_h=pdp.f("D_RECIP_KERNEL_HEIGHT_0", "RECIP"),
        split_num=pdp.f("D_OPERATION_MODE_CFG_0", "SPLIT_NUM") + 1,
        partial_in=(pdp.f(piw, "FIRST"), pdp.f(piw, "MID"), pdp.f(piw, "LAST")),
        partial_out=(pdp.f(pow_, "FIRST"), pdp.f(pow_, "MID"), pdp.f(pow_, "LAST")),
        flying=flying,
        src=src,
        dst=_surface(pdp, "DST"),
        precision=_precision(pdp.f("D_DATA_FORMAT_0", "INPUT_DATA"), "PDP.D_DATA_FORMAT_0.INPUT_DATA"),
        src_memory=Memory.DRAM if flying else _ram(rdma, "D_SRC_RAM_CFG_0"),
        dst_memory=_ram(pdp, "D_DST_RAM_CFG_0"),
    )


def _cdp(name: str, snap: dict[str, dict[str, int]]) -> CdpOp:
    cdp, rdma = _regs(snap, "NVDLA_CDP"), _regs(snap, "NVDLA_CDP_RDMA")
    return CdpOp(
        width=rdma.f("D_DATA_CUBE_WIDTH_0", "WIDTH") + 1,
        height=rdma.f("D_DATA_CUBE_HEIGHT_0", "HEIGHT") + 1,
        channels=rdma.f("D_DATA_CUBE_CHANNEL_0", "CHANNEL") + 1,
        normalz_len=3 + 2 * cdp.f("D_LRN_CFG_0", "NORMALZ_LEN"),
        sqsum_bypass=bool(cdp.f("D_FUNC_BYPASS_0", "SQSUM_BYPASS")),
        mul_bypass=bool(cdp.f("D_FUNC_BYPASS_0", "MUL_BYPASS")),
        datin_offset=cdp.f("D_DATIN_OFFSET_0", "OFFSET"),
        datin_scale=cdp.f("D_DATIN_SCALE_0", "SCALE"),
        datin_shift=cdp.f("D_DATIN_SHIFTER_0", "SHIFT"),
        datout_offset=signed(cdp.f("D_DATOUT_OFFSET_0", "OFFSET"), 32),
        datout_scale=cdp.f("D_DATOUT_SCALE_0", "SCALE"),
        datout_shift=cdp.f("D_DATOUT_SHIFTER_0", "SHIFT"),
        src=_surface(rdma, "SRC"),
        dst=_surface(cdp, "DST"),
        precision=_precision(rdma.f("D_DATA_FORMAT_0", "INPUT_DATA"), "CDP_RDMA.D_DATA_FORMAT_0.INPUT_DATA"),
    )


# ---- descriptions (plain data) ---------------------------------------------------------------------

_KINDS: dict[str, type] = {"conv": ConvOp, "sdp": SdpOp, "pdp": PdpOp, "cdp": CdpOp}
_ENUM_FIELDS: dict[str, type[enum.Enum]] = {
    "source": OperandSource, "mode": OperandMode, "method": PoolMode,
    "data_memory": Memory, "weight_memory": Memory, "src_memory": Memory, "dst_memory": Memory,
}  # fmt: skip
_MEMORY_FIELDS = ("data_memory", "weight_memory", "src_memory", "dst_memory")
_NESTED: dict[str, type] = {
    "shape": ConvShape,
    "data": Surface,
    "out": Surface,
    "src": Surface,
    "dst": Surface,
    "sdp": SdpOp,
    "pdp": PdpOp,
    "x1": SdpStageCfg,
    "x2": SdpStageCfg,
    "alu": SdpOperand,
    "mul": SdpOperand,
    "ew": SdpEwCfg,
    "alu_operand": EwOperand,
    "mul_operand": EwOperand,
    "reuse": CbufReuse,
}


def describe(op: Operation) -> dict[str, Any]:
    """Plain JSON-able dict of an operation, tagged with its kind."""
    kind = next(k for k, cls in _KINDS.items() if isinstance(op, cls))
    d = {"kind": kind, **_plain(dataclasses.asdict(op))}
    if d.get("reuse") == _plain(dataclasses.asdict(CbufReuse())):
        del d["reuse"]  # no reuse, as in every row recorded before the reuse bits were decoded
    for sdp in (d, d.get("sdp")):  # an SDP pass, or one behind a convolution
        if isinstance(sdp, dict) and "ew" in sdp and sdp["ew"] is None:
            del sdp["ew"]  # Y bypassed, as in every row recorded before its registers were decoded
    for part in (d, d.get("sdp"), d.get("pdp")):  # the primary memory, as rows recorded before RAM_TYPE
        for key in _MEMORY_FIELDS:
            if isinstance(part, dict) and part.get(key) == Memory.DRAM.value:
                del part[key]
    return d


def _plain(v: Any) -> Any:
    if isinstance(v, AluOp):
        return _ALU_NAMES[v]
    if isinstance(v, enum.Enum):  # Precision and the register enums: their values are the stored names
        return v.value
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def from_description(d: dict[str, Any]) -> Operation:
    """Inverse of describe()."""
    d = dict(d)
    kind = d.pop("kind")
    if kind not in _KINDS:
        raise TraceError(f"unknown operation kind {kind!r}; known: {', '.join(_KINDS)}")
    return _build(_KINDS[kind], d)


def _build(cls: type, d: dict[str, Any]) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            continue
        v = d[f.name]
        if v is None:
            kwargs[f.name] = None
        elif f.name in _NESTED and isinstance(v, dict):
            kwargs[f.name] = _build(_NESTED[f.name], v)
        elif f.name.endswith("precision") or f.name == "precision":
            kwargs[f.name] = Precision(v)
        elif f.name == "alu_algo":
            if v not in _ALU_BY_NAME:
                raise TraceError(f"alu_algo {v!r} is not one of {', '.join(_ALU_BY_NAME)}")
            kwargs[f.name] = _ALU_BY_NAME[v]
        elif f.name in _ENUM_FIELDS:
            kwargs[f.name] = _ENUM_FIELDS[f.name](v)
        elif f.name == "operand_streams":
            kwargs[f.name] = tuple(_stream(x) for x in v)
        elif isinstance(v, list):
            kwargs[f.name] = tuple(tuple(x) if isinstance(x, list) else x for x in v)
        else:
            kwargs[f.name] = v
    return cls(**kwargs)


def _stream(v: dict | list) -> SdpStream:
    """An SdpStream from its description (a dict; older data rows store [rdma, mode, bytes, addr])."""
    d = dict(v) if isinstance(v, dict) else dict(zip(("rdma", "mode", "size_bytes", "addr"), v, strict=False))
    d["rdma"], d["mode"] = Rdma(d["rdma"]), OperandMode(d["mode"])
    if "use" in d:
        d["use"] = OperandUse(d["use"])
    return SdpStream(**d)


# ---- hardware layers for the timing model -----------------------------------------------------------


def sdp_spec(op: SdpOp) -> SdpSpec:
    """The timing view of an SDP pass (which sub-units and operand streams it uses)."""

    def mode(stage: SdpStageCfg | None, which: str) -> OperandMode:
        if stage is None:
            return OperandMode.NONE
        o = getattr(stage, which)
        if o is None:
            return OperandMode.NONE
        return OperandMode.REG if o.source is OperandSource.REG else o.mode

    bias = mode(op.x1, "alu")
    if bias is OperandMode.NONE:
        bias = mode(op.x1, "mul")
    scale = mode(op.x2, "mul")
    if scale is OperandMode.NONE:
        scale = mode(op.x2, "alu")
    streams = {s.rdma: s for s in op.operand_streams}
    # the E-RDMA stream only where a Y operand reads it (rows decoded before 2026-12-06 may list an unused one)
    from_memory = op.ew is None or any(  # (a row without the Y registers: its streams as recorded)
        o is not None and o.source is OperandSource.MEM for o in (op.ew.alu_operand, op.ew.mul_operand)
    )
    erdma = streams.get(Rdma.ERDMA) if op.ew_enabled and from_memory else None
    eltwise = erdma.mode if erdma is not None else OperandMode.REG if op.ew_enabled else OperandMode.NONE

    def pairs(s: SdpStream | None) -> bool:  # both components of a per-kernel stream: (ALU, MUL) pairs
        return s is not None and s.use is OperandUse.BOTH and s.mode is OperandMode.PER_KERNEL

    # a per-element stream narrower or wider than the data (INT16 statistics over INT8 data)
    sizes = {s.size_bytes for s in op.operand_streams if s.mode is OperandMode.PER_ELEMENT}
    operand = None
    if sizes and sizes != {op.in_precision.bytes}:
        operand = Precision.INT16 if max(sizes) == 2 else Precision.INT8
    return SdpSpec(
        bias=bias,
        bias_pairs=pairs(streams.get(Rdma.BRDMA)),
        scale=scale,
        relu=bool(op.x1 and op.x1.relu),
        eltwise=eltwise,
        eltwise_pairs=pairs(erdma),
        lut=op.lut_enabled,
        out_precision=op.out_precision,
        operand_precision=operand,
    )


def pool_spec(op: PdpOp) -> PoolSpec:
    return PoolSpec(
        mode=op.method,
        kernel_w=op.kernel_w,
        kernel_h=op.kernel_h,
        stride_x=op.stride_x,
        stride_y=op.stride_y,
        pad_left=op.pad_left,
        pad_right=op.pad_right,
        pad_top=op.pad_top,
        pad_bottom=op.pad_bottom,
    )


def _surface(regs: _Regs, which: str) -> Surface:
    """A stream unit's source or destination cube (`which`: SRC or DST): D_{which}_BASE_ADDR_LOW/HIGH,
    D_{which}_LINE_STRIDE and D_{which}_SURFACE_STRIDE, as SDP, PDP and CDP (and their RDMAs) name them."""
    return Surface(
        regs.addr(f"D_{which}_BASE_ADDR_LOW_0", f"D_{which}_BASE_ADDR_HIGH_0"),
        regs.f(f"D_{which}_LINE_STRIDE_0", "STRIDE"),
        regs.f(f"D_{which}_SURFACE_STRIDE_0", "STRIDE"),
    )


def hw_layer(op: Operation, name: str) -> ConvLayer | SdpLayer | PdpLayer:
    """The model's hardware layer for a decoded operation (CDP is handled by the CDP model)."""
    view = _HW_LAYER.get(type(op))
    if view is None:
        raise TraceError(f"{name}: no hardware-layer view for {type(op).__name__}")
    return view(op, name)


def _conv_layer(op: ConvOp, name: str) -> ConvLayer:
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


_HW_LAYER = {
    ConvOp: _conv_layer,
    SdpOp: lambda op, name: SdpLayer(
        name,
        op.width,
        op.height,
        op.channels,
        op.in_precision,
        sdp_spec(op),
        input_memory=op.src_memory,
        output_memory=op.dst_memory,
    ),
    PdpOp: lambda op, name: PdpLayer(
        name,
        op.in_w,
        op.in_h,
        op.channels,
        op.precision,
        pool_spec(op),
        input_memory=op.src_memory,
        output_memory=op.dst_memory,
    ),
}


# ---- LUT (CDP and SDP S_LUT_* registers) ----------------------------------------------------------


def decode_lut(prog: Program, unit: str = "NVDLA_CDP") -> LutParams:
    """The LUT a unit's first operation uses: the tables written through S_LUT_ACCESS_CFG / _DATA (the
    address auto-increments per data write) and the S_LUT_* registers, as they stand at its op enable."""
    tables = {0: [0] * LE_ENTRIES, 1: [0] * LO_ENTRIES}  # TABLE_ID 0 = LE (raw), 1 = LO (density)
    regs: dict[str, int] = {}
    addr = table = 0
    writing = False
    enabled = rewritten = False
    for c in prog.commands:
        if not isinstance(c, RegWrite) or c.unit != unit:
            continue
        if c.reg == "D_OP_ENABLE_0" and c.value & 1:
            if rewritten:
                raise TraceError(
                    f"{prog.name}:{c.line}: {unit}'s LUT is reprogrammed between two of its operations; one LUT "
                    "per program is modelled (split the program)"
                )
            enabled = True
            continue
        if enabled:
            rewritten = rewritten or c.reg.startswith("S_LUT_")
            continue
        regs[c.reg] = c.value
        if c.reg == "S_LUT_ACCESS_CFG_0":
            addr = get_field(c.value, unit, c.reg, "ADDR")
            table = get_field(c.value, unit, c.reg, "TABLE_ID")
            writing = bool(get_field(c.value, unit, c.reg, "ACCESS_TYPE"))
        elif c.reg == "S_LUT_ACCESS_DATA_0" and writing:
            if addr >= len(tables[table]):
                raise TraceError(f"{prog.name}:{c.line}: LUT write past the end of the {('LE', 'LO')[table]} table")
            tables[table][addr] = signed(get_field(c.value, unit, c.reg, "DATA"), 16)
            addr += 1
    r = _Regs(unit, regs)
    le_e, lo_e = np.array(tables[0], np.int64), np.array(tables[1], np.int64)

    sdp = unit == "NVDLA_SDP"

    def wide(name: str) -> int:
        if sdp:  # SDP: one 32-bit signed register (NVDLA_SDP.rdl S_LUT_LE_START; cmod yLutRegType)
            return signed(r.f(f"S_LUT_{name}_0", "VALUE"), 32)
        # CDP: 38-bit signed start/end, LOW[31:0] and HIGH[5:0]
        return signed((r.f(f"S_LUT_{name}_HIGH_0", "VALUE") << 32) | r.f(f"S_LUT_{name}_LOW_0", "VALUE"), 38)

    def slopes(t: str) -> dict[str, int]:
        sc, sh = f"S_LUT_{t}_SLOPE_SCALE_0", f"S_LUT_{t}_SLOPE_SHIFT_0"
        return {
            "uflow_scale": signed(r.f(sc, "UFLOW_SCALE"), 16),
            "oflow_scale": signed(r.f(sc, "OFLOW_SCALE"), 16),
            "uflow_shift": signed(r.f(sh, "UFLOW_SHIFT"), 5),  # sc_int<5> in cmod lookup_lut_int8
            "oflow_shift": signed(r.f(sh, "OFLOW_SHIFT"), 5),
        }

    info = "S_LUT_INFO_0"
    # index selects: 8-bit signed in SDP (cmod hls/sdp/sdp.h yLutRegIdxType), 6-bit in CDP's datapath
    bits = 8 if sdp else 6
    le_select = signed(r.f(info, "LE_INDEX_SELECT"), bits)
    lo_select = signed(r.f(info, "LO_INDEX_SELECT"), bits)
    if r.f("S_LUT_CFG_0", "LE_FUNCTION"):  # 1 = LINEAR
        le = LutTable(le_e, IndexMode.LINEAR, wide("LE_START"), le_select, **slopes("LE"), end=wide("LE_END"))
    else:
        offset = signed(r.f(info, "LE_INDEX_OFFSET"), 8)
        le = LutTable(le_e, IndexMode.EXPONENT, offset, 0, **slopes("LE"), origin=wide("LE_START"), end=wide("LE_END"))
    lo = LutTable(lo_e, IndexMode.LINEAR, wide("LO_START"), lo_select, **slopes("LO"), end=wide("LO_END"))
    prio = {0: Table.LE, 1: Table.LO}
    return LutParams(
        le=le,
        lo=lo,
        priority=prio[r.f("S_LUT_CFG_0", "HYBRID_PRIORITY")],
        uflow_priority=prio[r.f("S_LUT_CFG_0", "UFLOW_PRIORITY")],
        oflow_priority=prio[r.f("S_LUT_CFG_0", "OFLOW_PRIORITY")],
    )
