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
from nvdla_mapper.numerics.reference import Hooks, gpt2_forward, load_weights, vit_forward
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
    (`python validation/trained/evaluate.py`: on all 360, static max per-channel and per-tensor 350,
    entropy (KL) 350, against float's 350)."""
    evaluate = _evaluate_module()
    committed = json.loads((TRAINED / "accuracy.json").read_text())
    assert committed["commands"]["nv_small"]["command"] == "python validation/trained/evaluate.py"
    want = {(r["recipe"], r["images"]): r for r in _rows("vit_digits", "nv_small")}
    recipes = {k: v for k, v in evaluate.RECIPES.items() if k.startswith(("static max", "static entropy"))}
    for row in evaluate.evaluate("nv_small", 100, recipes):
        assert row == want[row["recipe"], 100]
    assert want["static max, per-tensor weights", 360]["nvdla_correct"] == 350


def _rows(model: str, hw: str) -> list[dict]:
    return [
        r for r in json.loads((TRAINED / "accuracy.json").read_text())["rows"] if (r["model"], r["hw"]) == (model, hw)
    ]


def _evaluate_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluate", TRAINED.parents[1] / "trained" / "evaluate.py")
    evaluate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(evaluate)
    return evaluate


def test_char_gpt_through_the_bit_exact_datapath_is_the_committed_one():
    """The character GPT's first 16 held-out windows (1,024 positions) and two greedy continuations of 8
    characters, every matmul through CMAC -> CACC -> SDP on nv_small, two PTQ recipes and QAT's learned
    scales, recomputed and equal to accuracy.json; the committed full run's float perplexity is the training log's (torch's, 4.832)."""
    evaluate = _evaluate_module()
    committed = _rows("char_gpt", "nv_small")
    want = {(r["recipe"], r["windows"]): r for r in committed}
    recipes = {k: v for k, v in evaluate.RECIPES.items() if k.startswith(("static max, per-channel", "static entropy"))}
    for row in evaluate.evaluate_gpt("nv_small", 16, 2, 8, recipes | evaluate.QAT):
        assert row == want[row["recipe"], 16]
    full = [r for r in committed if r["windows"] == 369]
    parts = (evaluate.RECIPES, evaluate.QAT, evaluate.PRUNING, evaluate.PRUNING_FT, evaluate.ATTRIBUTION)
    assert len(full) == sum(map(len, parts)) - 1  # no GPT embedding matmul
    # QAT: its float baseline is the fine-tuned model's, and torch's fake quantization at the learned scales
    # (qat.py's log, the residual stream float) predicts what the bit-exact datapath measures with the
    # stream in INT8 (4.8410 against 4.8419)
    (qat,) = [r for r in full if r["recipe"].startswith("QAT")]
    qat_log = _log("char_gpt_qat")["log"][-1]
    assert qat["float_perplexity"] == pytest.approx(qat_log["float"][0], rel=1e-4)
    assert qat["nvdla_perplexity"] == pytest.approx(qat_log["fake_quant"][0], rel=1e-3)
    full = [r for r in full if r is not qat]
    log = _log("char_gpt")["float_held_out"]
    assert all(r["float_perplexity"] == pytest.approx(log["held_out_perplexity"], rel=1e-3) for r in full)
    assert all(
        r["float_correct"] / r["positions"] == pytest.approx(log["held_out_next_char_accuracy"], abs=2e-4) for r in full
    )


def test_padded_greedy_is_the_unpadded_one():
    """Under static scales a causal model's INT8 logits at a position do not depend on later positions, so
    greedy decoding on windows padded to one length (one tiling search per layer) makes the same tokens as
    on the growing sequences."""
    from nvdla_mapper.numerics.quant import Calibration
    from nvdla_mapper.studies.accuracy import QuantSettings, _calibrated_scales, _datapath_hooks, _greedy
    from nvdla_sim import load_config

    w = load_weights(TRAINED / "char_gpt.npz")
    calib = np.load(TRAINED / "char_calib.npz")["ids"][:4].astype(np.int64)
    settings = QuantSettings(calibration=Calibration("max"))
    scales = _calibrated_scales(lambda h: gpt2_forward(w, calib, heads=4, hooks=Hooks(h.matmul)), settings)
    mm = _datapath_hooks(load_config("nv_small"), settings, scales, {}).matmul
    prompt = np.load(TRAINED / "char_eval.npz")["ids"][None, :12].astype(np.int64)
    forward = lambda x: gpt2_forward(w, x, heads=4, hooks=Hooks(mm))  # noqa: E731
    padded = forward(np.pad(prompt, ((0, 0), (0, 4))))[:, :12]
    assert np.array_equal(padded, forward(prompt))
    assert np.array_equal(_greedy(forward, prompt, 3, pad_to=16), _greedy(forward, prompt, 3))


def test_bad_lm_evaluation_inputs_are_named():
    from nvdla_mapper.studies.accuracy import QuantSettings, gpt_accuracy
    from nvdla_sim import load_config

    w, hw = load_weights(TRAINED / "char_gpt.npz"), load_config("nv_small")
    text = np.load(TRAINED / "char_eval.npz")["ids"]
    with pytest.raises(NvdlaError, match=r"calibration ids \[4, 65\] \[n, T <= 64\]"):
        gpt_accuracy(w, np.zeros((4, 65), np.int64), text, hw, QuantSettings(), heads=4, context=64)
    with pytest.raises(NvdlaError, match="below the model's vocabulary of 128"):
        gpt_accuracy(w, np.full((4, 8), 200), text, hw, QuantSettings(), heads=4, context=64)
    from nvdla_mapper.studies.accuracy import Scales, load_scales, trained_accuracy

    with pytest.raises(NvdlaError, match="no static input scale for matmul 'transformer.h.0.attn.c_attn.q'"):
        gpt_accuracy(w, np.zeros((4, 8), np.int64), text, hw, QuantSettings(), heads=4, context=64,
                          scales=Scales({}, {}, {}))  # fmt: skip
    bad = TRAINED.parent / "nonexistent.scales.json"
    with pytest.raises(NvdlaError, match="not a scales file of inputs, outputs and operands"):
        load_scales(bad)
    with pytest.raises(NvdlaError, match="learned \\(QAT\\) scales are static and made for char_gpt"):
        trained_accuracy(TRAINED, "vit_digits", hw, QuantSettings(learned="char_gpt_qat"), samples=1)
    with pytest.raises(NvdlaError, match="weights lack 'transformer.wte.weight'"):
        gpt_accuracy({}, np.zeros((4, 8), np.int64), text, hw, QuantSettings(), heads=4, context=64)
    with pytest.raises(NvdlaError, match=r"INT8-only parts \['ffns'\] unknown; parts: embedding, projection"):
        QuantSettings(only=frozenset({"ffns"}))
    with pytest.raises(NvdlaError, match="new_tokens 64 must be in 1..63"):
        gpt_accuracy(w, np.zeros((4, 8), np.int64), text, hw, QuantSettings(), heads=4, context=64, new_tokens=64)


def test_bad_evaluation_inputs_are_named():
    from nvdla_mapper.studies.accuracy import QuantSettings, vit_accuracy
    from nvdla_sim import load_config

    w = load_weights(TRAINED / "vit_digits.npz")
    with pytest.raises(NvdlaError, match=r"must both be \[N, H, W\]"):
        vit_accuracy(w, np.zeros((4, 64)), np.zeros((2, 8, 8)), np.zeros(2), load_config("nv_small"),
                          QuantSettings(), heads=4, patch=2)  # fmt: skip
    with pytest.raises(NvdlaError, match="labels"):
        vit_accuracy(w, np.zeros((4, 8, 8)), np.zeros((2, 8, 8)), np.zeros(3), load_config("nv_small"),
                          QuantSettings(), heads=4, patch=2)  # fmt: skip


def test_smoothquant_factors_and_scales_by_hand():
    """SmoothQuant on a LayerNorm-fed matmul: s_j = max|X_j|^a / max|W_j|^(1-a) per input channel, the input
    scale taken on X / s, one factor for the matmuls reading one LayerNorm output (q and k here, W's
    maxima over both); worked by hand for alpha 0.5: channel maxima X (4, 1), W (0.5, 2) give
    s = (2 / sqrt(0.5), 1 / sqrt(2)) = (2.828427, 0.707107), X / s peaks at 4 / 2.828427 = 1.414214 and
    1 / 0.707107 = 1.414214, scale 1.414214 / 127. The output projection (not LayerNorm-fed) is left alone."""
    from nvdla_mapper.numerics.reference import MatmulRole, Site
    from nvdla_mapper.studies.accuracy import QuantSettings, _calibrated_scales

    x = np.array([[4.0, -0.5], [-1.0, 1.0]])
    w = np.array([[0.5, 2.0], [-0.25, 1.0]])  # [out, in]: input channel maxima 0.5 and 2

    def forward(h):
        mm = h.matmul
        mm(Site("q", MatmulRole.QUERY, "ln"), x, w, np.zeros(2))
        mm(Site("k", MatmulRole.KEY, "ln"), x, w / 2, np.zeros(2))  # reads the same LayerNorm output: same factors
        mm(Site("o", MatmulRole.OUTPUT), x, w, np.zeros(2))

    sc = _calibrated_scales(forward, QuantSettings(smooth=0.5))
    assert np.allclose(sc.smooth["q"], [2 / math.sqrt(0.5), 1 / math.sqrt(2)]) and "o" not in sc.smooth
    assert np.array_equal(sc.smooth["k"], sc.smooth["q"])
    assert sc.inputs["q"] == pytest.approx(math.sqrt(2) / 127) and sc.inputs["o"] == pytest.approx(4 / 127)
    assert np.allclose((x / sc.smooth["q"]) @ (w * sc.smooth["q"]).T, x @ w.T)  # the product is unchanged


def test_sites_of_the_trained_models_names():
    """Every matmul of both trained models falls in the part its role says (the attribution's groups): the
    roles the forward passes give their matmuls (reference.Site), checked against the names' meaning."""
    from nvdla_mapper.studies.accuracy import site, smoothing_group

    names: list[str] = []

    def record(name, a, w, b):
        names.append(name)
        return a @ w.T

    vit_forward(load_weights(TRAINED / "vit_digits.npz"), np.zeros((1, 8, 8)), heads=4, patch=2, hooks=Hooks(record))
    gpt2_forward(load_weights(TRAINED / "char_gpt.npz"), np.zeros((1, 4), np.int64), heads=4, hooks=Hooks(record))
    by_site: dict[str, set[str]] = {}
    for n in names:
        by_site.setdefault(site(n), set()).add(n.replace("vit.encoder.layer.0.", "").replace("transformer.h.0.", ""))
    assert by_site["embedding"] == {"patch_embed"} and by_site["head"] == {"classifier", "lm_head"}
    assert {"attention.qk", "attention.pv", "attn.qk", "attn.pv"} <= by_site["attention"]
    assert {"intermediate.dense", "output.dense", "mlp.c_fc", "mlp.c_proj"} <= by_site["ffn"]
    assert {"attention.attention.query", "attention.output.dense", "attn.c_attn.k", "attn.c_proj"} <= by_site[
        "projection"
    ]
    groups: dict[str, set[str]] = {}
    for n in names:
        if smoothing_group(n) is not None:
            groups.setdefault(smoothing_group(n), set()).add(n.rsplit(".", 1)[-1])
    assert groups["transformer.h.0.attn.c_attn"] == {"q", "k", "v"}  # one LayerNorm output, one factor
    assert groups["vit.encoder.layer.1.attention.attention"] == {"query", "key", "value"}
    assert groups["classifier"] == {"classifier"} and groups["transformer.h.1.mlp.c_fc"] == {"c_fc"}
    assert len(groups) == 2 * 2 + 2 * 2 + 1  # per model and layer: q/k/v and FFN1; the ViT's classifier
    by_name = {str(n): n for n in names}
    for n in ("vit.encoder.layer.0.output.dense", "transformer.h.0.attn.c_proj", "lm_head"):  # context, GELU, tied
        assert smoothing_group(by_name[n]) is None
    with pytest.raises(TypeError, match="carries no role"):  # a bare name is refused, never parsed
        site("transformer.h.0.attn.c_proj")


def test_int8_only_where_asked():
    """With INT8 only in a part the model does not have (the GPT's embedding is a lookup), every logit is
    the float one."""
    from nvdla_mapper.studies.accuracy import QuantSettings, _calibrated_scales, _datapath_hooks
    from nvdla_sim import load_config

    w = load_weights(TRAINED / "char_gpt.npz")
    ids = np.load(TRAINED / "char_eval.npz")["ids"][None, :16].astype(np.int64)
    settings = QuantSettings(only=frozenset({"embedding"}))
    scales = _calibrated_scales(lambda h: gpt2_forward(w, ids, heads=4, hooks=Hooks(h.matmul)), settings)
    mm = _datapath_hooks(load_config("nv_small"), settings, scales, {}).matmul
    assert np.array_equal(gpt2_forward(w, ids, heads=4, hooks=Hooks(mm)), gpt2_forward(w, ids, heads=4))


def test_pruned_fine_tuned_weights_keep_their_pattern():
    """prune_ft.py's fine-tuned weights (torch) hold the pattern numerics.sparsity prunes to: every linear
    layer 2:4 along its input channels, or half its weights zero; the embeddings dense."""
    from nvdla_mapper.numerics.sparsity import is_2_4

    for name, check in (("char_gpt_24_ft", is_2_4), ("char_gpt_m50_ft", lambda w: (w == 0).mean() == 0.5)):
        w = load_weights(TRAINED / f"{name}.npz")
        linear = [k for k in w if k.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))]
        assert len(linear) == 8
        for k in linear:  # Conv1D [in, out]: input channels on the first axis
            assert check(w[k].T), k
        assert (w["transformer.wte.weight"] != 0).all()


