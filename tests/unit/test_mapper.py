"""Mapper: zoo graphs, HF config.json, ONNX import, tiling search vs exhaustive, CBUF legality."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nvdla_mapper import exhaustive_plan, naive_plan, search_plan
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.onnx_import import graph_from_onnx
from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.workload import OpKind, ops_in_order
from nvdla_sim import ConvLayer, ConvShape, NvdlaError, Precision, load_config, run_conv, simulate
from nvdla_sim.engine.stats import Unit
from nvdla_sim.engine.tiling import footprint
from nvdla_sim.units import cbuf

CONFIGS = ("nv_small", "nv_large", "nv_full")


@pytest.mark.parametrize("model", list(PRESETS))
@pytest.mark.parametrize("cfg", CONFIGS)
def test_every_zoo_model_maps(model, cfg):
    hw = load_config(cfg)
    spec = PRESETS[model]
    res = map_model(build_graph(spec, seq=None if spec.image_tokens else 64), hw, precision=Precision.INT8)
    assert res.total_cycles > 0 and 0 < res.mac_utilization <= 1
    for r in res.results:
        if r.stats is not None and r.stats.plan is not None:
            assert r.stats.plan.data_banks + r.stats.plan.weight_banks <= hw.cbuf.bank_count
        assert r.end >= r.start
    d = res.to_dict()
    if not hw.sdp.lut:
        assert d["host_fallback"]["tasks"] > 0 and any("softmax on host" in n for n in d["host_fallback"]["ops"])


def test_bert_base_structure():
    g = build_graph(PRESETS["bert-base"], seq=128, head="none")
    ops = ops_in_order(g)
    mm = [o for o in ops if o.kind is OpKind.MATMUL]
    assert len(mm) == 12 * 6
    assert sum(o.macs for o in ops) == 12 * (4 * 128 * 768 * 768 + 2 * 128 * 768 * 3072 + 2 * 12 * 128 * 128 * 64)
    assert sum(1 for o in ops if o.kind is OpKind.SOFTMAX) == 12


def test_search_matches_exhaustive_on_small_spaces():
    hw = load_config("nv_small")
    for m, k, n in [(16, 64, 32), (40, 200, 24), (64, 512, 64), (128, 96, 200)]:
        layer = ConvLayer("mm", ConvShape.matmul(m, k, n), Precision.INT8)
        res = search_plan(layer, hw)
        _, best = exhaustive_plan(layer, hw)
        assert res.stats.cycles == best
        assert res.stats.cycles <= simulate(layer, hw, naive_plan(layer, hw)).cycles


def test_search_is_no_worse_than_a_naive_weight_stationary_plan():
    """Issue 27: with weight-stationary order in the space, the search beats the naive 8-layer
    weight-stationary plan of a 64x512x64 matmul on nv_small (38,782 cycles: 38,734 before CSC's first
    package, 6 cycles in each of its 8 hardware layers; 38,862 before a stripe's drain started with its
    last channel op: 16 cycles earlier in each; the search's data-stationary-only space gave 41,172)."""
    hw = load_config("nv_small")
    layer = ConvLayer("mm", ConvShape.matmul(64, 512, 64), Precision.INT8)
    naive = simulate(layer, hw, naive_plan(layer, hw)).cycles
    assert naive == 38_782
    assert search_plan(layer, hw).stats.cycles <= naive


def test_tiling_never_exceeds_cbuf_and_keeps_numbers():
    hw = load_config("nv_small")
    layer = ConvLayer("mm", ConvShape.matmul(96, 1000, 72, row=8), Precision.INT8)
    plan = search_plan(layer, hw).plan
    fp = footprint(layer, plan, hw)
    epb = hw.cbuf_entries_per_bank
    assert fp.data_tile_entries <= plan.data_banks * epb and fp.group_entries <= plan.weight_banks * epb
    assert cbuf.banks_for(fp.data_tile_entries, hw) <= plan.data_banks
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(12, 8, 1000)).astype(np.int8)
    w = rng.integers(-128, 128, size=(72, 1, 1, 1000)).astype(np.int8)
    out, _ = run_conv(layer, x, w, hw, plan)
    ref = (x.reshape(-1, 1000).astype(np.int64) @ w.reshape(72, 1000).T.astype(np.int64)).reshape(12, 8, 72)
    np.testing.assert_array_equal(out, ref)


