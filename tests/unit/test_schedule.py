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


# ---- alike blocks (schedule(..., blocks=)): scheduled until two repeat, the rest shifted ----


def _placed_blocks(monkeypatch) -> list[tuple[int, int]]:
    """Record the task ranges schedule places one by one."""
    import nvdla_mapper.schedule as sched

    placed: list[tuple[int, int]] = []
    real = sched._place

    def place(lo, hi, *rest):
        placed.append((lo, hi))
        return real(lo, hi, *rest)

    monkeypatch.setattr(sched, "_place", place)
    return placed


def test_alike_blocks_by_hand(monkeypatch):
    """A prefix task (NVDLA, 7 cycles), then five blocks of A (NVDLA, 10 cycles, after the block before's B)
    and B (BDMA, 4, after A), then a suffix task (host, 5) after the last B. By hand: block b's A runs
    7 + 14b .. 17 + 14b and its B to 21 + 14b; the suffix 77 .. 82. From the third block on each block is
    the one before shifted by 14: the schedule places blocks 0-2 and shifts the other two."""
    from nvdla_mapper.schedule import Blocks, alike_blocks

    res = [Resource.NVDLA, *[Resource.NVDLA, Resource.BDMA] * 5, Resource.HOST]
    deps = [[], [0], [1], *[d for b in range(1, 5) for d in ([2 * b], [2 * b + 1])], [10]]
    tasks, durations = [T(1)] * 12, [7, *[10, 4] * 5, 5]
    blocks = Blocks(1, 2, 5)
    assert alike_blocks(tasks, deps, res, blocks)
    placed = _placed_blocks(monkeypatch)
    out = schedule(tasks, durations, durations, deps, res, blocks=blocks)
    assert [(s.start, s.end) for s in out] == [
        (0, 7),
        *[(t, t + d) for b in range(5) for t, d in ((7 + 14 * b, 10), (17 + 14 * b, 4))],
        (77, 82),
    ]
    assert (7, 9) not in placed and (9, 11) not in placed  # blocks 3 and 4 were not placed
    assert out == schedule(tasks, durations, durations, deps, res)


def test_unlike_blocks_are_scheduled_one_by_one(monkeypatch):
    """Blocks whose durations differ (or whose waits reach two blocks back) are not alike: every block is
    placed, and alike_blocks refuses the structure it cannot shift."""
    from nvdla_mapper.schedule import Blocks, alike_blocks

    res = [Resource.NVDLA] * 6
    tasks, deps = [T(1)] * 6, [[], [0], [1], [2], [3], [4]]
    placed = _placed_blocks(monkeypatch)
    out = schedule(tasks, [1, 2, 1, 2, 1, 3], [1] * 6, deps, res, blocks=Blocks(0, 2, 3))
    assert out[-1].end == 10 and placed == [(0, 6)]
    assert not alike_blocks(tasks, [[], [0], [1], [0], [3], [4]], res, Blocks(0, 2, 3))  # waits two blocks back


@st.composite
def _block_lists(draw):
    """Random task lists of a prefix, alike blocks and a suffix (what alike_blocks accepts): resources and
    instance counts per block task, waits of block 0 into the prefix or itself, of later blocks into
    themselves or the block before (the same for every block from the second on), durations alike."""
    kinds = [Resource.NVDLA, Resource.BDMA, Resource.HOST]
    prefix, size, count, suffix = (draw(st.integers(lo, hi)) for lo, hi in ((0, 3), (1, 5), (3, 9), (0, 3)))
    first = prefix
    n = prefix + size * count + suffix
    res = [draw(st.sampled_from(kinds)) for _ in range(prefix)]
    block_res = [draw(st.sampled_from(kinds)) for _ in range(size)]
    block_counts = [draw(st.sampled_from([1, 1, 2, 4])) for _ in range(size)]
    counts = [draw(st.sampled_from([1, 2, 4])) for _ in range(prefix)]
    res += block_res * count
    counts += block_counts * count
    deps: list[list[int]] = [
        sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [] for i in range(prefix)
    ]
    zero = [sorted(draw(st.sets(st.integers(0, first + j - 1), max_size=3))) if first + j else [] for j in range(size)]
    later = [sorted(draw(st.sets(st.integers(-size, j - 1), max_size=3))) for j in range(size)]
    deps += zero
    for b in range(1, count):
        deps += [[first + b * size + d for d in later[j]] for j in range(size)]
    for i in range(first + size * count, n):
        res.append(draw(st.sampled_from(kinds)))
        counts.append(draw(st.sampled_from([1, 2, 4])))
        deps.append(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))))
    each = [draw(st.integers(1, 50)) for _ in range(n)]
    block_each = [draw(st.integers(1, 50)) for _ in range(size)]
    each[first : first + size * count] = block_each * count
    durations = [e * c for e, c in zip(each, counts, strict=True)]
    return [T(c) for c in counts], durations, each, deps, res, (first, size, count), draw(st.integers(0, 20))


@given(_block_lists())
def test_alike_blocks_schedule_as_every_task_one_by_one(case):
    """Against the plain list schedule on random block structures (with host hand-offs and streaming):
    the same starts, ends and busy times, whether or not the blocks come to repeat."""
    from nvdla_mapper.schedule import Blocks, alike_blocks

    tasks, durations, each, deps, res, (first, size, count), overhead = case
    blocks = Blocks(first, size, count)
    assert alike_blocks(tasks, deps, res, blocks)
    plain = schedule(tasks, durations, each, deps, res, host_overhead=overhead)
    assert schedule(tasks, durations, each, deps, res, host_overhead=overhead, blocks=blocks) == plain
