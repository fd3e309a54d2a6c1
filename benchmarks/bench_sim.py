"""Benchmark: wall time to simulate one BERT-base FFN matmul (128 x 768 x 3072) on nv_full.

Prints wall time per simulation (median of repeats), simulated cycles per wall-second, and the ratio of
the timeline-recording run against the events-off run measured in the same process.
Run: .venv/bin/python benchmarks/bench_sim.py
"""

from __future__ import annotations

import statistics
import time

from nvdla_sim import ConvLayer, ConvShape, Precision, load_config, simulate_conv
from nvdla_sim.engine.tiling import default_plan


def _time(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    hw = load_config("nv_full")
    layer = ConvLayer("bert_base_ffn1", ConvShape.matmul(128, 768, 3072), Precision.INT8)
    plan = default_plan(layer, hw)
    stats = simulate_conv(layer, hw, plan)
    quiet = _time(lambda: simulate_conv(layer, hw, plan, record_events=False), 30)
    loud = _time(lambda: simulate_conv(layer, hw, plan, record_events=True), 30)
    print(
        f"layer                 {layer.name} {layer.shape.in_w * layer.shape.in_h}x{layer.shape.in_c}x{layer.shape.out_k} on {hw.fingerprint}"
    )
    print(
        f"simulated cycles      {stats.cycles:,} (MAC utilization {stats.mac_utilization:.1%}, {stats.detail.items} items)"
    )
    print(f"wall per simulation   {quiet * 1e3:.2f} ms (events off), {loud * 1e3:.2f} ms (events on)")
    print(f"simulated cycles/s    {stats.cycles / quiet:,.0f} (events off)")
    print(f"events-on / off ratio {loud / quiet:.2f}x")


if __name__ == "__main__":
    main()
