"""Emit NVDLA register programs in NVIDIA's trace-test format: the inverse of regdecode.

An operation (ConvOp with its fused SDP and PDP, SdpOp, PdpOp, CdpOp) and the bytes of its inputs become
a trace test (`<name>.cfg` + `.dat` memory images) that NVIDIA's testbench, the reference runner
(validation/nvdla_rtl) and `nvdla simulate --trace-test` all read. The expected output CRC in its
`check_crc` line is the bit-exact model's (regexec), so running the program on the RTL checks the model.

Only registers with a meaning for the operation are written; the rest keep their reset values. The
register sequence follows NVIDIA's trace tests (hw@nv_small:verif/tests/trace_tests): pointers, the
layer registers, a CBUF flush poll before a convolution, then the op enables from the last unit of the
pipeline back to the first, and one interrupt wait per operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import ShapeError, TraceError
from nvdla_sim.files import write_text
from nvdla_sim.layers import ConvShape, OperandMode, PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.program.decode import (
    CbufReuse,
    CdpOp,
    ConvOp,
    EwOperand,
    OperandSource,
    OperandUse,
    Operation,
    PdpOp,
    Rdma,
    SdpEwCfg,
    SdpOp,
    SdpStageCfg,
    SdpStream,
)
from nvdla_sim.program.execute import execute, program_luts
from nvdla_sim.program.fields import pack
from nvdla_sim.program.trace_io import SparseMemory, crc32
from nvdla_sim.units import cbuf, cdma
from nvdla_sim.units.lut import IndexMode, LutParams, Table
from nvdla_sim.units.memory_format import Surface, cube_size
from nvdla_sim.units.pdp import recip
from nvdla_sim.units.sdp import AluOp

_PREC = {Precision.INT8: 0, Precision.INT16: 1, Precision.FP16: 2}
_ALGO = {AluOp.MAX: 0, AluOp.MIN: 1, AluOp.ADD: 2, AluOp.EQL: 3}  # D_DP_*_CFG.ALU_ALGO codes
_METHOD = {PoolMode.AVG: 0, PoolMode.MAX: 1, PoolMode.MIN: 2}
_USE = {OperandUse.MUL: 0, OperandUse.ALU: 1, OperandUse.BOTH: 2}
RAM_MC = 1  # RAM_TYPE: 1 = the memory controller interface (nv_small has no CV SRAM)
# GLB.S_INTR_MASK as NVIDIA's convolution tests program it: the CDMA data/weight-done interrupts masked
INTR_MASK = 0x3F03FC
RECORD_BYTES = 32  # bytes per `.dat` record


@dataclass
class TraceProgram:
    """A trace test ready to write: command lines and the memory images they load."""

    name: str
    lines: list[str] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    expected: list[tuple[int, int, int]] = field(default_factory=list)  # (base, size, model CRC)

    def write(self, folder: str | Path) -> Path:
        """Write `<folder>/<name>/<name>.cfg` and its `.dat` files; returns the test folder."""
        d = Path(folder) / self.name
        d.mkdir(parents=True, exist_ok=True)
        write_text(d / f"{self.name}.cfg", "\n".join(self.lines) + "\n")
        for fname, data in self.images.items():
            write_text(d / fname, _dat_text(data))
        return d


def _dat_text(data: bytes) -> str:
    rows = ["{"]
    for off in range(0, len(data), RECORD_BYTES):
        chunk = data[off : off + RECORD_BYTES]
        payload = " ".join(f"0x{b:02x}" for b in chunk)
        rows.append(f"{{offset:0x{off:x}, size:{len(chunk)}, payload:{payload}}},")
    rows.append("}")
    return "\n".join(rows) + "\n"


class _Builder:
    def __init__(self, prog: TraceProgram) -> None:
        self.prog = prog
        self.units: dict[str, None] = {}  # units written to, in order (for their S_POINTER)

    def line(self, text: str) -> None:
        self.prog.lines.append(text)

    def reg(self, unit: str, reg: str, **fields: int) -> None:
        self.units[unit] = None
        self.line(f"reg_write(NVDLA_{unit}.{reg}, 0x{pack('NVDLA_' + unit, reg, **fields):x});")

    def addr(self, unit: str, low: str, high: str, value: int) -> None:
        self.reg(unit, low, ADDR=value & 0xFFFFFFFF)
        self.reg(unit, high, ADDR=value >> 32)

    def surface(self, unit: str, side: str, surf: Surface) -> None:
        """D_<side>_BASE_ADDR_LOW/HIGH, D_<side>_LINE_STRIDE and D_<side>_SURFACE_STRIDE of a unit."""
        self.addr(unit, f"D_{side}_BASE_ADDR_LOW_0", f"D_{side}_BASE_ADDR_HIGH_0", surf.addr)
        self.reg(unit, f"D_{side}_LINE_STRIDE_0", STRIDE=surf.line_stride)
        self.reg(unit, f"D_{side}_SURFACE_STRIDE_0", STRIDE=surf.surface_stride)

    def cube(self, unit: str, w: int, h: int, c: int, suffix: str = "") -> None:
        """D_DATA_CUBE_<suffix>WIDTH/HEIGHT/CHANNEL (minus-one encoded)."""
        self.reg(unit, f"D_DATA_CUBE_{suffix}WIDTH_0", WIDTH=w - 1)
        self.reg(unit, f"D_DATA_CUBE_{suffix}HEIGHT_0", HEIGHT=h - 1)
        self.reg(unit, f"D_DATA_CUBE_{suffix}CHANNEL_0", CHANNEL=c - 1)


# ---- per-unit register blocks ------------------------------------------------------------------------


def _stage_regs(b: _Builder, tag: str, st: SdpStageCfg | None) -> None:
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


def _ew_regs(b: _Builder, ew: SdpEwCfg | None) -> None:
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


def _erdma_cfg(b: _Builder, op: SdpOp) -> None:
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


def _rdma_cfg(b: _Builder, op: SdpOp, tag: str, regs: str, stage: SdpStageCfg | None) -> None:
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


def _sdp_regs(b: _Builder, op: SdpOp) -> bool:
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
            IN_PRECISION=_PREC[op.in_precision],
            PROC_PRECISION=_PREC[op.proc_precision],
            OUT_PRECISION=_PREC[op.out_precision],
        )
    b.cube("SDP", op.width, op.height, op.channels)
    if op.dst is not None:
        b.surface("SDP", "DST", op.dst)
        b.reg("SDP", "D_DST_DMA_CFG_0", RAM_TYPE=RAM_MC)
    _stage_regs(b, "BS", op.x1)
    _stage_regs(b, "BN", op.x2)
    _ew_regs(b, op.ew)
    b.reg("SDP", "D_FEATURE_MODE_CFG_0", FLYING_MODE=int(op.flying), OUTPUT_DST=int(op.to_pdp))
    b.reg("SDP", "D_DATA_FORMAT_0", PROC_PRECISION=_PREC[op.proc_precision], OUT_PRECISION=_PREC[op.out_precision])
    b.reg("SDP", "D_CVT_OFFSET_0", OFFSET=op.cvt_offset & 0xFFFFFFFF)
    b.reg("SDP", "D_CVT_SCALE_0", SCALE=op.cvt_scale & 0xFFFF)
    b.reg("SDP", "D_CVT_SHIFT_0", SHIFT=op.cvt_shift)
    return uses_rdma


def _conv_regs(b: _Builder, op: ConvOp, hw: HwConfig) -> None:
    s, p = op.shape, _PREC[op.precision]
    if op.pixel_input or op.compressed_weights or op.batches != 1:
        raise TraceError("emitting image-input, compressed-weight or multi-batch convolutions is not supported")
    bpk = s.kernel_w * s.kernel_h * s.in_c * op.precision.bytes
    wbytes = op.weight_bytes
    atom = hw.memory.memory_atomic_bytes
    dpacked = (int(op.data.line_stride == s.in_w * atom), int(op.data.surface_stride == s.in_h * op.data.line_stride))
    for unit in ("CDMA", "CSC"):
        b.reg(unit, "D_MISC_CFG_0", CONV_MODE=0, IN_PRECISION=p, PROC_PRECISION=p, **op.reuse.registers())
        b.reg(unit, "D_DATAIN_FORMAT_0", DATAIN_FORMAT=0)
        b.reg(unit, "D_ENTRY_PER_SLICE_0", ENTRIES=op.entries_per_slice - 1)
        b.reg(unit, "D_WEIGHT_FORMAT_0", COMPRESSED=0)
        b.reg(unit, "D_WEIGHT_BYTES_0", BYTES=wbytes)
        b.reg(unit, "D_ZERO_PADDING_VALUE_0", VALUE=op.pad_value & 0xFFFF)
        b.reg(unit, "D_BANK_0", DATA_BANK=op.data_banks - 1, WEIGHT_BANK=op.weight_banks - 1)
    b.reg("CDMA", "D_DATAIN_SIZE_0_0", WIDTH=s.in_w - 1, HEIGHT=s.in_h - 1)
    b.reg("CDMA", "D_DATAIN_SIZE_1_0", CHANNEL=s.in_c - 1)
    b.reg("CDMA", "D_DATAIN_SIZE_EXT_0_0", WIDTH_EXT=s.in_w - 1, HEIGHT_EXT=s.in_h - 1)
    b.reg("CDMA", "D_DAIN_RAM_TYPE_0", RAM_TYPE=RAM_MC)
    b.addr("CDMA", "D_DAIN_ADDR_LOW_0_0", "D_DAIN_ADDR_HIGH_0_0", op.data.addr)
    b.reg("CDMA", "D_LINE_STRIDE_0", STRIDE=op.data.line_stride)
    b.reg("CDMA", "D_SURF_STRIDE_0", STRIDE=op.data.surface_stride)
    b.reg("CDMA", "D_DAIN_MAP_0", LINE_PACKED=dpacked[0], SURF_PACKED=dpacked[1])
    b.reg("CDMA", "D_FETCH_GRAIN_0", GRAINS=op.fetch_grain - 1)
    b.reg("CDMA", "D_WEIGHT_SIZE_0_0", BYTE_PER_KERNEL=bpk - 1)
    b.reg("CDMA", "D_WEIGHT_SIZE_1_0", KERNEL=s.out_k - 1)
    b.reg("CDMA", "D_WEIGHT_RAM_TYPE_0", RAM_TYPE=RAM_MC)
    b.addr("CDMA", "D_WEIGHT_ADDR_LOW_0", "D_WEIGHT_ADDR_HIGH_0", op.weight_addr)
    b.reg("CDMA", "D_CONV_STRIDE_0", X=s.stride_x - 1, Y=s.stride_y - 1)
    b.reg("CDMA", "D_ZERO_PADDING_0", LEFT=s.pad_left, RIGHT=s.pad_right, TOP=s.pad_top, BOTTOM=s.pad_bottom)
    b.reg("CSC", "D_DATAIN_SIZE_EXT_0_0", WIDTH=s.in_w - 1, HEIGHT=s.in_h - 1)
    b.reg("CSC", "D_DATAIN_SIZE_EXT_1_0", CHANNEL=s.in_c - 1)
    b.reg("CSC", "D_WEIGHT_SIZE_EXT_0_0", WIDTH=s.kernel_w - 1, HEIGHT=s.kernel_h - 1)
    b.reg("CSC", "D_WEIGHT_SIZE_EXT_1_0", CHANNEL=s.in_c - 1, KERNEL=s.out_k - 1)
    b.reg("CSC", "D_DATAOUT_SIZE_0_0", WIDTH=s.out_w - 1, HEIGHT=s.out_h - 1)
    b.reg("CSC", "D_DATAOUT_SIZE_1_0", CHANNEL=s.out_k - 1)
    b.reg("CSC", "D_ATOMICS_0", ATOMICS=s.out_w * s.out_h - 1)
    b.reg("CSC", "D_RELEASE_0", SLICES=s.in_h - 1)  # release every slice at the end of the layer
    b.reg("CSC", "D_CONV_STRIDE_EXT_0", X=s.stride_x - 1, Y=s.stride_y - 1)
    b.reg("CSC", "D_DILATION_EXT_0", X=s.dilation_x - 1, Y=s.dilation_y - 1)
    b.reg("CSC", "D_ZERO_PADDING_0", LEFT=s.pad_left, TOP=s.pad_top)
    for unit in ("CMAC_A", "CMAC_B", "CACC"):
        b.reg(unit, "D_MISC_CFG_0", CONV_MODE=0, PROC_PRECISION=p)
    out = op.out
    b.reg("CACC", "D_DATAOUT_SIZE_0_0", WIDTH=s.out_w - 1, HEIGHT=s.out_h - 1)
    b.reg("CACC", "D_DATAOUT_SIZE_1_0", CHANNEL=s.out_k - 1)
    b.reg("CACC", "D_DATAOUT_ADDR_0", ADDR=out.addr & 0xFFFFFFFF)
    b.reg("CACC", "D_LINE_STRIDE_0", STRIDE=out.line_stride)
    b.reg("CACC", "D_SURF_STRIDE_0", STRIDE=out.surface_stride)
    opacked = (int(out.line_stride == s.out_w * atom), int(out.surface_stride == s.out_h * out.line_stride))
    b.reg("CACC", "D_DATAOUT_MAP_0", LINE_PACKED=opacked[0], SURF_PACKED=opacked[1])
    b.reg("CACC", "D_CLIP_CFG_0", TRUNCATE=op.clip_truncate)


def _pdp_regs(b: _Builder, op: PdpOp) -> None:
    p = _PREC[op.precision]
    if not op.flying:
        b.cube("PDP_RDMA", op.in_w, op.in_h, op.channels, suffix="IN_")
        b.reg("PDP_RDMA", "D_FLYING_MODE_0", OFF_FLYING=1)
        b.surface("PDP_RDMA", "SRC", op.src)
        b.reg("PDP_RDMA", "D_SRC_RAM_CFG_0", RAM_TYPE=RAM_MC)
        b.reg("PDP_RDMA", "D_DATA_FORMAT_0", INPUT_DATA=p)
        b.reg("PDP_RDMA", "D_OPERATION_MODE_CFG_0", SPLIT_NUM=op.split_num - 1)
        b.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG_0", KERNEL_WIDTH=op.kernel_w - 1, STRIDE_WIDTH=op.stride_x - 1)
        b.reg("PDP_RDMA", "D_POOLING_PADDING_CFG_0", PAD_WIDTH=op.pad_left)
        first, mid, last = op.partial_in
        b.reg("PDP_RDMA", "D_PARTIAL_WIDTH_IN_0", FIRST=first, MID=mid, LAST=last)
        b.surface("PDP", "SRC", op.src)
    b.cube("PDP", op.in_w, op.in_h, op.channels, suffix="IN_")
    b.reg("PDP", "D_DATA_CUBE_OUT_WIDTH_0", WIDTH=op.out_w - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT_0", HEIGHT=op.out_h - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL_0", CHANNEL=op.channels - 1)
    b.reg(
        "PDP",
        "D_OPERATION_MODE_CFG_0",
        METHOD=_METHOD[op.method],
        OFF_FLYING=int(not op.flying),
        SPLIT_NUM=op.split_num - 1,
    )
    first, mid, last = op.partial_in
    b.reg("PDP", "D_PARTIAL_WIDTH_IN_0", FIRST=first, MID=mid, LAST=last)
    first, mid, last = op.partial_out
    b.reg("PDP", "D_PARTIAL_WIDTH_OUT_0", FIRST=first, MID=mid, LAST=last)
    b.reg(
        "PDP",
        "D_POOLING_KERNEL_CFG_0",
        KERNEL_WIDTH=op.kernel_w - 1,
        KERNEL_HEIGHT=op.kernel_h - 1,
        STRIDE_WIDTH=op.stride_x - 1,
        STRIDE_HEIGHT=op.stride_y - 1,
    )
    b.reg("PDP", "D_RECIP_KERNEL_WIDTH_0", RECIP=op.recip_w)
    b.reg("PDP", "D_RECIP_KERNEL_HEIGHT_0", RECIP=op.recip_h)
    b.reg("PDP", "D_POOLING_PADDING_CFG_0", LEFT=op.pad_left, TOP=op.pad_top, RIGHT=op.pad_right, BOTTOM=op.pad_bottom)
    for i, v in enumerate(op.pad_values, 1):
        b.reg("PDP", f"D_POOLING_PADDING_VALUE_{i}_CFG_0", VALUE=v & 0x7FFFF)
    b.surface("PDP", "DST", op.dst)
    b.reg("PDP", "D_DST_RAM_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("PDP", "D_DATA_FORMAT_0", INPUT_DATA=p)


def _lut_regs(b: _Builder, unit: str, lut: LutParams) -> None:
    """S_LUT_*: the tables through the access port, then the index and flow registers (CDP or SDP)."""
    for table_id, t in ((1, lut.lo), (0, lut.le)):
        b.reg(unit, "S_LUT_ACCESS_CFG_0", ADDR=0, TABLE_ID=table_id, ACCESS_TYPE=1)
        for v in np.asarray(t.entries, np.int64):
            b.reg(unit, "S_LUT_ACCESS_DATA_0", DATA=int(v) & 0xFFFF)
    le, lo = lut.le, lut.lo
    prio = {Table.LE: 0, Table.LO: 1}
    b.reg(
        unit,
        "S_LUT_CFG_0",
        LE_FUNCTION=int(le.mode is IndexMode.LINEAR),
        UFLOW_PRIORITY=prio[lut.uflow_priority],
        OFLOW_PRIORITY=prio[lut.oflow_priority],
        HYBRID_PRIORITY=prio[lut.priority],
    )
    exponent = le.mode is IndexMode.EXPONENT
    sdp = unit == "SDP"
    select_mask = 0xFF if sdp else 0x3F  # 8-bit signed selects in SDP, 6 bits used by CDP
    b.reg(
        unit,
        "S_LUT_INFO_0",
        LE_INDEX_OFFSET=(le.start if exponent else 0) & 0xFF,
        LE_INDEX_SELECT=(0 if exponent else le.index_shift) & select_mask,
        LO_INDEX_SELECT=lo.index_shift & select_mask,
    )
    le_start = le.origin if exponent else le.start
    for name, v in (("LE_START", le_start), ("LE_END", le.last_x), ("LO_START", lo.start), ("LO_END", lo.last_x)):
        if sdp:
            if not -(1 << 31) <= v < (1 << 31):
                raise TraceError(f"SDP.S_LUT_{name}: {v} does not fit the 32-bit signed register")
            b.reg(unit, f"S_LUT_{name}_0", VALUE=v & 0xFFFFFFFF)
            continue
        if not -(1 << 37) <= v < (1 << 37):
            raise TraceError(f"CDP.S_LUT_{name}: {v} does not fit the 38-bit signed LOW/HIGH register pair")
        b.reg(unit, f"S_LUT_{name}_LOW_0", VALUE=v & 0xFFFFFFFF)
        b.reg(unit, f"S_LUT_{name}_HIGH_0", VALUE=(v >> 32) & 0x3F)
    for tag, t in (("LE", le), ("LO", lo)):
        b.reg(
            unit, f"S_LUT_{tag}_SLOPE_SCALE_0", UFLOW_SCALE=t.uflow_scale & 0xFFFF, OFLOW_SCALE=t.oflow_scale & 0xFFFF
        )
        b.reg(unit, f"S_LUT_{tag}_SLOPE_SHIFT_0", UFLOW_SHIFT=t.uflow_shift & 0x1F, OFLOW_SHIFT=t.oflow_shift & 0x1F)


def _cdp_regs(b: _Builder, op: CdpOp, lut: LutParams) -> None:
    p = _PREC[op.precision]
    _lut_regs(b, "CDP", lut)
    b.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH_0", WIDTH=op.width - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT_0", HEIGHT=op.height - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL_0", CHANNEL=op.channels - 1)
    b.surface("CDP_RDMA", "SRC", op.src)
    b.reg("CDP_RDMA", "D_SRC_DMA_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("CDP_RDMA", "D_DATA_FORMAT_0", INPUT_DATA=p)
    b.reg("CDP", "D_FUNC_BYPASS_0", SQSUM_BYPASS=int(op.sqsum_bypass), MUL_BYPASS=int(op.mul_bypass))
    b.surface("CDP", "DST", op.dst)
    b.reg("CDP", "D_DST_DMA_CFG_0", RAM_TYPE=RAM_MC)
    b.reg("CDP", "D_DATA_FORMAT_0", INPUT_DATA=p)
    b.reg("CDP", "D_LRN_CFG_0", NORMALZ_LEN=(op.normalz_len - 3) // 2)
    b.reg("CDP", "D_DATIN_OFFSET_0", OFFSET=op.datin_offset & 0xFFFF)
    b.reg("CDP", "D_DATIN_SCALE_0", SCALE=op.datin_scale & 0xFFFF)
    b.reg("CDP", "D_DATIN_SHIFTER_0", SHIFT=op.datin_shift)
    b.reg("CDP", "D_DATOUT_OFFSET_0", OFFSET=op.datout_offset & 0xFFFFFFFF)
    b.reg("CDP", "D_DATOUT_SCALE_0", SCALE=op.datout_scale & 0xFFFF)
    b.reg("CDP", "D_DATOUT_SHIFTER_0", SHIFT=op.datout_shift)


# ---- programs ----------------------------------------------------------------------------------------


def _emit_conv(b: _Builder, op: ConvOp, hw: HwConfig, lut: LutParams | None, name: str) -> tuple[list[str], str]:
    b.reg("GLB", "S_INTR_MASK_0", MASK=INTR_MASK)
    if op.sdp.lut_enabled:
        if lut is None:
            raise TraceError(f"{name}: an SDP pass through the LUT needs its tables (lut=)")
        _lut_regs(b, "SDP", lut)
    rdma = _sdp_regs(b, op.sdp)
    _conv_regs(b, op, hw)
    if op.pdp is not None:
        _pdp_regs(b, op.pdp)
    b.line("poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0, 0x1);")
    enables = (["PDP"] if op.pdp else []) + ["SDP"] + (["SDP_RDMA"] if rdma else [])
    return [*enables, "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"], "PDP_0" if op.pdp else "SDP_0"


def _emit_sdp(b: _Builder, op: SdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> tuple[list[str], str]:
    if op.lut_enabled:
        if lut is None:
            raise TraceError(f"{name}: an SDP pass through the LUT needs its tables (lut=)")
        _lut_regs(b, "SDP", lut)
    _sdp_regs(b, op)
    return ["SDP", "SDP_RDMA"], "SDP_0"


def _emit_pdp(b: _Builder, op: PdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> tuple[list[str], str]:
    _pdp_regs(b, op)
    return ["PDP", "PDP_RDMA"], "PDP_0"


def _emit_cdp(b: _Builder, op: CdpOp, hw: HwConfig, lut: LutParams | None, name: str) -> tuple[list[str], str]:
    if lut is None:
        raise TraceError(f"{name}: a CDP program needs its LUT")
    _cdp_regs(b, op, lut)
    return ["CDP_RDMA", "CDP"], "CDP_0"


# one register writer per operation kind: (units to enable, in order; the interrupt that ends it)
_EMIT = {ConvOp: _emit_conv, SdpOp: _emit_sdp, PdpOp: _emit_pdp, CdpOp: _emit_cdp}


@dataclass(frozen=True)
class Step:
    """One hardware layer of a program: its operation, the (address, bytes) images it reads and the
    (address, size) regions it writes."""

    op: Operation
    inputs: list[tuple[int, np.ndarray]]
    outputs: list[tuple[int, int]]


def emit_program(
    name: str,
    op: Operation,
    inputs: list[tuple[int, np.ndarray]],
    outputs: list[tuple[int, int]],
    hw: HwConfig,
    *,
    lut: LutParams | None = None,
) -> TraceProgram:
    """One hardware layer as a trace test. `inputs` are (address, bytes) memory images, `outputs` the
    (address, size) regions the layer writes: zeroed first, then checked against the model's CRC."""
    return emit_sequence(name, [Step(op, inputs, outputs)], hw, lut=lut)


