"""The firmware descriptors a loadable's DLA task holds, read from their blobs.

NVIDIA's compiler writes the network for the DLA firmware as packed little-endian C structs (nvdla/sw
`kmd/firmware/include/dla_interface.h`, firmware interface 0.10+): one `dla_network_desc`, and per
operation a `dla_common_op_desc` in the dependency graph, a `dla_operation_container` (the unit's op
descriptor) and a `dla_surface_container` (its data cubes), plus `dla_lut_param` tables. Each struct is
declared here once as a frozen dataclass whose fields carry their C type (`_c`); `unpack` reads any of
them, a union is as large as its largest member, and every struct is padded to 4 bytes (`__aligned(4)`).

The layout changed once: firmware interface 0.12 (nvdla/sw 16befcb, "Re-design of address list usage",
2019) added `offset` to dla_data_cube, so older blobs (nvdla/sw's regression loadables: 0.10 and 0.11) hold
28-byte cubes and newer ones 32-byte cubes. A field declared `since` a version is absent (0) before it;
each blob is read at the version it declares (container.Blob.version).
"""

# the fields' defaults are _c(...): dataclasses.field() carrying the C type, not a shared default value
# ruff: noqa: RUF009

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def _name(kind: type[enum.IntEnum], value: int) -> str:
    """An enum value's name, or the number where the descriptor holds another."""
    return kind(value).name if value in kind._value2member_map_ else str(value)


def _precision(value: int) -> str:
    return _name(Precision, value).lower()


# the firmware interfaces this reader follows: nvdla/sw kmd/firmware/include/dla_fw_version.h (0.12), back to
# the oldest its regression loadables declare (0.10)
LATEST = (0, 12)
OLDEST = (0, 10)


def _c(ctype: Any, since: tuple[int, int] | None = None) -> Any:
    """A field's C type: a struct format character ('h' int16, 'B' uint8, ...), a descriptor class, or
    (type, n) for an array of n; `since`: the firmware interface version that added it."""
    return field(metadata={"c": ctype, "since": since})


def _present(f, version: tuple[int, int]) -> bool:
    since = f.metadata["since"]
    return since is None or version >= since


class OpType(enum.IntEnum):
    """dla_interface.h DLA_OP_*: the processor an operation runs on, and its slot in op_head/consumers."""

    BDMA = 0
    CONV = 1
    SDP = 2
    PDP = 3
    CDP = 4
    RUBIK = 5


class MemType(enum.IntEnum):
    """dla_data_cube.type (dla_mem_type)."""

    MC = 0  # external DRAM
    CV = 1  # CV-SRAM
    HW = 2  # another DLA unit: on the fly (CONV -> SDP, SDP -> PDP)


class Precision(enum.IntEnum):
    """dla_interface.h PRECISION_* (dla_precision)."""

    INT8 = 0
    INT16 = 1
    FP16 = 2


@dataclass(frozen=True)
class NetworkDesc:
    operation_desc_index: int = _c("h")  # address list entries of the blobs
    surface_desc_index: int = _c("h")
    dependency_graph_index: int = _c("h")
    lut_data_index: int = _c("h")
    roi_array_index: int = _c("h")
    surface_index: int = _c("h")
    stat_list_index: int = _c("h")
    reserved1: int = _c("h")
    op_head: tuple[int, ...] = _c(("h", len(OpType)))  # each processor's first operation (-1: none)
    num_rois: int = _c("H")
    num_operations: int = _c("H")
    num_luts: int = _c("H")
    num_addresses: int = _c("H")
    input_layer: int = _c("h")
    dynamic_roi: int = _c("B")
    reserved0: int = _c("B")


class Event(enum.IntEnum):
    """dla_consumer.event: when the consumer is told (DLA_EVENT_*)."""

    NONE = 0
    OP_COMPLETED = 1
    OP_PROGRAMMED = 2
    OP_ENABLED = 3
    CDMA_WT_DONE = 4
    CDMA_DT_DONE = 5


@dataclass(frozen=True)
class Consumer:
    index: int = _c("h")  # the consumer operation's index in the dependency graph (-1: none)
    event: int = _c("B")  # Event
    res: int = _c("B")


