"""The accuracy run's typed report: what its files hold and what its recipe says."""

import math

import pytest

from nvdla_mapper.numerics.accuracy_report import (
    REFERENCE,
    AccuracyReport,
    LayerError,
    LmAccuracy,
    TaskAccuracy,
    TrainedAccuracy,
)
from nvdla_mapper.numerics.quant import Calibration, Granularity
from nvdla_mapper.options import Pruning
from nvdla_mapper.studies.accuracy import QuantSettings
from nvdla_sim.precision import Precision


def test_calibration_spelling_round_trips():
    for text in ("max", "entropy", "percentile:99.9", "percentile:100"):
        assert str(Calibration.parse(text)) == text


def test_recipe_says_every_setting_in_one_order():
    s = QuantSettings(Granularity.PER_TENSOR, Calibration.parse("percentile:99.9"), prune="2:4", smooth=0.5,
                      only=frozenset({"ffn", "attention"}), softmax="nvdla")  # fmt: skip
    assert s.recipe() == (
        "static percentile:99.9 activations, per-tensor weights, SmoothQuant alpha 0.5, pruned 2:4, "
        "int8 only in attention,ffn, softmax in SDP's LUT"
    )
    assert QuantSettings(dynamic=True).recipe() == "dynamic activations, per-channel weights"
    assert QuantSettings(precision=Precision.FP16, prune="magnitude:0.5").recipe() == (
        "FP16 values, no scales, pruned magnitude:0.5"
    )


def test_lm_row_holds_perplexity_as_the_exponential_of_the_mean_nll():
    r = LmAccuracy(2, 128, math.log(5.0), math.log(6.25), 70, 64, 1, 16, 12, 9, 3)
    d = r.to_dict()
    assert (d["float_perplexity"], d["nvdla_perplexity"]) == (5.0, 6.25)
    assert d["positions"] == 128 and d["greedy_prefix"] == 9


def test_task_has_a_result_or_an_error():
    with pytest.raises(ValueError):
        TaskAccuracy("vit_digits", "nv_small", Precision.INT8, "r", None)
    with pytest.raises(ValueError):
        TaskAccuracy("vit_digits", "nv_small", Precision.INT8, "r", TrainedAccuracy(4, 4, 3, 0), error="x")
    err = TaskAccuracy("char_gpt", "nv_full", Precision.INT8, "r", None, error="cannot be programmed")
    assert err.to_dict() == {"model": "char_gpt", "hw": "nv_full", "error": "cannot be programmed"}


def test_report_file_form():
    task = TaskAccuracy("vit_digits", "nv_small", Precision.INT8, "static max", TrainedAccuracy(10, 9, 8, 2))
    rep = AccuracyReport(Granularity.PER_CHANNEL, Calibration.parse("max"), False, Pruning.parse(""), "static max",
                         "calib.npy", (LayerError("q", 0.5, 0.1, 0.99, 1),), task)  # fmt: skip
    d = rep.to_dict()
    assert d["prune"] == "none" and d["calibration"] == "max" and d["reference"] == REFERENCE
    assert d["layers"] == [{"name": "q", "max_abs": 0.5, "rel": 0.1, "cosine": 0.99, "saturations": 1}]
    assert d["task"] == {"recipe": "static max", "model": "vit_digits", "hw": "nv_small", "precision": "int8",
                         "images": 10, "float_correct": 9, "nvdla_correct": 8, "saturations": 2}  # fmt: skip
    assert task.result.nvdla_accuracy == 0.8
