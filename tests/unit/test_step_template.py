"""Decode steps re-timed from a template (mapper/studies/step_template.py) equal full maps of their graphs:
every task's place and time in the schedule, the step's cycles, DRAM bytes, MACs, bound, roofline and
energy. The reference is map_model on the whole step's graph with no memo (the step-by-step path)."""

from __future__ import annotations

import pytest

from nvdla_mapper.frontends.presets import decode_step_graph, mixed_step_graph, preset
from nvdla_mapper.passes import map_model, new_memo
from nvdla_mapper.studies.generate import generate
from nvdla_mapper.studies.serve import SimulatedCosts
from nvdla_mapper.studies.step_template import StepTemplate, one_block
from nvdla_sim import load_config
from nvdla_sim.precision import Precision


def _figures(res) -> tuple:
    """Everything a step reports, and every task's timing without its name (the template keeps the first
    block's names for the attention tasks of every block)."""
    rows = [
        (r.task.op.split(".", 1)[-1], r.task.resource, r.task.count, r.cycles_per_instance, r.start, r.end, r.duration)
        for r in res.results
    ]
    return (
        res.total_cycles, res.figures().dram_bytes, res.model_macs, res.figures().bound, res.figures().roofline_cycles,
        res.energy(), res.weight_bytes(), rows,
    )  # fmt: skip


def _full(spec, hw, graph, precision=Precision.INT8, kv_plan="bucket"):
    return map_model(graph, hw, precision=precision, with_baseline=False, kv_plan=kv_plan)


def test_every_step_of_a_short_run_equals_a_full_map():
    hw, spec = load_config("nv_full"), preset("gpt2")
    template = StepTemplate(
        spec, lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv), new_memo(hw, precision=Precision.INT8)
    )
    for kv in range(8, 28):
        assert _figures(template.map(kv)) == _figures(_full(spec, hw, decode_step_graph(spec, batch=1, kv_len=kv)))


def test_sampled_steps_of_a_long_run_equal_full_maps(small_llama):
    """A grouped-query, rotary model at batch 2 for 400 steps: generate's steps (through the template) at
    sampled cache lengths against full maps."""
    hw, spec = load_config("nv_full"), small_llama
    r = generate(spec, hw, prompt=24, new_tokens=400, batch=2)
    for i in (0, 1, 2, 37, 38, 200, 398):
        step = r.steps[i]
        full = _full(spec, hw, decode_step_graph(spec, batch=2, kv_len=step.kv_len))
        en = full.energy()
        assert (step.cycles, step.dram_bytes, step.macs, step.bound, step.roofline_cycles) == (
            full.total_cycles, full.figures().dram_bytes, full.model_macs, full.figures().bound, full.figures().roofline_cycles
        )  # fmt: skip
        assert (step.core_energy_uj, step.dram_energy_uj) == (en.batch_core_uj, en.batch_dram_uj)
        assert step.hardware_macs == full.macs


def test_a_change_of_form_rebuilds_the_template(small_llama):
    """Planned at every length (kv_plan "length"), at batch 2 on nv_full the small model's QK^T changes form
    between 661 and 662 cached tokens (found by scanning, and back at 672; its PV flipped at 723/724 before
    BDMA's copies were timed as nv_full's RTL runs them): its cheapest lowering goes from one block-diagonal
    layer per sequence, Q copied into it by BDMA, to one layer per K/V group, another task list. The
    template is rebuilt there, and every step on both sides equals a full map."""
    hw, spec = load_config("nv_full"), small_llama
    build = lambda s, kv: decode_step_graph(s, batch=2, kv_len=kv)  # noqa: E731
    template = StepTemplate(spec, build, new_memo(hw, precision=Precision.INT8, kv_plan="length"))
    for kv in range(658, 666):
        assert _figures(template.map(kv)) == _figures(_full(spec, hw, build(spec, kv), kv_plan="length"))
    assert template.rebuilds == 1


def test_planned_per_bucket_the_form_changes_only_at_powers_of_two(small_llama):
    """The same steps planned per length bucket (the default): 724..732 keys all plan at 1,024, so the
    form that flipped at 724 under "length" holds and nothing is rebuilt; across the bucket's end (1,024
    keys: 1,023 cached, then 1,025 keys planned at 2,048) every step still equals a full map, and the
    template is rebuilt there at most once."""
    hw, spec = load_config("nv_full"), small_llama
    build = lambda s, kv: decode_step_graph(s, batch=2, kv_len=kv)  # noqa: E731
    template = StepTemplate(spec, build, new_memo(hw, precision=Precision.INT8))
    for kv in (*range(720, 731), 1022, 1023):
        assert _figures(template.map(kv)) == _figures(_full(spec, hw, build(spec, kv)))
    assert template.rebuilds == 0
    for kv in (1024, 1025, 1500):
        assert _figures(template.map(kv)) == _figures(_full(spec, hw, build(spec, kv)))
    assert template.rebuilds <= 1


