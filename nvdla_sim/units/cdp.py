"""CDP: cross-channel data processor, local response normalisation (functional).

For each element, across a window of 3, 5, 7 or 9 neighbouring channels (unit_description.rst CDP):

    a   = sat9(round((x - datin_offset) * datin_scale >> datin_shift))      input convertor
    s   = sum of a**2 over the window (or a itself with SQSUM bypassed)
    l   = LUT(s)                                                          LE/LO tables (lut.py)
    p   = l * a (or l with MUL bypassed)
    out = sat8(round((p - datout_offset) * datout_scale >> datout_shift)) output convertor

The widths are those of NVIDIA's bit-accurate C model (hw@master:cmod/hls/cdp_libs/cdp_icvt.h and
cdp_ocvt.h; cmod/cdp/NV_NVDLA_cdp.cpp lookup_lut_int8 and lookup_lut, whose LUT steps are the same):

    INT8:  the input offset its low 8 bits (signed), the convertor result 9 bits, the output offset its low
           25 bits, the result 8 bits; checked on the nv_small RTL's 23 cdp_* trace tests;
    INT16: 16-bit input offset, 17-bit convertor result, 32-bit output offset, 16-bit result; checked on
           NVIDIA's nv_full regression loadable CDP_L0_0 (its golden output, docs/driver_programs.md).

Channels outside the cube, and the padding channels of its last atom, enter the window as the input
offset (so as 0 after the convertor), and the padding channels are computed and written too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision, saturate, shift_round
from nvdla_sim.units.lut import LutParams, LutPath, lut_apply


def elements_per_cycle(hw: HwConfig, precision: Precision) -> int:
    """Input elements CDP takes a cycle: CDP_THROUGHPUT bytes' worth. Its data path carries throughput x 8 bits
    (nvdla/hw branch nvdlav1, NV_NVDLA_cdp.v:115: cdp_rdma2dp_pd[86:0], 64 data bits on nv_full's
    CDP_THROUGHPUT_8; NV_NVDLA_CDP_DP_cvtin.v:181-184: four 16-bit convertor lanes; branch nv_small's
    NV_NVDLA_cdp.v:125: NVDLA_CDP_THROUGHPUT x NVDLA_BPE data bits), so INT16 and FP16 take half as many
    elements a cycle as INT8, as PDP does (pdp.elements_per_cycle): nv_full's CDP_L0_0 (INT16 LRN) 1,545
    cycles against the RTL's 1,566 (1,289 at 8 elements a cycle; docs/driver_programs.md)."""
    return max(1, hw.cdp.throughput // precision.bytes)


WINDOWS = (3, 5, 7, 9)


@dataclass(frozen=True)
class Widths:
    """The convertors' widths for one precision (cdp_icvt.h, cdp_ocvt.h: the H sizes are INT8's)."""

    in_offset: int  # vAluInSize / vAluInHSize
    converted: int  # vDataOutSize / vDataOutHSize: the input convertor's result
    out_offset: int  # cdp_ocvt.h vAluInSize / vAluInHSize
    out: int  # vDataOutSize / vDataOutHSize


WIDTHS = {Precision.INT8: Widths(8, 9, 25, 8), Precision.INT16: Widths(16, 17, 32, 16)}


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(frozen=True, eq=False)
class LrnParams:
    """Registers of one CDP pass (D_LRN_CFG, D_FUNC_BYPASS, D_DATIN_*, D_DATOUT_*, the LUT)."""

    window: int
    lut: LutParams
    in_offset: int = 0
    in_scale: int = 1
    in_shift: int = 0
    out_offset: int = 0
    out_scale: int = 1
    out_shift: int = 0
    sqsum_bypass: bool = False
    mul_bypass: bool = False

    def __post_init__(self) -> None:
        if self.window not in WINDOWS:
            raise ValueError(f"CDP window must be one of {WINDOWS} (D_LRN_CFG_0.NORMALZ_LEN), not {self.window}")
        if not 0 <= self.in_shift <= 31 or not 0 <= self.out_shift <= 63:
            raise ValueError("CDP convertor shifts out of range: datin_shift 0..31, datout_shift 0..63")


def lrn(x: np.ndarray, params: LrnParams, precision: Precision = Precision.INT8) -> np.ndarray:
    """LRN across the last axis of x[..., C] (C may include the atom's padding channels). INT8 and INT16."""
    if precision not in WIDTHS:
        raise ValueError(f"CDP LRN is modelled bit-exactly for INT8 and INT16, not {precision.value}")
    w = WIDTHS[precision]
    x = np.asarray(x, np.int64)
    a = shift_round((x - _signed(params.in_offset, w.in_offset)) * _signed(params.in_scale, 16), params.in_shift)
    a, _ = saturate(a, w.converted)
    if params.sqsum_bypass:
        s = a
    else:
        half = params.window // 2
        sq = np.pad(a * a, [(0, 0)] * (a.ndim - 1) + [(half, half)])
        c = a.shape[-1]
        s = sum(sq[..., j : j + c] for j in range(params.window))
    lut_v, _ = lut_apply(s, params.lut, path=LutPath.CDP)
    p = lut_v if params.mul_bypass else lut_v * a
    y = shift_round((p - _signed(params.out_offset, w.out_offset)) * _signed(params.out_scale, 16), params.out_shift)
    return saturate(y, w.out)[0].astype(np.int8 if precision is Precision.INT8 else np.int16)
