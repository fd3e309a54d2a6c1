"""A decoder split over NVDLA instances by heads and FFN columns (`nvdla generate --tp N`; presets.tensor_shard,
studies/parallel.py): the shard by hand from the model's config, the reductions' bytes by hand, and a run's
steps as the shard's steps with its reductions after each row-parallel layer."""

from __future__ import annotations

import json

import pytest

from nvdla_cli.main import main
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import PRESETS, build_graph, decode_step_graph, tensor_shard
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.generate import generate
from nvdla_mapper.studies.parallel import reduction
from nvdla_sim import NvdlaError, Precision, load_config
from nvdla_sim.layers import Memory

FULL = load_config("nv_full")
LLAMA_GQA = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4,
             "intermediate_size": 5632, "num_hidden_layers": 2, "vocab_size": 32000,
             "max_position_embeddings": 2048}  # fmt: skip


def _llama(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_GQA))
    return from_hf_config(path)


def test_a_shard_holds_its_share_of_heads_columns_and_vocabulary(tmp_path):
    """GPT-2 over 4: 12 heads -> 3 of head width 64 (768 / 12, kept), 3,072 FFN columns -> 768, the 50,257-word
    LM head -> 12,565 columns (rounded up); the hidden width stays 768. A LLaMA with 4 KV heads over 4: 1 each."""
    shard = tensor_shard(PRESETS["gpt2"], 4)
    (st,) = shard.stages
    assert (st.hidden, st.heads, st.ffn, shard.head_dim, shard.vocab) == (768, 3, 768, 64, 12565)
    llama = tensor_shard(_llama(tmp_path), 4)
    assert (llama.stages[0].heads, llama.kv_heads, llama.stages[0].ffn, llama.head_dim) == (8, 1, 1408, 64)
    assert tensor_shard(PRESETS["gpt2"], 1) is PRESETS["gpt2"]
    with pytest.raises(NvdlaError, match="num_key_value_heads 4 does not split into 8 shards"):
        tensor_shard(_llama(tmp_path), 8)
    with pytest.raises(NvdlaError, match=r"bert-base \(bert\) is not a decoder"):
        tensor_shard(PRESETS["bert-base"], 2)


def test_a_reductions_traffic_by_hand():
    """[1, 768] over 4 instances: 3 SDP passes, each reading the running sum and a partial (INT16: 1,536 bytes
    each) and writing the sum, the last at INT8 (768 bytes): 6 x 1,536 + 2 x 1,536 + 768 = 13,056 bytes."""
    red = reduction(FULL, 1, 768, 4, Precision.INT8)
    assert (red.passes, red.dram_bytes) == (3, 6 * 1536 + 2 * 1536 + 768)
    assert reduction(FULL, 1, 768, 1, Precision.INT8).cycles == 0
    with pytest.raises(NvdlaError, match="nv_small has no INT16 or FP16"):
        reduction(load_config("nv_small"), 1, 768, 2, Precision.INT8)


def test_a_tensor_parallel_run_is_its_shards_with_the_reductions():
    """Each decode step: the shard's step and, after each of its 24 row-parallel layers (two a block), the
    step's reduction; the first token: the shard's prefill and its 24 reductions over the prompt's tokens."""
    kw = dict(prompt=16, new_tokens=3)
    tp = generate(PRESETS["gpt2"], FULL, tensor_parallel=4, **kw)
    shard = generate(tensor_shard(PRESETS["gpt2"], 4), FULL, **kw)
    step, prompt = reduction(FULL, 1, 768, 4, Precision.INT8), reduction(FULL, 16, 768, 4, Precision.INT8)
    assert [s.cycles for s in tp.steps] == [s.cycles + 24 * step.cycles for s in shard.steps]
    assert tp.ttft_cycles == shard.ttft_cycles + 24 * prompt.cycles
    assert tp.steps[0].dram_bytes == shard.steps[0].dram_bytes + 24 * step.dram_bytes
    assert (tp.model, tp.tensor_parallel) == ("gpt2", 4)
    # the exact path: the shard's decode step mapped whole at the step's cache length, plus its reductions
    last = tp.steps[-1]
    whole = map_model(decode_step_graph(tensor_shard(PRESETS["gpt2"], 4), batch=1, kv_len=last.kv_len), FULL,
                      precision=Precision.INT8, batch=1, seq=last.kv_len)  # fmt: skip
    assert last.cycles == whole.total_cycles + 24 * step.cycles
    assert (
        generate(PRESETS["gpt2"], FULL, tensor_parallel=1, **kw).total_cycles
        == generate(PRESETS["gpt2"], FULL, **kw).total_cycles
    )


