"""Attention found in exported graphs (mapper/frontends/onnx_attention.py): the mask's kind from its value, the
scale from the multiplies around QK^T, the nodes that become part of the attention layers."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from nvdla_mapper.frontends.onnx_attention import _is_causal
from nvdla_mapper.frontends.onnx_import import graph_from_onnx
from nvdla_mapper.workload import MatmulAttrs, OpKind, info, ops_in_order
from nvdla_sim.errors import NvdlaError

S, H, HEADS = 16, 32, 2
D = H // HEADS


@given(q=st.integers(1, 12), extra=st.integers(0, 6), flip=st.integers(0, 10_000))
@settings(max_examples=60, deadline=None)
def test_causal_is_keys_up_to_the_query_position(q, extra, flip):
    k = q + extra  # queries are the last q of k positions (a chunk after cached keys)
    keep = np.arange(k)[None, :] <= np.arange(q)[:, None] + extra
    assert _is_causal(keep) and _is_causal(np.broadcast_to(keep, (2, 1, q, k)))
    other = keep.copy()
    other.flat[flip % other.size] ^= True
    assert not _is_causal(other)


def _attention_graph(path, *, mask: np.ndarray | None, where_form: bool = False, nan_guard: bool = False,
                     extra_node=None):  # fmt: skip
    """TorchScript-exporter-style attention over x [1, S, H]: q/k/v projections, head split, K^T,
    Div by sqrt(d), an additive mask (or Where(keep, s, -inf)), Softmax, optional NaN guard, PV,
    head merge, output projection."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    inits = [numpy_helper.from_array(rng.standard_normal((H, H)).astype(f32), w) for w in ("wq", "wk", "wv", "wo")]
    inits += [
        numpy_helper.from_array(np.array([1, S, HEADS, D], np.int64), "split_shape"),
        numpy_helper.from_array(np.array([1, S, H], np.int64), "merge_shape"),
        numpy_helper.from_array(np.array(math.sqrt(D), f32), "root_d"),
        numpy_helper.from_array(np.array(0.0, f32), "zero"),
        numpy_helper.from_array(np.array(-np.inf, f32), "neg_inf"),
    ]
    n = helper.make_node
    nodes = []
    for w in ("q", "k", "v"):
        nodes += [
            n("MatMul", ["x", f"w{w}"], [f"{w}p"], name=f"{w}_proj"),
            n("Reshape", [f"{w}p", "split_shape"], [f"{w}r"], name=f"{w}_split"),
            n("Transpose", [f"{w}r"], [f"{w}h"], perm=[0, 2, 1, 3], name=f"{w}_heads"),
        ]
    nodes += [
        n("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2], name="k_t"),
        n("MatMul", ["qh", "kt"], ["s0"], name="qk"),
        n("Div", ["s0", "root_d"], ["s1"], name="scale"),
    ]
    scores = "s1"
    if mask is not None and where_form:
        inits.append(numpy_helper.from_array(mask, "keep"))
        nodes.append(n("Where", ["keep", "s1", "neg_inf"], ["s2"], name="mask"))
        scores = "s2"
    elif mask is not None:
        inits.append(numpy_helper.from_array(mask.astype(f32), "mask_c"))
        nodes.append(n("Add", ["s1", "mask_c"], ["s2"], name="mask"))
        scores = "s2"
    nodes.append(n("Softmax", [scores], ["p"], axis=-1, name="softmax"))
    probs = "p"
    if nan_guard:
        nodes += [n("IsNaN", ["p"], ["nan"], name="isnan"), n("Where", ["nan", "zero", "p"], ["pg"], name="guard")]
        probs = "pg"
    nodes += [
        n("MatMul", [probs, "vh"], ["ctx"], name="pv"),
        n("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3], name="merge_heads"),
        n("Reshape", ["ct", "merge_shape"], ["cm"], name="merge"),
        n("MatMul", ["cm", "wo"], ["y"], name="o_proj"),
    ]
    outs = ["y"]
    if extra_node is not None:  # a graph output, so that dead-node removal keeps it
        nodes.append(extra_node)
        outs += list(extra_node.output)
    g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, H])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)  # fmt: skip
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


CAUSAL_ADD = np.where(np.tril(np.ones((S, S), bool)), 0.0, np.finfo(np.float32).min)[None, None]


@pytest.mark.parametrize(
    ("mask", "where_form", "want"),
    [
        (None, False, ""),
        (np.zeros((1, 1, S, S)), False, ""),
        (CAUSAL_ADD, False, "causal"),
        (np.tril(np.ones((S, S), bool))[None, None], True, "causal"),
        (np.random.default_rng(1).standard_normal((1, HEADS, S, S)), False, "bias"),  # T5-style positions
    ],
)
def test_attention_becomes_the_preset_layers(tmp_path, mask, where_form, want):
    wg = graph_from_onnx(_attention_graph(tmp_path / "a.onnx", mask=mask, where_form=where_form, nan_guard=True))
    ops = list(ops_in_order(wg))
    kinds = [o.kind for o in ops if o.kind is not OpKind.RESHAPE]
    # the K^T and head transposes, the scale, the mask add and the NaN guard are no passes of their own
    assert kinds == [OpKind.MATMUL] * 3 + [OpKind.ATTN_SCORES, OpKind.SOFTMAX, OpKind.ATTN_CONTEXT, OpKind.MATMUL]
    qk = next(o for o in ops if o.kind is OpKind.ATTN_SCORES)
    assert (qk.m, qk.n, qk.k, qk.count) == (S, S, D, HEADS)
    assert qk.attrs.scale == pytest.approx(1 / math.sqrt(D))
    assert qk.attrs.causal is (want == "causal") and qk.attrs.bias is (want == "bias")
    pv = next(o for o in ops if o.kind is OpKind.ATTN_CONTEXT)
    assert (pv.m, pv.n, pv.k, pv.count) == (S, D, S, HEADS)
    v = next(o for o in ops if o.name == "v_proj")
    assert v.attrs == MatmulAttrs(bias=False, feeds_context=True)  # V^T computed directly, as the preset does
    assert pv.attrs.value_bias is False  # V has no bias for PV to add
    assert info(wg).fusions["attention"] == 1


