"""Model MACs of each preset against an analytical count written from the published architecture.

Each formula counts the multiply-accumulates of the model as its paper / Hugging Face implementation
defines it (projections, attention scores and context, FFN, the head), independently of the mapper's
graph. A regression in the lowering (a missing projection, a head, a wrong attention span) moves the
mapped count away from it.
"""

from __future__ import annotations

import pytest

from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision, load_config

HW = load_config("nv_full")


def encoder_layer(s: int, h: int, f: int, keys: int | None = None) -> int:
    """q, k, v, o projections, scores and context over `keys` keys per query (all heads), FFN."""
    keys = s if keys is None else keys
    return 4 * s * h * h + 2 * s * keys * h + 2 * s * h * f


def bert(s: int, L: int = 12, h: int = 768, f: int = 3072, labels: int = 2) -> int:
    return L * encoder_layer(s, h, f) + h * h + h * labels  # pooler (first token) + classifier


def gpt2(s: int, L: int = 12, h: int = 768, f: int = 3072, vocab: int = 50257) -> int:
    return L * encoder_layer(s, h, f) + s * h * vocab  # LM head over every position, tied to wte


def t5(s: int, L: int = 12, h: int = 768, f: int = 3072, vocab: int = 32128) -> int:
    enc = L * encoder_layer(s, h, f)
    self_attn = 4 * s * h * h + 2 * s * s * h
    cross = 2 * s * h * h + 2 * s * h * h + 2 * s * s * h  # q, o on the decoder; k, v on the encoder output
    dec = L * (self_attn + cross + 2 * s * h * f)
    return enc + dec + s * h * vocab


