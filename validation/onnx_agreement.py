"""An exported ONNX model against the same architecture from the preset path (a preset name or its
config.json): MACs, cycles and layer kinds on each hardware config (issue 19).

    python -m nvdla_validation.onnx_agreement MODEL.onnx --against gpt2 [--head lm] [--seq 128]
        [--hw nv_small nv_large nv_full] [--out FILE.json]

Needs no torch: the exports come from `python -m nvdla_validation.onnx_exports`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from nvdla_mapper.frontends.resolve import fixed_sequence, model_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.workload import OpKind, info, ops_in_order
from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision


def agreement(
    onnx_path: str, against: str, *, head: str = "auto", batch: int = 1, seq: int = 128, hws=("nv_full",)
) -> dict:
    """Per config: cycles and MACs of both paths and their ratio (ONNX / preset), and whether the two
    graphs hold the same kinds of layers; plus any host tasks the ONNX import left."""
    graphs = {
        "onnx": model_graph(onnx_path, batch=batch, seq=seq),
        "preset": model_graph(against, batch=batch, seq=seq if fixed_sequence(against) is None else None, head=head),
    }
    ops = {k: list(ops_in_order(g)) for k, g in graphs.items()}
    kinds = {k: Counter(o.kind.value for o in v if o.kind is not OpKind.RESHAPE) for k, v in ops.items()}
    macs = {k: sum(o.macs for o in v) for k, v in ops.items()}
    import onnx

    proto = onnx.load(str(onnx_path), load_external_data=False)
    out = {
        "onnx": str(onnx_path),
        "producer": f"{proto.producer_name} {proto.producer_version}",
        "opset": max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "against": against,
        "head": head,
        "batch": batch,
        "seq": seq,
        "macs": macs,
        "mac_ratio": macs["onnx"] / macs["preset"],
        "same_layer_kinds": kinds["onnx"] == kinds["preset"],
        "host_ops": [o.name for o in ops["onnx"] if o.kind is OpKind.HOST],
        "onnx_fusions": info(graphs["onnx"]).fusions,
        "configs": {},
    }
    for hw in hws:
        cfg = load_config(hw)
        cyc = {k: map_model(g, cfg, precision=Precision.INT8, batch=batch).total_cycles for k, g in graphs.items()}
        out["configs"][hw] = {"cycles": cyc, "cycle_ratio": cyc["onnx"] / cyc["preset"]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nvdla_validation.onnx_agreement", description=__doc__.split("\n")[0])
    ap.add_argument("onnx")
    ap.add_argument("--against", required=True, help="a preset name or a config.json")
    ap.add_argument("--head", default="auto")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hw", nargs="+", default=["nv_small", "nv_large", "nv_full"])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    try:
        rec = agreement(args.onnx, args.against, head=args.head, batch=args.batch, seq=args.seq, hws=args.hw)
    except NvdlaError as e:
        print(f"onnx_agreement: {e}", file=sys.stderr)
        return 2
    rec["command"] = "python -m nvdla_validation.onnx_agreement " + " ".join(argv if argv is not None else sys.argv[1:])
    for hw, r in rec["configs"].items():
        print(f"{hw:10s} cycles onnx {r['cycles']['onnx']:>12,} preset {r['cycles']['preset']:>12,} "
              f"ratio {r['cycle_ratio']:.4f}")  # fmt: skip
    print(
        f"MACs ratio {rec['mac_ratio']:.4f}, same layer kinds: {rec['same_layer_kinds']}, host ops: {rec['host_ops']}"
    )
    if args.out:
        args.out.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
