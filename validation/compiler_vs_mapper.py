"""NVIDIA's compiler beside the mapper (issue 57 step 5): the same network on the same build, NVIDIA's
program (its kernel-mode driver's register log, decoded and replayed by program.sequence) against the
mapper's (nvdla_mapper.passes.map_model), both timed by the same model, per layer and whole.

    python -m nvdla_validation.compiler_vs_mapper --risc-v-nvdla CHECKOUT [--gem5-nvdla CHECKOUT] [--out FILE]

One timing model on both sides, so a difference is a difference between the two programs: how a layer is
tiled (CBUF banks for data and weights, whether its data or weights are fetched once), which operations are
fused (a residual add or a pooling in the convolution's SDP pass, or a separate pass through memory), the
input mode of the first layer, and the driver's register programming between operations. Each matched
convolution row gives both programs' CBUF banks and the mapper's tile plan to read the difference from; a
last fully connected layer of one pixel, which the mapper runs as a matrix product, is in the totals only.

The networks (the mapper's presets of the same shapes, mapper/frontends/cnn.py):
* RISC-V-NVDLA `lenet-5`: Caffe's MNIST LeNet, INT8 on nv_small (preset lenet_mnist);
* RISC-V-NVDLA `resnet18`: its CIFAR-10 ResNet (models/resnet-18-cifar), INT8 on nv_small (preset
  resnet18_cifar);
* RISC-V-NVDLA `resnet50`: ResNet-50, INT8 on nv_small (preset resnet50);
* gem5-NVDLA's traces on nv_full (FP16, as NVIDIA's compiler builds for nv_full): `lenet`,
  `resnet18-cifar10` and `resnet18` (ImageNet), where given.
The mapper maps each at the precision of NVIDIA's program.
A network whose log is absent from the checkout is listed as missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_mapper.options import MapOptions
from nvdla_mapper.passes import map_model
from nvdla_sim.config import load_config
from nvdla_sim.engine.stats import ConvDetail
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.precision import Precision
from nvdla_sim.processors.conv.registers import ConvOp
from nvdla_sim.processors.pdp.registers import PdpOp
from nvdla_sim.program.run import run_program
from nvdla_validation.nvdla_sw import write_rows

OUT = Path(__file__).resolve().parent / "data" / "compiler_vs_mapper.json"


@dataclass(frozen=True)
class Network:
    name: str
    source: str  # "risc-v-nvdla" or "gem5-nvdla"
    log: str  # path in that checkout
    hw: str
    preset: str


_GEM5 = "bsc-util/nvdla_utilities/example_usage/traces"
NETWORKS = (
    Network("lenet (MNIST)", "risc-v-nvdla", "lenet-5/pmem/output.txn", "nv_small_rtl_tb", "lenet_mnist"),
    Network("resnet-18 (CIFAR-10)", "risc-v-nvdla", "resnet18/pmem/output.txn", "nv_small_rtl_tb", "resnet18_cifar"),
    Network("resnet-50", "risc-v-nvdla", "resnet50/pmem/output.txn", "nv_small_rtl_tb", "resnet50"),
    Network("lenet (MNIST)", "gem5-nvdla", f"{_GEM5}/lenet/input.txn", "nv_full", "lenet_mnist"),
    Network("resnet-18 (CIFAR-10)", "gem5-nvdla", f"{_GEM5}/resnet18-cifar10/input.txn", "nv_full", "resnet18_cifar"),
    Network("resnet-18", "gem5-nvdla", f"{_GEM5}/resnet18/input.txn", "nv_full", "resnet18"),
)


def _key(s: ConvShape) -> tuple[int, ...]:
    """What a layer's pieces share: input width and channels, kernels, kernel size, stride."""
    return (s.in_w, s.in_c, s.out_k, s.kernel_w, s.kernel_h, s.stride_x, s.stride_y)


def _out_rows(s: ConvShape) -> int:
    return (s.in_h + s.pad_top + s.pad_bottom - ((s.kernel_h - 1) * s.dilation_y + 1)) // s.stride_y + 1


