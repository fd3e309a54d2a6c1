"""CDMA: bytes fetched from memory into CBUF, and the NVDLA in-memory formats (functional).

Feature cubes are stored as surfaces of memory atoms (doc/hw/format.rst): channel-within-atom fastest,
then W, then H, then the atom (surface) index. Weights for direct convolution are stored kernel group by
kernel group in the order CSC consumes them. Request sizes are rounded up to memory atoms.
"""

from __future__ import annotations

import math

from nvdla_sim.config import HwConfig
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.units.dram import beat_bytes

WEIGHT_ALIGN_BYTES = 128  # D_WEIGHT_BYTES must be 128-byte aligned (programming_guide.rst)


def weight_pointer_lag(blob_bytes: int, entry_bytes: int, register_unit: int = WEIGHT_ALIGN_BYTES) -> int:
    """CBUF weight entries by which CSC's read pointer falls behind CDMA's write pointer after a hardware
    layer that fetched a weight blob of `blob_bytes` (packed) bytes with D_WEIGHT_BYTES the blob rounded up
    to `register_unit` bytes (128: the programming guide's rule, as NVIDIA's tests do; our emitter rounds
    to the CBUF entry, `weight_bytes`, which leaves no lag): CDMA writes all of D_WEIGHT_BYTES, padding
    included, and keeps its write pointer for the next layer
    (NV_NVDLA_CDMA_wt.v wt_cbuf_wr_idx, reset only at the first layer, a pending clear or a wrap); CSC
    reads the blob as one packed stream and moves its read pointer only by the entries it read, ceil(blob /
    entry) (NV_NVDLA_CSC_wl.v wt_entry_st: the next layer's weights are read from there). The two meet again
    only where a bank change runs the pending handshake. A later layer that fetches weights after a lag
    reads shifted weights: every one of the 132 programs of docs/validation.md 5f, on nv_small (entries of
    8 bytes), nv_small_256_full (32) and nv_large (64)."""
    padded = math.ceil(blob_bytes / register_unit) * register_unit
    return math.ceil(padded / entry_bytes) - math.ceil(blob_bytes / entry_bytes)


def feature_bytes(width: int, rows: int, channels: int, precision: Precision, hw: HwConfig) -> int:
    """Bytes of a W x rows x C feature region in memory (channels padded to whole memory atoms)."""
    ab = hw.memory.memory_atomic_bytes
    return width * rows * math.ceil(channels * precision.bytes / ab) * ab


def atom_channels(channels: int, precision: Precision, hw: HwConfig) -> int:
    """Channels rounded up to whole memory atoms (the lanes a feature cube occupies)."""
    per_atom = max(1, hw.memory.memory_atomic_bytes // precision.bytes)
    return math.ceil(channels / per_atom) * per_atom


def image_bytes(width: int, rows: int, channels: int, precision: Precision) -> int:
    """Bytes of a pitch-linear pixel image (channels padded to 1, 2 or 4, e.g. RGB as RGBX)."""
    packed = 1 << (channels - 1).bit_length()
    return width * rows * packed * precision.bytes


def input_bytes(layer, rows: int, hw: HwConfig) -> int:
    """Input bytes CDMA reads for `rows` input rows of a convolution layer (feature cube or image)."""
    s = layer.shape
    if layer.image_input:
        return image_bytes(s.in_w, rows, s.in_c, layer.precision)
    return feature_bytes(s.in_w, rows, s.in_c, layer.precision, hw)


def weight_bytes(kernels: int, bytes_per_kernel: int, hw: HwConfig) -> int:
    """Dense weight bytes CDMA fetches for `kernels` kernels: D_WEIGHT_BYTES as our emitter writes it, the
    packed blob rounded up to whole CBUF entries (hw.cbuf_entry_bytes: 8, 32, 64 and 128 bytes on
    nv_small, nv_small_256_full, nv_large and nv_full), what CSC reads. The programming guide asks for 128-byte blocks;
    on NVIDIA's RTL those leave CSC's weight pointer behind CDMA's when the padding spans an entry
    (`weight_pointer_lag`), and whole entries ran bit-exact on all 132 programs of docs/validation.md 5f
    on three builds. A program's own D_WEIGHT_BYTES is what the model fetches when it runs one
    (program.decode)."""
    return math.ceil(kernels * bytes_per_kernel / hw.cbuf_entry_bytes) * hw.cbuf_entry_bytes


def feature_ingest_bytes_per_cycle(hw: HwConfig, memory: Memory) -> float:
    """Bytes a cycle CDMA's direct-convolution path takes feature data in from `memory` (0: no limit of
    its own, the port's rate).

    CDMA stages the response beats in a single-ported buffer and reads each CBUF entry back out of it;
    every read-out blocks the response path for timing.cdma_entry_blocked_cycles (hw@master
    vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v: dma_rd_rsp_rdy = ~is_blocking, is_blocking raised for one cycle
    per entry read). An entry of E bytes (cbuf.bank_width_bytes) from beats of B bytes (the port width)
    takes E/B + blocked cycles. Measured on nv_small_256_full (E 32, B 8, 1 cycle): 0.801 beats a cycle
    (6.4 B) on the 8 KB input of a one-kernel reduction (docs/validation.md 5e)."""
    blocked = hw.timing.cdma_entry_blocked_cycles
    if not blocked:
        return 0.0
    entry = hw.cbuf.bank_width_bytes
    return entry / (entry / beat_bytes(hw, memory) + blocked)
