"""NVDLA's FP16-mode arithmetic (nvdla_sim.floats, cmac.booth_product) against independent references:
exact rational arithmetic (fractions.Fraction) for CACC's rounding, plain integer division for the Booth
product where the hardware is exact, and hand-worked values of the format conversions."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim.floats import add_round_away, fp16_parts, fp16_to_fp32, fp32_to_fp16, round_away, to_fp32
from nvdla_sim.units.cmac import booth_product, fp16_atomic_op


def _rna(q: Fraction, bits: int) -> Fraction:
    """q rounded to `bits` significant bits, ties away from zero, in exact rationals."""
    if q == 0:
        return q
    a, e = abs(q), 0
    while a >= 2**bits:
        a, e = a / 2, e + 1
    while a < 2 ** (bits - 1):
        a, e = a * 2, e - 1
    n = int(a + Fraction(1, 2))  # floor(a + 1/2): half away from zero in magnitude
    return (1 if q > 0 else -1) * Fraction(n) * Fraction(2) ** e


_mant = st.integers(-(2**39) + 1, 2**39 - 1)


@settings(max_examples=400)
@given(_mant, st.integers(-60, 60), _mant, st.integers(-60, 60))
def test_cacc_addition_rounds_the_exact_sum(ma, ea, mb, eb):
    a, b = Fraction(ma) * Fraction(2) ** ea, Fraction(mb) * Fraction(2) ** eb
    fa, fb = float(_rna(a, 39)), float(_rna(b, 39))
    got = add_round_away(np.array([fa]), np.array([fb]), 39)[0]
    assert Fraction(got) == _rna(Fraction(fa) + Fraction(fb), 39)


def test_rounding_ties_go_away_from_zero():
    assert list(round_away(np.array([2.5, -2.5, 3.5, 1.25]), 2)) == [3.0, -3.0, 4.0, 1.5]
    # a tie the float64 sum lands on, broken by the error term: 2**40 + 1 + 2**-60 to 40 bits is 2**40 + 2
    assert add_round_away(np.array([2.0**40 + 1]), np.array([2.0**-60]), 40)[0] == 2.0**40 + 2
    assert add_round_away(np.array([2.0**40 + 1]), np.array([-(2.0**-60)]), 40)[0] == 2.0**40


@settings(max_examples=300)
@given(
    st.booleans(), st.integers(0, 2**15 - 1), st.integers(0, 2**15 - 1), st.sampled_from([0, 4, 8, 12, 16, 20, 24, 28])
)
def test_booth_product_is_exact_unaligned_and_within_one_aligned(neg, w, d, shift):
    got = int(booth_product(np.array([int(neg)]), np.array([w]), np.array([d]), np.array([shift]))[0])
    exact = (-1 if neg else 1) * w * d
    floor = exact >> shift  # floor division by 2**shift
    assert got == floor if shift <= 4 else abs(got - floor) <= 1


def test_booth_product_drops_a_shift_of_32():
    assert booth_product(np.array([0]), np.array([1024]), np.array([1024]), np.array([32]))[0] == 0


def test_fp16_operand_split_by_hand():
    # 1.0: e = 15, f = 0 -> block 3, mantissa 1024 << 3; 2**-24 (smallest denormal): mantissa 2; 65536
    # is how CMAC reads the infinity pattern (e = 31, f = 0)
    x = np.array([1.0, -(2.0**-24), np.inf, 0.0, np.nan], np.float16)
    sign, block, mant, zero, nan = fp16_parts(x)
    assert list(sign[:3]) == [0, 1, 0] and list(block[:3]) == [3, 0, 7] and list(mant[:3]) == [8192, 2, 8192]
    assert [m * 2.0 ** (4 * b - 25) for m, b in zip(mant[:3], block[:3], strict=True)] == [1.0, 2.0**-24, 65536.0]
    assert list(zero) == [False, False, False, True, False] and list(nan) == [False] * 4 + [True]


def test_atom_of_equal_exponents_is_exact_and_nan_poisons_it():
    d = np.array([[1.5, -2.0, 0.25, 0.0]], np.float16)
    w = np.array([[2.0, 3.0, 4.0, 7.0], [np.nan, 1.0, 1.0, 1.0]], np.float16)
    out = fp16_atomic_op(d, w)
    assert out[0, 0] == 1.5 * 2 - 2 * 3 + 0.25 * 4 and np.isnan(out[0, 1])


def test_sdp_conversions_by_hand():
    # FP32 -> FP16: nearest even, 65519.99 rounds to 65504, 65520 would be infinity in IEEE: 65504 here
    assert list(fp32_to_fp16(np.array([65519.0, 65520.0, -1e9, 2.0**-25 * 1.5], np.float32))) == [
        65504.0, 65504.0, -65504.0, 2.0**-24,
    ]  # fmt: skip
    assert fp16_to_fp32(np.array([-np.inf], np.float16))[0] == -np.finfo(np.float32).max
    # FP32 results: denormals flush to signed zero, overflow saturates
    r = to_fp32(np.array([2.0**-130, -(2.0**-127), 1e39, 1.0 + 2.0**-24]))
    assert list(r) == [0.0, 0.0, np.finfo(np.float32).max, 1.0] and np.signbit(r[1])
