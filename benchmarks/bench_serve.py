"""Benchmark: how long `nvdla serve` takes to simulate a Poisson stream of requests (issue 30, item 3).

Prints the wall time, the peak memory, how many distinct iteration shapes were mapped and the run's
percentiles (target: GPT-2 on nv_full with 1,000 requests in at most 60 s).
Run: .venv/bin/python benchmarks/bench_serve.py [--requests 100] [--rate 20] [--prompt 128] [--output 32]
     [--policy chunked-prefill --chunk-tokens 256] [--kv-plan length]
"""

from __future__ import annotations

import argparse
import resource
import time

from nvdla_mapper.frontends.presets import preset
from nvdla_mapper.studies.serve import (
    Policy,
    ServeSettings,
    SimulatedCosts,
    kv_capacity_blocks,
    poisson_requests,
    simulate_serving,
)
from nvdla_sim import Precision, load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--hw", default="nv_full")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--output", type=int, default=32)
    ap.add_argument("--policy", default="fcfs-prefill-first", help="fcfs-prefill-first or chunked-prefill")
    ap.add_argument("--chunk-tokens", type=int, default=256)
    ap.add_argument("--kv-plan", default="bucket", help="bucket or length (options.KvPlan)")
    args = ap.parse_args()
    spec, hw = preset(args.model), load_config(args.hw)
    reqs = poisson_requests(args.requests, args.rate, prompt=args.prompt, output=args.output, clock_mhz=hw.clock_mhz)
    costs = SimulatedCosts(spec, hw, kv_plan=args.kv_plan)
    t0 = time.perf_counter()
    settings = ServeSettings(policy=Policy(args.policy), chunk_tokens=args.chunk_tokens)
    res = simulate_serving(
        reqs,
        costs,
        capacity_blocks=kv_capacity_blocks(spec, hw, Precision.INT8, settings.block_tokens),
        settings=settings,
    )
    wall = time.perf_counter() - t0
    res.clock_mhz = hw.clock_mhz
    d = res.to_dict()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pct = d["percentiles"]
    print(
        f"{args.model} on {args.hw}: {args.requests} requests at {args.rate:g}/s ({args.prompt} + {args.output} tokens): "
        f"simulate {wall:.1f} s, peak {peak:.0f} MB, {costs.mapped[1]} distinct decode steps and "
        f"{costs.mapped[0]} prefill lengths mapped, {d['iterations']} iterations ({args.policy}) | "
        f"TTFT p50/p99 {pct['ttft_ms']['p50']:.2f}/{pct['ttft_ms']['p99']:.2f} ms, "
        f"TPOT p50/p99 {pct['tpot_ms']['p50']:.3f}/{pct['tpot_ms']['p99']:.3f} ms, "
        f"{d['throughput']['output_tokens_per_s']:,.0f} tokens/s"
    )


if __name__ == "__main__":
    main()
