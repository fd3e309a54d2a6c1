"""Accuracy of an INT8-quantized transformer block run through the bit-exact NVDLA functional model.

One encoder block of the model (QKV, per-head QK^T and PV, output projection, FFN) is run twice on the
same inputs: in float32 numpy (the reference), and with every matmul quantized to INT8 and executed by
nvdla_sim.run_conv (CMAC -> CACC -> SDP requantize, tiled by the plan the mapper picks). Softmax,
layernorm and GELU run in float32 on the dequantized values (their NVDLA LUT approximations are a
separate error source, not measured here). Errors are reported per matmul against the float32 value at
the same point of the reference block, so they accumulate through the block as they would in use. With
pruning, the reference keeps the dense weights: the error is pruning plus quantization.

Weights are seeded N(0, 0.02) (BERT initialisation); calibration inputs are the user's .npy ([N, seq,
hidden] or [seq, hidden]) or seeded N(0, 1) activations with a few outlier channels (x8), the feature
that makes per-channel scales and percentile clipping matter in real transformers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from nvdla_mapper.frontends.presets import ModelSpec
from nvdla_mapper.lowering.rules import (
    Fused,
    LoweringContext,
    Placement,
    matmul_layout,
    value_bias_in_context,
    value_transposed,
)
from nvdla_mapper.numerics import fp16_steps, layernorm_steps, lut_steps
from nvdla_mapper.numerics.accuracy_report import (
    SEEDED_CALIBRATION,
    AccuracyReport,
    LayerError,
    LmAccuracy,
    TaskAccuracy,
    TrainedAccuracy,
)
from nvdla_mapper.numerics.layernorm_steps import NormRange, merge, norm_range
from nvdla_mapper.numerics.quant import (
    QMAX,
    Calibration,
    Granularity,
    dequantize,
    quantize,
    requant_sdp,
    residual_sdp,
    scale_for,
)
from nvdla_mapper.numerics.reference import (
    Hooks,
    MatmulRole,
    Site,
    causal_mask,
    context_site,
    float_matmul,
    gelu_tanh,
    gpt2_forward,
    layernorm,
    role_of,
    scores_site,
    softmax,
    vit_forward,
)
from nvdla_mapper.numerics.sparsity import prune_2_4, prune_magnitude
from nvdla_mapper.options import NO_PRUNING, PruneKind, Pruning
from nvdla_mapper.passes import PassMemo, context_of, lower_op, new_memo
from nvdla_mapper.search.tiling_search import search_plan
from nvdla_mapper.studies.progress import Progress, quiet
from nvdla_mapper.workload import AttentionAttrs, MatmulAttrs, Op, OpKind
from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import run_conv
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import NvdlaError, UnsupportedError
from nvdla_sim.floats import FP16_OVERFLOW
from nvdla_sim.layers import ConvLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.units.sdp import SdpParams, sdp_apply


@dataclass(frozen=True)
class QuantSettings:
    granularity: Granularity = Granularity.PER_CHANNEL
    calibration: Calibration = field(default_factory=Calibration)
    dynamic: bool = False
    prune: Pruning = NO_PRUNING  # options.Pruning (its spelling "", "2:4", "magnitude:S" is parsed)
    # SmoothQuant's migration strength alpha (Xiao et al. 2023; 0: off, 0.5 their default): the matmuls
    # reading a LayerNorm output take X / s and W * s, s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), W the
    # weights of every matmul reading that output (smoothing_group)
    smooth: float = 0.0
    # the sites run in INT8 (site(); empty: all): the others stay float, to attribute the loss to its sources
    only: frozenset[str] = frozenset()
    # quantization-aware training: the name of a fine-tuned model in the trained directory
    # (validation/trained/qat.py: `<name>.npz` weights, `<name>.scales.json` learned activation scales),
    # run with those scales instead of calibrated ones
    learned: str = ""
    # pruning with fine-tuning: the name of the fine-tuned pruned weights in the trained directory
    # (validation/trained/prune_ft.py) the INT8 run uses; the float reference stays the dense model
    finetuned: str = ""
    # where the softmax runs, as the mapper's --softmax: auto (the mapper's choice for the build), nvdla
    # (SDP's LUT: numerics.lut_steps; needs a LUT), host (float)
    softmax: Placement = Placement.AUTO
    # where LayerNorm runs, as the mapper's --layernorm: auto (the mapper's choice: the host, float), nvdla
    # (its steps, numerics.layernorm_steps: the what-if on a build with the LUT and INT16), host. SmoothQuant's
    # and QAT's runs keep it on the host: their matmuls read the LayerNorm's output at scales of their own
    # (folded factors, learned scales), which one program writing one tensor does not give
    layernorm: Placement = Placement.AUTO
    # the precision the NVDLA run computes at (INT8; INT16 or FP16 on builds that have them); the
    # calibrated scales are INT8's, taken to INT16's 32,767 steps over the same range; FP16 has no scales
    precision: Precision = Precision.INT8

    def __post_init__(self) -> None:
        object.__setattr__(self, "softmax", Placement.parse(self.softmax, "softmax"))
        object.__setattr__(self, "prune", Pruning.parse(self.prune))
        object.__setattr__(self, "layernorm", Placement.parse(self.layernorm, "layernorm"))
        if self.precision is not Precision.INT8 and (self.learned or self.dynamic):
            raise NvdlaError("learned (QAT) and dynamic scales are runs at int8")
        fp16_knobs = self.smooth or self.only or Placement.NVDLA in (self.layernorm, self.softmax)
        if self.precision is Precision.FP16 and fp16_knobs:
            raise NvdlaError(
                "an fp16 run has no scales to smooth, runs every part at FP16 and LayerNorm and the softmax on "
                "the host: drop --smooth, --only, --layernorm nvdla and --softmax nvdla"
            )
        if self.layernorm is Placement.NVDLA and (self.smooth or self.learned):
            raise NvdlaError(
                "--layernorm nvdla with SmoothQuant or QAT scales: their matmuls read the LayerNorm at scales of their own; use --layernorm host"
            )
        unknown = sorted(set(self.only) - set(SITES))
        if unknown:
            raise NvdlaError(f"INT8-only parts {unknown} unknown; parts: {', '.join(SITES)}")

    def recipe(self) -> str:
        """The run's recipe in words, as the reports print it."""
        if self.precision is Precision.FP16:
            return "FP16 values, no scales" + (f", pruned {self.prune}" if self.prune else "")
        acts = "learned (QAT) scales" if self.learned else ("dynamic" if self.dynamic else f"static {self.calibration}")
        extra = [
            f"SmoothQuant alpha {self.smooth:g}" if self.smooth else "",
            f"pruned {self.prune}" if self.prune else "",
            f"fine-tuned {self.finetuned}" if self.finetuned else "",
            f"{self.precision.value} only in {','.join(s for s in SITES if s in self.only)}" if self.only else "",
            "softmax in SDP's LUT" if self.softmax is Placement.NVDLA else "",
            {Placement.HOST: "LayerNorm on the host", Placement.NVDLA: "LayerNorm in NVDLA's steps"}.get(
                self.layernorm, ""
            ),
        ]
        return ", ".join([f"{acts} activations, {self.granularity.value} weights", *(x for x in extra if x)])


# the parts of a model, to run some in INT8 and the rest float (QuantSettings.only): the matmuls by site(),
# the residual stream (written by the host's embeddings and by the residual adds the mapper fuses into the
# output projection's and the FFN's second layer's SDP, on every build), and the steps a build with a LUT
# runs on NVDLA (softmax: exp, row sums, 1/sum, normalisation; gelu: the FFN's LUT activation; layernorm:
# numerics.layernorm_steps)
MATMUL_SITES = ("embedding", "projection", "attention", "ffn", "head")
STREAM_SITE = "residual"
LUT_SITES = ("softmax", "gelu", "layernorm")
SITES = (*MATMUL_SITES, STREAM_SITE, *LUT_SITES)
# what else a LUT part needs to run on NVDLA
NEEDS = {
    "softmax": " and --softmax nvdla",
    "layernorm": " and INT16, at INT8, with --layernorm nvdla, without SmoothQuant or QAT scales",
}


# the part of the model each matmul role is in (QuantSettings.only, the attribution's groups)
_SITE_OF_ROLE = {
    MatmulRole.EMBEDDING: "embedding",
    MatmulRole.QUERY: "projection",
    MatmulRole.KEY: "projection",
    MatmulRole.VALUE: "projection",
    MatmulRole.OUTPUT: "projection",
    MatmulRole.SCORES: "attention",
    MatmulRole.CONTEXT: "attention",
    MatmulRole.FFN_UP: "ffn",
    MatmulRole.FFN_GATE: "ffn",
    MatmulRole.FFN_DOWN: "ffn",
    MatmulRole.CLASSIFIER: "head",
    MatmulRole.LM_HEAD: "head",
}


def site(name: str) -> str:
    """Which part of the model a matmul is, by the role its forward pass gave it (reference.Site): the
    patch embedding, a q/k/v/output projection, an attention product (QK^T, PV), an FFN layer, the
    classifier or LM head."""
    return _SITE_OF_ROLE[role_of(name)]


