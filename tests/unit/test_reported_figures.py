"""Figures a user acts on, against expectations worked out from the published architectures by hand
(never from the mapper's own output): weight bytes, throughput at a batch, the sequence a model runs,
generate's footprint, Hugging Face defaults, names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nvdla_cli.main import main
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.frontends.resolve import model_graph
from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.generate import kv_bytes_per_token, weight_bytes
from nvdla_mapper.workload import ops_in_order
from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision


def _block(h: int, f: int, *, gated: bool = False) -> int:
    """Weights of one encoder block: q, k, v, o (4 h^2) and the FFN (2 h f, a gated FFN 3 h f)."""
    return 4 * h * h + (3 if gated else 2) * h * f


# Parameters of the weight matrices and filters each model has (no biases, norms or embedding tables),
# from the papers' / reference configs' shapes, with the head the mapper builds by default.
PUBLISHED_WEIGHTS = {
    # BERT-base: 12 blocks (h 768, FFN 3072), pooler 768x768, a 2-label classifier
    "bert-base": 12 * _block(768, 3072) + 768 * 768 + 768 * 2,  # 85,526,016 (issue #26)
    "bert-large": 24 * _block(1024, 4096) + 1024 * 1024 + 1024 * 2,
    # GPT-2: 12 blocks and the LM head over the 50,257-token vocabulary (tied to the embeddings)
    "gpt2": 12 * _block(768, 3072) + 50257 * 768,
    "gpt2-medium": 24 * _block(1024, 4096) + 50257 * 1024,
    "gpt2-xl": 48 * _block(1600, 6400) + 50257 * 1600,
    # T5-base: 12 encoder blocks, 12 decoder blocks (self- and cross-attention: 8 h^2), LM head 32,128
    "t5-base": 12 * _block(768, 3072) + 12 * (8 * 768 * 768 + 2 * 768 * 3072) + 32128 * 768,
    # ViT-B/16: a 16x16x3 patch embedding to 768, 12 blocks, a 1000-class head
    "vit-b16": 16 * 16 * 3 * 768 + 12 * _block(768, 3072) + 768 * 1000,
    # Swin-T: 4x4x3 patches to 96; blocks of 12 C^2 at C = 96/192/384/768 x (2, 2, 6, 2); patch merging
    # 4C -> 2C after stages 1-3; a 1000-class head
    "swin-t": 4 * 4 * 3 * 96
    + sum(d * 12 * c * c for d, c in ((2, 96), (2, 192), (6, 384), (2, 768)))
    + sum(4 * c * 2 * c for c in (96, 192, 384))
    + 768 * 1000,
    "xlnet-base": 12 * (5 * 768 * 768 + 2 * 768 * 3072) + 32000 * 768,  # q k v o + relative-position r
    # ResNet-50: torchvision's 25,557,032 parameters less the BatchNorm scales/shifts (53,120) and the
    # classifier's bias (1,000)
    "resnet50": 25_557_032 - 53_120 - 1_000,
    # ResNet-18: 11,689,512 less BatchNorm (9,600) and the classifier's bias (1,000)
    "resnet18": 11_689_512 - 9_600 - 1_000,
}


@pytest.mark.parametrize("model", sorted(PUBLISHED_WEIGHTS))
def test_the_graph_holds_the_published_weights(model):
    """The workload graph's static weights equal the architecture's, at any batch and sequence."""
    want = PUBLISHED_WEIGHTS[model]
    fixed = model in ("vit-b16", "swin-t", "resnet50", "resnet18")
    for batch, seq in ((1, 16), (3, 128)):
        g = model_graph(model, batch=batch, seq=None if fixed else seq)
        assert sum(op.weight_elems for op in ops_in_order(g)) == want, (model, batch, seq)


@pytest.mark.parametrize("hw_name", ["nv_small", "nv_full"])
def test_bert_base_weight_bytes_do_not_depend_on_sequence_or_batch(hw_name):
    """Issue #26: nv_full (with BDMA, V computed transposed) reported 77,865,984 at seq 1 and 79,036,416
    at seq 128. Dense and stored are the architecture's bytes at every shape and precision."""
    hw = load_config(hw_name)
    for precision, nbytes in ((Precision.INT8, 1), (Precision.FP16, 2)):
        if precision not in hw.precisions:
            continue
        for batch, seq in ((1, 1), (1, 128), (4, 128)):
            res = map_model(build_graph(preset("bert-base"), batch=batch, seq=seq), hw, precision=precision)
            dense, stored = res.weight_bytes()
            assert dense == stored == 85_526_016 * nbytes, (precision, batch, seq, dense, stored)
            assert res.to_dict()["weights"]["dense_weight_bytes"] == 85_526_016 * nbytes


