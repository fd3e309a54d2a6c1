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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_mapper.frontends.presets import ModelSpec
from nvdla_mapper.lowering.rules import HostModel, LoweringContext, matmul_layout
from nvdla_mapper.numerics.quant import Calibration, Granularity, dequantize, quantize, requant_sdp, scale_for
from nvdla_mapper.numerics.reference import float_matmul, gelu_tanh, layernorm, softmax, vit_forward
from nvdla_mapper.numerics.sparsity import prune_2_4, prune_magnitude
from nvdla_mapper.search.tiling_search import search_plan
from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import run_conv
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.precision import Precision


@dataclass(frozen=True)
class QuantSettings:
    granularity: Granularity = Granularity.PER_CHANNEL
    calibration: Calibration = field(default_factory=Calibration)
    dynamic: bool = False
    prune: str = ""  # "", "2:4", "magnitude:S"


@dataclass(frozen=True)
class LayerError:
    name: str
    max_abs: float
    rel: float  # ||q - ref|| / ||ref||
    cosine: float
    saturations: int

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "max_abs": self.max_abs,
            "rel": self.rel,
            "cosine": self.cosine,
            "saturations": self.saturations,
        }


def prune(w: np.ndarray, spec: str) -> np.ndarray:
    """Prune weights w[K, C] by spec ("", "2:4", "magnitude:S")."""
    if not spec:
        return w
    if spec == "2:4":
        return prune_2_4(w)
    name, _, value = spec.partition(":")
    if name == "magnitude":
        try:
            return prune_magnitude(w, float(value))
        except ValueError as e:
            raise NvdlaError(f"--prune {spec}: {e}") from None
    raise NvdlaError(f"--prune must be 2:4 or magnitude:S (0 <= S < 1), not {spec!r}")


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

    def forward(self, x: np.ndarray, mm, *, dense: bool) -> dict[str, np.ndarray]:
        """Run the block with `mm(name, a, w, b)` as the matmul (dense or pruned weights); returns every
        matmul output by name."""
        self.w = self.dense if dense else self.pruned
        outs: dict[str, np.ndarray] = {}

        def run(name, a, w, b=None):
            outs[name] = mm(name, a, w, b)
            return outs[name]

        q, k, v = (run(n, x, self.w[n], self.b[n]) for n in ("q", "k", "v"))
        ctx = np.zeros_like(q)
        for hh in range(self.heads):
            sl = slice(hh * self.hd, (hh + 1) * self.hd)
            scores = run(f"qk.h{hh}", q[:, sl], k[:, sl]) / math.sqrt(self.hd)
            ctx[:, sl] = run(f"pv.h{hh}", softmax(scores), v[:, sl].T)
        x1 = layernorm(x + run("o", ctx, self.w["o"], self.b["o"]))
        f = gelu_tanh(run("ffn1", x1, self.w["ffn1"], self.b["ffn1"]))
        outs["block_out"] = layernorm(x1 + run("ffn2", f, self.w["ffn2"], self.b["ffn2"]))
        return outs


