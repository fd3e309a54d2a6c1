"""Train the two small transformers of the accuracy study (issue 31), reproducibly, on data that ships inside
packages; run with torch in a side venv (the CPU wheel on disk is for Python 3.11; see bootstrap.sh):

    bash validation/trained/bootstrap.sh                       # ~/.cache/nvdla-sim/train-venv: torch, scikit-learn
    ~/.cache/nvdla-sim/train-venv/bin/python validation/trained/train.py [--out validation/data/trained]

* `vit_digits`: a ViT (HF ViTConfig semantics: pre-LayerNorm blocks, exact-erf GELU, a CLS token, the
  classifier on the final LayerNorm's CLS output) on scikit-learn's copy of the UCI handwritten digits
  (1,797 8x8 images, 17 grey levels): 2x2 patches, 16 patches + CLS = 17 tokens, hidden 64, 2 layers,
  4 heads, FFN 128. Split: a seeded stratified 80/20 (1,437 train, 360 test).
* `char_gpt`: a character-level GPT (HF GPT2Config semantics: pre-LayerNorm, tanh-approximated GELU
  ("gelu_new"), learned positions, the LM head tied to the token embedding) over 7-bit ASCII on the
  sources of modules of Python's standard library (the files named in CHAR_SOURCES, as this Python
  installs them; their SHA-256 are logged), context 64, hidden 128, 2 layers, 4 heads, FFN 512.
  The last 10% of the text is held out.

Writes, per model: `<name>.npz` (float32 weights under HF's parameter names), `<name>.config.json` (an HF
config.json the mapper reads: `nvdla map validation/data/trained/<name>.config.json`), `<name>.log.json`
(seed, data provenance, per-epoch loss and accuracy, the float accuracy reached, torch version, wall
time) and the evaluation data in numpy form (`digits_test.npz`, `char_eval.npz`; for calibration
`digits_calib.npz`: 256 training images, `char_calib.npz`: 32 windows of 64 training characters) so that
evaluation needs numpy only. `--calibration-only` writes just the two calibration files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

SEED = 31
CHAR_SOURCES = ("textwrap.py", "string.py", "shlex.py", "fractions.py", "heapq.py", "bisect.py", "colorsys.py",
                "calendar.py", "difflib.py", "pprint.py")  # fmt: skip
VOCAB = 128  # 7-bit ASCII; other characters map to '?'


class Block(nn.Module):
    """A pre-LayerNorm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, hidden: int, heads: int, ffn: int, causal: bool, gelu: str) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = (
            nn.LayerNorm(hidden, eps=1e-12 if not causal else 1e-5),
            nn.LayerNorm(hidden, eps=1e-12 if not causal else 1e-5),
        )
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.act = nn.GELU(approximate=gelu)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        y = self.ln1(x)
        q, k, v = (m(y).view(b, t, self.heads, h // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        att = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads)
        if self.causal:
            att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.o(y)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, hidden=64, layers=2, heads=4, ffn=128, patch=2, image=8, classes=10) -> None:
        super().__init__()
        self.patch = patch
        n = (image // patch) ** 2
        self.embed = nn.Conv2d(1, hidden, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos = nn.Parameter(torch.randn(1, n + 1, hidden) * 0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn, False, "none") for _ in range(layers))
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.head = nn.Linear(hidden, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.embed(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)[:, 0])


class CharGPT(nn.Module):
    def __init__(self, hidden=128, layers=2, heads=4, ffn=512, context=64) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, hidden), nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn, True, "tanh") for _ in range(layers))
        self.ln = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.wte.weight.T  # tied LM head


def _block_weights(prefix: str, blk: Block, hf: str) -> dict[str, np.ndarray]:
    """One block's tensors under HF's names (ViT: vit.encoder.layer.N.*; GPT-2: transformer.h.N.*, whose
    Conv1D keeps weights as [in, out] and fuses q, k, v in c_attn)."""
    t = {n: p.detach().numpy().astype(np.float32) for n, p in blk.named_parameters()}
    if hf == "vit":
        names = {"ln1": "layernorm_before", "ln2": "layernorm_after", "q": "attention.attention.query",
                 "k": "attention.attention.key", "v": "attention.attention.value", "o": "attention.output.dense",
                 "fc1": "intermediate.dense", "fc2": "output.dense"}  # fmt: skip
        return {f"{prefix}.{names[n.split('.')[0]]}.{n.split('.')[1]}": v for n, v in t.items()}
    out = {
        f"{prefix}.ln_1.weight": t["ln1.weight"], f"{prefix}.ln_1.bias": t["ln1.bias"],
        f"{prefix}.ln_2.weight": t["ln2.weight"], f"{prefix}.ln_2.bias": t["ln2.bias"],
        f"{prefix}.attn.c_attn.weight": np.concatenate([t["q.weight"].T, t["k.weight"].T, t["v.weight"].T], 1),
        f"{prefix}.attn.c_attn.bias": np.concatenate([t["q.bias"], t["k.bias"], t["v.bias"]]),
        f"{prefix}.attn.c_proj.weight": t["o.weight"].T, f"{prefix}.attn.c_proj.bias": t["o.bias"],
        f"{prefix}.mlp.c_fc.weight": t["fc1.weight"].T, f"{prefix}.mlp.c_fc.bias": t["fc1.bias"],
        f"{prefix}.mlp.c_proj.weight": t["fc2.weight"].T, f"{prefix}.mlp.c_proj.bias": t["fc2.bias"],
    }  # fmt: skip
    return out


