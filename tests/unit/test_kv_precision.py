"""The KV-cache precision what-if (issue 30, item 4): attention and its caches at one precision, the rest of
the model at another. Expected bytes and capacities are worked by hand from the model's shapes; the
conversions SDP can make come from NVIDIA's C model (cmod/hls/sdp/sdp_c.cpp: FP16 processing writes FP16
or INT16; integer processing writes INT8, INT16 or FP16)."""

from __future__ import annotations

import json

import pytest

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import build_graph, decode_step_graph, preset
from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import map_model, new_memo
from nvdla_mapper.studies.generate import fits, generate, kv_bytes_per_token, weight_bytes
from nvdla_mapper.studies.serve import kv_capacity_blocks
from nvdla_mapper.studies.step_template import StepTemplate
from nvdla_sim import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import SdpLayer
from nvdla_sim.precision import Precision

I8, I16, F16 = Precision.INT8, Precision.INT16, Precision.FP16
GPT2_MATRIX_ELEMS = 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 768 * 50257  # blocks + the tied LM head


def _step(hw, precision, kv, kv_len=255, softmax="auto"):
    return map_model(decode_step_graph(preset("gpt2"), batch=1, kv_len=kv_len), hw, precision=precision,
                     kv_precision=kv, softmax=softmax, with_baseline=False)  # fmt: skip


def _tasks(res, prefix="layer0.attn."):
    return {r.task.name.removeprefix(prefix): r for r in res.results if r.task.name.startswith(prefix)}


def test_bytes_and_capacity_by_hand():
    gpt2 = preset("gpt2")
    # K and V, 12 layers, 12 heads of 64
    assert kv_bytes_per_token(gpt2, I8) == 2 * 12 * 12 * 64 == 18_432
    assert kv_bytes_per_token(gpt2, F16) == 36_864
    assert weight_bytes(gpt2, F16) == 2 * GPT2_MATRIX_ELEMS == 247_064_064
    hw = load_config("nv_full").with_values(**{"memory.dram_size_gib": 1})
    room = 2**30 - 247_064_064
    f = fits(gpt2, hw, F16, kv_precision=I8, batch=2, positions=1024)
    assert (f.kv_room_bytes, f.max_positions_at_batch, f.max_batch_at_positions) == (
        room, room // (2 * 18_432), room // (1024 * 18_432)
    )  # fmt: skip
    assert (
        fits(gpt2, hw, F16, kv_precision=None, batch=1, positions=1).max_positions_at_batch == room // 36_864 == 22_425
    )
    assert kv_capacity_blocks(gpt2, hw, F16, 16, kv_precision=I8) == room // (16 * 18_432) == 2_803
    assert kv_capacity_blocks(gpt2, hw, F16, 16) == room // (16 * 36_864)


def test_fp16_model_with_int8_caches_on_nv_full():
    """QK^T and PV read the caches at one byte an element; q, k and v reach INT8 in two SDP passes (FP16
    processing writes INT16, an integer pass writes INT8); with --softmax nvdla the softmax runs on SDP
    (INT8 scores, which FP16 scores cannot: docs/mapping.md) and PV's last pass writes FP16 for the output
    projection."""
    hw = load_config("nv_full")
    base, kv8 = _tasks(_step(hw, F16, None)), _tasks(_step(hw, F16, I8, softmax="nvdla"))
    keys, inner, heads = 256, 768, 12
    # QK^T as one block-diagonal layer: the cache (256 keys x 768 channels) and the 12 heads' q pixels
    assert kv8["qk"].task.layer.precision is I8
    assert kv8["qk"].stats.traffic.dram_read == keys * inner + heads * inner == 205_824
    assert base["qk"].stats.traffic.dram_read == 2 * 205_824
    for x in ("q", "k", "v"):
        assert kv8[x].task.layer.out_precision is I16 and kv8[x].stats.traffic.dram_write == 2 * inner
        conv = kv8[f"{x}.to_int8"].task.layer
        assert isinstance(conv, SdpLayer) and (conv.precision, conv.out_precision) == (I16, I8)
        assert kv8[f"{x}.to_int8"].stats.traffic.dram_write == inner  # one token, one byte an element
    assert kv8["k_append"].task.layer.bytes == inner and base["k_append"].task.layer.bytes == 2 * inner
    assert base["softmax"].task.resource is Resource.HOST
    assert {kv8[t].task.layer.precision for t in ("softmax.exp", "softmax.rowsum", "softmax.recip")} == {I8}
    assert kv8["pv.normalize"].task.layer.out_precision is F16
    assert kv8["o"].task.layer == base["o"].task.layer and kv8["o"].cycles == base["o"].cycles


