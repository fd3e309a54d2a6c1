"""The mapper's own transformer layers as register programs for NVIDIA's nv_small RTL (issue 13).

Every program here comes out of the mapper: a workload graph is lowered, tiled and simulated by
`nvdla_mapper.map_model` on configs/nv_small_rtl_tb.toml, and `nvdla_mapper.export.programs.emit_programs` writes the
chosen hardware layers with the layout, CBUF split and band split the mapper chose. The set:

* BERT-style projections: M (tokens) 64 and 128 x K 256 and 768 x N 64 and 768, INT8, SDP bias +
  requantization to INT8;
* a projection whose input does not fit one CBUF load (M 64, K 3072), split by the mapper's plan into
  hardware layers (bands of rows, kernel tiles), emitted as one program of all of them;
* attention QK^T and PV of one head (head dim 64) at sequence 64 and 128: Q (resp. P) read as the
  feature cube the previous layer wrote, K (resp. V^T) re-laid out into the weight format by the host
  (nv_small has no BDMA), the scores written with one channel per key;
* a whole BERT encoder block at hidden 128, 2 heads, FFN 512, sequence 64 (no head): every NVDLA layer of it
  (softmax, GELU and layernorm run on the host on nv_small, which has no SDP LUT).

Suite `y_unit` (issue 29): the same block mapped onto nv_small_256_full (configs/nv_small_256_full_rtl_tb.toml),
a build with SDP's element-wise (Y) unit and LUT, where the mapper runs softmax (exp and 1/sum through the
LUT, the normalisation as an element-wise multiply), layernorm (square, rsqrt through the LUT, the
normalisation with a pair of element-wise operands), GELU (fused LUT) and the residual adds on NVDLA.

    python -m nvdla_validation.nvdla_rtl.transformer_programs build/tf        # write the programs
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/tf \\
        --out validation/data/nvdla_rtl_transformer.json                # run them on the RTL
    python -m nvdla_validation.nvdla_rtl.transformer_programs build/tfy --suite y_unit
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_small_256_full --tests-dir build/tfy \\
        --memory fixed_latency --out validation/data/nvdla_rtl_transformer_y.json   # (and without --memory:
        # NVIDIA's testbench memory, --out validation/data/nvdla_rtl_transformer_y_nvidia_memory.json)
    python -m nvdla_validation.nvdla_rtl.transformer_programs build/tfyl --suite y_unit_large   # on nv_large
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_large --tests-dir build/tfyl \\
        --out validation/data/nvdla_rtl_transformer_y_nv_large.json
    python -m nvdla_validation.nvdla_rtl.transformer_programs build/tfyf --suite y_unit_full     # on nv_full
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir build/tfyf \\
        --out validation/data/nvdla_rtl_transformer_y_nv_full.json
    python -m nvdla_validation.nvdla_rtl.transformer_programs build/tfbf --suite bert_base_full  # BERT-base layer
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir build/tfbf \\
        --out validation/data/nvdla_rtl_transformer_bert_base_nv_full.json

tests/integration/test_nvdla_transformer.py regenerates the programs in CI (no RTL) and checks the CRCs
the RTL met and the model's cycles against the committed measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from nvdla_mapper.export.programs import MANIFEST, emit_programs
from nvdla_mapper.frontends.presets import ModelSpec, Stage, build_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.results import MapResult
from nvdla_mapper.workload import Graph, Op, OpKind
from nvdla_sim.config import load_config
from nvdla_sim.precision import Precision

HW = "nv_small_rtl_tb"
HW_Y = "nv_small_256_full_rtl_tb"
HW_Y_LARGE = "nv_large_rtl_tb"
DATA = Path(__file__).resolve().parent.parent / "data" / "nvdla_rtl_transformer.json"
DATA_Y = DATA.with_name("nvdla_rtl_transformer_y.json")
DATA_Y_LARGE = DATA.with_name("nvdla_rtl_transformer_y_nv_large.json")
HW_Y_MEDIUM = "nv_medium_1024_full_rtl_tb"
DATA_Y_MEDIUM = DATA.with_name("nvdla_rtl_transformer_y_nv_medium_1024_full.json")
HW_FULL = "nv_full_rtl_tb"
DATA_Y_FULL = DATA.with_name("nvdla_rtl_transformer_y_nv_full.json")
DATA_BASE_FULL = DATA.with_name("nvdla_rtl_transformer_bert_base_nv_full.json")
BLOCK = ModelSpec("bert-h128", "bert", (Stage(1, 128, 2, 512),), vocab=30522)  # BERT-tiny's block width
BASE = ModelSpec("bert-base-1layer", "bert", (Stage(1, 768, 12, 3072),), vocab=30522)
BLOCK_SEQ = 64


@dataclass(frozen=True)
class Case:
    """One mapped workload and the tasks of it to emit, written as `<prefix><task>` programs."""

    prefix: str
    kind: str  # projection, split, attention, block
    graph: object
    seq: int
    tasks: tuple[str, ...] | None  # None: every hardware layer
    hw: str = HW


def _projection(m: int, k: int, n: int):
    g = Graph(f"proj_m{m}_k{k}_n{n}", batch=1, seq=m)
    x = g.add(Op("x", OpKind.GATHER, m, k, group="host"))
    g.add(Op("proj", OpKind.MATMUL, m, n, k=k, group="matmul"), x)
    return g.g


def cases() -> list[Case]:
    out = []
    for m in (64, 128):
        for k in (256, 768):
            for n in (64, 768):
                out.append(Case(f"tf_proj_m{m}_k{k}_n{n}_", "projection", _projection(m, k, n), m, ("proj",)))
    out.append(Case("tf_split_m64_k3072_n64_", "split", _projection(64, 3072, 64), 64, ("proj",)))
    for seq in (64, 128):
        g = build_graph(BASE, seq=seq, head="none")
        out.append(Case(f"tf_attn_s{seq}_", "attention", g, seq, ("layer0.attn.qk", "layer0.attn.pv")))
    out.append(Case("tf_block_", "block", build_graph(BLOCK, seq=BLOCK_SEQ, head="none"), BLOCK_SEQ, None))
    return out


def y_unit_cases() -> list[Case]:
    """The block on a build with SDP's Y unit: every layer, softmax and layernorm included."""
    return [Case("tfy_block_", "block", build_graph(BLOCK, seq=BLOCK_SEQ, head="none"), BLOCK_SEQ, None, HW_Y)]


