"""A fingerprint of every figure the main commands print, for refactors that must not change one (issue 56:
"behaviour is unchanged ... compare a hash of every figure").

Runs, in this process, the README job (BERT-base s128 on nv_full, and on nv_full's testbench config with
its separate write channel), GPT-2 128 + 128 generation on nv_full (batch 1 and 4), GPT-2 64 + 64 on
nv_small and nv_large, a 60-request Poisson serving run on nv_full and a 40-request chunked-prefill one
with swap preemption, a ResNet-50 map on nv_small, and T5's generation; prints a SHA-256 per run over its JSON figures (every key
of MapResult.to_dict / GenerateResult.to_dict / ServeResult.to_dict, floats as written; options and wall
times left out; the config echoed back, hw_config, too) and one over all of them. Run it before and after a change and compare the lines:

    .venv/bin/python benchmarks/figures_hash.py [--out hashes.json] [--only NAME] [--dump DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from nvdla_mapper.frontends.presets import preset
from nvdla_mapper.frontends.resolve import model_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.generate import generate
from nvdla_mapper.studies.serve import (
    Policy,
    Preemption,
    ServeSettings,
    SimulatedCosts,
    kv_capacity_blocks,
    poisson_requests,
    simulate_serving,
)
from nvdla_sim import Precision, load_config

INT8 = Precision.INT8


def _map(model: str, hw: str, **kw) -> Callable[[], dict]:
    return lambda: map_model(model_graph(model, **kw), load_config(hw), precision=INT8).to_dict()


def _generate(model: str, hw: str, prompt: int, new: int, batch: int) -> Callable[[], dict]:
    return lambda: generate(preset(model), load_config(hw), prompt=prompt, new_tokens=new, batch=batch).to_dict()


def _serve(settings: ServeSettings | None = None, n: int = 60, rate: float = 40.0) -> dict:
    spec, hw = preset("gpt2"), load_config("nv_full").with_values(**{"memory.dram_size_gib": 0.2})
    s = settings or ServeSettings()
    reqs = poisson_requests(n, rate, prompt=128, output=32, clock_mhz=hw.clock_mhz, seed=0)
    res = simulate_serving(
        reqs, SimulatedCosts(spec, hw, INT8), capacity_blocks=kv_capacity_blocks(spec, hw, INT8, 16), settings=s
    )
    res.clock_mhz = hw.clock_mhz
    return {**res.to_dict(), "requests_csv": res.request_rows()}


RUNS: dict[str, Callable[[], dict]] = {
    "readme_bert_base_nv_full": _map("bert-base", "nv_full", seq=128),
    "resnet50_nv_small": _map("resnet50", "nv_small"),
    "gpt2_128_128_nv_full_b1": _generate("gpt2", "nv_full", 128, 128, 1),
    "gpt2_128_128_nv_full_b4": _generate("gpt2", "nv_full", 128, 128, 4),
    "gpt2_64_64_nv_small": _generate("gpt2", "nv_small", 64, 64, 1),
    "gpt2_64_64_nv_large": _generate("gpt2", "nv_large", 64, 64, 1),
    "t5_base_32_8_nv_full": _generate("t5-base", "nv_full", 32, 8, 1),
    "serve_gpt2_60_nv_full": _serve,
    # a testbench build (separate AXI write channel, BDMA): the memory's channels and the copies
    "readme_bert_base_nv_full_rtl_tb": _map("bert-base", "nv_full_rtl_tb", seq=128),
    # chunked prefill with swap preemption: the other policy and preemption of the serving loop
    "serve_gpt2_40_chunked_swap_nv_full": lambda: _serve(
        ServeSettings(policy=Policy.CHUNKED_PREFILL, preemption=Preemption.SWAP, chunk_tokens=64), n=40, rate=80.0
    ),
}


# not figures: the config echoed back (a new config section changes it, no figure)
NOT_FIGURES = {"hw_config"}


def _figures(doc):
    if isinstance(doc, dict):
        return {k: _figures(v) for k, v in doc.items() if k not in NOT_FIGURES}
    if isinstance(doc, list):
        return [_figures(v) for v in doc]
    return doc


def digest(doc: dict) -> str:
    return hashlib.sha256(json.dumps(_figures(doc), sort_keys=True, default=str).encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the hashes as JSON")
    ap.add_argument("--only", choices=sorted(RUNS), help="one run")
    ap.add_argument("--dump", help="also write each run's figures as DIR/NAME.json (to diff two trees' figures)")
    args = ap.parse_args()
    hashes = {}
    for name, run in RUNS.items():
        if args.only and name != args.only:
            continue
        t0 = time.perf_counter()
        doc = run()
        hashes[name] = digest(doc)
        if args.dump:
            Path(args.dump).mkdir(parents=True, exist_ok=True)
            text = json.dumps(_figures(doc), sort_keys=True, indent=1, default=str)
            (Path(args.dump) / f"{name}.json").write_text(text + "\n")
        print(f"{name:<28} {hashes[name]}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"{'all':<28} {digest(hashes)}")
    if args.out:
        Path(args.out).write_text(json.dumps(hashes, indent=1) + "\n")


if __name__ == "__main__":
    main()
