"""The convolution pipeline's registers (NVDLA_CDMA.rdl, NVDLA_CSC.rdl, NVDLA_CMAC_A/B.rdl, NVDLA_CACC.rdl):
a direct convolution, its CBUF split and reuse, and the SDP (and PDP) pass it feeds on the fly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import ConvShape, Memory
from nvdla_sim.precision import Precision
from nvdla_sim.processors.pdp.registers import PdpOp, decode_pdp
from nvdla_sim.processors.registers import (
    PRECISION_CODES,
    RAM_MC,
    RegisterWriter,
    Snapshots,
    UnitRegisters,
    precision_of,
)
from nvdla_sim.processors.sdp.registers import SdpOp, decode_sdp
from nvdla_sim.units.memory_format import Surface

# GLB.S_INTR_MASK as NVIDIA's convolution tests program it: the CDMA data/weight-done interrupts masked
INTR_MASK = 0x3F03FC


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

    # rows recorded before the reuse bits and RAM_TYPE were decoded lack them
    OMITTED_AT_DEFAULT = ("reuse", "data_memory", "weight_memory")

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


def decode_conv(name: str, snap: Snapshots) -> ConvOp:
    """A convolution from CDMA's, CSC's and CACC's registers, with the SDP (and PDP) pass it feeds on the fly."""
    cdma, csc, cacc = (UnitRegisters.of(snap, u) for u in ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CACC"))
    if cdma.f("D_MISC_CFG_0", "CONV_MODE"):
        raise TraceError(f"{name}: Winograd convolution (CDMA.D_MISC_CFG_0.CONV_MODE=1) is not modelled")
    prec = precision_of(cdma.f("D_MISC_CFG_0", "PROC_PRECISION"), "CDMA.D_MISC_CFG_0.PROC_PRECISION")
    cvt = (cdma.f("D_CVT_SCALE_0", "SCALE"), cdma.f("D_CVT_OFFSET_0", "OFFSET"), cdma.f("D_CVT_CFG_0", "TRUNCATE"))
    if cdma.f("D_CVT_CFG_0", "EN") and cvt != (1, 0, 0):  # NVIDIA's compiler enables it as the identity
        raise TraceError(
            f"{name}: CDMA's input conversion (D_CVT_CFG.EN with scale {cvt[0]}, offset {cvt[1]}, truncate "
            f"{cvt[2]}) is not modelled; only its identity (scale 1, offset 0, truncate 0) is"
        )
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
    sdp = decode_sdp(name, snap, flying=True)
    pdp = decode_pdp(name, snap, flying=True) if sdp.to_pdp else None
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
        data_memory=cdma.ram("D_DAIN_RAM_TYPE_0"),
        weight_memory=cdma.ram("D_WEIGHT_RAM_TYPE_0"),
    )


def _reuse(name: str, cdma: UnitRegisters, csc: UnitRegisters) -> CbufReuse:
    """The CBUF reuse bits, which CDMA (fetch) and CSC (sequencing) must agree on."""
    flags = [bool(cdma.f("D_MISC_CFG_0", f)) for f in CbufReuse.FIELDS]
    for f, v in zip(CbufReuse.FIELDS, flags, strict=True):
        if bool(csc.f("D_MISC_CFG_0", f)) != v:
            raise TraceError(f"{name}: CDMA.D_MISC_CFG_0.{f}={int(v)} but CSC's is {int(not v)}; they must be equal")
    return CbufReuse(*flags)


def write_conv(b: RegisterWriter, op: ConvOp, hw: HwConfig) -> None:
    s, p = op.shape, PRECISION_CODES[op.precision]
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
