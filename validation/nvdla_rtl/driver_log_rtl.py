"""Run a driver's whole-network register log on NVIDIA's nv_small RTL and compare it with the model's replay.

    python -m nvdla_validation.nvdla_rtl.driver_log_rtl SRC LOG [LOG ...] [--work DIR] [--out FILE]
                                                         [--no-clock-gating] [--convolutions-early]

SRC is an nvdla/hw checkout or bare mirror (built by build.sh with NVDLA_TB_READS=wait: nvdla.cpp's reads
poll until the register shows the value, as a driver's polling loop does; the stock testbench gives up after
10 tries). LOG is a kernel-mode driver's log (`.txn` of `write_reg`/`read_reg`, e.g. vineetbitsp/RISC-V-NVDLA's
`<net>/pmem/output.txn`). Each access is replayed in the log's order: writes as they are; a read of
GLB S_INTR_STATUS waits for the processors' done bits it newly showed in the log (the ends, as
program/sequence.py reads them; not CDMA's data/weight events, whose timing is CDMA's), a read of CDMA S_CBUF_FLUSH_STATUS for the value it showed, any other read is issued without a
compare (its cost, not its value, is the log's). The logs carry no memory contents: the testbench's memory
reads as zero (nv_small's timing does not depend on the values: no weight compression, no sparsity).

The rows (validation/data/nvdla_rtl_driver_logs.json) hold per log the RTL's cycles from the first register
write to the last read's response, the model's for the same span (program.sequence.replay at the
testbench profile), and per operation both from its enable write to the response of the read that showed
its end.

With the testbench's second-level clock gating on (nvdla.cpp's default), the driver's own order deadlocks
nv_small's RTL: CDMA's count of the weight entries in CBUF (wt_wr_dmatx_cnt, which holds back the weight
read responses) is clocked by CDMA's gated clock, so the releases CSC sends after CDMA went idle are lost, and
a next convolution whose weight banks the count then exceeds never takes its weights (docs/driver_programs.md,
"The RTL's deadlock"). --no-clock-gating builds the testbench with its clocks ungated
(tmc2slcg_disable_clock_gating), where the logs run whole as the driver wrote them. --convolutions-early replays the log with each convolution enabled
while the previous one runs (convolutions_early, the order that avoids the deadlock with gating on), on both
sides, into nvdla_rtl_driver_logs_convolutions_early.json.
"""

from __future__ import annotations

import argparse
import datetime
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.files import write_json
from nvdla_sim.processors import CONV
from nvdla_sim.program.run import run_program
from nvdla_sim.program.sequence import done_mask, status_reads
from nvdla_sim.registers.addresses import address_map
from nvdla_sim.registers.trace_io import Program, RegRead, RegWrite, parse_program
from nvdla_validation.nvdla_rtl.run_reference import build

OUT = Path(__file__).resolve().parents[1] / "data" / "nvdla_rtl_driver_logs.json"
HW = "nv_small_rtl_tb"
_TICK = re.compile(r"^\((\d+)\) (write to nvdla|read response from nvdla)")
_KEEP = "write to nvdla|read response from nvdla|nvdla-sim: dla_intr|PASS|FAIL|ERROR"
_WAITED = {("NVDLA_GLB", "S_INTR_STATUS_0"), ("NVDLA_CDMA", "S_CBUF_FLUSH_STATUS_0")}


