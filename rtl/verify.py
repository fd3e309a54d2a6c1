"""Run the cocotb bench on Icarus: emit Verilog from the config, build, simulate one tile, report.

Used by tests/rtl and by `nvdla rtl verify`. Each build directory is keyed by the datapath parameters,
and each run gets its own, so parallel pytest workers never share sim.vvp.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.datapath_model import datapath_params
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision

from .emit import TOP, emit, source_hash

INSTALL_HINT = "install it with: sudo apt-get install -y iverilog  (Debian/Ubuntu; ./run-tests does this when root)"


@dataclass(frozen=True)
class BenchResult:
    passed: bool
    errors: list[str]
    outputs: int
    rtl_cycles: int
    model_cycles: int
    simulated_cycles: int
    wall_s: float
    events: dict[str, bool] = dataclasses.field(default_factory=dict)  # handshake corners the run reached

    @property
    def cycles_per_second(self) -> float:
        return self.simulated_cycles / self.wall_s if self.wall_s else 0.0


def require_iverilog() -> str:
    path = shutil.which("iverilog")
    if path is None:
        raise NvdlaError(f"Icarus Verilog (iverilog) is not on PATH; the RTL benches need it: {INSTALL_HINT}")
    return path


def run_bench(
    hw: HwConfig,
    precision: Precision,
    x: np.ndarray,
    w: np.ndarray,
    *,
    truncate: int = 0,
    ready_prob: float = 1.0,
    dat_prob: float = 1.0,
    wt_prob: float = 1.0,
    seed: int = 0,
    reset_at: int | None = None,
    acc_bits: int | None = None,
    work_dir: str | Path | None = None,
    waves: bool = False,
) -> BenchResult:
    """Simulate out = x @ w.T (x[P, C], w[K, C]) through the RTL and check it against nvdla_sim. The sink
    is ready with probability `ready_prob` per cycle; the data and weight drivers raise valid with
    `dat_prob` / `wt_prob` per cycle (held until taken). `reset_at`: assert reset that many cycles into
    the run, then run the tile again from the start (the second run is the one checked). `acc_bits`: build
    the datapath (and the model) with a narrower CACC accumulator, so saturation is reached in a short
    run."""
    for name, q in (("ready_prob", ready_prob), ("dat_prob", dat_prob), ("wt_prob", wt_prob)):
        if not 0 < q <= 1:
            raise NvdlaError(f"{name} must be in (0, 1], not {q}")
    require_iverilog()
    from cocotb_tools.runner import get_runner

    params = datapath_params(hw, precision)
    if acc_bits is not None:
        if not 16 <= acc_bits <= params.acc_bits:
            raise NvdlaError(f"acc_bits must be in 16..{params.acc_bits} for {precision.value}, not {acc_bits}")
        params = dataclasses.replace(params, acc_bits=acc_bits)
    if w.shape[0] > params.cells:
        raise NvdlaError(f"tile has {w.shape[0]} kernels; the {hw.name} datapath has {params.cells} MAC cells")
    lo, hi = precision.int_range
    if x.min(initial=0) < lo or x.max(initial=0) > hi or w.min(initial=0) < lo or w.max(initial=0) > hi:
        raise NvdlaError(f"tile values must fit {precision.value} ({lo}..{hi})")
    root = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="nvdla_rtl_"))
    root.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("NVDLA_RTL_CACHE", Path.home() / ".cache" / "nvdla-sim" / "verilog"))
    vfile = cache / f"{TOP}_{hw.name}_{params.tag}_{source_hash()}.v"
    if not vfile.exists():
        emit(hw, precision, cache, name=vfile.name, params=params)
    case = {
        "hw": str(_config_path(hw, root)),
        "precision": precision.value,
        "x": x.tolist(),
        "w": w.tolist(),
        "truncate": truncate,
        "ready_prob": ready_prob,
        "dat_prob": dat_prob,
        "wt_prob": wt_prob,
        "seed": seed,
        "reset_at": reset_at,
        "acc_bits": params.acc_bits,
        "coverage_file": str(root / "coverage.yml"),
    }
    case_path, result_path = root / "case.json", root / "result.json"
    case_path.write_text(json.dumps(case))
    runner = get_runner("icarus")
    build_dir = root / "sim_build"
    t0 = time.perf_counter()
    runner.build(
        sources=[vfile], hdl_toplevel=TOP, build_dir=build_dir, timescale=("1ns", "1ps"), waves=waves, always=True
    )
    runner.test(
        hdl_toplevel=TOP,
        test_module="nvdla_rtl.bench.tb_datapath",
        build_dir=build_dir,
        test_dir=root,
        extra_env={
            "NVDLA_BENCH_CASE": str(case_path),
            "NVDLA_BENCH_RESULT": str(result_path),
            "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING"),
        },
        waves=waves,
    )
    if not result_path.exists():
        raise NvdlaError(
            f"the cocotb bench produced no result (see {root}); build+run took {time.perf_counter() - t0:.1f}s"
        )
    return BenchResult(**json.loads(result_path.read_text()))


def _config_path(hw: HwConfig, root: Path) -> Path:
    """The bench reloads the config by path, so a modified HwConfig is written out as TOML."""
    lines = [
        f'name = "{hw.name}"',
        f"clock_mhz = {hw.clock_mhz}",
        f"bdma = {str(hw.bdma).lower()}",
        "precisions = [" + ", ".join(f'"{p.value}"' for p in hw.precisions) + "]",
    ]
    for sec, vals in hw.to_dict().items():
        if isinstance(vals, dict):
            lines.append(f"[{sec}]")
            for k, v in vals.items():
                if v is None:
                    continue
                lines.append(f"{k} = {str(v).lower() if isinstance(v, bool) else v}")
    path = root / "hw.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
