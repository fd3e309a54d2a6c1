"""Benchmark: how map time and peak memory grow with the sequence length of a prefill (issue 30, item 2).

Maps BERT-base on nv_full at sequence lengths from 512 up (positions extended past 512 as
`nvdla map ... --extend-positions` does), each in a fresh process, and prints its wall time, its peak
resident memory and the growth exponent against the previous length (1.0: linear; the issue's target
is no worse than linear, and at most 15 s and 600 MB at 32,768).

Run: .venv/bin/python benchmarks/bench_prefill.py [--max 32768] [--hw nv_full] [--model bert-base]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

CHILD = """
import dataclasses, json, sys, time
from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.passes import map_model
from nvdla_sim import load_config
from nvdla_sim.precision import Precision
model, hw_name, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = preset(model)
spec = dataclasses.replace(spec, max_positions=max(seq, spec.max_positions or 0))
t0 = time.perf_counter()
res = map_model(build_graph(spec, batch=1, seq=seq, head="none"), load_config(hw_name), precision=Precision.INT8, seq=seq)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cycles": res.total_cycles}))
"""


def run(model: str, hw: str, seq: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, model, hw, str(seq)], capture_output=True, text=True, check=True)
    total = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    d = json.loads(out.stdout.strip().splitlines()[-1])
    # ru_maxrss of children is the largest child so far: with lengths in increasing order it is this one's
    return {**d, "process_s": total, "peak_mb": max(peak_kb, before) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=8192, help="longest sequence (default 8192; the issue's is 32768)")
    ap.add_argument("--hw", default="nv_full")
    ap.add_argument("--model", default="bert-base")
    args = ap.parse_args()
    seqs = [s for s in (512, 1024, 2048, 4096, 8192, 16384, 32768) if s <= args.max]
    print(f"{args.model} prefill on {args.hw}: map time and peak memory against sequence length")
    print(f"{'seq':>6} {'map s':>8} {'process s':>10} {'peak MB':>8} {'time exp':>9} {'cycles':>15}")
    prev = None
    for s in seqs:
        r = run(args.model, args.hw, s)
        exp = "" if prev is None else f"{math.log(r['wall_s'] / prev['wall_s']) / math.log(s / prev['seq']):9.2f}"
        print(f"{s:>6} {r['wall_s']:8.2f} {r['process_s']:10.2f} {r['peak_mb']:8.0f} {exp:>9} {r['cycles']:>15,}")
        prev = {**r, "seq": s}


if __name__ == "__main__":
    main()
