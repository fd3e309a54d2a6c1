"""Autoregressive generation: decode steps against the DRAM floor, precision, exact steps, bad input."""

from __future__ import annotations

import json
import math

import pytest

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import decode_step_graph, preset
from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import _simulate_cached, map_model
from nvdla_mapper.search.tiling_search import planned_like_instances, search_plan
from nvdla_mapper.studies.generate import generate, kv_bytes_per_token
from nvdla_sim import Precision, load_config
from nvdla_sim.engine.stats import Bound
from nvdla_sim.errors import NvdlaError
from nvdla_sim.processors import fixed_latency


def _floor_and_overheads(res, hw):
    """(DRAM floor, fixed overheads) of a mapped step: every byte it moves over the DRAM bandwidth; each
    hardware layer's launch, pipeline, completion and first-read latency, and the host's time."""
    moved = sum(r.stats.traffic.dram_total * r.task.count for r in res.results if r.stats)  # copies' too
    fixed = sum(
        r.task.count * (sum(fixed_latency(r.task.layer, hw)) + hw.memory.dram_latency_cycles)
        for r in res.results
        if r.task.resource is Resource.NVDLA
    )
    # a copy's fixed latency is its first read's (processors.bdma)
    fixed += sum(
        r.task.count * sum(fixed_latency(r.task.layer, hw)) for r in res.results if r.task.resource is Resource.BDMA
    )
    fixed += sum(r.cycles for r in res.results if r.task.resource == Resource.HOST)
    return moved / hw.dram_bytes_per_cycle, fixed


@pytest.mark.parametrize("hw_name", ["nv_small", "nv_large", "nv_full"])
def test_batch_1_decode_is_at_the_dram_floor_plus_fixed_overheads(hw_name):
    hw = load_config(hw_name)
    step = map_model(
        decode_step_graph(preset("gpt2"), batch=1, kv_len=128), hw, precision=Precision.INT8, batch=1, seq=128
    )
    floor, fixed = _floor_and_overheads(step, hw)
    assert step.total_cycles >= floor
    assert step.total_cycles <= 1.10 * (floor + fixed), (step.total_cycles, floor, fixed)
    weights = 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 768 * 50257  # the whole model, read once per token
    assert floor * hw.dram_bytes_per_cycle >= weights


def test_int16_doubles_the_bytes_per_token_and_the_step_follows():
    hw = load_config("nv_full")
    steps = {
        p: map_model(decode_step_graph(preset("gpt2"), batch=1, kv_len=64), hw, precision=p, batch=1, seq=64)
        for p in (Precision.INT8, Precision.INT16)
    }
    f8, _ = _floor_and_overheads(steps[Precision.INT8], hw)
    f16, _ = _floor_and_overheads(steps[Precision.INT16], hw)
    assert 1.9 <= f16 / f8 <= 2.05
    assert steps[Precision.INT16].total_cycles > 1.4 * steps[Precision.INT8].total_cycles


def test_steps_are_exact_with_the_per_layer_cache():
    """Every step is simulated; the per-layer cache only serves identical layers and the steps' memo
    (passes.PassMemo) only ops and tasks met before: a fresh map of every step, caches cleared, gives
    the same cycles, DRAM bytes and energy."""
    hw = load_config("nv_small")
    cached = generate(preset("gpt2"), hw, prompt=16, new_tokens=5)
    cold = []
    for t in range(1, 5):
        _simulate_cached.cache_clear()
        search_plan.cache_clear()
        step = map_model(decode_step_graph(preset("gpt2"), batch=1, kv_len=16 + t - 1), hw, precision=Precision.INT8)
        cold.append((step.total_cycles, step.figures().dram_bytes, step.energy().batch_core_uj))
    assert [(s.cycles, s.dram_bytes, s.core_energy_uj) for s in cached.steps] == cold
    cycles = [c for c, _, _ in cold]
    assert cycles == sorted(cycles) and cycles[-1] > cycles[0]  # a longer cache costs more


