"""Weight blobs that are not whole 128-byte blocks, between hardware layers, on NVIDIA's RTL.

Found on 2026-12-05 when the search split the mapper's one-channel broadcast layers into kernel tiles: the
later hardware layers of such programs wrote other bytes than the model. Each program here is a layer run as
two hardware layers in register groups 0 and 1 (reuse_programs.case_program: the same constructions as the
mapper's plans), for input channels C and kernels K whose weight blobs (kernels x C bytes at INT8) are or are
not multiples of 128 bytes:
- `ks` / `kn`: one band, the kernels in two halves, the input kept in CBUF or fetched again;
- `ds` / `ws`: two bands of rows, the weights fetched again or kept (WEIGHT_REUSE).
On nv_small, nv_small_256_full and nv_large a program fails exactly when its second hardware layer fetches
weights after a blob whose 128-byte padding spans a CBUF entry of the build (8, 32 and 64 bytes): CDMA
writes the padding and keeps its write pointer, CSC's read pointer moves only by the entries it read
(nvdla_sim.units.cdma.weight_pointer_lag); `ws` never fetches again and always passes.

    python -m nvdla_validation.nvdla_rtl.align_programs build/align [--hw nv_small_rtl_tb]
    python -m nvdla_validation.nvdla_rtl.run_reference SRC [--project P] --tests-dir build/align \\
        --out validation/data/nvdla_rtl_weight_align[_P].json

tests/integration/test_nvdla_weight_align.py checks the committed rows against that rule; with
--entry-weight-bytes (D_WEIGHT_BYTES in whole CBUF entries, what the emitter now writes) all pass.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.layers import ConvShape
from nvdla_sim.program.emit import TraceProgram
from nvdla_sim.units.cdma import weight_pointer_lag
from nvdla_validation.nvdla_rtl.reuse_programs import Case, case_program

HW = "nv_small_rtl_tb"
# (input channels, kernels): blobs of 16 to 640 bytes, aligned and not
SHAPES = ((1, 32), (2, 32), (3, 32), (4, 32), (5, 32), (8, 32), (1, 64), (2, 64), (3, 64), (1, 128), (3, 128))
SPLITS = {"ks": ("kernels", True), "kn": ("kernels", False), "ds": ("rows", False), "ws": ("rows", True)}


def case_name(split: str, c: int, k: int) -> str:
    """The program's name (reuse_programs names its programs reuse_<case>)."""
    return f"reuse_align_{split}_c{c}_k{k}"


def first_blob_bytes(split: str, c: int, k: int) -> int:
    """Weight bytes of the first hardware layer's blob (INT8, 1x1 kernels)."""
    return (k // 2 if SPLITS[split][0] == "kernels" else k) * c


def expected_to_fail(split: str, c: int, k: int, hw: HwConfig) -> bool:
    """The rule (cdma.weight_pointer_lag): the second layer fetches weights after a blob that left CSC's
    weight pointer behind CDMA's (its 128-byte padding spans at least one CBUF entry of the build)."""
    fetches_again = split != "ws"
    return fetches_again and weight_pointer_lag(first_blob_bytes(split, c, k), hw.cbuf_entry_bytes) > 0


def programs(hw: HwConfig | None = None, *, entry_weight_bytes: bool = False) -> list[TraceProgram]:
    """The 44 programs; `entry_weight_bytes`: D_WEIGHT_BYTES in whole CBUF entries instead of 128-byte
    blocks (what CSC reads: no weight pointer lag; names end in _e)."""
    hw = hw or load_config(HW)
    unit = hw.cbuf_entry_bytes if entry_weight_bytes else 128
    out = []
    for i, (c, k) in enumerate(SHAPES):
        for j, (split, (how, reuse)) in enumerate(SPLITS.items()):
            shape = ConvShape(in_w=16, in_h=8, in_c=c, out_k=k)
            name = f"align_{split}_c{c}_k{k}" + ("_e" if entry_weight_bytes else "")
            out.append(case_program(Case(name, shape, how, reuse, 4), hw, 900 + 8 * i + j, weight_unit=unit))
    return out


def generate(folder: str | Path, hw: HwConfig | None = None, *, entry_weight_bytes: bool = False) -> list[Path]:
    return [p.write(folder) for p in programs(hw, entry_weight_bytes=entry_weight_bytes)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="where to write the trace-test folders")
    ap.add_argument("--hw", default=HW, help=f"the testbench config of the build (default {HW})")
    ap.add_argument(
        "--entry-weight-bytes",
        action="store_true",
        help="D_WEIGHT_BYTES in whole CBUF entries instead of 128-byte blocks (a candidate fix of the weight "
        "pointer lag, docs/validation.md 5f)",
    )
    args = ap.parse_args(argv)
    for path in generate(args.folder, load_config(args.hw), entry_weight_bytes=args.entry_weight_bytes):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