def test_compression_figures_are_the_committed_ones():
    """accuracy.json's compression rows recomputed (nvdla map of each trained config with pruning and
    weight compression on nv_full); the dense bytes worked by hand from the shapes: the GPT 2 x (4 x 128^2
    + 2 x 128 x 512) + 128 x 128 (LM head) = 409,600, the ViT 2 x (4 x 64^2 + 2 x 64 x 128) + 64 x 4
    (patch embedding) + 64 x 10 (classifier) = 66,432; compressed, each stores at least its non-zero
    half plus one mask bit per weight."""
    evaluate = _evaluate_module()
    committed = json.loads((TRAINED / "accuracy.json").read_text())["compression"]
    assert evaluate.compression() == committed
    dense = {
        "char_gpt": 2 * (4 * 128**2 + 2 * 128 * 512) + 128 * 128,
        "vit_digits": 2 * (4 * 64**2 + 2 * 64 * 128) + 64 * 4 + 64 * 10,
    }
    for r in committed:
        assert r["dense_weight_bytes"] == dense[r["model"]]
        assert r["dense_weight_bytes"] * (0.5 + 1 / 8) <= r["stored_weight_bytes"] < r["dense_weight_bytes"]
        assert r["cycles"] <= r["dense_cycles"]


def test_accuracy_command_runs_the_committed_recipes(tmp_path, capsys):
    """`nvdla accuracy char_gpt --qat ... | --smooth 0.5` on the first 16 held-out windows, 2 prompts x 8
    characters, gives the committed rows of validation/trained/evaluate.py's CI subset; a strength outside
    0..1 and an unknown part are one-line errors."""
    from nvdla_cli.main import main

    committed = {r["recipe"]: r for r in _rows("char_gpt", "nv_small") if r["windows"] == 16}
    for flags, recipe in (
        (["--qat", "char_gpt_qat"], "QAT (learned scales, static), per-channel weights"),
        (["--smooth", "0.5"], "SmoothQuant alpha 0.5, static max, per-channel weights"),
    ):
        out = tmp_path / "row.json"
        argv = ["accuracy", "char_gpt", "--samples", "16", "--prompts", "2", "--new-tokens", "8"]
        assert main([*argv, *flags, "--json", str(out)]) == 0
        row, want = json.loads(out.read_text()), committed[recipe]
        assert {k: v for k, v in row.items() if k not in ("recipe", "options")} == {
            k: v for k, v in want.items() if k != "recipe"
        }
        assert row["options"]["model"] == "char_gpt" and row["options"]["samples"] == 16  # what made the row
    capsys.readouterr()
    assert main(["accuracy", "char_gpt", "--smooth", "2"]) == 2
    assert "--smooth must be a migration strength in 0..1, not 2.0" in capsys.readouterr().err
    assert main(["accuracy", "char_gpt", "--only", "ffn,lut"]) == 2
    assert "INT8-only parts ['lut'] unknown" in capsys.readouterr().err


