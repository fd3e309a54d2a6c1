"""CMAC: the atomic-C x atomic-K multiply-accumulate array (functional and cost).

One atomic op per cycle: one 1x1xatomic_c data atom broadcast to kernels_per_atomic MAC cells, each
holding one kernel's 1x1xatomic_c weight atom, each producing one partial sum (adder tree).
INT8/INT16 products and adder trees are exact integers (MAC_RESULT_WIDTH = 2*bits + log2(atomic_c)).
FP16 products are exact in float32; the adder tree is modelled in float64 (NVDLA keeps a wide mantissa).
"""

from __future__ import annotations

import math

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision


def mac_result_bits(hw: HwConfig, precision: Precision) -> int:
    """Width of one MAC cell's partial sum (projects.spec NVDLA_MAC_RESULT_WIDTH)."""
    return 2 * 8 * precision.bytes + int(math.log2(hw.mac.atomic_c))


def atomic_op(data: np.ndarray, weights: np.ndarray, precision: Precision) -> np.ndarray:
    """Partial sums of atomic ops: data[P, c] (c <= atomic_c) x weights[k, c] -> [P, k].

    P pixels are P consecutive atomic ops of one stripe (weights held); returns int64 or float64.
    """
    if precision.is_float:
        return data.astype(np.float32).astype(np.float64) @ weights.astype(np.float32).astype(np.float64).T
    return data.astype(np.int64) @ weights.astype(np.int64).T
