"""Attention against a KV cache planned per length bucket (options.KvPlan, passes.lower_op): the lowering
option and every layer's tiling plan are chosen at the power of two at or above the keys, and the layers
run at their own length with those plans."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nvdla_mapper.frontends.presets import decode_step_graph, preset
from nvdla_mapper.lowering.rules import bucket_keys
from nvdla_mapper.passes import map_model
from nvdla_mapper.search.tiling_search import planned_like, search_plan
from nvdla_sim import load_config
from nvdla_sim.engine.conv import simulate_conv
from nvdla_sim.engine.tiling import illegal_reason
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer, ConvShape
from nvdla_sim.precision import Precision
from nvdla_sim.processors import fixed_latency


def _step(kv: int, kv_plan: str = "bucket", hw: str = "nv_full"):
    g = decode_step_graph(preset("gpt2"), batch=1, kv_len=kv)
    return map_model(g, load_config(hw), precision=Precision.INT8, with_baseline=False, kv_plan=kv_plan)


def test_buckets_are_the_power_of_two_at_or_above_the_keys():
    assert [bucket_keys(k) for k in (1, 2, 3, 5, 129, 256, 257, 2049, 4096)] == [1, 2, 4, 8, 256, 256, 512, 4096, 4096]


def test_a_step_runs_the_plans_searched_at_its_bucket():
    """GPT-2 on nv_full at 150 cached tokens: 151 keys, planned at 256. Each attention layer's plan source
    is the same layer with 256 keys where it has 151 (QK^T: kernels; PV: input channels), its plan is the
    one search_plan finds there with the kernel tiles cut to 151, and its cycles are that plan simulated on
    the layer itself plus the fixed latencies (the simulator asked directly)."""
    hw = load_config("nv_full")
    att = [r for r in _step(150).results if r.task.plan_at is not None]
    assert {r.task.op.rsplit(".", 1)[-1] for r in att} == {"qk", "pv"}
    assert len(att) == 2 * 12  # both products in all 12 blocks
    for r in att[:2]:
        lay, wide = r.task.layer, r.task.plan_at
        s, w = dataclasses.asdict(lay.shape), dataclasses.asdict(wide.shape)
        keys = "out_k" if r.task.op.endswith("qk") else "in_c"
        assert {f for f in s if s[f] != w[f]} == {keys} and (s[keys], w[keys]) == (151, 256)
        found = search_plan(dataclasses.replace(wide, name=""), hw).plan
        want = dataclasses.replace(found, kernels_per_tile=min(found.kernels_per_tile, lay.shape.out_k))
        assert r.stats.plan == want
        sim = simulate_conv(lay, hw, want, record_events=False).cycles
        assert r.cycles_per_instance == sim + sum(fixed_latency(lay, hw))
        assert "planned at 256 keys" in " ".join(t.task.note for t in att)


def test_planned_at_every_length_each_layer_searches_its_own():
    hw = load_config("nv_full")
    convs = [r for r in _step(150, "length").results if isinstance(r.task.layer, ConvLayer)]
    assert convs and all(r.task.plan_at is None for r in convs)
    for r in convs:
        if r.task.op.endswith(("qk", "pv")):
            assert r.stats.plan == search_plan(dataclasses.replace(r.task.layer, name=""), hw).plan


def test_one_plan_per_bucket():
    """Every length of one bucket (129..256 keys) runs the same plans (order, bank split); the lengths of
    the next bucket (257..) are planned again, at 512. At 256 keys the layer is its own bucket's."""
    plans = {}
    for kv in (128, 129, 200, 255, 256, 300):
        att = [
            r
            for r in _step(kv).results
            if r.task.op in ("layer0.attn.qk", "layer0.attn.pv") and isinstance(r.task.layer, ConvLayer)
        ]
        plans[kv] = [(r.task.op, r.stats.plan.order, r.stats.plan.data_banks, r.stats.plan.weight_banks) for r in att]
        source = [(r.task.plan_at or r.task.layer).shape for r in att]
        assert [source[0].out_k, source[1].in_c] == [bucket_keys(kv + 1)] * 2
    assert plans[128] == plans[129] == plans[200] == plans[255]
    assert plans[256] == plans[300]