def test_lut_steps_on_nv_full_are_the_committed_ones():
    """On nv_full (GELU in SDP's LUT; the softmax and LayerNorm on the host, as the mapper puts them, or
    in NVDLA's steps as --softmax nvdla and --layernorm nvdla lower them) the ViT's first 100 test images
    and the GPT's first 16 windows, recomputed, are accuracy.json's rows. On all of them (`evaluate.py
    --hw nv_full`): the host-softmax recipes within one image and 0.007 perplexity of nv_small's (GELU in
    the LUT costs nothing measurable), the LUT softmax 141 / 360 images against 350, the GPT's cannot be
    programmed, and LayerNorm's steps keep the accuracy: 349 images and 4.8672 with everything in INT8
    (4.8671 with LayerNorm on the host), alone in INT8 349 and 4.8409 (session 37: V and PV as the mapper
    runs them, docs/quantization.md)."""
    evaluate = _evaluate_module()
    rows = _rows("vit_digits", "nv_full") + _rows("char_gpt", "nv_full")
    want = {(r["recipe"], r.get("images", r.get("windows"))): r for r in rows}
    ci = {k: (evaluate.LUT_RECIPES | evaluate.INT16_RECIPES)[k] for k in evaluate.LUT_CI}
    for row in evaluate.evaluate("nv_full", 100, ci) + evaluate.evaluate_gpt("nv_full", 16, 2, 8, ci):
        assert row == want[row["recipe"], row.get("images", row.get("windows"))]
    lut = "static max, per-channel weights; softmax in SDP's LUT (--softmax nvdla)"
    assert want[lut, 360]["nvdla_correct"] == 141 and want[lut, 360]["float_correct"] == 350
    steps = "static max, per-channel weights; LayerNorm in NVDLA's steps (--layernorm nvdla)"
    assert want[steps, 360]["nvdla_correct"] == 349 and want[steps, 369]["nvdla_perplexity"] == 4.8672
    alone = "static max, per-channel weights; LayerNorm in NVDLA's steps, INT8 only in the layernorm"
    assert want[alone, 360]["nvdla_correct"] == 349 and want[alone, 369]["nvdla_perplexity"] == 4.8409
    assert "normalize: cannot be programmed" in want[lut, 369]["error"]
    small = {
        (r["recipe"], r.get("images", r.get("windows"))): r
        for r in _rows("vit_digits", "nv_small") + _rows("char_gpt", "nv_small")
    }
    for recipe in (
        "static max, per-channel weights",
        "static max, per-tensor weights",
        "dynamic activations, per-channel weights",
    ):
        assert abs(want[recipe, 360]["nvdla_correct"] - small[recipe, 360]["nvdla_correct"]) <= 1
        assert abs(want[recipe, 369]["nvdla_perplexity"] - small[recipe, 369]["nvdla_perplexity"]) <= 0.007