def calibration_inputs(path: str | Path | None, *, seq: int, hidden: int, samples: int, rng) -> np.ndarray:
    if path is None:
        x = rng.standard_normal((samples, seq, hidden)).astype(np.float32)
        outliers = rng.choice(hidden, size=max(1, hidden // 64), replace=False)
        x[:, :, outliers] *= 8
        return x
    p = Path(path)
    try:
        x = np.load(p)
    except (OSError, ValueError) as e:
        raise NvdlaError(f"{p}: cannot load calibration data ({e})") from None
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[2] != hidden:
        raise NvdlaError(f"{p}: calibration data must be [N, seq, {hidden}] (or [seq, {hidden}]), not {list(x.shape)}")
    return x.astype(np.float32)


def _calibrated_scales(forward, settings: QuantSettings) -> tuple[dict[str, float], dict[str, float]]:
    """Per-tensor activation scales of every matmul's input and output, by name, from `forward(mm)` run in
    float over the calibration data (a name seen several times, as attention products of every head and
    image, is one site)."""
    seen_in: dict[str, list[np.ndarray]] = {}
    seen_out: dict[str, list[np.ndarray]] = {}

    def record(name, a, w, b):
        y = float_matmul(name, a, w, b)
        seen_in.setdefault(name, []).append(np.ravel(a))
        seen_out.setdefault(name, []).append(np.ravel(y))
        return y

    forward(record)
    cal = settings.calibration
    return tuple({n: float(scale_for(cal.amax(np.concatenate(v)))) for n, v in d.items()} for d in (seen_in, seen_out))


def _int8_matmul(
    hw: HwConfig, settings: QuantSettings, s_in: dict[str, float], s_out: dict[str, float], sats: dict[str, int]
):
    """A matmul hook (numerics.reference.Matmul) through NVDLA's INT8 datapath: the operands quantized
    (activations per tensor, static from `s_in` / `s_out` or dynamic; weights per channel where the layer
    has a bias and settings ask for it), the product run by run_conv on the bit-exact CMAC -> CACC -> SDP
    model in the layout and tiling the mapper picks, requantized to INT8 by SDP, and dequantized;
    saturations counted into `sats` by name."""
    cal = settings.calibration
    ctx = LoweringContext(hw=hw, precision=Precision.INT8, host=HostModel())

    def mm(name, a, w, b):
        s_x = float(scale_for(cal.amax(a))) if settings.dynamic else s_in[name]
        per_ch = settings.granularity is Granularity.PER_CHANNEL and b is not None  # activations: per tensor
        s_w = (
            scale_for(cal.weight_amax(w, axis=0))
            if per_ch
            else np.full(w.shape[0], float(scale_for(cal.weight_amax(w))))
        )
        qa = quantize(a, s_x)
        qw = quantize(w, s_w[:, None])
        m, kdim = a.shape
        layer = ConvLayer(name, matmul_layout(m, kdim, w.shape[0], ctx), Precision.INT8)  # as the map lays it out
        plan = search_plan(layer, hw).plan
        x3 = qa.reshape(layer.shape.in_h, layer.shape.in_w, kdim)
        w4 = qw.reshape(w.shape[0], 1, 1, kdim)
        if settings.dynamic:
            acc, _ = run_conv(layer, x3, w4, hw, plan)
            real = dequantize(acc.reshape(m, -1), s_x * s_w) + (b if b is not None else 0)
            s_y = float(scale_for(cal.amax(real)))
        else:
            s_y = s_out[name]
        params = requant_sdp(
            s_x, s_w, s_y, bias=b, granularity=Granularity.PER_CHANNEL if per_ch else Granularity.PER_TENSOR
        )
        y, sat = run_conv(layer, x3, w4, hw, plan, sdp_params=params)
        sats[name] = sats.get(name, 0) + sat
        return dequantize(y.reshape(m, -1), s_y)

    return mm


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
    if Precision.INT8 not in hw.precisions:
        raise NvdlaError(f"{hw.name} has no int8 datapath")
    st = spec.stages[0]
    rng = np.random.default_rng(seed)
    block = _Block(st.hidden, st.heads, st.ffn, rng, settings.prune)
    data = calibration_inputs(calib, seq=seq, hidden=st.hidden, samples=samples, rng=rng)

    calibration = data[:-1] if len(data) > 1 else data
    s_in, s_out = _calibrated_scales(lambda mm: [block.forward(x, mm, dense=False) for x in calibration], settings)
    sats: dict[str, int] = {}
    nvdla_mm = _int8_matmul(hw, settings, s_in, s_out, sats)

    def int8_mm(name, a, w, b):
        return nvdla_mm(name, a, w, b).astype(np.float32)

    ref = block.forward(data[-1], float_matmul, dense=True)  # the unpruned float32 model
    got = block.forward(data[-1], int8_mm, dense=False)
    names = ["q", "k", "v", "qk.h0", "pv.h0", "o", "ffn1", "ffn2", "block_out"]
    return [_errors(n, got[n], ref[n], sats.get(n, 0)) for n in names]


# ---- trained models (issue 31) -------------------------------------------------------------------


@dataclass(frozen=True)
class TrainedAccuracy:
    """Task accuracy of a trained classifier, float and through NVDLA's INT8 datapath."""

    images: int
    float_correct: int
    int8_correct: int
    saturations: int

    @property
    def float_accuracy(self) -> float:
        return self.float_correct / self.images

    @property
    def int8_accuracy(self) -> float:
        return self.int8_correct / self.images


def vit_int8_accuracy(
    weights: dict[str, np.ndarray],
    calib: np.ndarray,
    images: np.ndarray,
    labels: np.ndarray,
    hw: HwConfig,
    settings: QuantSettings,
    *,
    heads: int,
    patch: int,
) -> TrainedAccuracy:
    """The trained ViT on `images`, float and INT8 (static scales calibrated on `calib`, or dynamic): every
    matmul (patch embedding, projections, QK^T and PV per image and head, FFN, classifier) runs through the
    bit-exact CMAC -> CACC -> SDP model (run_conv, tiled as the mapper tiles it) with SDP's integer
    requantization to INT8; LayerNorm, softmax and GELU in float on the host, as the mapper runs them on a
    build without SDP's LUT (nv_small). Weight scales per output channel or per tensor; activations per
    tensor. Bad input gets a one-line error."""
    if Precision.INT8 not in hw.precisions:
        raise NvdlaError(f"{hw.name} has no int8 datapath")
    if images.ndim != 3 or calib.ndim != 3 or images.shape[1:] != calib.shape[1:]:
        raise NvdlaError(
            f"images {list(images.shape)} and calibration images {list(calib.shape)} must both be [N, H, W]"
        )
    if labels.shape != images.shape[:1]:
        raise NvdlaError(f"labels {list(labels.shape)} must be one per image ({images.shape[0]})")
    s_in, s_out = _calibrated_scales(lambda mm: vit_forward(weights, calib, heads=heads, patch=patch, mm=mm), settings)
    sats: dict[str, int] = {}
    int8_mm = _int8_matmul(hw, settings, s_in, s_out, sats)
    ref = vit_forward(weights, images, heads=heads, patch=patch).argmax(-1)
    got = vit_forward(weights, images, heads=heads, patch=patch, mm=int8_mm).argmax(-1)
    return TrainedAccuracy(len(images), int((ref == labels).sum()), int((got == labels).sum()), sum(sats.values()))
