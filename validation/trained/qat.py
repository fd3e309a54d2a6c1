"""Quantization-aware training of the character GPT for NVDLA's INT8 datapath (issue 31):

    bash validation/trained/bootstrap.sh            # the side venv (Python 3.11, CPU torch)
    ~/.cache/nvdla-sim/train-venv/bin/python validation/trained/qat.py [--steps 400]

Starts from the float model (char_gpt.npz) and fine-tunes it with fake quantization at exactly the points
where the bit-exact evaluation (nvdla_mapper.studies.accuracy) quantizes: every matmul's input, its output
(SDP's requantization to INT8) and the attention products' activation operands (K, V) per tensor, an
input that an NVDLA layer wrote (QK^T's q and k, PV's v, the output projection's context) at its
producer's scale; the
linear layers' weights per output channel at their max, the tied LM head's per tensor; the softmax's
probabilities at 1/127 (their range is [0, 1]). The activation scales are learned (LSQ: Esser et al. 2020,
a straight-through estimator for the rounding, the step size a parameter, here as its logarithm),
initialised by max calibration on char_calib.npz. Writes `char_gpt_qat.npz` (the fine-tuned weights under
HF's names), `char_gpt_qat.scales.json` (the learned scales under the evaluation's site names: they become
SDP's multipliers and shifts) and `char_gpt_qat.log.json`. Fixed seed; 2 threads.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import (
    SEED,
    VOCAB,
    CharGPT,
    _char_ids,
    char_batch,
    char_gpt_weights,
    fine_tune_args,
    held_out_metrics,
    optimizer_step,
)

QMAX = 127
LR_WEIGHTS, LR_SCALES = 3e-5, 1e-3  # a fine-tune of a converged model: small steps for the weights


def load_char_gpt(path: Path) -> CharGPT:
    """The float model from its HF-named tensors (the inverse of train.py's export)."""
    w = {k: torch.tensor(v) for k, v in np.load(path).items()}
    m = CharGPT()
    with torch.no_grad():
        m.wte.weight.copy_(w["transformer.wte.weight"])
        m.wpe.weight.copy_(w["transformer.wpe.weight"])
        m.ln.weight.copy_(w["transformer.ln_f.weight"])
        m.ln.bias.copy_(w["transformer.ln_f.bias"])
        for i, blk in enumerate(m.blocks):
            p = f"transformer.h.{i}."
            for ln, hf in ((blk.ln1, "ln_1"), (blk.ln2, "ln_2")):
                ln.weight.copy_(w[p + hf + ".weight"])
                ln.bias.copy_(w[p + hf + ".bias"])
            qkv_w, qkv_b = w[p + "attn.c_attn.weight"].T.chunk(3), w[p + "attn.c_attn.bias"].chunk(3)
            for lin, wt, bt in zip((blk.q, blk.k, blk.v), qkv_w, qkv_b, strict=True):
                lin.weight.copy_(wt)
                lin.bias.copy_(bt)
            for lin, hf in ((blk.o, "attn.c_proj"), (blk.fc1, "mlp.c_fc"), (blk.fc2, "mlp.c_proj")):
                lin.weight.copy_(w[p + hf + ".weight"].T)
                lin.bias.copy_(w[p + hf + ".bias"])
    return m


def _fake(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Round to the INT8 grid of step s and saturate; the rounding passes gradients straight through."""
    q = torch.clamp(x / s, -QMAX, QMAX)
    return (q + (q.round() - q).detach()) * s


class Quantizers(nn.Module):
    """The learned activation scales by site (`in:NAME`, `out:NAME`, `op:NAME`), or, while calibrating,
    the magnitudes seen there."""

    def __init__(self) -> None:
        super().__init__()
        self.log_s = nn.ParameterDict()
        self.seen: dict[str, float] | None = {}

    def __call__(self, key: str, x: torch.Tensor) -> torch.Tensor:
        if self.seen is not None:  # calibrating: record max |x|, pass x through
            self.seen[key] = max(self.seen.get(key, 0.0), float(x.detach().abs().max()))
            return x
        return _fake(x, self.log_s[key.replace(".", "/")].exp())

    def init_from_seen(self) -> None:
        for key, amax in self.seen.items():
            self.log_s[key.replace(".", "/")] = nn.Parameter(torch.tensor(math.log(max(amax, 1e-8) / QMAX)))
        self.seen = None

    def export(self, layers: int) -> dict[str, dict[str, float]]:
        """The scales by the evaluation's site names; the inputs NVDLA reads as their producer wrote them
        (QK^T's q and k, PV's v, the output projection's context) take the producer's output scale."""
        out: dict[str, dict[str, float]] = {"inputs": {}, "outputs": {}, "operands": {}}
        kinds = {"in": "inputs", "out": "outputs", "op": "operands"}
        for key, p in self.log_s.items():
            kind, name = key.replace("/", ".").split(":", 1)
            out[kinds[kind]][name] = float(p.detach().exp())
        o = out["outputs"]
        for i in range(layers):
            a = f"transformer.h.{i}.attn."
            out["inputs"][a + "qk"], out["operands"][a + "qk"] = o[a + "c_attn.q"], o[a + "c_attn.k"]
            out["operands"][a + "pv"], out["inputs"][a + "c_proj"] = o[a + "c_attn.v"], o[a + "pv"]
        return out


def _weights(w: torch.Tensor, per_channel: bool) -> torch.Tensor:
    """Weights on the INT8 grid at their max, per output channel (a layer with a bias) or per tensor."""
    amax = w.detach().abs().amax(1, keepdim=True) if per_channel else w.detach().abs().max()
    return _fake(w, torch.clamp(amax, min=1e-12) / QMAX)


def qat_forward(m: CharGPT, fq: Quantizers, ids: torch.Tensor) -> torch.Tensor:
    """CharGPT's forward with fake quantization where the NVDLA run quantizes (module docstring), the
    sites named as numerics.reference.gpt2_forward names its matmuls."""

    def matmul(name: str, a: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, *, on_grid: bool = False):
        """`on_grid`: the input is an NVDLA layer's INT8 output, read as written (its producer's scale)."""
        y = (a if on_grid else fq(f"in:{name}", a)) @ _weights(w, b is not None).T
        return fq(f"out:{name}", y + b if b is not None else y)

    x = m.wte(ids) + m.wpe(torch.arange(ids.shape[1]))
    b_, t, h = x.shape
    for i, blk in enumerate(m.blocks):
        p = f"transformer.h.{i}."
        y = blk.ln1(x)
        q, k, v = (
            matmul(f"{p}attn.c_attn.{n}", y, lin.weight, lin.bias).view(b_, t, blk.heads, -1).transpose(1, 2)
            for n, lin in (("q", blk.q), ("k", blk.k), ("v", blk.v))
        )
        d = h // blk.heads
        # QK^T and PV read q, k and v as the projections' SDP wrote them, and the output projection reads
        # the context as PV's SDP wrote it: those inputs keep their producer's scale (export() ties them)
        qk, pv = f"{p}attn.qk", f"{p}attn.pv"
        scores = fq(f"out:{qk}", q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        probs = _fake(scores.softmax(-1), torch.tensor(1.0 / QMAX))  # [0, 1] at a fixed scale
        ctx = fq(f"out:{pv}", probs @ v).transpose(1, 2).reshape(b_, t, h)
        x = x + matmul(f"{p}attn.c_proj", ctx, blk.o.weight, blk.o.bias, on_grid=True)
        f = blk.act(matmul(f"{p}mlp.c_fc", blk.ln2(x), blk.fc1.weight, blk.fc1.bias))
        x = x + matmul(f"{p}mlp.c_proj", f, blk.fc2.weight, blk.fc2.bias)
    return matmul("lm_head", m.ln(x), m.wte.weight, None)


def main(argv: list[str] | None = None) -> int:
    out, steps = fine_tune_args(argv, __doc__)
    torch.manual_seed(SEED)
    t0 = time.time()
    m = load_char_gpt(out / "char_gpt.npz")
    fq = Quantizers()
    calib = torch.tensor(np.load(out / "char_calib.npz")["ids"].astype(np.int64))
    with torch.no_grad():
        qat_forward(m, fq, calib)  # max calibration: the scales' starting points
    fq.init_from_seen()
    ids, split, _ = _char_ids()
    train, held = torch.tensor(ids[:split]), ids[split:]
    ctx, log = 64, []

    def metrics() -> dict:  # held out, float and with the fake quantization
        return {
            "float": held_out_metrics(m, held, ctx),
            "fake_quant": held_out_metrics(lambda x: qat_forward(m, fq, x), held, ctx),
        }

    log.append({"step": 0, **metrics()})
    opt = torch.optim.AdamW(
        [
            {"params": m.parameters(), "lr": LR_WEIGHTS, "weight_decay": 0.0},
            {"params": fq.parameters(), "lr": LR_SCALES},
        ]
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)  # both rates to 0 by the last step
    g = torch.Generator().manual_seed(SEED + 1)
    for step in range(1, steps + 1):
        x, y = char_batch(train, ctx, g)
        loss = nn.functional.cross_entropy(qat_forward(m, fq, x).reshape(-1, VOCAB), y.reshape(-1))
        optimizer_step(loss, opt, sched)
        if step % (steps // 4) == 0 or step == steps:
            log.append({"step": step, "train_loss": round(float(loss.detach()), 5),
                        **metrics()})  # fmt: skip
            print(log[-1], flush=True)
    weights = char_gpt_weights(m)
    np.savez_compressed(out / "char_gpt_qat.npz", **weights)
    (out / "char_gpt_qat.scales.json").write_text(json.dumps(fq.export(len(m.blocks)), indent=1, sort_keys=True) + "\n")
    rec = {"model": "char_gpt_qat", "from": "char_gpt.npz", "seed": SEED, "steps": steps, "batch": 32,
           "lr": {"weights": LR_WEIGHTS, "scales": LR_SCALES, "schedule": "cosine to 0"}, "log": log, "torch": torch.__version__,
           "wall_s": round(time.time() - t0, 1), "command": "python validation/trained/qat.py"}  # fmt: skip
    (out / "char_gpt_qat.log.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(f"char_gpt_qat: {log[0]} -> {log[-1]} in {rec['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