def convert(prog: Program, map_name: str, regs: dict | None = None) -> bytes:
    """The log as nvdla.cpp's binary trace (2 write_reg ADDR DATA, 3 read_reg ADDR MASK DATA at word
    addresses, 0xFF end): a status read waits for the done bits it newly showed (set since the driver last
    cleared them), a flush-status read for its value, other reads compare nothing. The addresses from the
    build's map `map_name`, or from the built tree's register table `regs` (run_reference.registers)."""
    am = address_map(map_name)

    def word(unit: str, reg: str) -> int:
        if regs is None:
            return am.address(unit, reg) >> 2
        try:
            return regs[unit][reg]["addr"] >> 2
        except KeyError:
            raise NvdlaError(f"{unit}.{reg} is no register of the built tree") from None

    out = bytearray()
    ends = done_mask()
    new_bits = {at: new & ends for at, _, new in status_reads(prog)}  # not CDMA's data/weight events
    for at, c in enumerate(prog.commands):
        if not isinstance(c, RegWrite | RegRead):
            raise NvdlaError(f"{prog.where}:{c.line}: a driver's log holds register writes and reads only")
        addr = word(c.unit, c.reg)
        if isinstance(c, RegWrite):
            out += struct.pack("=BII", 2, addr, c.value)
        elif at in new_bits:
            out += struct.pack("=BIII", 3, addr, new_bits[at], new_bits[at])
        elif (c.unit, c.reg) in _WAITED:
            out += struct.pack("=BIII", 3, addr, c.mask, c.value)
        else:
            out += struct.pack("=BIII", 3, addr, 0, 0)
    return bytes(out + struct.pack("=B", 0xFF))


