"""CMAC: the atomic-C x atomic-K multiply-accumulate array (functional and cost).

One atomic op per cycle: one 1x1xatomic_c data atom broadcast to kernels_per_atomic MAC cells, each
holding one kernel's 1x1xatomic_c weight atom, each producing one partial sum (adder tree).
INT8/INT16 products and adder trees are exact integers (MAC_RESULT_WIDTH = 2*bits + log2(atomic_c)).
FP16 is block floating point (nvdla/hw branch nvdlav1, NV_NVDLA_CMAC_CORE_MAC_exp.v / _mul.v / mac.v;
the C model's cal_fp16_* in cmod/cmac/NV_NVDLA_cmac.h): each product's block exponent (the sum of the
operands' e >> 2) is aligned to the atom's largest, its radix-4 Booth partial products are reduced by
3:2 compressors to a sum and a carry vector, and each vector is shifted right on its own, so the low
bits an alignment drops are truncated twice; the atom's products then add exactly (38 bits). The value
handed to CACC is that sum times 2**(4 * largest - 50), exact in float64.
"""

from __future__ import annotations

import math

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.floats import fp16_parts
from nvdla_sim.precision import Precision


def mac_result_bits(hw: HwConfig, precision: Precision) -> int:
    """Width of one MAC cell's partial sum (projects.spec NVDLA_MAC_RESULT_WIDTH)."""
    return 2 * 8 * precision.bytes + int(math.log2(hw.mac.atomic_c))


def atomic_op(data: np.ndarray, weights: np.ndarray, precision: Precision) -> np.ndarray:
    """Partial sums of atomic ops: data[P, c] (c <= atomic_c) x weights[k, c] -> [P, k].

    P pixels are P consecutive atomic ops of one stripe (weights held); returns int64 or float64.
    """
    if precision.is_float:
        return fp16_atomic_op(data, weights)
    return data.astype(np.int64) @ weights.astype(np.int64).T


def fp16_atomic_op(data: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """FP16 atomic ops: data[P, c] x weights[k, c] -> [P, k] float64, the exact value CMAC hands CACC.
    A NaN operand in the atom makes its output NaN; a zero (either sign) takes no part, nor in the
    largest exponent."""
    ds, db, dm, dz, dn = (a[:, None, :] for a in fp16_parts(data))
    ws, wb, wm, wz, wn = (a[None, :, :] for a in fp16_parts(weights))
    valid = ~dz & ~wz
    block = np.where(valid, db + wb, -1)
    top = np.maximum(block.max(axis=2, initial=-1), 0)  # [P, k]
    shift = np.where(valid, 4 * (top[:, :, None] - block), 32)
    negative = ds ^ ws
    # shifts 0 and 4 leave the Booth sum and carry exact: floor(product / 2**shift); only the products
    # aligned further down need the vectors (booth_product)
    exact = np.floor_divide(np.where(negative != 0, -wm, wm) * dm, np.left_shift(1, np.minimum(shift, 4)))
    prod = np.where(shift <= 4, exact, 0)
    far = (shift > 4) & (shift < 32)
    if far.any():
        idx = np.nonzero(far)
        full = np.broadcast_arrays(negative, wm, dm, shift)
        prod[idx] = booth_product(*(a[idx] for a in full))
    total = prod.sum(axis=2)
    out = np.ldexp(total.astype(np.float64), 4 * top - 50)
    return np.where(dn.any(axis=2) | wn.any(axis=2), np.nan, out)


def _compress(terms: list[np.ndarray]) -> list[np.ndarray]:
    """Reduce terms to two by rounds of 3:2 compressors over consecutive triples (each triple becomes its
    sum and its carry shifted left, both 32 bits wide; terms left over follow), as CMAC's tree does."""
    while len(terms) >= 3:
        n = len(terms) // 3
        out = []
        for a, b, c in (terms[3 * j : 3 * j + 3] for j in range(n)):
            out += [a ^ b ^ c, (((a & b) | (b & c) | (a & c)) << 1) & 0xFFFFFFFF]
        terms = out + terms[3 * n :]
    return terms


# A Booth digit's partial product of the data mantissa d (< 2**15, so 2d < 2**16) with its sign-extension
# constant: digits 0 and 7 give 0x10000, 1 and 2 d | 0x10000, 3 2d | 0x10000, 4 ~2d & 0xFFFF, 5 and 6
# ~d & 0xFFFF; as sums (d | 0x10000 = 0x10000 + d, ~x & 0xFFFF = 0xFFFF - x): base + times * d. The
# inverted digits 4-6 add their +1 two places up.
_PP_BASE = np.array([0x10000, 0x10000, 0x10000, 0x10000, 0xFFFF, 0xFFFF, 0xFFFF, 0x10000], np.int64)
_PP_TIMES = np.array([0, 1, 1, 2, -2, -1, -1, 0], np.int64)
_PP_INVERTED = np.array([0, 0, 0, 0, 1, 1, 1, 0], np.int64)


def booth_product(negative: np.ndarray, wt_mant: np.ndarray, dat_mant: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """One FP16 product's aligned mantissa as CMAC forms it: the weight mantissa radix-4 Booth recoded
    (eight digits, negated for a negative product), eight partial products of the data mantissa carrying
    sign-extension constants (bit 16) and their +1 for a negation two places up, compressed to a sum and
    a carry, each shifted right by `shift` (0, 4, ..., 28; 32 or more drops the product), then added with
    the constant that cancels the sign extensions, -(0x55550000 >> shift), modulo 2**32. Exact for shifts
    0 and 4; beyond, the two truncations differ from floor(product / 2**shift) by up to one."""
    neg = np.asarray(negative, np.int64)
    w = np.asarray(wt_mant, np.int64) << 1
    d = np.asarray(dat_mant, np.int64)
    rev = np.where(neg != 0, 7, 0)
    pps, invs = [], []
    for i in range(8):
        code = ((w >> (2 * i)) & 7) ^ rev
        pps.append(_PP_BASE[code] + _PP_TIMES[code] * d)
        invs.append(_PP_INVERTED[code])
    m = 0xFFFFFFFF
    lo = [pps[0], (pps[1] << 2 | invs[0]) & m, (pps[2] << 4 | invs[1] << 2) & m, (pps[3] << 6 | invs[2] << 4) & m,
          invs[3] << 6]  # fmt: skip
    hi = [(pps[4] << 8) & m, (pps[5] << 10 | invs[4] << 8) & m, (pps[6] << 12 | invs[5] << 10) & m,
          (pps[7] << 14 | invs[6] << 12) & m, invs[7] << 14]  # fmt: skip
    sum_vec, carry_vec = _compress(_compress(lo) + _compress(hi))
    sh = np.asarray(shift, np.int64)
    keep = sh < 32
    sh = np.where(keep, sh, 0)
    comp = np.where(sh <= 28, -(0x55550000 >> sh), 0)
    total = ((sum_vec >> sh) + (carry_vec >> sh) + comp) & m
    return np.where(keep, np.where(total >= 1 << 31, total - (1 << 32), total), 0)
