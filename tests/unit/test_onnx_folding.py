"""ONNX import on what exporters write: shape arithmetic folded to constants (onnxscript optimizer),
shapes propagated through values (onnx data_prop), weights in an external-data file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nvdla_mapper.onnx_import import graph_from_onnx
from nvdla_mapper.workload import OpKind, ops_in_order
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