def test_compressed_weights_are_stored_once_per_weight():
    """2:4 pruning with NVDLA's weight compression keeps half the values plus a 1-bit mask per weight
    (one byte each at INT8: 0.5 + 1/8 = 0.625 of dense, before per-group alignment), the same at any seq."""
    from nvdla_mapper.options import WeightTreatment

    hw = load_config("nv_full")
    stored = []
    for seq in (16, 128):
        res = map_model(build_graph(preset("bert-base"), seq=seq), hw, precision=Precision.INT8,
                        weights=WeightTreatment("2:4", True, False))  # fmt: skip
        dense, s = res.weight_bytes()
        assert dense == 85_526_016
        stored.append(s)
    assert stored[0] == stored[1]
    # W_v^T is read as the data cube on nv_full (12 x 768 x 768 bytes, dense); the rest compresses
    v = 12 * 768 * 768
    assert 0.625 * (85_526_016 - v) + v <= stored[0] <= 0.66 * (85_526_016 - v) + v


def test_throughput_counts_every_inference_of_the_batch(capsys, tmp_path):
    """Issue #26: `--batch 4` printed 28.4 inferences/s for a 35.246 ms batch of four (113.5 is right)."""
    assert main(["map", "bert-base", "--hw", "nv_full", "--batch", "4", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    d = json.loads((tmp_path / "report.json").read_text())
    assert d["batch"] == 4
    assert d["throughput_inferences_per_s"] == pytest.approx(
        4 * 1e3 / d["latency_ms"], abs=1e-3
    )  # both rounded to 3 decimals in report.json
    printed = float(re.search(r"\(([\d,.]+) inferences/s\)", out).group(1).replace(",", ""))
    assert printed == pytest.approx(4e3 / d["latency_ms"], abs=0.06)  # one decimal of an unrounded figure


def test_a_vision_model_reports_the_tokens_it_runs(capsys, tmp_path):
    """ViT-B/16 on a 224x224 image: (224/16)^2 = 196 patches + the class token = 197 tokens, whatever the
    default sequence is; a --seq it cannot run is refused, not reported beside a run that ignored it."""
    assert main(["map", "vit-b16", "--hw", "nv_small", "--report", str(tmp_path)]) == 0
    assert "seq 197" in capsys.readouterr().out
    assert json.loads((tmp_path / "report.json").read_text())["seq"] == 197
    assert main(["map", "vit-b16", "--seq", "4096"]) == 2
    assert "--seq 4096: vit-b16 runs 197 tokens" in capsys.readouterr().err
    assert main(["map", "resnet50", "--seq", "128"]) == 2
    assert "resnet50 is a CNN" in capsys.readouterr().err


def test_map_model_refuses_a_shape_the_graph_was_not_built_for():
    g = build_graph(preset("bert-base"), batch=2, seq=64)
    hw = load_config("nv_small")
    with pytest.raises(NvdlaError, match="seq=512 contradicts the graph's seq 64"):
        map_model(g, hw, precision=Precision.INT8, seq=512)
    with pytest.raises(NvdlaError, match="batch=1 contradicts the graph's batch 2"):
        map_model(g, hw, precision=Precision.INT8, batch=1)
    res = map_model(g, hw, precision=Precision.INT8)
    assert (res.batch, res.seq) == (2, 64)


def _config(tmp_path, name: str, fields: dict):
    p = tmp_path / name
    p.write_text(json.dumps(fields))
    return p


TINYLLAMA = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32,
             "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000,
             "max_position_embeddings": 2048}  # fmt: skip
FLAN_T5_BASE = {"model_type": "t5", "d_model": 768, "num_layers": 12, "num_heads": 12, "d_kv": 64, "d_ff": 2048,
                "feed_forward_proj": "gated-gelu", "vocab_size": 32128, "tie_word_embeddings": False}  # fmt: skip


def test_generate_footprint_from_the_published_shapes(tmp_path):
    """Weights in DRAM and KV bytes per token, INT8 (FP16 doubles them):
    GPT-2: 12 x (4 x 768^2 + 2 x 768 x 3072) + 50,257 x 768 (LM head tied to the embeddings); KV 2 x 12 x 768.
    TinyLlama-1.1B (GQA 32/4 heads of 64, SwiGLU 5632, untied): 22 x (2 x 2048^2 + 2 x 2048 x 256 +
    3 x 2048 x 5632) + 2 x 32,000 x 2048; KV 2 x 22 x 4 x 64.
    flan-t5-base (gated GELU, untied): 12 x (4 h^2 + 3 h f) + 12 x (8 h^2 + 3 h f) + 2 x 32,128 x 768 with
    h 768, f 2048 (the hand formula before issue #26 missed the gate and the untied embeddings)."""
    llama = from_hf_config(_config(tmp_path, "tinyllama.config.json", TINYLLAMA))
    t5 = from_hf_config(_config(tmp_path, "flan-t5-base.config.json", FLAN_T5_BASE))
    cases = [
        (preset("gpt2"), 12 * _block(768, 3072) + 50257 * 768, 2 * 12 * 768),
        (llama, 22 * (2 * 2048**2 + 2 * 2048 * 256 + 3 * 2048 * 5632) + 2 * 32000 * 2048, 2 * 22 * 4 * 64),
        (t5, 12 * (4 * 768**2 + 3 * 768 * 2048) + 12 * (8 * 768**2 + 3 * 768 * 2048) + 2 * 32128 * 768, 2 * 12 * 768),
    ]
    assert [c[1] for c in cases] == [123_532_032, 1_099_956_224, 247_529_472]
    for spec, weights, kv in cases:
        for precision in (Precision.INT8, Precision.FP16):
            assert weight_bytes(spec, precision) == weights * precision.bytes, spec.name
            assert kv_bytes_per_token(spec, precision) == kv * precision.bytes, spec.name


def test_config_json_defaults_are_hugging_faces(tmp_path):
    """A field save_pretrained left out takes transformers' default for that model_type (LlamaConfig's
    intermediate_size 11008, MistralConfig's 8 KV heads and FFN 14336, T5Config's d_kv 64 and d_ff 2048),
    not 4 x hidden."""
    llama = from_hf_config(_config(tmp_path, "l.config.json", {"model_type": "llama"}))
    assert (llama.stages[0].hidden, llama.stages[0].ffn, llama.kv_heads, llama.vocab) == (4096, 11008, 32, 32000)
    assert llama.tied_embeddings is False
    mistral = from_hf_config(_config(tmp_path, "m.config.json", {"model_type": "mistral", "hidden_size": 1024,
                                                                   "num_attention_heads": 16}))  # fmt: skip
    assert (mistral.stages[0].ffn, mistral.kv_heads) == (14336, 8)
    t5 = from_hf_config(_config(tmp_path, "t.config.json", {"model_type": "t5", "d_model": 256, "num_heads": 4}))
    assert (t5.stages[0].ffn, t5.head_dim, t5.stages[0].layers, t5.decoder_layers) == (2048, 64, 6, 6)
    gpt2 = from_hf_config(_config(tmp_path, "g.config.json", {"model_type": "gpt2", "n_embd": 256, "n_head": 4}))
    assert (gpt2.stages[0].ffn, gpt2.vocab, gpt2.max_positions) == (4 * 256, 50257, 1024)  # n_inner None: 4 x


def test_config_json_models_are_named_after_the_model(tmp_path):
    """Named after `NAME.config.json`, a Hugging Face cache entry (models--org--name), or the folder."""
    assert from_hf_config(_config(tmp_path, "tinyllama.config.json", TINYLLAMA)).name == "tinyllama"
    snap = tmp_path / "models--TinyLlama--TinyLlama-1.1B" / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    assert from_hf_config(_config(snap, "config.json", TINYLLAMA)).name == "TinyLlama/TinyLlama-1.1B"
    folder = tmp_path / "my-llama"
    folder.mkdir()
    assert from_hf_config(_config(folder, "config.json", TINYLLAMA)).name == "my-llama"


def test_fp16_scores_are_not_sent_through_the_int8_exp_table():
    """FP16 exp overflows past ln 65504 = 11.09 and the LUT runs on raw scores (no row max), so an FP16
    softmax runs on the host; asking for NVDLA's is refused in one line."""
    hw = load_config("nv_full")
    g = build_graph(preset("bert-base"), seq=32)
    res = map_model(g, hw, precision=Precision.FP16)
    softmax = [r for r in res.results if r.task.op.endswith("attn.softmax")]
    assert softmax and all(r.task.resource is Resource.HOST for r in softmax)
    int8 = map_model(g, hw, precision=Precision.INT8, softmax="nvdla")  # the INT8 what-if (docs/quantization.md)
    assert all(r.task.resource is Resource.NVDLA for r in int8.results if r.task.op.endswith("attn.softmax"))
    default = map_model(g, hw, precision=Precision.INT8)  # the mapper's choice: the host
    assert all(r.task.resource is Resource.HOST for r in default.results if r.task.op.endswith("attn.softmax"))
    with pytest.raises(NvdlaError, match="covers INT8 scores only"):
        map_model(g, hw, precision=Precision.FP16, softmax="nvdla")


def test_op_attributes_are_typed_per_kind():
    """A front end's typo in an attribute fails where the op is built, naming it and the valid fields,
    instead of silently taking a default (issue #26: lowering read two dozen attrs with .get(default))."""
    from nvdla_mapper.workload import MatmulAttrs, Op, OpKind, Relayout

    with pytest.raises(NvdlaError, match=r"op 'x\.q' \(matmul\): unknown attribute\(s\) \['bais'\]; valid: bias, "):
        Op("x.q", OpKind.MATMUL, 4, 4, k=4, attrs={"bais": False})
    with pytest.raises(NvdlaError, match="attributes must be LayoutAttrs, not MatmulAttrs"):
        Op("x.t", OpKind.TRANSPOSE, 4, 4, attrs=MatmulAttrs())
    with pytest.raises(NvdlaError, match=r"op 'x\.r' \(rotary\).*head_dim"):
        Op("x.r", OpKind.ROTARY, 4, 4)  # a rotary embedding needs its head dim: no default to fall back on
    op = Op("x.k", OpKind.TRANSPOSE, 4, 4, attrs={"relayout": Relayout.K_APPEND})
    assert op.attrs.relayout is Relayout.K_APPEND and Op("x.m", OpKind.MATMUL, 2, 3, k=5).attrs.bias is True


def test_utilization_never_passes_100_percent_under_the_sparse_mac_what_if():
    """Issue #27 item 4: the 2:4 sparse-MAC what-if halved the cycles but counted dense MACs, so a layer
    showed 176% MAC utilization. The array performs half the channel work: 128 x 768 x 768 does
    128 x 768 x 384 = 37,748,736 MACs; the dense figure is reported apart, under a name that says so."""
    from nvdla_mapper.options import WeightTreatment
    from nvdla_sim import ConvLayer, ConvShape, simulate

    hw = load_config("nv_full")
    layer = ConvLayer("mm", ConvShape.matmul(128, 768, 768), Precision.INT8, sparse_mac=True)
    st = simulate(layer, hw)
    assert st.macs == 128 * 768 * 384 and 0 < st.mac_utilization <= 1
    res = map_model(build_graph(preset("bert-base"), seq=128), hw, precision=Precision.INT8,
                    weights=WeightTreatment("2:4", True, True))  # fmt: skip
    d = res.to_dict()
    assert all(r["hardware_mac_utilization"] <= 1 for r in d["layers"]) and d["hardware_mac_utilization"] <= 1
    # the model's dense MACs over the peak, named apart from the hardware's: past 100% is possible here
    assert d["model_mac_utilization"] == pytest.approx(
        d["model_macs"] / (hw.peak_macs_per_cycle(Precision.INT8) * d["total_cycles"]), abs=1e-6
    )
    assert d["model_mac_utilization"] > d["hardware_mac_utilization"]


def test_a_dram_bandwidth_above_the_interface_is_named_not_silently_clamped(tmp_path, capsys):
    """Issue #27 item 4: custom_example's 512-bit interface at 800 MHz carries 64 B x 0.8 GHz = 51.2 GB/s;
    asking for 204.8 GB/s used 51.2 without a word. The config names both numbers; the CLI warns, the map's
    report keeps the note."""
    from nvdla_sim.config import load_config as load

    src = (Path(__file__).parents[2] / "configs" / "custom_example.toml").read_text()
    cfg = tmp_path / "fast.toml"
    cfg.write_text(src.replace("dram_bandwidth_gbs = 25.6", "dram_bandwidth_gbs = 204.8"))
    hw = load(str(cfg))
    assert hw.dram_bytes_per_cycle == 64
    (note,) = hw.notes
    assert "204.8 GB/s is more than the 512-bit DRAM interface carries at 800 MHz (51.2 GB/s)" in note
    assert load("custom_example").notes == []
    assert main(["simulate", "--hw", str(cfg), "--op", "matmul", "--m", "64", "--k", "64", "--n", "64"]) == 0
    assert "nvdla: warning: memory.dram_bandwidth_gbs 204.8 GB/s" in capsys.readouterr().err
    res = map_model(build_graph(preset("bert-base"), seq=16), hw, precision=Precision.INT8)
    assert note in res.to_dict()["notes"]