def test_an_isnan_outside_the_guard_is_still_an_unsupported_op(tmp_path):
    stray = helper.make_node("IsNaN", ["y"], ["bad"], name="stray_isnan")
    path = _attention_graph(tmp_path / "a.onnx", mask=None, extra_node=stray)
    with pytest.raises(NvdlaError, match="node 'stray_isnan' has unsupported op type 'IsNaN'"):
        graph_from_onnx(path)
    wg = graph_from_onnx(path, host_fallback=True)
    assert [o.name for o in ops_in_order(wg) if o.kind is OpKind.HOST] == ["stray_isnan"]


def _attention_op_graph(path, *, three_d: bool, kv_heads: int, causal: int = 0, past: int = 0, softcap: float = 0.0):
    """Q, K, V projections into ONNX's Attention op (opset 23), 4-D (heads split by Reshape/Transpose)
    or 3-D (q_num_heads / kv_num_heads attributes), grouped-query K/V, an optional past_key/past_value."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    kv = kv_heads * D
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(f32), w)
             for w, s in (("wq", (H, H)), ("wk", (H, kv)), ("wv", (H, kv)), ("wo", (H, H)))]  # fmt: skip
    n = helper.make_node
    nodes = [n("MatMul", ["x", f"w{w}"], [f"{w}p"], name=f"{w}_proj") for w in "qkv"]
    ins = ["qp", "kp", "vp"]
    if not three_d:
        for w, heads in (("q", HEADS), ("k", kv_heads), ("v", kv_heads)):
            inits.append(numpy_helper.from_array(np.array([1, S, heads, D], np.int64), f"{w}_shape"))
            nodes += [n("Reshape", [f"{w}p", f"{w}_shape"], [f"{w}r"], name=f"{w}_split"),
                      n("Transpose", [f"{w}r"], [f"{w}h"], perm=[0, 2, 1, 3], name=f"{w}_heads")]  # fmt: skip
        ins = ["qh", "kh", "vh"]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, H])]
    if past:
        ins += ["", "past_k", "past_v"]
        shape = [1, kv_heads, past, D]
        inputs += [helper.make_tensor_value_info(p, TensorProto.FLOAT, shape) for p in ("past_k", "past_v")]
    attrs = {"is_causal": causal, "softcap": softcap}
    if three_d:
        attrs.update(q_num_heads=HEADS, kv_num_heads=kv_heads)
    nodes.append(n("Attention", ins, ["y4"], name="attn", **attrs))
    if three_d:
        nodes.append(n("MatMul", ["y4", "wo"], ["y"], name="o_proj"))
    else:
        inits.append(numpy_helper.from_array(np.array([1, S, H], np.int64), "merge_shape"))
        nodes += [n("Transpose", ["y4"], ["yt"], perm=[0, 2, 1, 3], name="merge_heads"),
                  n("Reshape", ["yt", "merge_shape"], ["ym"], name="merge"), n("MatMul", ["ym", "wo"], ["y"], name="o_proj")]  # fmt: skip
    g = helper.make_graph(nodes, "attn23", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), str(path))
    return path


@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize(("kv_heads", "causal", "past"), [(HEADS, 0, 0), (1, 1, 0), (1, 1, 8)])
def test_the_attention_op_becomes_the_preset_layers(tmp_path, three_d, kv_heads, causal, past):
    path = _attention_op_graph(tmp_path / "a.onnx", three_d=three_d, kv_heads=kv_heads, causal=causal, past=past)
    ops = [o for o in ops_in_order(graph_from_onnx(path)) if o.kind is not OpKind.RESHAPE]
    assert [o.kind for o in ops] == [OpKind.MATMUL] * 3 + [OpKind.ATTN_SCORES, OpKind.SOFTMAX, OpKind.ATTN_CONTEXT,
                                                          OpKind.MATMUL]  # fmt: skip
    qk, sm, pv = ops[3:6]
    keys = S + past
    assert (qk.m, qk.n, qk.k, qk.count) == (S, keys, D, HEADS) and (pv.m, pv.n, pv.k) == (S, D, keys)
    assert qk.attrs.kv_share == pv.attrs.kv_share == HEADS // kv_heads
    assert qk.attrs.causal is sm.attrs.causal is bool(causal)
    assert qk.attrs.scale == pytest.approx(1 / math.sqrt(D))
    assert ops[2].attrs.feeds_context


def test_an_attention_op_with_softcap_is_refused_in_one_line(tmp_path):
    path = _attention_op_graph(tmp_path / "a.onnx", three_d=True, kv_heads=HEADS, softcap=30.0)
    with pytest.raises(NvdlaError, match=r"node 'attn' \(Attention\): softcap 30 is not supported"):
        graph_from_onnx(path)