def emit_sequence(
    name: str, steps: list[Step], hw: HwConfig, *, lut: LutParams | None = None, memory: SparseMemory | None = None
) -> TraceProgram:
    """Hardware layers in sequence, as a driver with ping-pong register groups runs them: layer i is
    programmed into register group i % 2 (S_POINTER of every unit it writes) and enabled while the
    previous one runs; from the third layer on, the driver first waits for the interrupt of the layer
    that last used the group (`intr_notify` before the writes: the RTL runner makes it a wait for the
    interrupt and a write clearing that done bit). The hardware orders the layers (CDMA waits for CBUF
    space, reuse takes what the previous layer left). Each layer's outputs are checked against the model's
    CRC at the end (the last two layers' interrupts), the model running the layers in order on one memory
    and one CBUF (execute), on `memory` when given (the caller reads what the layers wrote there)."""
    if not steps:
        raise TraceError(f"{name}: a program holds at least one hardware layer")
    prog = TraceProgram(name)
    b = _Builder(prog)
    b.line(f"// {name}: emitted by nvdla_sim.program.emit")
    mem = memory if memory is not None else SparseMemory()
    for i, (base, data) in enumerate(a for st in steps for a in st.inputs):
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        fname = f"{name}_in{i}.dat"
        prog.images[fname] = raw.tobytes()
        b.line(f"mem_init(pri_mem, 0x{base:x}, 0x{len(raw):x}, ALL_ZERO);")
        b.line(f'mem_load(pri_mem, 0x{base:x}, "{fname}");')
        mem.write(base, raw)
    for base, size in (o for st in steps for o in st.outputs):
        b.line(f"mem_init(pri_mem, 0x{base:x}, 0x{size:x}, ALL_ZERO);")
        mem.write(base, np.zeros(size, np.uint8))
    dones = []
    for i, st in enumerate(steps):
        group = i % 2
        if i >= 2:  # the group is free once the layer that last used it has ended
            b.line(f"intr_notify({dones[i - 2]}, sync_id_{i - 2});")
        first = len(prog.lines)
        b.units = {}
        enables, done = _EMIT[type(st.op)](b, st.op, hw, lut, name)
        if i:
            pointers = [f"reg_write(NVDLA_{u}.S_POINTER_0, 0x{group:x});" for u in b.units if u != "GLB"]
            prog.lines[first:first] = pointers
        for unit in enables:
            b.line(f"reg_write(NVDLA_{unit}.D_OP_ENABLE_0, 0x1);")
        dones.append(done[: done.rindex("_")] + f"_{group}")
    last = range(max(0, len(steps) - 2), len(steps))
    for i in last:
        b.line(f"intr_notify({dones[i]}, sync_id_{i});")
    execute([st.op for st in steps], mem, hw, name=name, luts=program_luts([st.op for st in steps], lut, name))
    for i, st in enumerate(steps):
        for base, size in st.outputs:
            crc = crc32(mem.read(base, size))
            prog.expected.append((base, size, crc))
            sync = i if i in last else last[-1]  # earlier layers' outputs are final by the last interrupt
            b.line(f"check_crc(sync_id_{sync}, 1, 0x{base:x}, 0x{size:x}, 0x{crc:08x});")
    return prog


