"""Transformer presets and the one graph builder for them (and for config.json models, frontends.hf_config).

One builder covers the families through a few structural switches: encoder/decoder stacks, attention
pattern (full, causal, local windows as in Swin, sliding band as in Longformer, relative positions as in
XLNet/T5), norm (LayerNorm or RMSNorm), FFN activation (GELU or ReLU) and hierarchical stages (Swin).
Shapes of the presets come from the models' papers / reference configs.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import Counter
from dataclasses import dataclass

import networkx as nx

from nvdla_mapper.workload import Block, Graph, MatmulRole, Op, OpKind, Relayout, verify
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import MAX_DIM as MAX_CONV_WIDTH
from nvdla_sim.layers import MAX_STRIDE, ConvShape


class Attention(enum.Enum):
    FULL = "full"
    CAUSAL = "causal"
    WINDOW = "window"  # non-overlapping local windows (Swin), `window` tokens each
    SLIDING = "sliding"  # band of +-window/2 keys per query (Longformer)


@dataclass(frozen=True)
class Stage:
    """A stack of identical blocks at one width (Swin has four; others one)."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    token_divisor: int = 1  # tokens = base tokens / token_divisor (Swin patch merging)


# Blocks a model may have: a sanity bound far past published configs (Llama 3.1 405B has 126 layers,
# GPT-3 175B 96); a random or mistyped config.json with millions of layers would otherwise build a graph
# until memory runs out (found by tests/unit/test_bad_input.py: 24 GB and an OOM kill).
MAX_BLOCKS = 1024


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    stages: tuple[Stage, ...]
    vocab: int = 0  # 0: no token embedding (vision)
    attention: Attention = Attention.FULL
    window: int = 0
    relative: str = ""  # "bias" (T5, Swin): added scores; "xlnet": extra Q.R^T matmul
    norm: str = "layer"  # layer | rms
    activation: str = "gelu"  # gelu | relu
    gated_ffn: bool = False  # T5 v1.1: two input projections, the activation of one gating the other
    kv_heads: int = 0  # grouped-query attention: heads of K and V (0: as many as query heads)
    qkv_bias: bool = True  # biases on the q, k, v projections (LLaMA/Mistral: none; Qwen2: yes)
    tied_embeddings: bool = True  # the LM head reuses the token embeddings (one copy in DRAM)
    decoder_layers: int = 0  # T5 decoder blocks (with cross-attention)
    head_dim: int = 0  # 0: hidden / heads
    image_tokens: int = 0  # vision models: tokens fixed by the image (patch grid)
    patch_embed: tuple[int, int, int] = (0, 0, 0)  # (image, patch, channels) for ViT/Swin
    max_positions: int = 0  # learned absolute positions (max_position_embeddings); 0: relative or none
    num_labels: int = 0  # classifier outputs; 0: 1000 for vision models, 2 otherwise

    @property
    def labels(self) -> int:
        return self.num_labels or (1000 if self.image_tokens else 2)

    def __post_init__(self) -> None:
        blocks = sum(st.layers for st in self.stages) + self.decoder_layers
        if blocks > MAX_BLOCKS:  # the workload graph grows with the blocks: refuse before it fills memory
            raise NvdlaError(
                f"{self.name}: {blocks:,} transformer blocks (num_hidden_layers / n_layer / num_layers / depths); "
                f"at most {MAX_BLOCKS} are mapped"
            )
        if self.attention is Attention.SLIDING and (self.window < 2 or self.window % 2):
            raise NvdlaError(
                f"{self.name}: attention_window {self.window} must be an even number >= 2 (window/2 keys each side)"
            )
        image, patch, _ = self.patch_embed
        if image > MAX_CONV_WIDTH and patch <= MAX_STRIDE:  # the patch embedding is a direct convolution
            raise NvdlaError(
                f"{self.name}: image_size {image} is past the convolution's {MAX_CONV_WIDTH}-pixel input width "
                "(13-bit register field)"
            )
        for st in self.stages:
            if st.hidden % st.heads and not self.head_dim:
                raise NvdlaError(f"{self.name}: hidden {st.hidden} is not divisible by heads {st.heads}")