def nvidia_side(log: Path, hw_name: str) -> dict:
    """NVIDIA's program: the replay's cycles, and each operation's (the model's time of it, op enable to
    interrupt) with what it runs."""
    hw = load_config(hw_name)
    run = run_program(log, hw)
    seq = run.sequence
    convs, others = [], []
    for t in seq.operations:
        conv = next((op for op in t.operation.ops if isinstance(op, ConvOp)), None)
        if conv is not None:
            convs.append({"key": _key(conv.shape), "rows": _out_rows(conv.shape), "cycles": t.cycles,
                          "banks": (conv.data_banks, conv.weight_banks), "image": conv.pixel_input,
                          "pool": conv.pdp is not None})  # fmt: skip
        else:
            kind = "pooling" if any(isinstance(op, PdpOp) for op in t.operation.ops) else "SDP pass"
            others.append({"kind": kind, "cycles": t.cycles})
    precisions = {op.precision for t in seq.operations for op in t.operation.ops if isinstance(op, ConvOp)}
    if len(precisions) != 1:
        raise NvdlaError(f"{log}: convolutions at {sorted(p.value for p in precisions)}; one precision is compared")
    return {
        "precision": precisions.pop(),
        "cycles": seq.cycles,
        "register_access_cycles": round(seq.csb_cycles),
        "operations": len(seq.operations),
        "convolutions": convs,
        "other": others,
    }


def mapper_side(preset: str, hw_name: str, precision: Precision) -> dict:
    """The mapper's program of the preset: its schedule's cycles, and per convolution op (in the graph's
    order) its shape, its tasks' cycles, hardware layers and tiles, and what its SDP pass fused."""
    hw = load_config(hw_name)
    g = CNN_PRESETS[preset](1)
    res = map_model(g, hw, MapOptions(precision))
    shapes = {n: d["op"].attrs.conv for n, d in g.nodes(data=True) if getattr(d["op"].attrs, "conv", None) is not None}
    per_op: dict[str, dict] = {}
    others: dict[str, int] = {}
    for r in res.results:
        layer = r.task.layer
        if isinstance(layer, ConvLayer) and r.task.op in shapes:
            row = per_op.setdefault(r.task.op, {"op": r.task.op, "cycles": 0, "hardware_layers": 0, "tiles": 0,
                                                "image": layer.image_input, "fused": set()})  # fmt: skip
            row["cycles"] += r.duration
            detail = r.stats.detail if r.stats is not None else None
            if isinstance(detail, ConvDetail):
                row["hardware_layers"] += detail.hardware_layers
                row["tiles"] += detail.data_tiles * detail.weight_tiles
            if layer.pool is not None:
                row["fused"].add("pooling")
            if layer.sdp.eltwise.value != "none" or layer.sdp.scale.value == "per_element":
                row["fused"].add("residual add")
        elif r.task.resource.value != "host":
            others[r.task.group] = others.get(r.task.group, 0) + r.duration
    ops = [{**per_op[n], "key": _key(shapes[n]), "rows": _out_rows(shapes[n]), "fused": sorted(per_op[n]["fused"])}
           for n in g.nodes if n in per_op]  # fmt: skip
    return {"cycles": res.total_cycles, "convolutions": ops, "other_by_group": others}


def _reasons(nv: list[dict], m: dict) -> list[str]:
    """Why the two programs of one layer differ, from what each does (a difference of a tenth or more)."""
    out = []
    if m["image"] and not any(p["image"] for p in nv):
        out.append(
            "input mode: the mapper reads the first layer as a pixel image (channels packed), NVIDIA's as features"
        )
    if len(nv) > 1:
        out.append(f"NVIDIA's program splits the layer into {len(nv)} operations by rows (a driver round trip each)")
    if m["hardware_layers"] > 1:
        out.append(f"the mapper runs it as {m['hardware_layers']} hardware layers")
    if "pooling" in m["fused"] and not any(p["pool"] for p in nv):
        out.append("the mapper pools on the fly in the same pass; NVIDIA's program pools in a separate PDP pass")
    if "residual add" in m["fused"]:
        out.append("the mapper adds the residual in this pass's SDP; NVIDIA's program adds it in a separate SDP pass")
    banks = sorted({p["banks"] for p in nv})
    out.append(f"CBUF banks (data+weight): NVIDIA's {', '.join(f'{d}+{w}' for d, w in banks)}; the mapper's plan: "
               f"{m['tiles']} tiles")  # fmt: skip
    return out


