"""Benchmark: map + simulate BERT-base s128 INT8 on nv_full end to end, then every zoo preset.

Prints wall time of a cold run (empty caches) and a warm run in the same process, the tiling-search time
per unique conv layer, the speedup of each searched tiling over the naive one (nvdla_mapper.naive_plan), and
the cold mapping time of every `nvdla zoo` preset on nv_small, nv_large and nv_full (issue 15: each
under 5 s) with the total.
Run: .venv/bin/python benchmarks/bench_map.py [--zoo-only]
"""

from __future__ import annotations

import sys
import time

from nvdla_mapper import naive_plan, search_plan
from nvdla_mapper import passes as mp
from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.lowering.rules import LoweringContext
from nvdla_sim import ConvLayer, Precision, load_config, simulate


def clear_caches() -> None:
    search_plan.cache_clear()
    mp._simulate_cached.cache_clear()


def zoo_times() -> None:
    """Cold mapping time of every preset on the three shipped builds."""
    from nvdla_mapper.frontends.cnn import CNN_PRESETS
    from nvdla_mapper.frontends.resolve import model_graph

    names = [*PRESETS, *CNN_PRESETS]
    configs = ("nv_small", "nv_large", "nv_full")
    print(f"\n{'preset':<18}" + "".join(f"{c:>11}" for c in configs))
    total, worst = 0.0, (0.0, "")
    for name in names:
        row = []
        for c in configs:
            hw = load_config(c)
            clear_caches()
            t0 = time.perf_counter()
            mp.map_model(model_graph(name), hw, precision=Precision.INT8)  # each preset's own tokens (128 for text)
            dt = time.perf_counter() - t0
            total += dt
            worst = max(worst, (dt, f"{name} on {c}"))
            row.append(dt)
        print(f"{name:<18}" + "".join(f"{t:>10.2f}s" for t in row))
    print(f"total {total:.1f} s for {len(names) * len(configs)} mappings; slowest {worst[1]} {worst[0]:.2f} s")


def main() -> None:
    if "--zoo-only" in sys.argv:
        zoo_times()
        return
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

    ctx = LoweringContext.of(hw=hw, precision=Precision.INT8)
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
    zoo_times()


if __name__ == "__main__":
    main()
