"""The numbers SDP is programmed with for a transformer's layers at FP16 on nv_full (issue 31, pure numpy).

At FP16 there are no scales: CMAC multiplies FP16 operands, CACC accumulates in its 48-bit float and SDP
computes in FP32 and writes FP16 (nvdla_sim.floats). What SDP adds behind a matmul, as the mapper fuses it
(lowering/rules.py _fused_sdp):

* the bias: X1's ALU, one FP16 operand per kernel (B-RDMA), widened to FP32 exactly;
* the residual add: the residual stream's FP16 value per element, added by Y's ALU from E-RDMA on a build
  with SDP's element-wise unit, else by X2's ALU from N-RDMA (no convertor: FP mode bypasses it);
* GELU: Y's LUT in FP16 mode (registers and FP17 interpolation: docs/fp16_lut.md), a table in real units:
  the LE table over [-8, 8] in steps of 1/4 and the LO table over [-4, 4] in steps of 1/32 (it wins where
  both hit); below -8 the LE table's first slope (GELU is within 1e-14 of 0 there) and above 8 its last
  (1 to FP16's precision: GELU(x) = x there) extrapolate. Linear interpolation's error over a step h is
  at most h**2 / 8 * max|GELU''|: GELU'' = phi(x) (2 - x**2) is 0.8 at 0, so 1e-4 in LO's range, and
  below 2e-3 beyond |x| = 4, so 2e-5 in LE's outer parts; FP16's own unit at 1 is 1e-3.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from nvdla_sim.floats import fp16_to_fp32
from nvdla_sim.precision import Precision
from nvdla_sim.units.lut import LutParams, fp16_function_lut
from nvdla_sim.units.sdp import EwStage, SdpParams, Stage

GELU_LE = (-8.0, -2)  # (first entry's x, index select): 64 steps of 2**-2
GELU_LO = (-4.0, -5)  # 256 steps of 2**-5


@lru_cache(maxsize=16)
def gelu_lut(func: Callable[[np.ndarray], np.ndarray]) -> LutParams:
    """The activation `func`'s FP16 table (GELU_LE, GELU_LO)."""
    return fp16_function_lut(func, le=GELU_LE, lo=GELU_LO)


def as_fp16(x: np.ndarray) -> np.ndarray:
    """Values as NVDLA holds them in memory at FP16 (round to nearest even; beyond 65504 infinity, as a
    host's conversion gives: the caller counts those)."""
    return np.asarray(x, np.float64).astype(np.float16)


def matmul_sdp(
    *,
    bias: np.ndarray | None = None,
    residual: np.ndarray | None = None,
    eltwise_unit: bool = True,
    lut: LutParams | None = None,
) -> SdpParams:
    """The SDP behind an FP16 matmul: X1 adds `bias` [K] (FP16 per kernel), the residual [P, K] (FP16 per
    element) is added by Y's ALU (`eltwise_unit`) or X2's, `lut` is Y's table; written at FP16. FP16
    operands reach SDP's FP32 exactly (floats.fp16_to_fp32)."""
    if residual is not None and lut is not None:
        raise ValueError("a matmul's SDP adds a residual or applies an activation, not both (the mapper fuses one)")

    def fp32(v: np.ndarray) -> np.ndarray:
        return fp16_to_fp32(as_fp16(v))  # exact; an FP16 infinity becomes FP32's largest (FpWidthInc)

    x1 = Stage(alu_operand=fp32(bias)) if bias is not None else None
    x2 = y = None
    if residual is not None and eltwise_unit:
        y = EwStage(alu_operand=fp32(residual))
    elif residual is not None:
        x2 = Stage(alu_operand=fp32(residual))
    if lut is not None:
        y = EwStage(lut=lut)
    return SdpParams(x1=x1, x2=x2, y=y, out_precision=Precision.FP16)
