"""Post-training INT8 quantization and its NVDLA SDP requantize parameters (pure numpy).

Symmetric quantization (zero point 0, as NVDLA's integer convolution expects): q = clip(round(x / s)).
Calibration picks the clipping range per tensor or per output channel from calibration data, by max
or by a percentile of |x|. A layer's INT32 accumulator has scale s_x * s_w[k]; bringing it to the
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


@dataclass(frozen=True)
class Calibration:
    """'max' or 'percentile:P' (P in (0, 100])."""

    method: str = "max"
    percentile: float = 100.0

    @classmethod
    def parse(cls, text: str) -> Calibration:
        if text == "max":
            return cls("max", 100.0)
        name, _, value = text.partition(":")
        if name == "percentile":
            try:
                p = float(value)
            except ValueError:
                p = -1.0
            if 0 < p <= 100:
                return cls("percentile", p)
        raise ValueError(f"calibration must be 'max' or 'percentile:P' with 0 < P <= 100, not {text!r}")

    def amax(self, x: np.ndarray, *, axis: int | None = None) -> np.ndarray:
        """Clipping magnitude of x (over all elements, or per index of `axis`)."""
        a = np.abs(np.asarray(x, np.float64))
        if axis is not None:
            a = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
            red = np.max(a, axis=1) if self.method == "max" else np.percentile(a, self.percentile, axis=1)
        else:
            red = np.max(a) if self.method == "max" else np.percentile(a, self.percentile)
        return np.maximum(np.asarray(red, np.float64), 1e-12)


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
