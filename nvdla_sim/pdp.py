"""PDP: planar data processor, max/min/average pooling over W x H (functional and cost).

Average pooling multiplies the window sum by the reciprocal registers D_RECIP_KERNEL_WIDTH/HEIGHT
(unit_description.rst PDP), modelled as 16-bit fractions round(2**16 / k) with one final rounding.
Padded positions take D_POOLING_PADDING_VALUE (0 by default); for max/min pooling they are ignored
unless a padding value is given explicitly.
"""

from __future__ import annotations

import math

import numpy as np

from .config import HwConfig
from .layers import PoolMode, PoolSpec
from .precision import Precision, saturate, shift_round

RECIP_BITS = 16


def recip(k: int) -> int:
    return round((1 << RECIP_BITS) / k)


def pool(
    x: np.ndarray,
    spec: PoolSpec,
    precision: Precision,
    *,
    pad_value: int | float | None = None,
    bits: int | None = None,
) -> np.ndarray:
    """Pool x[H, W, C]; returns [H', W', C] in the input precision, or saturated to `bits` (int64) when given
    (pooling the raw INT32 CACC results of a layer without an SDP conversion)."""
    h, w, c = x.shape
    ow, oh = spec.out_size(w, h)
    is_float = precision.is_float
    acc_t = np.float32 if is_float else np.int64
    if spec.mode is PoolMode.AVG:
        fill = 0 if pad_value is None else pad_value
    elif pad_value is not None:
        fill = pad_value
    else:
        fill = -np.inf if spec.mode is PoolMode.MAX else np.inf
    padded = np.full((h + spec.pad_top + spec.pad_bottom, w + spec.pad_left + spec.pad_right, c), fill, np.float64)
    padded[spec.pad_top : spec.pad_top + h, spec.pad_left : spec.pad_left + w] = x
    win = np.lib.stride_tricks.sliding_window_view(padded, (spec.kernel_h, spec.kernel_w), axis=(0, 1))
    win = win[:: spec.stride_y, :: spec.stride_x][:oh, :ow]  # [oh, ow, C, kh, kw]
    if spec.mode is PoolMode.MAX:
        out = win.max(axis=(3, 4))
    elif spec.mode is PoolMode.MIN:
        out = win.min(axis=(3, 4))
    else:
        s = win.sum(axis=(3, 4))
        if is_float:
            out = s / (spec.kernel_w * spec.kernel_h)
        else:
            prod = s.astype(np.int64) * recip(spec.kernel_w) * recip(spec.kernel_h)
            out = shift_round(prod, 2 * RECIP_BITS)
    if is_float:
        return out.astype(np.float16)
    clamped, _ = saturate(np.asarray(out, acc_t).astype(np.int64), bits or 8 * precision.bytes)
    return clamped if bits else clamped.astype(precision.numpy_dtype)


def process_cycles(in_w: int, in_h: int, channels: int, spec: PoolSpec, hw: HwConfig) -> int:
    """PDP consumes input elements at pdp.throughput per cycle (each input read once; line buffer reuse)."""
    return math.ceil(in_w * in_h * channels / hw.pdp.throughput)
