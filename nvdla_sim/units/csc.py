"""CSC: convolution sequence controller. Splits output pixels into stripes and sequences weight loads.

Stripe rule (programming_guide.rst CSC.D_ATOMICS and the v1 cmod): stripes of `ideal` atomic ops, the
remainder merged into the last stripe (so ideal..2*ideal-1), or the whole count when fewer than `ideal`.
Weights for the next stripe op load from CBUF while the current stripe runs, one CBUF entry per cycle,
so a stripe shorter than the load leaves a bubble (the FC-layer 6.25% efficiency in unit_description.rst).
"""

from __future__ import annotations

import math
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision

MIN_IDEAL_STRIPE = 16  # unit_description.rst: stripe lower limit 16 atomic ops (nv_full)


def weight_load_cycles(hw: HwConfig, precision: Precision) -> int:
    """Cycles to load one stripe's weights (atomic_c x kernels_per_atomic elements) from CBUF."""
    bytes_per_stripe = hw.mac.atomic_c * hw.kernels_per_atomic(precision) * precision.bytes
    return math.ceil(bytes_per_stripe / hw.cbuf_entry_bytes)


def ideal_stripe(hw: HwConfig, precision: Precision) -> int:
    return max(MIN_IDEAL_STRIPE, weight_load_cycles(hw, precision))


@lru_cache(maxsize=4096)
def stripe_lengths(pixels: int, ideal: int) -> tuple[int, ...]:
    """Stripe lengths (atomic ops) covering `pixels` output points."""
    if pixels <= ideal:
        return (pixels,)
    n, rem = divmod(pixels, ideal)
    stripes = [ideal] * n
    stripes[-1] += rem
    return tuple(stripes)


def stripe_op_cycles(length: int, load_cycles: int) -> int:
    """Cycles of one stripe op: its atomic ops, or the next stripe's weight load if that is longer."""
    return max(length, load_cycles)


IMAGE_STRIPE = 64  # unit_description.rst image mode: "stripe length fixed at 64", never crossing a line


def image_extension(channels: int, kernel_w: int, stride_x: int) -> tuple[int, int]:
    """(channels per atom group, lines merged) for image-input mode.

    Weights are channel pre-extended, folding the kernel width into channels (C' = C x S); channel
    post-extension merges 2 or 4 kernel lines into one atom when conv_x_stride x C' <= 32 / 16
    (unit_description.rst "Channel post-extension"; its 4x4x4 example: C' = 16 is 25% efficient, 4-line
    post-extension 100%). The limit is applied to the pre-extended C' (the conservative reading).
    """
    pre = channels * kernel_w
    lines = 4 if stride_x * pre <= 16 else 2 if stride_x * pre <= 32 else 1
    return pre * lines, lines


@lru_cache(maxsize=4096)
def image_stripes(out_w: int, rows: int) -> tuple[int, ...]:
    """Stripes of up to 64 output points that never cross an output row."""
    full, rem = divmod(out_w, IMAGE_STRIPE)
    per_row = (IMAGE_STRIPE,) * full + ((rem,) if rem else ())
    return per_row * rows
