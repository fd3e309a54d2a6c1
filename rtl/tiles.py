"""Datapath tiles cut from real mapped transformer layers (`bert-base.qkv`, `gpt2.qk`, ...).

A tile is what one CSC stripe sequence feeds the datapath: up to stripe_max output points of one
kernel group over the layer's full reduction depth. Shapes come from the mapper's workload graph;
values are seeded random integers of the precision (optionally pinned to the corner values).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvdla_mapper.frontends.presets import PRESETS, build_graph, preset
from nvdla_mapper.workload import OpKind, ops_in_order
from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision
from nvdla_sim.rtl_model.datapath_model import datapath_params

# layer suffix -> op name suffix in the first block of the workload graph
LAYER_OPS = {
    "qkv": ".attn.q",
    "o": ".attn.o",
    "qk": ".attn.qk",
    "pv": ".attn.pv",
    "ffn1": ".ffn1",
    "ffn2": ".ffn2",
}


@dataclass(frozen=True)
class Tile:
    name: str
    x: np.ndarray  # [pixels, channels]
    w: np.ndarray  # [kernels, channels]
    layer_shape: tuple[int, int, int]  # (m, k, n) of the whole layer


def layer_tile(
    spec: str,
    hw: HwConfig,
    precision: Precision,
    *,
    seq: int = 128,
    seed: int = 0,
    corner: bool = False,
    whole: bool = False,
) -> Tile:
    """Tile of `<model>.<layer>` (e.g. bert-base.qkv) for this datapath; `whole`: the whole layer (all
    its output points and kernel groups, as CSC sequences them)."""
    model, _, layer = spec.rpartition(".")
    if not model or layer not in LAYER_OPS:
        raise NvdlaError(
            f"--layer must be <model>.<layer> with model in {', '.join(PRESETS)} and layer in {', '.join(LAYER_OPS)}, not {spec!r}"
        )
    g = build_graph(preset(model), seq=seq)
    want = LAYER_OPS[layer]
    op = next(
        (
            o
            for o in ops_in_order(g)
            if o.name.endswith(want) and o.kind in (OpKind.MATMUL, OpKind.ATTN_SCORES, OpKind.ATTN_CONTEXT)
        ),
        None,
    )
    if op is None:
        raise NvdlaError(f"{model} has no {layer} layer")
    p = datapath_params(hw, precision)
    pixels, kernels = (op.m, op.n) if whole else (min(op.m, p.stripe_max), min(op.n, p.cells))
    lo, hi = precision.int_range
    rng = np.random.default_rng(seed)
    if corner:
        x = rng.choice([lo, hi], size=(pixels, op.k))
        w = rng.choice([lo, hi], size=(kernels, op.k))
    else:
        x = rng.integers(lo, hi + 1, size=(pixels, op.k))
        w = rng.integers(lo, hi + 1, size=(kernels, op.k))
    what = "whole layer" if whole else f"tile {pixels}x{op.k}x{kernels}"
    return Tile(f"{spec} ({op.name} {op.m}x{op.k}x{op.n}) {what}", x, w, (op.m, op.k, op.n))
