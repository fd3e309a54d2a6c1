"""The trained ViT classifier, one whole inference, as NVDLA register programs for NVIDIA's nv_small RTL
(issue 31, item 5).

validation/data/trained/vit_digits.npz (validation/trained/train.py) classifies one test image of
scikit-learn's digits through the bit-exact INT8 datapath (mapper.studies.accuracy.vit_accuracy,
static max calibration, per-channel weight scales: the recipe of docs/quantization.md's first row), as the
mapper runs it on nv_small_rtl_tb (nv_small with the testbench's memory, whose plans the search picks for
the RTL run; on nv_small itself PV is one hardware layer, not two): every matmul (the patch embedding, the q/k/v/output projections, QK^T and PV
per head, the FFN, the classifier) is one hardware layer on CMAC -> CACC -> SDP in the layout and plan the
mapper picks (matmul_layout, search_plan), with SDP's bias, per-channel multipliers and output convertor
from the calibrated scales; LayerNorm, softmax, GELU, the residual adds, the 1/sqrt(d) of the scores and
the re-quantization between layers are the host's (nv_small has no SDP LUT). Each layer becomes one trace
test with exactly those operands (layer_programs.given_conv_program): its input is what the host made of
the previous layers' outputs, and its expected output CRC is the model's. A layer whose RTL output matches
that CRC wrote the model's bytes, so when every layer matches, the chain the RTL would run (each layer
reading what the one before wrote, through the same host steps) is this one, and so is the predicted class.

    python -m nvdla_validation.nvdla_rtl.classifier_programs build/vit                 # write the programs
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/vit \\
        --out validation/data/nvdla_rtl_vit_digits.json                       # run them on the RTL
    python -m nvdla_validation.nvdla_rtl.classifier_programs build/vit --markdown   # docs/validation.md table
    python -m nvdla_validation.nvdla_rtl.classifier_programs build/vitf --hw nv_full_rtl_tb   # GELU in the LUT

tests/integration/test_nvdla_classifier.py regenerates the programs in CI (no RTL) and checks them against
the committed measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from nvdla_mapper.export.layer_programs import given_conv_program, program_name
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.numerics.quant import Calibration, Granularity
from nvdla_mapper.numerics.reference import load_weights, vit_forward
from nvdla_mapper.studies.accuracy import LayerRun, QuantSettings, vit_accuracy
from nvdla_sim.config import load_config
from nvdla_validation.nvdla_rtl.compare import compare

HW = "nv_small_rtl_tb"
TRAINED = Path(__file__).resolve().parent.parent / "data" / "trained"
DATA = Path(__file__).resolve().parent.parent / "data" / "nvdla_rtl_vit_digits.json"
MANIFEST = "programs.json"
IMAGE = 0  # the first test image of digits_test.npz
SETTINGS = QuantSettings(Granularity.PER_CHANNEL, Calibration.parse("max"))


_SHORT = {
    "attention.attention.query": "q", "attention.attention.key": "k", "attention.attention.value": "v",
    "attention.qk": "qk", "attention.pv": "pv", "attention.output.dense": "o", "intermediate.dense": "ffn1",
    "output.dense": "ffn2",
}  # fmt: skip


def _short(name: str) -> str:
    """A matmul's short name: vit.encoder.layer.0.attention.attention.query -> l0_q, patch_embed, classifier."""
    if not name.startswith("vit.encoder.layer."):
        return name
    layer, rest = name.removeprefix("vit.encoder.layer.").split(".", 1)
    return f"l{layer}_{_SHORT[rest]}"


def classifier_runs(image: int = IMAGE, hw_name: str = HW) -> tuple[list[LayerRun], dict]:
    """The INT8 inference of one test image, layer by layer, and what it concluded (label, float and INT8
    predictions, the INT8 logits)."""
    spec = from_hf_config(TRAINED / "vit_digits.config.json")
    w = load_weights(TRAINED / "vit_digits.npz")
    test, calib = np.load(TRAINED / "digits_test.npz"), np.load(TRAINED / "digits_calib.npz")["images"]
    x, label = test["images"][image : image + 1], test["labels"][image : image + 1]
    runs: list[LayerRun] = []
    heads, patch = spec.stages[0].heads, spec.patch_embed[1]
    r = vit_accuracy(w, calib, x, label, load_config(hw_name), SETTINGS, heads=heads, patch=patch, record=runs)
    float_pred = int(vit_forward(w, x, heads=heads, patch=patch).argmax(-1)[0])
    return runs, {"image": image, "label": int(label[0]), "float_prediction": float_pred,
                  "int8_correct": r.nvdla_correct, "layers": len(runs)}  # fmt: skip


