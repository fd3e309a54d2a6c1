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
    from nvdla_mapper.options import PruneKind, Pruning, WeightTreatment

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


def test_one_options_object_is_what_a_map_runs_under_and_keys_the_memo():
    """MapOptions: validated once (a misspelt precision too), equal whether spelled or given as enums, the
    keywords of map_model replacing its fields, and the pass memo's key: a memo made under other options
    is refused."""
    from nvdla_mapper.options import KvPlan, MapOptions, WeightTreatment
    from nvdla_mapper.passes import new_memo

    spelled = MapOptions(precision="int8", softmax="host", kv_plan="length", weights=WeightTreatment("2:4"))
    typed = MapOptions(Precision.INT8, Placement.HOST, weights=WeightTreatment("2:4"), kv_plan=KvPlan.LENGTH)
    assert spelled == typed and hash(spelled) == hash(typed)
    assert MapOptions.of(typed, softmax="nvdla").softmax is Placement.NVDLA and typed.softmax is Placement.HOST
    assert MapOptions.of(typed) is typed  # nothing given: the object itself
    with pytest.raises(NvdlaError, match=r"^precision 'int4': valid are int8, int16, fp16$"):
        MapOptions(precision="int4")
    hw = load_config("nv_full")
    g = build_graph(preset("gpt2"), seq=16)
    plain = MapOptions(precision=Precision.INT8)
    memo = new_memo(hw, plain)
    a = map_model(g, hw, plain, memo=memo)
    b = map_model(g, hw, precision=Precision.INT8)  # the keyword form: the same options
    assert a.total_cycles == b.total_cycles and a.to_dict()["layers"] == b.to_dict()["layers"]
    with pytest.raises(ValueError, match="memo was filled under another hw, host or MapOptions"):
        map_model(g, hw, MapOptions.of(plain, softmax="host"), memo=memo)