def y_unit_large_cases() -> list[Case]:
    """The same block on nv_large (64x32 MACs, EW 4 elements/cycle with the LUT, a 256-bit bus)."""
    return [Case("tfyl_block_", "block", build_graph(BLOCK, seq=BLOCK_SEQ, head="none"), BLOCK_SEQ, None, HW_Y_LARGE)]


def y_unit_medium_cases() -> list[Case]:
    """The same block on nv_medium_1024_full (32x32 MACs, EW 2 elements/cycle with the LUT, a 256-bit bus)."""
    return [Case("tfym_block_", "block", build_graph(BLOCK, seq=BLOCK_SEQ, head="none"), BLOCK_SEQ, None, HW_Y_MEDIUM)]


def y_unit_full_cases() -> list[Case]:
    """The same block on nvdlav1's nv_full (64x32 MACs, EW 4 elements/cycle with the LUT, 512-bit ports):
    the README's build."""
    return [Case("tfyf_block_", "block", build_graph(BLOCK, seq=BLOCK_SEQ, head="none"), BLOCK_SEQ, None, HW_FULL)]


def bert_base_full_cases() -> list[Case]:
    """One BERT-base encoder layer at sequence 128 on nv_full: the README job's layers at their own shapes
    (hidden 768, 12 heads, FFN 3072), every hardware layer of it."""
    return [Case("tfbf_", "block", build_graph(BASE, seq=128, head="none"), 128, None, HW_FULL)]


SUITES = {
    "nv_small": (HW, DATA, cases),
    "y_unit_full": (HW_FULL, DATA_Y_FULL, y_unit_full_cases),
    "bert_base_full": (HW_FULL, DATA_BASE_FULL, bert_base_full_cases),
    "y_unit": (HW_Y, DATA_Y, y_unit_cases),
    "y_unit_large": (HW_Y_LARGE, DATA_Y_LARGE, y_unit_large_cases),
    "y_unit_medium": (HW_Y_MEDIUM, DATA_Y_MEDIUM, y_unit_medium_cases),
}