def data_file(hw_name: str = HW) -> Path:
    """The committed RTL measurement of the chain on `hw_name` (nv_small_rtl_tb's keeps its first name)."""
    return DATA if hw_name == HW else DATA.with_name(f"nvdla_rtl_vit_digits_{hw_name.removesuffix('_rtl_tb')}.json")


def generate(folder: str | Path, hw_name: str = HW) -> tuple[list[dict], dict]:
    """Write every layer's program into `folder` and return the manifest rows (program name, the matmul,
    its shape and plan, the model's cycles, the expected CRC) and the inference's outcome. On a build with
    SDP's LUT and element-wise unit (nv_full_rtl_tb) GELU runs in the LUT behind the FFN's first layer and
    the residual adds in Y's ALU from E-RDMA, as the mapper lowers them; the softmax and LayerNorm are the
    host's there too."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hw = load_config(hw_name)
    runs, outcome = classifier_runs(hw_name=hw_name)
    rows, seen = [], Counter()
    for i, run in enumerate(runs):
        short = _short(run.name)
        head = f"_h{seen[short]}" if short.endswith(("qk", "pv")) else ""  # one per head, in head order
        seen[short] += 1
        name = program_name(f"vit_{i:02d}_{short}{head}")
        prog = given_conv_program(name, run.layer, run.plan, hw, run.data, run.kernels, run.sdp, expect=run.output)
        prog.program.write(folder)
        s = run.layer.shape
        rows.append({
            "name": name, "matmul": run.name, "order": i, "hardware_layers": prog.hardware_layers,
            "shape": {"in_w": s.in_w, "in_h": s.in_h, "in_c": s.in_c, "out_k": s.out_k},
            "data_banks": run.plan.data_banks, "weight_banks": run.plan.weight_banks,
            "model_cycles": prog.model_cycles,
            "checks": [{"base": b, "size": n, "crc": f"0x{c:08x}"} for b, n, c in prog.program.expected],
        })  # fmt: skip
    doc = {"hw": hw_name, "outcome": outcome, "programs": rows}
    (folder / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n")
    return rows, outcome


def markdown(rows: list[dict], measured: dict) -> str:
    """docs/validation.md's table: every matmul of the inference, model against RTL (compare.compare's
    cycles: op enable to interrupt for one hardware layer, first op enable to last interrupt for several)."""
    status = {r["name"]: r["status"] for r in measured["rows"]}
    rtl = {r.name: r.rtl_cycles for r in compare(measured)}
    out = [
        "| # | program | M x K x N | hardware layers | model cycles | RTL cycles | model/RTL | output |",
        "|---:|---|---|---:|---:|---:|---:|---|",
    ]
    model = meas = 0
    for r in rows:
        s, cyc = r["shape"], rtl[r["name"]]
        model, meas = model + r["model_cycles"], meas + cyc
        out.append(
            f"| {r['order']} | {r['name']} | {s['in_w'] * s['in_h']} x {s['in_c']} x {s['out_k']} | "
            f"{r['hardware_layers']} | {r['model_cycles']:,} | {cyc:,} | {r['model_cycles'] / cyc:.3f} | "
            f"{'bit-exact' if status[r['name']] == 'pass' else status[r['name']]} |"
        )
    out.append(f"| | all {len(rows)} matmuls | | | {model:,} | {meas:,} | {model / meas:.3f} | |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="where to write the trace-test folders and programs.json")
    ap.add_argument("--markdown", action="store_true", help="print docs/validation.md's table (committed data)")
    ap.add_argument(
        "--hw", default=HW, help=f"the build the chain is made for ({HW}, or nv_full_rtl_tb: GELU in the LUT)"
    )
    args = ap.parse_args(argv)
    rows, outcome = generate(args.folder, args.hw)
    if args.markdown:
        print(markdown(rows, json.loads(data_file(args.hw).read_text())))
        return 0
    for r in rows:
        print(f"{r['name']:40s} model {r['model_cycles']:>8,} cycles")
    print(f"wrote {len(rows)} programs to {args.folder}; {outcome}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
