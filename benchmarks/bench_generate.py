"""Benchmark: how long `nvdla generate gpt2 --prompt 128 --new-tokens 128` takes to simulate.

Prints the wall time of a cold run (empty per-layer caches) and a warm one in the same process, per
config, with the modelled time to first token and per-token latency. `--tinyllama PROMPT NEW` times
instead the issue-30 case: TinyLlama-1.1B's config.json (22 layers, hidden 2048, 32 heads, 4 KV heads)
on nv_full, with the wall time per generated token and the peak memory (targets: 2,048 + 2,048 in at
most 10 s; GPT-2 128 + 128 in at most 1 s). `--llama2-7b PROMPT NEW --tp 4` times issue 58's case:
LLaMA-2-7B's config.json (32 layers, hidden 4096, 32 heads, 4,096 positions) split over four nv_full
(`--tp-dram shared`: on one DRAM; target: 2,048 + 2,048 in at most 10 s). `--precision` and
`--kv-precision` set the model's and the KV caches' precisions (the KV-cache what-if; its modelled
figures go to docs/mapping.md).
Run: .venv/bin/python benchmarks/bench_generate.py [--tinyllama 256 256 [--precision fp16 --kv-precision int8]
     [--kv-plan length]] [--llama2-7b 2048 2048 --tp 4 [--tp-dram shared]] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from nvdla_mapper.frontends.presets import preset
from nvdla_mapper.passes import _simulate_cached
from nvdla_mapper.search.tiling_search import search_plan
from nvdla_mapper.studies.generate import generate
from nvdla_sim import Precision, load_config

TINYLLAMA = {
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
    "num_hidden_layers": 22, "num_key_value_heads": 4, "max_position_embeddings": 4096, "vocab_size": 32000,
}  # fmt: skip
LLAMA2_7B = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096, "vocab_size": 32000,
    "rms_norm_eps": 1e-05,
}  # fmt: skip


def decoder(
    prompt: int,
    new: int,
    precision: Precision = Precision.INT8,
    kv: Precision | None = None,
    kv_plan: str = "bucket",
    jobs: int = 1,
    *,
    config: dict = TINYLLAMA,
    name: str = "TinyLlama",
    tp: int = 1,
    tp_dram: str = "own",
) -> None:
    from nvdla_mapper.frontends.hf_config import from_hf_config

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.json"
        p.write_text(json.dumps(config))
        spec = from_hf_config(p)
    t0 = time.perf_counter()
    r = generate(
        spec, load_config("nv_full"), prompt=prompt, new_tokens=new, precision=precision, kv_precision=kv,
        kv_plan=kv_plan, jobs=jobs, tensor_parallel=tp, tp_dram=tp_dram,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    # the largest process's peak (the forked processes start from this one's memory)
    peak = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    d = r.to_dict()
    print(
        f"{name} {prompt} + {new} on {f'{tp} x ' if tp > 1 else ''}nv_full{' (one DRAM)' if tp_dram == 'shared' else ''} "
        f"({precision.value}, KV {d['kv_precision']}, planned per "
        f"{kv_plan}, {jobs} process{'es' if jobs > 1 else ''}): simulate {wall:.1f} s "
        f"({wall / new * 1000:.0f} ms per generated token), peak {peak:.0f} MB | TTFT {d['ttft_ms']:.2f} ms, "
        f"median step {d['per_token_ms']['median_step']:.3f} ms, last step {d['per_token_ms']['last_step']:.3f} ms, "
        f"{d['dram_bytes_per_token']:,} DRAM bytes per token, KV {d['kv_bytes_per_token']:,} bytes per position"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinyllama", nargs=2, type=int, metavar=("PROMPT", "NEW"), help="time TinyLlama instead")
    ap.add_argument("--precision", default="int8", help="with --tinyllama: the model's precision")
    ap.add_argument("--kv-precision", default=None, help="with --tinyllama: the KV caches' precision")
    ap.add_argument("--kv-plan", default="bucket", help="where cache attention is planned: bucket or length")
    ap.add_argument("--jobs", type=int, default=1, help="processes the decode steps are shared out to")
    ap.add_argument("--llama2-7b", nargs=2, type=int, metavar=("PROMPT", "NEW"), help="time LLaMA-2-7B instead")
    ap.add_argument("--tp", type=int, default=1, help="with --llama2-7b: instances the model is split over")
    ap.add_argument("--tp-dram", default="own", choices=["own", "shared"], help="with --llama2-7b --tp")
    args = ap.parse_args()
    if not args.llama2_7b and (args.tp != 1 or args.tp_dram != "own"):
        ap.error("--tp and --tp-dram go with --llama2-7b")
    if args.llama2_7b:
        kv = Precision.parse(args.kv_precision) if args.kv_precision else None
        decoder(*args.llama2_7b, Precision.parse(args.precision), kv, args.kv_plan, args.jobs, config=LLAMA2_7B,
                  name="LLaMA-2-7B", tp=args.tp, tp_dram=args.tp_dram)  # fmt: skip
        return
    if args.tinyllama:
        kv = Precision.parse(args.kv_precision) if args.kv_precision else None
        decoder(*args.tinyllama, Precision.parse(args.precision), kv, args.kv_plan, args.jobs)
        return
    for name in ("nv_small", "nv_large", "nv_full"):
        hw = load_config(name)
        search_plan.cache_clear()
        _simulate_cached.cache_clear()
        t0 = time.perf_counter()
        r = generate(preset("gpt2"), hw, prompt=128, new_tokens=128, jobs=args.jobs)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        generate(preset("gpt2"), hw, prompt=128, new_tokens=128, jobs=args.jobs)
        warm = time.perf_counter() - t0
        d = r.to_dict()
        print(
            f"{name:<9} simulate cold {cold:5.2f} s, warm {warm:5.2f} s (warm/cold {warm / cold:.2f}) | "
            f"TTFT {d['ttft_ms']:.2f} ms, median step {d['per_token_ms']['median_step']:.3f} ms, "
            f"{d['tokens_per_s_per_sequence']:.1f} tokens/s"
        )


if __name__ == "__main__":
    main()
