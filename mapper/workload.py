"""Workload graph: framework-level ops of a transformer, as a networkx DiGraph of `Op` nodes.

Shapes are per op in token/feature terms (m tokens, k reduction, n outputs, `count` independent
instances such as batch x heads). Edges are data dependencies.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import networkx as nx


class OpKind(enum.Enum):
    MATMUL = "matmul"  # activation [m, k] x weight [k, n] (+ bias)
    CONV = "conv"  # direct convolution; attrs["conv"] holds the per-group ConvShape fields, count = batch x groups
    POOL = "pool"  # PDP pooling; attrs["pool"] is a PoolSpec, attrs["in"] = (w, h, c)
    ATTN_SCORES = "attn_scores"  # Q [m, k] x K^T [k, n] per head: both activations
    ATTN_CONTEXT = "attn_context"  # P [m, k] x V [k, n] per head: both activations
    SOFTMAX = "softmax"  # over rows of [m, n]
    LAYERNORM = "layernorm"  # over rows of [m, n]; attrs["rms"] for RMSNorm
    GELU = "gelu"
    LUT = "lut"  # other one-input nonlinearity (exp, erf, sqrt, reciprocal, tanh, sigmoid): SDP LUT
    RELU = "relu"
    ADD = "add"  # elementwise [m, n] + [m, n]
    MUL = "mul"  # elementwise [m, n] * [m, n] (gated FFN)
    SCALE = "scale"  # elementwise by a constant
    ROTARY = "rotary"  # rotary position embedding of [m, n] (n = heads x head dim)
    TRANSPOSE = "transpose"
    RESHAPE = "reshape"
    GATHER = "gather"  # embedding lookup [m] -> [m, n]
    HOST = "host"  # explicitly unsupported op run on the host (ONNX fallback)


ELEMENTWISE = {OpKind.GELU, OpKind.RELU, OpKind.ADD, OpKind.MUL, OpKind.SCALE}
# Ops whose second operand is a model parameter read as kernels (a linear layer's weight matrix, a
# convolution's filters). Attention's QK^T and PV multiply two activations and carry none.
HAS_STATIC_WEIGHTS = frozenset({OpKind.MATMUL, OpKind.CONV})


@dataclass(frozen=True)
class Op:
    name: str
    kind: OpKind
    m: int  # rows (tokens)
    n: int  # columns (features / keys)
    k: int = 0  # reduction dim (matmuls)
    count: int = 1  # independent instances (batch x heads, windows)
    group: str = "other"  # report category: matmul, attention, softmax, layernorm, elementwise, host
    attrs: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def elements(self) -> int:
        return self.m * self.n * self.count

    @property
    def weight_elems(self) -> int:
        """Elements of the op's static weights: k x n per weight matrix, times the groups of a grouped
        convolution (one filter bank per group); independent of tokens, batch and instances. 0 for ops
        without parameters, and for an ONNX ReduceMean imported as a matmul by a constant ones vector."""
        if self.kind not in HAS_STATIC_WEIGHTS or self.attrs.get("reduction"):
            return 0
        return self.k * self.n * int(self.attrs.get("groups", 1))

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n * self.count if self.k else 0


class Graph:
    """Builder over nx.DiGraph that keeps node order and names unique."""

    def __init__(self, name: str, *, batch: int, seq: int | None) -> None:
        """`batch` and `seq` are the shape the graph is built for (seq: the tokens each sequence runs, 0
        for a CNN, None where the front end cannot tell); map_model reports them, so they are recorded here,
        where the shapes are decided."""
        self.g = nx.DiGraph(name=name, batch=batch, seq=seq)

    def add(self, op: Op, *inputs: str) -> str:
        if op.name in self.g:
            raise ValueError(f"duplicate op name {op.name!r}")
        self.g.add_node(op.name, op=op, idx=len(self.g))
        for i in inputs:
            if i not in self.g:
                raise ValueError(f"op {op.name!r} depends on unknown op {i!r}")
            self.g.add_edge(i, op.name)
        return op.name


def ops_in_order(g: nx.DiGraph) -> list[Op]:
    """Dependency order, ties broken by insertion order (stable, readable reports)."""
    return [g.nodes[n]["op"] for n in nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n].get("idx", 0))]