@dataclass(frozen=True)
class CommonOpDesc:
    index: int = _c("h")
    roi_index: int = _c("b")
    op_type: int = _c("B")  # OpType
    dependency_count: int = _c("B")  # events to receive before it is programmed
    reserved0: tuple[int, ...] = _c(("B", 3))
    consumers: tuple[Consumer, ...] = _c((Consumer, len(OpType)))  # per processor
    fused_parent: Consumer = _c(Consumer)  # the operation feeding it on the fly


@dataclass(frozen=True)
class CvtParam:
    scale: int = _c("h")
    truncate: int = _c("B")
    enable: int = _c("B")
    offset: int = _c("i")


@dataclass(frozen=True)
class DataCube:
    type: int = _c("H")  # MemType
    address: int = _c("h")  # the task's address list entry (-1: none)
    offset: int = _c("I", since=(0, 12))  # bytes within it
    size: int = _c("I")
    width: int = _c("H")
    height: int = _c("H")
    channel: int = _c("H")
    reserved0: int = _c("H")
    line_stride: int = _c("I")
    surf_stride: int = _c("I")
    plane_stride: int = _c("I")  # Rubik only

    @property
    def whc(self) -> str:
        return f"{self.width}x{self.height}x{self.channel}"


# ---- BDMA -------------------------------------------------------------------------------------------

NUM_MAX_BDMA_OPS = 20


@dataclass(frozen=True)
class BdmaTransferDesc:
    source_address: int = _c("h")
    destination_address: int = _c("h")
    line_size: int = _c("I")
    line_repeat: int = _c("I")
    source_line: int = _c("I")
    destination_line: int = _c("I")
    surface_repeat: int = _c("I")
    source_surface: int = _c("I")
    destination_surface: int = _c("I")


@dataclass(frozen=True)
class BdmaSurfaceDesc:
    source_type: int = _c("B")
    destination_type: int = _c("B")
    num_transfers: int = _c("H")
    transfers: tuple[BdmaTransferDesc, ...] = _c((BdmaTransferDesc, NUM_MAX_BDMA_OPS))


@dataclass(frozen=True)
class BdmaOpDesc:
    num_transfers: int = _c("H")
    reserved0: int = _c("H")

    def describe(self) -> str:
        return f"{self.num_transfers} transfer{'s' if self.num_transfers != 1 else ''}"


# ---- convolution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvSurfaceDesc:
    weight_data: DataCube = _c(DataCube)
    wmb_data: DataCube = _c(DataCube)  # weight compression: the mask bits
    wgs_data: DataCube = _c(DataCube)  # weight compression: the group sizes
    src_data: DataCube = _c(DataCube)
    dst_data: DataCube = _c(DataCube)
    offset_u: int = _c("q")
    in_line_uv_stride: int = _c("I")


@dataclass(frozen=True)
class ConvOpDesc:
    conv_mode: int = _c("B")  # 0 direct, 1 Winograd
    data_reuse: int = _c("B")
    weight_reuse: int = _c("B")
    skip_data_rls: int = _c("B")
    skip_weight_rls: int = _c("B")
    reserved0: int = _c("B")
    entry_per_slice: int = _c("H")
    data_format: int = _c("B")  # FORMAT_T_* (36: feature)
    pixel_mapping: int = _c("B")
    fetch_grain: int = _c("H")
    reserved_b: tuple[int, ...] = _c(("B", 8))
    batch: int = _c("B")
    weight_format: int = _c("B")  # 0 uncompressed, 1 compressed
    data_bank: int = _c("B")
    weight_bank: int = _c("B")
    batch_stride: int = _c("I")
    post_extension: int = _c("B")
    pixel_override: int = _c("B")
    release: int = _c("H")
    input_width_csc: int = _c("H")
    input_height_csc: int = _c("H")
    input_channel_csc: int = _c("H")
    kernel_width_csc: int = _c("H")
    kernel_height_csc: int = _c("H")
    kernel_channel_csc: int = _c("H")
    input_width_cmac: int = _c("H")
    input_height_cmac: int = _c("H")
    bytes_per_kernel: int = _c("I")
    mean_ry: int = _c("h")
    mean_gu: int = _c("h")
    mean_bv: int = _c("h")
    mean_ax: int = _c("h")
    mean_format: int = _c("B")
    conv_stride_x: int = _c("B")
    conv_stride_y: int = _c("B")
    pad_x_left: int = _c("B")
    pad_x_right: int = _c("B")
    pad_y_top: int = _c("B")
    pad_y_bottom: int = _c("B")
    dilation_x: int = _c("B")
    dilation_y: int = _c("B")
    reserved2: tuple[int, ...] = _c(("B", 2))
    pra_truncate: int = _c("B")
    in_precision: int = _c("B")  # Precision
    out_precision: int = _c("B")  # the MAC's processing precision
    pad_val: int = _c("h")
    in_cvt: CvtParam = _c(CvtParam)
    out_cvt: CvtParam = _c(CvtParam)  # truncate only

    def describe(self) -> str:
        mode = "Winograd" if self.conv_mode else "direct"
        return (
            f"{mode} {self.kernel_width_csc}x{self.kernel_height_csc}x{self.kernel_channel_csc} kernels, "
            f"stride {self.conv_stride_x}x{self.conv_stride_y}, pad {self.pad_x_left},{self.pad_x_right},"
            f"{self.pad_y_top},{self.pad_y_bottom}, {_precision(self.in_precision)}, banks {self.data_bank}+{self.weight_bank}"
        )


