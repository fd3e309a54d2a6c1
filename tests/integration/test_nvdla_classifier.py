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

from nvdla_validation.nvdla_rtl.classifier_programs import DATA, generate
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
    d = distribution(compare(DOC))
    assert d["n"] == 30 and d["median"] <= 0.05 and d["worst"] <= 0.25, d


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
