"""Run NVIDIA's nv_small regression loadables, as the DLA firmware programs them, on NVIDIA's nv_small RTL, and
compare their time and output with the model's.

    python -m nvdla_validation.nvdla_rtl.loadable_rtl HW_SRC SW_CHECKOUT [--project nv_large|nv_full] [--work DIR]
                                                       [--out FILE]

--project nv_large runs the `_large` loadables on master's nv_large build against nv_large_rtl_tb, with the
register addresses of the built tree; its rows go to nvdla_rtl_loadables_nv_large.json. --project nv_full runs
the loadables without a build's suffix (compiled for nv_full: BDMA, CDP, CONV_D, NN (LeNet in FP16), PDP, RBK,
SDP_X1) on branch nvdlav1's nv_full against nv_full_rtl_tb.

HW_SRC is an nvdla/hw checkout or bare mirror, built by build.sh with the testbench whose reads wait
(NVDLA_TB_READS=wait); SW_CHECKOUT an nvdla/sw checkout holding regression/flatbufs (and regression/golden).
Each `_small` loadable is run through nvdla_sim.program.loadable.run on nv_small_rtl_tb: its memories (the
loadable's blobs at the model's addresses), then the firmware's register accesses in order, as a driver's log
replays (driver_log_rtl.convert: a read of S_INTR_STATUS waits for the done bits it showed, the CBUF flush
poll for its value, other reads compare nothing), and last a dump of the output tensor's buffer that the
testbench compares byte for byte with the model's (nvdla.cpp's dump_mem). The rows
(validation/data/nvdla_rtl_loadables.json) hold whether the RTL's output equals the model's (and so NVIDIA's
golden, which the model's equals), the RTL's cycles from the first register write to the last access's
completion and the model's for the same span, and per operation both from its enable write to the response
of the read that showed its end.
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.program.loadable.container import Interface
from nvdla_sim.program.loadable.run import run_loadable
from nvdla_validation.nvdla_rtl.driver_log_rtl import convert, run_trace, timed_rows, write_rtl_rows
from nvdla_validation.nvdla_rtl.run_reference import branch_of, build, registers, tree_of
from nvdla_validation.nvdla_sw.loadables import find

OUT = Path(__file__).resolve().parents[1] / "data" / "nvdla_rtl_loadables.json"
HW = "nv_small_rtl_tb"
# the RTL builds the script runs, with the config that models each and the suffix of its loadables (nv_full's
# have none: the loadables without a build's suffix are compiled for nv_full)
PROJECTS = {"nv_small": ("nv_small_rtl_tb", "_small"), "nv_large": ("nv_large_rtl_tb", "_large"),
            "nv_full": ("nv_full_rtl_tb", "")}  # fmt: skip
_OTHER_BUILDS = ("_small", "_large", "_large_random")


def for_project(name: str, project: str) -> bool:
    """Whether regression loadable `name` is compiled for `project`'s build (its name's suffix)."""
    suffix = PROJECTS[project][1]
    return name.endswith(suffix) if suffix else not name.endswith(_OTHER_BUILDS)


_KEEP = "write to nvdla|read response from nvdla|PASS|FAIL|ERROR|memory dump matched"


def trace(run, hw, regs: dict | None = None) -> bytes:
    """The testbench's binary trace: load_mem of every filled memory, the firmware's accesses, dump_mem of
    the output buffer against the model's bytes."""
    out = bytearray()
    lo = run.net.loadable
    for m in lo.memories:
        if m.contents:
            data = lo.contents(m.id)
            out += struct.pack("=BII", 5, run.memory.bases[m.id], len(data)) + data
    out += convert(run.program, hw.driver.address_map, regs)[:-1]  # without its end mark
    base, size = _dla_output(run)
    expected = bytes(run.memory_image.read(base, size))
    name = b"output.bin"
    out += struct.pack("=BII", 4, base, len(expected)) + expected + struct.pack("=I", len(name)) + name
    return bytes(out + struct.pack("=B", 0xFF))


