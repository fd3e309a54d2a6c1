"""Seven small SDP programs that find which INT16-to-INT8 pass NVIDIA's nv_full RTL runs (2026-12-06).

    python -m nvdla_validation.nvdla_rtl.sdp_16to8_programs DIR
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir DIR --timeout 40 \\
        --out validation/data/nvdla_rtl_sdp_16to8_nv_full.json

A standalone pass over a 16 x 2 x 64 cube with seeded data: INT16 in and INT8 out with no operand
(v5), with Y's multiplier per kernel (v2), with (ALU, MUL) pairs per kernel (v3), with X1's per-element
multiplier and the pairs (v6), with X2's multiplier per kernel (v7); the pairs over INT8 data (v4) and X1's
per-element multiplier over INT16 data writing INT16 (v1). Every INT16-in, INT8-out pass hung the RTL (SDP's
write DMA has no 16-to-8 mode: hw@nvdlav1 vmod/nvdla/sdp/NV_NVDLA_SDP_WDMA_cmd.v), which is why the model
refuses them (processors.sdp.execute.apply_sdp) and LayerNorm's normalisation is not a program (docs/validation.md
5j). Written with the model's 16-to-8 refusal lifted for the programs' making only (their expected CRCs are
what the model computes, which the RTL never got to write).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import nvdla_sim.processors.sdp.execute as execute
from nvdla_mapper.export.layer_programs import given_sdp_program
from nvdla_sim import Precision, load_config
from nvdla_sim.layers import SdpLayer, SdpSpec
from nvdla_sim.units.sdp import Convertor, EwStage, SdpParams, Stage, sdp_apply

I8, I16 = Precision.INT8, Precision.INT16
W, H, C = 16, 2, 64


def programs(folder: Path) -> list[str]:
    hw = load_config("nv_full")
    rng = np.random.default_rng(0)
    g, b = rng.integers(1000, 3000, C), rng.integers(-3000, 3000, C)
    r = rng.integers(-3000, 3000, (H * W, C))
    pairs = {"alu_operand": b, "alu_cvt": Convertor(0, 3, 1)}
    cases = [
        ("v5_cvt16to8", I16, SdpParams(cvt=Convertor(0, 1, 8), out_precision=I8)),
        ("v2_ymul_pk16", I16, SdpParams(y=EwStage(mul_operand=g, mul_truncate=12), out_precision=I8)),
        ("v3_ypairs16", I16, SdpParams(y=EwStage(mul_operand=g, mul_truncate=12, **pairs), out_precision=I8)),
        ("v4_ypairs8", I8, SdpParams(y=EwStage(mul_operand=g, mul_truncate=10, **pairs))),
        ("v1_x1mulpe16", I16, SdpParams(x1=Stage(mul_operand=r, mul_shift=12), out_precision=I16)),
        (
            "v6_x1mulpe_ypairs16",
            I16,
            SdpParams(
                x1=Stage(mul_operand=r),
                y=EwStage(mul_operand=g, mul_truncate=14, **pairs),
                cvt=Convertor(0, 1, 8),
                out_precision=I8,
            ),
        ),
        ("v7_x2mulpk16", I16, SdpParams(x2=Stage(mul_operand=g, mul_shift=12), out_precision=I8)),
    ]
    refuse = execute.apply_sdp
    execute.apply_sdp = execute.sdp_values  # what the arithmetic would write, without the mode's refusal
    try:
        for name, p, params in cases:
            data = rng.integers(-3000 if p is I16 else -100, 3000 if p is I16 else 100, (H, W, C))
            expect = sdp_apply(data.reshape(-1, C), params).values.reshape(H, W, C)
            lp = given_sdp_program(name, SdpLayer(name, W, H, C, p, SdpSpec()), hw, data, params, expect=expect)
            lp.program.write(folder)
    finally:
        execute.apply_sdp = refuse
    return [n for n, _, _ in cases]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    print(" ".join(programs(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
