"""CBUF: convolution buffer capacity, entry accounting and a functional entry store.

Entry math follows the NVDLA compiler (nvdla/sw ConvCoreNode calculateEPS) and programming_guide.rst
"Convolution pipeline programming": data uses ENTRY_PER_SLICE entries per input row, weights
ceil(bytes / entry_bytes) entries; data and weights occupy disjoint bank ranges (D_BANK).
"""

from __future__ import annotations

import math

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import ShapeError
from nvdla_sim.precision import Precision


def atoms_per_entry(hw: HwConfig) -> int:
    return hw.cbuf_entry_bytes // hw.memory.memory_atomic_bytes


def entry_per_slice(width: int, channels: int, precision: Precision, hw: HwConfig) -> int:
    """CBUF entries one input row (slice) of `width` pixels x `channels` occupies (D_ENTRY_PER_SLICE)."""
    atoms = math.ceil(channels * precision.bytes / hw.memory.memory_atomic_bytes)
    per = atoms_per_entry(hw)
    full, last = divmod(atoms, per)
    eps = full * width
    if last:
        filled = 1 << (last - 1).bit_length()  # partial entries pack 1/2, 1/4 ... of an entry per pixel
        eps += math.ceil(width / (per // filled))
    return eps


def data_entries(width: int, rows: int, channels: int, precision: Precision, hw: HwConfig) -> int:
    return entry_per_slice(width, channels, precision, hw) * rows


def image_entries(padded_width: int, rows: int, channels: int, precision: Precision, hw: HwConfig) -> int:
    """CBUF entries of an image-mode input band: pixels packed compactly (C padded to 1/2/4)."""
    packed = 1 << (channels - 1).bit_length()
    return math.ceil(padded_width * packed * precision.bytes / hw.cbuf_entry_bytes) * rows


def weight_entries(kernels: int, bytes_per_kernel: int, hw: HwConfig) -> int:
    return math.ceil(kernels * bytes_per_kernel / hw.cbuf_entry_bytes)


def banks_for(entries: int, hw: HwConfig) -> int:
    return math.ceil(entries / hw.cbuf_entries_per_bank)


def check_bank_split(data_banks: int, weight_banks: int, hw: HwConfig) -> None:
    """Raise unless data_banks + weight_banks fit the CBUF and each side has at least one bank."""
    if data_banks < 1 or weight_banks < 1:
        raise ShapeError(f"CBUF split needs >= 1 data and >= 1 weight bank, not {data_banks}/{weight_banks}")
    if data_banks + weight_banks > hw.cbuf.bank_count:
        raise ShapeError(
            f"CBUF split {data_banks} data + {weight_banks} weight banks exceeds {hw.cbuf.bank_count} banks of {hw.name}"
        )


class CbufStore:
    """Functional CBUF: banks of `entries_per_bank` entries of `entry_bytes` bytes, written and read whole."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.mem = np.zeros((hw.cbuf.bank_count * hw.cbuf_entries_per_bank, hw.cbuf_entry_bytes), np.uint8)

    def write(self, first_bank: int, entries: np.ndarray) -> None:
        start = first_bank * self.hw.cbuf_entries_per_bank
        if start + len(entries) > len(self.mem):
            raise ShapeError(
                f"CBUF write of {len(entries)} entries from bank {first_bank} overflows {self.hw.cbuf.bank_count} banks"
            )
        self.mem[start : start + len(entries)] = entries

    def read(self, first_bank: int, count: int) -> np.ndarray:
        start = first_bank * self.hw.cbuf_entries_per_bank
        return self.mem[start : start + count].copy()


def pack_feature_rows(x: np.ndarray, precision: Precision, hw: HwConfig) -> np.ndarray:
    """Pack an input cube x[H, W, C] into CBUF entries (uint8[entries, entry_bytes]) slice by slice.

    Per slice: full entries (atoms_per_entry memory atoms of one pixel) ordered channel-group-major then W;
    a partial last channel group packs several pixels per entry. The entry count equals entry_per_slice * H.
    """
    h, w, c = x.shape
    ab = hw.memory.memory_atomic_bytes
    per = atoms_per_entry(hw)
    raw = _pixel_atoms(x, precision, ab)  # [H, W, atoms, ab]
    atoms = raw.shape[2]
    full, last = divmod(atoms, per)
    eb = hw.cbuf_entry_bytes
    rows = []
    for r in range(h):
        ent = [raw[r, :, g * per : (g + 1) * per].reshape(w, eb) for g in range(full)]
        if last:
            filled = 1 << (last - 1).bit_length()
            pix_per_entry = per // filled
            part = np.zeros((w, filled, ab), np.uint8)
            part[:, :last] = raw[r, :, full * per :]
            part = part.reshape(w, filled * ab)
            n = math.ceil(w / pix_per_entry)
            padded = np.zeros((n * pix_per_entry, filled * ab), np.uint8)
            padded[:w] = part
            ent.append(padded.reshape(n, eb))
        rows.append(np.concatenate(ent) if ent else np.zeros((0, eb), np.uint8))
    out = np.concatenate(rows)
    assert len(out) == data_entries(w, h, c, precision, hw)
    return out


def unpack_feature_rows(entries: np.ndarray, shape: tuple[int, int, int], precision: Precision, hw: HwConfig):
    """Inverse of pack_feature_rows."""
    h, w, c = shape
    ab = hw.memory.memory_atomic_bytes
    per = atoms_per_entry(hw)
    atoms = math.ceil(c * precision.bytes / ab)
    full, last = divmod(atoms, per)
    eps = entry_per_slice(w, c, precision, hw)
    raw = np.zeros((h, w, atoms, ab), np.uint8)
    for r in range(h):
        sl = entries[r * eps : (r + 1) * eps]
        for g in range(full):
            raw[r, :, g * per : (g + 1) * per] = sl[g * w : (g + 1) * w].reshape(w, per, ab)
        if last:
            filled = 1 << (last - 1).bit_length()
            part = sl[full * w :].reshape(-1, filled, ab)[:w]
            raw[r, :, full * per :] = part[:, :last]
    return _atoms_to_pixels(raw, c, precision)


def _pixel_atoms(x: np.ndarray, precision: Precision, ab: int) -> np.ndarray:
    h, w, c = x.shape
    b = np.ascontiguousarray(x.astype(precision.numpy_dtype)).view(np.uint8).reshape(h, w, c * precision.bytes)
    atoms = math.ceil(c * precision.bytes / ab)
    out = np.zeros((h, w, atoms * ab), np.uint8)
    out[:, :, : b.shape[2]] = b
    return out.reshape(h, w, atoms, ab)


def _atoms_to_pixels(raw: np.ndarray, c: int, precision: Precision) -> np.ndarray:
    h, w = raw.shape[:2]
    flat = np.ascontiguousarray(raw.reshape(h, w, -1)[:, :, : c * precision.bytes])
    return flat.view(precision.numpy_dtype).reshape(h, w, c)
