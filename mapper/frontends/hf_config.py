"""Hugging Face config.json -> ModelSpec: the fields each supported model_type names, read with one-line errors.

Read from disk only (no network); the defaults a missing field takes are Hugging Face's own, per model_type
(transformers' configuration_<model>.py), so a config.json that omits a field maps as transformers builds it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from nvdla_mapper.frontends.presets import Attention, ModelSpec, Stage
from nvdla_sim.errors import NvdlaError

_HF_FIELDS = {
    # family: (hidden, layers, heads, ffn) candidate keys in order
    "bert": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "roberta": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "vit": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "longformer": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "gpt2": (("n_embd",), ("n_layer",), ("n_head",), ("n_inner",)),
    "t5": (("d_model",), ("num_layers",), ("num_heads",), ("d_ff",)),
    "xlnet": (("d_model",), ("n_layer",), ("n_head",), ("d_inner",)),
    "swin": (("embed_dim",), ("depths",), ("num_heads",), ("mlp_ratio",)),
    "llama": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "mistral": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
    "qwen2": (("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",), ("intermediate_size",)),
}


# What transformers' configuration_<model>.py defaults a field to when config.json omits it (save_pretrained
# writes only the fields that differ from these, so a config.json may lack, e.g., LLaMA's intermediate_size
# 11008). GPT-2's n_inner None means 4 x n_embd (GPT2Config); T5's num_decoder_layers None means num_layers.
HF_DEFAULTS: dict[str, dict[str, object]] = {
    "bert": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
             "vocab_size": 30522, "max_position_embeddings": 512},
    "roberta": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                "vocab_size": 50265, "max_position_embeddings": 512},
    "longformer": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512,
                   "attention_window": 512},
    "vit": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
            "image_size": 224, "patch_size": 16, "num_channels": 3},
    "gpt2": {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024},
    "t5": {"d_model": 512, "num_layers": 6, "num_heads": 8, "d_ff": 2048, "d_kv": 64, "vocab_size": 32128,
           "tie_word_embeddings": True},
    "xlnet": {"d_model": 1024, "n_layer": 24, "n_head": 16, "d_inner": 4096, "vocab_size": 32000},
    "swin": {"embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "mlp_ratio": 4.0,
             "image_size": 224, "patch_size": 4, "window_size": 7, "num_channels": 3},
    "llama": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
              "vocab_size": 32000, "max_position_embeddings": 2048, "tie_word_embeddings": False},
    "mistral": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336,
                "vocab_size": 32000, "max_position_embeddings": 4096 * 32, "num_key_value_heads": 8,
                "tie_word_embeddings": False},
    "qwen2": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 22016,
              "vocab_size": 151936, "max_position_embeddings": 32768, "num_key_value_heads": 32,
              "tie_word_embeddings": False},
}  # fmt: skip


def model_name(path: Path) -> str:
    """A config.json model's name: `org/name` in a Hugging Face cache (models--org--name/snapshots/<commit>/),
    the stem of `NAME.config.json`, else the folder holding config.json. (`_name_or_path` is not used:
    transformers drops it on save, and older files record where a config was loaded from, not the model.)"""
    parts = path.resolve().parts
    for i, part in enumerate(parts):
        if part.startswith("models--") and i + 2 < len(parts) and parts[i + 1] == "snapshots":
            return part.removeprefix("models--").replace("--", "/")
    if path.name.endswith(".config.json") and path.name != ".config.json":
        return path.name.removesuffix(".config.json")
    return path.resolve().parent.name or path.stem


def _typed(path: Path, key: str, kind: type, value):
    """A config.json value converted to `kind`, or a one-line error naming the field."""
    if kind is list:
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            return value
        raise NvdlaError(f"{path}: field {key!r} must be a list of positive integers, not {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and value != int(value)):
        what = "an integer" if kind is int else "a number"
        raise NvdlaError(f"{path}: field {key!r} must be {what}, not {value!r}")
    if value <= 0:
        raise NvdlaError(f"{path}: field {key!r} must be positive, not {value!r}")
    return kind(value)


# the FFN activation's field per model type (transformers' names) and what the mapper lowers
_ACT_FIELD = {"bert": "hidden_act", "roberta": "hidden_act", "vit": "hidden_act", "longformer": "hidden_act",
              "gpt2": "activation_function"}  # fmt: skip


def _activation(path: Path, cfg: dict, mt: str) -> str:
    """The FFN activation a config.json names, as the mapper lowers it: any GELU variant (gelu, gelu_new,
    gelu_pytorch_tanh, quick_gelu, ...) as GELU, relu as ReLU; another is a one-line error."""
    key = _ACT_FIELD.get(mt)
    value = cfg.get(key) if key else None
    if value is None:
        return "gelu"  # transformers' default for these model types
    text = str(value).lower()
    if "gelu" in text:
        return "gelu"
    if text == "relu":
        return "relu"
    raise NvdlaError(
        f"{path}: field {key!r} {value!r} is not lowered; supported: a GELU variant (gelu, gelu_new, ...) or relu"
    )


def from_hf_config(path: str | Path) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json on disk (no network)."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except OSError as e:
        raise NvdlaError(f"{path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NvdlaError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise NvdlaError(f"{path}: a config.json holds a JSON object of fields, not a {type(cfg).__name__}")
    try:
        spec = _spec_from_hf(path, cfg)
    except NvdlaError as e:  # a shape check of the spec: name the file, as the field errors do
        msg = str(e)
        raise NvdlaError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
    labels = cfg.get("id2label")  # a classifier's outputs (save_pretrained writes id2label, not num_labels)
    labels = len(labels) if isinstance(labels, dict) and labels else cfg.get("num_labels")
    if labels is not None:
        spec = dataclasses.replace(spec, num_labels=_typed(path, "num_labels", int, labels))
    return spec


def _spec_from_hf(path: Path, cfg: dict) -> ModelSpec:
    mt = cfg.get("model_type")
    if mt not in _HF_FIELDS:
        raise NvdlaError(f"{path}: model_type {mt!r} is not supported; supported: {', '.join(_HF_FIELDS)}")

    defaults = HF_DEFAULTS[mt]

    def need(keys: tuple[str, ...], default=None, kind: type = int):
        """The first of `keys` config.json sets, else Hugging Face's default for it, else `default`."""
        for k in keys:
            if k in cfg and cfg[k] is not None:
                return _typed(path, k, kind, cfg[k])
        if keys[0] in defaults:
            return _typed(path, keys[0], kind, defaults[keys[0]])
        if default is not None:
            return default
        raise NvdlaError(f"{path}: missing field {keys[0]!r} for model_type {mt!r}")

    def opt(key: str, default: int = 0) -> int:
        return need((key,), default)

    hk, lk, nk, fk = _HF_FIELDS[mt]
    name = model_name(path)
    if mt == "swin":
        embed, depths, heads = need(hk), need(lk, kind=list), need(nk, kind=list)
        ratio = need(fk, 4.0, kind=float)
        if len(depths) != len(heads):
            raise NvdlaError(f"{path}: depths and num_heads must have the same length")
        stages = tuple(
            Stage(d, embed * 2**i, h, int(embed * 2**i * ratio), 4**i)
            for i, (d, h) in enumerate(zip(depths, heads, strict=True))
        )
        image, patch = need(("image_size",), 224), need(("patch_size",), 4)
        win = need(("window_size",), 7)
        return ModelSpec(
            str(name),
            "swin",
            stages,
            attention=Attention.WINDOW,
            window=win * win,
            relative="bias",
            image_tokens=(image // patch) ** 2,
            patch_embed=(image, patch, need(("num_channels",), 3)),
        )
    hidden, layers, heads = need(hk), need(lk), need(nk)
    ffn = opt(fk[0]) or 4 * hidden  # 4 x hidden only where Hugging Face means it (GPT-2's n_inner None)
    stage = Stage(layers, hidden, heads, ffn)
    vocab = opt("vocab_size")
    # learned absolute positions; RoBERTa-style embeddings (roberta, longformer) reserve two
    positions = opt("n_positions" if mt == "gpt2" else "max_position_embeddings")
    if mt in ("roberta", "longformer") and positions > 2:
        positions -= 2
    if mt in ("llama", "mistral", "qwen2"):
        heads_kv = opt("num_key_value_heads") or heads
        if heads % heads_kv:
            raise NvdlaError(f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {heads_kv}")
        bias = cfg.get("attention_bias")
        bias = mt == "qwen2" if bias is None else bias  # Qwen2 always has q/k/v biases
        return ModelSpec(
            str(name), "llama", (stage,), vocab=vocab, attention=Attention.CAUSAL, norm="rms", activation="silu",
            gated_ffn=True, head_dim=opt("head_dim"), max_positions=positions, relative="rotary",
            kv_heads=heads_kv, qkv_bias=bool(bias), tied_embeddings=bool(cfg.get("tie_word_embeddings", defaults["tie_word_embeddings"])),
        )  # fmt: skip
    act = _activation(path, cfg, mt)
    if mt in ("bert", "roberta"):
        return ModelSpec(str(name), "bert", (stage,), vocab=vocab, max_positions=positions, activation=act)
    if mt == "gpt2":
        return ModelSpec(str(name), "gpt2", (stage,), vocab=vocab, attention=Attention.CAUSAL, max_positions=positions,
                         activation=act)  # fmt: skip
    if mt == "vit":
        image, patch = need(("image_size",), 224), need(("patch_size",), 16)
        return ModelSpec(
            str(name),
            "vit",
            (stage,),
            activation=act,
            image_tokens=(image // patch) ** 2 + 1,
            patch_embed=(image, patch, need(("num_channels",), 3)),
        )
    if mt == "longformer":
        win = cfg.get("attention_window", defaults["attention_window"])
        win = _typed(path, "attention_window", int, win[0] if isinstance(win, list) and win else win)
        return ModelSpec(
            str(name), "longformer", (stage,), vocab=vocab, attention=Attention.SLIDING, window=win,
            max_positions=positions,
        )  # fmt: skip
    if mt == "t5":
        act = str(cfg.get("feed_forward_proj", "relu"))
        return ModelSpec(
            str(name),
            "t5",
            (stage,),
            vocab=vocab,
            relative="bias",
            norm="rms",
            activation="gelu" if "gelu" in act else "relu",
            gated_ffn=act.startswith("gated"),
            decoder_layers=0
            if "T5EncoderModel" in (cfg.get("architectures") or [])
            else opt("num_decoder_layers") or layers,
            head_dim=opt("d_kv"),
            tied_embeddings=bool(cfg.get("tie_word_embeddings", defaults["tie_word_embeddings"])),
        )
    return ModelSpec(str(name), "xlnet", (stage,), vocab=vocab, relative="xlnet")