def _dla_output(run) -> tuple[int, int]:
    """(address, bytes) the RTL's output is checked at: the loadable's bound output, or, where CPU tasks run
    beside the DLA task (NN_L0_0: a CPU softmax writes the bound output, which the RTL never runs), the
    destination cube of the DLA task's last operation."""
    lo = run.net.loadable
    if all(t.interface is Interface.DLA1 for t in lo.tasks):
        (tensor,) = [t for t in lo.tensors if t.mem_id in run.net.outputs()][:1]
        return run.memory.bases[tensor.mem_id] + tensor.offset, tensor.size
    last = next(op for op in reversed(run.net.operations) if getattr(op.surface, "dst_data", None) is not None)
    return run.memory.cube(last.surface.dst_data), last.surface.dst_data.size


def compare(name: str, path: Path, binary: Path, rundir: Path, *, timeout: float, hw_name: str = HW,
            regs: dict | None = None) -> dict:  # fmt: skip
    hw = load_config(hw_name)
    run = run_loadable(path, hw)
    t0 = time.perf_counter()
    text = run_trace(binary, trace(run, hw, regs), rundir, timeout=timeout, keep=_KEEP)
    if text is None:
        return {"name": name, "status": "timeout", "reason": f"no end within {timeout:.0f} s"}
    timed = timed_rows(run.program, text, run.run)
    if "reason" in timed:
        return {"name": name, "status": "fail", **timed}
    return {
        "name": name,
        "status": "pass" if "memory dump matched reference" in text and "FAIL" not in text else "output mismatch",
        "model_md5": run.outputs[0].md5 if run.outputs else None,
        **timed,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="nvdla/hw checkout or bare git mirror")
    ap.add_argument("sw", type=Path, help="nvdla/sw checkout (regression/flatbufs)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "nvdla_rtl_ref", help="build folder")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per loadable")
    ap.add_argument("--project", choices=sorted(PROJECTS), default="nv_small", help="the RTL build")
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT.name}, or nvdla_rtl_loadables_<project>.json")
    args = ap.parse_args(argv)
    out = args.out or (OUT if args.project == "nv_small" else OUT.with_name(f"nvdla_rtl_loadables_{args.project}.json"))
    binary = build(args.src, args.work, args.project, waiting_reads=True)
    hw_name, suffix = PROJECTS[args.project]
    # the built tree's own register addresses (master's builds place the units as nv_small does)
    regs = registers(args.src, tree_of(args.work, args.project), args.project)
    found, _ = find(args.sw)
    rows = []
    for name, path, _golden in found:
        if not for_project(name, args.project):
            continue
        row = compare(name, path, binary, args.work / f"loadables-{args.project}" / name, timeout=args.timeout,
                      hw_name=hw_name, regs=regs)  # fmt: skip
        rows.append(row)
        if "rtl_cycles" in row:
            print(f"{name:<22} {row['status']:<16} RTL {row['rtl_cycles']:>9,}  model {row['model_cycles']:>9,}  "
                  f"({row['model_cycles'] / row['rtl_cycles'] - 1:+.1%})", file=sys.stderr)  # fmt: skip
        else:
            print(f"{name:<22} {row['status']}: {row['reason']}", file=sys.stderr)
    flag = "" if args.project == "nv_small" else f" --project {args.project}"
    write_rtl_rows(
        out,
        args.src,
        command=f"python -m nvdla_validation.nvdla_rtl.loadable_rtl HW_SRC SW_CHECKOUT{flag}",
        rows=rows,
        what=f"NVIDIA's {args.project} regression loadables ({'*' + suffix if suffix else 'no build suffix'}), "
        "programmed as the DLA firmware does (the "
        f"model's firmware), on NVIDIA's {args.project} RTL (reads that wait), against the model {hw_name} "
        "(docs/driver_programs.md)",
        branch=branch_of(args.project),
        hw=hw_name,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
