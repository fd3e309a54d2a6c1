"""PDP: planar data processor, max/min/average pooling over W x H (functional and cost).

Integer average pooling is the hardware's (hw@master:cmod/pdp/NV_NVDLA_pdp.cpp, checked on the nv_small
RTL's pdp_* trace tests): the window sum, plus the padding contribution, is multiplied by the reciprocal
register D_RECIP_KERNEL_WIDTH (a 16-bit fraction) and rounded, then by D_RECIP_KERNEL_HEIGHT and rounded
again (half away from zero). Padding enters the sum through D_POOLING_PADDING_VALUE_n, the registers that
hold the contribution of n padded elements: each valid row of a window adds the value for its n padded
columns (left and right), and each side's n padded rows add kernel_width times the value for n. Max/min
pooling look at the valid elements only. With no registers given, the reciprocals are round(2**16 / k) and
the n-element padding value n * pad_value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.layers import PoolMode, PoolSpec
from nvdla_sim.precision import Precision, saturate, shift_round

RECIP_BITS = 16
MAX_PADDING = 7  # D_POOLING_PADDING_VALUE_1..7


def recip(k: int) -> int:
    return round((1 << RECIP_BITS) / k)


def pool(
    x: np.ndarray,
    spec: PoolSpec,
    precision: Precision,
    *,
    pad_value: int | float | None = None,
    bits: int | None = None,
    recips: tuple[int, int] | None = None,
    pad_values: Sequence[int] | None = None,
) -> np.ndarray:
    """Pool x[H, W, C]; returns [H', W', C] in the input precision, or saturated to `bits` (int64) when given
    (pooling the raw INT32 CACC results of a layer without an SDP conversion). `recips` (width, height) and
    `pad_values` (7 values: n = 1..7 padded elements) are the PDP registers; see the module doc."""
    h, w, c = x.shape
    ow, oh = spec.out_size(w, h)
    if precision.is_float or spec.mode is not PoolMode.AVG:
        return _pool_window(x, spec, precision, pad_value=pad_value, bits=bits, out=(oh, ow))
    if pad_values is None:
        v = 0 if pad_value is None else int(pad_value)
        pad_values = [n * v for n in range(1, MAX_PADDING + 1)]
    pads = np.array([0, *pad_values], np.int64)
    rw, rh = recips if recips is not None else (recip(spec.kernel_w), recip(spec.kernel_h))
    padded = np.zeros((h + spec.pad_top + spec.pad_bottom, w + spec.pad_left + spec.pad_right, c), np.int64)
    padded[spec.pad_top : spec.pad_top + h, spec.pad_left : spec.pad_left + w] = x
    win = np.lib.stride_tricks.sliding_window_view(padded, (spec.kernel_h, spec.kernel_w), axis=(0, 1))
    total = win[:: spec.stride_y, :: spec.stride_x][:oh, :ow].sum(axis=(3, 4))  # valid elements only
    nl, nr = _padded_counts(ow, spec.stride_x, spec.kernel_w, spec.pad_left, w)
    nt, nb = _padded_counts(oh, spec.stride_y, spec.kernel_h, spec.pad_top, h)
    rows_valid = spec.kernel_h - nt - nb
    total = total + (rows_valid[:, None] * (pads[nl] + pads[nr])[None, :])[..., None]
    total = total + (spec.kernel_w * (pads[nt] + pads[nb]))[:, None, None]
    out = shift_round(shift_round(total * rw, RECIP_BITS) * rh, RECIP_BITS)
    if bits:
        return saturate(out, bits)[0]
    return saturate(out, 8 * precision.bytes)[0].astype(precision.numpy_dtype)


def _padded_counts(n_out: int, stride: int, kernel: int, pad_before: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Padded positions before and after the input in each output window along one axis."""
    start = np.arange(n_out) * stride - pad_before
    before = np.clip(-start, 0, kernel)
    after = np.clip(start + kernel - size, 0, kernel)
    return before, after


def _pool_window(
    x: np.ndarray, spec: PoolSpec, precision: Precision, *, pad_value, bits: int | None, out: tuple[int, int]
) -> np.ndarray:
    """Max/min (any precision) and float average pooling."""
    h, w, c = x.shape
    oh, ow = out
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
        res = win.max(axis=(3, 4))
    elif spec.mode is PoolMode.MIN:
        res = win.min(axis=(3, 4))
    else:
        res = win.sum(axis=(3, 4)) / (spec.kernel_w * spec.kernel_h)
    if precision.is_float:
        return res.astype(np.float16)
    clamped, _ = saturate(res.astype(np.int64), bits or 8 * precision.bytes)
    return clamped if bits else clamped.astype(precision.numpy_dtype)


def line_positions(in_w: int, in_h: int, spec: PoolSpec) -> tuple[int, int]:
    """Positions (one atom each) PDP steps through per surface, measured on NVIDIA's nv_small RTL with our
    own pdp programs (validation/nvdla_rtl/own_programs.py, docs/modelling.md):

    - each input line takes max(input width, output width) steps: left and right padding that widens the
      output costs its extra columns (stride 1; strided windows over heavy padding take 1-3 more);
    - after the last line, every output row with at least stride_y padded lines at the bottom of its
      window is emitted in a pass of its own (output width steps); top padding costs nothing.

    Returns (steps per surface, flush steps): the flush of one surface mostly overlaps the next
    surface's lines, so only the last surface's is charged (8 surfaces of a 2x2 window cost one flush;
    two surfaces of a 16x16 cube with two flush rows each cost both, which this undercounts by 5%).
    """
    ow, oh = spec.out_size(in_w, in_h)
    flush = 0
    for oy in range(oh):
        padded_below = oy * spec.stride_y - spec.pad_top + spec.kernel_h - in_h
        if padded_below >= spec.stride_y:
            flush += 1
    return in_h * max(in_w, ow), flush * ow


def elements_per_cycle(hw: HwConfig, precision: Precision) -> int:
    """Input elements PDP takes a cycle: PDP_THROUGHPUT bytes' worth. Its data path carries throughput x
    8 bits (nvdla/hw branch nvdlav1, NV_NVDLA_PDP_core.v: pdp_rdma2dp_pd is 76 bits, 64 of data on nv_full's
    PDP_THROUGHPUT_8), so INT16 and FP16 pool half as many elements a cycle as INT8: measured on nv_full's
    RTL, pdp_max_pooling_int16 (8x8x64, 2x2) took 1,109 cycles for 4,096 elements (docs/validation.md 5h)."""
    return max(1, hw.pdp.throughput // precision.bytes)