def test_fp16_on_nv_full_is_the_committed_one():
    """FP16 on nv_full (no scales; every matmul through CMAC's block floating point, CACC's 48-bit sum and
    SDP's FP32, GELU in the LUT's FP16 mode, the residual stream at FP16; accuracy._Fp16Run): the ViT's
    first 100 test images and the GPT's first 4 windows with one prompt of 4 characters, recomputed, are
    accuracy.json's rows. On all of them (`evaluate.py --hw nv_full --recipe 'FP16: ...'`): the ViT's 350
    images as float, the GPT's perplexity 4.8317 against float's 4.8320, 13,888 correct next characters
    against float's 13,885 (V^T with its bias in PV, as the mapper runs V) and 64 greedy characters all
    float's."""
    evaluate = _evaluate_module()
    (recipe,) = evaluate.FP16_RECIPES
    committed = json.loads((TRAINED / "accuracy.json").read_text())
    assert committed["commands"][f"nv_full --recipe {recipe!r}"]["command"].endswith(f"--recipe {recipe!r}")
    want = {
        (r["model"], r.get("images", r.get("windows"))): r
        for r in _rows("vit_digits", "nv_full") + _rows("char_gpt", "nv_full")
        if r["recipe"] == recipe
    }
    images, windows, prompts, new = evaluate.FP16_CI
    fp16 = evaluate.FP16_RECIPES
    for row in evaluate.evaluate("nv_full", images, fp16) + evaluate.evaluate_gpt(
        "nv_full", windows, prompts, new, fp16
    ):
        assert row == want[row["model"], row.get("images", row.get("windows"))]
    assert want["vit_digits", 360]["nvdla_correct"] == want["vit_digits", 360]["float_correct"] == 350
    gpt = want["char_gpt", 369]
    assert gpt["nvdla_perplexity"] == 4.8317 and (gpt["nvdla_correct"], gpt["float_correct"]) == (13888, 13885)
    assert gpt["greedy_agree"] == gpt["greedy_tokens"] == 64
