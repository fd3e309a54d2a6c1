"""The tile-plan search against simulating every candidate (branch and bound must lose nothing).

The lower bound now counts the first band's input arrival and the hardware-layer boundaries that cannot
overlap; a bound above a plan's simulated cycles would prune the best plan, which this test catches on
random small layers (the CBUF shrunk to 8 banks of 64 rows so that layers need several bands).
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper.search.tiling_search import candidate_plans, plan_lower_bound, search_plan
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.config import CbufConfig
from nvdla_sim.engine.conv import simulate_conv

SMALL = load_config("nv_small")
HW = dataclasses.replace(SMALL, cbuf=CbufConfig(bank_count=8, bank_depth=64, bank_width_bytes=8))


@st.composite
def layers(draw):
    kernel = draw(st.sampled_from([1, 3]))
    shape = ConvShape(
        in_w=draw(st.integers(kernel, 12)),
        in_h=draw(st.integers(kernel, 6)),
        in_c=draw(st.integers(1, 40)),
        out_k=draw(st.integers(1, 40)),
        kernel_w=kernel,
        kernel_h=kernel,
    )
    return ConvLayer("l", shape, Precision.INT8)


@settings(max_examples=40, deadline=None)
@given(layers())
def test_search_equals_simulating_every_candidate_and_the_bound_holds(layer):
    plans = candidate_plans(layer, HW)
    if not plans:
        return
    cycles = {p: simulate_conv(layer, HW, p, record_events=False).cycles for p in plans}
    assert all(plan_lower_bound(layer, p, HW) <= c for p, c in cycles.items())
    assert search_plan(layer, HW).stats.cycles == min(cycles.values())
