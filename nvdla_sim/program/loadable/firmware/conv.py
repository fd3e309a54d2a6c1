"""The firmware's convolution pipeline (nvdla/sw kmd/firmware conv.c): CDMA, CSC, CMAC_A/B and CACC
programmed together from one dla_conv_op_desc, enabled CACC first and CDMA last once CBUF is flushed."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import Event, OpType
from nvdla_sim.program.loadable.firmware.base import (
    FEATURE,
    WORD,
    Csb,
    FirmwareProcessor,
    Mask,
    MemoryLayout,
    Target,
    check,
    check_layout,
    masked,
    ram,
)
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation


def _program_conv(csb: Csb, net: DlaNetwork, mem: MemoryLayout, op: DlaOperation, atom: int) -> None:
    """conv.c processor_conv_program."""
    c, s = op.op, op.surface
    check(c.weight_format == 0, net, op, "compressed weights are not modelled")
    check(c.conv_mode == 0, net, op, "Winograd convolution is not modelled (conv_mode 1)")
    check(c.data_format == FEATURE, net, op, f"image input (data_format {c.data_format}) is not modelled")
    check(c.out_cvt.scale == 1 and c.out_cvt.offset == 0, net, op, "the firmware requires out_cvt scale 1, offset 0")
    weight = mem.cube(s.weight_data) if s.weight_data.address != -1 else 0
    dst = mem.cube(s.dst_data) if s.dst_data.address != -1 else 0
    src = mem.cube(s.src_data)
    src_fmt, dst = s.src_data, s.dst_data
    check_layout(net, op, src_fmt, c.in_precision, atom, "input")
    # CACC
    csb.fields("CACC", "D_MISC_CFG", CONV_MODE=c.conv_mode, PROC_PRECISION=c.out_precision)
    csb.fields("CACC", "D_DATAOUT_SIZE_0", WIDTH=dst.width - 1, HEIGHT=dst.height - 1)
    csb.fields("CACC", "D_DATAOUT_SIZE_1", CHANNEL=dst.channel - 1)
    csb.write("CACC", "D_DATAOUT_ADDR", mem.cube(dst) if dst.address != -1 else 0)
    csb.write("CACC", "D_BATCH_NUMBER", c.batch - 1)
    csb.write("CACC", "D_LINE_STRIDE", dst.line_stride)
    csb.write("CACC", "D_SURF_STRIDE", dst.surf_stride)
    packed = int(dst.width == 1 and dst.height == 1)
    if packed:
        check(dst.line_stride == dst.width * atom, net, op, "a 1x1 output's line stride must be one atom")
    csb.fields("CACC", "D_DATAOUT_MAP", LINE_PACKED=packed, SURF_PACKED=packed)
    csb.write("CACC", "D_CLIP_CFG", c.out_cvt.truncate)
    # CMAC
    for unit in ("CMAC_A", "CMAC_B"):
        csb.fields(unit, "D_MISC_CFG", CONV_MODE=c.conv_mode, PROC_PRECISION=c.out_precision)
    # CSC
    reuse = {
        "DATA_REUSE": c.data_reuse, "WEIGHT_REUSE": c.weight_reuse,
        "SKIP_DATA_RLS": c.skip_data_rls, "SKIP_WEIGHT_RLS": c.skip_weight_rls,
    }  # fmt: skip
    csb.fields("CSC", "D_MISC_CFG", CONV_MODE=c.conv_mode, IN_PRECISION=c.out_precision,
               PROC_PRECISION=c.out_precision, **reuse)  # fmt: skip
    csb.fields("CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT=0)
    csb.fields("CSC", "D_DATAIN_SIZE_EXT_0", WIDTH=c.input_width_csc - 1, HEIGHT=c.input_height_csc - 1)
    csb.fields("CSC", "D_DATAIN_SIZE_EXT_1", CHANNEL=c.input_channel_csc - 1)
    csb.fields("CSC", "D_BATCH_NUMBER", BATCHES=c.batch - 1)
    csb.fields("CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=c.post_extension)
    csb.fields("CSC", "D_ENTRY_PER_SLICE", ENTRIES=c.entry_per_slice - 1)
    csb.fields("CSC", "D_WEIGHT_FORMAT", COMPRESSED=c.weight_format)
    csb.fields("CSC", "D_WEIGHT_SIZE_EXT_0", WIDTH=c.kernel_width_csc - 1, HEIGHT=c.kernel_height_csc - 1)
    csb.fields("CSC", "D_WEIGHT_SIZE_EXT_1", CHANNEL=c.kernel_channel_csc - 1, KERNEL=dst.channel - 1)
    csb.write("CSC", "D_WEIGHT_BYTES", s.weight_data.size)
    csb.write("CSC", "D_WMB_BYTES", s.wmb_data.size)
    csb.fields("CSC", "D_DATAOUT_SIZE_0", WIDTH=c.input_width_cmac - 1, HEIGHT=c.input_height_cmac - 1)
    csb.fields("CSC", "D_DATAOUT_SIZE_1", CHANNEL=dst.channel - 1)
    csb.fields("CSC", "D_ATOMICS", ATOMICS=dst.width * dst.height - 1)
    csb.fields("CSC", "D_RELEASE", SLICES=c.release - 1)
    csb.fields("CSC", "D_CONV_STRIDE_EXT", X=c.conv_stride_x - 1, Y=c.conv_stride_y - 1)
    csb.fields("CSC", "D_DILATION_EXT", X=c.dilation_x - 1, Y=c.dilation_y - 1)
    csb.fields("CSC", "D_ZERO_PADDING", LEFT=c.pad_x_left, TOP=c.pad_y_top)
    csb.fields("CSC", "D_ZERO_PADDING_VALUE", VALUE=masked(c.pad_val, 16))
    csb.fields("CSC", "D_BANK", DATA_BANK=c.data_bank - 1, WEIGHT_BANK=c.weight_bank - 1)
    csb.write("CSC", "D_PRA_CFG", c.pra_truncate)
    # CDMA
    csb.fields("CDMA", "D_MISC_CFG", CONV_MODE=c.conv_mode, IN_PRECISION=c.in_precision,
               PROC_PRECISION=c.out_precision, **reuse)  # fmt: skip
    # map_img_fmt[FORMAT_FEATURE] = {DATAIN_FORMAT FEATURE (0), ...}: PIXEL_FORMAT 0 for feature data
    csb.fields("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT=0, PIXEL_FORMAT=0, PIXEL_MAPPING=c.pixel_mapping,
               PIXEL_SIGN_OVERRIDE=c.pixel_override)  # fmt: skip
    csb.fields("CDMA", "D_DATAIN_SIZE_0", WIDTH=src_fmt.width - 1, HEIGHT=src_fmt.height - 1)
    csb.fields("CDMA", "D_DATAIN_SIZE_1", CHANNEL=src_fmt.channel - 1)
    csb.fields("CDMA", "D_DATAIN_SIZE_EXT_0", WIDTH_EXT=c.input_width_csc - 1, HEIGHT_EXT=c.input_height_csc - 1)
    csb.fields("CDMA", "D_DAIN_RAM_TYPE", RAM_TYPE=ram(src_fmt))
    csb.write("CDMA", "D_DAIN_ADDR_HIGH_0", src >> 32)
    csb.write("CDMA", "D_DAIN_ADDR_LOW_0", src & WORD)
    csb.write("CDMA", "D_DAIN_ADDR_HIGH_1", (src + s.offset_u) >> 32)
    csb.write("CDMA", "D_DAIN_ADDR_LOW_1", (src + s.offset_u) & WORD)
    csb.write("CDMA", "D_LINE_STRIDE", src_fmt.line_stride)
    csb.write("CDMA", "D_SURF_STRIDE", src_fmt.surf_stride)
    csb.write("CDMA", "D_LINE_UV_STRIDE", s.in_line_uv_stride)
    csb.fields("CDMA", "D_DAIN_MAP", LINE_PACKED=int(src_fmt.line_stride == src_fmt.width * atom),
               SURF_PACKED=int(src_fmt.surf_stride == src_fmt.width * src_fmt.height * atom))  # fmt: skip
    csb.fields("CDMA", "D_BATCH_NUMBER", BATCHES=c.batch - 1)
    csb.write("CDMA", "D_BATCH_STRIDE", c.batch_stride)
    csb.fields("CDMA", "D_ENTRY_PER_SLICE", ENTRIES=c.entry_per_slice - 1)
    csb.fields("CDMA", "D_FETCH_GRAIN", GRAINS=c.fetch_grain - 1)
    csb.fields("CDMA", "D_WEIGHT_FORMAT", COMPRESSED=c.weight_format)
    csb.fields("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=c.bytes_per_kernel - 1)
    csb.fields("CDMA", "D_WEIGHT_SIZE_1", KERNEL=dst.channel - 1)
    csb.fields("CDMA", "D_WEIGHT_RAM_TYPE", RAM_TYPE=ram(s.weight_data))
    csb.write("CDMA", "D_WEIGHT_ADDR_HIGH", weight >> 32)
    csb.write("CDMA", "D_WEIGHT_ADDR_LOW", weight & WORD)
    csb.write("CDMA", "D_WEIGHT_BYTES", s.weight_data.size)
    csb.fields("CDMA", "D_MEAN_FORMAT", ENABLE=c.mean_format)
    if c.mean_format:
        csb.fields("CDMA", "D_MEAN_GLOBAL_0", RY=masked(c.mean_ry, 16), GU=masked(c.mean_gu, 16))
        csb.fields("CDMA", "D_MEAN_GLOBAL_1", BV=masked(c.mean_bv, 16), AX=masked(c.mean_ax, 16))
    if c.in_cvt.enable:
        csb.fields("CDMA", "D_CVT_CFG", EN=1, TRUNCATE=c.in_cvt.truncate)
        csb.write("CDMA", "D_CVT_OFFSET", c.in_cvt.offset)
        csb.write("CDMA", "D_CVT_SCALE", c.in_cvt.scale)
    else:
        csb.fields("CDMA", "D_CVT_CFG", EN=0)
    csb.fields("CDMA", "D_CONV_STRIDE", X=c.conv_stride_x - 1, Y=c.conv_stride_y - 1)
    csb.fields("CDMA", "D_ZERO_PADDING", LEFT=c.pad_x_left, RIGHT=c.pad_x_right, TOP=c.pad_y_top, BOTTOM=c.pad_y_bottom)
    csb.fields("CDMA", "D_ZERO_PADDING_VALUE", VALUE=masked(c.pad_val, 16))
    csb.fields("CDMA", "D_BANK", WEIGHT_BANK=c.weight_bank - 1, DATA_BANK=c.data_bank - 1)


class Convolution(FirmwareProcessor):
    kind = OpType.CONV
    units = ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")  # dla_conv_set_producer / dla_conv_enable order
    done = "CACC_DONE_STATUS"  # engine_isr.c: the convolution completes on CACC's done
    mask = Mask.NEVER
    # CDMA's data and weight done interrupts, unmasked at reset (GLB S_INTR_MASK resets to 0), raised once
    # CDMA has fetched the layer: modelled as one interrupt before the convolution's end
    early = (("CDMA_DAT_DONE_STATUS", Event.CDMA_DT_DONE), ("CDMA_WT_DONE_STATUS", Event.CDMA_WT_DONE))

    def rdma_needed(self, op: DlaOperation) -> bool:
        return False

    def program(self, csb: Csb, t: Target, op: DlaOperation, group: int, rdma_needed: bool, other_active: bool) -> None:
        other = 1 - group
        for unit in self.units:  # each unit's group must be idle (S_STATUS; the other group may run)
            csb.read(unit, "S_STATUS", int(other_active) << (16 * other))
        _program_conv(csb, t.net, t.mem, op, t.atom)

    def enable(self, csb: Csb, op: DlaOperation, group: int, rdma_needed: bool) -> int | None:
        csb.read("CDMA", "S_CBUF_FLUSH_STATUS", 1)  # dla_conv_enable polls FLUSH_DONE first
        for unit in self.units:
            at = csb.write(unit, "D_OP_ENABLE", 1)
        return at


PROCESSOR = Convolution()
