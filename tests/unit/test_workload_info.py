"""A workload graph's metadata is one typed value (workload.WorkloadInfo), set by the front end that built
the graph and read by the passes; a graph without it is a one-line error, never a default name or shape."""

from __future__ import annotations

import networkx as nx
import pytest

from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.passes import map_model
from nvdla_mapper.workload import Op, OpKind, WorkloadInfo, info, verify, with_fusions
from nvdla_sim import NvdlaError, Precision, load_config


def test_the_front_end_records_the_shape_and_the_map_reports_it():
    g = build_graph(preset("gpt2"), batch=2, seq=16)
    assert info(g) == WorkloadInfo("gpt2", 2, 16)
    res = map_model(g, load_config("nv_small"), precision=Precision.INT8)
    assert (res.model, res.batch, res.seq) == ("gpt2", 2, 16)
    with_fusions(g, {"attention": 12, "layernorm": 25})
    assert info(g).fusions == {"attention": 12, "layernorm": 25} and info(g).batch == 2
    assert (
        "ONNX patterns fused before import: attention x12, layernorm x25"
        in map_model(g, load_config("nv_small"), precision=Precision.INT8).notes
    )


def test_a_graph_no_front_end_built_is_refused_in_one_line():
    g = nx.DiGraph(name="hand-made", batch=1, seq=8)  # metadata as loose keys, not a WorkloadInfo
    g.add_node("mm", op=Op("mm", OpKind.MATMUL, 8, 64, k=64), idx=0)
    for run in (lambda: verify(g), lambda: map_model(g, load_config("nv_small"), precision=Precision.INT8)):
        with pytest.raises(
            NvdlaError, match=r"^workload graph without its WorkloadInfo: build it with workload\.Graph"
        ):
            run()
