"""NVDLA's memory formats (doc/hw/format.rst), the one place that lays data out in memory: feature cubes in
surfaces of one memory atom of channels (line and surface strides), and direct-convolution weights. The
register-program executor and emitter, the program generators and the tests all read and write through
these functions, which match NVIDIA's golden CRCs on the trace tests (docs/validation.md).

`mem` is any byte store with `read(addr, nbytes) -> uint8 array` and `write(addr, bytes)` (the program
runner's SparseMemory)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision


class ByteMemory(Protocol):
    def read(self, addr: int, nbytes: int) -> np.ndarray: ...

    def write(self, addr: int, data: np.ndarray) -> None: ...


@dataclass(frozen=True)
class Surface:
    """A feature cube in memory: base address and strides in bytes (doc/hw/format.rst)."""

    addr: int
    line_stride: int
    surface_stride: int


def _dtype(p: Precision) -> np.dtype:
    return np.dtype({Precision.INT8: "i1", Precision.INT16: "<i2", Precision.FP16: "<f2"}[p])


def elements_per_atom(p: Precision, hw: HwConfig) -> int:
    return hw.memory.memory_atomic_bytes // p.bytes


def cube_size(surf: Surface, c: int, p: Precision, hw: HwConfig) -> int:
    """Bytes a cube with `c` channels spans from its base address."""
    return -(-c // elements_per_atom(p, hw)) * surf.surface_stride


def read_cube(mem: ByteMemory, surf: Surface, w: int, h: int, c: int, p: Precision, hw: HwConfig) -> np.ndarray:
    """Feature cube [h, w, C'] (C' = c rounded up to whole atoms) from memory."""
    epa = elements_per_atom(p, hw)
    surfaces = math.ceil(c / epa)
    out = np.zeros((h, w, surfaces * epa), _dtype(p))
    for s, y, offset in _line_offsets(surf, surfaces, h):
        raw = mem.read(surf.addr + offset, w * hw.memory.memory_atomic_bytes)
        out[y, :, s * epa : (s + 1) * epa] = raw.view(_dtype(p)).reshape(w, epa)
    return out


def write_cube(mem: ByteMemory, surf: Surface, cube: np.ndarray, p: Precision, hw: HwConfig) -> None:
    """Write a feature cube [h, w, C'] (C' a multiple of the atom's elements) in whole atoms, line by line
    (the bytes between lines and surfaces are left as they are, as NVDLA's write DMA leaves them)."""
    for offset, line in _lines(cube, surf, p, hw):
        mem.write(surf.addr + offset, line)


def read_dc_weights(
    mem: ByteMemory, addr: int, k: int, kh: int, kw: int, c: int, p: Precision, hw: HwConfig
) -> np.ndarray:
    """Uncompressed direct-convolution weights [k, kh, kw, c] (format.rst "Basic Weight for Direct
    Convolution": groups of kernels_per_atomic kernels, C' -> K -> W -> H -> C within a group)."""
    kpg, ac = hw.kernels_per_atomic(p), hw.mac.atomic_c
    flat = mem.read(addr, k * kh * kw * c * p.bytes).view(_dtype(p))
    flat = flat if p.is_float else flat.astype(np.int64)
    out = np.zeros((k, kh, kw, c), flat.dtype)
    pos = 0
    for g0 in range(0, k, kpg):
        g = min(kpg, k - g0)
        for c0 in range(0, c, ac):
            cc = min(ac, c - c0)
            n = kh * kw * g * cc
            block = flat[pos : pos + n].reshape(kh, kw, g, cc)
            out[g0 : g0 + g, :, :, c0 : c0 + cc] = block.transpose(2, 0, 1, 3)
            pos += n
    return out


def dc_weight_bytes(weights: np.ndarray, p: Precision, hw: HwConfig) -> np.ndarray:
    """Weights [K, R, S, C] in the direct-convolution weight format (the inverse of read_dc_weights)."""
    k, kh, kw, c = weights.shape
    kpg, ac = hw.kernels_per_atomic(p), hw.mac.atomic_c
    parts = []
    for g0 in range(0, k, kpg):
        for c0 in range(0, c, ac):
            block = weights[g0 : g0 + kpg, :, :, c0 : c0 + ac]  # [g, kh, kw, cc] -> [kh, kw, g, cc]
            parts.append(np.ascontiguousarray(block.transpose(1, 2, 0, 3)).ravel())
    flat = np.concatenate(parts).astype(_dtype(p))
    return flat.view(np.uint8)


def feature_image(cube: np.ndarray, surf: Surface, p: Precision, hw: HwConfig) -> np.ndarray:
    """A cube [H, W, C] as the bytes of its feature-format region from `surf.addr` (channels padded with
    zeros, the bytes between lines and surfaces zero)."""
    h, w, c = cube.shape
    epa = elements_per_atom(p, hw)
    padded = np.zeros((h, w, -(-c // epa) * epa), _dtype(p))
    padded[:, :, :c] = cube
    out = np.zeros(cube_size(surf, c, p, hw), np.uint8)
    for offset, line in _lines(padded, surf, p, hw):
        out[offset : offset + line.size] = line
    return out


def _lines(cube: np.ndarray, surf: Surface, p: Precision, hw: HwConfig):
    """(offset from surf.addr, bytes) of each line of each surface of a cube [h, w, C'] (C' whole atoms)."""
    epa = elements_per_atom(p, hw)
    h, w, cp = cube.shape
    if cp % epa:
        raise ValueError(f"cube channels {cp} are not whole {epa}-element atoms")
    data = np.ascontiguousarray(cube.astype(_dtype(p)))
    for s, y, offset in _line_offsets(surf, cp // epa, h):
        yield offset, data[y, :, s * epa : (s + 1) * epa].view(np.uint8).ravel()


def _line_offsets(surf: Surface, surfaces: int, h: int):
    """(surface, line, offset from surf.addr) of each line of each surface (format.rst's addressing)."""
    for s in range(surfaces):
        for y in range(h):
            yield s, y, s * surf.surface_stride + y * surf.line_stride
