"""Fit the testbench driver profile's register costs (config.DRIVER_PROFILES["testbench"]) on NVIDIA's RTL.

    python -m nvdla_validation.nvdla_rtl.csb_pace SRC [--work DIR]

SRC is an nvdla/hw checkout or bare mirror (its nv_small trace tests; NVIDIA's files stay there). For each
committed nv_small row (validation/data/nvdla_rtl_nv_small.json), the RTL spent trace_cycles - op_cycles
from its first CSB write to its last op enable; its trace issued w register writes and p polls up to and
including that enable. A least-squares fit of cycles = a (w - 1) + b p + c gives a, the cycles a write
takes, and b, a read's; it prints them with the largest error of the fit.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from nvdla_sim.registers.trace_io import RegPoll, RegWrite, parse_program
from nvdla_validation.nvdla_rtl.run_reference import default_out, extract_tests


def fit(rows: list[dict], tests: Path) -> tuple[np.ndarray, float, int]:
    """((write, read, constant) cycles, largest error, rows used)."""
    x, y = [], []
    for r in rows:
        folder = tests / r["name"]
        if r.get("op_cycles") is None or r.get("trace_cycles") is None or not folder.is_dir():
            continue
        cmds = parse_program(folder).commands
        last = max(i for i, c in enumerate(cmds) if isinstance(c, RegWrite) and c.reg == "D_OP_ENABLE_0")
        writes = sum(isinstance(c, RegWrite) for c in cmds[: last + 1])
        polls = sum(isinstance(c, RegPoll) for c in cmds[: last + 1])
        x.append((writes - 1, polls, 1))
        y.append(r["trace_cycles"] - r["op_cycles"])
    a, b = np.array(x, float), np.array(y, float)
    coef = np.linalg.lstsq(a, b, rcond=None)[0]
    return coef, float(np.max(np.abs(a @ coef - b))), len(y)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="nvdla/hw checkout or bare git mirror")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "nvdla_rtl_ref")
    args = ap.parse_args(argv)
    rows = json.loads(default_out("nv_small").read_text())["rows"]
    (write, read, const), worst, n = fit(rows, extract_tests(args.src, args.work))
    print(
        f"{n} tests: {write:.2f} cycles a write, {read:.1f} a read (poll), {const:+.1f} fixed; largest error {worst:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
