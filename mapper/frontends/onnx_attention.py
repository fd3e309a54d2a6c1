"""Attention in an exported ONNX graph, found around each Softmax, and the graph's compile-time constants.

Exporters write scaled dot-product attention as
    Q [Mul s] , K [Transpose] [Mul s]  ->  MatMul  [Div/Mul scale]  [Add mask | Where(mask, ., -inf)]
    -> Softmax  [Where(IsNaN(p), 0, p)]  ->  MatMul with V
(the dynamo exporter splits 1/sqrt(d) as sqrt over Q and K and guards fully masked rows against NaN;
the TorchScript exporter divides the scores). `find_attention` walks from every Softmax back to the
QK^T MatMul and forward to the PV MatMul and returns what the preset lowering would have built: the
score scale, the mask (none, causal or an additive per-element bias such as T5's relative positions),
and the nodes that become part of the attention layers (scale multiplies, mask adds, the NaN guard, the
K transposes: lower_scores's re-layout of K into weight format pays for those).

`Consts` knows which values are known at compile time: initializers, Constant nodes, and outputs of
nodes whose inputs all are (what the constant folder left, for its size limits or an op it does not
evaluate). Their values are computed on demand with onnx's reference evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# mask entries at or below this are "masked out" (exporters use -inf, finfo.min or -1e4..-1e9)
_MASKED = -1e4
# nodes that pass a tensor through unchanged in value (reshapes of the same elements)
_PASS = {"Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity", "Dropout", "Flatten", "Expand"}


class Consts:
    """Compile-time constant values of a graph (see the module docstring)."""

    def __init__(self, model) -> None:
        graph = model.graph
        self.graph = graph
        self._opsets = list(model.opset_import)
        self.inputs = {i.name: i for i in graph.input if i.name not in {t.name for t in graph.initializer}}
        self.inits = {i.name: i for i in graph.initializer}
        self.producer = {o: n for n in graph.node for o in n.output}
        self.consumers: dict[str, list] = {}  # value -> the nodes reading it
        for n in graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.names: set[str] = set(self.inits)
        for n in graph.node:
            if n.op_type == "Constant" or (n.input and all(not i or i in self.names for i in n.input)):
                self.names.update(n.output)
        self._values: dict[str, np.ndarray | None] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def value(self, name: str) -> np.ndarray | None:
        """The value of a constant, or None when it is not one (or cannot be evaluated)."""
        if name not in self.names:
            return None
        if name not in self._values:
            self._values[name] = self.evaluate(name)
        return self._values[name]

    def scalar(self, name: str) -> float | None:
        v = self.value(name)
        return float(v.reshape(())) if v is not None and v.size == 1 else None

    def ancestry(self, name: str) -> tuple[list, set[str], set[str]] | None:
        """The nodes computing `name` from initializers and graph inputs, in graph order, with the
        initializers and graph inputs they read; None when a node on the way is unknown."""
        nodes, inits, inputs, todo, seen = [], set(), set(), [name], set()
        while todo:
            v = todo.pop()
            if v in seen or not v:
                continue
            seen.add(v)
            if v in self.inits:
                inits.add(v)
            elif v in self.inputs:
                inputs.add(v)
            elif v in self.producer:
                n = self.producer[v]
                if all(n is not m for m in nodes):
                    nodes.append(n)
                    todo.extend(n.input)
            else:
                return None
        order = {id(n): i for i, n in enumerate(self.graph.node)}
        nodes.sort(key=lambda n: order[id(n)])
        return nodes, inits, inputs

    def evaluate(self, name: str, *, ones_for_inputs: bool = False) -> np.ndarray | None:
        """Evaluate `name` with onnx's reference evaluator; graph inputs it reads (a padding mask) are fed
        all ones when `ones_for_inputs` (the mask's structure without padding)."""
        import onnx
        from onnx import helper, numpy_helper
        from onnx.reference import ReferenceEvaluator

        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        found = self.ancestry(name)
        if found is None or (found[2] and not ones_for_inputs):
            return None
        nodes, inits, inputs = found
        graph = helper.make_graph(
            nodes,
            "const",
            [self.inputs[i] for i in sorted(inputs)],
            [helper.make_value_info(name, onnx.TypeProto())],
            [self.inits[i] for i in sorted(inits)],
        )
        feeds = {}
        for i in inputs:
            t = self.inputs[i].type.tensor_type
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
            feeds[i] = np.ones([d.dim_value for d in t.shape.dim], dtype=dtype)
        try:
            model = helper.make_model(graph, opset_imports=self._opsets)
            with np.errstate(all="ignore"):
                return np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])
        except Exception:  # an op the reference evaluator lacks: the value stays unknown
            return None


