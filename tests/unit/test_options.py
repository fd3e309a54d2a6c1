"""A misspelt mapping option is a one-line error naming the valid values, wherever it enters (issue 56):
before, softmax="NVDLA" at INT8 took the SDP path in one lowering and skipped the mask in another."""

from __future__ import annotations

import pytest

from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.options import Placement
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.accuracy import QuantSettings
from nvdla_mapper.studies.generate import generate
from nvdla_sim import NvdlaError, Precision, load_config


@pytest.mark.parametrize(("kw", "message"), [
    ({"softmax": "NVDLA"}, "softmax 'NVDLA': valid are auto, nvdla, host"),
    ({"layernorm": "cpu"}, "layernorm 'cpu': valid are auto, nvdla, host"),
    ({"kv_plan": "buckets"}, "--kv-plan 'buckets': valid are bucket, length"),
])  # fmt: skip
def test_a_misspelt_option_is_refused_by_every_entry(kw, message, nv_full):
    g = build_graph(preset("gpt2"), seq=16)
    with pytest.raises(NvdlaError, match=message.replace("(", r"\(")) as e:
        map_model(g, nv_full, precision=Precision.INT8, **kw)
    assert "\n" not in str(e.value)
    with pytest.raises(NvdlaError, match=message):
        generate(preset("gpt2"), nv_full, prompt=8, new_tokens=2, **kw)


def test_quant_settings_take_the_enum_or_its_value():
    from nvdla_mapper.numerics.quant import Calibration, Granularity

    s = QuantSettings(Granularity("per-channel"), Calibration.parse("max"), False, "", softmax="host")
    assert s.softmax is Placement.HOST and s.layernorm is Placement.AUTO
    with pytest.raises(NvdlaError, match="softmax 'Host': valid are auto, nvdla, host"):
        QuantSettings(Granularity("per-channel"), Calibration.parse("max"), False, "", softmax="Host")


def test_the_placement_chosen_is_the_same_spelled_either_way():
    hw = load_config("nv_full")
    g = build_graph(preset("bert-base"), seq=16)
    a = map_model(g, hw, precision=Precision.INT8, softmax="nvdla", layernorm="host")
    b = map_model(g, hw, precision=Precision.INT8, softmax=Placement.NVDLA, layernorm=Placement.HOST)
    assert a.total_cycles == b.total_cycles and a.to_dict()["layers"] == b.to_dict()["layers"]


def test_pruning_is_parsed_once_and_spelled_back():
    from nvdla_mapper.lowering.rules import WeightTreatment
    from nvdla_mapper.options import PruneKind, Pruning

    assert Pruning.parse("") == Pruning() and not Pruning.parse("none")
    two = Pruning.parse("2:4")
    assert (two.kind, two.density, str(two)) == (PruneKind.TWO_FOUR, 0.5, "2:4")
    mag = Pruning.parse("magnitude:0.75")
    assert (mag.kind, mag.density, str(mag)) == (PruneKind.MAGNITUDE, 0.25, "magnitude:0.75")
    for bad in ("3:4", "magnitude:1", "magnitude:x", "random:0.5"):
        with pytest.raises(NvdlaError, match=r"^--prune must be 2:4 or magnitude:S with 0 <= S < 1, not "):
            Pruning.parse(bad)
    # the weight treatment takes the spelling or the value, and holds the value
    assert WeightTreatment("2:4").prune == WeightTreatment(two).prune == two
    assert WeightTreatment("magnitude:0.5").to_dict()["prune"] == "magnitude:0.5"
    assert WeightTreatment().to_dict()["prune"] == "none"