def smoothing_group(name: str) -> str | None:
    """The LayerNorm output a matmul reads, for SmoothQuant, or None where its division could not fold into
    a LayerNorm's gain at no cost (reference.Site.smoothing_group). The q, k and v projections read one
    LayerNorm output, so they share one group (one factor per channel: the gain holds one division); the
    first FFN layer and the ViT's classifier read their own. Not the output projection and the second FFN
    layer (they read the attention context and the GELU), and not the GPT's LM head: its matrix is also the
    token embedding table."""
    role_of(name)
    return name.smoothing_group


def prune(w: np.ndarray, spec: Pruning | str) -> np.ndarray:
    """Prune weights w[K, C] by `spec` (options.Pruning, or its spelling)."""
    spec = Pruning.parse(spec)
    if spec.kind is PruneKind.NONE:
        return w
    if spec.kind is PruneKind.TWO_FOUR:
        return prune_2_4(w)
    try:
        return prune_magnitude(w, spec.sparsity)
    except ValueError as e:
        raise NvdlaError(f"--prune {spec}: {e}") from None


def _errors(name: str, q: np.ndarray, ref: np.ndarray, sat: int) -> LayerError:
    d = q - ref
    nref = float(np.linalg.norm(ref)) or 1.0
    cos = float(np.dot(q.ravel(), ref.ravel()) / ((np.linalg.norm(q) * np.linalg.norm(ref)) or 1.0))
    return LayerError(name, float(np.max(np.abs(d))), float(np.linalg.norm(d)) / nref, cos, sat)


class _Block:
    """One block's weights and float32 forward pass, recording every matmul's input and output."""

    def __init__(self, hidden: int, heads: int, ffn: int, rng: np.random.Generator, prune_spec: str) -> None:
        self.h, self.heads, self.hd = hidden, heads, hidden // heads
        shapes = {
            "q": (hidden, hidden),
            "k": (hidden, hidden),
            "v": (hidden, hidden),
            "o": (hidden, hidden),
            "ffn1": (ffn, hidden),
            "ffn2": (hidden, ffn),
        }
        self.dense = {n: (rng.standard_normal(s) * 0.02).astype(np.float32) for n, s in shapes.items()}
        self.pruned = {n: prune(w, prune_spec) for n, w in self.dense.items()}
        self.b = {n: (rng.standard_normal(s[0]) * 0.02).astype(np.float32) for n, s in shapes.items()}

    def forward(self, x: np.ndarray, mm, *, dense: bool, v_bias_in_pv: bool = False) -> dict[str, np.ndarray]:
        """Run the block with `mm(name, a, w, b)` as the matmul (dense or pruned weights); returns every
        matmul output by name. `v_bias_in_pv`: V runs without its bias, which each head's PV adds
        (reference.Hooks.value_bias_in_context)."""
        self.w = self.dense if dense else self.pruned
        outs: dict[str, np.ndarray] = {}

        def run(name, a, w, b=None):
            outs[name] = mm(name, a, w, b)
            return outs[name]

        qkv = (("q", MatmulRole.QUERY), ("k", MatmulRole.KEY), ("v", MatmulRole.VALUE))
        moved = {"v"} if v_bias_in_pv else set()
        q, k, v = (run(Site(n, role, "qkv"), x, self.w[n], None if n in moved else self.b[n]) for n, role in qkv)
        ctx = np.zeros_like(q)
        for hh in range(self.heads):
            sl = slice(hh * self.hd, (hh + 1) * self.hd)
            scores = run(Site(f"qk.h{hh}", MatmulRole.SCORES), q[:, sl], k[:, sl]) / math.sqrt(self.hd)
            pv_bias = self.b["v"][sl] if v_bias_in_pv else None
            ctx[:, sl] = run(Site(f"pv.h{hh}", MatmulRole.CONTEXT), softmax(scores), v[:, sl].T, pv_bias)
        x1 = layernorm(x + run(Site("o", MatmulRole.OUTPUT), ctx, self.w["o"], self.b["o"]))
        f = gelu_tanh(run(Site("ffn1", MatmulRole.FFN_UP, "ffn1"), x1, self.w["ffn1"], self.b["ffn1"]))
        outs["block_out"] = layernorm(x1 + run(Site("ffn2", MatmulRole.FFN_DOWN), f, self.w["ffn2"], self.b["ffn2"]))
        return outs