@dataclass
class Site:
    """One attention found in the graph: node names and what the preset lowering needs."""

    scores: str
    softmax: str
    context: str
    scale: float = 1.0
    mask: str = ""  # "" | "causal" | "bias"
    absorbed: set[str] = field(default_factory=set)
    v_input: str = ""  # the value the context MatMul reads as V
    mask_nodes: set[str] = field(default_factory=set)  # the mask's construction from a model input


def find_attention(model, consts: Consts) -> list[Site]:
    """Every Softmax that sits between a QK^T and a PV MatMul of two activations."""
    sites = []
    for n in model.graph.node:
        site = _site(n, consts) if n.op_type == "Softmax" else None
        if n.op_type == "Attention":
            site = _attention_op(n, consts)
        if site is not None:
            sites.append(site)
    return sites


def _attention_op(n, consts: Consts) -> Site:
    """ONNX's own Attention op (opset 23, what the dynamo exporter writes for scaled_dot_product_attention
    at that opset): QK^T, softmax and PV in one node. Its scale attribute defaults to 1/sqrt(head dim)
    (0: the default); its optional attn_mask (input 3) is boolean (keep) or additive."""
    attrs = {a.name: a for a in n.attribute}
    scale = attrs["scale"].f if "scale" in attrs else 0.0
    mask, mask_nodes = _mask(n.input[3], consts) if len(n.input) > 3 and n.input[3] else ("", set())
    mask = mask or ("bias" if mask_nodes else "")  # padding only: a per-element operand all the same
    if "is_causal" in attrs and attrs["is_causal"].i:
        mask = "causal" if mask in ("", "causal") else "bias"
    return Site(n.name, n.name, n.name, scale, mask, set(), n.input[2], mask_nodes)


def _site(sm, consts: Consts) -> Site | None:
    prod = consts.producer
    absorbed: set[str] = set()
    mask_nodes: set[str] = set()  # a mask built from a model input (a padding mask): one host task
    scale, masks = 1.0, []
    v = sm.input[0]
    while True:  # back from the softmax to QK^T
        n = prod.get(v)
        if n is None or v in consts:
            return None
        t = n.op_type
        if t == "MatMul" and not any(i in consts for i in n.input):
            scores = n
            break
        if (factor := _scalar_factor(n, consts)) is not None:
            c, v = factor
            scale *= c
        elif t == "Add":
            side = 0 if _reaches_matmul(n.input[0], consts) else 1
            kind, nodes = _mask(n.input[1 - side], consts)
            masks.append(kind)
            mask_nodes |= nodes
            v = n.input[side]
        elif t == "Where" and consts.scalar(n.input[2]) is not None and consts.scalar(n.input[2]) <= _MASKED:
            kind, nodes = _mask(n.input[0], consts, keep=True)
            masks.append(kind)
            mask_nodes |= nodes
            v = n.input[1]
        elif t in _PASS:
            v = n.input[0]
        else:
            return None
        absorbed.add(n.name)
    for side, src in enumerate(scores.input):  # the scale on Q / K, and K's transposes
        while (n := prod.get(src)) is not None and src not in consts:
            t = n.op_type
            if (factor := _scalar_factor(n, consts)) is not None:
                c, src = factor
                scale *= c
            elif t in _PASS or (t == "Transpose" and side == 1):
                src = n.input[0]
            else:
                break
            absorbed.add(n.name)
    out = sm.output[0]
    while True:  # forward from the softmax to PV, past the NaN guard of fully masked rows
        users = consts.consumers.get(out, [])
        guard = [u for u in users if u.op_type == "IsNaN"]
        if guard and len(users) == 2:
            where = next((u for u in users if u.op_type == "Where"), None)
            if where is None or where.input[2] != out:
                return None
            absorbed |= {guard[0].name, where.name}
            out = where.output[0]
        elif len(users) == 1 and users[0].op_type in _PASS:
            absorbed.add(users[0].name)
            out = users[0].output[0]
        elif len(users) == 1 and users[0].op_type == "MatMul" and users[0].input[0] == out:
            context = users[0]
            break
        else:
            return None
    kinds = set(masks) - {""}
    mask = "bias" if "bias" in kinds else ("causal" if kinds else "")
    if mask_nodes and not mask:
        mask = "bias"  # padding only: a per-element operand all the same
    return Site(scores.name, sm.name, context.name, scale, mask, absorbed, context.input[1], mask_nodes)