def test_generate_tp_through_the_cli(tmp_path, capsys):
    assert main(["generate", "gpt2", "--hw", "nv_full", "--prompt", "8", "--new-tokens", "2", "--tp", "2",
                 "--jobs", "1", "--report", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert (
        "tensor parallel      2 instances of nv_full in step, each a 1/2 shard (heads 6 of 12, FFN 1,536 of 3,072"
        in out
    )
    (d,) = json.loads((tmp_path / "generate.json").read_text())
    assert d["tensor_parallel"] == 2
    assert main(["generate", "gpt2", "--hw", "nv_full", "--tp", "5"]) == 2
    assert "gpt2's num_attention_heads 12 does not split into 5 shards" in capsys.readouterr().err


def test_a_steps_demand_from_the_template_is_the_whole_maps():
    """The step template's DRAM demand profile (every task where the schedule put it) is the one of the
    step's graph mapped whole at the same cache length."""
    from nvdla_mapper.options import MapOptions
    from nvdla_mapper.passes import new_memo
    from nvdla_mapper.results import demand_profile
    from nvdla_mapper.studies.step_template import StepTemplate

    spec = tensor_shard(PRESETS["gpt2"], 2)
    template = StepTemplate(spec, lambda s, k: decode_step_graph(s, batch=1, kv_len=k), new_memo(FULL, MapOptions()))
    template.map(40)
    figures, profile = template.figures_and_profile(57)
    assert template.rebuilds == 0  # re-timed from the template, not mapped whole again
    whole = map_model(decode_step_graph(spec, batch=1, kv_len=57), FULL, precision=Precision.INT8, batch=1, seq=57)
    assert figures.total_cycles == whole.total_cycles
    assert profile == demand_profile(whole)


def test_tensor_parallel_on_one_shared_dram():
    """Four shards in step on nv_full_lpddr4's one DRAM: each step is what shared_memory.alike gives four alike
    masters for the shard's step mapped whole (its demand profile), plus its reductions likewise; never less
    than the step alone nor than four steps' DRAM bytes at the memory's peak (plain arithmetic)."""
    from nvdla_mapper.results import demand_profile
    from nvdla_mapper.studies.parallel import alike_cycles
    from nvdla_sim.system.memory import memory_model

    hw = load_config("nv_full_lpddr4")
    kw = dict(prompt=16, new_tokens=3, jobs=1)
    own = generate(PRESETS["gpt2"], hw, tensor_parallel=4, **kw)
    shared = generate(PRESETS["gpt2"], hw, tensor_parallel=4, tp_dram="shared", **kw)
    last = shared.steps[-1]
    spec = tensor_shard(PRESETS["gpt2"], 4)
    whole = map_model(decode_step_graph(spec, batch=1, kv_len=last.kv_len), hw, precision=Precision.INT8, batch=1,
                      seq=last.kv_len)  # fmt: skip
    step = reduction(hw, 1, 768, 4, Precision.INT8)
    expect = alike_cycles(demand_profile(whole), hw, 4) + 24 * alike_cycles(step.profile, hw, 4)
    assert last.cycles == expect
    peak = memory_model(hw).bytes_per_cycle(Memory.DRAM)
    for o, s in zip(own.steps, shared.steps, strict=True):
        assert s.cycles >= max(o.cycles, 4 * o.dram_bytes / peak)
        assert s.dram_bytes == o.dram_bytes
    # the first token: the shard's prefill, then its 24 reductions over the prompt, each as four take it
    prefill = map_model(build_graph(spec, batch=1, seq=16, head="lm_last"), hw, precision=Precision.INT8, seq=16,
                        with_baseline=False)  # fmt: skip
    prompt = reduction(hw, 16, 768, 4, Precision.INT8)
    assert shared.ttft_cycles == max(prefill.total_cycles, alike_cycles(demand_profile(prefill), hw, 4)) + 24 * max(
        prompt.cycles, alike_cycles(prompt.profile, hw, 4)
    )
    assert shared.ttft_cycles > own.ttft_cycles
    # energy: the wait costs each instance its always-on power and leakage; the one DRAM's standby and refresh
    # (its background power, IDD-priced: tests/unit/test_dram_memory.py) over the time together is shared by four
    uj_per_cycle = memory_model(hw).background_mw() * 1e-3 / (hw.clock_mhz * 1e6) * 1e6
    o, s = own.steps[-1], shared.steps[-1]
    assert s.dram_energy_uj == pytest.approx(o.dram_energy_uj + uj_per_cycle * (s.cycles / 4 - o.cycles), rel=1e-9)
    assert s.core_energy_uj > o.core_energy_uj
    # bound by the DRAM it waits for; its roofline no lower than four instances' bytes of the pass at its peak
    assert s.bound.value == "dram" and s.roofline_cycles >= 4 * (o.dram_bytes - 24 * step.dram_bytes) / peak
    assert (shared.to_dict()["tp_dram"], own.to_dict()["tp_dram"]) == ("shared", "own")
    with pytest.raises(NvdlaError, match="--tp-dram shared: one instance"):
        generate(PRESETS["gpt2"], hw, tp_dram="shared", **kw)
    with pytest.raises(NvdlaError, match="--tp-dram 'both': valid are own, shared"):
        generate(PRESETS["gpt2"], hw, tensor_parallel=2, tp_dram="both", **kw)


def test_generate_tp_on_a_shared_dram_through_the_cli(tmp_path, capsys):
    assert main(["generate", "gpt2", "--hw", "nv_full", "--prompt", "8", "--new-tokens", "2", "--tp", "2",
                 "--tp-dram", "shared", "--jobs", "1", "--report", str(tmp_path)]) == 0  # fmt: skip
    assert (
        "(heads 6 of 12, FFN 1,536 of 3,072, vocabulary 25,129 of 50,257), all on nv_full's one DRAM, sharing its"
        in (capsys.readouterr().out)
    )
    (d,) = json.loads((tmp_path / "generate.json").read_text())
    assert (d["tensor_parallel"], d["tp_dram"]) == (2, "shared")
    assert main(["generate", "gpt2", "--tp-dram", "shared"]) == 2
    assert "--tp-dram says where tensor-parallel instances keep their data: give --tp N (N > 1)" in (
        capsys.readouterr().err
    )


def test_a_sweep_over_tensor_parallel_instances(tmp_path):
    """[space] tensor_parallel on decode points: a point's step is `nvdla generate --tp N`'s first decode step at
    the same cached tokens (the shard's step mapped whole, its reductions after each row-parallel layer), on
    ports of their own or one shared DRAM; its energy and area every instance's, its MACs N shards' (the
    model's own: the shards split its MACs)."""
    from nvdla_mapper.studies.sweep import run_sweep, sweep_from_dict

    hw = load_config("nv_full_lpddr4")
    rows = {}
    for dram in ("own", "shared"):
        spec = sweep_from_dict({"name": dram, "base": "nv_full_lpddr4", "space": {"tensor_parallel": [1, 4]},
                                "workloads": {"models": ["gpt2"], "seq": [16], "phase": ["decode"]},
                                "options": {"tp_dram": dram}}, source="t.toml")  # fmt: skip
        got = run_sweep(spec, tmp_path / f"{dram}.sqlite", executor="serial").rows
        rows[dram] = {r["tensor_parallel"]: r for r in got}
        gen = generate(PRESETS["gpt2"], hw, prompt=16, new_tokens=2, tensor_parallel=4, tp_dram=dram, jobs=1)
        assert rows[dram][4]["total_cycles"] == gen.steps[0].cycles
        assert rows[dram][4]["dram_bytes"] == 4 * gen.steps[0].dram_bytes
        assert rows[dram][4]["core_energy_uj"] == pytest.approx(4 * gen.steps[0].core_energy_uj, rel=1e-9)
    one, four = rows["own"][1], rows["own"][4]
    assert (four["area_mm2"], four["instances"]) == (pytest.approx(4 * one["area_mm2"]), 4)
    assert four["model_macs"] >= one["model_macs"]  # the LM head's columns rounded up to the shards
    assert rows["shared"][4]["total_cycles"] >= four["total_cycles"] and four["slowdown"] == 1.0
    assert rows["shared"][4]["slowdown"] == pytest.approx(rows["shared"][4]["total_cycles"] / four["total_cycles"])
    with pytest.raises(NvdlaError, match=r"t.toml: space.tensor_parallel splits a decode step over instances"):
        sweep_from_dict({"space": {"tensor_parallel": [2]}, "workloads": {"models": ["gpt2"]}}, source="t.toml")
    with pytest.raises(NvdlaError, match=r"options.tp_dram must be own or shared, not 'both'"):
        sweep_from_dict({"space": {"tensor_parallel": [2]}, "workloads": {"models": ["gpt2"], "phase": ["decode"]},
                         "options": {"tp_dram": "both"}}, source="t.toml")  # fmt: skip
