"""ONNX import on what exporters write: shape arithmetic folded to constants (onnxscript optimizer),
shapes propagated through values (onnx data_prop), weights in an external-data file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nvdla_mapper.frontends.onnx_import import graph_from_onnx
from nvdla_mapper.workload import MatmulAttrs, OpKind, info, ops_in_order
from nvdla_sim.errors import NvdlaError

H, HEADS = 64, 4


def _exporter_style(path, *, external: bool = False):
    """Embeddings with a token-type Gather over an index Expand-ed to Shape(input_ids) (as the TorchScript
    exporter writes BERT's), a projection, and a head split by Shape -> Gather -> Concat -> Reshape."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    inits = [
        numpy_helper.from_array(rng.standard_normal((1000, H)).astype(f32), "word_emb"),
        numpy_helper.from_array(rng.standard_normal((2, H)).astype(f32), "type_emb"),
        numpy_helper.from_array(rng.standard_normal((H, H)).astype(f32), "wq"),
        numpy_helper.from_array(np.zeros(1, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "i0"),
        numpy_helper.from_array(np.array([1], np.int64), "i1"),
        numpy_helper.from_array(np.array([HEADS, H // HEADS], np.int64), "heads"),
    ]
    nodes = [
        helper.make_node("Gather", ["word_emb", "ids"], ["we"], name="word_gather"),
        helper.make_node("Shape", ["ids"], ["ids_shape"], name="ids_shape"),
        helper.make_node("Expand", ["zero", "ids_shape"], ["tt"], name="tt_expand"),
        helper.make_node("Gather", ["type_emb", "tt"], ["te"], name="type_gather"),
        helper.make_node("Add", ["we", "te"], ["emb"], name="emb_add"),
        helper.make_node("MatMul", ["emb", "wq"], ["q"], name="q_proj"),
        helper.make_node("Shape", ["q"], ["q_shape"], name="q_shape"),
        helper.make_node("Gather", ["q_shape", "i0"], ["b"], name="b_of"),
        helper.make_node("Gather", ["q_shape", "i1"], ["s"], name="s_of"),
        helper.make_node("Concat", ["b", "s", "heads"], ["split"], name="split_shape", axis=0),
        helper.make_node("Reshape", ["q", "split"], ["qh"], name="head_split"),
        helper.make_node("Transpose", ["qh"], ["qt"], name="to_heads", perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], name="to_keys", perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["scores"], name="scores"),
    ]
    g = helper.make_graph(
        nodes,
        "exported",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("external", [False, True])
def test_exporter_shape_arithmetic_folds_and_maps(tmp_path, external):
    path = _exporter_style(tmp_path / "m.onnx", external=external)
    if external:
        assert (tmp_path / "m.onnx.data").stat().st_size > 1000 * H * 4
    ops = {o.name: o for o in ops_in_order(graph_from_onnx(path, batch=2, seq=16))}
    assert ops["q_proj"].kind is OpKind.MATMUL and ops["q_proj"].macs == 2 * 16 * H * H
    s = ops["scores"]
    assert s.kind is OpKind.ATTN_SCORES and (s.m, s.n, s.k, s.count) == (16, 16, H // HEADS, 2 * HEADS)
    # the shape arithmetic and the token-type lookup of a constant index are folded away
    assert not any(n in ops for n in ("type_gather", "b_of", "s_of", "split_shape"))


def test_missing_external_data_file_is_a_one_line_error(tmp_path):
    path = _exporter_style(tmp_path / "m.onnx", external=True)
    (tmp_path / "m.onnx.data").unlink()
    with pytest.raises(NvdlaError, match="m.onnx: cannot load ONNX model"):
        graph_from_onnx(path)


def _decomposed(path, act: str):
    """x -> decomposed LayerNorm -> MatMul -> decomposed activation -> MatMul, as exporters write them."""
    rng = np.random.default_rng(1)
    f32 = np.float32

    def c(name, v):
        return numpy_helper.from_array(np.asarray(v, f32), name)

    inits = [c("w1", rng.standard_normal((H, 4 * H))), c("w2", rng.standard_normal((4 * H, H))),
             c("gamma", np.ones(H)), c("beta", np.zeros(H)), c("eps", 1e-5), c("two", 2.0), c("root2", 2**0.5),
             c("one", 1.0), c("half", 0.5), c("three", 3.0), c("cubic", 0.044715), c("k", (2 / np.pi) ** 0.5)]  # fmt: skip
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["x"], ["mu"], name="ln_mean", axes=[-1]),
        n("Sub", ["x", "mu"], ["xc"], name="ln_sub"),
        n("Pow", ["xc", "two"], ["sq"], name="ln_pow"),
        n("ReduceMean", ["sq"], ["var"], name="ln_var", axes=[-1]),
        n("Add", ["var", "eps"], ["ve"], name="ln_eps"),
        n("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
        n("Div", ["xc", "sd"], ["xn"], name="ln_div"),
        n("Mul", ["xn", "gamma"], ["xg"], name="ln_gamma"),
        n("Add", ["xg", "beta"], ["h"], name="ln_beta"),
        n("MatMul", ["h", "w1"], ["u"], name="fc1"),
    ]
    if act == "gelu_erf":
        nodes += [n("Div", ["u", "root2"], ["a1"]), n("Erf", ["a1"], ["a2"]), n("Add", ["a2", "one"], ["a3"]),
                  n("Mul", ["u", "a3"], ["a4"]), n("Mul", ["a4", "half"], ["g"])]  # fmt: skip
    elif act == "gelu_tanh":
        nodes += [n("Pow", ["u", "three"], ["t1"]), n("Mul", ["t1", "cubic"], ["t2"]), n("Add", ["u", "t2"], ["t3"]),
                  n("Mul", ["t3", "k"], ["t4"]), n("Tanh", ["t4"], ["t5"]), n("Add", ["t5", "one"], ["t6"]),
                  n("Mul", ["u", "half"], ["t7"]), n("Mul", ["t7", "t6"], ["g"])]  # fmt: skip
    else:
        nodes += [n("Sigmoid", ["u"], ["s1"]), n("Mul", ["u", "s1"], ["g"])]
    nodes.append(n("MatMul", ["g", "w2"], ["y"], name="fc2"))
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("act", ["gelu_erf", "gelu_tanh", "silu"])
def test_decomposed_activation_and_layernorm_fuse_to_one_op_each(tmp_path, act):
    from nvdla_mapper.passes import map_model
    from nvdla_sim import Precision, load_config

    g = graph_from_onnx(_decomposed(tmp_path / f"{act}.onnx", act), batch=1, seq=32)
    kinds = [o.kind for o in ops_in_order(g)]
    assert kinds.count(OpKind.LAYERNORM) == 1 and OpKind.GATHER not in kinds
    acts = [o for o in ops_in_order(g) if o.kind in (OpKind.GELU, OpKind.LUT, OpKind.MUL, OpKind.ADD)]
    assert len(acts) == 1 and acts[0].kind is (OpKind.LUT if act == "silu" else OpKind.GELU), acts
    assert info(g).fusions == {act: 1, "layernorm": 1}
    res = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=1, seq=32)
    assert any("ONNX patterns fused before import" in n and f"{act} x1" in n for n in res.notes)
    # nv_full has the LUT: the activation runs on NVDLA; LayerNorm is the host's (the mapper's choice,
    # rules.LoweringContext.mode) unless asked for on NVDLA
    assert [r.task.name for r in res.host_tasks()] == [
        next(o.name for o in ops_in_order(g) if o.kind is OpKind.LAYERNORM)
    ]
    on_nvdla = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=1, seq=32, layernorm="nvdla")
    assert not on_nvdla.host_tasks()


def test_rmsnorm_fuses_and_a_channel_split_is_a_strided_read(tmp_path):
    """LLaMA-style RMSNorm (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul) -> one RMSNorm lowering;
    GPT-2's fused c_attn Split into q, k, v along the channels -> no host task, each piece read in place."""
    rng = np.random.default_rng(2)
    f32 = np.float32
    inits = [numpy_helper.from_array(np.asarray(v, f32), k) for k, v in
             (("two", 2.0), ("eps", 1e-6), ("gamma", np.ones(H)), ("wqkv", rng.standard_normal((H, 3 * H))),
              ("wo", rng.standard_normal((H, H))))]  # fmt: skip
    inits.append(numpy_helper.from_array(np.array([H, H, H], np.int64), "sizes"))
    n = helper.make_node
    nodes = [
        n("Pow", ["x", "two"], ["sq"]), n("ReduceMean", ["sq"], ["ms"], axes=[-1]), n("Add", ["ms", "eps"], ["me"]),
        n("Sqrt", ["me"], ["rs"]), n("Reciprocal", ["rs"], ["ir"]), n("Mul", ["x", "ir"], ["xn"]),
        n("Mul", ["gamma", "xn"], ["h"]),
        n("MatMul", ["h", "wqkv"], ["qkv"], name="c_attn"),
        n("Split", ["qkv", "sizes"], ["q", "k", "v"], name="split_qkv", axis=-1),
        n("Add", ["q", "k"], ["qk"], name="mix"), n("Add", ["qk", "v"], ["m"], name="mix2"),
        n("MatMul", ["m", "wo"], ["y"], name="out"),
    ]  # fmt: skip
    g = helper.make_graph(nodes, "rms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    path = tmp_path / "rms.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))  # axes attribute
    wg = graph_from_onnx(path, batch=1, seq=16)
    ops = list(ops_in_order(wg))
    norms = [o for o in ops if o.kind is OpKind.LAYERNORM]
    assert len(norms) == 1 and norms[0].attrs.rms and info(wg).fusions == {"rmsnorm": 1, "split_projection": 1}
    # the fused projection's only use is the Split: one layer per piece (weights split at compile time)
    pieces = [o for o in ops if o.kind is OpKind.MATMUL]
    assert [o.name for o in pieces] == ["c_attn.0", "c_attn.1", "c_attn.2", "out"]
    assert [(o.m, o.k, o.n) for o in pieces[:3]] == [(16, H, H)] * 3 and pieces[0].attrs == MatmulAttrs(bias=False)
    assert not any(o.kind is OpKind.HOST for o in ops)
    bad = tmp_path / "split0.onnx"
    g2 = helper.make_graph([n("Split", ["x", "s2"], ["a", "b"], axis=0, name="rows")], "s",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, H])],
                           [helper.make_tensor_value_info("a", TensorProto.FLOAT, None)],
                           [numpy_helper.from_array(np.array([1, 1], np.int64), "s2")])  # fmt: skip
    onnx.save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 18)]), str(bad))
    with pytest.raises(NvdlaError, match="Split on axis 0 of a rank-3 tensor; only the last axis"):
        graph_from_onnx(bad)