def compare(net: Network, log: Path) -> dict:
    t0 = time.perf_counter()
    nv = nvidia_side(log, net.hw)
    mp = mapper_side(net.preset, net.hw, nv["precision"])
    # each mapper convolution takes NVIDIA's next run of operations of its width, channels, kernels and stride
    # whose output rows add up to its own (NVIDIA's compiler splits a layer CBUF cannot hold by rows)
    pieces = list(nv["convolutions"])
    rows, unmatched = [], []
    for m in mp["convolutions"]:
        start = next((i for i, p in enumerate(pieces) if p["key"] == m["key"]), None)
        taken, got = [], 0
        i = start
        while i is not None and i < len(pieces) and pieces[i]["key"] == m["key"] and got < m["rows"]:
            taken.append(pieces[i])
            got += pieces[i]["rows"]
            i += 1
        if start is None or got != m["rows"]:
            unmatched.append(m["op"])
            continue
        del pieces[start : start + len(taken)]
        nv_cycles = sum(p["cycles"] for p in taken)
        rows.append({
            "layer": m["op"],
            "shape": list(m["key"]),
            "nvidia_cycles": nv_cycles,
            "nvidia_operations": len(taken),
            "mapper_cycles": m["cycles"],
            "ratio": round(m["cycles"] / nv_cycles, 3),
            "reasons": _reasons(taken, m) if abs(m["cycles"] / nv_cycles - 1) >= 0.1 else [],
        })  # fmt: skip
    return {
        "name": net.name,
        "log": f"{net.source}:{net.log}",
        "hw": net.hw,
        "preset": net.preset,
        "precision": nv["precision"].value,  # NVIDIA's program's, and so the mapper's
        "nvidia_cycles": nv["cycles"],
        "nvidia_operations": nv["operations"],
        "nvidia_register_access_cycles": nv["register_access_cycles"],
        "nvidia_other_cycles": {
            k: sum(o["cycles"] for o in nv["other"] if o["kind"] == k) for k in sorted({o["kind"] for o in nv["other"]})
        },
        "mapper_cycles": mp["cycles"],
        "mapper_other_cycles": mp["other_by_group"],
        "layers": rows,
        "unmatched_mapper_layers": unmatched,
        "unmatched_nvidia_operations": len(pieces),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--risc-v-nvdla", type=Path, help="a checkout of github.com/vineetbitsp/RISC-V-NVDLA")
    ap.add_argument("--gem5-nvdla", type=Path, help="a checkout of github.com/suchandler96/gem5-NVDLA")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    roots = {"risc-v-nvdla": args.risc_v_nvdla, "gem5-nvdla": args.gem5_nvdla}
    rows, missing = [], []
    for net in NETWORKS:
        root = roots[net.source]
        log = root / net.log if root is not None else None
        if log is None or not log.is_file():
            missing.append(f"{net.source}:{net.log}")
            continue
        row = compare(net, log)
        rows.append(row)
        print(f"{net.name:<22} NVIDIA {row['nvidia_cycles']:>12,}  mapper {row['mapper_cycles']:>12,}  "
              f"({row['mapper_cycles'] / row['nvidia_cycles']:.2f}x)", file=sys.stderr)  # fmt: skip
    write_rows(
        args.out,
        what="NVIDIA's compiled programs (driver logs) and the mapper's, same networks and builds, timed by the "
        "same model (docs/validation.md, 'NVIDIA's compiler beside the mapper')",
        command="python -m nvdla_validation.compiler_vs_mapper --risc-v-nvdla CHECKOUT",
        missing=missing,
        rows=rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
