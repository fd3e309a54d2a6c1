"""Driver run inside ZigZag's own venv by benchmarks/compare_peers.py: one job (JSON file) in, one JSON
line out. Not part of the package; imports nothing of the project.

The accelerator is NVDLA's convolution core as ZigZag describes hardware: a D1 x D2 MAC array
(atomic_c input channels x atomic_k kernels, NVDLA's fixed spatial unrolling: C on D1, K on D2), a
2-weight register per MAC (active + shadow set), a data register broadcast along D2 (CSC sends one
data atom to all kernels), the CACC accumulators per kernel column (summed along D1 by the adder tree),
CBUF for data and weights, and DRAM. Each matmul (B = m rows, C = k, K = n) is searched separately by
ZigZag's LOMA for minimal latency; the driver reports latency_total2 (with on/off-loading) as total,
ideal_cycle as compute, the temporal mapping it chose and the search time.
"""

import json
import logging
import sys
import time
from pathlib import Path

import yaml


def _port(name: str, kind: str, bits: int, alloc: list[str], lo: int | None = None) -> dict:
    return {"name": name, "type": kind, "bandwidth_min": lo or bits, "bandwidth_max": bits, "allocation": alloc}


def _mem(size_bits: int, operands: list[str], ports: list[dict], served: list[str], cost: float) -> dict:
    return {"size": size_bits, "r_cost": cost, "w_cost": cost * 1.2, "area": 0, "latency": 1, "operands": operands,
            "ports": ports, "served_dimensions": served}  # fmt: skip


def accelerator(job: dict) -> dict:
    c, k = job["array"]
    cbuf_bits, dram_bits = job["cbuf_bytes"] * 8, job["dram_bytes_per_cycle"] * 8
    entry_bits = job["cbuf_entry_bytes"] * 8  # one CBUF entry per cycle for data, one for weights
    acc_bits = job["acc_bytes"] * 8 // k  # the CACC assembly buffer, per kernel column
    rw = ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"]
    mems = {  # lowest level first: ZigZag reads the hierarchy in this order
        "mac_weights": _mem(
            16, ["I2"], [_port("r_port_1", "read", 8, ["I2, tl"]), _port("w_port_1", "write", 8, ["I2, fh"])], [], 0.01
        ),
        "csc_data": _mem(
            8,
            ["I1"],
            [_port("r_port_1", "read", 8, ["I1, tl"]), _port("w_port_1", "write", 8, ["I1, fh"])],
            ["D2"],
            0.01,
        ),
        "cacc": _mem(
            acc_bits,
            ["O"],
            [_port("r_port_1", "read", 32, ["O, tl", "O, th"]), _port("w_port_1", "write", 32, ["O, fh", "O, fl"])],
            ["D1"],
            0.02,
        ),
        "cbuf": _mem(
            cbuf_bits,
            ["I1", "I2"],
            [
                _port("r_port_1", "read", entry_bits, ["I1, tl"], 8),
                _port("r_port_2", "read", entry_bits, ["I2, tl"], 8),
                _port("w_port_1", "write", dram_bits, ["I1, fh", "I2, fh"], 8),
            ],
            ["D1", "D2"],
            10.0,
        ),
        "dram": _mem(
            10**12, ["I1", "I2", "O"], [_port("rw_port_1", "read_write", dram_bits, rw, 8)], ["D1", "D2"], 700.0
        ),
    }
    array = {"unit_energy": 0.04, "unit_area": 1, "dimensions": ["D1", "D2"], "sizes": [c, k]}
    return {"name": job["name"], "memories": mems, "operational_array": array}


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    work = Path(job["workdir"])
    work.mkdir(parents=True, exist_ok=True)
    logging.disable(logging.CRITICAL)
    from zigzag.api import get_hardware_performance_zigzag

    c, k = job["array"]
    acc, mapping = work / "accelerator.yaml", work / "mapping.yaml"
    acc.write_text(yaml.safe_dump(accelerator(job), sort_keys=False))
    mapping.write_text(yaml.safe_dump([{"name": "default", "spatial_mapping": {"D1": [f"C, {c}"], "D2": [f"K, {k}"]},
                                        "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}], sort_keys=False))  # fmt: skip
    out, t_all = {}, time.perf_counter()
    for name, m, kk, n in job["layers"]:
        wl = work / f"{name}.yaml"
        wl.write_text(yaml.safe_dump([{"id": 0, "name": name, "operator_type": "Gemm",
                                       "equation": "O[b][k]+=I[b][c]*W[c][k]", "loop_dims": ["B", "K", "C"],
                                       "loop_sizes": [m, n, kk],
                                       "operand_precision": {"I": 8, "W": 8, "O": 32, "O_final": 8}}], sort_keys=False))  # fmt: skip
        t0 = time.perf_counter()
        _, _, cmes = get_hardware_performance_zigzag(str(wl), str(acc), str(mapping), opt="latency",
                                                     dump_folder=str(work / "out" / name),
                                                     loma_show_progress_bar=False)  # fmt: skip
        cme = cmes[0][1][0][0]
        out[name] = {"total": int(cme.latency_total2), "compute": int(cme.ideal_cycle),
                     "search_s": time.perf_counter() - t0, "mapping": str(cme.temporal_mapping)}  # fmt: skip
    print(json.dumps({"layers": out, "wall_s": time.perf_counter() - t_all}))


if __name__ == "__main__":
    main()
