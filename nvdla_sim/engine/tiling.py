"""Tile plans for a convolution-pipeline layer: CBUF bank split, data/weight tile sizes and loop order.

A data tile is a band of output rows with its input-row halo. The convolution pipeline only runs in
full-input mode (programming_guide.rst "Split H": software splits the input into strips), so every band
is a hardware layer of its own, run after the previous one; inside a hardware layer the weights stream
through the CBUF weight ring ("full input, partial weight"). Both tiles keep the full input channel
depth, because CACC accumulates a whole channel op. A plan is legal when one data tile and one kernel
group fit their banks (and, in weight-stationary order, the resident weight tile).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.units import cbuf


class LoopOrder(enum.Enum):
    WEIGHT_STATIONARY = "weight_stationary"  # for weight tile: for data tile  (weights fetched once)
    DATA_STATIONARY = "data_stationary"  # for data tile: for weight tile  (data fetched once)


@dataclass(frozen=True)
class TilePlan:
    data_banks: int
    weight_banks: int
    rows_per_tile: int  # output rows per data tile
    kernels_per_tile: int  # kernels per weight tile (a multiple of kernels_per_atomic unless it is all of K)
    order: LoopOrder = LoopOrder.DATA_STATIONARY

    def to_dict(self) -> dict[str, object]:
        return {
            "data_banks": self.data_banks,
            "weight_banks": self.weight_banks,
            "rows_per_tile": self.rows_per_tile,
            "kernels_per_tile": self.kernels_per_tile,
            "order": self.order.value,
        }


@dataclass(frozen=True)
class Footprint:
    """CBUF entries of the plan's tiles and how many of each fit their banks."""

    data_tile_entries: int
    group_entries: int
    weight_tile_entries: int
    data_capacity_tiles: int
    weight_capacity_groups: int
    n_data_tiles: int
    n_weight_tiles: int
    groups_per_weight_tile: int


def layer_gap_cycles(hw: HwConfig) -> int:
    """Cycles between two hardware layers of one split convolution: the first layer's pipeline drain and
    interrupt, then the next layer's launch (TimingConfig, measured on the nv_small RTL)."""
    t = hw.timing
    return t.conv_pipeline_cycles + t.completion_cycles + t.conv_launch_cycles


def bytes_per_kernel(layer: ConvLayer) -> int:
    s = layer.shape
    return s.kernel_w * s.kernel_h * s.in_c * layer.precision.bytes


def row_tiles(layer: ConvLayer, rows_per_tile: int) -> list[tuple[int, int]]:
    oh = layer.shape.out_h
    return [(r, min(oh, r + rows_per_tile)) for r in range(0, oh, rows_per_tile)]


def tile_sizes(total: int, per_tile: int) -> tuple[tuple[int, int], ...]:
    """(size, how many) of the tiles row_tiles / kernel_tiles cut `total` into: the full tiles, then the
    rest (the same sizes in the same order, without listing every tile)."""
    full, rest = divmod(total, per_tile)
    return tuple((size, n) for size, n in ((per_tile, full), (rest, 1)) if size and n)


def data_tiles(layer: ConvLayer, rows_per_tile: int) -> list[tuple[int, tuple[int, int]]]:
    """The plan's data tiles: (image, band of output rows), every band of the first image, then the next."""
    return [(b, rows) for b in range(layer.images) for rows in row_tiles(layer, rows_per_tile)]


def kernel_tiles(layer: ConvLayer, kernels_per_tile: int) -> list[tuple[int, int]]:
    k = layer.shape.out_k
    return [(s, min(k, s + kernels_per_tile)) for s in range(0, k, kernels_per_tile)]


def band_shape(shape: ConvShape, r0: int, r1: int) -> tuple[ConvShape, int, int]:
    """The hardware layer that computes output rows [r0, r1) of `shape` on its own (split H): the input
    rows [i0, i1) it reads, with the layer's top and bottom padding only where the band touches them.
    Returns (its shape, i0, i1)."""
    i0, i1 = shape.input_rows_for(r0, r1)
    sub = dataclasses.replace(
        shape,
        in_h=i1 - i0,
        pad_top=shape.pad_top if r0 == 0 else 0,
        pad_bottom=shape.pad_bottom if r1 == shape.out_h else 0,
    )
    if sub.out_h != r1 - r0:  # pragma: no cover - input_rows_for gives exactly the band's rows
        raise ShapeError(f"rows {r0}-{r1} need input rows {i0}-{i1}, which give {sub.out_h} rows")
    return sub, i0, i1


