"""One whole inference of the trained ViT classifier on NVIDIA's nv_small RTL (issue 31, item 5), checked in
CI without Verilator.

validation/data/nvdla_rtl_vit_digits.json holds what the RTL measured on the programs that
validation/nvdla_rtl/classifier_programs.py makes: every matmul of the INT8 inference of one test image
with the trained weights, the calibrated SDP numbers and the inputs the host made of the layers before.
Here the programs are made again (no RTL, no NVIDIA files): each must be the one that ran (its expected
CRC, the model's, is the one the RTL met), every layer must have passed, and the inference's class must
be the label's and the float model's; the model's cycles stay close to the RTL's.
"""

from __future__ import annotations

import pytest

from nvdla_sim.config import load_config
from nvdla_validation.nvdla_rtl.classifier_programs import DATA, data_file, generate
from nvdla_validation.nvdla_rtl.compare import compare, distribution, load_rows, manifest_mismatches

DOC = load_rows(DATA)
ROWS = {r["name"]: r for r in DOC["rows"]}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("vit"))


def test_committed_provenance_and_every_layer_passed_on_the_rtl():
    assert DOC["command"].startswith("python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir")
    assert len(DOC["source_commit"]) == 40 and DOC["date"]
    # 2 blocks x (q, k, v, 4 heads x (QK^T, PV), output, FFN in and out) + the patch embedding and classifier
    assert len(ROWS) == 2 * (3 + 4 * 2 + 3) + 2 == 30
    assert all(r["status"] == "pass" for r in ROWS.values()), [n for n, r in ROWS.items() if r["status"] != "pass"]


def test_the_programs_are_the_ones_the_rtl_ran_and_the_class_is_right(made):
    rows, outcome = made
    assert manifest_mismatches(rows, DOC) == []
    assert [r["order"] for r in rows] == list(range(30))
    # the test image is a digit the float model and the INT8 datapath both classify correctly
    assert outcome["int8_correct"] == 1 and outcome["float_prediction"] == outcome["label"]


def test_model_cycles_close_to_the_rtl(made):
    rows, _ = made
    model = {r.name: r.model_cycles for r in compare(DOC)}
    for r in rows:
        assert model[r["name"]] == r["model_cycles"], r["name"]
    rows_c = compare(DOC)
    d = distribution(rows_c)
    assert d["n"] == 30 and d["median"] <= 0.02 and d["worst"] <= 0.03, d  # 1.8% / 2.5% (2026-12-05)
    model, rtl = sum(r.model_cycles for r in rows_c), sum(r.rtl_cycles for r in rows_c)
    # 43,916 vs 44,384 (2026-12-05, the residual adds in SDP: their four layers at 0.982-0.989; 42,956 vs
    # 43,288 with the adds on the host)
    assert abs(model / rtl - 1) <= 0.015, (model, rtl)


def test_a_program_must_compute_the_given_output():
    """given_conv_program checks the program's output (the bit-exact model running the emitted registers)
    against the output the accuracy path computed; a mismatch or a wrong operand shape is a one-line error."""
    from nvdla_mapper.export.layer_programs import given_conv_program
    from nvdla_sim.config import load_config
    from nvdla_sim.errors import TraceError
    from nvdla_validation.nvdla_rtl.classifier_programs import HW, classifier_runs

    run = classifier_runs()[0][1]  # the first block's q projection
    hw = load_config(HW)
    ok = given_conv_program("q", run.layer, run.plan, hw, run.data, run.kernels, run.sdp, expect=run.output)
    assert len(ok.program.expected) == 1
    wrong = run.output.copy()
    wrong[0, 0, 0] ^= 1
    with pytest.raises(TraceError, match="not the given one"):
        given_conv_program("q", run.layer, run.plan, hw, run.data, run.kernels, run.sdp, expect=wrong)
    with pytest.raises(TraceError, match="the layer takes"):
        given_conv_program("q", run.layer, run.plan, hw, run.data[:, :, :8], run.kernels, run.sdp)


