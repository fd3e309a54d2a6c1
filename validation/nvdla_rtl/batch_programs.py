"""A batch of images through one convolution on NVIDIA's nv_small RTL (issue 27: multi-image mode).

The mapper runs a CNN convolution at batch > 1 as one layer of all its images (ConvLayer.images): one
hardware layer per image and band of rows, in the plan's order. Weight-stationary order fetches each
kernel tile once and keeps it in CBUF across every image (SKIP_WEIGHT_RLS, then WEIGHT_REUSE, each image's
input at its own address); data-stationary order fetches the kernels again for every image. These
programs run both on the RTL, one program per plan:

- `batch_ws_c3x3`: three 8x8x16 images, 3x3 -> 32 kernels (pad 1), the kernels kept across the images;
- `batch_ds_c3x3`: the same, the kernels fetched for each image;
- `batch_ws_c1x1`: two 16x16x32 images, 1x1 -> 64 kernels, bands of 8 rows (four hardware layers),
  the kernels kept across bands and images;
- `batch_ws_fc` / `batch_ds_fc`: four 2x2x64 images, 1x1 -> 128 kernels (8 KB of weights against 256 B of
  input per image), where fetching the kernels once or four times decides the time.

    python -m nvdla_validation.nvdla_rtl.batch_programs build/batch
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/batch \\
        --out validation/data/nvdla_rtl_batch.json

tests/integration/test_nvdla_batch.py checks the committed rows (bit-exact, the model's spans).
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
_PAD1 = {"pad_left": 1, "pad_right": 1, "pad_top": 1, "pad_bottom": 1}


@dataclass(frozen=True)
class Case:
    name: str
    shape: ConvShape
    images: int
    plan: TilePlan


CASES = (
    Case(
        "batch_ws_c3x3", ConvShape(8, 8, 16, 32, 3, 3, **_PAD1), 3, TilePlan(8, 8, 8, 32, LoopOrder.WEIGHT_STATIONARY)
    ),
    Case("batch_ds_c3x3", ConvShape(8, 8, 16, 32, 3, 3, **_PAD1), 3, TilePlan(8, 8, 8, 32, LoopOrder.DATA_STATIONARY)),
    Case("batch_ws_c1x1", ConvShape(16, 16, 32, 64), 2, TilePlan(8, 16, 8, 64, LoopOrder.WEIGHT_STATIONARY)),
    Case("batch_ws_fc", ConvShape(2, 2, 64, 128), 4, TilePlan(4, 20, 2, 128, LoopOrder.WEIGHT_STATIONARY)),
    Case("batch_ds_fc", ConvShape(2, 2, 64, 128), 4, TilePlan(4, 20, 2, 128, LoopOrder.DATA_STATIONARY)),
)


def layer(case: Case) -> ConvLayer:
    """The batch as the mapper lowers a CNN convolution: INT8, SDP bias, every image in one layer."""
    return ConvLayer(case.name, case.shape, Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL), images=case.images)


def generate(folder: str | Path, hw: HwConfig | None = None) -> list[Path]:
    return write_planned(CASES, layer, folder, hw or load_config(HW))


def main(argv: list[str] | None = None) -> int:
    return folder_main(__doc__, generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
