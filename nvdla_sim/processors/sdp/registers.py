"""SDP's registers (NVDLA_SDP.rdl, NVDLA_SDP_RDMA.rdl): a pass's cube, its source (memory, or CACC on the
fly), the X1 (BS) and X2 (BN) stages, the Y (EW) stage with its LUT, the output convertor and the B/N/E-RDMA
operand streams."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import Memory, OperandMode, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors.registers import (
    PRECISION_CODES,
    RAM_MC,
    RegisterWriter,
    Snapshots,
    UnitRegisters,
    precision_of,
)
from nvdla_sim.registers.fields import signed
from nvdla_sim.units.memory_format import Surface
from nvdla_sim.units.sdp import AluOp

_ALGO = {AluOp.MAX: 0, AluOp.MIN: 1, AluOp.ADD: 2, AluOp.EQL: 3}  # D_DP_*_CFG.ALU_ALGO codes


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


_STREAM_USE = {0: OperandUse.MUL, 1: OperandUse.ALU, 2: OperandUse.BOTH}  # DATA_USE (NVDLA_SDP_RDMA.rdl)
_USE = {use: code for code, use in _STREAM_USE.items()}
# X stages: code 3 (EQL) sums, as the X datapath has no comparator (cmod hls/sdp/sdp_x.cpp: MAX, MIN,
# else SUM); the Y stage compares (sdp_y_core.cpp SDP_ALU_MODE_EQL)
_ALU_ALGO = {0: AluOp.MAX, 1: AluOp.MIN, 2: AluOp.ADD, 3: AluOp.ADD}
_EW_ALU_ALGO = {0: AluOp.MAX, 1: AluOp.MIN, 2: AluOp.ADD, 3: AluOp.EQL}


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

    # rows recorded before the Y stage and RAM_TYPE were decoded lack them
    OMITTED_AT_DEFAULT = ("ew", "src_memory", "dst_memory")

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


def _stage(sdp: UnitRegisters, rdma: UnitRegisters, tag: str, rdma_tag: str) -> SdpStageCfg | None:
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


def _ew(sdp: UnitRegisters) -> SdpEwCfg | None:
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


def decode_sdp(name: str, snap: Snapshots, *, flying: bool) -> SdpOp:
    """An SDP pass from SDP's and SDP_RDMA's registers: on the fly behind a convolution, or from memory."""
    sdp, rdma = UnitRegisters.of(snap, "NVDLA_SDP"), UnitRegisters.of(snap, "NVDLA_SDP_RDMA")
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
    proc_prec = precision_of(sdp.f("D_DATA_FORMAT_0", "PROC_PRECISION"), "SDP.D_DATA_FORMAT_0.PROC_PRECISION")
    src = None
    in_prec = proc_prec  # on the fly, SDP takes CACC's output at its processing precision
    if not flying:
        src = rdma.surface("SRC")
        in_prec = precision_of(
            rdma.f("D_FEATURE_MODE_CFG_0", "IN_PRECISION"), "SDP_RDMA.D_FEATURE_MODE_CFG_0.IN_PRECISION"
        )
    dst = None if to_pdp else sdp.surface("DST")
    return SdpOp(
        width=sdp.f("D_DATA_CUBE_WIDTH_0", "WIDTH") + 1,
        height=sdp.f("D_DATA_CUBE_HEIGHT_0", "HEIGHT") + 1,
        channels=sdp.f("D_DATA_CUBE_CHANNEL_0", "CHANNEL") + 1,
        flying=flying,
        src=src,
        dst=dst,
        to_pdp=to_pdp,
        proc_precision=proc_prec,
        out_precision=precision_of(sdp.f("D_DATA_FORMAT_0", "OUT_PRECISION"), "SDP.D_DATA_FORMAT_0.OUT_PRECISION"),
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
        src_memory=Memory.DRAM if flying else rdma.ram("D_SRC_DMA_CFG_0"),
        dst_memory=Memory.DRAM if to_pdp else sdp.ram("D_DST_DMA_CFG_0"),
    )


def _stage_regs(b: RegisterWriter, tag: str, st: SdpStageCfg | None) -> None:
    if st is None:
        b.reg("SDP", f"D_DP_{tag}_CFG_0", BYPASS=1, ALU_BYPASS=1, MUL_BYPASS=1, RELU_BYPASS=1)
        return
    if st.alu_algo is AluOp.EQL:
        raise TraceError(f"SDP {tag} ALU: EQL is the EW (Y) stage's; the X stages have MAX, MIN and SUM")
    b.reg(
        "SDP",
        f"D_DP_{tag}_CFG_0",
        BYPASS=0,
        ALU_BYPASS=int(st.alu is None),
        ALU_ALGO=_ALGO[st.alu_algo],
        MUL_BYPASS=int(st.mul is None),
        MUL_PRELU=int(st.prelu),
        RELU_BYPASS=int(not st.relu),
    )
    alu, mul = st.alu, st.mul
    b.reg(
        "SDP",
        f"D_DP_{tag}_ALU_CFG_0",
        SRC=int(alu is not None and alu.source is OperandSource.MEM),
        SHIFT=alu.shift if alu else 0,
    )
    b.reg("SDP", f"D_DP_{tag}_ALU_SRC_VALUE_0", OPERAND=(alu.value if alu else 0) & 0xFFFF)
    b.reg(
        "SDP", f"D_DP_{tag}_MUL_CFG_0", SRC=int(mul is not None and mul.source is OperandSource.MEM), SHIFT=st.mul_shift
    )
    b.reg("SDP", f"D_DP_{tag}_MUL_SRC_VALUE_0", OPERAND=(mul.value if mul else 0) & 0xFFFF)


def _ew_regs(b: RegisterWriter, ew: SdpEwCfg | None) -> None:
    """D_DP_EW_*: the Y stage (NVDLA_SDP.rdl), bypassed when `ew` is None."""
    if ew is None:
        b.reg("SDP", "D_DP_EW_CFG_0", BYPASS=1, ALU_BYPASS=1, MUL_BYPASS=1, LUT_BYPASS=1)
        return
    b.reg(
        "SDP",
        "D_DP_EW_CFG_0",
        BYPASS=0,
        ALU_BYPASS=int(ew.alu_operand is None),
        ALU_ALGO=_ALGO[ew.alu_algo],
        MUL_BYPASS=int(ew.mul_operand is None),
        MUL_PRELU=int(ew.mul_prelu),
        LUT_BYPASS=int(not ew.lut),
    )
    for kind, o in (("ALU", ew.alu_operand), ("MUL", ew.mul_operand)):
        o = o or EwOperand(OperandSource.REG)
        b.reg("SDP", f"D_DP_EW_{kind}_CFG_0", SRC=int(o.source is OperandSource.MEM), CVT_BYPASS=int(o.cvt_bypass))
        b.reg("SDP", f"D_DP_EW_{kind}_SRC_VALUE_0", OPERAND=o.value & 0xFFFFFFFF)
        b.reg("SDP", f"D_DP_EW_{kind}_CVT_OFFSET_VALUE_0", OFFSET=o.cvt_offset & 0xFFFFFFFF)
        b.reg("SDP", f"D_DP_EW_{kind}_CVT_SCALE_VALUE_0", SCALE=o.cvt_scale & 0xFFFF)
        b.reg("SDP", f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE_0", TRUNCATE=o.cvt_truncate)
    b.reg("SDP", "D_DP_EW_TRUNCATE_VALUE_0", TRUNCATE=ew.truncate)


def _erdma_cfg(b: RegisterWriter, op: SdpOp) -> None:
    """E-RDMA: the Y stage's operand stream, disabled when no EW operand comes from memory."""
    stream = next((s for s in op.operand_streams if s.rdma is Rdma.ERDMA), None)
    b.reg(
        "SDP_RDMA",
        "D_ERDMA_CFG_0",
        DISABLE=int(stream is None),
        DATA_USE=_USE[stream.use if stream else OperandUse.ALU],
        DATA_SIZE=int(stream is not None and stream.size_bytes == 2),
        DATA_MODE=int(stream is not None and stream.mode is OperandMode.PER_ELEMENT),
        RAM_TYPE=RAM_MC,
    )
    if stream is not None:
        b.addr("SDP_RDMA", "D_EW_BASE_ADDR_LOW_0", "D_EW_BASE_ADDR_HIGH_0", stream.addr)
        b.reg("SDP_RDMA", "D_EW_LINE_STRIDE_0", STRIDE=stream.line_stride)
        b.reg("SDP_RDMA", "D_EW_SURFACE_STRIDE_0", STRIDE=stream.surface_stride)