def calibration_inputs(path: str | Path | None, *, seq: int, hidden: int, samples: int, rng) -> np.ndarray:
    if path is None:
        x = rng.standard_normal((samples, seq, hidden)).astype(np.float32)
        outliers = rng.choice(hidden, size=max(1, hidden // 64), replace=False)
        x[:, :, outliers] *= 8
        return x
    p = Path(path)
    x = load_calibration(p)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[2] != hidden:
        raise NvdlaError(f"{p}: calibration data must be [N, seq, {hidden}] (or [seq, {hidden}]), not {list(x.shape)}")
    return x.astype(np.float32)


def load_calibration(p: Path) -> np.ndarray:
    """A .npy file of calibration activations, as numbers; one-line errors for a file that is not one or
    holds NaN or inf."""
    try:
        x = np.load(p, allow_pickle=False)
    except OSError as e:
        raise NvdlaError(f"{p}: cannot load calibration data ({e.strerror or e})") from None
    except (ValueError, EOFError) as e:
        why = "not a .npy array file" if "pickle" in str(e) or isinstance(e, EOFError) else str(e)
        raise NvdlaError(f"{p}: cannot load calibration data ({why})") from None
    if not np.issubdtype(x.dtype, np.number) or not np.isfinite(x).all():
        raise NvdlaError(f"{p}: calibration data must be finite numbers (it holds NaN, inf or non-numbers)")
    return x


def activation_operand(name: str) -> bool:
    """Whether a matmul's second operand is an activation, not a weight: the attention products (QK^T's
    keys, PV's values). On NVDLA that operand is the INT8 output of the K (or V) projection's SDP, read as
    kernels: its scale is a calibrated activation scale (static recipes), not one taken from the tensor."""
    return role_of(name).attention_product


def probability_input(name: str) -> bool:
    """Whether a matmul's input is the softmax's probabilities (PV): their range is [0, 1] by construction,
    so every recipe quantizes them at amax 1 (as explicitly quantized INT8 BERT does), not at a calibrated
    range: entropy calibration puts the threshold of these peaked distributions at 1/16 and saturates every
    probability above it (measured on the character GPT: held-out perplexity 6.95 -> 43.2 on 4 windows)."""
    return role_of(name) is MatmulRole.CONTEXT


@dataclass(frozen=True)
class Scales:
    """Static per-tensor activation scales by matmul name: its input, its output, and (attention
    products) its activation operand; and SmoothQuant's per-input-channel factors where it applies."""

    inputs: dict[str, float]
    outputs: dict[str, float]
    operands: dict[str, float]
    smooth: dict[str, np.ndarray] = field(default_factory=dict)
    # the LUT steps' scales: by `<attention>.<step>` the softmax's (exp, rowsum, recip, unnormalized: PV's
    # output before the 1/sum), calibrated by max whatever the recipe (they are one op's insides), and by
    # `<matmul>.act` the output of a matmul's activation (the next matmul's input: the recipe's scale);
    # the residual stream's by `<embeddings>.stream` and `<matmul>.stream` (the host's first value, each
    # fused add's sum: tensors in memory, the recipe's scale)
    steps: dict[str, float] = field(default_factory=dict)
    # each LayerNorm's calibrated range (its input's largest deviation, its rows' variances) by name, for its
    # steps on NVDLA (numerics.layernorm_steps); its input and output scales are steps' `<name>.in`, `.out`
    norms: dict[str, NormRange] = field(default_factory=dict)


def _calibrated_scales(
    forward, settings: QuantSettings, *, steps_too: bool = True, v_bias_in_pv: bool = False
) -> Scales:
    """Per-tensor activation scales of every matmul's input and output, and of the attention products'
    activation operands, by name, from `forward(hooks)` run in float over the calibration data (a name seen
    several times, as attention products of every head and image, is one site), and the LUT steps' scales
    (Scales.steps: the maxima of the float values at those steps). With SmoothQuant, the LayerNorm-fed
    inputs' factors come from their per-channel maxima, and their scales are the smoothed inputs'. Without
    `steps_too` (a build without SDP's LUT) the softmax and GELU run in float and no step is recorded.
    `v_bias_in_pv`: the forward moves V's bias to PV, as the run's program does (_moves_v_bias); the host
    then normalises, and the softmax's steps are not recorded."""
    seen: tuple[dict[str, list[np.ndarray]], ...] = ({}, {}, {})
    weights: dict[str, np.ndarray] = {}
    steps: dict[str, float] = {}

    def record(name, a, w, b):
        y = float_matmul(name, a, w, b)
        for d, v in zip(seen, (a, y, w if activation_operand(name) else None), strict=True):
            if v is not None:
                d.setdefault(name, []).append(v.reshape(-1, v.shape[-1]))
        weights[name] = w
        return y

    def peak(name: str, v: np.ndarray) -> None:
        steps[name] = max(steps.get(name, 0.0), float(np.max(np.abs(v))) if v.size else 0.0)

    def attend(name, q, k, v, causal):  # the mapper's softmax steps in float, beside QK^T and PV recorded
        z = record(scores_site(name), q, k, None) / math.sqrt(q.shape[1])
        mask = causal_mask(*z.shape) if causal else np.zeros(z.shape, bool)
        e = np.where(mask, 0.0, np.exp(np.where(mask, 0.0, z)))
        sums = e.sum(-1, keepdims=True)
        for step, val in (("exp", e), ("rowsum", sums), ("recip", 1 / sums), ("unnormalized", e @ v)):
            peak(f"{name}.{step}", val)
        return record(context_site(name), softmax(np.where(mask, -np.inf, z)), v.T, None)

    acts: dict[str, list[np.ndarray]] = {}
    streams: dict[str, list[np.ndarray]] = {}

    def activated(name, a, w, b, act):
        y = act(record(name, a, w, b))
        acts.setdefault(name, []).append(y)
        return y

    def embedded(name, x):
        streams.setdefault(name, []).append(x.reshape(-1, x.shape[-1]))
        return x

    def residual(name, a, w, b, x):
        y = x + record(name, a, w, b)
        streams.setdefault(name, []).append(y)
        return y

    norm_in: dict[str, list[np.ndarray]] = {}
    norm_out: dict[str, list[np.ndarray]] = {}
    norms: dict[str, NormRange] = {}

    def normalized(name, x, g, b, eps):
        flat = x.reshape(-1, x.shape[-1])
        y = layernorm(flat, g, b, eps)
        norms[name] = merge(norms.get(name), norm_range(flat))
        norm_in.setdefault(name, []).append(flat)
        norm_out.setdefault(name, []).append(y)
        return y.reshape(x.shape)

    luts = (None if v_bias_in_pv else attend, activated) if steps_too else (None, None)
    forward(Hooks(record, *luts, residual, embedded, normalized if steps_too else None,
                  value_bias_in_context=v_bias_in_pv))  # fmt: skip
    cal = settings.calibration
    smooth: dict[str, np.ndarray] = {}
    if settings.smooth:  # one factor per input channel and LayerNorm output, over the weights that read it
        alpha = settings.smooth
        groups: dict[str, list[str]] = {}
        for n in seen[0]:
            g = smoothing_group(n)
            if g is not None:
                groups.setdefault(g, []).append(n)
        for names in groups.values():
            x_max = np.maximum(np.abs(np.concatenate(seen[0][names[0]])).max(0), 1e-5)
            w_max = np.maximum(np.abs(np.concatenate([weights[n] for n in names])).max(0), 1e-5)
            for n in names:
                smooth[n] = x_max**alpha / w_max ** (1 - alpha)

    def scale(name: str, parts: list[np.ndarray], s: np.ndarray | float = 1.0) -> float:
        return float(scale_for(cal.amax(np.concatenate([(x / s).ravel() for x in parts]))))

    inputs = {n: scale(n, v, smooth.get(n, 1.0)) for n, v in seen[0].items()}
    outputs, operands = ({n: scale(n, v) for n, v in d.items()} for d in seen[1:])
    maxima = {n: float(scale_for(max(v, 1e-12))) for n, v in steps.items()}
    # an activation's output is the next matmul's input: the same values, the recipe's scale; so is the stream
    made = {f"{n}.act": scale(n, v) for n, v in acts.items()} | {f"{n}.stream": scale(n, v) for n, v in streams.items()}
    made |= {f"{n}.in": scale(n, v) for n, v in norm_in.items()} | {
        f"{n}.out": scale(n, v) for n, v in norm_out.items()
    }
    return Scales(inputs, outputs, operands, smooth, maxima | made, norms)


def load_scales(path: str | Path) -> Scales:
    """Learned activation scales ({"inputs", "outputs", "operands"}: name -> scale), one-line errors."""
    import json

    try:
        d = json.loads(Path(path).read_text())
        scales = Scales(*({str(k): float(v) for k, v in d[part].items()} for part in ("inputs", "outputs", "operands")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise NvdlaError(f"{path}: not a scales file of inputs, outputs and operands ({e})") from None
    if any(
        v <= 0 or not math.isfinite(v)
        for part in (scales.inputs, scales.outputs, scales.operands)
        for v in part.values()
    ):
        raise NvdlaError(f"{path}: every scale must be a positive number")
    return scales


def _pruned(hooks: Hooks, spec: Pruning) -> Hooks:
    """Hooks whose static weights are pruned by `spec` (prune(); "" leaves them as they are): every
    matmul with model weights but a tied LM head, whose matrix is also the token embedding table. One set
    serves one model's weights (a name's matrix is pruned once)."""
    if not spec:
        return hooks
    done: dict[str, np.ndarray] = {}  # one model's weights: each matrix pruned once (greedy calls every step)

    def weights(name: str, w: np.ndarray) -> np.ndarray:
        if activation_operand(name) or role_of(name) is MatmulRole.LM_HEAD:
            return w
        if name not in done:
            done[name] = prune(w, spec)
        return done[name]

    act, res = hooks.activated, hooks.residual
    return replace(
        hooks,
        matmul=lambda name, a, w, b: hooks.matmul(name, a, weights(name, w), b),
        activated=None if act is None else lambda name, a, w, b, f: act(name, a, weights(name, w), b, f),
        residual=None if res is None else lambda name, a, w, b, x: res(name, a, weights(name, w), b, x),
    )


def _static(scales: dict[str, float], name: str, what: str) -> float:
    if name not in scales:
        raise NvdlaError(f"no static {what} scale for matmul {name!r}: the scales were made for another model")
    return scales[name]


@dataclass(frozen=True, eq=False)
class LayerRun:
    """One matmul of an INT8 forward as NVDLA ran it: the hardware layer and the mapper's plan for it, its
    INT8 operands in the layer's layout (data [H, W, C], kernels [K, 1, 1, C]), its SDP numbers and its
    INT8 output [H, W, K] (what validation/nvdla_rtl/classifier_programs.py runs on the RTL)."""

    name: str
    layer: ConvLayer
    plan: TilePlan
    data: np.ndarray
    kernels: np.ndarray
    sdp: SdpParams
    output: np.ndarray
    truncate: int = 0  # CACC's clip_truncate (INT16 runs)


def _run_context(hw: HwConfig, settings: QuantSettings) -> LoweringContext:
    """The lowering context a forward through NVDLA's datapath runs its ops under, as the mapper would map
    the model with these options: at FP16 the softmax and LayerNorm the host's (_Fp16Run); SmoothQuant's and
    QAT's runs keep LayerNorm on the host (QuantSettings.layernorm)."""
    p = settings.precision
    if p is Precision.FP16:
        return LoweringContext.of(hw=hw, precision=p)
    layernorm = Placement.HOST if settings.smooth or settings.learned else settings.layernorm
    return LoweringContext.of(
        hw=hw, precision=p, softmax=settings.softmax, layernorm=layernorm, requant=settings.granularity
    )


def _moves_v_bias(hw: HwConfig, settings: QuantSettings) -> bool:
    """Whether the mapper's program adds V's bias in PV for this run (Hooks.value_bias_in_context): what
    the calibration's forwards must do too, so that V's scale is calibrated on what V's layer writes."""
    return value_bias_in_context(_run_context(hw, settings))


def _lowered_pieces(
    site: Site, a: np.ndarray, w: np.ndarray, memo: PassMemo, *, bias: bool, fused: Fused | None = None,
    causal: bool = False,
) -> tuple[ProductPiece, ...]:  # fmt: skip
    """The mapper's product layers for `site`, a [m, k] times w [n, k] (its op's shape; V's on a build with
    BDMA compute V^T), under `fused` (what the fusion pass folds into its SDP: mapper_pieces), lowered once
    per op under the run's memo (every head and sequence of a site is the same op)."""
    op = _study_op(site, a.shape[0], a.shape[1], w.shape[0], bias=bias, causal=causal)
    return mapper_pieces(op, fused or Fused(), context_of(memo), memo)


def _lut_build(hw: HwConfig) -> bool:
    """Whether `hw` has SDP's LUT and element-wise unit (the mapper's test for its LUT steps)."""
    return LoweringContext.of(hw=hw, precision=Precision.INT8).has_lut


def _run_pieces(
    name: str,
    a: np.ndarray,
    w: np.ndarray,
    params: SdpParams | None,
    hw: HwConfig,
    ctx: LoweringContext,
    truncate: int,
    pieces: tuple[ProductPiece, ...] | None,
) -> tuple[np.ndarray, int, list[LayerRun]]:
    """a [m, k] times w [n, k], codes or FP16 values at ctx's precision, on the bit-exact datapath as the
    mapper's `pieces` (mapper_pieces: each on its rows of a, its kernels of w and its window of the SDP
    numbers), or as one layer of the study's own (None: laid out as the mapper lays out a matmul, timed as
    its numbers program it), each tiled by the mapper's search, CACC truncating `truncate` bits, through SDP
    `params` (None: the raw accumulator): ([m, n], SDP's saturations, the runs as LayerRuns)."""
    p = ctx.precision
    if pieces is None:
        spec = params.timing_view(p) if params is not None else SdpSpec()
        own = ConvLayer(name, matmul_layout(a.shape[0], a.shape[1], w.shape[0], ctx), p, spec)
        pieces = (ProductPiece(own, 0, 0),)
    out: np.ndarray | None = None
    sat, runs = 0, []
    for piece in pieces:
        layer, s = piece.layer, piece.layer.shape
        x, kernels = a[piece.rows], w[piece.columns]
        if (s.in_w * s.in_h, s.in_c, s.out_k) != (*x.shape, kernels.shape[0]) or layer.precision is not p:
            raise NvdlaError(
                f"{name}: the mapper's layer is {s.in_w * s.in_h} x {s.in_c} x {s.out_k} at {layer.precision.value}, "
                f"the study's piece {x.shape[0]} x {x.shape[1]} x {kernels.shape[0]} at {p.value}"
            )
        window = None if params is None else params.window(piece.rows, piece.columns)
        plan = search_plan(layer, hw).plan
        x3 = x.astype(p.numpy_dtype).reshape(s.in_h, s.in_w, s.in_c)
        w4 = kernels.astype(p.numpy_dtype).reshape(s.out_k, 1, 1, s.in_c)
        y, n = run_conv(layer, x3, w4, hw, plan, sdp_params=window, truncate=truncate)
        if out is None:
            out = np.empty((a.shape[0], w.shape[0]), y.dtype)
        out[piece.rows, piece.columns] = y.reshape(x.shape[0], -1)
        sat, runs = sat + n, [*runs, LayerRun(name, layer, plan, x3, w4, window, y, truncate)]
    return out, sat, runs


def _study_op(site: Site, m: int, k: int, n: int, *, bias: bool, causal: bool) -> Op:
    """The op the mapper's front end builds for a matmul site of the reference forward: a linear layer with
    its role, or one sequence's and head's QK^T (scaled by 1/sqrt(d), as the reference's scores are) or PV."""
    role = role_of(site)
    if role is MatmulRole.SCORES:
        return Op(site, OpKind.ATTN_SCORES, m, n, k=k, attrs=AttentionAttrs(causal=causal, scale=1 / math.sqrt(k)))
    if role is MatmulRole.CONTEXT:  # `bias`: V's, which PV adds where V is computed transposed
        return Op(site, OpKind.ATTN_CONTEXT, m, n, k=k, attrs=AttentionAttrs(causal=causal, value_bias=bias))
    attrs = MatmulAttrs(bias=bias, feeds_context=role is MatmulRole.VALUE, role=role)
    return Op(site, OpKind.MATMUL, m, n, k=k, attrs=attrs)


@dataclass(frozen=True)
class ProductPiece:
    """One hardware layer of a product as the mapper lowers it, and the rows and output columns of the
    product it computes (lowering.rules.Task.piece)."""

    layer: ConvLayer
    row: int
    column: int

    @property
    def rows(self) -> slice:
        return slice(self.row, self.row + self.layer.shape.in_w * self.layer.shape.in_h)

    @property
    def columns(self) -> slice:
        return slice(self.column, self.column + self.layer.shape.out_k)


def mapper_pieces(op: Op, fused: Fused, ctx: LoweringContext, memo: PassMemo | None = None) -> tuple[ProductPiece, ...]:
    """The hardware layers the mapper's pipeline lowers `op`'s product to (passes.lower_op under `fused`, what
    the fusion pass folds into its SDP), each with the rows and columns it computes: not the re-layouts,
    conversions or a softmax's steps around it. A one-line error where the product has partial sums (a
    reduction past 8,192 channels) or skips a part (a causal band's masked keys), which the study does not
    run. The study's matmul hook does not know a product is causal (the reference masks after it), so there
    it asks for the whole product, whose unmasked part has the banded layers' numbers."""
    tasks = [t for t in lower_op(op, replace(ctx, fused={op.name: fused}), memo) if t.piece is not None]
    what = f"{op.name}: the mapper lowers this {op.m} x {op.k} x {op.n} product"
    if any(not isinstance(t.layer, ConvLayer) or t.piece[2] for t in tasks):
        raise UnsupportedError(f"{what} with partial sums over its channels; the accuracy study runs whole sums")
    pieces = tuple(ProductPiece(t.layer, t.piece[0], t.piece[1]) for t in tasks)
    transposed = op.kind is OpKind.MATMUL and op.attrs.feeds_context and value_transposed(ctx)
    rows, cols = (op.n, op.m) if transposed else (op.m, op.n)
    if sum(p.layer.shape.in_w * p.layer.shape.in_h * p.layer.shape.out_k for p in pieces) != rows * cols:
        raise UnsupportedError(f"{what} in pieces that leave part of it out (causal bands); the study runs all")
    return pieces


class _NvdlaRun:
    """A forward's ops through NVDLA's integer datapath on `hw` at settings.precision (INT8 or INT16), each
    as the mapper lowers it there.

    Matmuls: the operands quantized (activations per tensor, static from `scales` or dynamic, the attention
    products' activation operand likewise, the softmax's probabilities at their range [0, 1]; weights per
    channel where the layer has a bias and settings ask for it), the product run by run_conv on the
    bit-exact CMAC -> CACC -> SDP model in the layout and tiling the mapper picks, requantized to INT8 by
    SDP, and dequantized. On a build with SDP's LUT and element-wise unit the FFN's GELU runs in the LUT
    of its first layer's SDP, and with settings.softmax "nvdla" each head's attention runs the mapper's
    softmax steps (numerics.lut_steps); otherwise the softmax and GELU are the host's (float), as the
    mapper's "auto" softmax is on every build. The residual stream is in memory at the run's precision,
    as the mapper keeps it on every build: the host writes the embeddings' sum, and each residual add runs
    in the SDP of the matmul before it (quant.residual_sdp: through the element-wise unit where the build
    has one, else through X2), its sum written at the stream's next scale. Saturations are counted into
    `sats` by name; each matmul with a weight or an activation operand of the forward (not the LUT
    softmax's QK^T, row sums and broadcasts) is appended to `record` when given."""

    def __init__(
        self,
        hw: HwConfig,
        settings: QuantSettings,
        scales: Scales,
        sats: dict[str, int],
        record: list[LayerRun] | None = None,
    ) -> None:
        self.hw, self.settings, self.scales, self.sats, self.record = hw, settings, scales, sats, record
        self.precision = p = settings.precision
        if p not in hw.precisions:
            raise NvdlaError(f"{hw.name} has no {p.value} datapath")
        self.ctx = _run_context(hw, settings)
        self.memo = new_memo(hw, self.ctx.options)  # each site's op lowered once (passes.PassMemo)
        # V computed transposed (the mapper's program on a build with BDMA): its bias added by PV where the
        # host normalises (the forward moves it there), per element by V^T's SDP where SDP's LUT does
        self.transposed_v = value_transposed(self.ctx)
        self.rescale = QMAX[Precision.INT8] / QMAX[p]  # calibrated (INT8) scales to this precision's steps
        self.lut_softmax = self.ctx.mode("softmax") is Placement.NVDLA
        self.lut_gelu = self.ctx.has_lut
        self.lut_layernorm = self.ctx.mode("layernorm") is Placement.NVDLA
        self.stream: float | None = None  # the scale the residual stream was last written at
        for part, on in (("softmax", self.lut_softmax), ("gelu", self.lut_gelu), ("layernorm", self.lut_layernorm)):
            if part in settings.only and not on:
                raise NvdlaError(
                    f"--only part {part!r}: the {part} runs on the host on {hw.name} (float); it is an NVDLA "
                    f"part only on a build with SDP's LUT{NEEDS.get(part, '')}"
                )

    def hooks(self) -> Hooks:
        stream = self._quantized(STREAM_SITE)
        return Hooks(
            self.matmul,
            self.attend if self.lut_softmax and self._quantized("softmax") else None,
            self.activated if self.lut_gelu and self._quantized("gelu") else None,
            self.residual if stream else None,
            self.embedded if stream else None,
            self.normalized if self.lut_layernorm and self._quantized("layernorm") else None,
            value_bias_in_context=value_bias_in_context(self.ctx),
        )

    def _quantized(self, part: str) -> bool:
        return not self.settings.only or part in self.settings.only

    def _count(self, name: str, sat: int) -> None:
        self.sats[name] = self.sats.get(name, 0) + sat

    def _operands(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, s_x: float | None = None):
        """(quantized a, quantized w, s_x, s_w per output, whether per channel): a at `s_x` when given."""
        cal, scales = self.settings.calibration, self.scales
        if name in scales.smooth:  # SmoothQuant: the division folded into the LayerNorm, the product into W
            a, w = a / scales.smooth[name], w * scales.smooth[name]
        if s_x is None:
            if probability_input(name):
                s_x = float(scale_for(1.0, self.precision))
            elif self.settings.dynamic:
                s_x = float(scale_for(cal.amax(a)))
            else:
                s_x = _static(scales.inputs, name, "input") * self.rescale
        # weights with a bias per channel where the recipe says so; activations (and the attention products'
        # second operand, PV's with V's bias moved in) per tensor
        per_ch = self.settings.granularity is Granularity.PER_CHANNEL and b is not None and not activation_operand(name)
        if activation_operand(name):
            if self.settings.dynamic:
                s_op = float(scale_for(cal.amax(w)))
            else:
                s_op = _static(scales.operands, name, "operand") * self.rescale
            s_w = np.full(w.shape[0], s_op)
        elif per_ch:
            s_w = scale_for(cal.weight_amax(w, axis=0), self.precision)
        else:
            s_w = np.full(w.shape[0], float(scale_for(cal.weight_amax(w), self.precision)))
        p = self.precision
        return quantize(a, s_x, p), quantize(w, s_w[:, None], p), s_x, s_w, per_ch

    def truncate(self, qw: np.ndarray, bias_steps: np.ndarray | None = None) -> int:
        """CACC's right shift (clip_truncate) before SDP: none at INT8; at INT16 the bits beyond SDP's 32
        that the worst output needs, any input (32,768 x sum |w| over a kernel's channels in the 48-bit
        accumulator) plus the bias the X1 stage adds (`bias_steps`: |bias| in accumulator steps, per
        kernel), so neither CACC nor SDP's X stages saturate. The SDP's scales count it (2**truncate per
        accumulator step)."""
        if self.precision is not Precision.INT16:
            return 0
        worst = (QMAX[self.precision] + 1) * np.abs(qw.astype(np.int64)).sum(axis=1).astype(np.float64)
        if bias_steps is not None:
            worst = worst + np.abs(bias_steps)
        return max(0, math.ceil(math.log2(float(worst.max()) + 1)) - 31)

    @staticmethod
    def _bias_steps(b: np.ndarray | None, s_x: float, s_w: np.ndarray) -> np.ndarray | None:
        return None if b is None else np.asarray(b, np.float64) / (s_x * s_w)

    def _conv(
        self,
        name: str,
        qa: np.ndarray,
        qw: np.ndarray,
        params: SdpParams | None,
        *,
        keep: bool = True,
        truncate: int = 0,
        precision: Precision | None = None,
        pieces: tuple[ProductPiece, ...] | None = None,
    ):
        """a [m, k] times w [n, k] on the datapath at the run's precision (or `precision`) as the mapper's
        `pieces` (None: a step of the study's own, _run_pieces), tiled by the mapper's search, CACC
        truncating `truncate` bits, through SDP `params` (None: the raw accumulator): [m, n]; saturations
        counted, the runs recorded (`keep`)."""
        p = precision or self.precision
        ctx = self.ctx if p is self.precision else self.ctx.at_precision(p)
        y, sat, runs = _run_pieces(name, qa, qw, params, self.hw, ctx, truncate, pieces)
        if params is not None:
            self._count(name, sat)
            if keep and self.record is not None:
                self.record.extend(runs)
        return y

    def _real(self, name: str, qa, qw, s_x: float, s_w: np.ndarray, b) -> np.ndarray:
        """The product's real value from the raw accumulator (dynamic scales take their range from it)."""
        t = self.truncate(qw)
        return dequantize(self._conv(name, qa, qw, None, truncate=t), s_x * 2**t * s_w) + (b if b is not None else 0)

    def matmul(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        if not self._quantized(site(name)):
            return float_matmul(name, a, w, b)
        if role_of(name) is MatmulRole.VALUE and self.transposed_v:
            return self._transposed_value(name, a, w, b)
        qa, qw, s_x, s_w, per_ch = self._operands(name, a, w, b)
        if self.settings.dynamic:
            s_y = float(scale_for(self.settings.calibration.amax(self._real(name, qa, qw, s_x, s_w, b))))
        else:
            s_y = _static(self.scales.outputs, name, "output") * self.rescale
        t = self.truncate(qw, self._bias_steps(b, s_x, s_w))
        params = requant_sdp(
            s_x * 2**t, s_w, s_y, bias=b,
            granularity=Granularity.PER_CHANNEL if per_ch else Granularity.PER_TENSOR, out_precision=self.precision,
        )  # fmt: skip
        pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None)
        return dequantize(self._conv(name, qa, qw, params, truncate=t, pieces=pieces), s_y)

    def _transposed_value(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        """V = a w^T + b as the mapper runs it on a build with BDMA (lowering.rules.lower_matmul): V^T = W_v
        X^T, the weights the data cube (one scale: a data cube has no per-row scale) and the tokens the
        kernels, requantized per tensor; its bias per element in V^T's X1 (where SDP's LUT normalises: the
        forward passes it here), else added by PV (the forward passes none). V, transposed back."""
        qx, qw, s_x, s_w, _ = self._operands(name, a, w, None)  # per tensor: W's rows are V^T's pixels
        s_acc = s_x * float(s_w[0])
        if self.settings.dynamic:  # V's range from its value (the product's, its bias wherever added)
            real = self._real(name, qx, qw, s_x, s_w, b)
            s_y = float(scale_for(self.settings.calibration.amax(real)))
        else:
            s_y = _static(self.scales.outputs, name, "output") * self.rescale
        bias = None if b is None else np.broadcast_to(np.asarray(b, np.float64)[:, None], (w.shape[0], a.shape[0]))
        t = self.truncate(qx, None if bias is None else np.abs(bias).max(axis=0) / s_acc)
        params = requant_sdp(
            s_acc * 2**t, np.ones(a.shape[0]), s_y, bias=bias, granularity=Granularity.PER_TENSOR,
            out_precision=self.precision,
        )  # fmt: skip
        pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None or value_bias_in_context(self.ctx))
        return dequantize(self._conv(name, qw, qx, params, truncate=t, pieces=pieces), s_y).T

    def activated(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, act) -> np.ndarray:
        """A matmul and its activation in the LUT of its SDP (lut_steps.activated_conv_sdp), written as INT8
        at the activation output's scale; with the matmul float (attribution), its float output through the
        same table."""
        cal, dynamic = self.settings.calibration, self.settings.dynamic
        if self._quantized(site(name)):
            qa, qw, s_x, s_w, per_ch = self._operands(name, a, w, b)
            real = self._real(name, qa, qw, s_x, s_w, b) if dynamic else None
        else:
            real = float_matmul(name, a, w, b)
        p = self.precision
        pre = float(cal.amax(real)) if dynamic else _static(self.scales.outputs, name, "output") * QMAX[Precision.INT8]
        if dynamic:
            out = float(scale_for(cal.amax(act(real))))
        else:
            out = _static(self.scales.steps, f"{name}.act", "GELU") * self.rescale
        table = lut_steps.gelu_table(act, pre, input_codes=lut_steps.GELU_FINER * (QMAX[p] + 1))
        if self._quantized(site(name)):
            t = self.truncate(qw, self._bias_steps(b, s_x, s_w))
            params = lut_steps.activated_conv_sdp(
                s_x * 2**t, s_w, out, table, bias=b, out_precision=p,
                granularity=Granularity.PER_CHANNEL if per_ch else Granularity.PER_TENSOR,
            )  # fmt: skip
            pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None, fused=Fused(activation=OpKind.GELU))
            return dequantize(self._conv(name, qa, qw, params, truncate=t, pieces=pieces), out)
        codes = np.clip(np.round(real / table.pre_scale), -(2**31), 2**31 - 1).astype(np.int64)
        return dequantize(self._sdp(name, codes, lut_steps.table_pass(table, out, out_precision=p)), out)

    def _stream_scale(self, name: str, real: np.ndarray | None) -> float:
        """The scale the residual stream is written at after `name` (dynamic: from its value `real`)."""
        if self.settings.dynamic:
            return float(scale_for(self.settings.calibration.amax(real), self.precision))
        return _static(self.scales.steps, f"{name}.stream", "residual stream") * self.rescale

    def _written(self, name: str, real: np.ndarray, s: float) -> np.ndarray:
        """`real` written at the run's precision at scale `s` (the host, or SDP's convertor on a float
        sum), saturations counted."""
        q, top = quantize(real, s, self.precision), QMAX[self.precision]
        v = real / s  # saturated where the rounding leaves -top-1..top
        self._count(name, int(np.count_nonzero((v >= top + 0.5) | (v <= -top - 1.5))))
        self.stream = s
        return dequantize(q, s)

    def embedded(self, name: str, x: np.ndarray) -> np.ndarray:
        """The residual stream's first value as the host writes it into memory."""
        return self._written(name, x, self._stream_scale(name, x))

    def residual(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        """A matmul with the residual add in its SDP (quant.residual_sdp): the stream x read at the scale
        it was written at, the sum written at the stream's next scale; with the matmul float
        (attribution), the float sum written there."""
        if self.stream is None:
            raise NvdlaError(f"{name}: a residual add before the stream's first value was written")
        s_r, p = self.stream, self.precision
        qx = quantize(x, s_r, p)  # the stream as written: x is on its grid
        if not self._quantized(site(name)):
            real = float_matmul(name, a, w, b) + dequantize(qx, s_r)
            return self._written(name, real, self._stream_scale(name, real))
        qa, qw, s_x, s_w, _ = self._operands(name, a, w, b)
        real = self._real(name, qa, qw, s_x, s_w, b) + dequantize(qx, s_r) if self.settings.dynamic else None
        s_y = self._stream_scale(name, real)
        t = self.truncate(qw, self._bias_steps(b, s_x, s_w))
        try:
            params = residual_sdp(s_x * 2**t, s_w, s_y, qx, s_r, bias=b, eltwise_unit=self.ctx.has_ew, precision=p)
        except ValueError as e:
            raise UnsupportedError(f"{name}: the fused residual add cannot be programmed: {e}") from None
        pieces = _lowered_pieces(
            name, a, w, self.memo, bias=b is not None, fused=Fused(residual=True, residual_input="stream")
        )
        out = self._conv(name, qa, qw, params, truncate=t, pieces=pieces)
        self.stream = s_y
        return dequantize(out, s_y)

    def attend(self, name: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
        """One head's attention with the mapper's softmax steps on a LUT build (numerics.lut_steps): QK^T's
        SDP writing INT8 scores with the causal mask, exp through the LUT, the row sums (a ones kernel),
        1/sum through the LUT, PV on the unnormalised exps, the 1/sum broadcast (ones kernels) and
        multiplied in. With the attention products float (attribution), their float values meet the same
        steps."""
        steps, dynamic, cal = self.scales.steps, self.settings.dynamic, self.settings.calibration
        qk, pv = scores_site(name), context_site(name)
        d = q.shape[1]
        mask = causal_mask(q.shape[0], k.shape[0]) if causal else np.zeros((q.shape[0], k.shape[0]), bool)
        int8_products = self._quantized("attention")
        # QK^T: INT8 scores, the mask added by its SDP (Y stage) before the convertor saturates them
        if int8_products:
            qa, qw, s_x, s_w, _ = self._operands(qk, q, k, None)
            s_qk = (
                float(scale_for(cal.amax(self._real(qk, qa, qw, s_x, s_w, None))))
                if dynamic
                else _static(self.scales.outputs, qk, "output")
            )
            params = requant_sdp(s_x, s_w, s_qk, bias=None, granularity=Granularity.PER_TENSOR)
            if causal:  # the mask added by Y's ALU (E-RDMA), as the mapper's QK^T reads it
                params = SdpParams(x1=params.x1, x2=params.x2, y=lut_steps.mask_operand(mask), cvt=params.cvt)
            pieces = _lowered_pieces(qk, q, k, self.memo, bias=False, causal=causal)
            scores = self._conv(qk, qa, qw, params, keep=False, pieces=pieces)
        else:
            real = float_matmul(qk, q, k, None)
            s_qk = float(scale_for(cal.amax(real))) if dynamic else _static(self.scales.outputs, qk, "output")
            scores = np.where(mask, lut_steps.MASK_CODE, quantize(real, s_qk)).astype(np.int64)
        if causal and not np.all(scores[mask] == lut_steps.MASK_CODE):
            raise NvdlaError(f"{qk}: the mask operand did not saturate every masked score (multiplier too small)")
        s_exp, s_sum, s_rec, s_un = (
            _static(steps, f"{name}.{t}", "softmax") for t in ("exp", "rowsum", "recip", "unnormalized")
        )
        e = self._sdp(f"{name}.exp", scores, lut_steps.exp_pass(s_qk / math.sqrt(d), s_exp))
        ones = np.ones((1, e.shape[1]), np.int8)
        sums = self._conv(f"{name}.rowsum", e.astype(np.int8), ones, lut_steps.requant_pass(s_exp, s_sum), keep=False)
        recip = self._sdp(f"{name}.recip", sums, lut_steps.recip_pass(s_sum, s_rec))
        if not int8_products:  # PV and the normalisation float, on the INT8 exps and 1/sum
            return (dequantize(e, s_exp) @ v) * dequantize(recip, s_rec)
        qa, qw, s_x, s_w, _ = self._operands(pv, dequantize(e, s_exp), v.T, None, s_x=s_exp)
        pieces = _lowered_pieces(pv, qa, qw, self.memo, bias=False, causal=causal)
        unnorm = self._conv(pv, qa, qw, requant_sdp(s_x, s_w, s_un, bias=None, granularity=Granularity.PER_TENSOR),
                            pieces=pieces)  # fmt: skip
        ones = np.ones((unnorm.shape[1], 1), np.int8)
        broadcast = self._conv(
            f"{name}.broadcast", recip.astype(np.int8), ones, lut_steps.requant_pass(1, 1), keep=False
        )
        if dynamic:  # the context's range from its value (PV's output times 1/sum)
            s_ctx = float(scale_for(cal.amax(dequantize(unnorm, s_un) * dequantize(broadcast, s_rec))))
        else:
            s_ctx = _static(self.scales.outputs, pv, "output")
        try:
            norm = lut_steps.normalize_pass(s_un, s_rec, s_ctx, broadcast)
        except UnsupportedError as err:  # the rows' sums span more than one INT8 scale of 1/sum and PV reach
            raise UnsupportedError(f"{name}.normalize: cannot be programmed: {err}") from None
        ctx = self._sdp(f"{name}.normalize", unnorm, norm)
        return dequantize(ctx, s_ctx)

    def normalized(self, name: str, x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
        """A LayerNorm in the mapper's steps on NVDLA (numerics.layernorm_steps): x read as the INT8 codes it
        is in memory at (the residual stream as last written, else its calibrated or dynamic scale), every
        convolution and SDP pass through the bit-exact datapath, the output written at INT8 at its own
        scale (the recipe's over the float LayerNorm's output; the matmuls reading it take the same)."""
        flat = x.reshape(-1, x.shape[-1])
        cal, dynamic = self.settings.calibration, self.settings.dynamic
        if self.stream is not None and self._quantized(STREAM_SITE):
            s_x = self.stream
        elif dynamic:
            s_x = float(scale_for(cal.amax(flat)))
        else:
            s_x = _static(self.scales.steps, f"{name}.in", "LayerNorm input")
        qx = quantize(flat, s_x)
        if dynamic:
            rng = layernorm_steps.norm_range(dequantize(qx, s_x))
            s_y = float(scale_for(cal.amax(layernorm(dequantize(qx, s_x), g, b, eps))))
        else:
            if name not in self.scales.norms:
                raise NvdlaError(f"no calibrated range for LayerNorm {name!r}: the scales were made for another model")
            rng, s_y = self.scales.norms[name], _static(self.scales.steps, f"{name}.out", "LayerNorm output")

        def conv(step: str, a: np.ndarray, w: np.ndarray, params: SdpParams, precision: Precision) -> np.ndarray:
            return self._conv(step, a, w, params, keep=False, precision=precision).astype(np.int64)

        def sdp(step: str, codes: np.ndarray, params: SdpParams) -> np.ndarray:
            return self._sdp(step, codes, params).astype(np.int64)

        try:
            run = layernorm_steps.run_layernorm(name, qx, s_x, g, b, eps, rng, s_y, conv, sdp)
        except UnsupportedError as e:
            raise UnsupportedError(f"{name}: the LayerNorm's steps cannot be programmed: {e}") from None
        return dequantize(run.out, s_y).reshape(x.shape)

    def _sdp(self, name: str, codes: np.ndarray, params: SdpParams) -> np.ndarray:
        """A standalone SDP pass over INT8 codes [m, n] (the bit-exact SDP model): its INT8 output."""
        res = sdp_apply(np.asarray(codes, np.int64), params)
        self._count(name, res.saturations)
        return res.values


class _Fp16Run:
    """A forward's ops through NVDLA's FP16 datapath on `hw` (nv_full), each as the mapper lowers it there
    (numerics.fp16_steps): the operands in memory at FP16 (no scales), every matmul through the bit-exact
    CMAC -> CACC -> SDP model (CMAC's block floating point, CACC's 48-bit accumulator, SDP's FP32) in the
    layout and tiling the mapper picks, the bias added by X1 and the result written at FP16. On a build
    with SDP's LUT the FFN's GELU runs in its first layer's Y stage (the FP16 table and FP17
    interpolation); the residual stream is in memory at FP16 with each add in the SDP of the matmul before
    it (Y's ALU, or X2's on a build without the element-wise unit). LayerNorm and the softmax run on the
    host (float), as the mapper runs them at FP16. Saturations (SDP's output beyond 65504, and values the
    host writes beyond it) are counted into `sats` by name."""

    def __init__(self, hw: HwConfig, sats: dict[str, int], record: list[LayerRun] | None = None) -> None:
        if Precision.FP16 not in hw.precisions:
            raise NvdlaError(f"{hw.name} has no fp16 datapath")
        self.hw, self.sats, self.record = hw, sats, record
        self.ctx = _run_context(hw, QuantSettings(precision=Precision.FP16))
        self.memo = new_memo(hw, self.ctx.options)

    def hooks(self) -> Hooks:
        return Hooks(
            self.matmul, None, self.activated if self.ctx.has_lut else None, self.residual, self.embedded, None,
            value_bias_in_context=value_bias_in_context(self.ctx),
        )  # fmt: skip

    def _count(self, name: str, sat: int) -> None:
        self.sats[name] = self.sats.get(name, 0) + sat

    def _fp16(self, name: str, x: np.ndarray) -> np.ndarray:
        """x as the host writes it at FP16: a value FP16's rounding takes past 65504 (|x| >= 65520) counted as
        a saturation and written as 65504."""
        x = np.asarray(x, np.float64)
        self._count(name, int(np.count_nonzero(np.abs(x) >= FP16_OVERFLOW)))
        return fp16_steps.as_fp16(np.clip(x, -65504, 65504))

    def _conv(
        self, name: str, a: np.ndarray, w: np.ndarray, params: SdpParams, pieces: tuple[ProductPiece, ...]
    ) -> np.ndarray:
        """a [m, k] times w [n, k] at FP16 as the mapper's `pieces` (_run_pieces)."""
        y, sat, runs = _run_pieces(name, self._fp16(name, a), self._fp16(name, w), params, self.hw, self.ctx, 0, pieces)
        self._count(name, sat)
        if self.record is not None:
            self.record.extend(runs)
        return y.astype(np.float64)

    def _bias(self, name: str, b: np.ndarray | None) -> np.ndarray | None:
        return None if b is None else self._fp16(name, b)

    def matmul(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        if role_of(name) is MatmulRole.VALUE and value_transposed(self.ctx):
            # V^T = W_v X^T, as the mapper runs V on a build with BDMA (_NvdlaRun._transposed_value); its
            # bias per element where the forward leaves it here (PV adds it where the host normalises)
            bias = None if b is None else np.broadcast_to(self._bias(name, b)[:, None], (w.shape[0], a.shape[0]))
            pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None or value_bias_in_context(self.ctx))
            return self._conv(name, w, a, fp16_steps.matmul_sdp(bias=bias), pieces).T
        pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None)
        return self._conv(name, a, w, fp16_steps.matmul_sdp(bias=self._bias(name, b)), pieces)

    def activated(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, act) -> np.ndarray:
        params = fp16_steps.matmul_sdp(bias=self._bias(name, b), lut=fp16_steps.gelu_lut(act))
        pieces = _lowered_pieces(name, a, w, self.memo, bias=b is not None, fused=Fused(activation=OpKind.GELU))
        return self._conv(name, a, w, params, pieces)

    def residual(self, name: str, a: np.ndarray, w: np.ndarray, b: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        params = fp16_steps.matmul_sdp(
            bias=self._bias(name, b), residual=self._fp16(name, x), eltwise_unit=self.ctx.has_ew
        )
        pieces = _lowered_pieces(
            name, a, w, self.memo, bias=b is not None, fused=Fused(residual=True, residual_input="stream")
        )
        return self._conv(name, a, w, params, pieces)

    def embedded(self, name: str, x: np.ndarray) -> np.ndarray:
        return self._fp16(name, x).astype(np.float64)


def _datapath_hooks(
    hw: HwConfig,
    settings: QuantSettings,
    scales: Scales,
    sats: dict[str, int],
    record: list[LayerRun] | None = None,
    progress: Progress = quiet,
) -> Hooks:
    """The hooks of a forward through NVDLA's datapath: integer (_NvdlaRun) or FP16 (_Fp16Run); `progress`
    hears of every op they run."""
    if settings.precision is Precision.FP16:
        hooks = _Fp16Run(hw, sats, record).hooks()
    else:
        hooks = _NvdlaRun(hw, settings, scales, sats, record).hooks()
    return hooks if progress is quiet else _counted(hooks, progress, f"{settings.precision.value} datapath: ops run")


def _counted(hooks: Hooks, progress: Progress, what: str) -> Hooks:
    """`hooks` with every op they run (a matmul, a head's attention, a matmul with its activation or
    residual, a normalization) counted to `progress` (the number of ops is not known in advance)."""
    n = 0

    def counting(fn):
        def run(*args):
            nonlocal n
            out = fn(*args)
            n += 1
            progress(what, n, None)
            return out

        return run

    fields = ("matmul", "attend", "activated", "residual", "normalized")
    return replace(hooks, **{f: counting(getattr(hooks, f)) for f in fields if getattr(hooks, f) is not None})


def block_accuracy(
    spec: ModelSpec,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    seq: int = 128,
    calib: str | Path | None = None,
    samples: int = 4,
    seed: int = 0,
) -> list[LayerError]:
    """Per-matmul error of the INT8 block against float32, on the last calibration sample."""
    if settings.precision not in hw.precisions:
        raise NvdlaError(f"{hw.name} has no {settings.precision.value} datapath")
    st = spec.stages[0]
    rng = np.random.default_rng(seed)
    block = _Block(st.hidden, st.heads, st.ffn, rng, settings.prune)
    data = calibration_inputs(calib, seq=seq, hidden=st.hidden, samples=samples, rng=rng)

    calibration = data[:-1] if len(data) > 1 else data
    moved = _moves_v_bias(hw, settings)
    scales = _calibrated_scales(
        lambda h: [block.forward(x, h.matmul, dense=False, v_bias_in_pv=moved) for x in calibration],
        settings,
        v_bias_in_pv=moved,
    )
    sats: dict[str, int] = {}
    nvdla_mm = _datapath_hooks(hw, settings, scales, sats).matmul

    def int8_mm(name, a, w, b):
        return nvdla_mm(name, a, w, b).astype(np.float32)

    # the unpruned float32 model (with V's bias where the mapper's program adds it: the "v" rows alike)
    ref = block.forward(data[-1], float_matmul, dense=True, v_bias_in_pv=moved)
    got = block.forward(data[-1], int8_mm, dense=False, v_bias_in_pv=moved)
    names = ["q", "k", "v", "qk.h0", "pv.h0", "o", "ffn1", "ffn2", "block_out"]
    return [_errors(n, got[n], ref[n], sats.get(n, 0)) for n in names]


# ---- trained models (issue 31) -------------------------------------------------------------------


def vit_accuracy(
    weights: dict[str, np.ndarray],
    calib: np.ndarray,
    images: np.ndarray,
    labels: np.ndarray,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    heads: int,
    patch: int,
    int8_weights: dict[str, np.ndarray] | None = None,
    record: list[LayerRun] | None = None,
    progress: Progress = quiet,
) -> TrainedAccuracy:
    """The trained ViT on `images`, float and INT8 (static scales calibrated on `calib`, or dynamic): every
    matmul (patch embedding, projections, QK^T and PV per image and head, FFN, classifier) runs through the
    bit-exact CMAC -> CACC -> SDP model (run_conv, tiled as the mapper tiles it) with SDP's integer
    requantization to INT8; the residual stream in memory at INT8, each add in the SDP of the matmul
    before it; LayerNorm and the softmax in float on the host (the softmax in SDP's LUT with
    settings.softmax "nvdla"), GELU likewise on a build without SDP's LUT (nv_small) and in the LUT on one
    with it (_NvdlaRun). Weight scales per output channel or per tensor; activations per
    tensor. With pruning (settings.prune) the INT8 run's weights are pruned, calibrated as pruned, and
    compared with the dense float model; `int8_weights` (fine-tuned after pruning) replace the INT8 run's.
    `record` collects every matmul as NVDLA ran it (LayerRun). Bad input gets a one-line error."""
    if settings.precision not in hw.precisions:
        raise NvdlaError(f"{hw.name} has no {settings.precision.value} datapath")
    if images.ndim != 3 or calib.ndim != 3 or images.shape[1:] != calib.shape[1:]:
        raise NvdlaError(
            f"images {list(images.shape)} and calibration images {list(calib.shape)} must both be [N, H, W]"
        )
    if labels.shape != images.shape[:1]:
        raise NvdlaError(f"labels {list(labels.shape)} must be one per image ({images.shape[0]})")
    iw = int8_weights or weights
    scales = _calibrated_scales(
        lambda h: vit_forward(iw, calib, heads=heads, patch=patch, hooks=_pruned(h, settings.prune)),
        settings,
        steps_too=_lut_build(hw),
        v_bias_in_pv=_moves_v_bias(hw, settings),
    )
    sats: dict[str, int] = {}
    int8 = _pruned(_datapath_hooks(hw, settings, scales, sats, record, progress), settings.prune)
    ref = vit_forward(weights, images, heads=heads, patch=patch).argmax(-1)
    got = vit_forward(iw, images, heads=heads, patch=patch, hooks=int8).argmax(-1)
    return TrainedAccuracy(len(images), int((ref == labels).sum()), int((got == labels).sum()), sum(sats.values()))


def _nll_correct(logits: np.ndarray, ys: np.ndarray) -> tuple[float, int]:
    """Summed negative log-likelihood of `ys` under `logits` [..., vocab], and how many are the argmax."""
    z = logits - logits.max(-1, keepdims=True)
    logp = np.take_along_axis(z, ys[..., None], -1)[..., 0] - np.log(np.exp(z).sum(-1))
    return float(-logp.sum()), int((logits.argmax(-1) == ys).sum())


def _greedy(forward, prompts: np.ndarray, new: int, *, pad_to: int = 0) -> np.ndarray:
    """`new` tokens after each prompt [P, T], each the argmax of `forward(ids)` at the last real position.
    With `pad_to`, every forward runs on the sequences padded (token 0) to that length: in a causal model
    a position's logits do not depend on later positions, and under static scales neither do its INT8
    values (every op is row by row but attention, whose later keys the mask zeroes), so the logits are
    the unpadded ones and every forward has one shape (one tiling search per layer, not one per length)."""
    ids = prompts
    for _ in range(new):
        t = ids.shape[1]
        x = np.pad(ids, ((0, 0), (0, pad_to - t))) if pad_to else ids
        ids = np.concatenate([ids, forward(x)[:, t - 1].argmax(-1)[:, None]], 1)
    return ids[:, prompts.shape[1] :]


def gpt_accuracy(
    weights: dict[str, np.ndarray],
    calib: np.ndarray,
    text: np.ndarray,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    heads: int,
    context: int,
    windows: int | None = None,
    prompts: int = 4,
    new_tokens: int = 16,
    scales: Scales | None = None,
    int8_weights: dict[str, np.ndarray] | None = None,
    progress: Progress = quiet,
) -> LmAccuracy:
    """The trained GPT on held-out token ids `text` [N], float and INT8 (static scales calibrated on the
    windows `calib` [n, T], or dynamic): every matmul (the q, k and v projections, QK^T and PV per sequence and
    head, the output projection, the FFN, the tied LM head) through the bit-exact CMAC -> CACC -> SDP model
    with SDP's integer requantization, and LayerNorm, the softmax and GELU, as vit_accuracy. Perplexity and next-token accuracy over the first `windows` windows of
    `context` tokens (all by default), and greedy continuations of `new_tokens` tokens to the context's
    end from `prompts` prompts spread evenly over the text, INT8 against float. `scales` (learned by
    quantization-aware training) replace the calibration; `weights` are then the fine-tuned model's, and
    the float baseline is theirs. Pruning and `int8_weights` as in vit_accuracy."""
    if settings.precision not in hw.precisions:
        raise NvdlaError(f"{hw.name} has no {settings.precision.value} datapath")
    if "transformer.wte.weight" not in weights:
        raise NvdlaError("weights lack 'transformer.wte.weight': not a GPT-2 model's tensors")
    vocab = weights["transformer.wte.weight"].shape[0]
    if text.ndim != 1 or calib.ndim != 2 or calib.shape[1] > context:
        raise NvdlaError(
            f"held-out ids {list(text.shape)} must be [N] and calibration ids {list(calib.shape)} [n, T <= {context}]"
        )
    if max(int(text.max()), int(calib.max())) >= vocab:
        raise NvdlaError(f"token ids must be below the model's vocabulary of {vocab}")
    if not 0 < new_tokens < context:
        raise NvdlaError(
            f"new_tokens {new_tokens} must be in 1..{context - 1} (the prompt fills the rest of the context)"
        )
    ids = text.astype(np.int64)
    usable = (len(ids) - 1) // context
    n = usable if windows is None else min(windows, usable)
    xs = ids[: n * context].reshape(n, context)
    ys = ids[1 : n * context + 1].reshape(n, context)
    cal = calib.astype(np.int64)
    iw = int8_weights or weights
    calibrated = _calibrated_scales(
        lambda h: gpt2_forward(iw, cal, heads=heads, hooks=_pruned(h, settings.prune)),
        settings,
        steps_too=_lut_build(hw),
        v_bias_in_pv=_moves_v_bias(hw, settings),
    )
    # learned scales (quantization-aware training) cover the matmuls; QAT did not learn the residual
    # stream's, which are calibrated as the recipe says
    scales = calibrated if scales is None else replace(scales, steps=calibrated.steps | scales.steps)
    sats: dict[str, int] = {}
    int8 = _pruned(_datapath_hooks(hw, settings, scales, sats, progress=progress), settings.prune)
    f_nll, f_ok = _nll_correct(gpt2_forward(weights, xs, heads=heads), ys)
    q_nll, q_ok = _nll_correct(gpt2_forward(iw, xs, heads=heads, hooks=int8), ys)
    prompt_tokens, new = context - new_tokens, new_tokens
    starts = np.linspace(0, len(ids) - prompt_tokens, prompts).astype(np.int64)
    pr = np.stack([ids[s : s + prompt_tokens] for s in starts])
    pad = 0 if settings.dynamic else context  # dynamic scales see every row: run the real lengths
    g_f = _greedy(lambda x: gpt2_forward(weights, x, heads=heads), pr, new, pad_to=pad)
    sats_held = sum(sats.values())  # the held-out windows' (the greedy runs' padded rows would count too)
    g_q = _greedy(lambda x: gpt2_forward(iw, x, heads=heads, hooks=int8), pr, new, pad_to=pad)
    same = g_f == g_q
    prefix = int(sum(int(np.argmin(row)) if not row.all() else new for row in same))
    return LmAccuracy(
        n, xs.size, f_nll / xs.size, q_nll / xs.size, f_ok, q_ok, prompts, g_f.size, int(same.sum()), prefix,
        sats_held,
    )  # fmt: skip


# The trained models of issue 31 (validation/trained/train.py writes them into one directory, shipped as
# nvdla_validation's package data): per model, its evaluation and calibration data beside
# `<name>.npz` (weights) and `<name>.config.json` (the HF config: heads, patch, context).
TRAINED_DATA = {
    "vit_digits": ("digits_test.npz", "digits_calib.npz"),
    "char_gpt": ("char_eval.npz", "char_calib.npz"),
}


def trained_accuracy(
    directory: str | Path,
    name: str,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    samples: int | None = None,
    prompts: int = 4,
    new_tokens: int = 16,
    progress: Progress = quiet,
) -> TaskAccuracy:
    """A trained model's task accuracy, float and INT8 through the bit-exact datapath: the ViT
    on its first `samples` test images (all by default), the GPT on its first `samples` held-out windows
    with `prompts` greedy continuations of `new_tokens` tokens. One-line errors for an unknown model or a
    missing file."""
    from nvdla_mapper.frontends.hf_config import from_hf_config
    from nvdla_mapper.numerics.reference import load_weights

    if name not in TRAINED_DATA:
        raise NvdlaError(f"no trained model {name!r}; trained models: {', '.join(TRAINED_DATA)}")
    d = Path(directory)
    eval_file, calib_file = (d / f for f in TRAINED_DATA[name])
    for f in (d / f"{name}.config.json", eval_file, calib_file):
        if not f.is_file():
            raise NvdlaError(f"{f}: missing (validation/trained/train.py writes {name}'s files into one directory)")
    spec = from_hf_config(d / f"{name}.config.json")
    w = load_weights(d / f"{name}.npz")
    learned = None
    if settings.learned:  # quantization-aware training: its fine-tuned weights and learned scales
        if settings.dynamic or settings.smooth or name != "char_gpt":
            raise NvdlaError("learned (QAT) scales are static and made for char_gpt (validation/trained/qat.py)")
        if _lut_build(hw):
            raise NvdlaError(
                f"learned (QAT) scales were learned with the host's GELU (nv_small); {hw.name} runs it in "
                "SDP's LUT, whose scales QAT did not learn"
            )
        w, learned = load_weights(d / f"{settings.learned}.npz"), load_scales(d / f"{settings.learned}.scales.json")
    tuned = load_weights(d / f"{settings.finetuned}.npz") if settings.finetuned else None
    heads = spec.stages[0].heads
    if name == "vit_digits":
        test, calib = np.load(eval_file), np.load(calib_file)["images"]
        n = len(test["images"]) if samples is None else samples
        r = vit_accuracy(
            w,
            calib,
            test["images"][:n],
            test["labels"][:n],
            hw,
            settings,
            heads=heads,
            patch=spec.patch_embed[1],
            int8_weights=tuned,
            progress=progress,
        )
        return TaskAccuracy(name, hw.name, settings.precision, settings.recipe(), r)
    g = gpt_accuracy(
        w, np.load(calib_file)["ids"], np.load(eval_file)["ids"], hw, settings, heads=heads,
        context=spec.max_positions, windows=samples, prompts=prompts, new_tokens=new_tokens, scales=learned,
        int8_weights=tuned, progress=progress,
    )  # fmt: skip
    return TaskAccuracy(name, hw.name, settings.precision, settings.recipe(), g)


# the test images (or held-out windows) of a trained model's task accuracy that `map --quantize` runs beside
# the block's errors: enough to show a recipe's loss, a few seconds on the bit-exact datapath
MAP_TASK_SAMPLES = 100


def accuracy_report(
    spec: ModelSpec,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    seq: int,
    calib: str | Path | None = None,
    trained: tuple[Path, str] | None = None,
) -> AccuracyReport:
    """What `--quantize` adds to a map, generate or serve run: the block's per-matmul errors
    (block_accuracy) and, for a shipped trained model (its directory and name), its task accuracy on its
    first MAP_TASK_SAMPLES samples; a build that cannot be programmed for the trained model's run says so
    in the task, and the run is kept."""
    errors = block_accuracy(spec, hw, settings, seq=seq, calib=calib)
    task = None
    if trained is not None:
        directory, name = trained
        try:
            task = trained_accuracy(directory, name, hw, settings, samples=MAP_TASK_SAMPLES)
        except UnsupportedError as e:
            task = TaskAccuracy(name, hw.name, settings.precision, settings.recipe(), None, error=str(e))
    return AccuracyReport(
        settings.granularity, settings.calibration, settings.dynamic, settings.prune, settings.recipe(),
        str(calib) if calib is not None else SEEDED_CALIBRATION, tuple(errors), task,
    )  # fmt: skip
