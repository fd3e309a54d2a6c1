"""Post-training INT8 quantization and its NVDLA SDP requantize parameters (pure numpy).

Symmetric quantization (zero point 0, as NVDLA's integer convolution expects): q = clip(round(x / s)).
Calibration picks the clipping range per tensor or per output channel from calibration data, by max,
by a percentile of |x|, or by entropy (KL divergence, TensorRT's calibrator; activations). A layer's INT32 accumulator has scale s_x * s_w[k]; bringing it to the
output scale s_y needs the multiplier M[k] = s_x * s_w[k] / s_y, which NVDLA applies as an integer
multiply and a rounded right shift: per tensor in the SDP output convertor (CVT_SCALE INT16,
CVT_SHIFT), per channel in SDP X2 (BN MUL per-kernel operand, 16-bit, MUL_SHIFT) with the convertor
passing through. The bias (scale s_x * s_w[k]) goes to X1 as a 16-bit operand with a left shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nvdla_mapper.options import Granularity
from nvdla_sim.precision import Precision
from nvdla_sim.units.sdp import Convertor, EwStage, SdpParams, Stage

QMAX = {Precision.INT8: 127, Precision.INT16: 32767}
MULT_BITS = 15  # INT16 operands: magnitude < 2**15


ENTROPY_BINS = 2048  # TensorRT's entropy calibrator: a 2,048-bin histogram of |x| ...
ENTROPY_LEVELS = 128  # ... quantized to the 128 magnitudes of INT8 (Migacz, "8-bit Inference with TensorRT", GTC 2017)


def entropy_threshold(
    absx: np.ndarray, *, bins: int = ENTROPY_BINS, levels: int = ENTROPY_LEVELS
) -> tuple[float, np.ndarray]:
    """The clipping magnitude that keeps the most information of |x| at `levels` magnitudes (entropy / KL
    calibration, as TensorRT's and NVIDIA's pytorch-quantization do it): for every candidate of i >= levels
    histogram bins, P is the histogram clipped at bin i with the clipped tail added to its last bin, Q the
    first i bins merged into `levels` equal runs of bins, each run's count spread evenly over its
    non-empty bins; the threshold is the upper edge of bin i whose KL(P || Q) is least (the first, on
    ties). Returns (threshold, KL per candidate i = levels..bins), KL infinite where Q drops a bin P has."""
    a = np.abs(np.asarray(absx, np.float64)).ravel()
    top = float(a.max()) if a.size else 0.0
    if top <= 0:
        return 1e-12, np.zeros(bins - levels + 1)
    hist, edges = np.histogram(a, bins=bins, range=(0.0, top))
    hist = hist.astype(np.float64)
    kls = np.empty(bins - levels + 1)
    for j, i in enumerate(range(levels, bins + 1)):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        size, extra = divmod(i, levels)  # runs as np.array_split makes them: the first `extra` one bin longer
        run = np.repeat(np.arange(levels), [size + 1] * extra + [size] * (levels - extra))
        filled = hist[:i] > 0
        sums = np.bincount(run, weights=hist[:i], minlength=levels)
        counts = np.bincount(run, weights=filled, minlength=levels)
        q = np.where(filled, sums[run] / np.maximum(counts[run], 1), 0.0)
        p /= p.sum()
        total = q.sum()
        if total == 0:
            kls[j] = np.inf
            continue
        q /= total
        has = p > 0
        kls[j] = np.inf if np.any(q[has] == 0) else float(np.sum(p[has] * np.log(p[has] / q[has])))
    best = int(np.argmin(kls))
    return float(edges[levels + best]), kls


@dataclass(frozen=True)
class Calibration:
    """'max', 'percentile:P' (P in (0, 100]) or 'entropy' (KL: entropy_threshold; activations only, weights
    by max as TensorRT does)."""

    method: str = "max"
    percentile: float = 100.0

    def __str__(self) -> str:
        """The spelling parse reads."""
        return f"percentile:{self.percentile:g}" if self.method == "percentile" else self.method

    @classmethod
    def parse(cls, text: str) -> Calibration:
        if text == "max":
            return cls("max", 100.0)
        if text == "entropy":
            return cls("entropy", 100.0)
        name, _, value = text.partition(":")
        if name == "percentile":
            try:
                p = float(value)
            except ValueError:
                p = -1.0
            if 0 < p <= 100:
                return cls("percentile", p)
        raise ValueError(f"calibration must be 'max', 'percentile:P' with 0 < P <= 100 or 'entropy', not {text!r}")

    def amax(self, x: np.ndarray, *, axis: int | None = None) -> np.ndarray:
        """Clipping magnitude of activations x (over all elements, or per index of `axis`)."""
        if self.method == "entropy":
            if axis is not None:
                raise ValueError("entropy calibration is per tensor (activations); weights take weight_amax")
            return np.asarray(max(entropy_threshold(x)[0], 1e-12))
        a = np.abs(np.asarray(x, np.float64))
        if axis is not None:
            a = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
            red = np.max(a, axis=1) if self.method == "max" else np.percentile(a, self.percentile, axis=1)
        else:
            red = np.max(a) if self.method == "max" else np.percentile(a, self.percentile)
        return np.maximum(np.asarray(red, np.float64), 1e-12)

    def weight_amax(self, w: np.ndarray, *, axis: int | None = None) -> np.ndarray:
        """Clipping magnitude of weights: as amax, except that entropy calibration keeps the weights' max
        (TensorRT calibrates activations only; weights are known, and per channel by max)."""
        if self.method == "entropy":
            return Calibration("max").amax(w, axis=axis)
        return self.amax(w, axis=axis)


def scale_for(amax: np.ndarray, precision: Precision = Precision.INT8) -> np.ndarray:
    return np.asarray(amax, np.float64) / QMAX[precision]


def quantize(x: np.ndarray, scale: np.ndarray | float, precision: Precision = Precision.INT8) -> np.ndarray:
    """Round half away from zero and saturate; `scale` broadcasts against x."""
    q = QMAX[precision]
    v = np.asarray(x, np.float64) / scale
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.clip(r, -q - 1, q).astype(precision.numpy_dtype)


def dequantize(q: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    return np.asarray(q, np.float64) * scale


def multiplier_to_scale_shift(m: float) -> tuple[int, int]:
    """Integer (scale, shift) with scale / 2**shift ~ m, |scale| < 2**15, shift in 0..63 (round to nearest)."""
    if m <= 0 or not math.isfinite(m):
        raise ValueError(f"requantize multiplier must be positive and finite, not {m}")
    shift = 0
    while shift < 63 and round(m * 2 ** (shift + 1)) < 2**MULT_BITS:
        shift += 1
    scale = round(m * 2**shift)
    if scale >= 2**MULT_BITS:
        raise ValueError(f"requantize multiplier {m} is too large for an INT16 scale with shift >= 0")
    return max(scale, 1), shift


def _bias_stage(bias: np.ndarray | None, s_acc: np.ndarray, *, relu: bool = False) -> Stage | None:
    """X1 adding the bias (scale s_acc per kernel) as a 16-bit operand with a left shift keeping its top
    15 bits (None: no bias and no ReLU)."""
    if bias is None:
        return Stage(relu=True) if relu else None
    qb = np.round(np.asarray(bias, np.float64) / s_acc).astype(np.int64)
    big = int(np.max(np.abs(qb))) if qb.size else 0
    shift = max(0, big.bit_length() - MULT_BITS)
    return Stage(alu_operand=np.round(qb / 2**shift).astype(np.int64), alu_shift=shift, relu=relu)


def _multipliers(m: np.ndarray) -> tuple[np.ndarray, int]:
    """Per-kernel 16-bit multipliers and the one MUL_SHIFT a stage has for them: the smallest of their
    own shifts, the others rescaled to it."""
    pairs = [multiplier_to_scale_shift(float(v)) for v in m.reshape(-1)]
    shift = min(p[1] for p in pairs)
    return np.maximum(np.array([round(float(v) * 2**shift) for v in m.reshape(-1)], np.int64), 1), shift


def _stage_multipliers(m: np.ndarray) -> tuple[np.ndarray | int, int]:
    """_multipliers, as one register value where every kernel has the same."""
    scales, shift = _multipliers(m)
    return (int(scales[0]) if np.all(scales == scales[0]) else scales), shift


def requant_sdp(
    s_x: float,
    s_w: np.ndarray,
    s_y: float,
    *,
    bias: np.ndarray | None,
    granularity: Granularity,
    relu: bool = False,
    out_precision: Precision = Precision.INT8,
) -> SdpParams:
    """SDP program taking the INT32 accumulator (scale s_x*s_w) to `out_precision` at scale s_y."""
    s_w = np.asarray(s_w, np.float64)
    x1 = _bias_stage(bias, s_x * s_w, relu=relu)
    m = s_x * s_w / s_y
    if granularity is Granularity.PER_TENSOR:
        scale, shift = multiplier_to_scale_shift(float(m.reshape(-1)[0]))
        return SdpParams(x1=x1, cvt=Convertor(0, scale, shift), out_precision=out_precision)
    scales, shift = _multipliers(m)
    return SdpParams(x1=x1, x2=Stage(mul_operand=scales, mul_shift=shift), out_precision=out_precision)


# The fused residual add's sum is formed at an intermediate step 2**RESIDUAL_FINE_BITS times finer than
# the output's (with the element-wise unit) or the residual's (without it), so that at INT8 only the
# output convertor rounds visibly (the residual's conversion keeps 15 significant bits) and the X stages'
# 32 bits hold the sum (127 x 2**14 x the ratio of the scales, with room). At INT16 the room leaves F
# smaller and the sum is within about 2 output steps (as requant_sdp's, whose one MUL shift it shares)
RESIDUAL_FINE_BITS = 14
_X_STAGE_ROOM_BITS = 30  # the sum's magnitude in intermediate steps stays below 2**30 (X stages: 32 bits)


def residual_sdp(
    s_x: float,
    s_w: np.ndarray,
    s_y: float,
    residual: np.ndarray,
    s_r: float,
    *,
    bias: np.ndarray | None,
    eltwise_unit: bool,
    precision: Precision = Precision.INT8,
) -> SdpParams:
    """SDP program of a matmul with the residual add fused, as the mapper lowers it (lowering/rules.py
    _fused_sdp): the accumulator (scale s_x * s_w per kernel, per-channel or one weight scale) plus the
    residual's codes `residual` [P, K] (scale s_r, read per element), written at `precision` at s_y.

    With SDP's element-wise unit (`eltwise_unit`): X1 the bias, X2 the multipliers to s_i = s_y /
    2**F, Y's ALU adds the residual from E-RDMA through its convertor (s_r / s_i as an INT16 scale and a
    shift), the output convertor rounds F bits away. Without it (nv_small): X1 the bias and the
    multipliers (B-RDMA's per-kernel pairs of ALU and MUL operands) to s_i = s_r / 2**F, X2's ALU adds the
    residual shifted left by F (N-RDMA, per element: an X stage's operand has a shift and no scale, so the
    sum is formed at a step that is a power of two of the residual's), the output convertor takes s_i to
    s_y. F is RESIDUAL_FINE_BITS, less where the sum would not fit 2**30 intermediate steps or a
    multiplier its 16 bits (a ValueError where no F >= 0 does). One weight scale for all kernels makes the
    multiplier a register value."""
    s_w = np.asarray(s_w, np.float64)
    s_acc = s_x * s_w
    qmax = QMAX[precision]
    x1 = _bias_stage(bias, s_acc)
    operand = np.asarray(residual, np.int64)
    unit = s_y if eltwise_unit else s_r  # s_i = unit / 2**F
    # the sum's magnitude in intermediate steps: the output's range and the residual's, at 2**F per step
    coarse = max(s_y, s_r) / unit
    fine = min(RESIDUAL_FINE_BITS, _X_STAGE_ROOM_BITS - math.ceil(math.log2(2 * (qmax + 1) * coarse)))
    # the multipliers taking the accumulator's steps to s_i fit their 16 bits
    fine = min(fine, math.floor(math.log2((2**MULT_BITS - 1) / float(np.max(s_acc) / unit))))
    if eltwise_unit:
        fine = min(fine, RESIDUAL_FINE_BITS - max(0, math.ceil(math.log2(s_r / s_y))))  # s_r / s_i fits INT16
        if fine < 0:
            raise ValueError(
                f"residual scale {s_r:g} or accumulator steps are too coarse for an output scale of {s_y:g}"
            )
        s_i = s_y / 2**fine
        scales, shift = _stage_multipliers(s_acc / s_i)
        scale, cvt_shift = multiplier_to_scale_shift(s_r / s_i)
        return SdpParams(
            x1=x1,
            x2=Stage(mul_operand=scales, mul_shift=shift),
            y=EwStage(alu_operand=operand, alu_cvt=Convertor(0, scale, cvt_shift)),
            cvt=Convertor(0, 1, fine),
            out_precision=precision,
        )
    if fine < 0:
        raise ValueError(
            f"accumulator steps up to {float(np.max(s_acc)):g} are too coarse for a residual scale of {s_r:g}"
        )
    s_i = s_r / 2**fine
    scales, shift = _stage_multipliers(s_acc / s_i)
    bias_stage = x1 or Stage()
    x1 = Stage(alu_operand=bias_stage.alu_operand, alu_shift=bias_stage.alu_shift, mul_operand=scales, mul_shift=shift)
    scale, cvt_shift = multiplier_to_scale_shift(s_i / s_y)
    return SdpParams(
        x1=x1,
        x2=Stage(alu_operand=operand, alu_shift=fine),
        cvt=Convertor(0, scale, cvt_shift),
        out_precision=precision,
    )
