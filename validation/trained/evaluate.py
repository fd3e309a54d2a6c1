"""Task accuracy of the trained models through NVDLA's bit-exact INT8 datapath (issue 31), numpy only:

    python validation/trained/evaluate.py [--hw nv_small]

Writes validation/data/trained/accuracy.json: per recipe, the ViT's test accuracy in float and with every
matmul through CMAC -> CACC -> SDP (nvdla_mapper.studies.accuracy.vit_int8_accuracy), over the first N test
images (all 360, and the first 100 that CI recomputes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

from nvdla_mapper.numerics.quant import Calibration, Granularity
from nvdla_mapper.numerics.reference import load_weights
from nvdla_mapper.studies.accuracy import QuantSettings, vit_int8_accuracy
from nvdla_sim import load_config

TRAINED = Path(__file__).resolve().parent.parent / "data" / "trained"
RECIPES = {
    "static max, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("max")),
    "static max, per-tensor weights": QuantSettings(Granularity.PER_TENSOR, Calibration("max")),
    "static percentile 99.9, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("percentile", 99.9)),
    "static entropy (KL), per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("entropy")),
    "dynamic activations, per-channel weights": QuantSettings(Granularity.PER_CHANNEL, Calibration("max"), dynamic=True),
}  # fmt: skip


def evaluate(hw_name: str, images: int, recipes: dict[str, QuantSettings] = RECIPES) -> list[dict]:
    hw = load_config(hw_name)
    w = load_weights(TRAINED / "vit_digits.npz")
    calib = np.load(TRAINED / "digits_calib.npz")["images"]
    test = np.load(TRAINED / "digits_test.npz")
    rows = []
    for recipe, settings in recipes.items():
        r = vit_int8_accuracy(
            w, calib, test["images"][:images], test["labels"][:images], hw, settings, heads=4, patch=2
        )
        rows.append({"model": "vit_digits", "hw": hw_name, "recipe": recipe, "images": r.images,
                     "float_correct": r.float_correct, "int8_correct": r.int8_correct, "saturations": r.saturations})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="nv_small")
    args = ap.parse_args(argv)
    rows = evaluate(args.hw, 360) + evaluate(args.hw, 100)
    doc = {"command": "python validation/trained/evaluate.py", "date": datetime.date.today().isoformat(),
           "rows": rows}  # fmt: skip
    (TRAINED / "accuracy.json").write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        print(f"{r['recipe']:45s} {r['images']:4d} images: float {r['float_correct']}, int8 {r['int8_correct']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