def test_hf_config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(
        json.dumps(
            {
                "model_type": "bert",
                "hidden_size": 256,
                "num_hidden_layers": 4,
                "num_attention_heads": 4,
                "intermediate_size": 1024,
                "vocab_size": 1000,
            }
        )
    )
    spec = from_hf_config(p)
    assert spec.stages[0].hidden == 256 and spec.stages[0].layers == 4
    p.write_text(json.dumps({"model_type": "bert", "hidden_size": 256}))  # 12 heads (BertConfig) do not divide 256
    with pytest.raises(NvdlaError, match="hidden 256 is not divisible by heads 12"):
        from_hf_config(p)
    p.write_text(json.dumps({"model_type": "mamba"}))
    with pytest.raises(NvdlaError, match="model_type 'mamba' is not supported; supported: bert"):
        from_hf_config(p)


def _onnx_block(path, *, extra_op=None):
    s, h = 16, 32
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((h, h)).astype(np.float32), f"W{i}") for i in range(3)]
    inits.append(numpy_helper.from_array(np.zeros(h, np.float32), "b"))
    inits += [
        numpy_helper.from_array(np.ones(h, np.float32), "g"),
        numpy_helper.from_array(np.zeros(h, np.float32), "be"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W0"], ["q0"], name="q"),
        helper.make_node("Add", ["q0", "b"], ["q"], name="q_bias"),
        helper.make_node("MatMul", ["x", "W1"], ["k"], name="k"),
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["sc"], name="scores"),
        helper.make_node("Softmax", ["sc"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["ctx"], name="context"),
        helper.make_node("MatMul", ["ctx", "W2"], ["o"], name="out_proj"),
        helper.make_node("Add", ["o", "x"], ["r"], name="residual"),
        helper.make_node("LayerNormalization", ["r", "g", "be"], ["y0"], name="ln", axis=-1),
    ]
    last = "y0"
    if extra_op:
        nodes.append(helper.make_node(extra_op, [last], ["y1"], name="odd"))
        last = "y1"
    nodes.append(helper.make_node("Gelu", [last], ["y"], name="gelu", domain=""))
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", s, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", s, h])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.save(model, str(path))
    return path


def test_onnx_import(tmp_path):
    g = graph_from_onnx(_onnx_block(tmp_path / "b.onnx"), batch=2)
    kinds = {g.nodes[n]["op"].name: g.nodes[n]["op"].kind for n in g.nodes}
    assert kinds["q"] is OpKind.MATMUL and "q_bias" not in kinds  # bias folded into the matmul
    assert kinds["scores"] is OpKind.ATTN_SCORES and kinds["softmax"] is OpKind.SOFTMAX
    assert kinds["ln"] is OpKind.LAYERNORM and kinds["gelu"] is OpKind.GELU
    q = g.nodes["q"]["op"]
    assert (q.m, q.k, q.n) == (32, 32, 32)
    res = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=2, seq=16)
    assert res.total_cycles > 0


def test_onnx_unsupported_op(tmp_path):
    path = _onnx_block(tmp_path / "odd.onnx", extra_op="Sin")
    with pytest.raises(NvdlaError, match="node 'odd' has unsupported op type 'Sin'"):
        graph_from_onnx(path)
    g = graph_from_onnx(path, host_fallback=True)
    res = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=1, seq=16)
    notes = res.to_dict()["host_fallback"]["ops"]
    assert any("unsupported op Sin on host" in n for n in notes)


def test_independent_instances_without_weights_hide_their_read_prologue():
    """Layers without weights (SDP, PDP, CDP instances) hide their read prologue behind the previous
    instance's work (convolutions run as a chain: tests/unit/test_conv_instances.py). Hand arithmetic:
    prologue 300 of 1,000 cycles: 300 hidden -> 1000 + 3 x 700; prologue 800: 200 hidden -> 1000 + 3 x 800."""
    from nvdla_mapper.passes import instances_duration
    from nvdla_sim.engine.stats import Bound, LayerStats, StreamDetail, Traffic, UnitStats

    hw = load_config("nv_full")

    def stats(prologue: int) -> LayerStats:
        detail = StreamDetail(elements=8000, elements_per_cycle=8, chunks=32, prologue_cycles=prologue)
        return LayerStats("x", 0, 0, 0, Traffic(), {Unit.SDP: UnitStats(1000)}, Bound.SDP, 0, detail=detail)

    assert instances_duration(1_000, 1, stats(300), hw) == 1_000
    assert instances_duration(1_000, 4, stats(300), hw) == 3_100
    assert instances_duration(1_000, 4, stats(800), hw) == 3_400


