"""Workload graph: framework-level ops of a transformer, as a networkx DiGraph of `Op` nodes.

Shapes are per op in token/feature terms (m tokens, k reduction, n outputs, `count` independent
instances such as batch x heads). Edges are data dependencies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvShape, PoolSpec


class OpKind(enum.Enum):
    MATMUL = "matmul"  # activation [m, k] x weight [k, n] (+ bias)
    CONV = "conv"  # direct convolution (ConvAttrs: the per-group ConvShape); count = batch x groups
    POOL = "pool"  # PDP pooling (PoolAttrs)
    ATTN_SCORES = "attn_scores"  # Q [m, k] x K^T [k, n] per head: both activations
    ATTN_CONTEXT = "attn_context"  # P [m, k] x V [k, n] per head: both activations
    SOFTMAX = "softmax"  # over rows of [m, n]
    LAYERNORM = "layernorm"  # over rows of [m, n] (NormAttrs.rms for RMSNorm)
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


# Ops whose second operand is a model parameter read as kernels (a linear layer's weight matrix, a
# convolution's filters). Attention's QK^T and PV multiply two activations and carry none.
HAS_STATIC_WEIGHTS = frozenset({OpKind.MATMUL, OpKind.CONV})


# ---- op attributes: one frozen type per op kind ------------------------------------------------------
# A front end gives an op its attributes as the kind's type (or as a dict of its fields, converted here);
# a field the type lacks is an error naming the op, so a typo cannot silently take a default.


@dataclass(frozen=True)
class NoAttrs:
    """Kinds without attributes (elementwise add/mul/scale, ReLU, GELU, reshape, gather)."""


class MatmulRole(enum.Enum):
    """What a matmul is in a transformer. The front ends give each matmul op its role (MatmulAttrs.role;
    QK^T and PV by their kinds: Op.matmul_role) and the reference forward passes each matmul site theirs,
    so the accuracy study finds the hardware layers the mapper lowers a site to, attributes errors, groups
    SmoothQuant's factors and picks the activation operands by the role, never by parsing a name."""

    EMBEDDING = "embedding"  # the ViT's patch embedding
    QUERY = "query"  # the q, k and v projections (they read one LayerNorm output)
    KEY = "key"
    VALUE = "value"
    SCORES = "scores"  # QK^T of one sequence and head: its second operand the keys, an activation
    CONTEXT = "context"  # PV: its first operand the softmax's probabilities, its second the values
    OUTPUT = "output"  # the attention's output projection (reads the context)
    FFN_UP = "ffn_up"  # the FFN's first layer (reads a LayerNorm output; its activation behind it)
    FFN_GATE = "ffn_gate"  # a gated FFN's linear branch (T5 v1.1, LLaMA: multiplied into the activation)
    FFN_DOWN = "ffn_down"  # the FFN's second layer (reads the activation)
    CLASSIFIER = "classifier"  # the ViT's head, on the final LayerNorm's CLS output
    LM_HEAD = "lm_head"  # the GPT's LM head, tied to the token embedding table

    @property
    def attention_product(self) -> bool:
        """QK^T or PV: both operands are activations (on NVDLA the second is read as kernels)."""
        return self in (MatmulRole.SCORES, MatmulRole.CONTEXT)


@dataclass(frozen=True)
class MatmulAttrs:
    bias: bool = True  # the linear layer adds a bias (SDP's per-kernel operand)
    feeds_context: bool = False  # V of an attention: computed transposed for P V where BDMA can re-layout
    im2col: bool = False  # patch extraction on the host first (a stride past the conv core's field)
    reduction: bool = False  # an ONNX ReduceMean as a matmul by a ones vector: no model weights
    role: MatmulRole | None = None  # what the matmul is in its transformer block, where the front end knows


@dataclass(frozen=True)
class ConvAttrs:
    conv: ConvShape  # per group
    groups: int = 1  # grouped convolution: count = batch x groups, one filter bank per group
    bn: bool = False  # a folded BatchNorm (SDP's per-kernel scale)
    image_input: bool = False  # the conv core's image-input mode (pixel formats, <= 4 channels)


@dataclass(frozen=True)
class PoolAttrs:
    pool: PoolSpec
    input_whc: tuple[int, int, int]  # input width, height, channels


