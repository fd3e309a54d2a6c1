"""The smallest program found that deadlocks NVIDIA's nv_small RTL: two convolutions of RISC-V-NVDLA's LeNet-5
driver log, the second enabled after the first ended (the driver's order), against the same two with the
second enabled while the first runs, each on the testbench with its clock gating on (nvdla.cpp's default)
and off (docs/driver_programs.md, "The RTL's deadlock").

    python -m nvdla_validation.nvdla_rtl.stall_two_convolutions HW_SRC RISC_V_NVDLA_CHECKOUT [--work DIR]

From `lenet-5/pmem/output.txn` it keeps conv2 (5x5x20 -> 50, 7 weight banks) and the first fully connected
layer (4x4x50 -> 500, 4 weight banks), each with its SDP pass on the fly, exactly as the driver wrote them,
with their register groups swapped (conv2's group 1 becomes 0, FC1's 0 becomes 1: the S_POINTER writes and
the interrupt-status bits) so that conv2 is the hardware's first operation; conv1, the poolings and FC2 are
left out. Each variant is replayed as driver_log_rtl replays a log; the script prints whether it ran to its
last access and how many of FC1's 50,000 eight-byte weight requests the RTL issued.

Measured 2026-12-07: with clock gating, FC1 enabled after conv2's end stalls after 161 of its weight
requests, enabled while conv2 runs it ends; without clock gating both end. CDMA's count of the weight
entries in CBUF that CSC has not released (wt_wr_dmatx_cnt, on CDMA's gated clock) misses the releases CSC
sends once CDMA has gone idle, and holds the read responses back once it reaches the next layer's weight
banks.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.processors import CONV
from nvdla_sim.registers.addresses import address_map
from nvdla_sim.registers.trace_io import parse_program
from nvdla_validation.nvdla_rtl.driver_log_rtl import HW, convert, run_trace, write_rtl_rows
from nvdla_validation.nvdla_rtl.run_reference import build

LOG = "lenet-5/pmem/output.txn"
OUT = Path(__file__).resolve().parents[1] / "data" / "nvdla_rtl_stall_two_convolutions.json"


def _lines(a: int, b: int) -> list[int]:
    return list(range(a, b + 1))


# line ranges of the log (RISC-V-NVDLA a96e459): the register writes of conv2's convolution (group 1) and SDP
# pass, of FC1's (group 0); conv2's enable and the status reads and clears of its end; FC1's enable and end
PROGRAMMING = _lines(78, 154) + _lines(209, 251) + _lines(361, 437) + _lines(442, 484)
CONV2_ENABLE, CONV2_END = _lines(490, 500), _lines(501, 510)
FC1_ENABLE, FC1_END = _lines(640, 650), _lines(651, 660)
VARIANTS = {
    "after_end": PROGRAMMING + CONV2_ENABLE + CONV2_END + FC1_ENABLE + FC1_END,
    "while_running": PROGRAMMING + CONV2_ENABLE + FC1_ENABLE + CONV2_END + FC1_END,
}
_MAP = address_map("nv_small")  # the log's byte addresses
# S_POINTER of the units the two layers program (the convolution's, SDP_RDMA's and SDP's)
_POINTERS = {_MAP.address(u, "S_POINTER_0") for u in (*CONV.registers.units, "NVDLA_SDP_RDMA", "NVDLA_SDP")}
_STATUS = _MAP.address("NVDLA_GLB", "S_INTR_STATUS_0")  # group 0 and 1 bits side by side (0/1 SDP ... 20/21 CACC)
_ACCESS = re.compile(r"(write_reg|read_reg) (0x[0-9a-fA-F]+) (0x[0-9a-fA-F]+)(?: (0x[0-9a-fA-F]+))?(.*)")


def _swap_groups(bits: int) -> int:
    out = bits & ~0x3F03FF
    for b in (*range(10), *range(16, 22)):
        if bits >> b & 1:
            out |= 1 << (b ^ 1)
    return out


def swapped(line: str) -> str:
    """A log line with its register group swapped (S_POINTER's producer, the status bits)."""
    m = _ACCESS.match(line)
    if m is None:
        raise NvdlaError(f"not a driver log line: {line!r}")
    op, addr = m.group(1), int(m.group(2), 16)
    if op == "write_reg":
        v = int(m.group(3), 16)
        v = v ^ 1 if addr in _POINTERS else _swap_groups(v) if addr == _STATUS else v
        return f"write_reg {m.group(2)} 0x{v:08x}{m.group(5)}"
    v = int(m.group(4), 16)
    v = _swap_groups(v) if addr == _STATUS else v
    return f"read_reg {m.group(2)} {m.group(3)} 0x{v:08x}{m.group(5)}"


def variant(log_text: str, name: str) -> str:
    lines = log_text.splitlines()
    if len(lines) != 686:
        raise NvdlaError(f"{LOG}: expected RISC-V-NVDLA a96e459's 686-line LeNet-5 log, found {len(lines)} lines")
    return "\n".join(swapped(lines[n - 1]) for n in VARIANTS[name]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="nvdla/hw checkout or bare git mirror")
    ap.add_argument("risc_v_nvdla", type=Path, help="vineetbitsp/RISC-V-NVDLA checkout")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "nvdla_rtl_ref", help="build folder")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per variant")
    args = ap.parse_args(argv)
    hw = load_config(HW)
    text = (args.risc_v_nvdla / LOG).read_text()
    rows = []
    for gating in (True, False):
        binary = build(args.src, args.work, "nv_small", clock_gating=gating, waiting_reads=True)
        for name in VARIANTS:
            rundir = args.work / "stall_two_convolutions" / (name + ("" if gating else "_ungated"))
            rundir.mkdir(parents=True, exist_ok=True)
            (rundir / "output.txn").write_text(variant(text, name))
            prog = parse_program(rundir / "output.txn", address_map=hw.driver.address_map)
            out = run_trace(binary, convert(prog, hw.driver.address_map), rundir, timeout=args.timeout,
                            keep="write to nvdla|read response from nvdla|read request from dla|PASS|FAIL")  # fmt: skip
            log = (rundir / "run.log").read_text()
            weights = len(re.findall(r"read request from dla, addr c01[89a-e]", log))
            rows.append({"clock_gating": gating, "fc1_enabled": name, "status": "ran" if out else "stalled",
                         "fc1_weight_requests": weights})  # fmt: skip
            print(f"clock gating {'on ' if gating else 'off'}, FC1 enabled {name.replace('_', ' ')}: "
                  f"{'ran to the end' if out else 'stalled'}, {weights:,} of FC1's 50,000 weight requests")  # fmt: skip
    write_rtl_rows(
        OUT,
        args.src,
        command="python -m nvdla_validation.nvdla_rtl.stall_two_convolutions HW_SRC RISC_V_NVDLA_CHECKOUT",
        rows=rows,
        what="conv2 and FC1 of RISC-V-NVDLA's LeNet-5 driver log on NVIDIA's nv_small RTL (reads that wait), FC1 "
        "enabled after conv2's end (the driver's order) or while conv2 runs, the testbench's clock gating on and "
        "off; a stall is no end within the timeout (docs/driver_programs.md, 'The RTL's deadlock')",
        clock_gating=None,
        timed=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