def packed_surface(addr: int, w: int, h: int, p: Precision, hw: HwConfig) -> Surface:
    """A packed feature cube at `addr`: lines of w atoms, surfaces of h lines."""
    line = w * hw.memory.memory_atomic_bytes
    return Surface(addr, line, line * h)


def place(alloc: Alloc, w: int, h: int, c: int, p: Precision, hw: HwConfig) -> Surface:
    """A packed w x h x c feature cube at the allocator's next address (its bytes reserved)."""
    surf = packed_surface(alloc.take(0), w, h, p, hw)
    alloc.take(cube_size(surf, c, p, hw))
    return surf


# ---- building operations ----------------------------------------------------------------------------


@dataclass
class Alloc:
    """A bump allocator for memory regions, 256-byte aligned (the weight alignment of format.rst)."""

    next_addr: int = 0x80000000
    align: int = 0x100

    def take(self, size: int) -> int:
        addr = self.next_addr
        self.next_addr += -(-max(size, 1) // self.align) * self.align
        return addr


def sdp_pass(
    w: int,
    h: int,
    c: int,
    *,
    flying: bool,
    src: Surface | None = None,
    dst: Surface | None = None,
    to_pdp: bool = False,
    precision: Precision = Precision.INT8,
    out_precision: Precision | None = None,
    x1: SdpStageCfg | None = None,
    x2: SdpStageCfg | None = None,
    cvt: tuple[int, int, int] = (0, 1, 0),
    streams: tuple = (),
    ew: SdpEwCfg | None = None,
) -> SdpOp:
    """An SDP pass: on the fly behind a convolution (`flying`) or reading `src` from memory; `ew` the Y
    stage (None: bypassed)."""
    return SdpOp(
        width=w,
        height=h,
        channels=c,
        flying=flying,
        src=src,
        dst=None if to_pdp else dst,
        to_pdp=to_pdp,
        proc_precision=precision,
        out_precision=out_precision or precision,
        in_precision=precision,
        x1=x1,
        x2=x2,
        ew_enabled=ew is not None,
        lut_enabled=ew is not None and ew.lut,
        cvt_offset=cvt[0],
        cvt_scale=cvt[1],
        cvt_shift=cvt[2],
        operand_streams=tuple(streams),
        ew=ew,
    )


def pool_pass(
    w: int, h: int, c: int, spec: PoolSpec, src: Surface, dst: Surface, precision: Precision, pad_values: tuple
) -> PdpOp:
    """An offline PDP pass over a w x h x c cube with `spec`'s window; `pad_values` are the seven
    pre-multiplied padding registers (n = 1..7 padded elements), used by average pooling."""
    ow, oh = spec.out_size(w, h)
    method = spec.mode
    return PdpOp(
        w, h, c, ow, oh, method, spec.kernel_w, spec.kernel_h, spec.stride_x, spec.stride_y,
        spec.pad_left, spec.pad_right, spec.pad_top, spec.pad_bottom, tuple(pad_values),
        recip(spec.kernel_w), recip(spec.kernel_h), 1, (0, 0, 0), (0, 0, 0), False, src, dst, precision,
    )  # fmt: skip


def conv_layer(
    shape: ConvShape,
    precision: Precision,
    hw: HwConfig,
    alloc: Alloc,
    *,
    x1: SdpStageCfg | None = None,
    x2: SdpStageCfg | None = None,
    cvt: tuple[int, int, int] = (0, 1, 0),
    streams: tuple[SdpStream, ...] = (),
    ew: SdpEwCfg | None = None,
    clip: int = 0,
    pad_value: int = 0,
    data_banks: int | None = None,
    reuse: CbufReuse | None = None,
    weight_banks: int | None = None,
    out_precision: Precision | None = None,
) -> tuple[ConvOp, Surface, int, int]:
    """A direct convolution with packed input, weights and output placed by `alloc`, followed on the fly
    by SDP stages `x1`, `x2` (operands from `streams`) and the output convertor `cvt` (offset, scale,
    shift). Returns (op, input surface, weight address, output address); the CBUF split holds the whole
    input and at least one kernel group of weights (the programming guide's "full input, partial weight"
    mode: CDMA refills the weight ring as CSC releases kernel groups), or raises ShapeError naming what
    does not fit. `reuse` keeps or takes the input or weights in CBUF across hardware layers; kept or taken
    weights must all fit the weight banks. SDP writes the output at `out_precision` (None: the layer's)."""
    s = shape
    data = packed_surface(alloc.take(0), s.in_w, s.in_h, precision, hw)
    alloc.take(cube_size(data, s.in_c, precision, hw))
    bpk = s.kernel_w * s.kernel_h * s.in_c * precision.bytes
    wbytes = cdma.weight_bytes(s.out_k, bpk, hw)  # in whole CBUF entries (what CSC reads, cdma.weight_bytes)
    waddr = alloc.take(wbytes)
    written = out_precision or precision
    out = packed_surface(alloc.take(0), s.out_w, s.out_h, written, hw)
    alloc.take(cube_size(out, s.out_k, written, hw))
    eps = cbuf.entry_per_slice(s.in_w, s.in_c, precision, hw)
    need_d = cbuf.banks_for(eps * s.in_h, hw)
    # the weights stream through the weight ring ("full input, partial weight"): one kernel group must fit
    need_w = cbuf.banks_for(cbuf.weight_entries(min(s.out_k, hw.kernels_per_atomic(precision)), bpk, hw), hw)
    db = data_banks or need_d
    wb = weight_banks or hw.cbuf.bank_count - db
    if db < need_d or wb < need_w or db + wb > hw.cbuf.bank_count:
        raise ShapeError(
            f"convolution needs {need_d} CBUF banks for its input and {need_w} for a kernel group of its "
            f"weights; {hw.name} has {hw.cbuf.bank_count} (split the layer into bands of rows)"
        )
    reuse = reuse or CbufReuse()
    all_w = cbuf.banks_for(cbuf.weight_entries(s.out_k, bpk, hw), hw)
    if (reuse.weight_reuse or reuse.skip_weight_rls) and all_w > wb:
        raise ShapeError(f"weights kept in or reused from CBUF need {all_w} weight banks, not {wb}, on {hw.name}")
    sdp = sdp_pass(
        s.out_w,
        s.out_h,
        s.out_k,
        flying=True,
        dst=out,
        precision=precision,
        out_precision=written,
        x1=x1,
        x2=x2,
        cvt=cvt,
        streams=streams,
        ew=ew,
    )
    op = ConvOp(
        shape=s,
        precision=precision,
        pixel_input=False,
        data_banks=db,
        weight_banks=wb,
        entries_per_slice=eps,
        fetch_grain=1,
        weight_bytes=wbytes,
        compressed_weights=False,
        data=data,
        weight_addr=waddr,
        pad_value=pad_value & 0xFFFF,
        clip_truncate=clip,
        out=out,
        sdp=sdp,
        reuse=reuse,
    )
    return op, data, waddr, out.addr