@dataclass(frozen=True)
class AttentionAttrs:
    """QK^T (ATTN_SCORES) and PV (ATTN_CONTEXT)."""

    causal: bool = False  # keys after the query are masked (tiles above the diagonal skipped)
    bias: bool = False  # a per-element operand on the scores (relative-position bias, a padding mask)
    scale: float = 1.0  # on the scores (1/sqrt(head dim); T5: 1)
    kv_share: int = 1  # query heads per K/V head (grouped-query attention)
    kv_groups: int = 1  # decode: K/V groups of a sequence (the cached kernels the heads are read against)
    cached: bool = False  # decode: K (V^T) read from the cache in weight format
    relative_shift: bool = False  # XLNet's q . k_r scores, shifted relative to the query
    # PV: V's projection has a bias, which PV's SDP adds where V is computed transposed (lower_context); the
    # front end that marks V feeds_context says so
    value_bias: bool = False


@dataclass(frozen=True)
class SoftmaxAttrs:
    causal: bool = False


@dataclass(frozen=True)
class NormAttrs:
    rms: bool = False  # RMSNorm (no mean subtraction), else LayerNorm


@dataclass(frozen=True)
class LutAttrs:
    func: str  # the one-input function the SDP LUT computes: tanh, SiLU, Erf, Exp, ...


@dataclass(frozen=True)
class RotaryAttrs:
    head_dim: int


class Relayout(enum.Enum):
    """What a TRANSPOSE moves, which decides the engine that can move it."""

    TRANSPOSE = "transpose"  # a transposed tensor
    ROLL = "roll"  # Swin's cyclic shift of the window grid: whole pixels
    K_APPEND = "k_append"  # the new key into the weight-format K cache: one kernel more
    V_CACHE = "v_cache"  # V into the V^T cache at once (T5's prefill): an element transpose
    V_APPEND = "v_append"  # the new value into the cached V^T: keys are its channels, an element scatter


@dataclass(frozen=True)
class LayoutAttrs:
    relayout: Relayout = Relayout.TRANSPOSE


@dataclass(frozen=True)
class HostAttrs:
    op_type: str = ""  # the ONNX op the host runs (fallback)
    note: str = ""  # why it runs on the host, for the report
    flops_per_elem: float = 4.0


ATTRS: dict[OpKind, type] = {
    OpKind.MATMUL: MatmulAttrs,
    OpKind.CONV: ConvAttrs,
    OpKind.POOL: PoolAttrs,
    OpKind.ATTN_SCORES: AttentionAttrs,
    OpKind.ATTN_CONTEXT: AttentionAttrs,
    OpKind.SOFTMAX: SoftmaxAttrs,
    OpKind.LAYERNORM: NormAttrs,
    OpKind.LUT: LutAttrs,
    OpKind.ROTARY: RotaryAttrs,
    OpKind.TRANSPOSE: LayoutAttrs,
    OpKind.HOST: HostAttrs,
}


@dataclass(frozen=True)
class Block:
    """The model block an op belongs to, as its front end built it. Repeated blocks of one kind share a
    family and differ by index (a transformer's `layer` 0..11 or `dec` 0..5, a ResNet stage's `conv3_` 1..4);
    a one-off part (the embedding, the head, a final norm) is a block of its own with no index. Reports add
    cycles by block (MapResult.by_block) and merge alike rows of a family (results.group_layers), and the
    step template maps each block's ops onto its one-block step's by their roles (Op.role)."""

    family: str
    index: int | None = None

    @property
    def name(self) -> str:
        """The block as reports name it: `layer3`, `conv3_2`, `embed`."""
        return self.family if self.index is None else f"{self.family}{self.index}"

    def role(self, name: str) -> str | None:
        """What `name` (an op's, or a task's made from it) is within the block, alike in every block of the
        family: `.ffn2` of `layer3.ffn2`, `/attn/MatMul` of an ONNX `/h.3/attn/MatMul`, "" for the block's
        own op (`merge1`); None for a name not under the block's."""
        if not name.startswith(self.name):
            return None
        rest = name[len(self.name) :]
        return rest if rest[:1] in ("", ".", "/") else None


