"""The mutation check in the default suite: every CMAC + CACC mutant of rtl/mutate.py is built in
process and driven on the fast tier (amaranth.sim) with two fixed stimuli; the golden model must tell
each from the design (the full three-tier run, `python -m nvdla_rtl.mutate`, is marked slow).

Left out here: `product_width`, which only the cocotb corner-value bench kills (validation/data/
rtl_mutation.json), and the SDP X1 mutants (sdp_x1.py), which the full run covers."""

from __future__ import annotations

import types

import numpy as np
import pytest

from nvdla_rtl import amaranth_sim, mutate
from nvdla_sim import Precision, load_config
from nvdla_sim.rtl_model.datapath_model import (
    datapath_outputs,
    datapath_params,
    datapath_timing,
    random_pattern,
    stripe_beats,
)

ONLY_ON_ICARUS = {"product_width"}
SAMPLE = [m for m in mutate.MUTANTS if m.file == "datapath.py" and m.id not in ONLY_ON_ICARUS]


def _design(m: mutate.Mutant) -> type:
    """The mutant's MatmulDatapath, compiled from the mutated source into a module of its own."""
    module = types.ModuleType(f"nvdla_rtl_mutant_{m.id}")
    module.__package__ = "nvdla_rtl"
    exec(compile(mutate.mutated_source(m), f"<mutant {m.id}>", "exec"), module.__dict__)
    return module.MatmulDatapath


def _agrees_with_model(design: type | None, *, precision: Precision) -> bool:
    """Values, accept cycles and output cycles of a run equal the golden model's: INT8, a 40-pixel tile
    with valid gaps on both inputs and back-pressure; INT16 at full scale (the saturation corners)."""
    if precision is Precision.INT8:
        p = datapath_params(load_config("nv_small"), precision)
        rng = np.random.default_rng(7)
        x, w = rng.integers(-128, 128, (40, 20)), rng.integers(-128, 128, (8, 20))
        ready, dat, wt = (random_pattern(rng, 3000, q) for q in (0.6, 0.7, 0.4))
        truncate = 3
    else:
        p = datapath_params(load_config("nv_small").with_values(precisions=["int8", "int16"]), precision)
        x, w = np.full((3, 16), 32767), np.full((p.cells, 16), 32767)
        w[1] = -32768
        ready, dat, wt, truncate = [True] * 400, (), (), 0
    beats, sets = stripe_beats(x, w, p)
    timing = datapath_timing(beats, sum(len(s) for s in sets), ready, p, dat_valid=dat, wt_valid=wt)
    run = amaranth_sim.run_amaranth(p, beats, sets, ready, truncate=truncate, dat_valid=dat, wt_valid=wt,
                                    max_cycles=2 * timing.last_out + 100, datapath=design)  # fmt: skip
    want = [(px, last, [int(a) for a in v]) for px, last, v in datapath_outputs(beats, sets, p, truncate=truncate)]
    return (
        run.values == want and run.accept_cycles == timing.accept_cycles and run.output_cycles == timing.output_cycles
    )


def test_the_unmodified_design_agrees_on_both_stimuli():
    assert _agrees_with_model(None, precision=Precision.INT8)
    assert _agrees_with_model(None, precision=Precision.INT16)


@pytest.mark.parametrize("mutant", SAMPLE, ids=[m.id for m in SAMPLE])
def test_each_datapath_mutant_is_killed(mutant):
    design = _design(mutant)
    try:
        killed = not (
            _agrees_with_model(design, precision=Precision.INT8)
            and _agrees_with_model(design, precision=Precision.INT16)
        )
    except Exception:  # a mutant that breaks elaboration or simulation is killed too
        killed = True
    assert killed, f"{mutant.id} ({mutant.what}) survived the fast tier"
