"""Benchmark: simulated cycles per wall-second of the RTL datapath, cocotb + Icarus vs amaranth.sim.

Same tile and back-pressure for both simulators, in one process; prints cycles/s and their ratio for an
nv_small-like (8 x 8) and an nv_full-like (64 x 32) array.
Run: .venv/bin/python benchmarks/bench_rtl.py
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

from nvdla_rtl.amaranth_sim import run_amaranth
from nvdla_rtl.verify import run_bench
from nvdla_sim import Precision, load_config
from nvdla_sim.datapath_model import datapath_params, stripe_beats


def main() -> None:
    rng = np.random.default_rng(0)
    for name, pixels, channels in (("nv_small", 32, 256), ("nv_full", 16, 128)):
        hw = load_config(name)
        p = datapath_params(hw, Precision.INT8)
        x = rng.integers(-128, 128, (pixels, channels))
        w = rng.integers(-128, 128, (p.cells, channels))
        ready = [bool(v) for v in rng.random(100_000) < 0.9]
        beats, sets = stripe_beats(x, w, p)
        t0 = time.perf_counter()
        run = run_amaranth(p, beats, sets, ready)
        am = run.cycles / (time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as d:
            res = run_bench(hw, Precision.INT8, x, w, ready_prob=0.9, seed=0, work_dir=d)
        ico = res.cycles_per_second
        print(
            f"{name:<9} {p.atomic_c}x{p.cells:<3} {res.simulated_cycles:>6} cycles  "
            f"icarus+cocotb {ico:>8,.0f} cycles/s  amaranth.sim {am:>8,.0f} cycles/s  ratio {ico / am:.2f}x  "
            f"({'pass' if res.passed else 'FAIL'}, RTL {res.rtl_cycles} = model {res.model_cycles})"
        )


if __name__ == "__main__":
    main()
