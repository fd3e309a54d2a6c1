"""Weight pruning and NVDLA weight compression (functional, and the byte counts the timing model uses).

NVDLA v1 (nv_full, WEIGHT_COMPRESSION_ENABLE) stores compressed weights as three streams that CDMA_WT
fetches (unit_description.rst CDMA; hwarch.rst "weight compression"): the non-zero weights packed in
order, a weight-mask bit per weight (WMB) and a weight-group size per kernel group (WGS). The MAC
array still performs every multiply: compression saves memory traffic and CBUF space, not MAC cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WGS_BYTES_PER_GROUP = 4  # one 32-bit size per kernel group


def prune_magnitude(w: np.ndarray, sparsity: float) -> np.ndarray:
    """Zero the `sparsity` fraction of smallest-|w| weights (ties broken by position)."""
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), not {sparsity}")
    flat = np.asarray(w).reshape(-1)
    n = round(sparsity * flat.size)
    if n == 0:
        return np.array(w, copy=True)
    order = np.argsort(np.abs(flat), kind="stable")
    out = flat.copy()
    out[order[:n]] = 0
    return out.reshape(np.shape(w))


def prune_2_4(w: np.ndarray) -> np.ndarray:
    """2:4 structured sparsity along the last (input-channel) axis: in every 4 consecutive weights keep
    the 2 largest |w|. The last axis is zero-padded to a multiple of 4 internally."""
    w = np.asarray(w)
    c = w.shape[-1]
    pad = (-c) % 4
    wp = np.concatenate([w, np.zeros((*w.shape[:-1], pad), w.dtype)], axis=-1) if pad else w
    groups = wp.reshape(*wp.shape[:-1], -1, 4)
    order = np.argsort(np.abs(groups), axis=-1, kind="stable")
    mask = np.ones_like(groups, dtype=bool)
    np.put_along_axis(mask, order[..., :2], False, axis=-1)
    out = np.where(mask, groups, 0).reshape(wp.shape)
    return out[..., :c]


def is_2_4(w: np.ndarray) -> bool:
    w = np.asarray(w)
    pad = (-w.shape[-1]) % 4
    wp = np.concatenate([w, np.zeros((*w.shape[:-1], pad), w.dtype)], axis=-1) if pad else w
    return bool(np.all(np.count_nonzero(wp.reshape(*wp.shape[:-1], -1, 4), axis=-1) <= 2))


@dataclass(frozen=True)
class CompressedWeights:
    values: np.ndarray  # non-zero weights in stream order
    mask: np.ndarray  # packed WMB bits (uint8), one bit per weight
    group_sizes: np.ndarray  # WGS: non-zero count per kernel group
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.mask.nbytes + self.group_sizes.size * WGS_BYTES_PER_GROUP


def compress(w: np.ndarray, *, kernels_per_group: int) -> CompressedWeights:
    """Compress weights w[K, ...] (kernel-major stream order) into values + WMB + WGS."""
    w = np.asarray(w)
    flat = w.reshape(w.shape[0], -1)
    nz = flat != 0
    sizes = [int(nz[k0 : k0 + kernels_per_group].sum()) for k0 in range(0, w.shape[0], kernels_per_group)]
    return CompressedWeights(
        values=flat[nz].copy(),
        mask=np.packbits(nz.reshape(-1)),
        group_sizes=np.array(sizes, np.int64),
        shape=w.shape,
        dtype=w.dtype,
    )


def decompress(c: CompressedWeights) -> np.ndarray:
    n = math.prod(c.shape)
    nz = np.unpackbits(c.mask)[:n].astype(bool)
    out = np.zeros(n, c.dtype)
    out[nz] = c.values
    return out.reshape(c.shape)


def compressed_bytes(dense_bytes: int, *, density: float, element_bytes: int, kernel_groups: int) -> int:
    """Estimated compressed size of `dense_bytes` of weights with the given non-zero density."""
    if not 0 <= density <= 1:
        raise ValueError(f"density must be in [0, 1], not {density}")
    weights = dense_bytes // element_bytes
    nonzero = math.ceil(round(weights * density, 6))  # round first: density is often nnz / n in floating point
    return nonzero * element_bytes + math.ceil(weights / 8) + kernel_groups * WGS_BYTES_PER_GROUP
