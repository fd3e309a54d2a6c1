"""Benchmark: map + simulate BERT-base s128 INT8 on nv_full end to end.

Prints wall time of a cold run (empty caches) and a warm run in the same process, the tiling-search time
per unique conv layer, and the speedup of each searched tiling over the naive one (mapper.naive_plan).
Run: .venv/bin/python benchmarks/bench_map.py
"""

from __future__ import annotations

import time

from mapper import naive_plan, search_plan
from mapper import pipeline as mp
from mapper.lowering import LoweringContext
from mapper.zoo import PRESETS, build_graph
from nvdla_sim import ConvLayer, Precision, load_config, simulate


def main() -> None:
    hw = load_config("nv_full")
    g = build_graph(PRESETS["bert-base"], seq=128)
    t0 = time.perf_counter()
    res = mp.map_model(g, hw, precision=Precision.INT8, batch=1, seq=128)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    mp.map_model(g, hw, precision=Precision.INT8, batch=1, seq=128)
    warm = time.perf_counter() - t0
    print(f"bert-base s128 int8 on {hw.fingerprint}: {res.total_cycles:,} cycles = {res.latency_ms:.3f} ms")
    print(f"map+simulate wall     cold {cold:.2f} s, warm {warm:.3f} s ({len(res.results)} tasks)")

    ctx = LoweringContext(hw=hw, precision=Precision.INT8, host=mp.HostModel())
    tasks, _ = mp.lower_graph(g, ctx)
    unique = {t.layer.__class__(**{**t.layer.__dict__, "name": ""}) for t in tasks if isinstance(t.layer, ConvLayer)}
    print(
        f"{'unique conv layer (m x k x n)':<32}{'search s':>9}{'cands':>7}{'sims':>6}{'naive':>12}{'searched':>12}{'speedup':>9}"
    )
    search_plan.cache_clear()
    for layer in sorted(unique, key=lambda lay: -lay.macs):
        s = layer.shape
        t0 = time.perf_counter()
        r = search_plan(layer, hw)
        dt = time.perf_counter() - t0
        naive = simulate(layer, hw, naive_plan(layer, hw), record_events=False).cycles
        label = f"{s.in_w * s.in_h} x {s.in_c} x {s.out_k}"
        print(
            f"{label:<32}{dt:>9.3f}{r.candidates:>7}{r.simulated:>6}{naive:>12,}{r.stats.cycles:>12,}{naive / r.stats.cycles:>8.2f}x"
        )


if __name__ == "__main__":
    main()
