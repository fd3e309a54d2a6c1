"""Validation: INT8 ResNet-50 frames/s against the NVDLA primer's table.

Source: nvdla/doc doc/primer.rst, "Example Area and Performance with NVDLA" (estimates from NVIDIA's
performance spreadsheet, no on-chip SRAM). Each row gives #MACs, CBUF KB and SDRAM GB/s; we build the
config from nv_large (INT8, SDP 16/16/4, PDP 8) with that MAC array (atomic_c x atomic_k), CBUF depth
and a dram_bandwidth_gbs cap, at the 1 GHz nominal clock (the primer states no clock: an assumption),
map ResNet-50 and compare frames/s.

Run: .venv/bin/python validation/primer_resnet50.py   (prints the table; docs/validation.md records it)
"""

from __future__ import annotations

import time

from nvdla_mapper.frontends.cnn import resnet50
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision, load_config

# (MACs, (atomic_c, atomic_k), CBUF KB, SDRAM GB/s, primer frames/s)
PRIMER_ROWS = [
    (2048, (64, 32), 512, 20, 269),
    (1024, (64, 16), 256, 15, 153),
    (512, (32, 16), 256, 10, 93),
    (256, (32, 8), 256, 5, 46),
    (128, (16, 8), 256, 2, 20),
    (64, (8, 8), 128, 1, 7.3),
    (32, (8, 4), 128, 0.5, 3.6),
]


def config_for(atomic_c: int, atomic_k: int, cbuf_kb: int, gbs: float):
    base = load_config("nv_large")
    width = max(atomic_c, 8)
    depth = cbuf_kb * 1024 // (16 * width)
    return base.with_values(
        name=f"primer_{atomic_c * atomic_k}",
        **{
            "mac.atomic_c": atomic_c,
            "mac.atomic_k": atomic_k,
            "cbuf.bank_width_bytes": width,
            "cbuf.bank_depth": depth,
            "memory.memory_atomic_bytes": min(32, width),
            "memory.dram_bandwidth_gbs": float(gbs),
        },
    )


def rows() -> list[dict]:
    out = []
    g = resnet50(1)
    for macs, (ac, ak), cbuf_kb, gbs, fps in PRIMER_ROWS:
        hw = config_for(ac, ak, cbuf_kb, gbs)
        t0 = time.perf_counter()
        res = map_model(g, hw, precision=Precision.INT8, batch=1, seq=0)
        ours = res.throughput
        out.append(
            {
                "macs": macs,
                "atomic": f"{ac}x{ak}",
                "cbuf_kb": cbuf_kb,
                "gbs": gbs,
                "primer_fps": fps,
                "ours_fps": ours,
                "ratio": ours / fps,
                "mac_utilization": res.mac_utilization,
                "wall_s": time.perf_counter() - t0,
            }
        )
    return out


def main() -> None:
    print(
        f"{'MACs':>5} {'array':>6} {'CBUF':>6} {'GB/s':>5} {'primer fps':>11} {'ours fps':>9} {'ours/primer':>11} {'MAC util':>9}"
    )
    for r in rows():
        print(
            f"{r['macs']:>5} {r['atomic']:>6} {r['cbuf_kb']:>4}KB {r['gbs']:>5g} {r['primer_fps']:>11g} "
            f"{r['ours_fps']:>9.1f} {r['ratio']:>11.2f} {r['mac_utilization']:>9.1%}"
        )


if __name__ == "__main__":
    main()
