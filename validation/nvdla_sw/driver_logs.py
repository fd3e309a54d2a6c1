"""Run the public whole-network logs of NVIDIA's kernel-mode driver through the model; write
validation/data/driver_logs.json.

    python -m nvdla_validation.nvdla_sw.driver_logs --risc-v-nvdla CHECKOUT --gem5-nvdla CHECKOUT

The logs are other projects' files and stay in their checkouts: vineetbitsp/RISC-V-NVDLA's
`<net>/pmem/output.txn` (nv_small: LeNet-5, the CIFAR ResNet, ResNet-50; byte addresses) and
suchandler96/gem5-NVDLA's `bsc-util/nvdla_utilities/example_usage/traces/<net>/input.txn` (nv_full:
LeNet, the CIFAR ResNet, ResNet-18; the traceplayer's word addresses). Each row holds what the model
decoded and timed (`nvdla simulate --trace-test LOG --hw HW --json`: the driver's operations, the network's
cycles under the testbench profile, each operation's) beside counts read from the log without the decoder:
its writes and reads, and the op-enable writes of each unit by address. A log missing from a checkout is
left out and said.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.program.run import run_program
from nvdla_sim.registers.addresses import address_map, byte_address
from nvdla_validation.nvdla_sw import write_rows

OUT = Path(__file__).resolve().parents[2] / "validation" / "data" / "driver_logs.json"
# (repository, path in it, the build whose address map it uses, the model's config)
LOGS = {
    "lenet-5": ("risc_v_nvdla", "lenet-5/pmem/output.txn", "nv_small_rtl_tb"),
    "cifar-resnet": ("risc_v_nvdla", "resnet18/pmem/output.txn", "nv_small_rtl_tb"),
    "resnet-50": ("risc_v_nvdla", "resnet50/pmem/output.txn", "nv_small_rtl_tb"),
    "gem5-lenet": ("gem5_nvdla", "bsc-util/nvdla_utilities/example_usage/traces/lenet/input.txn", "nv_full"),
    "gem5-cifar-resnet": (
        "gem5_nvdla",
        "bsc-util/nvdla_utilities/example_usage/traces/resnet18-cifar10/input.txn",
        "nv_full",
    ),
    "gem5-resnet-18": ("gem5_nvdla", "bsc-util/nvdla_utilities/example_usage/traces/resnet18/input.txn", "nv_full"),
}
ENABLE_UNITS = ("CDMA", "SDP", "PDP", "CDP", "BDMA")


def raw_counts(path: Path, map_name: str) -> dict:
    """Counts read from the log's text alone: writes, reads, and op-enable writes of 1 per unit by address."""
    am = address_map(map_name)
    enables = {am.address(f"NVDLA_{u}", "D_OP_ENABLE_0"): u for u in ENABLE_UNITS if u != "BDMA"}
    writes = reads = 0
    per_unit: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        words = line.split("#")[0].split()
        if not words:
            continue
        if words[0] == "write_reg":
            writes += 1
            byte = byte_address(int(words[1], 0))
            if byte in enables and int(words[2], 0) & 1:
                per_unit[enables[byte]] += 1
        elif words[0] in ("read_reg", "until"):
            reads += 1
    return {"writes": writes, "reads": reads, "op_enables": dict(sorted(per_unit.items()))}


def row(name: str, path: Path, hw_name: str) -> dict:
    hw = load_config(hw_name)
    t0 = time.perf_counter()
    run = run_program(path, hw)
    wall = time.perf_counter() - t0
    seq = run.sequence
    return {
        "name": name,
        "hw": hw_name,
        "address_map": hw.driver.address_map,
        "log": raw_counts(path, hw.driver.address_map),
        "operations": len(seq.operations),
        "operations_by_processors": dict(Counter("+".join(t.operation.processors) for t in seq.operations)),
        "cycles": run.cycles,
        "driver_profile": seq.profile,
        "register_access_cycles": round(seq.csb_cycles),
        "driver_wait_cycles": round(seq.wait_cycles),
        "busy_cycles_by_processor": seq.busy_by_processor(),
        "overlap_cycles": seq.overlap_cycles(),
        "operation_cycles": [t.cycles for t in seq.operations],
        "wall_s": round(wall, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--risc-v-nvdla", type=Path, help="a checkout of github.com/vineetbitsp/RISC-V-NVDLA")
    ap.add_argument("--gem5-nvdla", type=Path, help="a checkout of github.com/suchandler96/gem5-NVDLA")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    roots = {"risc_v_nvdla": args.risc_v_nvdla, "gem5_nvdla": args.gem5_nvdla}
    rows, missing = [], []
    for name, (repo, rel, hw_name) in LOGS.items():
        root = roots[repo]
        path = root / rel if root is not None else None
        if path is None or not path.is_file() or not path.stat().st_size:
            missing.append(f"{name} ({rel})")
            continue
        rows.append(row(name, path, hw_name))
        print(f"{name:<18} {rows[-1]['operations']:>4} operations  {rows[-1]['cycles']:>12,} cycles", file=sys.stderr)
    write_rows(
        args.out,
        what="NVIDIA's kernel-mode driver's register logs of whole networks, decoded and replayed by "
        "nvdla_sim.program.sequence (docs/driver_programs.md)",
        command="python -m nvdla_validation.nvdla_sw.driver_logs --risc-v-nvdla CHECKOUT --gem5-nvdla CHECKOUT",
        missing=missing,
        rows=rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
