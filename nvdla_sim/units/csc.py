"""CSC: convolution sequence controller. Splits output pixels into stripes and sequences weight loads.

Stripe rule (NV_NVDLA_CSC_sg.v "output stripe count", limits from HwConfig.stripe_limits): with R output
points left, a stripe is `upper` long while R >= 2 x upper, all of R once R <= upper, else `lower`.
Weights for the next stripe op load from CBUF while the current stripe runs, one CBUF entry per cycle,
so a stripe shorter than the load leaves a bubble (the FC-layer 6.25% efficiency in unit_description.rst;
the RTL's CSC_MIN_STRIPE, atomic_k cycles on branch master, is the same load).
A stripe's last channel op starts only when CACC's delivery buffer has a credit for each of its output
points (credit_ready); where a stripe and the next overflow it, the next waits for this one's delivery and
the CSC -> CACC latency shows as a gap (stripe_gaps).
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
    """Half the assembly buffer of our own Amaranth datapath (rtl_model.datapath_params): twice this is at
    least the longest stripe CSC issues on every shipped build."""
    return max(MIN_IDEAL_STRIPE, weight_load_cycles(hw, precision))


@lru_cache(maxsize=4096)
def stripe_lengths(pixels: int, lower: int, upper: int) -> tuple[int, ...]:
    """Stripe lengths (atomic ops) covering `pixels` output points, as CSC cuts them (module docstring)."""
    out = []
    left = pixels
    while left > upper:
        length = upper if left >= 2 * upper else lower
        out.append(length)
        left -= length
    return (*out, left)


@lru_cache(maxsize=4096)
def stripe_gaps(stripes: tuple[int, ...], credits: int, gap: int, atom_cycles: int) -> tuple[int, ...]:
    """Idle delivery cycles after each stripe of a kernel group (the one after the last is the next kernel
    group's first, which has the same stripes). The next stripe's last channel op needs a credit per output
    point; where the two stripes together overflow the `credits` CACC's delivery buffer holds, it starts
    only once the overflow has been delivered, and its first atom follows `gap` cycles later (the CSC ->
    CACC latency, 38 cycles measured on nv_small and nv_large). The atoms of this stripe still to be
    delivered by then (credits less the next stripe, at `atom_cycles` each) hide that much of the gap; a
    next stripe that fits beside this one waits for nothing."""
    n = len(stripes)
    out = []
    for i, length in enumerate(stripes):
        nxt = stripes[(i + 1) % n]
        out.append(max(0, gap - (credits - nxt) * atom_cycles) if length + nxt > credits else 0)
    return tuple(out)


def stripe_op_cycles(length: int, load_cycles: int) -> int:
    """Cycles of one stripe op: its atomic ops, or the next stripe's weight load if that is longer."""
    return max(length, load_cycles)


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
def image_stripes(out_w: int, rows: int, stripe: int) -> tuple[int, ...]:
    """Image-input stripes: `stripe` output points (HwConfig.image_stripe; unit_description.rst: "fixed at
    64" on nv_full), never crossing an output row."""
    full, rem = divmod(out_w, stripe)
    per_row = (stripe,) * full + ((rem,) if rem else ())
    return per_row * rows


def startup_cycles(first_group_kernels: int, kernels_per_group: int) -> int:
    """Cycles a hardware layer's first compute waits beyond its operands: CSC's sequence generator pops the
    first package's weights alone and its data max(K, 2) cycles later, K the package's kernels (later
    packages pop their weights with the previous package's data, hidden). hw@master NV_NVDLA_CSC_sg.v
    (nv_large's generated tree, lines 1423-1435: the package timer re-armed to max(data, weight cycles) - 1,
    a one-kernel package reserving 2); the 2 cycles of a one-kernel package are already in
    timing.conv_pipeline_cycles (measured on nv_small with one kernel), so the layer adds max(K, 2) - 2.
    Measured on the RTL logs (docs/validation.md 5c): nv_large's attention products and broadcasts (K 32)
    write their first output 30 cycles later than its one-kernel row sums."""
    return max(min(first_group_kernels, kernels_per_group), 2) - 2
