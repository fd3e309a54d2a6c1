"""The host CPU at hand, measured: ns per element of each kind of host work, memory bandwidth and one hand-off
(issue 57 step 4; the figures of a `per_element` host profile, nvdla_sim/config.py HOST_PROFILES).

    .venv/bin/python benchmarks/bench_host.py [--write FILE]

* Compute kinds: benchmarks/host_kernels.c (softmax over 128-score rows, LayerNorm over 768-value rows, GELU,
  a product, rotary over 64-value rows: BERT-base's and GPT-2's shapes), compiled here with the system's C
  compiler at -O2, one thread; the median of five runs of at least a million elements each.
* Memory: a copy of 256 MiB with numpy, one thread (bytes read plus bytes written per second), the median of
  five.
* One hand-off: in host_kernels.c, a thread blocked on a pipe woken by another and answering on a second
  pipe, half the round trip (the software side of an interrupt-driven hand-off: the wake-up and the switch;
  not the interrupt's own path through the kernel, nor cache maintenance), the median of 20,000.
Printed as a table; `--write` stores them with the CPU's name, the compiler and the date. The machine is
noisy (a 2-core VM): run it where the profile is to describe.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# kind: (row length, elements a run)
KERNELS = {
    "softmax": (128, 128 * 128 * 12),
    "layernorm": (768, 768 * 512),
    "activation": (3072, 3072 * 128),
    "elementwise": (768, 768 * 1024),
    "rotary": (64, 64 * 12 * 1024),
}


def compile_kernels(work: Path) -> tuple[Path, str]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("bench_host: no C compiler (cc, gcc or clang) on PATH")
    exe = work / "host_kernels"
    subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(HERE / "host_kernels.c"), "-lm"], check=True)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return exe, version


def kernel_ns(exe: Path, kind: str, row: int, n: int) -> float:
    runs = []
    for _ in range(5):
        out = subprocess.run([str(exe), kind, str(row), str(n), "5"], capture_output=True, text=True, check=True)
        runs.append(float(out.stdout.split()[1]))
    return statistics.median(runs)


def copy_gbs() -> float:
    a = np.ones(256 << 18, np.float32)  # 256 MiB
    b = np.empty_like(a)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        runs.append(2 * a.nbytes / (time.perf_counter() - t0) / 1e9)
    return statistics.median(runs)


def handoff_us(exe: Path) -> float:
    out = subprocess.run([str(exe), "handoff", "20000"], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[1])


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="store the figures as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exe, compiler = compile_kernels(Path(d))
        ns = {kind: kernel_ns(exe, kind, row, n) for kind, (row, n) in KERNELS.items()}
        hand = handoff_us(exe)
    gbs = copy_gbs()
    print(f"host: {cpu_name()}, {os.cpu_count()} cores; {compiler}")
    for kind, v in ns.items():
        print(f"  {kind:<12} {v:8.2f} ns per element")
    print(f"  memory       {gbs:8.2f} GB/s (a 256 MiB copy, read + write)")
    print(f"  hand-off     {hand:8.2f} us (a thread woken through a pipe, half the round trip)")
    if args.write:
        from nvdla_sim.files import write_json

        write_json(args.write, {
            "what": "the host CPU's figures for a per_element host profile (benchmarks/bench_host.py)",
            "command": ".venv/bin/python benchmarks/bench_host.py --write FILE",
            "date": datetime.date.today().isoformat(),
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "compiler": f"{compiler}, -O2",
            "ns_per_element": {k: round(v, 3) for k, v in ns.items()},
            "mem_gbs": round(gbs, 2),
            "handoff_us": round(hand, 2),
        })  # fmt: skip
        print(f"wrote {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
