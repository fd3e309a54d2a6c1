"""The accuracy study's trained models (issue 31): the committed weights, evaluated by the numpy float
reference (nvdla_mapper.numerics.reference) on the committed evaluation data, reproduce what torch measured
at the end of training (validation/data/trained/*.log.json): an independent implementation of the forward
pass agreeing with the trainer's, and the weights being the ones the log describes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.numerics.reference import gpt2_forward, load_weights, vit_forward
from nvdla_sim.errors import NvdlaError

TRAINED = Path(__file__).resolve().parents[2] / "validation" / "data" / "trained"


def _log(name: str) -> dict:
    return json.loads((TRAINED / f"{name}.log.json").read_text())


def test_vit_digits_float_accuracy_is_the_logged_one():
    log = _log("vit_digits")
    assert log["seed"] == 31 and log["train"] == 1437 and log["test"] == 360
    data = np.load(TRAINED / "digits_test.npz")
    logits = vit_forward(load_weights(TRAINED / "vit_digits.npz"), data["images"], heads=4, patch=2)
    correct = int((logits.argmax(-1) == data["labels"]).sum())
    assert correct == round(log["float_test_accuracy"] * 360) == 350  # 97.2%


def test_char_gpt_float_perplexity_is_the_logged_one():
    log = _log("char_gpt")["float_held_out"]
    held = np.load(TRAINED / "char_eval.npz")["ids"].astype(np.int64)
    ctx = 64
    he = held[: (len(held) - 1) // ctx * ctx + 1]
    xs, ys = he[:-1].reshape(-1, ctx), he[1:].reshape(-1, ctx)
    logits = gpt2_forward(load_weights(TRAINED / "char_gpt.npz"), xs, heads=4)
    z = logits - logits.max(-1, keepdims=True)
    nll = -(np.take_along_axis(z, ys[..., None], -1)[..., 0] - np.log(np.exp(z).sum(-1))).mean()
    assert math.exp(nll) == pytest.approx(log["held_out_perplexity"], rel=1e-4)  # 4.832
    assert float((logits.argmax(-1) == ys).mean()) == pytest.approx(log["held_out_next_char_accuracy"], abs=2e-4)


def test_the_configs_map_to_the_trained_shapes():
    vit = from_hf_config(TRAINED / "vit_digits.config.json")
    assert (vit.family, vit.image_tokens, vit.patch_embed) == ("vit", 17, (8, 2, 1))
    gpt = from_hf_config(TRAINED / "char_gpt.config.json")
    assert (gpt.family, gpt.vocab, gpt.max_positions) == ("gpt2", 128, 64)


def test_foreign_weights_are_named(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, other=np.zeros(3))
    with pytest.raises(NvdlaError, match="weights lack 'vit.embeddings"):
        vit_forward(load_weights(bad), np.zeros((1, 8, 8)), heads=4, patch=2)
    with pytest.raises(NvdlaError, match="cannot read model weights"):
        load_weights(tmp_path / "missing.npz")


def test_calibration_images_come_from_the_training_split():
    """Quantization calibrates on 256 training images, none of which is a test image."""
    calib = np.load(TRAINED / "digits_calib.npz")["images"]
    test = {x.tobytes() for x in np.load(TRAINED / "digits_test.npz")["images"]}
    assert calib.shape == (256, 8, 8) and not any(x.tobytes() in test for x in calib)


def test_int8_accuracy_through_the_bit_exact_datapath_is_the_committed_one():
    """The ViT's first 100 test images with every matmul through CMAC -> CACC -> SDP on nv_small (INT8,
    SDP's integer requantization), three recipes, recomputed and equal to validation/data/trained/accuracy.json
    (`python validation/trained/evaluate.py`: on all 360, static max per-channel 349 and per-tensor 350,
    entropy (KL) 350, against float's 350)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluate", TRAINED.parents[1] / "trained" / "evaluate.py")
    evaluate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(evaluate)
    committed = json.loads((TRAINED / "accuracy.json").read_text())
    assert committed["command"] == "python validation/trained/evaluate.py"
    want = {(r["recipe"], r["images"]): r for r in committed["rows"]}
    recipes = {k: v for k, v in evaluate.RECIPES.items() if k.startswith(("static max", "static entropy"))}
    for row in evaluate.evaluate("nv_small", 100, recipes):
        assert row == want[row["recipe"], 100]
    assert want["static max, per-tensor weights", 360]["int8_correct"] == 350


def test_bad_evaluation_inputs_are_named():
    from nvdla_mapper.studies.accuracy import QuantSettings, vit_int8_accuracy
    from nvdla_sim import load_config

    w = load_weights(TRAINED / "vit_digits.npz")
    with pytest.raises(NvdlaError, match=r"must both be \[N, H, W\]"):
        vit_int8_accuracy(w, np.zeros((4, 64)), np.zeros((2, 8, 8)), np.zeros(2), load_config("nv_small"),
                          QuantSettings(), heads=4, patch=2)  # fmt: skip
    with pytest.raises(NvdlaError, match="labels"):
        vit_int8_accuracy(w, np.zeros((4, 8, 8)), np.zeros((2, 8, 8)), np.zeros(3), load_config("nv_small"),
                          QuantSettings(), heads=4, patch=2)  # fmt: skip