def test_int16_model_converts_in_one_pass():
    """Integer processing writes INT8 directly: no second pass."""
    hw = load_config("nv_full")
    t = _tasks(_step(hw, I16, I8))
    assert t["q"].task.layer.out_precision is I8 and "q.to_int8" not in t
    assert t["qk"].task.layer.precision is I8


def test_template_steps_equal_full_maps_under_the_what_if(tmp_path):
    """Rotary q and k convert in their last SDP pass; every step through the template equals a full map."""
    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
           "num_hidden_layers": 2, "num_key_value_heads": 2, "max_position_embeddings": 4096, "vocab_size": 1000}  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    spec, hw = from_hf_config(p), load_config("nv_full")
    build = lambda s, kv: decode_step_graph(s, batch=2, kv_len=kv)  # noqa: E731
    template = StepTemplate(spec, build, new_memo(hw, precision=F16, kv_precision=I8))
    for kv in (30, 31, 32, 100):
        step = template.map(kv)
        full = map_model(build(spec, kv), hw, precision=F16, kv_precision=I8, with_baseline=False)
        assert (step.total_cycles, step.figures().dram_bytes, step.energy()) == (
            full.total_cycles, full.figures().dram_bytes, full.energy()
        )  # fmt: skip
    rope = _tasks(full, "layer0.attn.")
    assert rope["k_rope.cos_add"].task.layer.out_precision is I16  # FP16 processing, then the integer pass
    assert rope["k_rope.to_int8"].task.layer.out_precision is I8


def test_generate_reports_the_caches_and_refuses_what_the_build_lacks():
    hw = load_config("nv_full")
    r = generate(preset("gpt2"), hw, prompt=8, new_tokens=3, precision=F16, kv_precision=I8)
    d = r.to_dict()
    assert (d["kv_precision"], d["kv_bytes_per_token"], d["kv_cache_bytes_end"]) == ("int8", 18_432, 18_432 * 11)
    base = generate(preset("gpt2"), hw, prompt=8, new_tokens=3, precision=F16).to_dict()
    assert d["dram_bytes_per_token"] < base["dram_bytes_per_token"]
    with pytest.raises(NvdlaError, match="nv_small does not support fp16"):
        generate(preset("gpt2"), load_config("nv_small"), prompt=8, new_tokens=2, kv_precision=F16)


