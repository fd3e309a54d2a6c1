"""How fast a driver's whole-network log replays (issue 57 target: ResNet-50's 14.6k-write log in at most 5 s).

Each log runs in a fresh process as `nvdla simulate --trace-test` would (parse, decode the driver's sequence,
time every operation, replay), twice: the first includes the model's cold caches, the second its warm ones.
The logs are other projects' files: give the checkouts (vineetbitsp/RISC-V-NVDLA, suchandler96/gem5-NVDLA).

    .venv/bin/python benchmarks/bench_driver_log.py --risc-v-nvdla CHECKOUT [--gem5-nvdla CHECKOUT]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from nvdla_validation.nvdla_sw.driver_logs import LOGS

_RUN = "import sys; from nvdla_sim.config import load_config; from nvdla_sim.program.run import run_program; "
_RUN += "print(run_program(sys.argv[1], load_config(sys.argv[2])).cycles)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--risc-v-nvdla", type=Path)
    ap.add_argument("--gem5-nvdla", type=Path)
    args = ap.parse_args()
    roots = {"risc_v_nvdla": args.risc_v_nvdla, "gem5_nvdla": args.gem5_nvdla}
    print(f"{'log':<20}{'lines':>8}{'cycles':>14}{'first s':>9}{'again s':>9}")
    for name, (repo, rel, hw) in LOGS.items():
        if roots[repo] is None or not (roots[repo] / rel).is_file():
            continue
        path = roots[repo] / rel
        walls = []
        for _ in range(2):
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", _RUN, str(path), hw], capture_output=True, text=True, check=True
            )
            walls.append(time.perf_counter() - t0)
        lines = sum(1 for _ in path.open())
        print(f"{name:<20}{lines:>8,}{int(out.stdout):>14,}{walls[0]:>9.2f}{walls[1]:>9.2f}")


if __name__ == "__main__":
    main()
