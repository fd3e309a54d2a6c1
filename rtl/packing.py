"""Pack/unpack stream payloads to and from the flat bit vectors seen in Verilog (and amaranth.sim).

Offsets come from the Amaranth layouts themselves, so the benches never hard-code a bit position.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Shape
from amaranth.lib import data

from nvdla_rtl.datapath import dat_layout, out_layout
from nvdla_sim.rtl_model.datapath_model import Beat, DatapathParams


def _field(value: int, width: int) -> int:
    lo, hi = -(1 << (width - 1)), (1 << width) - 1
    if not lo <= value <= hi:
        raise ValueError(f"value {value} does not fit {width} bits")
    return value & ((1 << width) - 1)


def _signed(raw: int, width: int) -> int:
    return raw - (1 << width) if raw >> (width - 1) else raw


def _offsets(layout: data.StructLayout) -> dict[str, tuple[int, int]]:
    return {name: (f.offset, Shape.cast(f.shape).width) for name, f in layout}


def pack_beat(beat: Beat, p: DatapathParams) -> int:
    off = _offsets(dat_layout(p))
    word = 0
    base, _ = off["data"]
    for c, v in enumerate(beat.data):
        word |= _field(int(v), p.in_bits) << (base + c * p.in_bits)
    fields = (("pix", beat.pix), ("first", beat.first), ("last", beat.last), ("swap", beat.swap), ("end", beat.end))
    for name, value in fields:
        o, w = off[name]
        word |= _field(int(value), w) << o
    return word


def pack_array(values: Sequence[int], bits: int) -> int:
    """Signed values of `bits` each, element 0 in the low bits (an ArrayLayout port)."""
    word = 0
    for c, v in enumerate(values):
        word |= _field(int(v), bits) << (c * bits)
    return word


def pack_weights(atom: Sequence[int], p: DatapathParams) -> int:
    return pack_array(atom, p.in_bits)


def unpack_out(word: int, p: DatapathParams, layout: data.StructLayout | None = None) -> tuple[int, bool, list[int]]:
    """(pix, last, values) of one output beat (of the datapath, or of another output `layout` such as
    the requantized one of rtl/sdp_x1.py)."""
    layout = layout or out_layout(p)
    off = _offsets(layout)
    base, width = off["data"]
    bits = width // p.cells
    vals = [_signed((word >> (base + k * bits)) & ((1 << bits) - 1), bits) for k in range(p.cells)]
    o, w = off["pix"]
    lo, _ = off["last"]
    return (word >> o) & ((1 << w) - 1), bool((word >> lo) & 1), vals