def _rdma_cfg(b: RegisterWriter, op: SdpOp, tag: str, regs: str, stage: SdpStageCfg | None) -> None:
    stream = next((s for s in op.operand_streams if s.rdma.tag == tag), None)
    operand = None if stage is None else (stage.alu or stage.mul)
    mode = stream.mode if stream else (operand.mode if operand else OperandMode.PER_KERNEL)
    size = stream.size_bytes if stream else (operand.size_bytes if operand else 1)
    b.reg(
        "SDP_RDMA",
        f"D_{tag}RDMA_CFG_0",
        DISABLE=int(stream is None),
        DATA_USE=_USE[stream.use if stream else OperandUse.ALU],
        DATA_SIZE=int(size == 2),
        DATA_MODE=int(mode is OperandMode.PER_ELEMENT),
        RAM_TYPE=RAM_MC,
    )
    if stream is not None:
        b.addr("SDP_RDMA", f"D_{regs}_BASE_ADDR_LOW_0", f"D_{regs}_BASE_ADDR_HIGH_0", stream.addr)
        b.reg("SDP_RDMA", f"D_{regs}_LINE_STRIDE_0", STRIDE=stream.line_stride)
        b.reg("SDP_RDMA", f"D_{regs}_SURFACE_STRIDE_0", STRIDE=stream.surface_stride)