def rtl_marks(log: str) -> tuple[list[int], list[int]]:
    """Core clocks (two testbench ticks each) of every register write issued and every read's matching
    response, in order."""
    writes, reads = [], []
    for line in log.splitlines():
        m = _TICK.match(line)
        if m:
            (writes if m.group(2) == "write to nvdla" else reads).append(int(m.group(1)) // 2)
    return writes, reads


def run_trace(binary: Path, data: bytes, rundir: Path, *, timeout: float, keep: str = _KEEP) -> str | None:
    """Run a binary trace on the built testbench in `rundir`, keeping the log lines that match `keep` (the
    testbench logs every AXI request); its text, or None when it does not end within `timeout` s."""
    rundir.mkdir(parents=True, exist_ok=True)
    (rundir / "trace.bin").write_bytes(data)
    with open(rundir / "run.log", "w") as f:
        sim = subprocess.Popen(["stdbuf", "-oL", str(binary), "trace.bin"], cwd=rundir, stdout=subprocess.PIPE)
        grep = subprocess.Popen(["grep", "--line-buffered", "-E", keep], stdin=sim.stdout, stdout=f)
        sim.stdout.close()
        try:
            sim.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            sim.kill()
            return None
        grep.wait()
    return (rundir / "run.log").read_text()


def timed_rows(prog: Program, text: str, seq) -> dict:
    """The RTL's and the model's times of a replayed program: the span from its first write to its last
    access's completion (reads before the first write left out of both), and per operation from its enable write to the response of the read that showed
    its end (`seq`: program.sequence.SequenceRun); {"reason": ...} when the RTL did not issue them all."""
    writes, reads = rtl_marks(text)
    n_writes = sum(isinstance(c, RegWrite) for c in prog.commands)
    n_reads = sum(isinstance(c, RegRead) for c in prog.commands)
    if len(writes) != n_writes or len(reads) != n_reads or not writes:
        return {"reason": f"the RTL issued {len(writes)}/{n_writes} writes and completed {len(reads)}/{n_reads} reads"}
    mark, w, r = {}, iter(writes), iter(reads)
    for i, c in enumerate(prog.commands):
        if isinstance(c, RegWrite | RegRead):
            mark[i] = next(w) if isinstance(c, RegWrite) else next(r)
    ops = []
    for t in seq.operations:
        op = t.operation
        if op.ended_at is None or t.seen is None:
            continue
        ops.append({
            "name": op.name,
            "processors": "+".join(op.processors),
            "rtl_cycles": mark[op.ended_at] - mark[op.enabled_at],
            "model_cycles": round(t.seen - t.enabled),
        })  # fmt: skip
    # the same span on both sides: from the first write. The testbench logs a read's response, not its issue,
    # so reads before the first write (the firmware's pointer reads) are left out of the RTL's span and of
    # the model's: nothing is enabled then, so each took the profile's read cost in the model's replay
    first = next(i for i, c in enumerate(prog.commands) if isinstance(c, RegWrite))
    lead = sum(isinstance(c, RegRead) for c in prog.commands[:first]) * seq.costs[1]
    return {"writes": n_writes, "reads": n_reads, "rtl_cycles": max(writes[-1], *reads[-1:]) - writes[0],
            "model_cycles": round(seq.cycles - lead), "operations": ops}  # fmt: skip


def write_rtl_rows(out: Path, src: Path, *, what: str, command: str, rows: list[dict], branch: str = "nv_small",
                   hw: str = HW, clock_gating: bool | None = True, timed: bool = True) -> None:  # fmt: skip
    """The rows with where they came from; `clock_gating` None: the rows say it each; `timed` False: no cycles."""
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", branch], capture_output=True, text=True)
    doc = {"what": what, "command": command, "source_commit": commit.stdout.strip() or None}
    if clock_gating is not None:
        doc["testbench_clock_gating"] = clock_gating
    doc |= {"date": datetime.date.today().isoformat(), "driver_profile": load_config(hw).driver.profile}
    if timed:
        doc["cycle_definition"] = ("core clocks from the first register write to the last access's completion; per "
                                   "operation, from its enable write to the response of the read that showed its end")  # fmt: skip
    write_json(out, {**doc, "rows": rows})
    print(f"wrote {out}", file=sys.stderr)


# the convolution's units and the write that starts it, from its register view
_CONV_UNITS, _CONV_START = CONV.registers.units, (CONV.registers.starts_on, CONV.registers.enable_register)


def _in_enable_block(c) -> bool:
    if isinstance(c, RegWrite):
        return c.unit in _CONV_UNITS and c.reg in ("S_POINTER_0", CONV.registers.enable_register)
    return isinstance(c, RegRead) and (c.unit, c.reg) == ("NVDLA_CDMA", "S_CBUF_FLUSH_STATUS_0")


def convolutions_early(prog: Program, text: str) -> str:
    """The log with each convolution's enable (its units' S_POINTER writes, the CBUF flush poll and their
    D_OP_ENABLE writes, ending with CDMA's) moved to just after its own register writes or the previous
    convolution's enable, whichever is later: each convolution enabled while the previous one runs, as a
    ping-pong driver does, rather than after it ended. Every access is kept, only their order changes; an
    experiment on the RTL's stall (docs/driver_programs.md), not the driver's program."""
    lines = text.splitlines()
    cmds = prog.commands
    blocks = []
    for i, c in enumerate(cmds):
        if isinstance(c, RegWrite) and (c.unit, c.reg) == _CONV_START:
            j = i
            while j > 0 and _in_enable_block(cmds[j - 1]):
                j -= 1
            blocks.append((j, i))
    group, written = 0, []  # CDMA's producer group; the group of each conv unit's D_ register write
    for c in cmds:
        if isinstance(c, RegWrite) and (c.unit, c.reg) == ("NVDLA_CDMA", "S_POINTER_0"):
            group = c.value & 1
        written.append(group if isinstance(c, RegWrite) and c.unit in _CONV_UNITS and c.reg.startswith("D_")
                       and c.reg != CONV.registers.enable_register else None)  # fmt: skip
    moved: dict[int, list[int]] = {}  # command index -> the blocks' commands placed after it
    skip: set[int] = set()
    after = -1
    for k, (start, end) in enumerate(blocks):
        mine = next((c.value & 1 for c in cmds[start:end] if isinstance(c, RegWrite) and
                     (c.unit, c.reg) == ("NVDLA_CDMA", "S_POINTER_0")), None)  # fmt: skip
        if mine is None:
            after = end
            continue
        programmed = max((i for i in range(start) if written[i] == mine), default=start - 1)
        at = max(programmed, after) if k else start - 1
        if at < start - 1:
            moved.setdefault(at, []).extend(range(start, end + 1))
            skip.update(range(start, end + 1))
        after = at if at < start - 1 else end
    order = []
    for i in range(len(cmds)):
        if i not in skip:
            order.append(i)
        order.extend(moved.get(i, []))
    return "\n".join(lines[cmds[i].line - 1] for i in order) + "\n"


def compare_log(log: Path, binary: Path, rundir: Path, *, timeout: float, early: bool = False,
                name: str | None = None, reuse: bool = False) -> dict:  # fmt: skip
    """One log on the RTL beside the model's replay; `reuse`: the RTL's log of an earlier run in `rundir` (of
    the same trace: checked byte for byte) instead of running it again."""
    hw = load_config(HW)
    name = name or log.parent.name
    if early:
        rundir.mkdir(parents=True, exist_ok=True)
        text = convolutions_early(parse_program(log, address_map=hw.driver.address_map), log.read_text())
        log = rundir / "convolutions_early.txn"
        log.write_text(text)
    prog = parse_program(log, address_map=hw.driver.address_map)
    run = run_program(log, hw)
    t0 = time.perf_counter()
    trace = convert(prog, hw.driver.address_map)
    if reuse:
        done = rundir / "run.log"
        if not done.exists() or (rundir / "trace.bin").read_bytes() != trace:
            raise NvdlaError(f"--reuse-runs: {rundir} holds no run of this log's trace; run it without --reuse-runs")
        text = done.read_text()
    else:
        text = run_trace(binary, trace, rundir, timeout=timeout)
    if text is None:
        return {"name": name, "status": "timeout", "reason": f"no end within {timeout:.0f} s"}
    timed = timed_rows(prog, text, run.sequence)
    if "reason" in timed:
        return {"name": name, "status": "fail", **timed}
    wall = {} if reuse else {"wall_s": round(time.perf_counter() - t0, 1)}
    return {"name": name, "status": "pass", **timed, **wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="nvdla/hw checkout or bare git mirror")
    ap.add_argument("logs", type=Path, nargs="+", help="driver logs (.txn files or their folders)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "nvdla_rtl_ref", help="build folder")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds per log")
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT.name} (or _convolutions_early.json)")
    ap.add_argument(
        "--reuse-runs",
        action="store_true",
        help="take the RTL's output of an earlier run of the same trace from the work folder (a long run whose "
        "rows were not written) instead of running it again",
    )
    ap.add_argument(
        "--no-clock-gating",
        action="store_true",
        help="the testbench with its clocks ungated (with gating, the driver's order deadlocks nv_small's RTL)",
    )
    ap.add_argument(
        "--convolutions-early",
        action="store_true",
        help="enable each convolution while the previous one runs (an experiment; docs/driver_programs.md)",
    )
    args = ap.parse_args(argv)
    early = args.convolutions_early
    out = args.out or (OUT.with_name(OUT.stem + "_convolutions_early.json") if early else OUT)
    gating = not args.no_clock_gating
    binary = build(args.src, args.work, "nv_small", clock_gating=gating, waiting_reads=True)
    rows = []
    for log in args.logs:
        path = log if log.is_file() else next(iter(sorted(log.glob("*.txn"))), log)
        run_name = "-".join(path.resolve().parts[-3:-1])  # RISC-V-NVDLA's logs all sit in <net>/pmem/
        rundir = args.work / "driver_logs" / (run_name + ("-early" if early else "") + ("" if gating else "-ungated"))
        row = compare_log(path, binary, rundir, timeout=args.timeout, early=early, name=run_name, reuse=args.reuse_runs)
        rows.append(row)
        if row["status"] == "pass":
            print(f"{row['name']:<14} RTL {row['rtl_cycles']:>12,}  model {row['model_cycles']:>12,}  "
                  f"({row['model_cycles'] / row['rtl_cycles'] - 1:+.1%})", file=sys.stderr)  # fmt: skip
        else:
            print(f"{row['name']:<14} {row['status']}: {row['reason']}", file=sys.stderr)
    write_rtl_rows(
        out,
        args.src,
        command="python -m nvdla_validation.nvdla_rtl.driver_log_rtl SRC LOG ..."
        + (" --no-clock-gating" * (not gating))
        + (" --convolutions-early" * early),
        rows=rows,
        clock_gating=gating,
        what="NVIDIA's kernel-mode driver's whole-network logs on NVIDIA's nv_small RTL (reads that wait) and the "
        "model's replay of them (docs/driver_programs.md)"
        + (
            ", each convolution enabled while the previous one runs (the driver enables it after the previous "
            "ended; its order stalls the RTL)"
            if early
            else ""
        )
        + ("" if gating else "; the testbench's clocks ungated (with gating the driver's order deadlocks the RTL)"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
