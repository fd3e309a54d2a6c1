"""Task accuracy of the trained models through NVDLA's bit-exact INT8 datapath (issue 31), numpy only:

    python validation/trained/evaluate.py [--hw nv_small|nv_full]

Writes (for that build; the other build's rows are kept) validation/data/trained/accuracy.json. On
nv_small (no LUT; softmax and GELU on the host): per recipe (PTQ, QAT, pruning with and without fine-tuning,
and for the attribution one part of the model at a time in INT8), the ViT's test accuracy in float and with every
matmul through CMAC -> CACC -> SDP and the residual stream in memory at INT8, each add in the SDP of the
matmul before it, as the mapper lowers them (nvdla_mapper.studies.accuracy.vit_accuracy), over the first N test
images (all 360, and the first 100 that CI recomputes); and the character GPT's held-out perplexity,
next-character accuracy and greedy agreement with float (gpt_accuracy), over all 369 held-out windows
with 4 prompts of 16 new characters (and 16 windows with 2 prompts of 8 that CI recomputes); and what
pruning with weight compression does to each model's bytes and cycles on nv_full. On nv_full (SDP's LUT:
GELU in the LUT behind the FFN's first layer, the softmax and LayerNorm on the host as the mapper chooses
them there): the main recipes, the softmax in SDP's LUT as the mapper lowers it with --softmax nvdla (a row
with the error when it cannot be programmed), LayerNorm in NVDLA's steps with --layernorm nvdla, the LUT's
GELU alone, the LayerNorm's steps alone and the residual stream alone in INT8, and
every part but the residual stream (attribution), over all test images
and held-out windows, and the subsets CI recomputes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.resolve import model_graph
from nvdla_mapper.numerics.quant import Calibration, Granularity
from nvdla_mapper.options import WeightTreatment
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.accuracy import MATMUL_SITES, STREAM_SITE, QuantSettings, trained_accuracy
from nvdla_sim import Precision, load_config
from nvdla_sim.errors import UnsupportedError

TRAINED = Path(__file__).resolve().parent.parent / "data" / "trained"
RECIPES = {
    "static max, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("max")),
    "static max, per-tensor weights": QuantSettings(Granularity.PER_TENSOR, Calibration("max")),
    "static percentile 99.9, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("percentile", 99.9)),
    "static entropy (KL), per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("entropy")),
    "dynamic activations, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("max"), dynamic=True),
    "SmoothQuant alpha 0.5, static max, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("max"), smooth=0.5),
    "SmoothQuant alpha 0.5, static max, per-tensor weights": QuantSettings(Granularity.PER_TENSOR, Calibration("max"), smooth=0.5),
}  # fmt: skip
# The character GPT fine-tuned by quantization-aware training (validation/trained/qat.py): its weights and
# learned scales; its float baseline is the fine-tuned model's
QAT = {"QAT (learned scales, static), per-channel weights": QuantSettings(learned="char_gpt_qat")}
# Pruning (the INT8 run's weights pruned, calibrated as pruned, against the dense float model), and for
# the GPT the same after fine-tuning with the pruned weights held at zero (validation/trained/prune_ft.py)
PRUNING = {
    "50% magnitude pruning, static max, per-channel weights": QuantSettings(prune="magnitude:0.5"),
    "2:4 pruning, static max, per-channel weights": QuantSettings(prune="2:4"),
}
PRUNING_FT = {
    "50% magnitude pruning + fine-tune, static max, per-channel weights": QuantSettings(
        prune="magnitude:0.5", finetuned="char_gpt_m50_ft"
    ),
    "2:4 pruning + fine-tune, static max, per-channel weights": QuantSettings(prune="2:4", finetuned="char_gpt_24_ft"),
}
# On a build with SDP's LUT (nv_full): the main recipes with GELU in the LUT (softmax and LayerNorm on the
# host: the mapper's choices), the softmax in the LUT as the mapper lowers it with --softmax nvdla, LayerNorm
# in NVDLA's steps as --layernorm nvdla lowers it (numerics.layernorm_steps), and the LUT's GELU and the
# LayerNorm's steps alone in INT8
LUT_RECIPES = {
    "static max, per-channel weights": QuantSettings(),
    "static max, per-tensor weights": QuantSettings(Granularity.PER_TENSOR),
    "static entropy (KL), per-channel weights": QuantSettings(calibration=Calibration("entropy")),
    "dynamic activations, per-channel weights": QuantSettings(dynamic=True),
    "static max, per-channel weights; softmax in SDP's LUT (--softmax nvdla)": QuantSettings(softmax="nvdla"),
    "static max, per-channel weights; INT8 only in the gelu": QuantSettings(only=frozenset({"gelu"})),
    f"static max, per-channel weights; INT8 only in the {STREAM_SITE}": QuantSettings(only=frozenset({STREAM_SITE})),
    "static max, per-channel weights; residual stream float": QuantSettings(only=frozenset({*MATMUL_SITES, "gelu"})),
    "static max, per-channel weights; softmax in SDP's LUT, INT8 only in the softmax": QuantSettings(
        softmax="nvdla", only=frozenset({"softmax"})
    ),
    "static max, per-channel weights; LayerNorm in NVDLA's steps (--layernorm nvdla)": QuantSettings(layernorm="nvdla"),
    "static max, per-channel weights; LayerNorm in NVDLA's steps, INT8 only in the layernorm": QuantSettings(
        layernorm="nvdla", only=frozenset({"layernorm"})
    ),
}
# INT16 on nv_full (the calibrated ranges at 32,767 steps; GELU in the LUT, the softmax on the host)
INT16_RECIPES = {
    "INT16: static max, per-channel weights": QuantSettings(precision=Precision.INT16),
    "INT16: static max, per-tensor weights": QuantSettings(Granularity.PER_TENSOR, precision=Precision.INT16),
}
# FP16 on nv_full: no scales (the values as FP16), GELU in the LUT's FP16 mode, the softmax and LayerNorm on
# the host (accuracy._Fp16Run)
FP16_RECIPES = {"FP16: no scales, GELU in the LUT's FP16 mode": QuantSettings(precision=Precision.FP16)}
# FP16's CI subset is smaller (its CMAC model is slower than the integer one): the ViT's first 100 images and
# the GPT's first 4 windows with one prompt of 4 new characters
FP16_CI = (100, 4, 1, 4)
LUT_CI = (
    "static max, per-channel weights",
    "static max, per-channel weights; softmax in SDP's LUT (--softmax nvdla)",
    "INT16: static max, per-channel weights",
)
# Attribution: the first recipe with only one part of the model in INT8 (the rest float), part by part,
# and with every part but the residual stream (the adds in float, as before the stream was measured)
ATTRIBUTION = {
    f"static max, per-channel weights; INT8 only in the {part}": QuantSettings(only=frozenset({part}))
    for part in (*MATMUL_SITES, STREAM_SITE)
} | {"static max, per-channel weights; residual stream float": QuantSettings(only=frozenset(MATMUL_SITES))}


def evaluate(hw_name: str, images: int, recipes: dict[str, QuantSettings] = RECIPES) -> list[dict]:
    """The ViT's rows: its first `images` test images under each recipe."""
    return _rows("vit_digits", hw_name, recipes, images)


