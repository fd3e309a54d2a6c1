"""ONNX import: a transformer graph (MatMul/Gemm, Add, Softmax, LayerNormalization or its decomposed form,
Gelu/Erf, Transpose, Reshape, Gather, ...) into the workload graph.

Symbolic dims are bound from `batch` and `seq` (see `_bind_dims`), the graph is folded and its
exporter patterns fused (`_fold_and_infer`, `onnx_fusion`), attention is found around each Softmax
(`onnx_attention`), and `_Importer` builds the ops the preset path would (docs/mapping.md, "Workload
graph"). An op outside the table is an error naming the node and op type, unless `host_fallback` is
set, in which case it becomes an explicit host task in the report.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from pathlib import Path

import networkx as nx

from nvdla_mapper.frontends.onnx_attention import Consts, find_attention
from nvdla_mapper.frontends.onnx_fusion import fuse as fuse_patterns
from nvdla_mapper.frontends.presets import patch_embed_op
from nvdla_mapper.workload import Block, Graph, Op, OpKind, verify, with_fusions
from nvdla_sim.errors import NvdlaError, ShapeError
from nvdla_sim.layers import ConvShape, PoolMode, PoolSpec

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
        "Attention",
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
    _name_nodes(model)
    return _Importer(model, path, host_fallback, batch=batch).run(fused)


# a module that is an entry of a list in an exporter's module path: layer.0, h.3, layers.11, blocks_2
_LIST_ENTRY = re.compile(r"^(.*?[._])(\d+)$")


def scope_block(name: str) -> Block:
    """The model block of an imported node, read from the module path exporters write into node names
    (PyTorch: `/bert/encoder/layer.0/attention/self/query/MatMul`): the first module of the path that is an
    entry of a list (`layer.0`, `h.3`, `blocks_2`) is a repeated block, its family the path up to the index
    (`/bert/encoder/layer.`); a node in no such module, or a name without a path, is a block of its own."""
    parts = name.split("/")
    for i, part in enumerate(parts[:-1]):
        found = _LIST_ENTRY.match(part)
        if found:
            return Block("/".join([*parts[:i], found.group(1)]), int(found.group(2)))
    return Block(name)


def _name_nodes(model) -> None:
    """Every node a unique name (ONNX allows none or repeats): the workload ops and the attention
    finder refer to nodes by name."""
    seen: set[str] = set()
    for idx, n in enumerate(model.graph.node):
        name = n.name or f"{n.op_type}_{idx}"
        while name in seen:
            name = f"{name}_{idx}"
        n.name = name
        seen.add(name)


class _Importer:
    """One pass over the folded, shape-inferred graph in node order, building the workload graph."""

    def __init__(self, model, path: Path, host_fallback: bool, *, batch: int) -> None:
        self.g, self.path, self.host_fallback = model.graph, path, host_fallback
        self.consts = Consts(model)
        self.sites = find_attention(model, self.consts)
        self.absorbed = set().union(*(s.absorbed for s in self.sites))
        self.role = {n: s for s in self.sites for n in (s.scores, s.softmax, s.context)}
        self.mask_nodes = set().union(*(s.mask_nodes for s in self.sites))
        self.shapes: dict[str, list[int]] = {}
        for vi in [*self.g.input, *self.g.value_info, *self.g.output]:
            self.shapes[vi.name] = [d.dim_value if d.dim_value > 0 else 0 for d in vi.type.tensor_type.shape.dim]
        for i in self.g.initializer:
            self.shapes[i.name] = list(i.dims)
        self.out = Graph(path.stem, batch=batch, seq=None)  # fixed dims may override the bound seq
        self.producer: dict[str, str] = {}  # value -> the workload op computing it
        self.channels_first: set[str] = set()  # NCHW values of a convolution (NVDLA keeps them channel-last)
        self.image_inputs = {i.name for i in self.g.input} - self.consts.names
        self.splits = 0

    def shape(self, name: str, node) -> list[int]:
        s = self.shapes.get(name)
        if not s or any(d == 0 for d in s):
            raise NvdlaError(
                f"{self.path}: node {node.name or node.op_type!r} ({node.op_type}): unknown shape for {name!r}"
            )
        return s

    def run(self, fused: dict[str, int]) -> nx.DiGraph:
        for node in self.g.node:
            if all(o in self.consts for o in node.output):
                continue  # known at compile time (a weight slice, a mask, shape arithmetic)
            self.node(node)
        masks = [s.mask for s in self.sites]
        found = {
            "attention": len(self.sites),  # scale, mask and NaN guard into the QK^T / softmax / PV layers
            "causal_mask": masks.count("causal"),
            "bias_mask": masks.count("bias"),
            "split_projection": self.splits,  # a fused QKV projection as one layer per piece
        }
        with_fusions(self.out.g, {**fused, **{k: v for k, v in found.items() if v}})
        for site in self.sites:  # V of P V computed transposed, as the preset lowering does (lower_matmul)
            v = self.producer.get(site.v_input)
            op = self.out.g.nodes[v]["op"] if v else None
            only_v = op is not None and op.kind is OpKind.MATMUL and self.out.g.out_degree(v) == 1
            if only_v and not op.attrs.im2col:
                self.out.g.nodes[v]["op"] = dataclasses.replace(
                    op, attrs=dataclasses.replace(op.attrs, feeds_context=True)
                )
                for pv in self.out.g.successors(v):  # PV adds V's bias where V is computed transposed
                    pv_op = self.out.g.nodes[pv]["op"]
                    if pv_op.kind is OpKind.ATTN_CONTEXT:
                        self.out.g.nodes[pv]["op"] = dataclasses.replace(
                            pv_op, attrs=dataclasses.replace(pv_op.attrs, value_bias=op.attrs.bias)
                        )
        if len(self.out.g) == 0:
            raise NvdlaError(f"{self.path}: the ONNX graph has no compute nodes")
        for name, data in self.out.g.nodes(data=True):
            data["op"] = dataclasses.replace(data["op"], block=scope_block(name))
        return verify(self.out.g)

    def view(self, node, deps: list[str]) -> None:
        """Outputs that are the inputs' elements read in another order or subset (no work of its own)."""
        if not deps:
            return
        src = deps[0] if len(deps) == 1 else self.out.add(Op(node.name, OpKind.RESHAPE, 1, 1, group="other"), *deps)
        first = any(i in self.channels_first for i in node.input)
        for o in node.output:
            self.producer[o] = src
            if first and node.op_type in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast"):
                self.channels_first.add(o)

    def node(self, node) -> None:
        out, consts, op_t, name = self.out, self.consts, node.op_type, node.name
        act_inputs = [i for i in node.input if i and i not in consts]
        deps = sorted({self.producer[i] for i in act_inputs if i in self.producer})
        if node.name in self.mask_nodes:  # the attention mask built from a model input: one host task
            if "attention_mask" not in out.g:
                out.add(self._mask_op())
            for o in node.output:
                self.producer[o] = "attention_mask"
            return
        if op_t == "Split":
            _check_split(node, self.shapes, self.path)
            if self._split_matmul(node, deps):
                return
        if node.name in self.absorbed or op_t in _VIEWS or op_t == "Split" or self._is_view(node, act_inputs, deps):
            self.view(node, deps)
            return
        y = self.shape(node.output[0], node)
        rows = math.prod(y[:-1]) if len(y) > 1 else 1
        cols = y[-1]
        site = self.role.get(node.name)
        if op_t == "BatchNormalization" and deps and out.g.nodes[deps[0]]["op"].kind is OpKind.CONV:
            conv = out.g.nodes[deps[0]]["op"]  # BN folds into the convolution's SDP scale (X2)
            out.g.nodes[deps[0]]["op"] = dataclasses.replace(conv, attrs=dataclasses.replace(conv.attrs, bn=True))
            self.producer[node.output[0]] = deps[0]
            return
        lead = math.prod(y[:-2]) if len(y) > 2 else 1
        if op_t in _CNN:
            op = self._conv(node, name)
        elif op_t in ("MatMul", "Gemm"):
            a = self.shape(node.input[0], node)
            k = a[-1] if not (op_t == "Gemm" and _attr(node, "transA", 0)) else a[0]
            if node.input[1] in consts:
                bias = op_t == "Gemm" and len(node.input) > 2 and bool(node.input[2])
                op = Op(name, OpKind.MATMUL, rows, cols, k=k, group="matmul", attrs={} if bias else {"bias": False})
            elif site is not None and site.context == node.name:
                attrs = _site_attrs(site, 1, site.scale)[2]
                op = Op(name, OpKind.ATTN_CONTEXT, y[-2], cols, k=k, count=lead, group="attention", attrs=attrs)
            else:  # QK^T (or, outside any attention found, another product of two activations)
                attrs = _site_attrs(site, 1, site.scale)[0] if site is not None else {"kv_share": 1}
                op = Op(name, OpKind.ATTN_SCORES, y[-2], cols, k=k, count=lead, group="attention", attrs=attrs)
        elif op_t == "Attention":
            self._attention_op(node, name, site, act_inputs)
            return
        elif op_t == "Softmax":
            attrs = _site_attrs(site, 1, site.scale)[1] if site is not None else {"causal": False}
            op = Op(name, OpKind.SOFTMAX, y[-2] if len(y) > 1 else 1, cols, count=lead, group="softmax", attrs=attrs)
        elif op_t in ("LayerNormalization", "RMSNormalization", "NvdlaRmsNorm"):
            rms = op_t != "LayerNormalization"
            op = Op(name, OpKind.LAYERNORM, rows, cols, group="layernorm", attrs={"rms": rms})
        elif op_t == "ReduceMean":
            x = self.shape(node.input[0], node)
            op = Op(name, OpKind.MATMUL, math.prod(x[:-1]), 1, k=x[-1], group="layernorm", attrs={"reduction": True})
        elif op_t in _ELEMENTWISE:
            if op_t in ("Add", "Sub") and len(act_inputs) == 1 and deps and _is_matmul(out, deps[0]):
                mm = out.g.nodes[deps[0]]["op"]  # bias add: free in the producer's SDP
                if mm.kind is OpKind.MATMUL and not mm.attrs.bias:
                    out.g.nodes[deps[0]]["op"] = dataclasses.replace(mm, attrs=dataclasses.replace(mm.attrs, bias=True))
                self.producer[node.output[0]] = deps[0]
                return
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
        elif self.host_fallback:
            op = Op(name, OpKind.HOST, rows, cols, group="host", attrs={"op_type": op_t})
        else:
            raise NvdlaError(
                f"{self.path}: node {name!r} has unsupported op type {op_t!r}; supported: {', '.join(SUPPORTED)} "
                "(pass --host-fallback to run it on the host)"
            )
        out.add(op, *deps)
        for o in node.output:
            self.producer[o] = name
        if op.kind in (OpKind.CONV, OpKind.POOL):
            self.channels_first.update(node.output)

    def _attention_op(self, node, name: str, site, act_inputs: list[str]) -> None:
        """ONNX's Attention op (opset 23) as the three layers the preset builds: QK^T, softmax, PV per
        head (4-D Q/K/V [batch, heads, seq, head dim], or 3-D [batch, seq, heads x head dim] with the
        q_num_heads / kv_num_heads attributes); a past_key / past_value (inputs 4, 5) adds cached keys."""
        q, k, v = (self.shape(i, node) for i in node.input[:3])
        if len(q) == 4:
            (b, hq, sq, hd), (hkv, skv), hdv = q, k[1:3], v[3]
        else:
            hq, hkv = _attr(node, "q_num_heads", 0), _attr(node, "kv_num_heads", 0)
            if not hq or not hkv:
                raise NvdlaError(
                    f"{self.path}: node {name!r} (Attention): 3-D inputs need q_num_heads and kv_num_heads"
                )
            b, sq, hd, skv, hdv = q[0], q[1], q[2] // hq, k[1], v[2] // hkv
        if len(node.input) > 4 and node.input[4]:
            skv += self.shape(node.input[4], node)[-2]
        for a in node.attribute:
            if a.name == "softcap" and a.f:
                raise NvdlaError(f"{self.path}: node {name!r} (Attention): softcap {a.f:g} is not supported (0 is)")
        if hq % hkv:
            raise NvdlaError(f"{self.path}: node {name!r} (Attention): {hq} query heads over {hkv} K/V heads")
        dep = {i: self.producer[i] for i in act_inputs if i in self.producer}
        scores_attrs, softmax_attrs, context_attrs = _site_attrs(site, hq // hkv, site.scale or 1 / math.sqrt(hd))
        mask_dep = [dep[node.input[3]]] if len(node.input) > 3 and node.input[3] in dep else []
        qk_deps = sorted({dep[i] for i in node.input[:2] if i in dep} | set(mask_dep))
        qk = self.out.add(Op(f"{name}.qk", OpKind.ATTN_SCORES, sq, skv, k=hd, count=b * hq, group="attention",
                             attrs=scores_attrs), *qk_deps)  # fmt: skip
        sm = self.out.add(Op(f"{name}.softmax", OpKind.SOFTMAX, sq, skv, count=b * hq, group="softmax",
                             attrs=softmax_attrs), qk)  # fmt: skip
        pv_deps = [sm, *([dep[node.input[2]]] if node.input[2] in dep else [])]
        pv = self.out.add(Op(f"{name}.pv", OpKind.ATTN_CONTEXT, sq, hdv, k=skv, count=b * hq, group="attention",
                             attrs=context_attrs), *pv_deps)  # fmt: skip
        for o in node.output:
            self.producer[o] = pv

    def _mask_op(self) -> Op:
        """Host input preprocessing: the additive mask [.., seq, keys] from the model's attention_mask,
        built once per forward and read by every layer's QK^T as its per-element operand."""
        dims = max(
            (self.shapes.get(o) or [1] for n in self.g.node if n.name in self.mask_nodes for o in n.output),
            key=math.prod,
        )
        note = "attention mask from the model's mask input (host preprocessing, once per forward)"
        attrs = {"op_type": "mask", "note": note, "flops_per_elem": 1}
        return Op("attention_mask", OpKind.HOST, math.prod(dims[:-1]), dims[-1], group="host", attrs=attrs)

    def _is_view(self, node, act_inputs: list[str], deps: list[str]) -> bool:
        """Nodes NVDLA does without a pass of their own: see docs/mapping.md, "Workload graph"."""
        op_t = node.op_type
        if op_t == "Transpose":
            perm = _ints(node, "perm", [])
            rank = len(perm)
            if perm and perm[-1] == rank - 1:
                return True  # whole channel lines move: the consumer's DMA reads with line/surface strides
            # NCHW -> tokens x channels after a convolution: NVDLA's feature cube is channel-innermost already
            return bool(perm) and perm[-1] == 1 and node.input[0] in self.channels_first
        if op_t == "Gather":  # rows of an activation picked by constant indices (a CLS token): a strided read
            return node.input[0] not in self.consts and node.input[1] in self.consts
        if op_t in ("Add", "Sub", "Mul", "Div") and len(act_inputs) == 1 and len(deps) == 1:
            # position / token-type embeddings added (or a scale applied) to looked-up rows: the host does
            # it as it gathers (the embedding op's cost)
            return self.out.g.nodes[deps[0]]["op"].kind is OpKind.GATHER
        return False

    def _split_matmul(self, node, deps: list[str]) -> bool:
        """A matmul with static weights whose only use is a Split along its columns (GPT-2's fused QKV)
        becomes one matmul per piece: the weight columns are split at compile time, and each piece is
        the layer the preset lowering builds (V computed transposed for P V)."""
        if len(deps) != 1:
            return False
        mm = deps[0]
        op = self.out.g.nodes[mm]["op"]
        if op.kind is not OpKind.MATMUL or op.attrs.im2col or self.out.g.out_degree(mm):
            return False
        aliases = [k for k, v in self.producer.items() if v == mm]  # the matmul's output and its views
        if any(len(self.consts.consumers.get(k, [])) > 1 for k in aliases):
            return False
        preds = list(self.out.g.predecessors(mm))
        self.out.g.remove_node(mm)
        for i, o in enumerate(node.output):
            piece = dataclasses.replace(op, name=f"{mm}.{i}", n=self.shape(o, node)[-1])
            self.producer[o] = self.out.add(piece, *preds)
        self.splits += 1
        for k in aliases:
            del self.producer[k]
        return True

    def _conv(self, node, name: str) -> Op:
        x = node.input[0]
        if node.op_type == "Conv" and x in self.image_inputs and node.input[1] in self.consts:
            k, c, r, s_ = self.shape(node.input[1], node)
            st, pads = _ints(node, "strides", [1, 1]), _ints(node, "pads", [0, 0, 0, 0])
            n, _, h, w = self.shape(x, node)
            patchify = r == s_ == st[0] == st[1] and not any(pads) and _attr(node, "group", 1) == 1
            if patchify and _ints(node, "dilations", [1, 1]) == [1, 1]:
                return patch_embed_op(name, batch=n, image=(w, h), patch=r, channels=c, hidden=k)
        return _cnn_op(node, name, self.shapes, self.shape, self.path, self.consts.names, image=x in self.image_inputs)


def _site_attrs(site, kv_share: int, scale: float) -> tuple[dict, dict, dict]:
    """The attrs the preset gives an attention's QK^T, softmax and PV, from what the import found."""
    causal = site.mask == "causal"
    scores = {"kv_share": kv_share, "causal": causal, "bias": site.mask == "bias", "scale": scale}
    return scores, {"causal": causal}, {"causal": causal, "kv_share": kv_share}


def _is_matmul(out: Graph, name: str) -> bool:
    return out.g.nodes[name]["op"].kind in (OpKind.MATMUL, OpKind.CONV)


def _ints(node, name: str, default: list[int]) -> list[int]:
    for a in node.attribute:
        if a.name == name:
            return list(a.ints)
    return default


def _cnn_op(node, name: str, shapes, shape, path: Path, inits: set[str], *, image: bool) -> Op:
    """Conv / pooling nodes (NCHW) as CONV / POOL ops with NVDLA geometry."""
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
                attrs={"conv": cs, "groups": groups, "image_input": image and cg <= 4 and groups == 1},
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
        return Op(name, OpKind.POOL, ow * oh, c, count=n, group="pool", attrs={"pool": spec, "input_whc": (w, h, c)})
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

    # a node the folder cannot evaluate stays in the graph (the import then handles or names it);
    # onnxscript logs each such node as a warning, which is noise for `nvdla map`
    logging.getLogger("onnxscript.optimizer._constant_folding").setLevel(logging.ERROR)
    try:  # folding and dead-node removal only: the optimizer's rewrite rules (e.g. Conv+BN) stay ours
        ir_model = onnx_ir.serde.deserialize_model(model)
        # ConstantOfShape is left alone by default (a constant-like op); exporters build shapes from it
        fold_filled = lambda n: True if n.op_type == "ConstantOfShape" else None  # noqa: E731
        onnxscript.optimizer.fold_constants(ir_model, onnx_shape_inference=True, should_fold=fold_filled)
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
    """Symbolic input dims bound: a name containing "batch" -> batch, one containing "seq", "len" or
    "token" -> seq; other names (the dynamo exporter's s0, s1, ...) by position: the first dim -> batch,
    the others -> seq. The exporter's intermediate shapes (still symbolic) are dropped, so that the
    folder and shape inference recompute them from the bound inputs."""
    del model.graph.value_info[:]
    for vi in model.graph.output:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.Clear()
    for vi in model.graph.input:
        for pos, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param:
                name = d.dim_param.lower()
                if "batch" in name:
                    d.dim_value = batch
                elif any(w in name for w in ("seq", "len", "token")):
                    d.dim_value = seq
                else:
                    d.dim_value = batch if pos == 0 else seq