def test_a_memo_serves_only_its_own_context():
    """A memo filled under one precision (or weight treatment) is refused by a map under another, and a
    map with a memo equals one without, also for a graph the memo has not seen."""
    from nvdla_mapper.options import WeightTreatment
    from nvdla_mapper.passes import new_memo

    hw = load_config("nv_full")
    memo = new_memo(hw, precision=Precision.INT8)
    g = decode_step_graph(preset("gpt2"), batch=2, kv_len=40)
    with pytest.raises(ValueError, match="memo was filled under another"):
        map_model(g, hw, precision=Precision.INT16, memo=memo)
    with pytest.raises(ValueError, match="memo was filled under another"):
        map_model(g, hw, precision=Precision.INT8, memo=memo, weights=WeightTreatment(compression=True))
    for kv in (40, 41, 40):
        g = decode_step_graph(preset("gpt2"), batch=2, kv_len=kv)
        a, b = map_model(g, hw, precision=Precision.INT8, memo=memo), map_model(g, hw, precision=Precision.INT8)
        assert [(r.task, r.start, r.end) for r in a.results] == [(r.task, r.start, r.end) for r in b.results]
        assert a.energy() == b.energy()


def test_results_and_tinyllama(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
           "num_hidden_layers": 22, "num_key_value_heads": 4, "max_position_embeddings": 2048, "vocab_size": 32000}  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    spec = from_hf_config(p)
    assert kv_bytes_per_token(spec, Precision.INT8) == 2 * 22 * 4 * 64
    step = decode_step_graph(spec, batch=2, kv_len=9)
    qk = step.nodes["layer0.attn.qk"]["op"]
    assert (qk.m, qk.n, qk.count) == (8, 10, 2 * 4)  # a K/V group's 8 query heads as one layer, per sequence
    r = generate(spec, load_config("nv_full"), prompt=32, new_tokens=3, batch=2)
    d = r.to_dict()
    assert len(r.token_cycles) == 3 and d["ttft_ms"] > d["per_token_ms"]["median_step"] > 0
    assert d["kv_cache_bytes_end"] == 2 * 22 * 4 * 64 * 2 * 35
    # A decode step at batch 2 reads every weight matrix once: 22 x (2 x 2048^2 + 2 x 2048 x 256 +
    # 3 x 2048 x 5632) + 32,000 x 2048 (LM head) = 1,034,420,224 bytes, 16,162,816 cycles at nv_full's
    # 64 B/cycle, against ~1 M cycles of MACs (2 tokens per weight): DRAM-bound, near that floor
    floor = (22 * (2 * 2048**2 + 2 * 2048 * 256 + 3 * 2048 * 5632) + 32000 * 2048) // 64
    assert floor == 16_162_816
    assert d["decode"]["bound"] == "dram"
    assert all(floor <= c <= 1.25 * floor for c in r.token_cycles[1:]), r.token_cycles


def test_bad_input():
    hw = load_config("nv_full")
    with pytest.raises(NvdlaError, match="bert is an encoder"):
        generate(preset("bert-base"), hw, prompt=8, new_tokens=2)
    with pytest.raises(NvdlaError, match="= 1025 positions; gpt2 has 1024"):
        generate(preset("gpt2"), hw, prompt=1000, new_tokens=25)
    with pytest.raises(NvdlaError, match="--new-tokens must be a positive integer, not 0"):
        generate(preset("gpt2"), hw, prompt=8, new_tokens=0)


