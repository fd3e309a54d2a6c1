"""ONNX import: a transformer graph (MatMul/Gemm, Add, Softmax, LayerNormalization or its decomposed form,
Gelu/Erf, Transpose, Reshape, Gather, ...) into the workload graph.

Symbolic dims are bound from `batch` and `seq` (names containing "batch" -> batch, any other symbol ->
seq). An op outside the table is an error naming the node and op type, unless `host_fallback` is set,
in which case it becomes an explicit host task in the report.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import networkx as nx

from nvdla_sim.errors import NvdlaError

from .workload import Graph, Op, OpKind

_ELEMENTWISE = {
    "Add": OpKind.ADD,
    "Sub": OpKind.ADD,
    "Mul": OpKind.MUL,
    "Div": OpKind.MUL,
    "Relu": OpKind.RELU,
    "Gelu": OpKind.GELU,
}
_LUT = {"Erf", "Exp", "Sqrt", "Reciprocal", "Tanh", "Sigmoid", "Pow", "NvdlaSilu"}  # NvdlaSilu: onnx_fusion
_VIEWS = {
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Cast",
    "Shape",
    "Constant",
    "ConstantOfShape",
    "Slice",
    "Concat",
    "Expand",
    "Where",
    "Equal",
    "Range",
}
_CNN = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization"}
SUPPORTED = sorted(
    {
        "MatMul",
        "Gemm",
        "Softmax",
        "LayerNormalization",
        "RMSNormalization",
        "NvdlaRmsNorm",
        "Split",
        "ReduceMean",
        "Transpose",
        "Gather",
        *_ELEMENTWISE,
        *_LUT,
        *_VIEWS,
        *_CNN,
    }
)


def graph_from_onnx(path: str | Path, *, batch: int = 1, seq: int = 128, host_fallback: bool = False) -> nx.DiGraph:
    import onnx

    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as e:  # onnx raises DecodeError / OSError variants
        raise NvdlaError(f"{path}: cannot load ONNX model ({e})") from None
    _bind_dims(model, batch, seq)
    model, fused = _fold_and_infer(model, path)
    g = model.graph
    inits = {i.name for i in g.initializer}
    shapes: dict[str, list[int]] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        dims = [d.dim_value if d.dim_value > 0 else 0 for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = dims
    for i in g.initializer:
        shapes[i.name] = list(i.dims)
    out = Graph(path.stem)
    out.g.graph["onnx_fusions"] = fused
    graph_inputs = {i.name for i in g.input} - inits
    producer: dict[str, str] = {}

    def shape(name: str, node) -> list[int]:
        s = shapes.get(name)
        if not s or any(d == 0 for d in s):
            raise NvdlaError(f"{path}: node {node.name or node.op_type!r} ({node.op_type}): unknown shape for {name!r}")
        return s

    for idx, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{idx}"
        act_inputs = [i for i in node.input if i and i not in inits]
        deps = sorted({producer[i] for i in act_inputs if i in producer})
        op_t = node.op_type
        if op_t == "Split":
            _check_split(node, shapes, path)
        if op_t in _VIEWS or op_t == "Split":
            for o in node.output:
                if deps:
                    producer[o] = (
                        deps[0] if len(deps) == 1 else out.add(Op(name, OpKind.RESHAPE, 1, 1, group="other"), *deps)
                    )
            continue
        y = shape(node.output[0], node)
        rows = math.prod(y[:-1]) if len(y) > 1 else 1
        cols = y[-1]
        if op_t == "BatchNormalization" and deps and out.g.nodes[deps[0]]["op"].kind is OpKind.CONV:
            conv = out.g.nodes[deps[0]]["op"]  # BN folds into the convolution's SDP scale (X2)
            out.g.nodes[deps[0]]["op"] = dataclasses.replace(conv, attrs={**conv.attrs, "bn": True})
            producer[node.output[0]] = deps[0]
            continue
        if op_t in _CNN:
            op = _cnn_op(node, name, shapes, shape, path, inits, image=node.input[0] in graph_inputs)
        elif op_t in ("MatMul", "Gemm"):
            a = shape(node.input[0], node)
            k = a[-1] if not (op_t == "Gemm" and _attr(node, "transA", 0)) else a[0]
            if node.input[1] in inits:
                op = Op(name, OpKind.MATMUL, rows, cols, k=k, group="matmul")
            else:
                lead = math.prod(y[:-2]) if len(y) > 2 else 1
                op = Op(name, OpKind.ATTN_SCORES, y[-2], cols, k=k, count=lead, group="attention")
        elif op_t == "Softmax":
            lead = math.prod(y[:-2]) if len(y) > 2 else 1
            op = Op(name, OpKind.SOFTMAX, y[-2] if len(y) > 1 else 1, cols, count=lead, group="softmax")
        elif op_t in ("LayerNormalization", "RMSNormalization", "NvdlaRmsNorm"):
            rms = op_t != "LayerNormalization"
            op = Op(name, OpKind.LAYERNORM, rows, cols, group="layernorm", attrs={"rms": rms})
        elif op_t == "ReduceMean":
            x = shape(node.input[0], node)
            op = Op(name, OpKind.MATMUL, math.prod(x[:-1]), 1, k=x[-1], group="layernorm", attrs={"reduction": True})
        elif op_t in _ELEMENTWISE:
            if op_t in ("Add", "Sub") and len(act_inputs) == 1 and deps and _is_matmul(out, deps[0]):
                producer[node.output[0]] = deps[0]  # bias add: free in the producer's SDP
                continue
            kind = _ELEMENTWISE[op_t]
            if kind is OpKind.MUL and len(act_inputs) == 1:
                kind = OpKind.SCALE
            op = Op(name, kind, rows, cols, group="elementwise")
        elif op_t in _LUT:
            op = Op(name, OpKind.LUT, rows, cols, group="elementwise", attrs={"func": op_t})
        elif op_t == "Transpose":
            op = Op(name, OpKind.TRANSPOSE, rows, cols, group="other")
        elif op_t == "Gather":
            op = Op(name, OpKind.GATHER, rows, cols, group="host")
        elif host_fallback:
            op = Op(name, OpKind.HOST, rows, cols, group="host", attrs={"op_type": op_t})
        else:
            raise NvdlaError(
                f"{path}: node {name!r} has unsupported op type {op_t!r}; supported: {', '.join(SUPPORTED)} "
                "(pass --host-fallback to run it on the host)"
            )
        out.add(op, *deps)
        for o in node.output:
            producer[o] = name
    if len(out.g) == 0:
        raise NvdlaError(f"{path}: the ONNX graph has no compute nodes")
    return out.g


def _is_matmul(out: Graph, name: str) -> bool:
    return out.g.nodes[name]["op"].kind in (OpKind.MATMUL, OpKind.CONV)


def _ints(node, name: str, default: list[int]) -> list[int]:
    for a in node.attribute:
        if a.name == name:
            return list(a.ints)
    return default


def _cnn_op(node, name: str, shapes, shape, path: Path, inits: set[str], *, image: bool) -> Op:
    """Conv / pooling nodes (NCHW) as CONV / POOL ops with NVDLA geometry."""
    from nvdla_sim.errors import ShapeError
    from nvdla_sim.layers import ConvShape, PoolMode, PoolSpec

    n, c, h, w = shape(node.input[0], node)
    try:
        if node.op_type == "Conv":
            if node.input[1] not in inits:
                raise NvdlaError(f"{path}: node {name!r} (Conv): weights must be an initializer")
            k, cg, r, s_ = shape(node.input[1], node)
            groups = _attr(node, "group", 1)
            st = _ints(node, "strides", [1, 1])
            pads = _ints(node, "pads", [0, 0, 0, 0])  # top, left, bottom, right
            dil = _ints(node, "dilations", [1, 1])
            geo = dict(
                in_w=w,
                in_h=h,
                in_c=cg,
                out_k=k // groups,
                kernel_w=s_,
                kernel_h=r,
                stride_x=st[1],
                stride_y=st[0],
                pad_left=pads[1],
                pad_right=pads[3],
                pad_top=pads[0],
                pad_bottom=pads[2],
                dilation_x=dil[1],
                dilation_y=dil[0],
            )
            cs = ConvShape(**geo)
            return Op(
                name,
                OpKind.CONV,
                cs.out_pixels,
                k // groups,
                k=cg * r * s_,
                count=n * groups,
                group="conv",
                attrs={"conv": geo, "groups": groups, "image_input": image and cg <= 4 and groups == 1},
            )
        if node.op_type == "GlobalAveragePool":
            spec = PoolSpec(PoolMode.AVG, w, h, 1, 1)
        else:
            ks = _ints(node, "kernel_shape", [1, 1])
            st = _ints(node, "strides", [1, 1])
            pads = _ints(node, "pads", [0, 0, 0, 0])
            mode = PoolMode.MAX if node.op_type == "MaxPool" else PoolMode.AVG
            spec = PoolSpec(mode, ks[1], ks[0], st[1], st[0], pads[1], pads[3], pads[0], pads[2])
        ow, oh = spec.out_size(w, h)
        return Op(name, OpKind.POOL, ow * oh, c, count=n, group="pool", attrs={"pool": spec, "in": (w, h, c)})
    except ShapeError as e:
        raise NvdlaError(f"{path}: node {name!r} ({node.op_type}): {e}") from None


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return a.i
    return default


def _check_split(node, shapes: dict[str, list[int]], path: Path) -> None:
    """Split along the channels (the last axis) is free on NVDLA: each piece is read by its consumer's
    DMA at its own surface offset (a strided read, no copy). Another axis would need a copy."""
    rank = len(shapes.get(node.input[0]) or [])
    axis = _attr(node, "axis", 0)
    if rank and axis % rank != rank - 1:
        raise NvdlaError(
            f"{path}: node {node.name or 'Split'}: Split on axis {axis} of a rank-{rank} tensor; only the last "
            "axis (channels, a strided DMA read) is supported"
        )


def _fold_and_infer(model, path: Path) -> tuple:
    """With the symbolic dims bound: constant folding by the onnxscript optimizer (the shape arithmetic
    exporters write, Shape -> Gather -> Concat -> Reshape and mask construction, becomes constants and its
    nodes go away), then ONNX shape inference with data propagation (shapes that flow through Shape /
    Slice / Concat values, as in an embedding Gather over an expanded index)."""
    import onnx_ir
    import onnxscript.optimizer
    from onnx import shape_inference

    from .onnx_fusion import fuse as fuse_patterns

    # a node the folder cannot evaluate stays in the graph (the import then handles or names it);
    # onnxscript logs each such node as a warning, which is noise for `nvdla map`
    logging.getLogger("onnxscript.optimizer._constant_folding").setLevel(logging.ERROR)
    try:  # folding and dead-node removal only: the optimizer's rewrite rules (e.g. Conv+BN) stay ours
        ir_model = onnx_ir.serde.deserialize_model(model)
        onnxscript.optimizer.fold_constants(ir_model, onnx_shape_inference=True)
        fused = fuse_patterns(ir_model)
        onnxscript.optimizer.remove_unused_nodes(ir_model)
        model = onnx_ir.serde.serialize_model(ir_model)
    except Exception as e:
        raise NvdlaError(f"{path}: constant folding (onnxscript optimizer) failed ({type(e).__name__}: {e})") from None
    try:
        return shape_inference.infer_shapes(model, data_prop=True), fused
    except Exception as e:
        raise NvdlaError(f"{path}: ONNX shape inference failed ({e})") from None


def _bind_dims(model, batch: int, seq: int) -> None:
    for vi in model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.dim_value = batch if "batch" in d.dim_param.lower() else seq