@dataclass(frozen=True)
class TileStep:
    """One kernel group of one (data tile, weight tile) pair of a plan: the unit of work the conv core
    runs, in the plan's order."""

    data_tile: int  # index of the data tile (image, band of output rows)
    weight_tile: int  # index of the weight tile
    rows: tuple[int, int]  # output rows [r0, r1)
    kernels: tuple[int, int]  # the weight tile's kernels [k0, k1)
    group: tuple[int, int]  # the kernel group [g0, g1): kernels_per_atomic kernels or the rest
    image: int = 0  # which image of the layer's batch (ConvLayer.images)


def tile_nest(plan: TilePlan, n_data: int, n_weight: int) -> list[tuple[int, int]]:
    """(data tile, weight tile) pairs in the plan's order (tile_steps runs each pair's kernel groups)."""
    if plan.order is LoopOrder.WEIGHT_STATIONARY:
        return [(d, k) for k in range(n_weight) for d in range(n_data)]
    return [(d, k) for d in range(n_data) for k in range(n_weight)]


def tile_steps(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> Iterator[TileStep]:
    """The plan's loop nest, written once for the timing model and the bit-exact one: data-stationary
    order runs every weight tile against a band of rows before the next band; weight-stationary keeps a
    weight tile and runs it against every band (of every image)."""
    rtiles, ktiles = data_tiles(layer, plan.rows_per_tile), kernel_tiles(layer, plan.kernels_per_tile)
    kpg = hw.kernels_per_atomic(layer.precision)
    for d, k in tile_nest(plan, len(rtiles), len(ktiles)):
        k0, k1 = ktiles[k]
        image, rows = rtiles[d]
        for g0 in range(k0, k1, kpg):
            yield TileStep(d, k, rows, ktiles[k], (g0, min(k1, g0 + kpg)), image)


@lru_cache(maxsize=65536)  # pure; asked for by every bound, timing key and simulation of a plan
def footprint(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> Footprint:
    s, p = layer.shape, layer.precision
    kpg = hw.kernels_per_atomic(p)
    epb = hw.cbuf_entries_per_bank
    d_entries = _data_entries(layer, tallest_band_input(layer, plan.rows_per_tile), hw)
    g_entries = cbuf.weight_entries(min(kpg, s.out_k), bytes_per_kernel(layer), hw)
    w_entries = cbuf.weight_entries(min(plan.kernels_per_tile, s.out_k), bytes_per_kernel(layer), hw)
    return Footprint(
        data_tile_entries=d_entries,
        group_entries=g_entries,
        weight_tile_entries=w_entries,
        data_capacity_tiles=plan.data_banks * epb // d_entries,
        weight_capacity_groups=plan.weight_banks * epb // g_entries,
        n_data_tiles=math.ceil(s.out_h / plan.rows_per_tile) * layer.images,
        n_weight_tiles=math.ceil(s.out_k / plan.kernels_per_tile),
        groups_per_weight_tile=math.ceil(min(plan.kernels_per_tile, s.out_k) / kpg),
    )


@lru_cache(maxsize=65536)  # pure; every plan of a band height asks (footprint)
def tallest_band_input(layer: ConvLayer, rows_per_tile: int) -> int:
    """Input rows of the band of `rows_per_tile` output rows that reads the most."""
    s = layer.shape
    return max(b - a for a, b in (s.input_rows_for(r0, r1) for r0, r1 in row_tiles(layer, rows_per_tile)))


def _data_entries(layer: ConvLayer, rows: int, hw: HwConfig) -> int:
    s = layer.shape
    if layer.image_input:  # pixels packed compactly, padded width (compiler calculateEPS, image case)
        return cbuf.image_entries(s.in_w + s.pad_left + s.pad_right, rows, s.in_c, layer.precision, hw)
    return cbuf.data_entries(s.in_w, rows, s.in_c, layer.precision, hw)


def illegal_reason(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> str | None:
    """Why `plan` cannot run `layer` on `hw`, or None when it can."""
    s = layer.shape
    kpg = hw.kernels_per_atomic(layer.precision)
    if plan.data_banks < 1 or plan.weight_banks < 1 or plan.data_banks + plan.weight_banks > hw.cbuf.bank_count:
        return f"bank split {plan.data_banks}+{plan.weight_banks} must use >= 1 each and <= {hw.cbuf.bank_count} in all"
    if not 1 <= plan.rows_per_tile <= s.out_h:
        return f"rows_per_tile {plan.rows_per_tile} must be in 1..{s.out_h}"
    if not 1 <= plan.kernels_per_tile <= s.out_k:
        return f"kernels_per_tile {plan.kernels_per_tile} must be in 1..{s.out_k}"
    if plan.kernels_per_tile % kpg and plan.kernels_per_tile != s.out_k:
        return f"kernels_per_tile {plan.kernels_per_tile} must be a multiple of {kpg} kernels per atomic op"
    fp = footprint(layer, plan, hw)
    if fp.data_capacity_tiles < 1:
        return f"a data tile needs {fp.data_tile_entries} CBUF entries; {plan.data_banks} data banks hold " + str(
            plan.data_banks * hw.cbuf_entries_per_bank
        )
    if fp.weight_capacity_groups < 1:
        return f"one kernel group needs {fp.group_entries} CBUF entries; {plan.weight_banks} weight banks hold " + str(
            plan.weight_banks * hw.cbuf_entries_per_bank
        )
    if (
        plan.order is LoopOrder.WEIGHT_STATIONARY
        and fp.n_data_tiles > 1
        and fp.weight_capacity_groups < fp.groups_per_weight_tile
    ):
        return (
            f"weight-stationary order keeps a weight tile resident ({fp.weight_tile_entries} entries) but "
            f"{plan.weight_banks} weight banks hold {plan.weight_banks * hw.cbuf_entries_per_bank}"
        )
    return None


def check_plan(layer: ConvLayer, plan: TilePlan, hw: HwConfig) -> None:
    reason = illegal_reason(layer, plan, hw)
    if reason is not None:
        raise ShapeError(f"{layer.name}: illegal tile plan {plan.to_dict()}: {reason}")


def default_plan(layer: ConvLayer, hw: HwConfig) -> TilePlan:
    """A reasonable legal plan without search: the whole input resident and the weights streamed when it
    fits (one hardware layer), else the fewest bands of rows that do (split H)."""
    s = layer.shape
    banks = hw.cbuf.bank_count
    epb = hw.cbuf_entries_per_bank
    g_banks = cbuf.banks_for(
        cbuf.weight_entries(min(hw.kernels_per_atomic(layer.precision), s.out_k), bytes_per_kernel(layer), hw),
        hw,
    )
    for rows in _row_candidates(s.out_h):
        d_entries = _data_entries(layer, tallest_band_input(layer, rows), hw)
        d_need = cbuf.banks_for(d_entries, hw)
        if d_need + g_banks > banks:
            continue
        plan = TilePlan(d_need, banks - d_need, rows, s.out_k, LoopOrder.DATA_STATIONARY)
        if illegal_reason(layer, plan, hw) is None:
            return plan
    raise ShapeError(
        f"{layer.name}: no legal tiling on {hw.name}: one output row needs input of "
        f"{cbuf.data_entries(s.in_w, s.kernel_h_dilated, s.in_c, layer.precision, hw)} CBUF entries and one kernel "
        f"group {g_banks} bank(s), but the CBUF has {banks} banks of {epb} entries; split the layer's channels"
    )


def _row_candidates(out_h: int) -> list[int]:
    """Whole height first, then halving."""
    out, r = [], out_h
    while r >= 1:
        out.append(r)
        if r == 1:
            break
        r = math.ceil(r / 2)
    return out
