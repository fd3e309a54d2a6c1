import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from nvdla_sim.precision import saturate, shift_round


def _ref_round(x: int, s: int) -> int:
    if s <= 0:
        return x << -s
    q, r = divmod(abs(x), 1 << s)
    q += r >= (1 << (s - 1))
    return q if x >= 0 else -q


@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=20), st.integers(-4, 30))
def test_shift_round_half_away_from_zero(xs, s):
    got = shift_round(np.array(xs, np.int64), s)
    assert got.tolist() == [_ref_round(x, s) for x in xs]


def test_shift_round_examples():
    assert shift_round(np.array([5, -5, 6, -6, 7]), 1).tolist() == [3, -3, 3, -3, 4]


def test_saturate_counts():
    v, n = saturate(np.array([-200, -128, 0, 127, 300]), 8)
    assert v.tolist() == [-128, -128, 0, 127, 127] and n == 2