# ---- SDP --------------------------------------------------------------------------------------------


class SdpOpKind(enum.IntEnum):
    """dla_sdp_op.type: which of the stage's ALU and multiplier run."""

    NONE = 0
    MUL = 1
    ADD = 2
    BOTH = 3


class SdpOperandMode(enum.IntEnum):
    """dla_sdp_op.mode: the operand's source."""

    PER_LAYER = 0  # a register value
    PER_KERNEL = 1  # one per output channel, from memory
    PER_POINT = 2  # one per element, from memory


class Activation(enum.IntEnum):
    NONE = 0
    RELU = 1
    LUT = 2
    PRELU = 3


@dataclass(frozen=True)
class SdpCvt:
    alu_cvt: CvtParam = _c(CvtParam)
    mul_cvt: CvtParam = _c(CvtParam)


@dataclass(frozen=True)
class SdpStageOp:
    """dla_sdp_op: one of X1, X2, Y."""

    enable: int = _c("B")
    alu_type: int = _c("B")  # SDP_ALU_OP_*: 0 max, 1 min, 2 sum, 3 eql
    type: int = _c("B")  # SdpOpKind
    mode: int = _c("B")  # SdpOperandMode
    act: int = _c("B")  # Activation
    shift_value: int = _c("B")  # the ALU operand's left shift
    truncate: int = _c("B")  # the multiplier's right shift
    precision: int = _c("B")  # the operand's (Precision)
    alu_operand: int = _c("i")
    mul_operand: int = _c("i")
    cvt: SdpCvt = _c(SdpCvt)

    def describe(self) -> str:
        kind = _name(SdpOpKind, self.type).lower()
        where = _name(SdpOperandMode, self.mode).lower().replace("_", "-")
        act = "" if self.act == Activation.NONE else f" + {_name(Activation, self.act).lower()}"
        alu = {0: "max", 1: "min", 2: "sum", 3: "eql"}.get(self.alu_type, str(self.alu_type))
        what = f"{kind}" + (f" ({alu})" if self.type in (SdpOpKind.ADD, SdpOpKind.BOTH) else "")
        return f"{what} {where}{act}" if self.type != SdpOpKind.NONE else act.lstrip(" +") or "none"


@dataclass(frozen=True)
class SdpSurfaceDesc:
    src_data: DataCube = _c(DataCube)  # offline mode's input
    x1_data: DataCube = _c(DataCube)
    x2_data: DataCube = _c(DataCube)
    y_data: DataCube = _c(DataCube)
    dst_data: DataCube = _c(DataCube)


@dataclass(frozen=True)
class SdpOpDesc:
    src_precision: int = _c("B")  # Precision
    dst_precision: int = _c("B")
    lut_index: int = _c("h")  # -1: no LUT
    out_cvt: CvtParam = _c(CvtParam)
    conv_mode: int = _c("B")
    batch_num: int = _c("B")
    reserved0: int = _c("H")
    batch_stride: int = _c("I")
    x1_op: SdpStageOp = _c(SdpStageOp)
    x2_op: SdpStageOp = _c(SdpStageOp)
    y_op: SdpStageOp = _c(SdpStageOp)

    def describe(self) -> str:
        stages = [
            f"{n} {op.describe()}" for n, op in (("x1", self.x1_op), ("x2", self.x2_op), ("y", self.y_op)) if op.enable
        ]
        prec = f"{_precision(self.src_precision)} -> {_precision(self.dst_precision)}"
        return ", ".join([*stages, prec]) if stages else f"pass-through, {prec}"


