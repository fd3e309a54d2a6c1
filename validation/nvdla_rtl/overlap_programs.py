"""Back-to-back independent layers on NVIDIA's nv_small RTL: how much of a second layer hides behind the first.

Attention heads, windows and decode sequences are many independent instances of one hardware layer;
the mapper runs them back to back (passes.instances_duration). These programs measure what the RTL
overlaps: a 1x1 matmul alone, and two of them in one program, the second programmed into register
group 1 (S_POINTER producer 1) and enabled while the first runs, as a driver with ping-pong register
groups does. Both outputs are checked against the model's CRCs.

    python -m nvdla_validation.nvdla_rtl.overlap_programs build/overlap
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/overlap \\
        --out validation/data/nvdla_rtl_overlap.json

The increment of the second layer (span of the pair minus the single layer) is what
instances_duration should predict; tests/integration/test_nvdla_overlap.py compares them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nvdla_mapper.export.layer_programs import layer_programs
from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.layers import ConvShape
from nvdla_sim.precision import Precision
from nvdla_sim.program.emit import Alloc, TraceProgram, conv_layer, emit_program
from nvdla_sim.units.memory_format import cube_size, dc_weight_bytes, feature_image

HW = "nv_small_rtl_tb"
P = Precision.INT8
CONV_UNITS = ("SDP", "CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")
SHAPES = {"m16": (16, 64, 64), "m64": (64, 64, 64)}  # one attention head's QK^T at seq 16 and 64


def _matmul(name: str, mkn: tuple[int, int, int], base: int, seed: int, hw: HwConfig) -> TraceProgram:
    shape = ConvShape.matmul(*mkn)
    rng = np.random.default_rng(seed)
    op, din, waddr, oaddr = conv_layer(shape, P, hw, Alloc(next_addr=base), cvt=(0, 1, 10))
    x = rng.integers(-128, 128, (shape.in_h, shape.in_w, shape.in_c)).astype(np.int8)
    w = rng.integers(-128, 128, (shape.out_k, 1, 1, shape.in_c)).astype(np.int8)
    inputs = [(din.addr, feature_image(x, din, P, hw)), (waddr, dc_weight_bytes(w, P, hw))]
    return emit_program(name, op, inputs, [(oaddr, cube_size(op.out, shape.out_k, P, hw))], hw)


def pair(name: str, a: TraceProgram, b: TraceProgram) -> TraceProgram:
    """`a` in register group 0, then `b` in group 1, both enabled before either interrupt is awaited."""
    prog = TraceProgram(name)
    waits = ("intr_notify", "check_crc")
    prog.lines = [line for line in a.lines if not line.startswith(waits)]
    prog.lines += [f"reg_write(NVDLA_{u}.S_POINTER_0, 0x1);" for u in CONV_UNITS]
    skip = (*waits, "//", "poll_reg_equal", "reg_write(NVDLA_GLB.")
    prog.lines += [line for line in b.lines if not line.startswith(skip)]
    prog.lines += ["intr_notify(SDP_0, sync_id_0);", "intr_notify(SDP_1, sync_id_1);"]
    prog.lines += [line for line in a.lines if line.startswith("check_crc")]
    prog.lines += [line.replace("sync_id_0", "sync_id_1") for line in b.lines if line.startswith("check_crc")]
    for src in (a, b):
        for fname, data in src.images.items():
            new = fname.replace(src.name, f"{name}_{src.name[-1]}")
            prog.lines = [line.replace(f'"{fname}"', f'"{new}"') for line in prog.lines]
            prog.images[new] = data
    prog.expected = [*a.expected, *b.expected]
    return prog


def generate(folder: str | Path, hw: HwConfig | None = None) -> list[Path]:
    hw = hw or load_config(HW)
    out = []
    for tag, mkn in SHAPES.items():
        a = _matmul(f"overlap_{tag}_a", mkn, 0x80000000, 1, hw)
        b = _matmul(f"overlap_{tag}_b", mkn, 0x80100000, 2, hw)
        out += [a.write(folder), pair(f"overlap_{tag}_ab", a, b).write(folder)]
    return out


def write_planned(cases, layer_of, folder: str | Path, hw: HwConfig) -> list[Path]:
    """Write one register program per case: `layer_of(case)` under `case.plan`, named `case.name`."""
    return [layer_programs(layer_of(c), hw, plan=c.plan, name=c.name)[0].program.write(folder) for c in cases]


def folder_main(doc: str, generate: Callable[[str], list[Path]], argv: list[str] | None) -> int:
    """The command line of a program set that only writes its programs to a folder."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    for p in generate(args.folder):
        print(p)
    return 0


def main(argv: list[str] | None = None) -> int:
    return folder_main(__doc__, generate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
