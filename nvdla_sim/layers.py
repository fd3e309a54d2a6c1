"""Hardware-layer descriptions: what one NVDLA hardware layer computes (shapes, precision, fused ops).

These carry no numbers, only shapes and modes, so the mapper can build thousands of them cheaply. The
functional models take numpy operands separately.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from nvdla_sim.errors import ShapeError, check_int
from nvdla_sim.precision import Precision
from nvdla_sim.values import field_hash, state_without_hash

# Register field limits (hw spec/manual NVDLA_CDMA.rdl / NVDLA_CSC.rdl, minus-one encoded widths).
MAX_DIM = 8192  # DATAIN_WIDTH/HEIGHT/CHANNEL, WEIGHT_KERNEL: 13 bits
MAX_KERNEL_EXT = 32  # WEIGHT_WIDTH/HEIGHT_EXT: 5 bits
MAX_STRIDE = 8  # CONV_X/Y_STRIDE: 3 bits
MAX_DILATION = 32


class Memory(enum.Enum):
    """Where an operand lives: external DRAM (primary MEMIF) or on-chip SRAM (secondary MEMIF)."""

    DRAM = "dram"
    SRAM = "sram"

    __hash__ = object.__hash__  # a member is its own identity; Enum's hash(name) runs Python code per lookup


class OperandMode(enum.Enum):
    """Source of an SDP operand (SDP *_SRC and SDP_RDMA *_DATA_MODE)."""

    NONE = "none"  # sub-operation bypassed
    REG = "reg"  # one register value for the whole cube
    PER_KERNEL = "per_kernel"  # one value per output channel, read by B/N-RDMA
    PER_ELEMENT = "per_element"  # one value per output element, read by E-RDMA (or B/N-RDMA)


@dataclass(frozen=True)
class ConvShape:
    """Direct-convolution geometry. A matmul (M x K) @ (K x N) is in_w*in_h = M pixels, in_c = K, out_k = N."""

    in_w: int
    in_h: int
    in_c: int
    out_k: int
    kernel_w: int = 1
    kernel_h: int = 1
    stride_x: int = 1
    stride_y: int = 1
    pad_left: int = 0
    pad_right: int = 0
    pad_top: int = 0
    pad_bottom: int = 0
    dilation_x: int = 1
    dilation_y: int = 1

    def __post_init__(self) -> None:
        for name in ("in_w", "in_h", "in_c", "out_k"):
            check_int(
                getattr(self, name), f"conv {name}", maximum=MAX_DIM, error=ShapeError, why=" (13-bit register field)"
            )
        for name in ("kernel_w", "kernel_h"):
            v = getattr(self, name)
            if not 1 <= v <= MAX_KERNEL_EXT:
                raise ShapeError(f"conv {name} must be in 1..{MAX_KERNEL_EXT}, not {v}")
        for name in ("stride_x", "stride_y"):
            v = getattr(self, name)
            if not 1 <= v <= MAX_STRIDE:
                raise ShapeError(f"conv {name} must be in 1..{MAX_STRIDE}, not {v}")
        for name in ("dilation_x", "dilation_y"):
            v = getattr(self, name)
            if not 1 <= v <= MAX_DILATION:
                raise ShapeError(f"conv {name} must be in 1..{MAX_DILATION}, not {v}")
        # CDMA D_ZERO_PADDING: LEFT and TOP are 5-bit fields, RIGHT and BOTTOM 6-bit (registers/fields.py)
        for name, top in (("pad_left", 31), ("pad_right", 63), ("pad_top", 31), ("pad_bottom", 63)):
            v = getattr(self, name)
            if not 0 <= v <= top:
                raise ShapeError(f"conv {name} must be in 0..{top} (CDMA D_ZERO_PADDING), not {v}")
        if self.out_w < 1 or self.out_h < 1:
            raise ShapeError(
                f"conv output would be {self.out_w}x{self.out_h}: kernel {self.kernel_w}x{self.kernel_h} "
                f"(dilated {self.kernel_w_dilated}x{self.kernel_h_dilated}) exceeds padded input "
                f"{self.in_w + self.pad_left + self.pad_right}x{self.in_h + self.pad_top + self.pad_bottom}"
            )

    @classmethod
    def square(
        cls, w: int, h: int, c: int, k: int, *, kernel: int = 1, stride: int = 1, pad: int = 0, dilation: int = 1
    ) -> ConvShape:
        """The common case: square kernel, equal strides, symmetric padding and dilation."""
        return cls(
            in_w=w,
            in_h=h,
            in_c=c,
            out_k=k,
            kernel_w=kernel,
            kernel_h=kernel,
            stride_x=stride,
            stride_y=stride,
            pad_left=pad,
            pad_right=pad,
            pad_top=pad,
            pad_bottom=pad,
            dilation_x=dilation,
            dilation_y=dilation,
        )

    @classmethod
    def matmul(cls, m: int, k: int, n: int, *, row: int | None = None) -> ConvShape:
        """(m x k) @ (k x n) as a 1x1 convolution; tokens laid out as H rows of `row` pixels.

        The default row is the largest divisor of m up to 64, so the data can be tiled by rows (stripes
        wrap rows, so the row length does not change compute cycles).
        """
        if row is None:
            row = max(d for d in range(1, min(m, 64) + 1) if m % d == 0)
        if m % row:
            raise ShapeError(f"matmul m={m} is not a multiple of the row length {row}")
        return cls(in_w=row, in_h=m // row, in_c=k, out_k=n)

    @property
    def kernel_w_dilated(self) -> int:
        return (self.kernel_w - 1) * self.dilation_x + 1

    @property
    def kernel_h_dilated(self) -> int:
        return (self.kernel_h - 1) * self.dilation_y + 1

    @property
    def out_w(self) -> int:
        return (self.in_w + self.pad_left + self.pad_right - self.kernel_w_dilated) // self.stride_x + 1

    @property
    def out_h(self) -> int:
        return (self.in_h + self.pad_top + self.pad_bottom - self.kernel_h_dilated) // self.stride_y + 1

    @property
    def out_pixels(self) -> int:
        return self.out_w * self.out_h

    @property
    def macs(self) -> int:
        return self.out_pixels * self.out_k * self.in_c * self.kernel_w * self.kernel_h

    def input_rows_for(self, out_row_start: int, out_row_end: int) -> tuple[int, int]:
        """Input rows [start, end) (clipped to the real input) feeding output rows [out_row_start, out_row_end)."""
        start = out_row_start * self.stride_y - self.pad_top
        end = (out_row_end - 1) * self.stride_y - self.pad_top + self.kernel_h_dilated
        return max(0, start), min(self.in_h, end)


@dataclass(frozen=True)
class SdpSpec:
    """Which SDP sub-units a layer uses (timing view; the numbers are in sdp.SdpParams)."""

    bias: OperandMode = OperandMode.NONE  # X1 ALU (the bias; per element: a residual added in X1)
    # X1's per-kernel stream carries a multiplier beside each bias: (ALU, MUL) pairs, 4 bytes a kernel
    # (DATA_USE BOTH; the per-channel multipliers of a residual add fused without the EW unit)
    bias_pairs: bool = False
    # X2 (BN): per kernel its MUL (a batch-norm / per-channel scale); per element its ALU (a residual
    # added after X1's multipliers, on builds without the EW unit)
    scale: OperandMode = OperandMode.NONE
    relu: bool = False  # ReLU at the end of the X stages
    eltwise: OperandMode = OperandMode.NONE  # Y ALU/MUL second operand (residual add)
    # Y's per-kernel stream carries both of its operands: (ALU, MUL) pairs, 4 bytes a kernel (E-RDMA
    # DATA_USE BOTH; a LayerNorm's beta and gamma)
    eltwise_pairs: bool = False
    lut: bool = False  # Y LUT (exp, GELU, sigmoid, ...)
    out_precision: Precision | None = None  # None: same as the layer precision
    # the per-element operand streams' element size (the B/N/E-RDMAs' DATA_SIZE, one or two bytes) where
    # it is not the layer's: INT16 statistics applied to INT8 data (numerics.layernorm_steps). None: the
    # layer's precision
    operand_precision: Precision | None = None

    @property
    def uses_y(self) -> bool:
        return self.eltwise is not OperandMode.NONE or self.lut

    def streams(self) -> SdpStreams:
        """What the pass reads beside its data and which units it runs: the part of the view its timing and
        energy depend on (a register operand costs nothing beside a bypassed one)."""

        def streamed(mode: OperandMode) -> OperandMode:
            return OperandMode.NONE if mode is OperandMode.REG else mode

        return SdpStreams(
            streamed(self.bias), self.bias_pairs, streamed(self.scale), streamed(self.eltwise),
            self.eltwise_pairs, self.lut, self.out_precision,
        )  # fmt: skip


@dataclass(frozen=True)
class SdpStreams:
    """An SDP pass's operand streams (B-RDMA: X1's, N-RDMA: X2's, E-RDMA: Y's; each NONE, PER_KERNEL or
    PER_ELEMENT; pairs: both of a stage's operands per kernel), its LUT and the precision it writes where
    not the layer's (SdpSpec.streams)."""

    x1: OperandMode
    x1_pairs: bool
    x2: OperandMode
    y: OperandMode
    y_pairs: bool
    lut: bool
    out_precision: Precision | None

    def differences(self, other: SdpStreams) -> list[str]:
        """`field: self's -> other's` for each field that differs."""

        def shown(v: object) -> str:
            return v.value if isinstance(v, enum.Enum) else str(v)

        return [
            f"{f.name} {shown(getattr(self, f.name))} -> {shown(getattr(other, f.name))}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


class PoolMode(enum.Enum):
    MAX = "max"
    MIN = "min"
    AVG = "avg"


@dataclass(frozen=True)
class PoolSpec:
    """PDP pooling window (kernel 1..8, stride 1..16 per unit_description.rst)."""

    mode: PoolMode
    kernel_w: int
    kernel_h: int
    stride_x: int
    stride_y: int
    pad_left: int = 0
    pad_right: int = 0
    pad_top: int = 0
    pad_bottom: int = 0

    def __post_init__(self) -> None:
        for name in ("kernel_w", "kernel_h"):
            if not 1 <= getattr(self, name) <= 8:
                raise ShapeError(f"pool {name} must be in 1..8 (PDP limit), not {getattr(self, name)}")
        for name in ("stride_x", "stride_y"):
            if not 1 <= getattr(self, name) <= 16:
                raise ShapeError(f"pool {name} must be in 1..16 (PDP limit), not {getattr(self, name)}")
        for name in ("pad_left", "pad_right", "pad_top", "pad_bottom"):
            if not 0 <= getattr(self, name) <= 7:
                raise ShapeError(f"pool {name} must be in 0..7 (PDP limit), not {getattr(self, name)}")

    def out_size(self, w: int, h: int) -> tuple[int, int]:
        ow = (w + self.pad_left + self.pad_right - self.kernel_w) // self.stride_x + 1
        oh = (h + self.pad_top + self.pad_bottom - self.kernel_h) // self.stride_y + 1
        if ow < 1 or oh < 1:
            raise ShapeError(f"pool window {self.kernel_w}x{self.kernel_h} does not fit a {w}x{h} input")
        return ow, oh


@dataclass(frozen=True)
class ConvLayer:
    """A convolution-pipeline hardware layer: CDMA -> CBUF -> CSC -> CMAC -> CACC -> SDP (-> PDP) -> memory.

    `weight_bytes` overrides the dense weight size (e.g. compressed weights); None means dense.
    """

    __hash__ = field_hash  # computed once: these key the simulator's caches (nvdla_sim.values)
    __getstate__ = state_without_hash

    name: str
    shape: ConvShape
    precision: Precision
    sdp: SdpSpec = field(default_factory=SdpSpec)
    pool: PoolSpec | None = None
    input_memory: Memory = Memory.DRAM
    weight_memory: Memory = Memory.DRAM
    output_memory: Memory = Memory.DRAM
    weight_bytes: int | None = None
    sparse_mac: bool = False  # what-if beyond NVDLA v1: a 2:4-sparse MAC array skips half the channel work
    image_input: bool = False  # first layer read as a pixel image (CDMA_IMG, channel extension), C <= 4
    # operands the previous hardware layer left in CBUF (it set SKIP_DATA_RLS / SKIP_WEIGHT_RLS) and this one
    # uses without a fetch (CDMA/CSC D_MISC_CFG.DATA_REUSE / WEIGHT_REUSE; measured on the nv_small RTL,
    # validation/data/nvdla_rtl_reuse.json)
    data_resident: bool = False
    weights_resident: bool = False
    # a batch of images that share the kernels: one hardware layer per image and band of rows, in the plan's
    # order (weight-stationary keeps a kernel tile in CBUF across every image, WEIGHT_REUSE, the mechanism
    # measured between bands; not NVDLA's MULTI_BATCH mode, D_BATCH_NUMBER, which nv_small and nv_large lack)
    images: int = 1

    def __post_init__(self) -> None:
        check_int(self.images, f"{self.name}: images (a batch sharing the kernels)", error=ShapeError)
        if self.images > 1 and (self.data_resident or self.weights_resident):
            raise ShapeError(f"{self.name}: a batch of {self.images} images cannot start from operands left in CBUF")
        if self.image_input and self.shape.in_c > 4:
            raise ShapeError(
                f"{self.name}: image-input mode reads pixel formats of up to 4 channels, not {self.shape.in_c}"
            )

    @property
    def out_precision(self) -> Precision:
        return self.sdp.out_precision or self.precision

    @property
    def macs(self) -> int:
        return self.shape.macs * self.images

    @property
    def out_points(self) -> int:
        """Output points over every image (W' x H' x images)."""
        return self.shape.out_pixels * self.images

    @property
    def performed_macs(self) -> int:
        """MACs the array performs: the layer's, or half the channel work under the 2:4 sparse what-if."""
        s = self.shape
        if not self.sparse_mac:
            return self.macs
        return self.out_points * s.out_k * s.kernel_w * s.kernel_h * self.mac_channels

    @property
    def mac_channels(self) -> int:
        """Input channels the MAC array iterates over (halved by the 2:4 sparse what-if)."""
        return -(-self.shape.in_c // 2) if self.sparse_mac else self.shape.in_c


def _check_cube(layer: object, kind: str) -> None:
    """A standalone layer's W x H x C cube must fit the 13-bit size registers."""
    for n in ("width", "height", "channels"):
        check_int(getattr(layer, n), f"{kind} layer {n}", maximum=MAX_DIM, error=ShapeError)


@dataclass(frozen=True)
class SdpLayer:
    """A standalone (offline) SDP layer: memory -> SDP_RDMA -> SDP -> memory over a W x H x C cube."""

    name: str
    width: int
    height: int
    channels: int
    precision: Precision
    sdp: SdpSpec
    input_memory: Memory = Memory.DRAM
    output_memory: Memory = Memory.DRAM

    def __post_init__(self) -> None:
        _check_cube(self, "sdp")

    @property
    def elements(self) -> int:
        return self.width * self.height * self.channels

    @property
    def out_precision(self) -> Precision:
        return self.sdp.out_precision or self.precision


@dataclass(frozen=True)
class PdpLayer:
    """A standalone (offline) PDP pooling layer: memory -> PDP_RDMA -> PDP -> memory."""

    name: str
    width: int
    height: int
    channels: int
    precision: Precision
    pool: PoolSpec
    input_memory: Memory = Memory.DRAM
    output_memory: Memory = Memory.DRAM

    def __post_init__(self) -> None:
        _check_cube(self, "pdp")
        self.pool.out_size(self.width, self.height)


@dataclass(frozen=True)
class CdpLayer:
    """A channel data processor layer (local response normalisation over `window` channels):
    memory -> CDP_RDMA -> CDP -> memory, one pass over a W x H x C cube."""

    name: str
    width: int
    height: int
    channels: int
    precision: Precision
    window: int = 3  # normalisation length: 3, 5, 7 or 9 channels
    input_memory: Memory = Memory.DRAM
    output_memory: Memory = Memory.DRAM

    def __post_init__(self) -> None:
        _check_cube(self, "cdp")
        if self.window not in (3, 5, 7, 9):
            raise ShapeError(f"cdp window must be 3, 5, 7 or 9 channels (CDP.D_LRN_CFG NORMALZ_LEN), not {self.window}")


# the layers of the core's pipeline; a processor beside it has its layer type in its own module (nvdla_sim.processors)
HwLayer = ConvLayer | SdpLayer | PdpLayer | CdpLayer