# ---- PDP, CDP, Rubik ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SrcDstSurfaceDesc:
    """dla_pdp_surface_desc, dla_cdp_surface_desc and dla_rubik_surface_desc (the same two cubes)."""

    src_data: DataCube = _c(DataCube)
    dst_data: DataCube = _c(DataCube)


PDP_PAD_VAL_NUM = 7


@dataclass(frozen=True)
class PdpOpDesc:
    partial_in_width_first: int = _c("H")
    partial_in_width_mid: int = _c("H")
    partial_in_width_last: int = _c("H")
    partial_width_first: int = _c("H")
    partial_width_mid: int = _c("H")
    partial_width_last: int = _c("H")
    split_num: int = _c("B")
    pool_mode: int = _c("B")  # 0 avg, 1 max, 2 min
    pool_width: int = _c("B")  # kernel - 1
    pool_height: int = _c("B")
    stride_x: int = _c("B")
    stride_y: int = _c("B")
    pad_left: int = _c("B")
    pad_right: int = _c("B")
    pad_top: int = _c("B")
    pad_bottom: int = _c("B")
    precision: int = _c("B")
    reserved0: int = _c("B")
    padding_value: tuple[int, ...] = _c(("i", PDP_PAD_VAL_NUM))

    def describe(self) -> str:
        mode = {0: "avg", 1: "max", 2: "min"}.get(self.pool_mode, str(self.pool_mode))
        return (
            f"{mode} pool {self.pool_width + 1}x{self.pool_height + 1}, stride {self.stride_x}x{self.stride_y}, "
            f"pad {self.pad_left},{self.pad_right},{self.pad_top},{self.pad_bottom}, {_precision(self.precision)}"
            + (f", {self.split_num} splits" if self.split_num > 1 else "")
        )


@dataclass(frozen=True)
class CdpOpDesc:
    in_precision: int = _c("B")
    out_precision: int = _c("B")
    lut_index: int = _c("h")
    in_cvt: CvtParam = _c(CvtParam)
    out_cvt: CvtParam = _c(CvtParam)
    local_size: int = _c("B")
    bypass_sqsum: int = _c("B")
    bypass_out_mul: int = _c("B")
    reserved0: int = _c("B")

    def describe(self) -> str:
        lut = f"LUT {self.lut_index}" if self.lut_index >= 0 else "no LUT"
        return f"LRN over {self.local_size} channels, {lut}, {_precision(self.in_precision)} -> {_precision(self.out_precision)}"


@dataclass(frozen=True)
class RubikOpDesc:
    mode: int = _c("B")  # 0 contract, 1 split, 2 merge
    precision: int = _c("B")
    stride_x: int = _c("B")
    stride_y: int = _c("B")

    def describe(self) -> str:
        mode = {0: "contract", 1: "split", 2: "merge"}.get(self.mode, str(self.mode))
        return f"{mode}, stride {self.stride_x}x{self.stride_y}, {_precision(self.precision)}"


# ---- LUT ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloatData:
    """dla_float_data (a slope of the integer pipeline: scale x 2^shifter); FP16 uses the first 16 bits."""

    scale: int = _c("h")
    shifter: int = _c("b")
    reserved0: int = _c("B")


@dataclass(frozen=True)
class LutParam:
    linear_exp_table: tuple[int, ...] = _c(("h", 65))
    linear_only_table: tuple[int, ...] = _c(("h", 257))
    # union dla_lut_offset (2 bytes): an int8 exp_offset (exponent table) or frac_bits (linear), then padding
    linear_exp_offset: int = _c("b")
    linear_exp_offset_pad: int = _c("B")
    linear_only_offset: int = _c("b")
    linear_only_offset_pad: int = _c("B")
    linear_exp_start: int = _c("Q")
    linear_exp_end: int = _c("Q")
    linear_only_start: int = _c("Q")
    linear_only_end: int = _c("Q")
    linear_exp_underflow_slope: FloatData = _c(FloatData)
    linear_exp_overflow_slope: FloatData = _c(FloatData)
    linear_only_underflow_slope: FloatData = _c(FloatData)
    linear_only_overflow_slope: FloatData = _c(FloatData)
    hybrid_priority: int = _c("B")
    underflow_priority: int = _c("B")
    overflow_priority: int = _c("B")
    method: int = _c("B")  # 0 exponential, 1 linear