def evaluate_gpt(
    hw_name: str, windows: int | None, prompts: int, new_tokens: int, recipes: dict[str, QuantSettings] = RECIPES
) -> list[dict]:
    """The character GPT's rows: its first `windows` held-out windows (all: None) and `prompts` greedy
    continuations of `new_tokens` characters under each recipe."""
    return _rows("char_gpt", hw_name, recipes, windows, prompts=prompts, new_tokens=new_tokens)


def _rows(model: str, hw_name: str, recipes: dict[str, QuantSettings], samples: int | None, **kw) -> list[dict]:
    """Each recipe's row, or, where the build cannot be programmed for it (UnsupportedError), a row with the
    one-line error; any other error stops the run."""
    hw = load_config(hw_name)
    rows = []
    for recipe, settings in recipes.items():
        try:
            rows.append(_row(recipe, trained_accuracy(TRAINED, model, hw, settings, samples=samples, **kw).to_dict()))
        except UnsupportedError as e:
            rows.append({"model": model, "hw": hw_name, "recipe": recipe, "precision": settings.precision.value,
                         **_size(model, samples), "error": str(e)})  # fmt: skip
    return rows


def _size(model: str, samples: int | None) -> dict:
    """What a row of `model` counts: test images, or held-out windows (all of them: None)."""
    if model == "vit_digits":
        return {"images": samples}
    if samples is None:  # every whole window of the context's length in the held-out text
        context = from_hf_config(TRAINED / f"{model}.config.json").max_positions
        samples = (len(np.load(TRAINED / "char_eval.npz")["ids"]) - 1) // context
    return {"windows": samples}


