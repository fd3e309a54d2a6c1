"""The processors' register views (nvdla_sim.processors.registers.RegisterView) and the program passes that
iterate them: the passes name no operation kind, each view's parts agree with one another, and a stored
description that does not fit its operation is a one-line error."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from nvdla_sim.config import load_config
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import PROCESSORS, REGISTER_VIEWS, processor_of, register_view
from nvdla_sim.program.decode import describe, from_description
from nvdla_sim.program.emit import Alloc, place, pool_pass, sdp_pass
from nvdla_sim.program.run import operation_timing, run_operations

HW = load_config("nv_small_rtl_tb")
PROGRAM = Path(__file__).resolve().parents[2] / "nvdla_sim" / "program"


def test_the_program_passes_import_no_processors_room_but_the_registry():
    """decode, execute and run reach the operations only through processors.register_view: none imports a
    processor's package (emit's operation builders are the one place that builds operations by kind)."""
    for module in ("decode.py", "execute.py", "run.py"):
        tree = ast.parse((PROGRAM / module).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        rooms = {m for m in imported if m and m.startswith("nvdla_sim.processors.") and m.count(".") >= 2}
        assert rooms <= {"nvdla_sim.processors.registers", "nvdla_sim.processors.lut"}, (module, rooms)


def test_every_processor_has_a_register_view_and_its_layer_is_its_processors():
    views = [p.registers for p in PROCESSORS]
    assert [v.kind for v in views] == ["conv", "sdp", "pdp", "cdp", "bdma", "rubik"]
    assert tuple(views) == REGISTER_VIEWS
    assert len({v.op_type for v in views}) == len(views)
    # every view names the units it enables, its done bit and the register whose write starts it
    assert all(v.units and v.done and v.enable_register for v in views)


def _pool_ops(split: int):
    """An SDP pass feeding PDP on the fly (3x3 max pooling at stride 1 over 16 x 8 x 16), PDP in `split` parts."""
    alloc = Alloc()
    spec = PoolSpec(PoolMode.MAX, 3, 3, 1, 1)
    src = place(alloc, 16, 8, 16, Precision.INT8, HW)
    dst = place(alloc, *spec.out_size(16, 8), 16, Precision.INT8, HW)
    sdp = sdp_pass(16, 8, 16, flying=False, src=src, to_pdp=True)
    pdp = pool_pass(16, 8, 16, spec, src, dst, Precision.INT8, (0,) * 7)
    pdp = dataclasses.replace(pdp, flying=True, src=None, split_num=split)
    return sdp, pdp


def test_a_pdp_pass_on_the_fly_is_timed_as_what_sdp_hands_it_whatever_its_split():
    """Split-width mode re-reads the kernel overlap of each part from memory (PdpRegisters.timed_layer); on the
    fly nothing is read, so the pair's cycles do not depend on the split (a review found them doubled)."""
    sdp, whole = _pool_ops(1)
    _, split = _pool_ops(3)
    assert operation_timing(sdp, HW, fed=whole).cycles == operation_timing(sdp, HW, fed=split).cycles
    (pair,) = run_operations([sdp, split], HW, name="t")  # the PDP pass of the pair is not timed again
    assert pair.kind == "sdp" and pair.cycles == operation_timing(sdp, HW, fed=whole).cycles


def test_each_views_hardware_layer_is_run_by_its_processor():
    sdp, pdp = _pool_ops(1)
    for op in (sdp, dataclasses.replace(pdp, flying=False, src=sdp.src)):
        view = register_view(op)
        assert processor_of(view.hw_layer(op, "t")).registers is view


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"method": "avgx"}, "method 'avgx' is not one of max, min, avg"),
        ({"partial_in": [1, 2]}, "partial_in holds 3 values, not 2"),
        ({"precision": "int4"}, "precision 'int4' is not one of int8, int16, fp16"),
    ],
)
def test_a_description_that_does_not_fit_is_a_one_line_error(change, message):
    _, pdp = _pool_ops(1)
    d = describe(pdp) | change
    with pytest.raises(TraceError, match=message) as e:
        from_description(d)
    assert "\n" not in str(e.value)


def test_the_alu_is_stored_under_its_register_name():
    """D_DP_*_CFG_0.ALU_ALGO calls the sum SUM: descriptions write "sum", and "add" is not a stored spelling."""
    from nvdla_sim.processors.sdp.registers import SdpStageCfg
    from nvdla_sim.units.sdp import AluOp

    sdp, _ = _pool_ops(1)
    op = dataclasses.replace(sdp, x1=SdpStageCfg(None, AluOp.ADD, None, False, True))
    d = describe(op)
    assert d["x1"]["alu_algo"] == "sum" and from_description(d) == op
    d["x1"]["alu_algo"] = "add"
    with pytest.raises(TraceError, match="alu_algo 'add' is not one of sum, max, min, eql"):
        from_description(d)