def map_case(case: Case) -> MapResult:
    """The case mapped as `nvdla map` maps it, with the softmax on SDP's LUT where the build has one
    (--softmax nvdla: the Y-unit suites put the mapper's LUT steps on the RTL; the mapper's own choice is
    the host, docs/quantization.md)."""
    hw = load_config(case.hw)
    softmax = "nvdla" if hw.sdp.lut and hw.sdp.ew_throughput > 0 else "auto"
    # LayerNorm's steps (the --layernorm nvdla what-if) where the build can hold their INT16 statistics
    layernorm = "nvdla" if softmax == "nvdla" and Precision.INT16 in hw.precisions else "auto"
    return map_model(
        case.graph, hw, precision=Precision.INT8, batch=1, seq=case.seq, softmax=softmax, layernorm=layernorm
    )


def generate(folder: str | Path, suite: str = "nv_small") -> list[dict]:
    """Write every case's programs of `suite` into `folder` (flat, one trace-test folder each) and return
    the manifest rows: program name, case kind, task, band, model and mapper cycles, expected CRCs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hw, _, suite_cases = SUITES[suite]
    rows = []
    for case in suite_cases():
        res = map_case(case)
        for task in case.tasks or (None,):
            for p in emit_programs(res, folder, layer=task, prefix=case.prefix).programs:
                rows.append({**p, "case": case.prefix, "kind": case.kind, "model": res.model})
        if case.kind == "block":
            rows.append(_host_row(res))
    (folder / MANIFEST).write_text(json.dumps({"hw": hw, "programs": rows}, indent=1) + "\n")
    return rows


def _host_row(res: MapResult) -> dict:
    """The block's host steps, named with the mapper's cycles for them (no program)."""
    host = [
        {
            "task": r.task.name,
            "resource": r.task.resource.value,
            "cycles": r.cycles,
            "count": r.task.count,
            "note": r.task.note,
        }
        for r in res.results
        if r.task.layer is None
    ]
    return {"name": "", "kind": "block_host", "host_tasks": host, "total_cycles": res.total_cycles}


def markdown(rows: list[dict], measured: dict) -> str:
    """Tables for docs/validation.md: every program (model vs RTL, Verilator wall time), then the block
    layer by layer with its host steps and totals."""
    rtl = {r["name"]: r for r in measured["rows"]}
    out = [
        "| program | kind | hardware layers | model cycles | RTL cycles | model/RTL | output | Verilator s |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    progs = [r for r in rows if r["name"]]
    for r in progs:
        m = rtl[r["name"]]
        span = m["span_cycles"]  # first op enable to last interrupt (op enable to interrupt for one layer)
        out.append(
            f"| {r['name']} | {r['kind']} | {r['hardware_layers']} | {r['model_cycles']:,} | {span:,} | "
            f"{r['model_cycles'] / span:.3f} | {'bit-exact' if m['status'] == 'pass' else m['status']} | "
            f"{m['wall_s']:.1f} |"
        )
    block = [r for r in progs if r["kind"] == "block"]
    host = next(r for r in rows if r["kind"] == "block_host")
    out += ["", "| block step | runs on | instances | model cycles | RTL cycles |", "|---|---|---:|---:|---:|"]
    model_nvdla = rtl_nvdla = 0
    for r in block:
        m = rtl[r["name"]]["span_cycles"]
        model_nvdla += r["model_cycles"] * r["count"]
        rtl_nvdla += m * r["count"]
        out.append(f"| {r['task']} | NVDLA | {r['count']} | {r['model_cycles']:,} | {m:,} |")
    for h in host["host_tasks"]:
        out.append(f"| {h['task']} | {h['resource']} ({h['note']}) | {h['count']} | {h['cycles']:,} (all) | - |")
    out += [
        "",
        f"NVDLA layers, instances back to back: model {model_nvdla:,} cycles, RTL {rtl_nvdla:,} "
        f"(model/RTL {model_nvdla / rtl_nvdla:.4f}). The mapper's whole block with its host steps and "
        f"overlap: {host['total_cycles']:,} cycles.",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="where to write the trace-test folders and programs.json")
    ap.add_argument("--markdown", action="store_true", help="print the tables of docs/validation.md (committed data)")
    ap.add_argument("--suite", choices=sorted(SUITES), default="nv_small", help="which programs (default: nv_small)")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(generate(args.folder, args.suite), json.loads(SUITES[args.suite][1].read_text())))
        return 0
    rows = [r for r in generate(args.folder, args.suite) if r["name"]]
    for r in rows:
        print(f"{r['name']:44s} {r['kind']:10s} model {r['model_cycles']:>9,} cycles")
    print(f"wrote {len(rows)} programs to {args.folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