@dataclass(frozen=True)
class Op:
    name: str
    kind: OpKind
    m: int  # rows (tokens)
    n: int  # columns (features / keys)
    k: int = 0  # reduction dim (matmuls)
    count: int = 1  # independent instances (batch x heads, windows)
    group: str = "other"  # report category: matmul, attention, softmax, layernorm, elementwise, host
    attrs: Any = field(default=None, hash=False, compare=False)  # ATTRS[kind] (a dict of its fields is converted)
    model_macs: int | None = None  # the model's own MACs where the op's shape overstates them (banded attention)
    # the model block it belongs to (Block); without one given, a block of its own under its name. Graph.block
    # gives the ops a front end adds inside it theirs; their names then start with the block's name
    block: Block | None = None

    def __post_init__(self) -> None:
        if self.block is None:
            object.__setattr__(self, "block", Block(self.name))
        kind_attrs = ATTRS.get(self.kind, NoAttrs)
        attrs = {} if self.attrs is None else self.attrs
        if isinstance(attrs, dict):
            names = {f.name for f in dataclasses.fields(kind_attrs)}
            unknown = sorted(set(attrs) - names)
            if unknown:
                valid = ", ".join(sorted(names)) or "none"
                raise NvdlaError(
                    f"op {self.name!r} ({self.kind.value}): unknown attribute(s) {unknown}; valid: {valid}"
                )
            try:
                attrs = kind_attrs(**attrs)
            except TypeError as e:
                raise NvdlaError(f"op {self.name!r} ({self.kind.value}): {e}") from None
        elif not isinstance(attrs, kind_attrs):
            raise NvdlaError(
                f"op {self.name!r} ({self.kind.value}): attributes must be {kind_attrs.__name__}, "
                f"not {type(attrs).__name__}"
            )
        object.__setattr__(self, "attrs", attrs)

    @property
    def elements(self) -> int:
        return self.m * self.n * self.count

    @property
    def role(self) -> str | None:
        """The op's place within its block (Block.role; a front end names a block's ops under the block's
        name, and Graph.block checks it)."""
        return self.block.role(self.name)

    @property
    def matmul_role(self) -> MatmulRole | None:
        """What a matmul op is in its transformer block: QK^T and PV by their kinds, a matmul by the role
        its front end gave it (None: not known, as for a CNN's or an imported graph's unnamed layers)."""
        if self.kind is OpKind.ATTN_SCORES:
            return MatmulRole.SCORES
        if self.kind is OpKind.ATTN_CONTEXT:
            return MatmulRole.CONTEXT
        return self.attrs.role if self.kind is OpKind.MATMUL else None

    @property
    def weight_elems(self) -> int:
        """Elements of the op's static weights: k x n per weight matrix, times the groups of a grouped
        convolution (one filter bank per group); independent of tokens, batch and instances. 0 for ops
        without parameters, and for an ONNX ReduceMean imported as a matmul by a constant ones vector."""
        if self.kind is OpKind.MATMUL:
            return 0 if self.attrs.reduction else self.k * self.n
        if self.kind is OpKind.CONV:
            return self.k * self.n * self.attrs.groups
        return 0

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n * self.count if self.k else 0

    @property
    def own_macs(self) -> int:
        """The model's multiply-accumulates of this op (no tile padding, no skipped band)."""
        return self.macs if self.model_macs is None else self.model_macs


def verify(g: nx.DiGraph) -> nx.DiGraph:
    """Check a front end's graph once: every node an Op under its own name with positive shapes, and the
    graph's batch recorded; a slip in a front end fails here, naming the op, not deep in a later pass."""
    meta = info(g)
    for name, data in g.nodes(data=True):
        op = data.get("op")
        if not isinstance(op, Op) or op.name != name:
            raise NvdlaError(f"workload graph {meta.name!r}: node {name!r} holds no Op of that name")
        if min(op.m, op.n, op.count) < 1 or op.k < 0:
            raise NvdlaError(f"op {name!r} ({op.kind.value}): shape m={op.m} n={op.n} k={op.k} count={op.count}")
    if not isinstance(meta.batch, int):
        raise NvdlaError(f"workload graph {meta.name!r}: no batch recorded")
    return g