def test_cli_kv_precision_and_quantize(tmp_path, capsys):
    from nvdla_cli.main import main

    out = tmp_path / "gen"
    argv = ["generate", "gpt2", "--hw", "nv_full", "--precision", "fp16", "--kv-precision", "int8", "--prompt", "8",
            "--new-tokens", "2", "--dram-gib", "1", "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "KV cache int8 (model fp16)  18,432 bytes per position (36,864 at fp16)" in text
    room = 2**30 - 247_064_064
    assert f"{room // 18_432:,} positions per sequence at batch 1 ({room // 36_864:,})" in text
    doc = json.loads((out / "generate.json").read_text())[0]
    assert doc["fits"]["max_positions_at_batch"] == room // 18_432
    assert doc["kv_model_precision"]["kv_precision"] == "fp16"
    assert "KV cache precision" in (out / "report.html").read_text()
    assert main(["generate", "gpt2", "--kv-precision", "int4"]) == 2
    assert "--kv-precision: unknown precision 'int4'" in capsys.readouterr().err
    # --quantize: the block's INT8 error through the bit-exact datapath beside the generation
    out = tmp_path / "q"
    assert main(["generate", "gpt2", "--hw", "nv_full", "--prompt", "16", "--new-tokens", "2", "--quantize",
                 "per-tensor", "--report", str(out)]) == 0  # fmt: skip
    assert "INT8 accuracy     per-tensor, calib max" in capsys.readouterr().out
    acc = json.loads((out / "generate.json").read_text())[0]["accuracy"]
    assert [e["name"] for e in acc["layers"]][:3] == ["q", "k", "v"] and all(e["cosine"] > 0.99 for e in acc["layers"])
    assert 'id="accuracy"' in (out / "report.html").read_text()
    assert main(["generate", "gpt2", "--precision", "fp16", "--quantize", "per-tensor"]) == 2
    assert "--quantize produces INT8 layers" in capsys.readouterr().err


def test_serve_cli_kv_precision(tmp_path, capsys):
    from nvdla_cli.main import main

    out = tmp_path / "s"
    assert main(["serve", "gpt2", "--hw", "nv_full", "--precision", "fp16", "--kv-precision", "int8", "--requests",
                 "2", "--prompt", "16", "--output", "2", "--dram-gib", "1", "--report", str(out)]) == 0  # fmt: skip
    room = 2**30 - 247_064_064
    assert f"KV cache at int8: {room // (16 * 18_432):,} blocks ({room // (16 * 36_864):,} at the model's fp16)" in (
        capsys.readouterr().out
    )
    doc = json.loads((out / "serve.json").read_text())
    assert (doc["kv_precision"], doc["kv_capacity_blocks"]) == ("int8", room // (16 * 18_432))


def test_int8_model_with_fp16_caches_every_hand_off_by_hand(tmp_path):
    """A grouped-query rotary model (8 heads of 32, 2 K/V groups) at batch 2 on nv_full, INT8 with FP16
    caches: each producer writes what its consumer reads, worked by hand. Rotary runs on the host here
    (16 elements are not a whole 32-byte INT8 atom) and converts as it writes; PV computes at FP16 and
    reaches INT8 in two passes (FP16 processing writes INT16, an integer pass INT8)."""
    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
           "num_hidden_layers": 2, "num_key_value_heads": 2, "max_position_embeddings": 4096, "vocab_size": 1000}  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    res = map_model(decode_step_graph(from_hf_config(p), batch=2, kv_len=40), load_config("nv_full"),
                    precision=I8, kv_precision=F16, with_baseline=False)  # fmt: skip
    t = _tasks(res)
    q, kv = 2 * 8 * 32, 2 * 2 * 32  # elements of the new tokens' q and of their k (or v)
    assert t["q"].stats.traffic.dram_write == q and t["k"].stats.traffic.dram_write == kv  # INT8, into rotary
    assert t["q_rope"].task.host_work.nbytes == q * (1 + 2) and t["k_rope"].task.host_work.nbytes == kv * (1 + 2)
    assert t["v"].task.layer.out_precision is F16 and t["v"].stats.traffic.dram_write == 2 * kv  # one pass
    assert t["k_append"].task.layer.bytes == 2 * kv and t["v_append"].task.host_work.nbytes == 2 * (2 * kv)
    assert t["qk.q_blockdiag"].task.layer.bytes == 2 * q  # each head's q, FP16, onto its pixel
    assert t["qk"].task.layer.precision is F16 and t["softmax"].task.resource is Resource.HOST
    assert (t["pv"].task.layer.precision, t["pv"].task.layer.out_precision) == (F16, I16)
    assert t["pv.diag_gather"].task.layer.bytes == 2 * q  # the heads' outputs, INT16
    assert t["pv.to_int8"].stats.traffic.dram_read == 2 * q and t["pv.to_int8"].stats.traffic.dram_write == q
    assert t["o"].task.layer.precision is I8


def test_cli_when_the_model_precision_caches_do_not_fit(capsys):
    """At batch 60 in 0.25 GiB the INT8 caches fit beside GPT-2's FP16 weights and FP16 caches do not:
    the run is made, the comparison says why it has none."""
    from nvdla_cli.main import main

    assert main(["generate", "gpt2", "--hw", "nv_full", "--precision", "fp16", "--kv-precision", "int8",
                 "--dram-gib", "0.25", "--prompt", "8", "--new-tokens", "2", "--batch", "60"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    shortfall = 247_064_064 + 60 * 10 * 36_864 - 2**28  # weights + 60 x 10 positions of FP16 K/V - 0.25 GiB
    assert "at fp16 the caches do not fit: " in out and f"({shortfall:,} bytes) too much" in out
    assert main(["serve", "gpt2", "--dram-gib", "nan", "--requests", "1"]) == 2
    assert "--dram-gib must be a finite number above 0, not nan" in capsys.readouterr().err


def test_an_op_that_cannot_convert_is_refused_in_one_line():
    """XLNet adds its relative scores to QK^T's with an elementwise add outside attention's ops: QK^T would
    have to convert its scores for it, which its lowering does not: the what-if refuses, naming the first
    such op in the graph's order."""
    g = build_graph(preset("xlnet-base"), batch=1, seq=16, head="none")
    with pytest.raises(NvdlaError, match=r"layer0\.attn\.qk \(attn_scores\) feeds or follows attention, and only"):
        map_model(g, load_config("nv_full"), precision=F16, kv_precision=I8)
