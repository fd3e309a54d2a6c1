"""Validation: INT8 ResNet-50 frames/s against the NVDLA primer's table.

Source: nvdla/doc doc/primer.rst, "Example Area and Performance with NVDLA" (estimates from NVIDIA's
performance spreadsheet, no on-chip SRAM). Each row gives #MACs, CBUF KB and SDRAM GB/s; we build the
config from nv_large (INT8, SDP 16/16/4, PDP 8) with that MAC array (atomic_c x atomic_k), CBUF depth
and a dram_bandwidth_gbs cap, at the 1 GHz nominal clock (the primer states no clock: an assumption),
map ResNet-50 and compare frames/s.

Run: .venv/bin/python validation/primer_resnet50.py   (prints the table; docs/validation.md records it)
     .venv/bin/python validation/primer_resnet50.py --energy   (writes the components' raw figures of
     every row to validation/data/primer_energy.json, fits the overheads on the calibration's fit rows
     and prints every row against the primer's: docs/energy.md records it)
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from nvdla_mapper.frontends.cnn import resnet50
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision, load_config
from nvdla_sim.energy import calibration
from nvdla_sim.energy.model import area, full_rate_pj_per_cycle

DATA = Path(__file__).resolve().parent / "data" / "primer_energy.json"

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

# The same table's area and power columns as nvdla.org publishes it (nvdla/nvdla.github.io, primer.html,
# commit 0fa0e49a; the copy of doc/primer.rst in nvdla/doc has the 28 nm area only): MACs -> (silicon cell
# area mm^2 at 28 nm, at 16 nm, power estimate peak / average mW at 16 nm), 1 GHz, ResNet-50 INT8.
PRIMER_AREA_POWER = {
    2048: (5.5, 3.3, 766, 291),
    1024: (3.0, 1.8, 375, 143),
    512: (2.3, 1.4, 210, 80),
    256: (1.7, 1.0, 135, 48),
    128: (1.4, 0.84, 82, 31),
    64: (0.91, 0.55, 55, 21),
    32: (0.85, 0.51, 45, 17),
}


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
        energy = res.energy()
        units = energy.by_unit_uj
        dynamic = sum(v for u, v in units.items() if u not in ("always_on", "leakage"))
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
                "raw": calibration.PrimerRow(
                    macs=macs,
                    primer_area_mm2_28nm=PRIMER_AREA_POWER[macs][0],
                    primer_area_mm2_16nm=PRIMER_AREA_POWER[macs][1],
                    primer_peak_mw=PRIMER_AREA_POWER[macs][2],
                    primer_average_mw=PRIMER_AREA_POWER[macs][3],
                    components_area_mm2_28nm=area(hw.with_values(**{"tech.node_nm": 28})).components_um2 * 1e-6,
                    components_area_mm2_16nm=area(hw).components_um2 * 1e-6,
                    cycles=res.total_cycles,
                    dynamic_uj=dynamic / calibration.DYNAMIC_FACTOR,  # the components' own energy per action
                    leakage_uj=units["leakage"],
                    full_rate_mw=full_rate_pj_per_cycle(hw) * hw.clock_mhz * 1e-3,
                ),
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


def main_energy() -> None:
    """The area and power columns: the components' raw figures (written to DATA), the overheads fitted on
    calibration.FIT_ROWS, and every row against the primer's."""
    raw = [r["raw"] for r in rows()]
    DATA.write_text(
        json.dumps(
            {
                "source": "python validation/primer_resnet50.py --energy (ResNet-50 INT8 batch 1 at 1 GHz, 16 nm)",
                "date": time.strftime("%Y-%m-%d"),
                "rows": [dataclasses.asdict(r) for r in raw],
            },
            indent=1,
        )
        + "\n"
    )
    fit = calibration.fit([r for r in raw if r.macs in calibration.FIT_ROWS])
    print(f"fit on {calibration.FIT_ROWS}: {fit}")
    print(f"{'MACs':>5} {'row':>5} {'area 28nm':>20} {'area 16nm':>20} {'avg mW 16nm':>22} {'peak mW 16nm':>22}")
    for r in raw:
        p = calibration.predicted(r, fit)
        cells = [
            (r.primer_area_mm2_28nm, p["area_mm2_28nm"]),
            (r.primer_area_mm2_16nm, p["area_mm2_16nm"]),
            (r.primer_average_mw, p["average_mw"]),
            (r.primer_peak_mw, p["peak_mw"]),
        ]
        kind = "fit" if r.macs in calibration.FIT_ROWS else "pred"
        print(f"{r.macs:>5} {kind:>5} " + " ".join(f"{a:>6g} / {b:>6.3g} {100 * (b / a - 1):+6.1f}%" for a, b in cells))


if __name__ == "__main__":
    import sys

    main_energy() if "--energy" in sys.argv[1:] else main()