PRESETS: dict[str, ModelSpec] = {
    "bert-base": ModelSpec("bert-base", "bert", (Stage(12, 768, 12, 3072),), vocab=30522, max_positions=512),
    "bert-large": ModelSpec("bert-large", "bert", (Stage(24, 1024, 16, 4096),), vocab=30522, max_positions=512),
    "gpt2": ModelSpec(
        "gpt2", "gpt2", (Stage(12, 768, 12, 3072),), vocab=50257, attention=Attention.CAUSAL, max_positions=1024
    ),
    # the larger GPT-2s (Radford et al. 2019, Hugging Face configs) and a GPT-J-6B-sized GPT (28 x 4096, FFN
    # 16384, 50400 tokens, 2048 positions; its rotary and parallel attention/FFN are not modelled)
    "gpt2-medium": ModelSpec(
        "gpt2-medium", "gpt2", (Stage(24, 1024, 16, 4096),), vocab=50257, attention=Attention.CAUSAL, max_positions=1024
    ),
    "gpt2-large": ModelSpec(
        "gpt2-large", "gpt2", (Stage(36, 1280, 20, 5120),), vocab=50257, attention=Attention.CAUSAL, max_positions=1024
    ),
    "gpt2-xl": ModelSpec(
        "gpt2-xl", "gpt2", (Stage(48, 1600, 25, 6400),), vocab=50257, attention=Attention.CAUSAL, max_positions=1024
    ),
    "gptj-6b-size": ModelSpec(
        "gptj-6b-size",
        "gpt2",
        (Stage(28, 4096, 16, 16384),),
        vocab=50400,
        attention=Attention.CAUSAL,
        max_positions=2048,
        tied_embeddings=False,
    ),
    "t5-base": ModelSpec(
        "t5-base",
        "t5",
        (Stage(12, 768, 12, 3072),),
        vocab=32128,
        relative="bias",
        norm="rms",
        activation="relu",
        decoder_layers=12,
    ),
    "vit-b16": ModelSpec("vit-b16", "vit", (Stage(12, 768, 12, 3072),), image_tokens=197, patch_embed=(224, 16, 3)),
    "swin-t": ModelSpec(
        "swin-t",
        "swin",
        (Stage(2, 96, 3, 384, 1), Stage(2, 192, 6, 768, 4), Stage(6, 384, 12, 1536, 16), Stage(2, 768, 24, 3072, 64)),
        attention=Attention.WINDOW,
        window=49,
        relative="bias",
        image_tokens=3136,
        patch_embed=(224, 4, 3),
    ),
    "longformer-base": ModelSpec(
        "longformer-base",
        "longformer",
        (Stage(12, 768, 12, 3072),),
        vocab=50265,
        attention=Attention.SLIDING,
        window=512,
        max_positions=4096,
    ),
    "xlnet-base": ModelSpec("xlnet-base", "xlnet", (Stage(12, 768, 12, 3072),), vocab=32000, relative="xlnet"),
}


