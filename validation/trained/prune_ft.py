"""Pruning with fine-tuning of the character GPT (issue 31):

    ~/.cache/nvdla-sim/train-venv/bin/python validation/trained/prune_ft.py [--steps 400]

Prunes the float model's linear layers (q, k, v, output projection, FFN; not the embeddings nor the tied
LM head) as nvdla_mapper.numerics.sparsity does, then fine-tunes it in float with the pruned weights held
at zero: 50% magnitude pruning per weight matrix (`char_gpt_m50_ft.npz`) and 2:4 along the input channels
(`char_gpt_24_ft.npz`), with `<name>.log.json`. The bit-exact evaluation prunes again (a no-op on these
weights) and quantizes with calibrated scales. Fixed seed; 2 threads.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qat import load_char_gpt
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

LR = 3e-4  # pruning moves the model further than quantization: larger steps than QAT's


def mask_for(w: torch.Tensor, spec: str) -> torch.Tensor:
    """Keep-mask of `w` [out, in]: the largest half by magnitude over the matrix, or the 2 largest of every
    4 consecutive input channels (sparsity.prune_magnitude, prune_2_4)."""
    a = w.detach().abs()
    if spec == "2:4":
        groups = a.reshape(a.shape[0], -1, 4)
        keep = torch.zeros_like(groups, dtype=torch.bool)
        keep.scatter_(-1, groups.topk(2, -1).indices, True)
        return keep.reshape(a.shape)
    flat = a.reshape(-1)
    keep = torch.zeros_like(flat, dtype=torch.bool)
    keep[flat.argsort(descending=True, stable=True)[: flat.numel() - round(0.5 * flat.numel())]] = True
    return keep.reshape(a.shape)


def _linears(m: CharGPT) -> list[nn.Linear]:
    return [lin for blk in m.blocks for lin in (blk.q, blk.k, blk.v, blk.o, blk.fc1, blk.fc2)]


def fine_tune(out: Path, spec: str, tag: str, steps: int) -> dict:
    torch.manual_seed(SEED)
    m = load_char_gpt(out / "char_gpt.npz")
    masks = [mask_for(lin.weight, spec) for lin in _linears(m)]

    def apply() -> None:
        with torch.no_grad():
            for lin, keep in zip(_linears(m), masks, strict=True):
                lin.weight.mul_(keep)

    ids, split, _ = _char_ids()
    train, held = torch.tensor(ids[:split]), ids[split:]
    ctx = 64
    log = [{"step": 0, "dense": held_out_metrics(m, held, ctx)}]
    apply()
    log[0]["pruned"] = held_out_metrics(m, held, ctx)
    opt = torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(SEED + 2)
    for step in range(1, steps + 1):
        x, y = char_batch(train, ctx, g)
        loss = nn.functional.cross_entropy(m(x).reshape(-1, VOCAB), y.reshape(-1))
        optimizer_step(loss, opt, sched)
        apply()  # the pruned weights stay zero
        if step % (steps // 4) == 0 or step == steps:
            log.append(
                {"step": step, "train_loss": round(float(loss.detach()), 5), "pruned": held_out_metrics(m, held, ctx)}
            )
            print(tag, log[-1], flush=True)
    weights = char_gpt_weights(m)
    np.savez_compressed(out / f"{tag}.npz", **weights)
    return {"model": tag, "from": "char_gpt.npz", "prune": spec, "seed": SEED, "steps": steps, "batch": 32,
            "lr": LR, "schedule": "cosine to 0", "log": log}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    out, steps = fine_tune_args(argv, __doc__)
    for spec, tag in (("magnitude:0.5", "char_gpt_m50_ft"), ("2:4", "char_gpt_24_ft")):
        t0 = time.time()
        rec = fine_tune(out, spec, tag, steps)
        rec.update(torch=torch.__version__, wall_s=round(time.time() - t0, 1),
                   command="python validation/trained/prune_ft.py")  # fmt: skip
        (out / f"{tag}.log.json").write_text(json.dumps(rec, indent=1) + "\n")
        print(f"{tag}: {rec['log'][0]} -> {rec['log'][-1]} in {rec['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