def cache_keys(op: Op) -> int | None:
    """The keys of attention against a KV cache (a decode or chunked-prefill step's QK^T and PV read the
    cache as kernels): the dimension that grows with the cache length; None for every other op."""
    if op.kind is OpKind.ATTN_SCORES and op.attrs.cached:
        return op.n
    if op.kind is OpKind.ATTN_CONTEXT and op.attrs.cached:
        return op.k
    return None


def with_cache_keys(op: Op, keys: int) -> Op:
    """The op against `keys` cached keys (cache_keys(op) must not be None)."""
    if op.kind is OpKind.ATTN_SCORES:
        return dataclasses.replace(op, n=keys)
    return dataclasses.replace(op, k=keys)


@dataclass(frozen=True)
class WorkloadInfo:
    """What a workload graph is besides its ops: the model's name, the batch and sequence it was built for
    (seq: the tokens each sequence runs, 0 for a CNN, None where the front end cannot tell), and the ONNX
    patterns its import fused, by pattern (none for the other front ends). Held in g.graph["workload"]."""

    name: str
    batch: int
    seq: int | None
    onnx_fusions: tuple[tuple[str, int], ...] = ()

    @property
    def fusions(self) -> dict[str, int]:
        return dict(self.onnx_fusions)


def info(g: nx.DiGraph) -> WorkloadInfo:
    """A workload graph's WorkloadInfo; a one-line error for a graph no front end built."""
    found = g.graph.get("workload")
    if not isinstance(found, WorkloadInfo):
        raise NvdlaError("workload graph without its WorkloadInfo: build it with workload.Graph (a front end)")
    return found


def with_fusions(g: nx.DiGraph, fusions: dict[str, int]) -> None:
    """Record the ONNX patterns an import fused in the graph's WorkloadInfo."""
    g.graph["workload"] = dataclasses.replace(info(g), onnx_fusions=tuple(fusions.items()))


class Graph:
    """Builder over nx.DiGraph that keeps node order and names unique."""

    def __init__(self, name: str, *, batch: int, seq: int | None) -> None:
        """`batch` and `seq` are the shape the graph is built for (seq: the tokens each sequence runs, 0
        for a CNN, None where the front end cannot tell); map_model reports them, so they are recorded here,
        where the shapes are decided."""
        self.g = nx.DiGraph(workload=WorkloadInfo(name, batch, seq))
        self._block: Block | None = None

    @contextlib.contextmanager
    def block(self, family: str, index: int | None = None) -> Iterator[str]:
        """The ops added inside belong to this block (their names start with the name it yields, then a dot)."""
        if self._block is not None:
            raise ValueError(f"block {family!r} opened inside block {self._block.name!r}")
        self._block = Block(family, index)
        try:
            yield self._block.name
        finally:
            self._block = None

    def add(self, op: Op, *inputs: str) -> str:
        if op.name in self.g:
            raise ValueError(f"duplicate op name {op.name!r}")
        block = self._block
        if block is not None:
            if block.role(op.name) is None:
                raise ValueError(f"op {op.name!r} added in block {block.name!r} is not named under it")
            op = dataclasses.replace(op, block=block)
        self.g.add_node(op.name, op=op, idx=len(self.g))
        for i in inputs:
            if i not in self.g:
                raise ValueError(f"op {op.name!r} depends on unknown op {i!r}")
            self.g.add_edge(i, op.name)
        return op.name


def ops_in_order(g: nx.DiGraph) -> list[Op]:
    """Dependency order, ties broken by insertion order (stable, readable reports). When every edge runs
    from an earlier-inserted op to a later one (the front ends add an op after its inputs) that order is
    the insertion order itself, which the lexicographic sort would return; it is read off directly."""
    nodes = g.nodes
    idx = {n: d.get("idx", 0) for n, d in nodes(data=True)}
    if len(set(idx.values())) == len(idx) and all(idx[u] < idx[v] for u, v in g.edges):
        return [nodes[n]["op"] for n in sorted(idx, key=idx.__getitem__)]
    return [nodes[n]["op"] for n in nx.lexicographical_topological_sort(g, key=lambda n: nodes[n].get("idx", 0))]