def test_per_kernel_sdp_operands_across_kernel_tiles():
    """A per-channel layer split into kernel tiles (the inference's per-channel layers are single tiles):
    each hardware layer reads its own kernels' bias and multipliers, and the program computes what
    run_conv computes for the whole layer (the emitter's own check), for every weight-stationary plan of
    several kernel tiles."""
    import numpy as np

    from nvdla_mapper.export.layer_programs import given_conv_program, plan_hardware_layers
    from nvdla_mapper.numerics.quant import Granularity, requant_sdp
    from nvdla_mapper.search.tiling_search import candidate_plans
    from nvdla_sim.config import load_config
    from nvdla_sim.engine.conv import run_conv
    from nvdla_sim.engine.tiling import LoopOrder
    from nvdla_sim.layers import ConvLayer, ConvShape
    from nvdla_sim.precision import Precision
    from nvdla_validation.nvdla_rtl.classifier_programs import HW

    hw = load_config(HW)
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 17, 64)).astype(np.int8)
    w = rng.integers(-128, 128, (40, 1, 1, 64)).astype(np.int8)
    sdp = requant_sdp(
        0.02, rng.uniform(0.001, 0.01, 40), 0.5, bias=rng.normal(0, 2, 40), granularity=Granularity.PER_CHANNEL
    )
    layer = ConvLayer("pc", ConvShape.matmul(17, 64, 40, row=17), Precision.INT8, sdp.timing_view(Precision.INT8))
    plans = [
        p for p in candidate_plans(layer, hw)
        if p.order is LoopOrder.WEIGHT_STATIONARY and len({kt for kt, _, _ in plan_hardware_layers(layer, p)}) > 1
    ]  # fmt: skip
    assert plans
    for plan in plans[:4]:
        y, _ = run_conv(layer, x, w, hw, plan, sdp_params=sdp)
        prog = given_conv_program("pc", layer, plan, hw, x, w, sdp, expect=y)
        assert prog.hardware_layers == len(plan_hardware_layers(layer, plan)) > 1


# The same inference as nv_full lowers it (validation/data/nvdla_rtl_vit_digits_nv_full.json, 2026-12-06):
# GELU in the LUT behind each FFN's first layer, the residual adds in Y's ALU from E-RDMA
FULL = "nv_full_rtl_tb"
FULL_DOC = load_rows(data_file(FULL))


@pytest.fixture(scope="module")
def made_full(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("vitf"), FULL)


def test_on_nv_full_every_layer_is_bit_exact_with_gelu_in_the_lut(made_full):
    rows, outcome = made_full
    assert FULL_DOC["command"].startswith("python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full")
    assert len(FULL_DOC["rows"]) == 30 and all(r["status"] == "pass" for r in FULL_DOC["rows"])
    assert manifest_mismatches(rows, FULL_DOC) == []
    assert outcome["int8_correct"] == 1 and outcome["float_prediction"] == outcome["label"]
    by_name = {r["name"]: r for r in FULL_DOC["rows"]}
    ffn1 = by_name["vit_13_l0_ffn1"]["layers"][0]["sdp"]
    assert ffn1["lut_enabled"] and ffn1["ew_enabled"]  # GELU through the LUT
    o = by_name["vit_12_l0_o"]["layers"][0]["sdp"]
    assert any(s["rdma"] == "erdma" for s in o["operand_streams"])  # the residual from E-RDMA


def test_on_nv_full_the_model_times_the_chain(made_full):
    """2026-12-06: 11,053 model cycles against 11,009 (1.004); per layer median 3.8%, worst 6.9% (the
    classifier, 217 against 203: layers of 200-400 cycles, where the fixed latencies weigh most)."""
    rows, _ = made_full
    timed = compare(FULL_DOC, load_config(FULL))
    model = {r.name: r.model_cycles for r in timed}
    assert all(model[r["name"]] == r["model_cycles"] for r in rows)
    d = distribution(timed)
    assert d["n"] == 30 and d["median"] <= 0.04 and d["worst"] <= 0.075, d
    total, rtl = sum(r.model_cycles for r in timed), sum(r.rtl_cycles for r in timed)
    assert abs(total / rtl - 1) <= 0.01, (total, rtl)