def _scalar_factor(n, consts: Consts) -> tuple[float, str] | None:
    """(c, x) for a node computing c * x with a constant scalar c (Mul either way round, Div by it)."""
    if len(n.input) != 2:
        return None
    if n.op_type in ("Mul", "Div") and (c := consts.scalar(n.input[1])) is not None:
        return (c if n.op_type == "Mul" else 1 / c), n.input[0]
    if n.op_type == "Mul" and (c := consts.scalar(n.input[0])) is not None:
        return c, n.input[1]
    return None


def _mask(name: str, consts: Consts, *, keep: bool = False) -> tuple[str, set[str]]:
    """A mask operand's kind ("", "causal" or "bias") and, for one built from model inputs, the nodes
    building it. Additive, or with `keep` the condition of Where(keep, scores, -inf); a boolean value is
    a keep mask either way."""
    nodes = _from_inputs(name, consts)
    value = consts.value(name) if name in consts else (consts.evaluate(name, ones_for_inputs=True) if nodes else None)
    if value is None:
        return "bias", nodes
    kind = _keep_kind(np.asarray(value, dtype=bool)) if keep or value.dtype == bool else _additive_kind(value)
    return kind, nodes


def _reaches_matmul(v: str, consts: Consts, depth: int = 8) -> bool:
    """Whether `v` is computed from a MatMul of two activations through scale / mask / reshape nodes."""
    for _ in range(depth):
        n = consts.producer.get(v)
        if n is None or v in consts:
            return False
        if n.op_type == "MatMul":
            return not any(i in consts for i in n.input)
        if n.op_type not in {"Mul", "Div", "Add", "Where", *_PASS}:
            return False
        v = next((i for i in n.input if i not in consts), "")
    return False


_COMPUTE = {"MatMul", "Gemm", "Conv", "LayerNormalization", "Softmax"}


def _from_inputs(name: str, consts: Consts) -> set[str]:
    """The nodes building a mask from model inputs (attention_mask), when it is built from nothing
    else: the host does it once per forward, as input preprocessing. Empty for a constant mask."""
    if name in consts:
        return set()
    found = consts.ancestry(name)
    if found is None or not found[2] or any(n.op_type in _COMPUTE for n in found[0]):
        return set()
    return {n.name for n in found[0] if not all(o in consts for o in n.output)}


def _additive_kind(m: np.ndarray) -> str:
    """An additive mask's kind: "" (all zeros), "causal" (masked exactly above the diagonal), else
    "bias" (per-element values, such as relative-position biases)."""
    m = np.asarray(m, dtype=np.float64)
    if m.size == 0 or not np.all(np.isfinite(m) | (m < 0)):
        return "bias"
    masked = m <= _MASKED
    if not masked.any():
        return "" if np.allclose(m, 0) else "bias"
    return "causal" if _is_causal(~masked) and np.allclose(m[~masked], 0) else "bias"


def _keep_kind(keep: np.ndarray) -> str:
    if keep.all():
        return ""
    return "causal" if _is_causal(keep) else "bias"


def _is_causal(keep: np.ndarray) -> bool:
    """keep[..., i, j] == (j <= i) over the last two axes (broadcast over the leading ones)."""
    if keep.ndim < 2:
        return False
    q, k = keep.shape[-2:]
    tri = np.arange(k)[None, :] <= np.arange(q)[:, None] + (k - q)  # queries are the last q positions
    return bool(np.all(keep == tri))
