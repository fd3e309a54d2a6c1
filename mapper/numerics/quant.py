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

import enum
import math
from dataclasses import dataclass

import numpy as np

from nvdla_sim.precision import Precision
from nvdla_sim.units.sdp import Convertor, SdpParams, Stage

QMAX = {Precision.INT8: 127, Precision.INT16: 32767}
MULT_BITS = 15  # INT16 operands: magnitude < 2**15


class Granularity(enum.Enum):
    PER_TENSOR = "per-tensor"
    PER_CHANNEL = "per-channel"


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
    x1 = None
    if bias is not None:
        qb = np.round(np.asarray(bias, np.float64) / (s_x * s_w)).astype(np.int64)
        # 16-bit operand with a left shift: keep the top 15 bits of the bias.
        big = int(np.max(np.abs(qb))) if qb.size else 0
        shift = max(0, big.bit_length() - MULT_BITS)
        x1 = Stage(alu_operand=np.round(qb / 2**shift).astype(np.int64), alu_shift=shift, relu=relu)
    elif relu:
        x1 = Stage(relu=True)
    m = s_x * s_w / s_y
    if granularity is Granularity.PER_TENSOR:
        scale, shift = multiplier_to_scale_shift(float(m.reshape(-1)[0]))
        return SdpParams(x1=x1, cvt=Convertor(0, scale, shift), out_precision=out_precision)
    pairs = [multiplier_to_scale_shift(float(v)) for v in m.reshape(-1)]
    shift = min(p[1] for p in pairs)  # one MUL_SHIFT for the layer: use the smallest, rescale the others
    scales = np.array([round(float(v) * 2**shift) for v in m.reshape(-1)], np.int64)
    return SdpParams(x1=x1, x2=Stage(mul_operand=np.maximum(scales, 1), mul_shift=shift), out_precision=out_precision)