def preset(name: str) -> ModelSpec:
    """A transformer preset by name (any model source by name or path: frontends.resolve.resolve_model)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise NvdlaError(f"unknown transformer preset {name!r}; presets: {', '.join(PRESETS)}") from None


# ---- graph builder ----------------------------------------------------------------------------------


HEADS = ("auto", "none", "lm", "lm_last", "cls")


def default_head(spec: ModelSpec) -> str:
    """The head a model family is used with: generative models their LM head, encoders a classifier."""
    if spec.family == "t5" and not spec.decoder_layers:
        return "none"  # T5's encoder alone (T5EncoderModel): its hidden states are the output
    return "lm" if spec.family in ("gpt2", "t5", "xlnet", "llama") else "cls"


DEFAULT_SEQ = 128  # tokens per sequence when a text model is mapped without --seq


def sequence_length(spec: ModelSpec, seq: int | None) -> int:
    """The tokens a model runs per sequence: `seq` (DEFAULT_SEQ when None) for text models; for a vision
    model the tokens its image makes (ViT-B/16: (224/16)^2 patches + a class token = 197), where any
    other `seq` is refused in one line rather than reported beside a run that ignored it."""
    if not spec.image_tokens:
        return DEFAULT_SEQ if seq is None else seq
    if seq is not None and seq != spec.image_tokens:
        image, patch, _ = spec.patch_embed
        raise NvdlaError(
            f"--seq {seq}: {spec.name} runs {spec.image_tokens} tokens, fixed by its {image}x{image} image in "
            f"{patch}x{patch} patches; omit --seq (or give {spec.image_tokens})"
        )
    return spec.image_tokens


def build_graph(
    spec: ModelSpec,
    *,
    batch: int = 1,
    seq: int | None = None,
    dec_seq: int | None = None,
    extend_positions: bool = False,
    head: str = "auto",
) -> nx.DiGraph:
    """Workload graph of one forward pass (prefill) at the given batch and sequence length (default
    DEFAULT_SEQ; a vision model runs the tokens its image makes, and another `seq` is refused). A sequence
    beyond a model's learned positions is refused unless `extend_positions` (a what-if)."""
    tokens = sequence_length(spec, seq)
    if batch < 1 or tokens < 1:
        raise NvdlaError(f"batch and seq must be >= 1, got batch={batch} seq={tokens}")
    if spec.max_positions and not spec.image_tokens and tokens > spec.max_positions and not extend_positions:
        raise NvdlaError(
            f"--seq {tokens}: {spec.name} has {spec.max_positions} learned positions (max_position_embeddings); "
            "use --seq <= that, or --extend-positions to map it anyway as a what-if"
        )
    g = Graph(spec.name, batch=batch, seq=tokens)
    base = batch * tokens
    s0 = spec.stages[0]
    if spec.patch_embed[0]:
        image, patch, ch = spec.patch_embed
        grid = (image // patch) ** 2
        with g.block("patch_embed") as p:
            last = g.add(patch_embed_op(p, batch=batch, image=(image, image), patch=patch, channels=ch,
                                        hidden=s0.hidden))  # fmt: skip
            if spec.family == "swin":  # Swin normalises the patch embeddings
                last = _norm(g, spec, f"{p}.norm", last, m=batch * grid, n=s0.hidden)
    else:
        last = g.add(Op("embed", OpKind.GATHER, base, s0.hidden, group="host"))
    prefix = "enc" if spec.decoder_layers else "layer"
    idx = 0
    for si, st in enumerate(spec.stages):
        m = base // st.token_divisor
        if si > 0:
            prev = spec.stages[si - 1]
            # patch merging: 2x2 neighbours concatenated (4C), layernorm, then a bias-free reduction to 2C
            with g.block("merge", si) as p:
                last = _norm(g, spec, f"{p}.norm", last, m=m, n=4 * prev.hidden)
                last = g.add(
                    Op(p, OpKind.MATMUL, m, st.hidden, k=4 * prev.hidden, group="matmul", attrs={"bias": False}), last
                )
        for _ in range(st.layers):
            last = _block(g, spec, st, (prefix, idx), last, m=m, batch=batch)
            idx += 1
    if spec.family != "xlnet":  # XLNet's blocks end with their own layernorm; there is no final one
        last = _norm(
            g, spec, f"{prefix}_final_norm", last, m=base // spec.stages[-1].token_divisor, n=spec.stages[-1].hidden
        )
    if spec.decoder_layers:
        enc_out = last
        dseq = dec_seq or tokens
        dm = batch * dseq
        last = g.add(Op("dec_embed", OpKind.GATHER, dm, s0.hidden, group="host"))
        for i in range(spec.decoder_layers):
            last = _block(g, spec, s0, ("dec", i), last, m=dm, batch=batch, causal=True, cross=(enc_out, base))
        last = _norm(g, spec, "dec_final_norm", last, m=dm, n=s0.hidden)
    m_out = batch * (dec_seq or tokens) if spec.decoder_layers else base // spec.stages[-1].token_divisor
    _head(g, spec, last, head, m=m_out, batch=batch)
    return verify(g.g)


def patch_embed_op(name: str, *, batch: int, image: tuple[int, int], patch: int, channels: int, hidden: int) -> Op:
    """A ViT/Swin patch embedding (a patch x patch convolution with stride patch) on the image input, as
    the conv core runs it: a direct convolution when its stride fits the core's stride field (<= 8), else
    a matmul over patches the host extracts (im2col). The preset and the ONNX import both build it here."""
    w, h = image
    grid = (w // patch) * (h // patch)
    if patch > MAX_STRIDE:
        return Op(name, OpKind.MATMUL, batch * grid, hidden, k=patch * patch * channels, group="matmul",
                  attrs={"im2col": True, "role": MatmulRole.EMBEDDING})  # fmt: skip
    geo = dict(in_w=w, in_h=h, in_c=channels, out_k=hidden, kernel_w=patch, kernel_h=patch, stride_x=patch,
               stride_y=patch)  # fmt: skip
    attrs = {"conv": ConvShape(**geo), "groups": 1, "image_input": channels <= 4}
    return Op(name, OpKind.CONV, grid, hidden, k=channels * patch * patch, count=batch, group="conv", attrs=attrs)


def _head(g: Graph, spec: ModelSpec, src: str, head: str, *, m: int, batch: int) -> None:
    """The model's head on the last hidden states [m, hidden]."""
    if head not in HEADS:
        raise NvdlaError(f"--head {head!r}: choose one of {', '.join(HEADS)}")
    head = default_head(spec) if head == "auto" else head
    hidden = spec.stages[-1].hidden
    if head == "lm_last":  # generation: the next token comes from the last position of each sequence
        m, head = batch, "lm"
    if head == "lm":
        if not spec.vocab:
            raise NvdlaError(f"--head lm: {spec.name} has no vocabulary (vision model); use --head cls or none")
        # the vocabulary projection of every position, tied to the token embeddings (no bias)
        g.add(Op("lm_head", OpKind.MATMUL, m, spec.vocab, k=hidden, group="head",
                 attrs={"bias": False, "role": MatmulRole.LM_HEAD}), src)  # fmt: skip
    elif head == "cls":
        x = src
        if spec.family == "swin":  # mean over the final tokens, then the classifier
            x = g.add(Op("head.pool", OpKind.HOST, batch, hidden, group="head", block=Block("head"),
                         attrs={"flops_per_elem": m // batch, "note": "Swin head: mean over the final tokens on the host"}), x)  # fmt: skip
        elif spec.family in ("bert", "longformer"):  # pooler: dense + tanh on the first token
            with g.block("pooler") as p:
                x = g.add(Op(p, OpKind.MATMUL, batch, hidden, k=hidden, group="head"), x)
                x = g.add(Op(f"{p}.tanh", OpKind.LUT, batch, hidden, group="head", attrs={"func": "tanh"}), x)
        g.add(Op("classifier", OpKind.MATMUL, batch, spec.labels, k=hidden, group="head",
                 attrs={"role": MatmulRole.CLASSIFIER}), x)  # fmt: skip


def _norm(g: Graph, spec: ModelSpec, name: str, src: str, *, m: int, n: int) -> str:
    return g.add(Op(name, OpKind.LAYERNORM, m, n, group="layernorm", attrs={"rms": spec.norm == "rms"}), src)


def _attention(
    g: Graph,
    spec: ModelSpec,
    st: Stage,
    p: str,
    q_src: str,
    kv_src: str,
    *,
    m_q: int,
    m_kv: int,
    batch: int,
    causal: bool,
    cross: bool = False,
) -> str:
    hd = spec.head_dim or st.hidden // st.heads
    inner = hd * st.heads
    kv_inner = hd * (spec.kv_heads or st.heads)  # grouped-query attention shares K and V across a group
    proj, out_proj = _projection_attrs(spec)
    q = _linear(g, f"{p}.q", MatmulRole.QUERY, q_src, m=m_q, n=inner, k=st.hidden, attrs=proj)
    k = _linear(g, f"{p}.k", MatmulRole.KEY, kv_src, m=m_kv, n=kv_inner, k=st.hidden, attrs=proj)
    v = _linear(g, f"{p}.v", MatmulRole.VALUE, kv_src, m=m_kv, n=kv_inner, k=st.hidden,
                attrs={**proj, "feeds_context": True})  # fmt: skip
    if spec.relative == "rotary":  # rotary position embedding of q and k (position-dependent rotation)
        q = g.add(Op(f"{p}.q_rope", OpKind.ROTARY, m_q, inner, group="attention", attrs={"head_dim": hd}), q)
        k = g.add(Op(f"{p}.k_rope", OpKind.ROTARY, m_kv, kv_inner, group="attention", attrs={"head_dim": hd}), k)
    sq, skv = m_q // batch, m_kv // batch
    count = batch * st.heads
    band = None
    if spec.attention is Attention.WINDOW:
        win = spec.window
        n_win = max(1, sq // win)
        rows, keys, count = win, win, count * n_win
    elif spec.attention is Attention.SLIDING and spec.window < skv:
        # hardware tiles: chunks of window/2 queries against their window + chunk keys; the model's work
        # is the band of +-window/2 keys around each query (model_macs)
        chunk = spec.window // 2
        n_chunk = math.ceil(sq / chunk)
        rows, keys, count = chunk, min(skv, chunk + spec.window), count * n_chunk
        band = batch * st.heads * band_pairs(sq, spec.window // 2) * hd
    else:
        rows, keys = sq, skv
    share = st.heads // (spec.kv_heads or st.heads)  # query heads per K/V head (grouped-query attention)
    attrs = {
        "kv_share": share,
        "causal": causal or spec.attention is Attention.CAUSAL,
        "scale": _score_scale(spec, hd),
        "bias": not cross and (spec.relative == "bias" or (spec.attention is Attention.WINDOW and bool(spec.relative))),
    }
    scores = g.add(
        Op(f"{p}.qk", OpKind.ATTN_SCORES, rows, keys, k=hd, count=count, group="attention", attrs=attrs,
           model_macs=band),
        q,
        k,
    )  # fmt: skip
    if spec.relative == "xlnet":
        # k_r = R W_r: the relative positional embeddings of 2 x seq positions (klen + qlen, no memory),
        # shared by the batch; then q . k_r per head and the relative shift
        kr = g.add(Op(f"{p}.kr", OpKind.MATMUL, 2 * skv, inner, k=st.hidden, group="matmul", attrs=proj))
        pos = g.add(
            Op(
                f"{p}.qr",
                OpKind.ATTN_SCORES,
                rows,
                2 * keys,
                k=hd,
                count=count,
                group="attention",
                attrs={"relative_shift": True},
            ),
            q,
            kr,
        )
        scores = g.add(Op(f"{p}.rel_add", OpKind.ADD, rows, keys, count=count, group="attention"), scores, pos)
    probs = g.add(
        Op(f"{p}.softmax", OpKind.SOFTMAX, rows, keys, count=count, group="softmax", attrs={"causal": attrs["causal"]}),
        scores,
    )
    pv_attrs = {"causal": attrs["causal"] and band is None, "kv_share": share, "value_bias": proj.get("bias", True)}
    ctx = g.add(
        Op(f"{p}.pv", OpKind.ATTN_CONTEXT, rows, hd, k=keys, count=count, group="attention", attrs=pv_attrs,
           model_macs=band),
        probs,
        v,
    )  # fmt: skip
    return _linear(g, f"{p}.o", MatmulRole.OUTPUT, ctx, m=m_q, n=st.hidden, k=inner, attrs=out_proj)


def _projection_attrs(spec: ModelSpec) -> tuple[dict, dict]:
    """Attrs of the q/k/v and the output projections: T5 has no biases, XLNet's attention projections
    have none (its FFN has), LLaMA none, Qwen2 only on q/k/v."""
    qkv = {"bias": False} if spec.family in ("t5", "xlnet") or not spec.qkv_bias else {}
    out = {"bias": False} if spec.family in ("t5", "xlnet", "llama") else {}
    return qkv, out


def _score_scale(spec: ModelSpec, head_dim: int) -> float:
    """The 1/sqrt(d) of QK^T; T5 folds it into its initialisation and scores unscaled."""
    return 1.0 if spec.family == "t5" else 1 / math.sqrt(head_dim)


def band_pairs(seq: int, half: int) -> int:
    """(query, key) pairs of a sequence with each query attending to keys within +-half positions."""
    return sum(min(seq, q + half + 1) - max(0, q - half) for q in range(seq))


def _block(
    g: Graph,
    spec: ModelSpec,
    st: Stage,
    block: tuple[str, int],
    src: str,
    *,
    m: int,
    batch: int,
    causal: bool = False,
    cross: tuple[str, int] | None = None,
) -> str:
    """Transformer block `block` (family, index) on `src`."""
    with g.block(*block) as p:
        return _block_ops(g, spec, st, p, src, m=m, batch=batch, causal=causal, cross=cross,
                          shifted=spec.family == "swin" and block[1] % 2 == 1)  # fmt: skip


def _block_ops(
    g: Graph,
    spec: ModelSpec,
    st: Stage,
    p: str,
    src: str,
    *,
    m: int,
    batch: int,
    causal: bool,
    cross: tuple[str, int] | None,
    shifted: bool,
) -> str:
    pre_norm = spec.family in ("gpt2", "t5", "vit", "swin", "llama")
    x = src
    h = _norm(g, spec, f"{p}.ln1", x, m=m, n=st.hidden) if pre_norm else x
    if shifted:  # Swin's shifted windows: a cyclic roll of whole pixels before attention, and back after
        h = g.add(
            Op(f"{p}.shift", OpKind.TRANSPOSE, m, st.hidden, group="attention", attrs={"relayout": Relayout.ROLL}), h
        )
    a = _attention(g, spec, st, f"{p}.attn", h, h, m_q=m, m_kv=m, batch=batch, causal=causal)
    if shifted:
        a = g.add(
            Op(f"{p}.unshift", OpKind.TRANSPOSE, m, st.hidden, group="attention", attrs={"relayout": Relayout.ROLL}), a
        )
    x = g.add(Op(f"{p}.res1", OpKind.ADD, m, st.hidden, group="elementwise"), a, x)
    if not pre_norm:
        x = _norm(g, spec, f"{p}.ln1", x, m=m, n=st.hidden)
    if cross is not None:
        enc, m_enc = cross
        h = _norm(g, spec, f"{p}.lnx", x, m=m, n=st.hidden)
        a = _attention(g, spec, st, f"{p}.xattn", h, enc, m_q=m, m_kv=m_enc, batch=batch, causal=False, cross=True)
        x = g.add(Op(f"{p}.resx", OpKind.ADD, m, st.hidden, group="elementwise"), a, x)
    h = _norm(g, spec, f"{p}.ln2", x, m=m, n=st.hidden) if pre_norm else x
    x = _ffn(g, spec, st, p, h, x, m=m)
    if not pre_norm:
        x = _norm(g, spec, f"{p}.ln2", x, m=m, n=st.hidden)
    return x


def _ffn(g: Graph, spec: ModelSpec, st: Stage, p: str, h: str, x: str, *, m: int) -> str:
    """The FFN of a block on `h` with the residual `x` added."""
    ffn = {"bias": False} if spec.family in ("t5", "llama") else {}
    f1 = _linear(g, f"{p}.ffn1", MatmulRole.FFN_UP, h, m=m, n=st.ffn, k=st.hidden, attrs=ffn)
    act_kind = {"gelu": OpKind.GELU, "relu": OpKind.RELU, "silu": OpKind.LUT}[spec.activation]
    act_attrs = {"func": "SiLU"} if spec.activation == "silu" else {}
    act = g.add(Op(f"{p}.act", act_kind, m, st.ffn, group="elementwise", attrs=act_attrs), f1)
    if spec.gated_ffn:  # T5 v1.1 "gated-gelu", LLaMA SwiGLU: act(x W_gate) * (x W_up)
        lin = _linear(g, f"{p}.ffn1_gate", MatmulRole.FFN_GATE, h, m=m, n=st.ffn, k=st.hidden, attrs=ffn)
        act = g.add(Op(f"{p}.gate", OpKind.MUL, m, st.ffn, group="elementwise"), act, lin)
    f2 = _linear(g, f"{p}.ffn2", MatmulRole.FFN_DOWN, act, m=m, n=st.hidden, k=st.ffn, attrs=ffn)
    return g.add(Op(f"{p}.res2", OpKind.ADD, m, st.hidden, group="elementwise"), f2, x)


# ---- one decode step (autoregressive generation) -----------------------------------------------------


def decode_step_graph(spec: ModelSpec, *, batch: int, kv_len: int | tuple[int, ...], cross_len: int = 0) -> nx.DiGraph:
    """Workload graph of one decode step: each of `batch` sequences has `kv_len` cached tokens and adds one
    (a tuple: each sequence's own cache length, as a serving batch has them; the sequences with the same
    length share their attention layers, one set per distinct length).

    Projections and the FFN are M = batch matmuls (GEMV at batch 1). The K and V of the new token are
    appended to the caches, which are kept in the layouts QK^T and PV read as kernels: K in the
    direct-convolution weight format (keys as kernels: the append is whole atoms), V^T likewise (keys as
    channels: the append is an element scatter, done by the host). Attention runs against kv_len + 1 keys;
    the LM head projects every sequence's new position. For T5 the step is the decoder's, with a
    cross-attention against the `cross_len` encoder positions whose K/V caches the prefill filled.
    """
    check_generative(spec)
    lens = (kv_len,) * batch if isinstance(kv_len, int) else tuple(kv_len)
    if batch < 1 or len(lens) != batch or min(lens) < 0 or (spec.decoder_layers and cross_len < 1):
        raise NvdlaError(
            f"batch >= 1, kv_len >= 0 (one per sequence) and (T5) cross_len >= 1 needed, got {batch}, {kv_len}, {cross_len}"
        )
    groups = tuple(sorted(Counter(lens).items()))  # (cache length, sequences)
    g = Graph(f"{spec.name}.decode", batch=batch, seq=max(lens))
    return _step(g, spec, tokens=batch, groups=groups, emitting=batch, cross_len=cross_len)


def _step(g: Graph, spec: ModelSpec, *, tokens: int, groups: tuple, emitting: int, cross_len: int = 0) -> nx.DiGraph:
    """The layers of one generation step on `tokens` new positions, attention per group (_decode_attention),
    the LM head on the `emitting` positions that make a token (none: no head)."""
    st = spec.stages[0]
    layers, prefix = (spec.decoder_layers, "dec") if spec.decoder_layers else (st.layers, "layer")
    m = tokens
    last = g.add(Op("embed", OpKind.GATHER, m, st.hidden, group="host"))
    for i in range(layers):
        with g.block(prefix, i) as p:
            h = _norm(g, spec, f"{p}.ln1", last, m=m, n=st.hidden)
            a = _decode_attention(g, spec, st, f"{p}.attn", h, batch=m, groups=groups)
            x = g.add(Op(f"{p}.res1", OpKind.ADD, m, st.hidden, group="elementwise"), a, last)
            if spec.decoder_layers:
                h = _norm(g, spec, f"{p}.lnx", x, m=m, n=st.hidden)
                a = _decode_attention(g, spec, st, f"{p}.xattn", h, batch=m, groups=((cross_len - 1, m),), cross=True)
                x = g.add(Op(f"{p}.resx", OpKind.ADD, m, st.hidden, group="elementwise"), a, x)
            h = _norm(g, spec, f"{p}.ln2", x, m=m, n=st.hidden)
            last = _ffn(g, spec, st, p, h, x, m=m)
    last = _norm(g, spec, f"{prefix}_final_norm", last, m=m, n=st.hidden)
    if emitting:
        _head(g, spec, last, "lm", m=emitting, batch=emitting)
    return verify(g.g)


def mixed_step_graph(spec: ModelSpec, seqs: tuple[tuple[int, int], ...], *, emitting: int) -> nx.DiGraph:
    """One iteration of chunked prefill mixed with decodes: each sequence has (cached positions, new tokens);
    a decode adds 1 token, a prefill chunk several. The projections and the FFN run on all new tokens at
    once (M = their sum, the weights read once); attention runs per group of equal (cached, new), each
    new token's queries against the cache and the chunk's keys (a chunk's causal mask from SDP); the LM
    head projects the `emitting` positions that produce a token (the decodes and the chunks that end
    their prompt). With every sequence adding one token this is decode_step_graph."""
    check_generative(spec)
    if spec.decoder_layers:
        raise NvdlaError(f"{spec.name}: chunked prefill is modelled for decoder-only models (gpt2, llama family)")
    if not seqs or any(c < 0 or n < 1 for c, n in seqs) or not 0 <= emitting <= len(seqs):
        raise NvdlaError(
            f"a mixed step needs (cached >= 0, new >= 1) per sequence and 0..{len(seqs)} emitting, got {seqs}"
        )
    if all(n == 1 for _, n in seqs):
        return decode_step_graph(spec, batch=len(seqs), kv_len=tuple(c for c, _ in seqs))
    groups = tuple((c, k, n) for (c, n), k in sorted(Counter(seqs).items()))
    g = Graph(f"{spec.name}.mixed", batch=len(seqs), seq=max(c + n for c, n in seqs))
    return _step(g, spec, tokens=sum(n for _, n in seqs), groups=groups, emitting=emitting)


def check_generative(spec: ModelSpec) -> None:
    if spec.family not in ("gpt2", "llama", "t5"):
        raise NvdlaError(
            f"{spec.name}: generation is modelled for decoder models (gpt2, llama family) and T5; "
            f"{spec.family} is an encoder"
        )


MAX_SHARDS = 64  # tensor-parallel shards (NVDLA instances) a model may be split over


def tensor_shard(spec: ModelSpec, shards: int) -> ModelSpec:
    """One of `shards` tensor-parallel shards of a decoder (Megatron-LM's split, Shoeybi et al. 2019): each
    holds heads / shards attention heads (and KV heads), FFN columns and LM-head columns (the vocabulary);
    the hidden width, the norms and the embedding rows stay whole. Its row-parallel layers (the attention's
    output projection, the FFN's down projection) then give partial sums of the hidden vector, which the
    shards add (studies/parallel.py). A one-line error where a count does not divide."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise NvdlaError(f"--tp {shards!r}: tensor-parallel shards must be a whole number from 1 to {MAX_SHARDS}")
    if shards == 1:
        return spec
    if spec.family not in ("gpt2", "llama"):
        raise NvdlaError(f"--tp {shards}: {spec.name} ({spec.family}) is not a decoder; tensor parallel splits gpt2 "
                         "and llama families")  # fmt: skip
    stages = []
    for st in spec.stages:
        kv = spec.kv_heads or st.heads
        for name, count in (("num_attention_heads", st.heads), ("num_key_value_heads", kv),
                            ("intermediate_size", st.ffn)):  # fmt: skip
            if count % shards:
                raise NvdlaError(f"--tp {shards}: {spec.name}'s {name} {count} does not split into {shards} shards")
        stages.append(dataclasses.replace(st, heads=st.heads // shards, ffn=st.ffn // shards))
    first = spec.stages[0]
    return dataclasses.replace(
        spec, name=f"{spec.name} (1/{shards} shard)", stages=tuple(stages),
        kv_heads=spec.kv_heads // shards if spec.kv_heads else 0,
        head_dim=spec.head_dim or first.hidden // first.heads, vocab=math.ceil(spec.vocab / shards),
    )  # fmt: skip


def t5_prefill_graph(spec: ModelSpec, *, batch: int, prompt: int) -> nx.DiGraph:
    """T5's prefill: the encoder over the prompt, then every decoder layer's cross-attention K and V of
    the encoder output, written once into the caches the decode steps read (K as kernels, V^T)."""
    g = Graph(f"{spec.name}.prefill", batch=batch, seq=prompt)
    st = spec.stages[0]
    hd = spec.head_dim or st.hidden // st.heads
    inner, m = hd * st.heads, batch * prompt
    last = g.add(Op("embed", OpKind.GATHER, m, st.hidden, group="host"))
    for i in range(st.layers):
        last = _block(g, spec, st, ("enc", i), last, m=m, batch=batch)
    enc = _norm(g, spec, "enc_final_norm", last, m=m, n=st.hidden)
    nob = {"bias": False}
    for i in range(spec.decoder_layers):
        with g.block("dec", i) as block:
            p = f"{block}.xattn"
            k, v = _key_value(g, p, enc, m=m, n=inner, k=st.hidden, attrs=nob)
            g.add(
                Op(f"{p}.k_cache", OpKind.TRANSPOSE, m, inner, group="kv_cache", attrs={"relayout": Relayout.K_APPEND}),
                k,
            )
            g.add(
                Op(f"{p}.v_cache", OpKind.TRANSPOSE, m, inner, group="kv_cache", attrs={"relayout": Relayout.V_CACHE}),
                v,
            )
    return verify(g.g)


def _linear(g: Graph, name: str, role: MatmulRole, *srcs: str, m: int, n: int, k: int, attrs: dict) -> str:
    """A linear layer of a transformer block: an m x k x n matmul with its role (MatmulAttrs.role)."""
    return g.add(Op(name, OpKind.MATMUL, m, n, k=k, group="matmul", attrs={**attrs, "role": role}), *srcs)


def _key_value(g: Graph, p: str, src: str, *, m: int, n: int, k: int, attrs: dict) -> tuple[str, str]:
    """The K and V projections `p`.k and `p`.v of `src` (a decode step's, a prefill's cross-attention caches)."""
    key = _linear(g, f"{p}.k", MatmulRole.KEY, src, m=m, n=n, k=k, attrs=attrs)
    return key, _linear(g, f"{p}.v", MatmulRole.VALUE, src, m=m, n=n, k=k, attrs=attrs)


def _decode_attention(
    g: Graph,
    spec: ModelSpec,
    st: Stage,
    p: str,
    src: str,
    *,
    batch: int,
    groups: tuple[tuple[int, int], ...],
    cross: bool = False,
) -> str:
    """One token's attention against kv_len + 1 cached keys, for each (kv_len, sequences) group; `cross`:
    against the encoder's cached K/V (only q is projected, nothing is appended)."""
    hd = spec.head_dim or st.hidden // st.heads
    inner, kv_inner = hd * st.heads, hd * (spec.kv_heads or st.heads)
    share = st.heads // (spec.kv_heads or st.heads)
    proj, out_proj = _projection_attrs(spec)
    q = _linear(g, f"{p}.q", MatmulRole.QUERY, src, m=batch, n=inner, k=st.hidden, attrs=proj)
    if cross:
        k = v = q  # the encoder's K/V caches: nothing to project or append
    else:
        k, v = _key_value(g, p, src, m=batch, n=kv_inner, k=st.hidden, attrs=proj)
    if spec.relative == "rotary":
        q = g.add(Op(f"{p}.q_rope", OpKind.ROTARY, batch, inner, group="attention", attrs={"head_dim": hd}), q)
        k = g.add(Op(f"{p}.k_rope", OpKind.ROTARY, batch, kv_inner, group="attention", attrs={"head_dim": hd}), k)
    if not cross:
        k = g.add(
            Op(
                f"{p}.k_append",
                OpKind.TRANSPOSE,
                batch,
                kv_inner,
                group="kv_cache",
                attrs={"relayout": Relayout.K_APPEND},
            ),
            k,
        )
        v = g.add(
            Op(
                f"{p}.v_append",
                OpKind.TRANSPOSE,
                batch,
                kv_inner,
                group="kv_cache",
                attrs={"relayout": Relayout.V_APPEND},
            ),
            v,
        )
    # the query heads of a K/V group run as one layer, as `share` pixels (per new token) against the group's
    # cached K (resp. V^T) kernels: the cache slice is fetched into CBUF once for the whole group
    cached = {"kv_share": 1, "cached": True, "causal": False, "kv_groups": spec.kv_heads or st.heads}
    if spec.relative == "bias" and not cross:
        cached["bias"] = True  # T5's relative-position bias on the self-attention scores
    scale = _score_scale(spec, hd)
    contexts = []
    for group in groups:
        kv_len, seqs = group[0], group[1]
        new = group[2] if len(group) > 2 else 1  # tokens each of these sequences adds (a prefill chunk: > 1)
        keys, count = kv_len + new, seqs * (spec.kv_heads or st.heads)
        at = "" if len(groups) == 1 else f"@{kv_len}" if new == 1 else f"@{kv_len}+{new}"
        rows = share * new
        if new > 1:  # a chunk's queries see the cache and the chunk's keys up to their own: SDP masks the rest
            cached = {**cached, "causal": True}
        scores = g.add(
            Op(
                f"{p}.qk{at}",
                OpKind.ATTN_SCORES,
                rows,
                keys,
                k=hd,
                count=count,
                group="attention",
                attrs={**cached, "scale": scale},
            ),
            q,
            k,
        )
        probs = g.add(Op(f"{p}.softmax{at}", OpKind.SOFTMAX, rows, keys, count=count, group="softmax"), scores)
        contexts.append(
            g.add(
                Op(f"{p}.pv{at}", OpKind.ATTN_CONTEXT, rows, hd, k=keys, count=count, group="attention", attrs=cached),
                probs,
                v,
            )
        )
    return _linear(g, f"{p}.o", MatmulRole.OUTPUT, *contexts, m=batch, n=st.hidden, k=inner, attrs=out_proj)
