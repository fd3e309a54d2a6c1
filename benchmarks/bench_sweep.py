"""Benchmark: points per second of the 200-point BERT-base s128 sweep (examples/sweep_bert.toml),
local process pool (2 workers) vs a dask.distributed LocalCluster with 2 workers, same process.
Run: .venv/bin/python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from nvdla_mapper.studies.sweep import load_sweep, run_sweep


def main() -> None:
    from distributed import Client, LocalCluster

    spec = load_sweep(Path(__file__).resolve().parent.parent / "examples" / "sweep_bert.toml")
    n = len(spec.points())
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        local = run_sweep(spec, Path(d) / "local.sqlite", executor="local", workers=2).rows
        t_local = time.perf_counter() - t0
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        with cluster, Client(cluster) as client:
            t0 = time.perf_counter()
            dask_rows = run_sweep(spec, Path(d) / "dask.sqlite", executor="dask", scheduler=client).rows
            t_dask = time.perf_counter() - t0
    same = [{k: v for k, v in r.items() if k != "wall_s"} for r in local] == [
        {k: v for k, v in r.items() if k != "wall_s"} for r in dask_rows
    ]
    print(f"{n} points, bert-base s128 int8")
    print(f"local (2 processes)   {t_local:6.1f} s  {n / t_local:6.2f} points/s")
    print(f"dask LocalCluster (2) {t_dask:6.1f} s  {n / t_dask:6.2f} points/s  ({t_local / t_dask:.2f}x of local)")
    print(f"identical rows        {same}")


if __name__ == "__main__":
    main()