def compression(hw_name: str = "nv_full") -> list[dict]:
    """What pruning with NVDLA's weight compression does to each trained model's stored weight bytes and
    cycles (one inference: the ViT's 17 tokens, the GPT's 64-token window), as `nvdla map CONFIG --prune P
    --weight-compression` reports them, beside the dense run."""
    hw = load_config(hw_name)
    rows = []
    for model in ("vit_digits", "char_gpt"):
        g = model_graph(str(TRAINED / f"{model}.config.json"), seq=64 if model == "char_gpt" else None)
        for prune in ("magnitude:0.5", "2:4"):
            r = map_model(g, hw, precision=Precision.INT8, weights=WeightTreatment(prune, compression=True))
            dense, stored = r.weight_bytes()
            rows.append({"model": model, "hw": hw_name, "prune": prune, "dense_weight_bytes": dense,
                         "stored_weight_bytes": stored, "dense_cycles": r.baseline_cycles,
                         "cycles": r.total_cycles})  # fmt: skip
    return rows


def _row(recipe: str, r: dict) -> dict:
    return {"model": r["model"], "hw": r["hw"], "recipe": recipe, **r}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="nv_small", choices=["nv_small", "nv_full"])
    ap.add_argument("--recipe", action="append", default=[], metavar="NAME",
                    help="only this recipe (repeatable): its rows replace the committed ones, the others are kept")  # fmt: skip
    args = ap.parse_args(argv)
    out = TRAINED / "accuracy.json"
    old = json.loads(out.read_text()) if out.is_file() else {"rows": [], "commands": {}}
    known = (
        LUT_RECIPES | INT16_RECIPES | FP16_RECIPES
        if args.hw == "nv_full"
        else RECIPES | PRUNING | ATTRIBUTION | QAT | PRUNING_FT
    )
    unknown = sorted(set(args.recipe) - set(known))
    if unknown:
        ap.error(f"--recipe {unknown[0]!r} is not a recipe of --hw {args.hw}; recipes: {'; '.join(known)}")
    only = set(args.recipe)

    def pick(recipes: dict[str, QuantSettings]) -> dict[str, QuantSettings]:
        return {k: v for k, v in recipes.items() if not only or k in only}

    if args.hw == "nv_full":
        full = pick(LUT_RECIPES | INT16_RECIPES | FP16_RECIPES)
        ci = {k: full[k] for k in LUT_CI if k in full}
        fp16 = {k: v for k, v in full.items() if k in FP16_RECIPES}
        images, windows, prompts, new = FP16_CI
        rows = evaluate("nv_full", 360, full) + evaluate("nv_full", 100, ci) + evaluate("nv_full", images, fp16)
        gpt = (
            evaluate_gpt("nv_full", None, 4, 16, full)
            + evaluate_gpt("nv_full", 16, 2, 8, ci)
            + evaluate_gpt("nv_full", windows, prompts, new, fp16)
        )
    else:
        rows = evaluate(args.hw, 360, pick(RECIPES | PRUNING | ATTRIBUTION)) + evaluate(args.hw, 100, pick(RECIPES))
        lm_parts = {k: v for k, v in ATTRIBUTION.items() if "embedding" not in k}  # the GPT's is a lookup
        every = RECIPES | QAT | PRUNING | PRUNING_FT
        gpt = evaluate_gpt(args.hw, None, 4, 16, pick(every | lm_parts)) + evaluate_gpt(
            args.hw, 16, 2, 8, pick(RECIPES | QAT)
        )
    for r in rows + gpt:
        size = f"{r['images']:4d} images" if "images" in r else f"{r['windows']:4d} windows"
        if "error" in r:
            print(f"{r['model']:10s} {r['recipe']:60s} {size}: {r['error']}")
        elif "images" in r:
            print(
                f"{r['model']:10s} {r['recipe']:60s} {size}: float {r['float_correct']}, {r['precision']} {r['nvdla_correct']}"
            )
        else:
            print(f"{r['model']:10s} {r['recipe']:60s} {size}: perplexity float {r['float_perplexity']}, {r['precision']} "
                  f"{r['nvdla_perplexity']}; greedy {r['greedy_agree']}/{r['greedy_tokens']} agree")  # fmt: skip
    kept = [r for r in old["rows"] if r["hw"] != args.hw or (only and r["recipe"] not in only)]
    legacy = {"nv_small": {"command": old["command"], "date": old["date"]}} if "command" in old else {}
    # a partial run is recorded beside the whole one: its rows came from its own command and date
    partial = "".join(f" --recipe {r!r}" for r in args.recipe)
    key = args.hw + partial
    command = "python validation/trained/evaluate.py" + ("" if args.hw == "nv_small" else f" --hw {args.hw}") + partial
    previous = old.get("commands", {})
    if not only:  # a whole run replaces the rows of this build's partial runs: their entries go with them
        previous = {k: v for k, v in previous.items() if not k.startswith(f"{args.hw} --recipe")}
    commands = legacy | previous | {key: {"command": command, "date": datetime.date.today().isoformat()}}
    doc = {"commands": commands, "rows": kept + rows + gpt, "compression": compression()}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
