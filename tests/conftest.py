"""Shared fixtures: the shipped configs, loaded once; a small grouped-query, rotary decoder."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, settings

from nvdla_sim import load_config

settings.register_profile("default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

CONFIG_NAMES = ("nv_small", "nv_large", "nv_full")


@pytest.fixture(scope="session", params=CONFIG_NAMES)
def hw(request):
    return load_config(request.param)


@pytest.fixture(scope="session")
def nv_full():
    return load_config("nv_full")


@pytest.fixture(scope="session")
def nv_small():
    return load_config("nv_small")


@pytest.fixture
def small_llama(tmp_path):
    """A LLaMA config.json's model small enough to generate hundreds of steps in a test: 3 layers, hidden
    256, 8 heads sharing 2 K/V heads, rotary positions."""
    from nvdla_mapper.frontends.hf_config import from_hf_config

    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
           "num_hidden_layers": 3, "num_key_value_heads": 2, "max_position_embeddings": 4096, "vocab_size": 1000}  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return from_hf_config(p)


@pytest.fixture(scope="session")
def vit_digits():
    """The shipped ViT (validation/data/trained) for the accuracy commands' tests: `float_correct(n)`, the
    float reference's correct answers on the first n test images (numpy's forward pass called here, not
    through the study), and `committed(hw, recipe, images)`, that row of accuracy.json (written by
    validation/trained/evaluate.py)."""
    from pathlib import Path
    from types import SimpleNamespace

    import numpy as np

    from nvdla_mapper.numerics.reference import load_weights, vit_forward

    trained = Path(__file__).resolve().parents[1] / "validation" / "data" / "trained"
    test = np.load(trained / "digits_test.npz")
    weights = load_weights(trained / "vit_digits.npz")
    rows = json.loads((trained / "accuracy.json").read_text())["rows"]

    def float_correct(n: int) -> int:
        logits = vit_forward(weights, test["images"][:n], heads=4, patch=2)  # vit_digits.config.json: 4 heads
        return int((logits.argmax(-1) == test["labels"][:n]).sum())

    def committed(hw: str, recipe: str, images: int) -> dict:
        (row,) = [
            r for r in rows if (r["model"], r["hw"], r["recipe"], r.get("images")) == ("vit_digits", hw, recipe, images)
        ]
        return row

    return SimpleNamespace(
        dir=trained, test_images=len(test["labels"]), float_correct=float_correct, committed=committed
    )