def test_t5_and_host_softmax_steps_equal_full_maps():
    """T5's decoder steps (self- and cross-attention) on nv_small, where softmax and layernorm run on the
    host."""
    hw, spec = load_config("nv_small"), preset("t5-base")
    build = lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv, cross_len=32)  # noqa: E731
    template = StepTemplate(spec, build, new_memo(hw, precision=Precision.INT8))
    for kv in (0, 1, 2, 9, 30):
        assert _figures(template.map(kv)) == _figures(_full(spec, hw, build(spec, kv)))


def test_serving_compositions_equal_full_maps():
    """Serving: a batch of per-sequence cache lengths, and chunked prefill mixed with decodes; each
    composition's template serves other lengths of the same composition, and iterations of another
    composition get their own."""
    hw, spec = load_config("nv_full"), preset("gpt2")
    costs = SimulatedCosts(spec, hw)
    for lens in ((3, 3, 17), (5, 5, 40), (6, 41, 41), (9,), (7, 7, 7)):
        full = _full(spec, hw, decode_step_graph(spec, batch=len(lens), kv_len=lens))
        assert costs.decode(lens) == full.total_cycles
    for seqs, emitting in ((((10, 1), (0, 4)), 2), (((12, 1), (0, 4)), 2), (((12, 1), (4, 4)), 1)):
        assert (
            costs.mixed(seqs, emitting) == _full(spec, hw, mixed_step_graph(spec, seqs, emitting=emitting)).total_cycles
        )
    assert len(costs._templates) == 6  # decode (2, 1), (1, 2), (1,), (3,); mixed ((1, 4), (1, 1)) emitting 2 and 1


def test_figures_without_a_map_result_equal_the_map_results(small_llama):
    """StepTemplate.figures (the alike blocks scheduled until they repeat, then shifted; one block's figures
    counted for every block) equals the figures of the step's MapResult, which the tests above hold to
    full maps: GPT-2 on nv_full, the small LLaMA at batch 2 on nv_full (its host hand-offs differ between
    the first blocks, so those blocks are counted apart), T5's decoder on nv_small, serving's mixed-length
    and chunked-prefill compositions."""
    gpt2, t5 = preset("gpt2"), preset("t5-base")
    cases = [
        (gpt2, "nv_full", lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv), [8, 9, 10, 27, 64, 100], 12),
        (small_llama, "nv_full", lambda s, kv: decode_step_graph(s, batch=2, kv_len=kv), [24, 25, 61, 200], 3),
        (t5, "nv_small", lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv, cross_len=32), [0, 1, 9], 12),
        (gpt2, "nv_full", lambda s, lens: decode_step_graph(s, batch=len(lens), kv_len=lens), [(3, 17), (5, 40)], 12),
        (gpt2, "nv_full", lambda s, q: mixed_step_graph(s, q, emitting=2), [((10, 1), (0, 4)), ((12, 1), (0, 4))], 12),
    ]
    for spec, name, build, shapes, layers in cases:
        hw = load_config(name)
        fast = StepTemplate(spec, build, new_memo(hw, precision=Precision.INT8))
        whole = StepTemplate(spec, build, new_memo(hw, precision=Precision.INT8))
        for shape in shapes:
            assert fast.figures(shape) == whole.map(shape).figures(), (spec.name, shape)
        blocks = fast.base.blocks
        assert blocks is not None and blocks.count == layers
        tail = len(fast.base.tasks) - blocks.first - blocks.size * blocks.count
        assert all(t.name.startswith(("layer", "dec")) for t in fast.base.tasks[blocks.first : -tail or None])


def test_one_block_and_unlike_blocks():
    spec = preset("gpt2")
    assert one_block(spec).stages[0].layers == 1 and one_block(preset("t5-base")).decoder_layers == 1
    hw = load_config("nv_full")

    def unlike(s, kv):  # the one-block step is not the real step's block: refused, not mis-timed
        return decode_step_graph(s, batch=1, kv_len=kv + (s.stages[0].layers > 1))

    with pytest.raises(ValueError, match="no like op in the one-block step of gpt2"):
        StepTemplate(spec, unlike, new_memo(hw, precision=Precision.INT8)).map(8)