def test_a_plan_that_does_not_fit_the_layer_falls_back_to_its_own_search():
    """planned_like's contract where the source's plan is illegal for the layer: one data bank holds the
    source's one-pixel input row, not the layer's 4,096 pixels x 64 channels, so the layer is searched
    itself (and a plan that fits is kept)."""
    hw = load_config("nv_full")
    like = ConvLayer("", ConvShape(in_w=1, in_h=1, in_c=64, out_k=64), Precision.INT8)
    layer = dataclasses.replace(like, shape=dataclasses.replace(like.shape, in_w=4096))
    src = search_plan(like, hw).plan
    assert src.data_banks == 1 and "data tile needs 2048 CBUF entries" in illegal_reason(layer, src, hw)
    assert planned_like(layer, like, hw).plan == search_plan(layer, hw).plan != src
    narrower = dataclasses.replace(like, shape=dataclasses.replace(like.shape, out_k=40))
    assert planned_like(narrower, like, hw).plan == dataclasses.replace(src, kernels_per_tile=40)
    # a source with no CBUF-legal tiling at all (one 8,192 x 8,192 input row on nv_small)
    small = load_config("nv_small")
    layer = ConvLayer("", ConvShape(in_w=1, in_h=1, in_c=8192, out_k=64), Precision.INT8)
    wide = dataclasses.replace(layer, shape=dataclasses.replace(layer.shape, in_w=8192))
    with pytest.raises(NvdlaError, match="no CBUF-legal tiling"):
        search_plan(wide, small)
    assert planned_like(layer, wide, small).plan == search_plan(layer, small).plan


def test_kv_plan_through_the_cli(tmp_path, capsys):
    from nvdla_cli.main import main

    out = tmp_path / "gen"
    argv = ["generate", "gpt2", "--hw", "nv_full", "--prompt", "8", "--new-tokens", "3"]
    assert main([*argv, "--kv-plan", "length", "--report", str(out)]) == 0
    assert json.loads((out / "generate.json").read_text())[0]["kv_plan"] == "length"
    with pytest.raises(SystemExit) as e:  # the CLI's choices are the enum's values
        main([*argv, "--kv-plan", "step"])
    assert e.value.code == 2
    assert "argument --kv-plan: invalid choice: 'step' (choose from 'bucket', 'length')" in capsys.readouterr().err
    with pytest.raises(NvdlaError, match="--kv-plan 'x'"):
        map_model(decode_step_graph(preset("gpt2"), batch=1, kv_len=3), load_config("nv_full"),
                  precision=Precision.INT8, kv_plan="x")  # fmt: skip


def test_serve_records_its_kv_plan(tmp_path):
    from nvdla_cli.main import main

    out = tmp_path / "serve"
    argv = ["serve", "gpt2", "--hw", "nv_full", "--requests", "3", "--rate", "100", "--prompt", "8", "--output", "2"]
    assert main([*argv, "--kv-plan", "length", "--report", str(out)]) == 0
    assert json.loads((out / "serve.json").read_text())["kv_plan"] == "length"


def test_a_twin_with_another_layout_is_not_the_same_layer_with_more_keys():
    """PV's row width follows its keys (rules._row_for): at 2,101 keys a fused PV is 12 x 1 pixels, at
    4,096 it is 6 x 2. Such a twin is not the same layer registers with another key count, so the op is
    planned at its own length (passes._planned_at); a twin that differs only in the keys is."""
    from nvdla_mapper.lowering.rules import Resource, Task
    from nvdla_mapper.passes import _same_but_keys

    own = ConvLayer("pv", ConvShape(in_w=12, in_h=1, in_c=2101, out_k=64), Precision.INT8)
    wide = dataclasses.replace(own, name="pv@4096", shape=ConvShape(in_w=6, in_h=2, in_c=4096, out_k=64))
    same = dataclasses.replace(own, name="pv@4096", shape=dataclasses.replace(own.shape, in_c=4096))
    task = lambda layer: Task(layer.name, "pv", "attention", Resource.NVDLA, layer=layer)  # noqa: E731
    assert not _same_but_keys(task(own), task(wide))
    assert _same_but_keys(task(own), task(same))
    other = dataclasses.replace(same, precision=Precision.INT16)
    assert not _same_but_keys(task(own), task(other))
