"""LayerNorm and RMSNorm as NVDLA computes them on a build with SDP's LUT and element-wise unit: the
program the mapper lowers (lowering/rules.py lower_layernorm) and the numbers SDP is programmed with
(issue 31, pure numpy; every step one the bit-exact model runs, nvdla_sim.units.sdp and the convolution
pipeline).

SDP has no per-pixel (per-row) operand and no reduction across channels, so a row's statistics are
1x1 convolutions: a sum over the row is one all-ones kernel, a value per row is spread over the row by
a convolution of its one channel with n all-ones kernels. The steps of a LayerNorm of x, INT8 codes
[m, n] of step s_x (`x_scale`), each a hardware layer:

1. ``sum``: a 1x1 convolution of x with one all-ones kernel (INT8), its SDP writing -mean at INT16 in
   steps of s_d = s_x / 2**7: the output convertor's signed scale -2**7 / n (CVT_SCALE is a signed
   16-bit field);
2. ``broadcast_mean``: -mean [m, 1] times n all-ones kernels (INT16), the row of -mean [m, n];
3. ``centre``: an SDP pass over x: X1 multiplies by 2**7 (a register operand), X2's ALU adds -mean from
   N-RDMA (INT16, per element), d = 2**7 (x - mean) written at INT16 (|x - mean| <= 255 codes, so
   |d| <= 32,640: it fits);
4. ``square``: an SDP pass over d (INT16): X1's multiplier by d itself from B-RDMA (per element),
   rounded over 2**T (its MUL shift) with T the fewest bits that keep the calibrated largest d**2
   within INT16;
5. ``rsqrt``: a 1x1 convolution of the squares with one all-ones kernel (INT16; the sum of n INT16
   values fits CACC's 32 bits for n < 65,536), its SDP's X1 adding n eps (a register operand in the
   squares' steps), Y's LUT looking up 1 / sqrt(V / n) and its convertor writing rstd at INT16: the LE
   table linear over four times the calibrated span of the row sums V (from half the smallest), the LO
   table linear over its low end, where 1 / sqrt bends most (rsqrt_table), both flat beyond their ends
   (a row sum below the range takes the largest rstd of the table, one above LE's end its smallest);
   measured against 1 / sqrt (tests/unit/test_layernorm_steps.py), rstd is within 0.02% where the
   calibrated variances span 4 times, 0.15% at 16, 0.5% at 50-100, 1.6% at 225-450 and 5.2% at 1,000
   (a linear table's interpolation error grows with the span);
6. ``broadcast_rstd``: rstd [m, 1] times n all-ones kernels (INT16);
7. ``normalize``: an SDP pass over d (INT16): X1 multiplies by rstd per element (B-RDMA, INT16), Y's
   multiplier and ALU take gamma and beta per channel as one E-RDMA stream of (ALU, MUL) pairs (INT16
   each), the output convertor writes INT8 at the output's step.

Steps 3 and 4 use only the X stages (16 elements a cycle on nv_full, where Y takes 4); step 7 needs Y
for beta, which comes after gamma (X2's ALU comes before its multiplier: (z + beta / gamma) gamma
would lose beta where gamma is near 0).

RMSNorm (no mean, no beta) has four: ``square`` over x itself (INT8 codes, X1's multiplier by x from
B-RDMA; x**2 <= 16,384 fits INT16 with T = 0), ``rsqrt``, ``broadcast_rstd``, ``normalize`` over x
(INT8): X1 multiplies by rstd (INT16, per element, B-RDMA), X2 by gamma per channel (N-RDMA), no Y.

Four of the steps (LayerNorm) write INT16 and read INT16, where the mapper's first lowering (a
schematic of seven passes at the layer's precision) had every step at INT8 and an operand, -mean**2,
that no step computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvdla_mapper.numerics.lut_steps import LUT_ENTRY_PEAK
from nvdla_mapper.numerics.quant import multiplier_to_scale_shift
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.precision import Precision
from nvdla_sim.units.lut import ENTRY_MAX, LE_ENTRIES, LO_ENTRIES, IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.sdp import Convertor, EwStage, SdpParams, Stage

CENTRE_BITS = 7  # d = 2**7 (x - mean): the mean's rounding at 1/128 of x's step, |d| within INT16
INT16_MAX = 32767
STAT_BITS = 30  # the normalisation's products are kept within 2**30 (SDP's stages saturate at 32 bits)

# the steps of a LayerNorm (an RMSNorm skips the mean's), in the order they run
LAYERNORM_STEPS = ("sum", "broadcast_mean", "centre", "square", "rsqrt", "broadcast_rstd", "normalize")
RMSNORM_STEPS = ("square", "rsqrt", "broadcast_rstd", "normalize")


@dataclass(frozen=True)
class NormRange:
    """What calibration saw at one LayerNorm (real values, the float model's): the largest |x - mean|
    (for RMSNorm: |x|), the smallest and largest row variance (mean of the squares), and the row length."""

    dev_max: float
    var_min: float
    var_max: float


def norm_range(x: np.ndarray, *, rms: bool = False) -> NormRange:
    """The NormRange of rows x [m, n] (float)."""
    x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
    d = x if rms else x - x.mean(axis=1, keepdims=True)
    var = (d * d).mean(axis=1)
    return NormRange(float(np.max(np.abs(d))), float(np.min(var)), float(np.max(var)))


def merge(a: NormRange | None, b: NormRange) -> NormRange:
    """The range over the data of both."""
    if a is None:
        return b
    return NormRange(max(a.dev_max, b.dev_max), min(a.var_min, b.var_min), max(a.var_max, b.var_max))


def _to(multiplier: float, what: str) -> tuple[int, int]:
    try:
        return multiplier_to_scale_shift(multiplier)
    except ValueError as e:
        raise UnsupportedError(f"layernorm {what}: {e}") from None


def mean_convertor(n: int) -> Convertor:
    """Step 1's output convertor: a row sum of n INT8 codes to -mean in steps of x's / 2**CENTRE_BITS."""
    scale, shift = _to(2**CENTRE_BITS / n, "mean")
    return Convertor(0, -scale, shift)


def square_truncate(dev_codes: float) -> int:
    """T, the fewest bits whose rounding keeps (dev_codes)**2 within INT16 (0 when it already fits)."""
    top = max(dev_codes, 1.0) ** 2
    return max(0, math.ceil(math.log2(top / INT16_MAX))) if top > INT16_MAX else 0


@dataclass(frozen=True)
class RsqrtTable:
    """Step 5's numbers: n eps in the squares' steps as X1's register operand (16 bits) and its left
    shift, the table over the row sums, and the convertor to rstd's INT16 steps (`rstd_scale`, real per
    code)."""

    eps_operand: int
    eps_shift: int
    lut: LutParams
    cvt: Convertor
    rstd_scale: float


def rsqrt_table(n: int, sq_scale: float, eps: float, rng: NormRange) -> RsqrtTable:
    """The table of rstd = 1 / sqrt(V sq_scale / n) over the row sums V (squares' codes plus n eps):
    LE linear over [V_lo, V_lo + 4 (V_hi - V_lo)], V_lo half the calibrated smallest and V_hi the
    largest, LO linear over the low end of that (below), flat beyond both ends (LE wins an overflow of both, either an
    underflow: they hold the same first entry); entries put rstd(V_lo) at LUT_ENTRY_PEAK, and the
    convertor writes INT16 with rstd(V_lo) at 32,767."""
    eps_steps = round(n * eps / sq_scale)
    if eps_steps >= 2**31:
        raise UnsupportedError(f"layernorm eps: {n} x {eps} is {eps_steps} square steps, beyond X1's 32 bits")
    # X1's register operand is 16 bits, shifted left by its ALU shift
    eps_shift = max(0, eps_steps.bit_length() - 15)
    eps_operand = round(eps_steps / 2**eps_shift)
    eps_steps = eps_operand << eps_shift
    v_lo = max(1, math.floor(0.5 * (n * rng.var_min / sq_scale + eps_steps)))
    v_hi = max(v_lo + LO_ENTRIES - 1, math.ceil(n * rng.var_max / sq_scale + eps_steps))

    def rstd(v: np.ndarray) -> np.ndarray:
        return 1.0 / np.sqrt(np.maximum(v, 1) * sq_scale / n)

    peak = float(rstd(np.array([v_lo]))[0])
    entry_scale = LUT_ENTRY_PEAK / peak
    tables = []
    # LE over four times the calibrated span; LO over its low end, where 1 / sqrt bends most: a linear
    # interval of width h from v interpolates within (3 / 32) (h / v)**2 of rstd, so LO's span S puts
    # the same bound at v_lo (h = S / 256) as LE's intervals have at LO's end (S = u v_lo with
    # u (1 + u) = 4 R, R the LE span over v_lo), or covers the whole calibrated span where that is less
    le_span = 4 * (v_hi - v_lo)
    u = (math.sqrt(1 + 16 * le_span / v_lo) - 1) / 2
    lo_span = max(LO_ENTRIES - 1, min(v_hi - v_lo, math.ceil(u * v_lo)))
    for count, span in ((LE_ENTRIES, le_span), (LO_ENTRIES, lo_span)):
        shift = max(0, math.ceil(math.log2(span / (count - 1))))
        x = v_lo + (np.arange(count, dtype=np.int64) << shift)
        e = np.clip(np.round(rstd(x) * entry_scale), 0, ENTRY_MAX).astype(np.int64)
        tables.append(LutTable(e, IndexMode.LINEAR, v_lo, shift))
    lut = LutParams(tables[0], tables[1], priority=Table.LO, uflow_priority=Table.LO, oflow_priority=Table.LE)
    rstd_scale = peak / INT16_MAX
    scale, shift = _to((1 / entry_scale) / rstd_scale, "rstd convertor")
    return RsqrtTable(eps_operand, eps_shift, lut, Convertor(0, scale, shift), rstd_scale)


@dataclass(frozen=True)
class Affine:
    """Step 7's numbers: gamma (and beta) as INT16 codes per channel with beta's convertor to the
    product's steps, the truncation after the multiply by gamma (Y's, or X2's MUL shift for RMSNorm),
    and the output convertor."""

    gamma: np.ndarray
    mul_truncate: int
    beta: np.ndarray | None
    beta_cvt: Convertor | None
    cvt: Convertor


def affine(
    z_scale: float, z_max: float, gamma: np.ndarray, beta: np.ndarray | None, out_scale: float
) -> tuple[Affine, float]:
    """gamma and beta over values z of `z_scale` per step (|z| at most z_max steps, the product of X1's
    multiply): gamma at 32,767 steps over its largest |value|, the product z gamma truncated to fit
    2**STAT_BITS, beta converted to its steps (a ratio within the convertor's INT16 scale; else the
    product's steps are coarsened until it is), the convertor to INT8 at `out_scale`. Returns the numbers
    and the product's step."""
    gamma = np.asarray(gamma, np.float64)
    g_scale = max(float(np.max(np.abs(gamma))), 1e-30) / INT16_MAX
    g = np.round(gamma / g_scale).astype(np.int64)
    t = max(0, math.ceil(math.log2(max(z_max, 1.0) * INT16_MAX / 2**STAT_BITS)))
    b = cvt = None
    if beta is not None:
        beta = np.asarray(beta, np.float64)
        b_scale = max(float(np.max(np.abs(beta))), 1e-30) / INT16_MAX
        while b_scale / (z_scale * g_scale * 2**t) >= 2**15 - 1:  # beta's convertor scale is INT16
            t += 1
        b = np.round(beta / b_scale).astype(np.int64)
        cvt = Convertor(0, *_to(b_scale / (z_scale * g_scale * 2**t), "beta convertor"))
    w_scale = z_scale * g_scale * 2**t
    out = Convertor(0, *_to(w_scale / out_scale, "output convertor"))
    return Affine(g, t, b, cvt, out), w_scale


# a convolution of codes a [m, k] with kernels w [n, k] at `precision` through SDP `params`: codes [m, n]
Conv = Callable[[str, np.ndarray, np.ndarray, SdpParams, Precision], np.ndarray]
# a standalone SDP pass over codes [m, n] (int64): its output codes
Sdp = Callable[[str, np.ndarray, SdpParams], np.ndarray]


@dataclass(frozen=True)
class NormRun:
    """A LayerNorm's run: the output codes (INT8 at `out_scale`) and every step's output by step name."""

    out: np.ndarray
    steps: dict[str, np.ndarray]


def run_layernorm(
    name: str,
    x: np.ndarray,
    x_scale: float,
    gamma: np.ndarray,
    beta: np.ndarray | None,
    eps: float,
    rng: NormRange,
    out_scale: float,
    conv: Conv,
    sdp: Sdp,
    *,
    rms: bool = False,
) -> NormRun:
    """The program of the module docstring over INT8 codes x [m, n] of step `x_scale`, its convolutions
    through `conv` and its standalone passes through `sdp` (the bit-exact datapath, or any equal to it),
    written at INT8 in steps of `out_scale`. `rng` is calibration's NormRange (real values)."""
    x = np.asarray(x, np.int64)
    m, n = x.shape
    steps: dict[str, np.ndarray] = {}
    i16 = Precision.INT16
    if rms:
        dev_scale, d = x_scale, x
        t = square_truncate(rng.dev_max / dev_scale)
        steps["square"] = sq = sdp(
            f"{name}.square", x, SdpParams(x1=Stage(mul_operand=x, mul_shift=t), out_precision=i16)
        )
    else:
        ones8 = np.ones((1, n), np.int64)
        neg_mean = conv(f"{name}.sum", x, ones8, SdpParams(cvt=mean_convertor(n), out_precision=i16), Precision.INT8)
        steps["sum"] = neg_mean
        ones_col = np.ones((n, 1), np.int64)
        spread = conv(f"{name}.broadcast_mean", neg_mean, ones_col, SdpParams(out_precision=i16), i16)
        steps["broadcast_mean"] = spread
        centre = SdpParams(x1=Stage(mul_operand=2**CENTRE_BITS), x2=Stage(alu_operand=spread), out_precision=i16)
        steps["centre"] = d = sdp(f"{name}.centre", x, centre)
        dev_scale = x_scale / 2**CENTRE_BITS
        t = square_truncate(rng.dev_max / dev_scale)
        steps["square"] = sq = sdp(
            f"{name}.square", d, SdpParams(x1=Stage(mul_operand=d, mul_shift=t), out_precision=i16)
        )
    sq_scale = dev_scale**2 * 2**t
    table = rsqrt_table(n, sq_scale, eps, rng)
    x1 = Stage(alu_operand=table.eps_operand, alu_shift=table.eps_shift)
    rs = SdpParams(x1=x1, y=EwStage(lut=table.lut), cvt=table.cvt, out_precision=i16)
    steps["rsqrt"] = r = conv(f"{name}.rsqrt", sq, np.ones((1, n), np.int64), rs, i16)
    spread_r = conv(f"{name}.broadcast_rstd", r, np.ones((n, 1), np.int64), SdpParams(out_precision=i16), i16)
    steps["broadcast_rstd"] = spread_r
    # z = d rstd: |d| <= dev_max, rstd <= the table's largest (32,767 codes)
    z_max = min(2**31 - 1, math.ceil(rng.dev_max / dev_scale + 1) * INT16_MAX)
    aff, _ = affine(dev_scale * table.rstd_scale, z_max, gamma, beta, out_scale)
    if rms:  # gamma alone: X2's multiplier per channel, its shift the truncation
        norm = SdpParams(
            x1=Stage(mul_operand=spread_r), x2=Stage(mul_operand=aff.gamma, mul_shift=aff.mul_truncate), cvt=aff.cvt
        )
    else:
        y = EwStage(mul_operand=aff.gamma, mul_truncate=aff.mul_truncate, alu_operand=aff.beta, alu_cvt=aff.beta_cvt)
        norm = SdpParams(x1=Stage(mul_operand=spread_r), y=y, cvt=aff.cvt)
    steps["normalize"] = out = sdp(f"{name}.normalize", d, norm)
    return NormRun(out, steps)
