"""CDMA: bytes fetched from memory into CBUF, and the NVDLA in-memory formats (functional).

Feature cubes are stored as surfaces of memory atoms (doc/hw/format.rst): channel-within-atom fastest,
then W, then H, then the atom (surface) index. Weights for direct convolution are stored kernel group by
kernel group in the order CSC consumes them. Request sizes are rounded up to memory atoms.
"""

from __future__ import annotations

import math

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision

WEIGHT_ALIGN_BYTES = 128  # D_WEIGHT_BYTES must be 128-byte aligned (programming_guide.rst)


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


def weight_bytes(kernels: int, bytes_per_kernel: int) -> int:
    """Dense weight bytes for `kernels` kernels, 128-byte aligned as CDMA fetches them."""
    return math.ceil(kernels * bytes_per_kernel / WEIGHT_ALIGN_BYTES) * WEIGHT_ALIGN_BYTES


def to_feature_memory(x: np.ndarray, precision: Precision, hw: HwConfig) -> np.ndarray:
    """Lay out x[H, W, C] in NVDLA feature format; returns uint8 bytes (surface-major)."""
    h, w, c = x.shape
    ab = hw.memory.memory_atomic_bytes
    b = np.ascontiguousarray(x.astype(precision.numpy_dtype)).view(np.uint8).reshape(h, w, c * precision.bytes)
    surfaces = math.ceil(c * precision.bytes / ab)
    padded = np.zeros((h, w, surfaces * ab), np.uint8)
    padded[:, :, : b.shape[2]] = b
    return np.ascontiguousarray(padded.reshape(h, w, surfaces, ab).transpose(2, 0, 1, 3)).reshape(-1)


def from_feature_memory(buf: np.ndarray, shape: tuple[int, int, int], precision: Precision, hw: HwConfig):
    """Inverse of to_feature_memory: bytes -> x[H, W, C]."""
    h, w, c = shape
    ab = hw.memory.memory_atomic_bytes
    surfaces = math.ceil(c * precision.bytes / ab)
    cube = buf.reshape(surfaces, h, w, ab).transpose(1, 2, 0, 3).reshape(h, w, surfaces * ab)
    flat = np.ascontiguousarray(cube[:, :, : c * precision.bytes])
    return flat.view(precision.numpy_dtype).reshape(h, w, c)


def to_weight_memory(wt: np.ndarray, precision: Precision, hw: HwConfig) -> np.ndarray:
    """Lay out weights wt[K, R, S, C] for direct convolution: kernel group -> (r, s) -> C block -> kernel -> C.

    Returns uint8 bytes, zero-padded to WEIGHT_ALIGN_BYTES.
    """
    k, r, s, c = wt.shape
    kpg = hw.kernels_per_atomic(precision)
    ac = hw.mac.atomic_c
    groups, blocks = math.ceil(k / kpg), math.ceil(c / ac)
    full = np.zeros((groups * kpg, r, s, blocks * ac), precision.numpy_dtype)
    full[:k, :, :, :c] = wt
    # [G, kpg, R, S, B, ac] -> [G, R, S, B, kpg, ac]
    v = full.reshape(groups, kpg, r, s, blocks, ac).transpose(0, 2, 3, 4, 1, 5)
    # Drop padding kernels of the last group and padding channels of the last block by masking.
    keep_k = (np.arange(groups * kpg) < k).reshape(groups, kpg)
    keep_c = (np.arange(blocks * ac) < c).reshape(blocks, ac)
    mask = keep_k[:, None, None, None, :, None] & keep_c[None, None, None, :, None, :]
    mask = np.broadcast_to(mask, v.shape)
    data = np.ascontiguousarray(v[mask]).view(np.uint8)
    return np.concatenate([data, np.zeros(weight_bytes(1, data.size) - data.size, np.uint8)])


def from_weight_memory(buf: np.ndarray, shape: tuple[int, int, int, int], precision: Precision, hw: HwConfig):
    """Inverse of to_weight_memory."""
    k, r, s, c = shape
    kpg = hw.kernels_per_atomic(precision)
    ac = hw.mac.atomic_c
    groups, blocks = math.ceil(k / kpg), math.ceil(c / ac)
    v = np.zeros((groups, r, s, blocks, kpg, ac), precision.numpy_dtype)
    keep_k = (np.arange(groups * kpg) < k).reshape(groups, kpg)
    keep_c = (np.arange(blocks * ac) < c).reshape(blocks, ac)
    mask = np.broadcast_to(keep_k[:, None, None, None, :, None] & keep_c[None, None, None, :, None, :], v.shape)
    n = int(mask.sum()) * precision.bytes
    v[mask] = np.ascontiguousarray(buf[:n]).view(precision.numpy_dtype)
    full = v.transpose(0, 4, 1, 2, 3, 5).reshape(groups * kpg, r, s, blocks * ac)
    return full[:k, :, :, :c]
