"""How reports print numbers: a rate keeps its significant digits at any size."""

from __future__ import annotations


def rate(x: float) -> str:
    """A rate with at least three significant digits: 4,212.5, 12.3, 0.0512 (never "0.0" for a slow run)."""
    if x == 0 or abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.3g}"
