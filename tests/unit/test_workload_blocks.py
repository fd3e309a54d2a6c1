"""Model blocks as the front ends give them (workload.Block): the presets, the CNN builder and ONNX
module paths, and what reads them (MapResult.by_block)."""

from __future__ import annotations

import pytest

from nvdla_mapper.frontends.cnn import resnet50
from nvdla_mapper.frontends.onnx_import import scope_block
from nvdla_mapper.frontends.presets import build_graph, decode_step_graph, preset
from nvdla_mapper.workload import Block, Graph, Op, OpKind, ops_in_order


def _blocks(g) -> list[str]:
    seen: list[str] = []
    for op in ops_in_order(g):
        if not seen or seen[-1] != op.block.name:
            seen.append(op.block.name)
    return seen


def test_a_graph_block_gives_its_ops_their_block_and_checks_their_names():
    g = Graph("t", batch=1, seq=1)
    with g.block("layer", 3) as p:
        assert p == "layer3"
        g.add(Op(f"{p}.ffn2", OpKind.RELU, 1, 1))
        g.add(Op(p, OpKind.RELU, 1, 1))
        with pytest.raises(ValueError, match="'layer4.x' added in block 'layer3' is not named under it"):
            g.add(Op("layer4.x", OpKind.RELU, 1, 1))
        with pytest.raises(ValueError, match="'layer30' added in block 'layer3'"):
            g.add(Op("layer30", OpKind.RELU, 1, 1))  # a longer number is another block, not this one's op
        with pytest.raises(ValueError, match="opened inside block 'layer3'"), g.block("inner"):
            pass
    g.add(Op("embed", OpKind.GATHER, 1, 1))
    ops = {op.name: op for op in ops_in_order(g.g)}
    assert ops["layer3.ffn2"].block == Block("layer", 3) and ops["layer3.ffn2"].role == ".ffn2"
    assert ops["layer3"].role == ""
    assert ops["embed"].block == Block("embed") and ops["embed"].block.index is None


def test_the_presets_blocks():
    bert = build_graph(preset("bert-base"), batch=1, seq=8)
    assert _blocks(bert) == ["embed", *[f"layer{i}" for i in range(12)], "layer_final_norm", "pooler", "classifier"]
    assert {op.block for op in ops_in_order(bert) if op.name.startswith("layer7.")} == {Block("layer", 7)}
    t5 = decode_step_graph(preset("t5-base"), batch=1, kv_len=4, cross_len=8)
    assert [b for b in _blocks(t5) if b.startswith("dec")] == [f"dec{i}" for i in range(12)] + ["dec_final_norm"]
    swin = build_graph(preset("swin-t"), batch=1)
    # Swin's odd blocks (numbered across its stages) shift their windows; merges between stages
    shifted = sorted({op.block.index for op in ops_in_order(swin) if op.role == ".shift"})
    assert shifted == list(range(1, 12, 2))
    assert [b for b in _blocks(swin) if b.startswith("merge")] == ["merge1", "merge2", "merge3"]


def test_a_resnet_stage_is_a_family_of_blocks():
    ops = ops_in_order(resnet50())
    blocks = {op.block for op in ops}
    assert {b for b in blocks if b.family == "conv3_"} == {Block("conv3_", i) for i in (1, 2, 3, 4)}
    act = next(op for op in ops if op.name == "conv1.act")  # a layer's activation is in its layer's block
    assert act.block == Block("conv1")
    add_relu = next(op for op in ops if op.name == "conv4_2.add.relu")
    assert add_relu.block == Block("conv4_", 2) and add_relu.role == ".add.relu"


@pytest.mark.parametrize(
    ("name", "block", "role"),
    [
        (
            "/bert/encoder/layer.0/attention/self/query/MatMul",
            Block("/bert/encoder/layer.", 0),
            "/attention/self/query/MatMul",
        ),
        ("/transformer/h.11/mlp/c_fc/Gemm", Block("/transformer/h.", 11), "/mlp/c_fc/Gemm"),
        ("/model/layers_3/Add", Block("/model/layers_", 3), "/Add"),
        ("/model/embed_tokens/Gather", Block("/model/embed_tokens/Gather"), ""),
        ("MatMul_12", Block("MatMul_12"), ""),  # no path: the last part is the node's own name, not a module
    ],
)
def test_an_onnx_node_block_is_read_from_its_module_path(name, block, role):
    assert scope_block(name) == block
    assert block.role(name) == role
