"""The list schedule: streaming between resources and the host's batched hand-offs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.schedule import schedule


@dataclass(frozen=True)
class T:
    count: int


def _pair(prod_count, prod_each, host_count, host_each, overhead):
    tasks = [T(prod_count), T(host_count)]
    durations = [prod_count * prod_each, host_count * host_each]
    return schedule(
        tasks, durations, [prod_each, host_each], [[], [0]], [Resource.NVDLA, Resource.HOST], host_overhead=overhead
    )


def test_host_after_one_large_layer_takes_every_instance_in_one_hand_off():
    prod, host = _pair(1, 50_000, 12, 10_000 + 500, 10_000)
    assert host.start == prod.end == 50_000
    assert host.end == 50_000 + 10_000 + 12 * 500 and host.busy == 10_000 + 12 * 500


def test_host_behind_many_small_layers_batches_what_is_ready():
    """768 producer instances of 1,500 cycles; the host needs 10,000 per hand-off + 200 per instance:
    one instance per hand-off would take 768 x 10,200 cycles; batching keeps pace with the producer."""
    prod, host = _pair(768, 1_500, 768, 10_200, 10_000)
    assert prod.end == 768 * 1_500
    assert host.end < prod.end + 2 * (10_000 + 8 * 200)  # a short tail after the producer
    assert host.end < 768 * 10_200 / 5


@given(
    st.integers(1, 40),
    st.integers(1, 5_000),
    st.integers(1, 40),
    st.integers(0, 3_000),
    st.integers(0, 20_000),
)
def test_batched_host_is_between_its_bounds(pc, pe, hc, work, overhead):
    """Never before its last input nor faster than its work; never slower than one hand-off per
    instance streamed behind the producer."""
    prod, host = _pair(pc, pe, hc, overhead + work, overhead)
    assert host.end >= prod.end + overhead + work  # the last instance needs all of the producer
    assert host.busy >= overhead + hc * work
    if pc == 1 or hc == 1:  # every instance is ready when the producer ends: one hand-off
        assert host.end == prod.end + overhead + hc * work
    else:  # upper bound: one hand-off per instance, each as soon as its input is ready
        t = 0
        for j in range(hc):
            need = -(-(j + 1) * pc // hc)
            t = max(t, prod.start + -(-need * (prod.end - prod.start) // pc)) + overhead + work
        assert host.end <= t


def test_task_results_built_field_by_field_equal_the_constructor():
    """The schedule pass builds TaskResult.of (fields set directly, for speed): every field and equality are
    the constructor's."""
    import dataclasses

    from nvdla_mapper.frontends.presets import build_graph, preset
    from nvdla_mapper.passes import map_model
    from nvdla_mapper.results import TaskResult
    from nvdla_sim import Precision, load_config

    res = map_model(build_graph(preset("gpt2"), batch=1, seq=16), load_config("nv_small"), precision=Precision.INT8)
    for r in res.results[:20]:
        made = TaskResult(*(getattr(r, f.name) for f in dataclasses.fields(TaskResult)))
        assert made == r and vars(made) == vars(r)


@pytest.mark.parametrize("model", ["gpt2", "t5-base", "llama"])
def test_implied_waits_left_out_change_no_start_or_end(model, monkeypatch, tmp_path):
    """lower_ops leaves out of a task's waits the tasks another of its waits already waits for (single
    instances: passes._implied_left_out). Every task's start and end, prefill and decode step, equal the
    schedule with every wait kept, over far fewer edges (a residual stream's producers piled up)."""
    import json

    import nvdla_mapper.passes as passes
    from nvdla_mapper.frontends.hf_config import from_hf_config
    from nvdla_mapper.frontends.presets import build_graph, decode_step_graph, preset, t5_prefill_graph
    from nvdla_sim import Precision, load_config

    if model == "llama":
        cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
               "num_hidden_layers": 4, "num_key_value_heads": 2, "max_position_embeddings": 512, "vocab_size": 1000}  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        spec = from_hf_config(tmp_path / "config.json")
    else:
        spec = preset(model)
    prefill = t5_prefill_graph(spec, batch=1, prompt=16) if spec.decoder_layers else build_graph(spec, batch=1, seq=16)
    cross = 16 if spec.decoder_layers else 0
    graphs = (prefill, decode_step_graph(spec, batch=2, kv_len=(40, 70), cross_len=cross))
    hw = load_config("nv_full")

    def run():
        out = []
        for g in graphs:
            res = passes.map_model(g, hw, precision=Precision.INT8, with_baseline=False)
            out.append([(r.task.name, r.start, r.end) for r in res.results])
        return out

    def edges():
        ctx = passes.context_of(passes.new_memo(hw, precision=Precision.INT8))
        return sum(len(d) for g in graphs for d in passes.lower_ops(g, ctx)[1])

    left_out, fewer = run(), edges()
    monkeypatch.setattr(passes, "_implied_left_out", lambda pred, *rest: pred)
    assert run() == left_out and edges() > fewer
