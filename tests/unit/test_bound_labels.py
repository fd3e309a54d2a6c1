"""What a layer's time is made of (issue 27, item 4): the bound label and the breakdown behind it."""

from __future__ import annotations

from nvdla_mapper.search.tiling_search import search_plan
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.engine.stats import Bound
from nvdla_sim.layers import OperandMode, SdpSpec

FULL = load_config("nv_full")


def _layer(m: int, k: int, n: int, row: int = 16) -> ConvLayer:
    """Tokens in rows of 16, as the mapper lays out a 5,632-channel input on nv_full (rules.matmul_layout)."""
    shape = ConvShape.matmul(m, k, n, row=min(row, m))
    return ConvLayer("mm", shape, Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL))


def test_tinyllama_ffn2_on_nv_full_runs_compute_and_memory_in_turn():
    """512 x 5632 -> 2048: the MAC work is 512 x 5632 x 2048 / 2048 MACs per cycle = 2,883,584 cycles
    (hand arithmetic); it reads ~13.6x its compulsory bytes and every 1.4 k-cycle hardware layer waits for
    its band through the 1,200-cycle latency, so neither the MACs nor the port fill the run: labelled
    compute+dram, with the waits for memory in its breakdown."""
    st = search_plan(_layer(512, 5632, 2048), FULL).stats
    parts = st.detail.time_breakdown.to_dict()
    assert parts["mac"] == 512 * 5632 * 2048 // 2048 == 2_883_584
    assert st.bound is Bound.SERIAL
    assert parts["wait_memory"] > 0.3 * st.cycles
    assert sum(parts.values()) == st.cycles  # the parts add up to the streaming time
    # no plan reads under ~7x on 512 KiB (docs/mapping.md, by hand): one 16-token row (90 KB) and at most two
    # 32-kernel groups (2 x 180 KB) fit, so the 2.9 MB input is read once per kernel tile of <= 64 kernels
    compulsory = 512 * 5632 + 2048 * 5632 + 2 * 2048  # input, weights, INT16 bias, once
    floor = (2048 // 64 * 512 * 5632 + 2048 * 5632 + 2 * 2048) / compulsory
    assert 7.0 < floor <= st.detail.refetch_factor


def test_compute_and_memory_bound_layers_keep_their_labels():
    """A BERT-base projection (128 x 768 -> 768) is MAC-bound on nv_full; a GEMV (1 x 3072 -> 768)
    reads 2.4 MB of weights for 2.4 M MACs (1,152 cycles of MACs against 36,864 of 64-byte beats):
    memory-bound."""
    proj = search_plan(_layer(128, 768, 768), FULL).stats
    gemv = search_plan(_layer(1, 3072, 768), FULL).stats
    assert proj.bound is Bound.COMPUTE and proj.detail.time_breakdown.mac == 128 * 768 * 768 // 2048
    assert gemv.bound is Bound.DRAM and gemv.detail.time_breakdown.mac < 0.05 * gemv.cycles
