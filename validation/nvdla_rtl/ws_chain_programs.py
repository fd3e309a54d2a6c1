"""Long weight-stationary chains on NVIDIA's nv_small RTL, with and without the testbench's clock gating
(issue 27).

A 128 x 768 x 768 projection (rows of 32 tokens) as one program of weight-stationary hardware layers,
each kernel tile kept in CBUF across the four bands (SKIP_WEIGHT_RLS, WEIGHT_REUSE), and the 128 x 256 x 64
projection (rows of 64 tokens) with its 24-kernel tiles in a two-bank weight ring. The mapper's plan
simulation predicts each program's span. With clock gating on (NVIDIA's testbench default) the RTL
agrees on some and not on others; with it off, on all (CDMA's weight-entry count runs on a gated clock
and misses releases: docs/validation.md):

- `wsc_k24_w20`: tiles of 24 kernels, 20 weight banks (128 hardware layers): the RTL and the model agree;
- `wsc_k48_w20` / `wsc_k48_w19`: tiles of 48 kernels: gated, after the eighth tile (hardware layer 32)
  every layer's fetch runs at a quarter of the port's rate, with 20 or 19 weight banks alike;
- `wsc_k24_w2`: tiles of 24 kernels in a 2-bank weight ring: gated, the last tile's two layers are 3x
  slower.

    python -m nvdla_validation.nvdla_rtl.ws_chain_programs build/wsc
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/wsc \\
        --out validation/data/nvdla_rtl_ws_chains.json
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/wsc \\
        --out validation/data/nvdla_rtl_ws_chains_no_clock_gating.json --no-clock-gating

tests/integration/test_nvdla_ws_chains.py checks the committed rows (bit-exact, the model's spans).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.engine.tiling import LoopOrder, TilePlan
from nvdla_sim.layers import ConvLayer, ConvShape, OperandMode, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_validation.nvdla_rtl.overlap_programs import folder_main, write_planned

HW = "nv_small_rtl_tb"


@dataclass(frozen=True)
class Case:
    name: str
    m: int
    k: int
    n: int
    row: int  # tokens per row of the feature cube (the mapper's layout on nv_small_rtl_tb)
    plan: TilePlan


CASES = (
    Case("wsc_k24_w20", 128, 768, 768, 32, TilePlan(12, 20, 1, 24, LoopOrder.WEIGHT_STATIONARY)),
    Case("wsc_k48_w20", 128, 768, 768, 32, TilePlan(12, 20, 1, 48, LoopOrder.WEIGHT_STATIONARY)),
    Case("wsc_k48_w19", 128, 768, 768, 32, TilePlan(13, 19, 1, 48, LoopOrder.WEIGHT_STATIONARY)),
    Case("wsc_k24_w2", 128, 256, 64, 64, TilePlan(8, 2, 1, 24, LoopOrder.WEIGHT_STATIONARY)),
)


def layer(case: Case) -> ConvLayer:
    """The projection as the mapper lowers it on nv_small_rtl_tb: rows of tokens, INT8, SDP bias."""
    shape = ConvShape.matmul(case.m, case.k, case.n, row=case.row)
    return ConvLayer(case.name, shape, Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL))


def generate(folder: str | Path, hw: HwConfig | None = None) -> list[Path]:
    return write_planned(CASES, layer, folder, hw or load_config(HW))


def main(argv: list[str] | None = None) -> int:
    return folder_main(__doc__, generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
