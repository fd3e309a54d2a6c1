"""Benchmark: how long `nvdla generate gpt2 --prompt 128 --new-tokens 128` takes to simulate.

Prints the wall time of a cold run (empty per-layer caches) and a warm one in the same process, per
config, with the modelled time to first token and per-token latency.
Run: .venv/bin/python benchmarks/bench_generate.py
"""

from __future__ import annotations

import time

from nvdla_mapper.frontends.presets import preset
from nvdla_mapper.passes import _simulate_cached
from nvdla_mapper.search.tiling_search import search_plan
from nvdla_mapper.studies.generate import generate
from nvdla_sim import load_config


def main() -> None:
    for name in ("nv_small", "nv_large", "nv_full"):
        hw = load_config(name)
        search_plan.cache_clear()
        _simulate_cached.cache_clear()
        t0 = time.perf_counter()
        r = generate(preset("gpt2"), hw, prompt=128, new_tokens=128)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        generate(preset("gpt2"), hw, prompt=128, new_tokens=128)
        warm = time.perf_counter() - t0
        d = r.to_dict()
        print(
            f"{name:<9} simulate cold {cold:5.2f} s, warm {warm:5.2f} s (warm/cold {warm / cold:.2f}) | "
            f"TTFT {d['ttft_ms']:.2f} ms, median step {d['per_token_ms']['median_step']:.3f} ms, "
            f"{d['tokens_per_s_per_sequence']:.1f} tokens/s"
        )


if __name__ == "__main__":
    main()
