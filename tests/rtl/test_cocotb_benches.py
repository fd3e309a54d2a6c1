"""cocotb benches on Icarus Verilog: the emitted Verilog equals nvdla_sim bit for bit and cycle for cycle.

Tiles come from mapped transformer layers. Without iverilog these tests fail with the install command
(never skip silently); ./run-tests installs it when run as root.
"""

import numpy as np
import pytest

from nvdla_rtl.bench import coverage
from nvdla_rtl.tiles import layer_tile
from nvdla_rtl.verify import BenchResult, require_iverilog, run_bench
from nvdla_sim import Precision, load_config
from nvdla_sim.units.sdp import Convertor, SdpParams, Stage

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module", autouse=True)
def _iverilog():
    require_iverilog()  # raises NvdlaError with the install command


def _ok(res: BenchResult) -> None:
    assert res.passed, res.errors
    assert res.rtl_cycles == res.model_cycles > 0


@pytest.mark.parametrize("layer", ["bert-base.qkv", "bert-base.qk", "gpt2.pv"])
def test_transformer_layer_tiles_nv_small(layer, tmp_path):
    hw = load_config("nv_small")
    tile = layer_tile(layer, hw, Precision.INT8, seed=1)
    gaps = {"dat_prob": 0.7, "wt_prob": 0.5} if layer != "gpt2.pv" else {}
    _ok(run_bench(hw, Precision.INT8, tile.x, tile.w, ready_prob=0.75, seed=2, truncate=2, work_dir=tmp_path, **gaps))


def test_corner_values_and_rounding(tmp_path):
    hw = load_config("nv_small")
    tile = layer_tile("bert-base.ffn2", hw, Precision.INT8, seed=3, corner=True)
    x, w = tile.x[:20, :256], tile.w
    _ok(run_bench(hw, Precision.INT8, x, w, truncate=7, ready_prob=0.5, dat_prob=0.6, wt_prob=0.8, seed=4,
                  work_dir=tmp_path))  # fmt: skip


def test_functional_coverage_of_the_bench_set(tmp_path, capsys):
    """The coverage regression: a few bench runs that must together reach every named cover point
    (rtl/bench/coverage.py); each run is also checked bit- and cycle-exact. Prints the coverage table;
    fails below 100%."""
    small = load_config("nv_small")
    wide = small.with_values(precisions=["int8", "int16"])
    qkv = layer_tile("bert-base.qkv", small, Precision.INT8, seed=9)
    rng = np.random.default_rng(11)
    runs = {
        # gaps on both inputs, back-pressure, rounding (truncate 3), three stripes of 32 pixels or fewer
        "gaps": (small, Precision.INT8, rng.integers(-128, 128, (80, 24)), rng.integers(-128, 128, (8, 24)),
                 dict(ready_prob=0.5, dat_prob=0.6, wt_prob=0.3, truncate=3, seed=12)),
        # reset in the middle of a stripe (24 pixels, four channel blocks), then a clean run
        "reset": (small, Precision.INT8, qkv.x[:24, :32], qkv.w,
                  dict(ready_prob=0.8, dat_prob=0.8, seed=10, reset_at=37)),
        # INT16 results beyond INT32
        "int16_out_sat": (wide, Precision.INT16, np.full((6, 24), 32767),
                          np.array([[32767] * 24, [-32768] * 24, [1] * 24, [-1] * 24]), dict(ready_prob=0.9, seed=5)),
        # a 20-bit accumulator build: eight full-scale INT8 atoms (8 x 8 x 127^2) pass its 2^19 range
        "acc_sat": (small, Precision.INT8, np.full((4, 64), 127), np.full((8, 64), 127),
                    dict(acc_bits=20, seed=13)),
    }  # fmt: skip
    files = []
    for name, (hw, prec, x, w, kw) in runs.items():
        work = tmp_path / name
        _ok(run_bench(hw, prec, x, w, work_dir=work, **kw))
        files.append(work / "coverage.yml")
    cov = coverage.merged(files, tmp_path / "merged.yml")
    with capsys.disabled():
        print("\nfunctional coverage of the bench set\n" + coverage.report(cov))
    missing = [n for n in coverage.POINTS if cov.get(n, (0, 1))[0] < cov.get(n, (0, 1))[1]]
    assert not missing, f"cover points not reached: {missing}"


def test_projection_requantized_to_int8_through_sdp_x1(tmp_path):
    """A mapped BERT-base QKV tile through CMAC + CACC + SDP X1: bias add, multiplier and truncation,
    ReLU, the output convertor to INT8, each value and cycle as nvdla_sim.units.sdp computes them."""
    hw = load_config("nv_small")
    tile = layer_tile("bert-base.qkv", hw, Precision.INT8, seed=14)
    rng = np.random.default_rng(15)
    sdp = SdpParams(
        x1=Stage(alu_operand=rng.integers(-3000, 3000, 8), alu_shift=5, mul_operand=rng.integers(1, 1 << 14, 8),
                 mul_shift=14, relu=True),
        cvt=Convertor(offset=-7, scale=24577, shift=22),
    )  # fmt: skip
    _ok(run_bench(hw, Precision.INT8, tile.x[:24, :64], tile.w, ready_prob=0.7, dat_prob=0.8, seed=16, sdp=sdp,
                  work_dir=tmp_path))  # fmt: skip


def test_nv_full_array_short_tile(tmp_path):
    """The 64 x 32 nv_full array: one 16-pixel stripe over two channel blocks (Icarus runs ~50 cycles/s here)."""
    hw = load_config("nv_full")
    tile = layer_tile("bert-base.qk", hw, Precision.INT8, seed=6)
    _ok(run_bench(hw, Precision.INT8, tile.x[:16], tile.w, ready_prob=0.8, seed=7, work_dir=tmp_path))


@pytest.mark.slow
def test_int16_accumulator_saturation(tmp_path):
    """INT48 accumulator saturation needs > 2**14 full-scale int16 atoms: a long run, excluded by default."""
    hw = load_config("nv_small").with_values(precisions=["int8", "int16"])
    x = np.full((1, 8 * 17000), 32767)
    w = np.full((4, 8 * 17000), 32767)
    _ok(run_bench(hw, Precision.INT16, x, w, work_dir=tmp_path))


def test_waves_on_request(tmp_path):
    hw = load_config("nv_small")
    tile = layer_tile("bert-base.qk", hw, Precision.INT8, seed=8)
    _ok(run_bench(hw, Precision.INT8, tile.x[:8], tile.w, work_dir=tmp_path, waves=True))
    assert list((tmp_path / "sim_build").glob("*.fst"))
