"""CBUF reuse between hardware layers on NVIDIA's nv_small RTL: the modes a split layer's tiles run in.

A convolution too large for CBUF runs as several hardware layers. Each program here is two of them in
register groups 0 and 1, the second enabled while the first runs (as a ping-pong driver does):

- `ws_*`: two bands of output rows with the weights kept in CBUF: the first sets SKIP_WEIGHT_RLS, the
  second WEIGHT_REUSE. Its weight address holds other random bytes, so it passes only if the RTL really
  computes with the kept weights (weight-stationary order across bands).
- `ds_*`: the same two bands without reuse, each fetching its weights (the mapper's data-stationary plan).
- `ks_*`: one band, kernels split into two hardware layers that keep the input (SKIP_DATA_RLS, then
  DATA_REUSE, the second's input address holding other bytes); `kn_*` the same without reuse.
- `split_same` / `split_change`: two independent matmuls with the same CBUF bank split, and with the
  second's data banks grown from 4 to 12.

    python -m nvdla_validation.nvdla_rtl.reuse_programs build/reuse
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/reuse \\
        --out validation/data/nvdla_rtl_reuse.json

tests/integration/test_nvdla_reuse.py checks the committed rows: both layers wrote the model's bytes, and
the mapper's plan simulation (simulate_conv with the matching TilePlan) predicts each program's span.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, band_shape, row_tiles
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.precision import Precision
from nvdla_sim.processors.conv.registers import CbufReuse
from nvdla_sim.program.emit import Alloc, Step, TraceProgram, conv_layer, emit_sequence
from nvdla_sim.units.memory_format import cube_size, dc_weight_bytes, feature_image
from nvdla_validation.nvdla_rtl.overlap_programs import folder_main
from nvdla_validation.nvdla_rtl.own_programs import random_data

HW = "nv_small_rtl_tb"
P = Precision.INT8
BASES = (0x80000000, 0x80200000)  # each hardware layer's own memory region


@dataclass(frozen=True)
class Case:
    """A layer split in two hardware layers, and how."""

    name: str
    shape: ConvShape
    split: str  # "rows": two bands of output rows; "kernels": two halves of the kernels
    reuse: bool  # keep the shared operand in CBUF (weights across bands, input across kernel halves)
    data_banks: int

    @property
    def plan(self) -> TilePlan | None:
        """The mapper's tile plan that runs the layer this way: two bands in data- or weight-stationary
        order, or (kernel split with the input kept) one band and two weight tiles in weight-stationary
        order. None for the kernel split without reuse, which no plan makes (data-stationary order streams
        the kernel groups through the weight ring inside one hardware layer)."""
        s = self.shape
        order = LoopOrder.WEIGHT_STATIONARY if self.reuse else LoopOrder.DATA_STATIONARY
        if self.split == "rows":
            return TilePlan(self.data_banks, 32 - self.data_banks, -(-s.out_h // 2), s.out_k, order)
        return TilePlan(self.data_banks, 32 - self.data_banks, s.out_h, s.out_k // 2, order) if self.reuse else None


MM = ConvShape(in_w=16, in_h=8, in_c=64, out_k=32)  # 128 tokens x 64 -> 32, as rows of 16 tokens
CONV = ConvShape(in_w=16, in_h=10, in_c=32, out_k=32, kernel_w=3, kernel_h=3, pad_left=1, pad_right=1, pad_top=1,
                 pad_bottom=1)  # fmt: skip
CASES = (
    Case("ws_mm", MM, "rows", True, 4),
    Case("ds_mm", MM, "rows", False, 4),
    Case("ws_conv", CONV, "rows", True, 4),
    Case("ds_conv", CONV, "rows", False, 4),
    Case("ks_mm", MM, "kernels", True, 8),
    Case("kn_mm", MM, "kernels", False, 8),
)


def _step(shape: ConvShape, x: np.ndarray, w: np.ndarray, base: int, data_banks: int, reuse: CbufReuse,
          hw: HwConfig) -> Step:  # fmt: skip
    op, din, waddr, oaddr = conv_layer(shape, P, hw, Alloc(next_addr=base), cvt=(0, 1, 10), data_banks=data_banks,
                                       reuse=reuse)  # fmt: skip
    inputs = [(din.addr, feature_image(x, din, P, hw)), (waddr, dc_weight_bytes(w, P, hw))]
    return Step(op, inputs, [(oaddr, cube_size(op.out, shape.out_k, P, hw))])


def case_program(case: Case, hw: HwConfig, seed: int, *, weight_unit: int = 128) -> TraceProgram:
    """`weight_unit`: D_WEIGHT_BYTES rounds each blob up to it (128: the programming guide's rule, as these
    programs ran on the RTL; a CBUF entry: what CSC reads and the emitter writes, docs/validation.md 5f)."""
    s = case.shape
    rng = np.random.default_rng(seed)
    x = random_data(rng, (s.in_h, s.in_w, s.in_c))
    w = random_data(rng, (s.out_k, s.kernel_h, s.kernel_w, s.in_c))
    layer = ConvLayer(case.name, s, P)
    if case.split == "rows":
        (a0, a1), (b0, b1) = row_tiles(layer, -(-s.out_h // 2))
        (sa, i0, i1), (sb, j0, j1) = band_shape(s, a0, a1), band_shape(s, b0, b1)
        kept = CbufReuse(skip_weight_rls=case.reuse)
        taken = CbufReuse(weight_reuse=case.reuse)
        wb = random_data(rng, w.shape) if case.reuse else w  # a decoy: the kept weights must be the ones used
        steps = [
            _step(sa, x[i0:i1], w, BASES[0], case.data_banks, kept, hw),
            _step(sb, x[j0:j1], wb, BASES[1], case.data_banks, taken, hw),
        ]
    else:
        half = s.out_k // 2
        sh = dataclasses.replace(s, out_k=half)
        xb = random_data(rng, x.shape) if case.reuse else x  # a decoy: the kept input must be the one used
        steps = [
            _step(sh, x, w[:half], BASES[0], case.data_banks, CbufReuse(skip_data_rls=case.reuse), hw),
            _step(sh, xb, w[half:], BASES[1], case.data_banks, CbufReuse(data_reuse=case.reuse), hw),
        ]
    steps = [_weight_bytes_in_units(st, weight_unit) for st in steps]
    return emit_sequence(f"reuse_{case.name}", steps, hw)


def _weight_bytes_in_units(step: Step, unit: int) -> Step:
    s = step.op.shape
    blob = s.out_k * s.kernel_w * s.kernel_h * s.in_c * P.bytes
    return dataclasses.replace(step, op=dataclasses.replace(step.op, weight_bytes=-(-blob // unit) * unit))


def split_program(name: str, banks: tuple[int, int], hw: HwConfig, seed: int) -> TraceProgram:
    """Two independent matmuls (MM's shape, own data), the second with `banks[1]` data banks."""
    rng = np.random.default_rng(seed)
    steps = [
        _step(
            MM,
            random_data(rng, (MM.in_h, MM.in_w, MM.in_c)),
            random_data(rng, (MM.out_k, 1, 1, MM.in_c)),
            base,
            db,
            CbufReuse(),
            hw,
        )
        for base, db in zip(BASES, banks, strict=True)
    ]
    return emit_sequence(f"reuse_{name}", steps, hw)


SPLITS = {"split_same": (4, 4), "split_change": (4, 12)}


def programs(hw: HwConfig | None = None) -> list[TraceProgram]:
    hw = hw or load_config(HW)
    out = [case_program(c, hw, 100 + i) for i, c in enumerate(CASES)]
    out += [split_program(n, b, hw, 200 + i) for i, (n, b) in enumerate(SPLITS.items())]
    return out


def generate(folder: str | Path, hw: HwConfig | None = None) -> list[Path]:
    return [p.write(folder) for p in programs(hw)]


def main(argv: list[str] | None = None) -> int:
    return folder_main(__doc__, generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