def test_generate_cli(tmp_path, capsys):
    from nvdla_cli.main import main

    out = tmp_path / "gen"
    argv = ["generate", "gpt2", "--hw", "nv_small", "--prompt", "16", "--new-tokens", "3", "--batch", "1,2"]
    assert main([*argv, "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "time to first token" in text and "batch  median ms/step  mean ms/step" in text
    docs = json.loads((out / "generate.json").read_text())
    assert [d["batch"] for d in docs] == [1, 2]
    assert len((out / "tokens.csv").read_text().splitlines()) == 1 + 2 * 3
    page = (out / "report.html").read_text()
    assert 'id="plot-tokens"' in page and 'id="plot-batch"' in page and 'id="runs"' in page
    assert main(["generate", "vit-b16"]) == 2
    assert main(["generate", "gpt2", "--batch", "0"]) == 2
    assert "--batch '0'" in capsys.readouterr().err


def test_t5_encodes_once_then_decodes_against_both_caches():
    """The encoder and the cross-attention K/V run once (prefill); each decoder step projects q only for
    cross-attention and appends to its self-attention cache; the first token waits for one decoder step."""
    hw = load_config("nv_full")
    r = generate(preset("t5-base"), hw, prompt=64, new_tokens=4)
    assert r.first_step_cycles > 0 and r.ttft_cycles == r.prefill.total_cycles + r.first_step_cycles
    assert [s.kv_len for s in r.steps] == [1, 2, 3]
    step = decode_step_graph(preset("t5-base"), batch=1, kv_len=3, cross_len=64)
    assert "dec0.xattn.q" in step and "dec0.xattn.k" not in step and "dec0.attn.k_append" in step
    assert step.nodes["dec0.xattn.qk"]["op"].n == 64 and step.nodes["dec0.attn.qk"]["op"].n == 4
    names = [t.task.name for t in r.prefill.results]
    assert "dec11.xattn.k" in names and "dec11.xattn.v_cache" in names and not any("lm_head" in n for n in names)


def test_weight_footprint_and_the_address_space():
    """Weights as published (GPT-2 124M, GPT-2 XL 1.5B, GPT-J 6B parameters, less position tables), and a
    model beyond what NVDLA can address is refused with the shortfall."""
    from nvdla_mapper.studies.generate import weight_bytes

    assert 123e6 < weight_bytes(preset("gpt2"), Precision.INT8) < 125e6
    assert 1.5e9 < weight_bytes(preset("gpt2-xl"), Precision.INT8) < 1.6e9
    assert 6.0e9 < weight_bytes(preset("gptj-6b-size"), Precision.INT8) < 6.1e9
    assert weight_bytes(preset("gpt2"), Precision.INT16) == 2 * weight_bytes(preset("gpt2"), Precision.INT8)
    with pytest.raises(
        NvdlaError,
        match=r"needs 5\.69 GiB .* 32-bit address space of nv_small holds 4\.00 GiB: 1\.69 GiB \([\d,]+ bytes\) too much",
    ):
        generate(preset("gptj-6b-size"), load_config("nv_small"), prompt=128, new_tokens=128)
    r = generate(preset("gpt2-xl"), load_config("nv_full"), prompt=32, new_tokens=2)
    assert r.steps and r.steps[0].bound is Bound.DRAM


@pytest.mark.parametrize("hw_name", ["nv_small", "nv_large", "nv_full"])
def test_weight_streaming_turns_compute_bound_near_the_roofline_batch(hw_name):
    """Batch x MACs per weight element catch up with the DRAM: peak MACs x bytes per weight / bytes per cycle."""
    from nvdla_mapper.studies.generate import crossover_batch, roofline_crossover

    hw = load_config(hw_name)
    sim, roof = crossover_batch(preset("gpt2"), hw), roofline_crossover(hw, Precision.INT8)
    assert roof / 1.5 <= sim <= roof * 1.5, (sim, roof)


@pytest.mark.parametrize("hw_name", ["nv_small", "nv_large", "nv_full"])
def test_large_batch_step_reaches_its_roofline(hw_name):
    """Past the crossover, the weight-streaming layers run at their MAC bound, and the whole step stays
    close to its roofline (each layer at the larger of its MAC and DRAM time); the attention against
    each sequence's own cache has one MAC per cached element, so it stays DRAM-bound at any batch."""
    from nvdla_mapper.studies.generate import roofline_crossover
    from nvdla_mapper.workload import OpKind, ops_in_order

    hw = load_config(hw_name)
    peak = hw.peak_macs_per_cycle(Precision.INT8)
    batch = 4 * math.ceil(roofline_crossover(hw, Precision.INT8))
    step = map_model(
        decode_step_graph(preset("gpt2"), batch=batch, kv_len=128), hw, precision=Precision.INT8, batch=batch, seq=128
    )
    mm = [r for r in step.results if r.stats and r.task.group in ("matmul", "head")]
    mac_bound = sum(r.stats.macs * r.task.count for r in mm) / peak
    assert sum(r.cycles for r in mm) <= 1.10 * mac_bound
    roof = step.figures().roofline_cycles
    assert roof <= step.total_cycles <= 1.5 * roof, (step.total_cycles, roof)
    # the attention's own work (model MACs) takes less time than reading the caches it needs
    attn = [r for r in step.results if r.stats and r.task.op.endswith((".qk", ".pv"))]
    cache_time = sum(r.stats.traffic.dram_read * r.task.count for r in attn) / hw.dram_bytes_per_cycle
    one = decode_step_graph(preset("gpt2"), batch=1, kv_len=128)
    ops = [o for o in ops_in_order(one) if o.kind in (OpKind.ATTN_SCORES, OpKind.ATTN_CONTEXT)]
    assert attn and batch * sum(o.macs for o in ops) / peak < cache_time


def test_decode_attention_picks_the_faster_of_per_group_and_fused_heads():
    """A decode step's QK^T and PV are lowered both ways (one layer per K/V group, or all heads of a
    sequence as pixels of one layer against every group's cache); the mapper keeps the one its own
    simulation finds faster and says so, and the model MACs do not depend on the choice."""
    from nvdla_mapper.lowering.rules import Choice, LoweringContext, lower
    from nvdla_mapper.passes import cheapest, simulate_tasks, tasks_cycles
    from nvdla_mapper.workload import ops_in_order

    g = decode_step_graph(preset("gpt2"), batch=8, kv_len=100)
    qk = next(o for o in ops_in_order(g) if o.name == "layer0.attn.qk")
    for hw_name in ("nv_small", "nv_full"):
        hw = load_config(hw_name)
        ctx = LoweringContext.of(hw=hw, precision=Precision.INT8)
        choice = lower(qk, ctx)
        assert isinstance(choice, Choice) and len(choice.options) == 2
        costs = [tasks_cycles(tasks, ctx) for _, tasks in choice.options]
        for _, tasks in choice.options:  # hardware MACs: the model's, or more (the zero blocks)
            _, st = simulate_tasks(list(tasks), hw, ctx.host)
            assert sum(s.macs * t.count for t, s in zip(tasks, st, strict=True) if s) >= qk.macs
        picked = cheapest(choice, ctx)
        best = costs.index(min(costs))
        assert [t.name for t in picked] == [t.name for t in choice.options[best][1]]
        assert "chosen:" in picked[0].note
    # on nv_full (BDMA, 1200-cycle memory latency) the fused layer wins: one fixed latency per sequence
    step = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=8, seq=100)
    qk_rows = [r for r in step.results if r.task.op == "layer0.attn.qk"]
    assert [r.task.resource for r in qk_rows] == [Resource.BDMA, Resource.NVDLA] and qk_rows[1].task.count == 8
    assert step.model_macs == sum(o.own_macs for o in ops_in_order(g))


def test_generation_energy_is_its_prefill_and_steps():
    """GPT-2, 16 prompt tokens and 4 new on nv_small (1,000 MHz): the prefill makes the first token, three
    decode steps (16, 17 and 18 cached tokens, a key more each) the rest. The run's NVDLA energy is the
    prefill's and every step's, a step's being that of the step's graph mapped whole (passes.map_model, not
    the step template generate uses); average power is that energy over the tokens' cycles (1 uJ over 1e6
    cycles, a millisecond, is 1 mW); TOPS/W counts two operations per model MAC of every pass, by hand: per
    block the QKV and output projections, QK^T and PV of 12 heads of 64 over the keys, the FFN; then the LM
    head (768 x 50,257) on the last position."""
    hw = load_config("nv_small")
    spec = preset("gpt2")
    r = generate(spec, hw, prompt=16, new_tokens=4)
    d = r.to_dict()
    en = d["energy"]
    cycles = d["token_cycles"]
    assert len(cycles) == 4 and len(r.steps) == 3 and [s.kv_len for s in r.steps] == [16, 17, 18]
    # a step against k + 1 keys, mapped whole: its energy is the step's
    for step in (r.steps[0], r.steps[2]):
        g = decode_step_graph(spec, batch=1, kv_len=step.kv_len)
        whole = map_model(g, hw, precision=Precision.INT8, batch=1, seq=step.kv_len, with_baseline=False)
        assert step.core_energy_uj == pytest.approx(whole.energy().batch_core_uj, rel=1e-6)
        assert step.cycles == whole.total_cycles
    steps_uj = [s.core_energy_uj for s in r.steps]
    assert en["prefill_core_uj"] == pytest.approx(r.prefill.energy().batch_core_uj)
    assert en["decode_core_uj"] == pytest.approx(sum(steps_uj), rel=1e-6)
    assert en["total_core_uj"] == pytest.approx(en["prefill_core_uj"] + sum(steps_uj), rel=1e-6)
    assert en["decode_core_uj_per_token"] == pytest.approx(sum(steps_uj) / 3, rel=1e-5)
    assert en["decode_core_uj_per_step_median"] == pytest.approx(sorted(steps_uj)[1])
    assert d["total_ms"] == pytest.approx(sum(cycles) / 1e6, abs=1e-4)
    assert en["average_core_power_mw"] == pytest.approx(en["total_core_uj"] * 1e6 / sum(cycles), rel=1e-3)

    def block(queries: int, keys: int) -> int:
        return queries * 768 * (3 * 768 + 768 + 2 * 3072) + 2 * 12 * queries * 64 * keys

    macs = 12 * block(16, 16) + 768 * 50257 + sum(12 * block(1, k + 1) + 768 * 50257 for k in (16, 17, 18))
    assert r.prefill.model_macs + sum(s.macs for s in r.steps) == macs
    assert en["tops_per_w"] == pytest.approx(2 * macs / (en["total_core_uj"] * 1e-6) / 1e12, rel=1e-3)
    # at batch 2 a step makes two tokens: per token is half the step
    r2 = generate(spec, hw, prompt=16, new_tokens=2, batch=2)
    en2 = r2.to_dict()["energy"]
    assert en2["decode_core_uj_per_token"] == pytest.approx(r2.steps[0].core_energy_uj / 2, rel=1e-5)


def test_weight_whatifs_shrink_what_a_decode_step_streams(capsys):
    """--prune 2:4 --weight-compression in generate: every static weight matrix stored in NVDLA's
    compressed format (the non-zero bytes, a 1-bit-per-weight mask, a 4-byte size per kernel group of
    32 on nv_full): GPT-2's 12 x (q, k, v, o 768x768; FFN 768x3072 and 3072x768) and its LM head in
    pieces of 8,192 kernels (6 and one of 1,105) -> 77,224,172 bytes of 123,532,032. A decode step at
    batch 1 streams every weight once, so it reads that much less, and takes less time (DRAM-bound)."""
    import math

    from nvdla_cli.main import main
    from nvdla_mapper.options import WeightTreatment

    def stored(k: int, n: int) -> int:
        return k * n // 2 + k * n // 8 + 4 * math.ceil(n / 32)

    layer = 4 * stored(768, 768) + stored(768, 3072) + stored(3072, 768)
    expect = 12 * layer + 6 * stored(768, 8192) + stored(768, 1105)
    assert expect == 77_224_172
    hw = load_config("nv_full")
    dense = generate(preset("gpt2"), hw, prompt=8, new_tokens=3)
    treated = generate(preset("gpt2"), hw, prompt=8, new_tokens=3, weights=WeightTreatment("2:4", True))
    d, t = dense.to_dict(), treated.to_dict()
    assert (d["weights"]["stored_weight_bytes"], t["weights"]["dense_weight_bytes"]) == (123_532_032,) * 2
    saved = 123_532_032 - expect
    for a, b in zip(dense.steps, treated.steps, strict=True):
        assert abs((a.dram_bytes - b.dram_bytes) - saved) <= 64  # the weights, nothing else
        assert b.cycles < a.cycles
    assert main(["generate", "gpt2", "--hw", "nv_full", "--prompt", "8", "--new-tokens", "3", "--prune", "2:4",
                 "--weight-compression"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "weights (prune 2:4, compression)  77,224,172 bytes stored of 123,532,032 dense" in out
    assert (
        main(["generate", "gpt2", "--hw", "nv_small", "--prompt", "8", "--new-tokens", "2", "--weight-compression"])
        == 2
    )
    assert "nv_small has no weight compression" in capsys.readouterr().err


def test_steps_shared_out_to_processes_are_the_same_steps(small_llama, monkeypatch):
    """--jobs 3: the decode steps cut into three runs of consecutive lengths, two timed in forked
    processes; every step's figures are one process's, in order, and the runs are balanced by length."""
    from nvdla_mapper.studies import generate as gen

    if not gen._can_fork():
        pytest.skip("no fork here (platform, daemonic process or threads)")
    import multiprocessing

    forked, prefill = [], []
    fork = multiprocessing.get_context("fork")

    class Context:  # the fork context, recording the runs it starts processes for
        Pipe = staticmethod(fork.Pipe)

        def Process(self, **kw):
            _, fn, args, _, _ = kw["args"]
            (forked if fn is gen._timed else prefill).append(args[1] if fn is gen._timed else fn)
            return fork.Process(**kw)

    hw, spec = load_config("nv_full"), small_llama
    for cached in (search_plan, _simulate_cached, planned_like_instances):  # the processes start cold
        cached.cache_clear()
    monkeypatch.setattr(gen.multiprocessing, "get_context", lambda method: Context())
    three = generate(spec, hw, prompt=40, new_tokens=200, jobs=3)
    monkeypatch.undo()
    one = generate(spec, hw, prompt=40, new_tokens=200, jobs=1)
    assert [s.kv_len for s in three.steps] == list(range(40, 239))
    assert three.steps == one.steps and three.step_weight_bytes == one.step_weight_bytes
    # the prefill was mapped in a process of its own, beside the steps: the same map
    assert prefill == [gen.map_model] and three.to_dict() == one.to_dict()
    # the first step builds the template; 41..238 in three runs of about equal length + 41 each; each
    # forked run's first step is timed before the fork (its bucket's searches made once), the rest forked
    assert len(forked) == 2 and forked[-1][-1] == 238
    b, c = forked[0][0] - 1, forked[-1][0] - 1
    assert c - b == len(forked[0]) + 1
    weights = [sum(k + 41 for k in run) for run in (range(41, b), range(b, c), range(c, 239))]
    assert max(weights) - min(weights) <= 2 * (238 + 41)


def test_a_step_that_fails_in_a_forked_process_fails_the_run(small_llama):
    """An error in a process's steps is raised by the run (never steps silently missing)."""
    from nvdla_mapper.passes import new_memo
    from nvdla_mapper.studies import generate as gen
    from nvdla_mapper.studies.step_template import StepTemplate

    if not gen._can_fork():
        pytest.skip("no fork here (platform, daemonic process or threads)")
    hw, spec = load_config("nv_full"), small_llama
    real = StepTemplate(
        spec, lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv), new_memo(hw, precision=Precision.INT8)
    )

    class Failing:
        def figures(self, kv):
            if kv >= 90:
                raise NvdlaError(f"no step at {kv}")
            return real.figures(kv)

    with pytest.raises(NvdlaError, match="no step at") as failed:
        gen._steps(Failing(), list(range(20, 100)), 2)
    notes = "".join(failed.value.__notes__)
    assert "in the process computing the decode steps at" in notes and "raise NvdlaError" in notes  # its traceback
    assert len(gen._steps(Failing(), list(range(20, 90)), 2)) == 70


def test_a_forked_process_that_dies_fails_the_run(small_llama, monkeypatch):
    """A process that ends without sending its steps (killed, out of memory) fails the run with its exit
    code, never a run with steps missing."""
    import os

    from nvdla_mapper.passes import new_memo
    from nvdla_mapper.studies import generate as gen
    from nvdla_mapper.studies.step_template import StepTemplate

    if not gen._can_fork():
        pytest.skip("no fork here (platform, daemonic process or threads)")
    hw, spec = load_config("nv_full"), small_llama
    template = StepTemplate(
        spec, lambda s, kv: decode_step_graph(s, batch=1, kv_len=kv), new_memo(hw, precision=Precision.INT8)
    )
    monkeypatch.setattr(gen, "_timed", lambda template, kv_lens, done: os._exit(3))
    with pytest.raises(NvdlaError, match=r"ended without them \(exit code 3\)"):
        gen._steps(template, list(range(20, 100)), 2)