# each processor's op and surface descriptors, and the unions' members
OP_DESC: dict[OpType, type] = {
    OpType.BDMA: BdmaOpDesc, OpType.CONV: ConvOpDesc, OpType.SDP: SdpOpDesc, OpType.PDP: PdpOpDesc,
    OpType.CDP: CdpOpDesc, OpType.RUBIK: RubikOpDesc,
}  # fmt: skip
SURFACE_DESC: dict[OpType, type] = {
    OpType.BDMA: BdmaSurfaceDesc, OpType.CONV: ConvSurfaceDesc, OpType.SDP: SdpSurfaceDesc,
    OpType.PDP: SrcDstSurfaceDesc, OpType.CDP: SrcDstSurfaceDesc, OpType.RUBIK: SrcDstSurfaceDesc,
}  # fmt: skip


# ---- reading --------------------------------------------------------------------------------------------


def _round4(n: int) -> int:
    return (n + 3) & ~3


@cache
def sizeof(ctype: Any, version: tuple[int, int] = LATEST) -> int:
    """Bytes of a C type as dla_interface.h `version` lays it out: packed members, each struct padded to 4."""
    if isinstance(ctype, str):
        return struct.calcsize("<" + ctype)
    if isinstance(ctype, tuple):
        inner, n = ctype
        return sizeof(inner, version) * n
    return _round4(sum(sizeof(f.metadata["c"], version) for f in fields(ctype) if _present(f, version)))


def union_size(members, version: tuple[int, int] = LATEST) -> int:
    """A union of descriptors: its largest member, padded to 4."""
    return _round4(max(sizeof(m, version) for m in members))


def op_container_size(version: tuple[int, int] = LATEST) -> int:
    """sizeof(union dla_operation_container): operation i's descriptor is at i times it."""
    return union_size(OP_DESC.values(), version)


def surface_container_size(version: tuple[int, int] = LATEST) -> int:
    """sizeof(union dla_surface_container)."""
    return union_size(SURFACE_DESC.values(), version)


def _read(ctype: Any, data: bytes, at: int, version: tuple[int, int]) -> Any:
    if isinstance(ctype, str):
        return struct.unpack_from("<" + ctype, data, at)[0]
    if isinstance(ctype, tuple):
        inner, n = ctype
        size = sizeof(inner, version)
        return tuple(_read(inner, data, at + i * size, version) for i in range(n))
    return unpack(ctype, data, at, version)


def unpack(cls: type[T], data: bytes, at: int = 0, version: tuple[int, int] = LATEST) -> T:
    """A descriptor of class `cls` from `data` at byte `at`, laid out as firmware interface `version` has it
    (ValueError when the bytes end first)."""
    size = sizeof(cls, version)
    if at < 0 or at + size > len(data):
        raise ValueError(f"{cls.__name__} needs {size} bytes at {at}; the blob has {len(data)}")
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if not _present(f, version):
            values[f.name] = 0
            continue
        ctype = f.metadata["c"]
        values[f.name] = _read(ctype, data, at, version)
        at += sizeof(ctype, version)
    return cls(**values)


def _write(ctype: Any, value: Any, version: tuple[int, int]) -> bytes:
    if isinstance(ctype, str):
        return struct.pack("<" + ctype, value)
    if isinstance(ctype, tuple):
        inner, n = ctype
        if len(value) != n:
            raise ValueError(f"an array of {n} holds {len(value)} values")
        return b"".join(_write(inner, v, version) for v in value)
    return pack(value, version)


def pack(obj: Any, version: tuple[int, int] = LATEST) -> bytes:
    """The bytes of descriptor `obj` as firmware interface `version` lays it out (the inverse of unpack;
    fields added after `version` are left out, each struct padded to 4)."""
    out = b"".join(_write(f.metadata["c"], getattr(obj, f.name), version) for f in fields(obj) if _present(f, version))
    return out.ljust(sizeof(type(obj), version), b"\0")