def write_sdp(b: RegisterWriter, op: SdpOp) -> bool:
    """SDP and, when it reads memory, SDP_RDMA registers. Returns whether SDP_RDMA is used."""
    if op.ew_enabled and op.ew is None:
        raise TraceError("an SDP pass with its Y stage enabled needs the stage's registers (SdpOp.ew)")
    uses_rdma = not op.flying or bool(op.operand_streams)
    if uses_rdma:
        b.cube("SDP_RDMA", op.width, op.height, op.channels)
        if op.src is not None:
            b.surface("SDP_RDMA", "SRC", op.src)
            b.reg("SDP_RDMA", "D_SRC_DMA_CFG_0", RAM_TYPE=RAM_MC)
        _rdma_cfg(b, op, "B", "BS", op.x1)
        _rdma_cfg(b, op, "N", "BN", op.x2)
        _erdma_cfg(b, op)
        b.reg(
            "SDP_RDMA",
            "D_FEATURE_MODE_CFG_0",
            FLYING_MODE=int(op.flying),
            IN_PRECISION=PRECISION_CODES[op.in_precision],
            PROC_PRECISION=PRECISION_CODES[op.proc_precision],
            OUT_PRECISION=PRECISION_CODES[op.out_precision],
        )
    b.cube("SDP", op.width, op.height, op.channels)
    if op.dst is not None:
        b.surface("SDP", "DST", op.dst)
        b.reg("SDP", "D_DST_DMA_CFG_0", RAM_TYPE=RAM_MC)
    _stage_regs(b, "BS", op.x1)
    _stage_regs(b, "BN", op.x2)
    _ew_regs(b, op.ew)
    b.reg("SDP", "D_FEATURE_MODE_CFG_0", FLYING_MODE=int(op.flying), OUTPUT_DST=int(op.to_pdp))
    b.reg(
        "SDP",
        "D_DATA_FORMAT_0",
        PROC_PRECISION=PRECISION_CODES[op.proc_precision],
        OUT_PRECISION=PRECISION_CODES[op.out_precision],
    )
    b.reg("SDP", "D_CVT_OFFSET_0", OFFSET=op.cvt_offset & 0xFFFFFFFF)
    b.reg("SDP", "D_CVT_SCALE_0", SCALE=op.cvt_scale & 0xFFFF)
    b.reg("SDP", "D_CVT_SHIFT_0", SHIFT=op.cvt_shift)
    return uses_rdma


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