def vit(L: int = 12, h: int = 768, f: int = 3072, patch: int = 16, image: int = 224, labels: int = 1000) -> int:
    grid = (image // patch) ** 2
    s = grid + 1  # patches + CLS
    return grid * (patch * patch * 3) * h + L * encoder_layer(s, h, f) + h * labels


def swin_t(labels: int = 1000) -> int:
    stages = [(2, 96, 3136), (2, 192, 784), (6, 384, 196), (2, 768, 49)]
    total = 3136 * (4 * 4 * 3) * 96  # patch embedding
    prev = None
    for depth, c, tokens in stages:
        if prev is not None:
            total += tokens * 4 * prev * c  # patch merging reduction 4C -> 2C
        total += depth * encoder_layer(tokens, c, 4 * c, keys=49)  # 7x7 windows
        prev = c
    return total + 768 * labels


def longformer(s: int, L: int = 12, h: int = 768, f: int = 3072, window: int = 512, labels: int = 2) -> int:
    half = window // 2
    pairs = sum(min(s, q + half + 1) - max(0, q - half) for q in range(s))  # +-256 band, clipped at the ends
    layer = 4 * s * h * h + 2 * pairs * h + 2 * s * h * f
    return L * layer + h * h + h * labels


def xlnet(s: int, L: int = 12, h: int = 768, f: int = 3072, vocab: int = 32000) -> int:
    # q, k, v, o; k_r over 2s relative positions; content, position (2s keys) scores and context; FFN
    layer = 4 * s * h * h + 2 * s * h * h + s * s * h + s * 2 * s * h + s * s * h + 2 * s * h * f
    return L * layer + s * h * vocab


CASES = [
    ("bert-base", 128, bert(128)),
    ("gpt2", 128, gpt2(128)),
    ("t5-base", 128, t5(128)),
    ("vit-b16", 128, vit()),
    ("swin-t", 128, swin_t()),
    ("longformer-base", 128, longformer(128)),
    ("longformer-base", 1024, longformer(1024)),
    ("longformer-base", 4096, longformer(4096)),
    ("xlnet-base", 128, xlnet(128)),
]


@pytest.mark.parametrize(("name", "seq", "expected"), CASES, ids=[f"{n}-s{s}" for n, s, _ in CASES])
def test_model_macs_match_the_published_architecture(name, seq, expected):
    spec = preset(name)
    res = map_model(build_graph(spec, seq=None if spec.image_tokens else seq), HW, precision=Precision.INT8)
    assert abs(res.model_macs / expected - 1) <= 0.005, (res.model_macs, expected)
    if name in ("gpt2", "t5-base"):  # causal (self-)attention: the tiles above the diagonal are skipped
        assert res.macs < res.model_macs
    else:  # the hardware also does tile padding and the ones-convolution sums
        assert res.macs >= res.model_macs


def test_causal_attention_skips_fully_masked_tiles():
    """Bands of 64 queries: at seq 1024 the scores and context run 8.5/16 of the full square."""
    res = map_model(build_graph(preset("gpt2"), seq=1024), HW, precision=Precision.INT8, batch=1, seq=1024)
    qk = [r for r in res.results if r.task.op == "layer0.attn.qk" and r.stats and r.stats.macs]
    assert len(qk) == 16 and "keys past the band" in qk[0].task.note
    computed = sum(r.stats.macs for r in qk)
    assert computed == sum(64 * (i + 1) * 64 * 64 for i in range(16))  # rows x keys x head dim, per head


def test_head_choice():
    g_none = build_graph(preset("gpt2"), seq=64, head="none")
    g_cls = build_graph(preset("gpt2"), seq=64, head="cls")
    assert "lm_head" not in g_none and "classifier" in g_cls
    assert "lm_head" in build_graph(preset("gpt2"), seq=64)
    with pytest.raises(Exception, match="no vocabulary"):
        build_graph(preset("vit-b16"), head="lm")


def test_t5_v1_1_gated_gelu_ffn_from_its_config(tmp_path):
    """feed_forward_proj 'gated-gelu' (T5 v1.1): two input projections; d_kv sets the attention width."""
    import json

    from nvdla_mapper.frontends.hf_config import from_hf_config

    cfg = {"model_type": "t5", "d_model": 512, "num_layers": 8, "num_heads": 6, "d_ff": 1024, "d_kv": 64,
           "feed_forward_proj": "gated-gelu", "vocab_size": 32128}  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    s, h, inner, f, L = 64, 512, 384, 1024, 8
    enc = L * (4 * s * h * inner + 2 * s * s * inner + 3 * s * h * f)
    dec = L * (8 * s * h * inner + 4 * s * s * inner + 3 * s * h * f)
    res = map_model(build_graph(from_hf_config(p), seq=s), HW, precision=Precision.INT8, batch=1, seq=s)
    assert res.model_macs == enc + dec + s * h * 32128


def test_a_preset_name_never_resolves_to_a_folder(tmp_path, monkeypatch):
    from nvdla_mapper.frontends.resolve import resolve_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").mkdir()  # e.g. left by --report gpt2
    assert resolve_model("gpt2").name == "gpt2"
    with pytest.raises(Exception, match="no such folder"):
        resolve_model("./missing")


TINYLLAMA = {  # TinyLlama-1.1B's config.json (the fields the mapper reads)
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
    "num_hidden_layers": 22, "num_key_value_heads": 4, "max_position_embeddings": 2048, "vocab_size": 32000,
    "attention_bias": False, "tie_word_embeddings": False, "hidden_act": "silu",
}  # fmt: skip


def _hf(tmp_path, cfg):
    import json

    from nvdla_mapper.frontends.hf_config import from_hf_config

    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return from_hf_config(p)


def test_tinyllama_gqa_swiglu_rotary(tmp_path):
    """Grouped-query attention (4 K/V heads for 32 query heads), SwiGLU's three FFN matmuls, LM head."""
    s, h, f, kv, L, vocab = 128, 2048, 5632, 4 * 64, 22, 32000
    layer = 2 * s * h * h + 2 * s * h * kv + 2 * s * s * h + 3 * s * h * f
    spec = _hf(tmp_path, TINYLLAMA)
    res = map_model(build_graph(spec, seq=s), HW, precision=Precision.INT8, batch=1, seq=s)
    assert res.model_macs == L * layer + s * h * vocab
    names = [r.task.name for r in res.results]
    assert "layer0.attn.q_rope.rotate_half" in names and "layer0.ffn1_gate" in names
    k_relayout = next(r for r in res.results if r.task.name == "layer0.attn.qk.k_relayout")
    assert k_relayout.task.count == 4  # once per K head, not per query head
    with pytest.raises(Exception, match="2048 learned positions"):
        build_graph(spec, seq=4096)


def test_qwen2_has_qkv_biases_and_a_bad_group_is_refused(tmp_path):
    from nvdla_sim.errors import NvdlaError

    spec = _hf(tmp_path, {**TINYLLAMA, "model_type": "qwen2", "attention_bias": None})
    assert spec.qkv_bias and spec.kv_heads == 4
    with pytest.raises(NvdlaError, match="not a multiple of num_key_value_heads 5"):
        _hf(tmp_path, {**TINYLLAMA, "num_key_value_heads": 5})
