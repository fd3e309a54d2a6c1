"""Float reference forward passes of the accuracy study's trained models (issue 31), numpy only.

The weights are the ones validation/trained/train.py wrote under Hugging Face's parameter names
(validation/data/trained/*.npz): `vit_forward` follows ViTForImageClassification (pre-LayerNorm blocks,
exact-erf GELU, a CLS token, the classifier on the final LayerNorm's CLS output), `gpt2_forward` follows
GPT2LMHeadModel (pre-LayerNorm, causal attention, tanh-approximated GELU, the LM head tied to the token
embedding; Conv1D weights stored [in, out]). They are the float baseline an NVDLA run is measured against,
and their accuracy on the committed evaluation data must reproduce the training log's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvdla_mapper.workload import MatmulRole
from nvdla_sim.errors import NvdlaError

Weights = dict[str, np.ndarray]


class Site(str):
    """A matmul's name (what scales, records and learned-scale files key it by: a str, equal to its name)
    with its role and its SmoothQuant group: the matmuls that read one LayerNorm output share one group
    (one division per channel folds into the LayerNorm's gain); None where no gain can take it."""

    role: MatmulRole
    smoothing_group: str | None

    def __new__(cls, name: str, role: MatmulRole, smoothing_group: str | None = None) -> Site:
        site = super().__new__(cls, name)
        site.role, site.smoothing_group = role, smoothing_group
        return site

    def __getnewargs__(self) -> tuple:  # pickled whole (its role with it), as processes pass it
        return str(self), self.role, self.smoothing_group


def scores_site(attention: str) -> Site:
    """QK^T of the attention named `attention` (every sequence and head: one site)."""
    return Site(f"{attention}.qk", MatmulRole.SCORES)


def context_site(attention: str) -> Site:
    """PV of the attention named `attention`."""
    return Site(f"{attention}.pv", MatmulRole.CONTEXT)


def role_of(name: str) -> MatmulRole:
    """A matmul site's role; a one-line error for a bare name (a hook that built a name without its role)."""
    role = getattr(name, "role", None)
    if role is None:
        raise TypeError(f"matmul {name!r} carries no role: build it as reference.Site(name, MatmulRole...)")
    return role


# A matmul: (name, a[M, K], w[N, K], bias[N] or None) -> a @ w.T + bias; the hook an NVDLA run replaces
Matmul = Callable[[str, np.ndarray, np.ndarray, "np.ndarray | None"], np.ndarray]
# One sequence's and head's attention: (name, q[T, d], k[S, d], v[S, d], causal) -> softmax(q k^T /
# sqrt(d)) v [T, d]; the hook a run whose softmax is on NVDLA replaces (None: the matmul hook's QK^T and PV
# around a float softmax)
Attend = Callable[[str, np.ndarray, np.ndarray, np.ndarray, bool], np.ndarray]
# A matmul and its activation: (name, a, w, bias, activation) -> activation(a @ w.T + bias); the hook a run
# whose activation is fused into the matmul's SDP (the LUT) replaces (None: the matmul hook, then the
# activation in float)
Activated = Callable[[str, np.ndarray, np.ndarray, "np.ndarray | None", Callable[[np.ndarray], np.ndarray]], np.ndarray]
# A matmul and the residual add behind it: (name, a, w, bias, x) -> x + a @ w.T + bias, x the residual
# stream [M, N]; the hook a run whose residual adds are fused into the matmul's SDP replaces (None: the
# matmul hook, then the add in float)
Residual = Callable[[str, np.ndarray, np.ndarray, "np.ndarray | None", np.ndarray], np.ndarray]
# The residual stream's first value as the host writes it (the embeddings' sum): (name, x) -> x; the hook
# a run whose stream lives in memory at its precision replaces (None: kept as computed)
Embedded = Callable[[str, np.ndarray], np.ndarray]
# A LayerNorm: (name, x [..., N], gain, bias, eps) -> x normalised, times the gain, plus the bias; the hook a
# run whose LayerNorm is on NVDLA replaces (None: float, the host's)
Normalized = Callable[[str, np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]


def float_matmul(name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    y = a @ w.T
    return y + b if b is not None else y


@dataclass(frozen=True)
class Hooks:
    """What a forward pass runs its ops through: every matmul (float by default), and where a run takes
    them whole, each head's attention, each matmul with its activation, each matmul with the residual add
    behind it, and the residual stream's first value (None: through `matmul`, with the softmax, the
    activation and the add in float, the stream as computed)."""

    matmul: Matmul = float_matmul
    attend: Attend | None = None
    activated: Activated | None = None
    residual: Residual | None = None
    embedded: Embedded | None = None
    normalized: Normalized | None = None
    # V's bias added by PV instead of V's projection (P (V + b) = P V + b, the softmax's rows summing to
    # 1): the mapper's program where it computes V transposed (lowering.rules.lower_matmul), whose
    # per-channel bias would be per pixel. The V site then runs without its bias, and each head's PV site
    # takes that head's slice of it
    value_bias_in_context: bool = False

    def activated_run(self) -> Activated:
        return self.activated or (lambda name, a, w, b, act: act(self.matmul(name, a, w, b)))

    def residual_run(self) -> Residual:
        return self.residual or (lambda name, a, w, b, x: x + self.matmul(name, a, w, b))

    def products(self) -> Matmul | None:
        """The attention products' matmul; None where it is float (all heads at once, in numpy)."""
        return None if self.matmul is float_matmul else self.matmul

    def moves_bias(self, site: Site) -> bool:
        """Whether `site` runs without its bias, which PV adds (value_bias_in_context)."""
        return self.value_bias_in_context and site.role is MatmulRole.VALUE

    def stream(self, name: str, x: np.ndarray) -> np.ndarray:
        return self.embedded(name, x) if self.embedded is not None else x

    def norm(self, name: str, x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
        return self.normalized(name, x, g, b, eps) if self.normalized is not None else layernorm(x, g, b, eps)


FLOAT = Hooks()


def load_weights(path: str | Path) -> Weights:
    """A model's tensors from its .npz (float32), with a one-line error for a missing or foreign file."""
    try:
        with np.load(path) as z:
            return {k: z[k].astype(np.float32) for k in z.files}
    except (OSError, ValueError) as e:
        raise NvdlaError(f"{path}: cannot read model weights ({e}); expected an .npz written by train.py") from None


def _need(w: Weights, key: str) -> np.ndarray:
    if key not in w:
        raise NvdlaError(f"weights lack {key!r}: not the model the config describes")
    return w[key]


def layernorm(
    x: np.ndarray, g: np.ndarray | None = None, b: np.ndarray | None = None, eps: float = 1e-12
) -> np.ndarray:
    """LayerNorm over the last axis (without g and b: the normalisation alone)."""
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y if g is None else y * g + b


def gelu_erf(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def causal_mask(t: int, s: int | None = None) -> np.ndarray:
    """[t, s] True where a query may not see a key: keys after it (the last t of s positions are the queries)."""
    s = t if s is None else s
    return np.arange(s)[None, :] > np.arange(s - t, s)[:, None]


def _attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    heads: int,
    causal: bool,
    mm: Matmul | None = None,
    name: str = "",
    attend: Attend | None = None,
    v_bias: np.ndarray | None = None,
) -> np.ndarray:
    """q, k, v [B, T, H] -> [B, T, H]: per-head scaled dot products, optionally causal; with `mm`, each
    sequence's and head's QK^T and PV through it (`name`.qk, `name`.pv), as NVDLA runs them; with
    `attend`, each sequence's and head's whole attention through it (`name`). `v_bias` [H]: V's bias, added
    by PV (each head's slice its PV's bias; Hooks.value_bias_in_context)."""
    b, t, h = q.shape
    d = h // heads
    if v_bias is not None and attend is not None:
        raise NvdlaError(f"{name}: V's bias moves to PV only where PV runs as a matmul (not a whole attention)")
    split = [a.reshape(b, t, heads, d).transpose(0, 2, 1, 3) for a in (q, k, v)]
    if attend is not None:
        out = np.stack(
            [np.stack([attend(name, *(a[i, j] for a in split), causal) for j in range(heads)]) for i in range(b)]
        )
        return out.transpose(0, 2, 1, 3).reshape(b, t, h)
    if mm is None:
        scores = split[0] @ split[1].transpose(0, 1, 3, 2) / math.sqrt(d)
    else:
        scores = np.stack([np.stack([mm(scores_site(name), split[0][i, j], split[1][i, j], None) for j in range(heads)])
                           for i in range(b)]) / math.sqrt(d)  # fmt: skip
    if causal:
        scores = np.where(causal_mask(t), -np.inf, scores)
    p = softmax(scores)
    head_bias = [None if v_bias is None else v_bias[j * d : (j + 1) * d] for j in range(heads)]
    if mm is None:
        out = p @ split[2]
        if v_bias is not None:
            out = out + np.stack(head_bias)[None, :, None, :]
    else:
        out = np.stack([np.stack([mm(context_site(name), p[i, j], split[2][i, j].T, head_bias[j])
                                  for j in range(heads)]) for i in range(b)])  # fmt: skip
    return out.transpose(0, 2, 1, 3).reshape(b, t, h)


def _added(res: Residual, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """x + a @ w.T + b through `res`, a [..., K] and the stream x [..., N] flattened to rows and back."""
    return res(name, a.reshape(-1, a.shape[-1]), w, b, x.reshape(-1, x.shape[-1])).reshape(x.shape)


def vit_forward(
    w: Weights,
    images: np.ndarray,
    *,
    heads: int,
    patch: int,
    eps: float = 1e-12,
    hooks: Hooks = FLOAT,
) -> np.ndarray:
    """Logits [N, classes] for images [N, H, W] (one channel), float64, with its ops through `hooks`: every
    matmul (the patch embedding, the projections, QK^T and PV per image and head, the FFN, the
    classifier), each image's and head's attention, the FFN's first layer with its GELU, the output
    projection and the FFN's second layer with the residual add behind each, and the residual stream's
    first value (the patch embeddings, CLS token and positions summed). And each LayerNorm through hooks.norm."""
    run, act_run, res_run = hooks.matmul, hooks.activated_run(), hooks.residual_run()
    n, hh, ww = images.shape
    conv = _need(w, "vit.embeddings.patch_embeddings.projection.weight").astype(np.float64)  # [hidden, 1, p, p]
    hidden = conv.shape[0]
    patches = images.reshape(n, hh // patch, patch, ww // patch, patch).transpose(0, 1, 3, 2, 4)
    flat = patches.reshape(n * (hh // patch) * (ww // patch), patch * patch)
    x = run(
        Site("patch_embed", MatmulRole.EMBEDDING), flat, conv.reshape(hidden, -1),
        w["vit.embeddings.patch_embeddings.projection.bias"],
    )  # fmt: skip
    x = x.reshape(n, -1, hidden)
    cls = np.broadcast_to(_need(w, "vit.embeddings.cls_token"), (n, 1, hidden))
    x = np.concatenate([cls, x], 1) + w["vit.embeddings.position_embeddings"]
    x = hooks.stream("vit.embeddings", x)
    i = 0
    while f"vit.encoder.layer.{i}.layernorm_before.weight" in w:
        p = f"vit.encoder.layer.{i}."

        def lin(site: Site, y: np.ndarray) -> np.ndarray:
            bias = None if hooks.moves_bias(site) else w[site + ".bias"]
            flat = run(site, y.reshape(-1, y.shape[-1]), w[site + ".weight"], bias)
            return flat.reshape(*y.shape[:-1], -1)

        y = hooks.norm(p + "layernorm_before", x, w[p + "layernorm_before.weight"], w[p + "layernorm_before.bias"], eps)
        qkv = (
            lin(Site(f"{p}attention.attention.{m}", role, f"{p}attention.attention"), y)
            for m, role in (("query", MatmulRole.QUERY), ("key", MatmulRole.KEY), ("value", MatmulRole.VALUE))
        )
        v_bias = w[f"{p}attention.attention.value.bias"] if hooks.value_bias_in_context else None
        att = _attention(*qkv, heads, False, hooks.products(), f"{p}attention", hooks.attend, v_bias)
        name = Site(p + "attention.output.dense", MatmulRole.OUTPUT)
        x = _added(res_run, name, att, w[name + ".weight"], w[name + ".bias"], x)
        y = hooks.norm(p + "layernorm_after", x, w[p + "layernorm_after.weight"], w[p + "layernorm_after.bias"], eps)
        name = Site(p + "intermediate.dense", MatmulRole.FFN_UP, p + "intermediate.dense")
        flat = act_run(name, y.reshape(-1, y.shape[-1]), w[name + ".weight"], w[name + ".bias"], gelu_erf)
        name = Site(p + "output.dense", MatmulRole.FFN_DOWN)
        x = _added(res_run, name, flat, w[name + ".weight"], w[name + ".bias"], x)
        i += 1
    x = hooks.norm("vit.layernorm", x, w["vit.layernorm.weight"], w["vit.layernorm.bias"], eps)
    head = Site("classifier", MatmulRole.CLASSIFIER, "classifier")
    return run(head, x[:, 0], w["classifier.weight"], w["classifier.bias"])


def gpt2_forward(
    w: Weights,
    ids: np.ndarray,
    *,
    heads: int,
    eps: float = 1e-5,
    hooks: Hooks = FLOAT,
) -> np.ndarray:
    """Logits [B, T, vocab] for token ids [B, T], float64, with its ops through `hooks` as in vit_forward
    (the matmuls: the q, k and v projections, QK^T and PV per sequence and head, the output projection,
    the FFN, the tied LM head; the stream's first value: the token and position embeddings summed).
    each LayerNorm through hooks.norm."""
    run, act_run, res_run = hooks.matmul, hooks.activated_run(), hooks.residual_run()
    wte = _need(w, "transformer.wte.weight").astype(np.float64)
    t = ids.shape[1]
    x = wte[ids] + w["transformer.wpe.weight"][:t]
    x = hooks.stream("transformer.embeddings", x)
    i = 0
    while f"transformer.h.{i}.ln_1.weight" in w:
        p = f"transformer.h.{i}."

        y = hooks.norm(p + "ln_1", x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        # the fused QKV projection as three matmuls, each with its own output (as the mapper lowers q, k, v)
        wq, wk, wv = np.split(w[p + "attn.c_attn.weight"], 3, axis=1)
        bq, bk, bv = np.split(w[p + "attn.c_attn.bias"], 3)
        flat = y.reshape(-1, y.shape[-1])
        roles = (("q", MatmulRole.QUERY, wq, bq), ("k", MatmulRole.KEY, wk, bk), ("v", MatmulRole.VALUE, wv, bv))
        sites = [(Site(f"{p}attn.c_attn.{n}", role, f"{p}attn.c_attn"), wt, bt) for n, role, wt, bt in roles]
        q, k, v = (
            run(site, flat, wt.T, None if hooks.moves_bias(site) else bt).reshape(*y.shape[:-1], -1)
            for site, wt, bt in sites
        )
        att = _attention(q, k, v, heads, True, hooks.products(), f"{p}attn", hooks.attend,
                         bv if hooks.value_bias_in_context else None)  # fmt: skip
        name = Site(p + "attn.c_proj", MatmulRole.OUTPUT)
        x = _added(res_run, name, att, w[name + ".weight"].T, w[name + ".bias"], x)  # Conv1D weights: [in, out]
        y = hooks.norm(p + "ln_2", x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        name = Site(p + "mlp.c_fc", MatmulRole.FFN_UP, p + "mlp.c_fc")
        flat = act_run(name, y.reshape(-1, y.shape[-1]), w[name + ".weight"].T, w[name + ".bias"], gelu_tanh)
        name = Site(p + "mlp.c_proj", MatmulRole.FFN_DOWN)
        x = _added(res_run, name, flat, w[name + ".weight"].T, w[name + ".bias"], x)
        i += 1
    x = hooks.norm("transformer.ln_f", x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    head = Site("lm_head", MatmulRole.LM_HEAD)  # tied to the embedding table: no SmoothQuant group
    return run(head, x.reshape(-1, x.shape[-1]), wte, None).reshape(*x.shape[:-1], -1)
