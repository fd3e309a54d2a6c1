"""Driver run inside SCALE-Sim's own venv by benchmarks/compare_peers.py: one job (JSON file) in, one
JSON line out. Not part of the package; imports nothing of the project.

The job's matmuls (m x k x n: m rows, k reduction, n outputs) become SCALE-Sim's GEMM topology; the
array, SRAM sizes and DRAM bandwidth come from the job. Cycles are read from COMPUTE_REPORT.csv:
"Total Cycles (incl. prefetch)" as total, "Total Cycles" - "Stall Cycles" as compute.
"""

import csv
import json
import sys
import time
from pathlib import Path


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    work = Path(job["workdir"])
    work.mkdir(parents=True, exist_ok=True)
    topo = work / "topology.csv"
    topo.write_text("Layer, M, N, K,\n" + "".join(f"{n}, {m}, {nn}, {k},\n" for n, m, k, nn in job["layers"]))
    layout = work / "layout.csv"
    layout.write_text("Layer name,\n")  # SCALE-Sim opens a layout file even when no custom layout is used
    rows, cols = job["array"]
    bw = job["dram_bytes_per_cycle"]  # words per cycle: 1-byte words (INT8)
    cfg = work / "scale.cfg"
    cfg.write_text(
        f"""[general]
run_name = {job["name"]}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {job["ifmap_kb"]}
FilterSramSzkB: {job["filter_kb"]}
OfmapSramSzkB: {job["ofmap_kb"]}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth : {bw}
Dataflow : ws
MemoryBanks: 1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
FilterCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""
    )
    from scalesim.scale_sim import scalesim

    t0 = time.perf_counter()
    sim = scalesim(save_disk_space=True, verbose=False, config=str(cfg), topology=str(topo), layout=str(layout),
                   input_type_gemm=True)  # fmt: skip
    sim.run_scale(top_path=str(work))
    wall = time.perf_counter() - t0
    out = {}
    with (work / job["name"] / "COMPUTE_REPORT.csv").open() as f:
        for (name, *_), row in zip(job["layers"], csv.DictReader(f, skipinitialspace=True), strict=True):
            total = int(float(row["Total Cycles (incl. prefetch)"]))
            compute = int(float(row["Total Cycles"])) - int(float(row["Stall Cycles"]))
            out[name] = {"total": total, "compute": compute}
    print(json.dumps({"layers": out, "wall_s": wall}))


if __name__ == "__main__":
    main()