def test_ops_past_the_register_fields_split_into_hardware_layers():
    """Rows past 8192 x 64, outputs past 8192 kernels, reductions past 8192 channels (partials added by
    SDP): every piece a legal hardware layer, the MACs those of the op."""
    from nvdla_mapper.lowering.rules import LoweringContext, matmul_layers
    from nvdla_sim.layers import OperandMode, SdpLayer, SdpSpec

    hw = load_config("nv_small")
    ctx = LoweringContext.of(hw=hw, precision=Precision.INT8)
    for m, k, n in [(1_000_000, 768, 768), (1000, 10_000, 100), (9000, 64, 20_000), (8209, 16, 8)]:
        layers = matmul_layers("mm", m, k, n, ctx, SdpSpec(bias=OperandMode.PER_KERNEL, relu=True))
        convs = [lay for lay in layers if isinstance(lay, ConvLayer)]
        assert sum(lay.macs for lay in convs) == m * k * n
        adds = [lay for lay in layers if isinstance(lay, SdpLayer)]
        assert len(adds) == (1 if k > 8192 else 0)  # two channel pieces: one partial-sum add
        if k > 8192:  # the activation waits for the last partial sum
            assert not any(c.sdp.relu for c in convs) and adds[-1].sdp.relu
        else:
            assert all(c.sdp.relu for c in convs) and not adds


@pytest.mark.slow  # about 30 s: 144 x 16 attention tiles per layer
def test_long_sequences_map():
    """32,768 tokens, beyond BERT's 512 and Longformer's 4,096 positions and past the 13-bit register fields
    (8,192): the MACs by hand, and a run no shorter than those MACs at nv_full's 64 x 32 a cycle. BERT: per
    block Q, K, V, O (S x 768 x 768), QK^T and PV (12 heads of S x 64 x S), the FFN (S x 768 x 3072 and
    back), then the pooler and classifier on one token; QK^T's 32,768 keys are four hardware layers of
    8,192 outputs. Longformer: QK^T and PV over the band of +-256 keys (S x 513 pairs, less the
    2 x (1 + ... + 256) = 256 x 257 the ends lack), run as 128 chunks of 256 queries against 768 keys."""
    hw = load_config("nv_full")
    assert hw.peak_macs_per_cycle(Precision.INT8) == 64 * 32
    s = 32768
    dense = 4 * s * 768 * 768 + 2 * s * 768 * 3072  # the projections and the FFN of one block
    head = 768 * 768 + 768 * 2
    res = {}
    for name in ("bert-base", "longformer-base"):
        g = build_graph(PRESETS[name], seq=s, extend_positions=True)
        res[name] = r = map_model(g, hw, precision=Precision.INT8, batch=1, seq=s)
        assert r.total_cycles >= r.macs / (64 * 32)
    bert, longformer = res["bert-base"], res["longformer-base"]
    assert bert.model_macs == bert.macs == 12 * (dense + 2 * 12 * s * 64 * s) + head == 22_574_348_699_136
    qk = [
        (r.task.name, r.task.count, r.stats.macs)
        for r in bert.results
        if r.task.op == "layer0.attn.qk" and r.stats and r.stats.macs
    ]
    assert qk == [(f"layer0.attn.qk[{n0}:{n0 + 8192}]", 12, s * 64 * 8192) for n0 in range(0, s, 8192)]
    assert longformer.model_macs == 12 * (dense + 2 * 12 * (s * 513 - 256 * 257) * 64) + head
    assert longformer.macs == 12 * (dense + 2 * 12 * 128 * 256 * 64 * 768) + head
    qk = [
        (r.task.count, r.stats.macs)
        for r in longformer.results
        if r.task.op == "layer0.attn.qk" and r.stats and r.stats.macs
    ]
    assert qk == [(12 * 128, 256 * 64 * 768)]


def test_ops_in_order_is_the_lexicographic_topological_order():
    """The insertion-order shortcut returns what networkx's lexicographic topological sort returns, on the
    front ends' graphs and on a graph whose edges run against insertion order (the sort itself then)."""
    import networkx as nx

    from nvdla_mapper.frontends.presets import decode_step_graph, mixed_step_graph

    def reference(g):
        return [
            g.nodes[n]["op"] for n in nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n].get("idx", 0))
        ]

    gpt2 = PRESETS["gpt2"]
    for g in (
        build_graph(PRESETS["bert-base"], seq=128),
        decode_step_graph(gpt2, batch=3, kv_len=(5, 9, 9)),
        mixed_step_graph(gpt2, ((4, 1), (0, 16)), emitting=2),
    ):
        assert ops_in_order(g) == reference(g)
    g = build_graph(PRESETS["bert-base"], seq=16)
    first, last = min(g.nodes, key=lambda n: g.nodes[n]["idx"]), max(g.nodes, key=lambda n: g.nodes[n]["idx"])
    g.nodes[first]["idx"], g.nodes[last]["idx"] = g.nodes[last]["idx"], g.nodes[first]["idx"]  # edges now run backwards
    assert ops_in_order(g) == reference(g)