def optimizer_step(loss: torch.Tensor, opt: torch.optim.Optimizer, sched) -> None:
    """One step of training: gradients of `loss`, the optimizer's step, the schedule's."""
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


def char_batch(train: torch.Tensor, ctx: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """32 random windows of `ctx` training characters and the characters that follow each position."""
    start = torch.randint(0, len(train) - ctx - 1, (32,), generator=g)
    x = torch.stack([train[s : s + ctx] for s in start])
    return x, torch.stack([train[s + 1 : s + ctx + 1] for s in start])


def fine_tune_args(argv: list[str] | None, doc: str) -> tuple[Path, int]:
    """The fine-tuning scripts' command line (--out, --steps), with torch set up as training does
    (2 threads, deterministic algorithms)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "trained"))
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    return Path(args.out), args.steps


def char_gpt_weights(model: CharGPT) -> dict[str, np.ndarray]:
    """The character GPT's tensors under GPT-2's HF names (float32)."""
    weights = {"transformer.wte.weight": model.wte.weight, "transformer.wpe.weight": model.wpe.weight,
               "transformer.ln_f.weight": model.ln.weight, "transformer.ln_f.bias": model.ln.bias}  # fmt: skip
    out = {k: v.detach().numpy().astype(np.float32) for k, v in weights.items()}
    for i, blk in enumerate(model.blocks):
        out.update(_block_weights(f"transformer.h.{i}", blk, "gpt2"))
    return out


def held_out_metrics(logits_of, held: np.ndarray, ctx: int) -> tuple[float, float]:
    """(perplexity, next-character accuracy) of `logits_of(ids)` over the held-out windows of `ctx`."""
    he = torch.tensor(held[: (len(held) - 1) // ctx * ctx + 1].astype(np.int64))
    xs, ys = he[:-1].view(-1, ctx), he[1:].view(-1, ctx)
    with torch.no_grad():
        logits = logits_of(xs)
    nll = float(nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ys.reshape(-1)))
    return round(math.exp(nll), 4), round(float((logits.argmax(-1) == ys).float().mean()), 5)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train_vit(out: Path, epochs: int) -> dict:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.manual_seed(SEED)
    digits = load_digits()
    x = digits.images.astype(np.float32) / 16.0  # 17 grey levels 0..16 to [0, 1]
    xtr, xte, ytr, yte = train_test_split(x, digits.target, test_size=0.2, random_state=SEED, stratify=digits.target)
    model = ViT()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=epochs * math.ceil(len(xtr) / 64))
    xt, yt = torch.tensor(xtr)[:, None], torch.tensor(ytr)
    xe, ye = torch.tensor(xte)[:, None], torch.tensor(yte)
    log = []
    g = torch.Generator().manual_seed(SEED)
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=g)
        total = 0.0
        for i in range(0, len(xt), 64):
            idx = perm[i : i + 64]
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            optimizer_step(loss, opt, sched)
            total += float(loss.detach()) * len(idx)
        model.eval()
        with torch.no_grad():
            acc = float((model(xe).argmax(-1) == ye).float().mean())
        log.append({"epoch": ep + 1, "train_loss": round(total / len(xt), 5), "test_accuracy": round(acc, 5)})
    w = {"vit.embeddings.patch_embeddings.projection.weight": model.embed.weight,
         "vit.embeddings.patch_embeddings.projection.bias": model.embed.bias,
         "vit.embeddings.cls_token": model.cls, "vit.embeddings.position_embeddings": model.pos,
         "vit.layernorm.weight": model.ln.weight, "vit.layernorm.bias": model.ln.bias,
         "classifier.weight": model.head.weight, "classifier.bias": model.head.bias}  # fmt: skip
    weights = {k: v.detach().numpy().astype(np.float32) for k, v in w.items()}
    for i, blk in enumerate(model.blocks):
        weights.update(_block_weights(f"vit.encoder.layer.{i}", blk, "vit"))
    np.savez_compressed(out / "vit_digits.npz", **weights)
    np.savez_compressed(out / "digits_test.npz", images=xte, labels=yte.astype(np.int64))
    export_digits_calibration(out)
    config = {"model_type": "vit", "architectures": ["ViTForImageClassification"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "hidden_act": "gelu",
              "layer_norm_eps": 1e-12, "image_size": 8, "patch_size": 2, "num_channels": 1, "num_labels": 10,
              "qkv_bias": True}  # fmt: skip
    (out / "vit_digits.config.json").write_text(json.dumps(config, indent=1) + "\n")
    return {"data": "sklearn.datasets.load_digits (UCI ML hand-written digits, 1,797 8x8 images), pixels / 16, "
            f"stratified train_test_split(test_size=0.2, random_state={SEED})", "train": len(xtr), "test": len(xte),
            "epochs": log, "float_test_accuracy": log[-1]["test_accuracy"]}  # fmt: skip


def export_digits_calibration(out: Path, n: int = 256) -> None:
    """The first `n` images of the ViT's training split, for calibrating quantization without the test set."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits.images.astype(np.float32) / 16.0
    xtr, _, ytr, _ = train_test_split(x, digits.target, test_size=0.2, random_state=SEED, stratify=digits.target)
    np.savez_compressed(out / "digits_calib.npz", images=xtr[:n], labels=ytr[:n].astype(np.int64))


def _char_text() -> tuple[str, list[dict]]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = [lib / n for n in CHAR_SOURCES]
    text = "".join(f.read_text(encoding="utf-8") for f in files)
    return text, [{"file": f"{{stdlib}}/{f.name}", "sha256": _sha(f), "chars": len(f.read_text())} for f in files]


def _char_ids() -> tuple[np.ndarray, int, list[dict]]:
    """The text as 7-bit ids (others as '?'), where the held-out last 10% starts, and the sources."""
    text, sources = _char_text()
    ids = np.frombuffer(text.encode("ascii", "replace"), np.uint8).astype(np.int64)
    ids[ids >= VOCAB] = ord("?")
    return ids, int(len(ids) * 0.9), sources


def export_char_calibration(out: Path, n: int = 32, ctx: int = 64) -> None:
    """`n` windows of `ctx` characters from the character GPT's training split, evenly spaced, for
    calibrating quantization without the held-out text; refused unless the sources are the logged ones."""
    ids, split, sources = _char_ids()
    log = json.loads((out / "char_gpt.log.json").read_text())
    if sources != log["sources"]:
        raise SystemExit("this Python's standard-library sources differ from char_gpt.log.json's (Python 3.11.7)")
    starts = np.linspace(0, split - ctx, n).astype(np.int64)
    np.savez_compressed(out / "char_calib.npz", ids=np.stack([ids[s : s + ctx] for s in starts]).astype(np.uint8))


def train_char_gpt(out: Path, steps: int) -> dict:
    torch.manual_seed(SEED)
    ids, split, sources = _char_ids()
    train, held = torch.tensor(ids[:split]), ids[split:]
    model = CharGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, total_steps=steps)
    g = torch.Generator().manual_seed(SEED)
    ctx, log = 64, []
    for step in range(1, steps + 1):
        model.train()
        x, y = char_batch(train, ctx, g)
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        optimizer_step(loss, opt, sched)
        if step % (steps // 10) == 0 or step == steps:
            ppl, acc = held_out_metrics(model, held, ctx)  # the model has no dropout: no eval mode needed
            log.append({"step": step, "train_loss": round(float(loss.detach()), 5), "held_out_perplexity": ppl,
                        "held_out_next_char_accuracy": acc})  # fmt: skip
    np.savez_compressed(out / "char_gpt.npz", **char_gpt_weights(model))
    np.savez_compressed(out / "char_eval.npz", ids=held.astype(np.uint8))
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 128, "n_layer": 2, "n_head": 4,
              "n_inner": 512, "vocab_size": VOCAB, "n_positions": ctx, "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}  # fmt: skip
    (out / "char_gpt.config.json").write_text(json.dumps(config, indent=1) + "\n")
    return {"data": "7-bit ASCII of Python standard-library sources (other characters as '?'); the last 10% held out",
            "sources": sources, "python": sys.version.split()[0], "train_chars": split, "held_out_chars": len(held),
            "steps": steps, "batch": 32, "context": ctx, "log": log, "float_held_out": log[-1]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "trained"))
    ap.add_argument("--vit-epochs", type=int, default=60)
    ap.add_argument("--gpt-steps", type=int, default=3000)
    ap.add_argument(
        "--calibration-only", action="store_true", help="write digits_calib.npz and char_calib.npz only (no training)"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.calibration_only:
        export_digits_calibration(out)
        export_char_calibration(out)
        return 0
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    for name, fn, n in (("vit_digits", train_vit, args.vit_epochs), ("char_gpt", train_char_gpt, args.gpt_steps)):
        t0 = time.time()
        rec = fn(out, n)
        rec.update(model=name, seed=SEED, torch=torch.__version__, wall_s=round(time.time() - t0, 1),
                   command="python validation/trained/train.py")  # fmt: skip
        (out / f"{name}.log.json").write_text(json.dumps(rec, indent=1) + "\n")
        if name == "char_gpt":
            export_char_calibration(out)
        final = rec.get("float_test_accuracy", rec.get("float_held_out"))
        print(f"{name}: {final} in {rec['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
