"""Fusion pass: fold what follows a linear layer or convolution into its SDP (and PDP) pass.

NVDLA's convolution pipeline ends in SDP (-> PDP), so when they are the sole consumer in a chain, a
layer's activation (ReLU; GELU/tanh/... through the LUT when present), residual add (EW per-element
operand), a ReLU after that add, and (for convolutions) pooling on the fly cost no extra pass.
"""

from __future__ import annotations

import dataclasses

import networkx as nx

from nvdla_mapper.lowering.rules import Fused, LoweringContext, at_cache_precision
from nvdla_mapper.workload import OpKind
from nvdla_sim.errors import NvdlaError

_ACTS = {OpKind.GELU, OpKind.RELU, OpKind.LUT}


def _sole_successor(g: nx.DiGraph, name: str) -> str | None:
    succ = list(g.successors(name))
    return succ[0] if len(succ) == 1 else None


def fuse(g: nx.DiGraph, *, has_lut: bool) -> tuple[dict[str, Fused], set[str]]:
    """Return (layer name -> what it absorbed, names of absorbed ops)."""
    fused: dict[str, Fused] = {}
    absorbed: set[str] = set()

    def takes(name: str | None, kinds: set[OpKind], n_preds: int) -> bool:
        return (
            name is not None
            and name not in absorbed
            and g.nodes[name]["op"].kind in kinds
            and len(list(g.predecessors(name))) == n_preds
        )

    for name in g.nodes:
        op = g.nodes[name]["op"]
        if op.kind not in (OpKind.MATMUL, OpKind.CONV):
            continue
        act, residual, residual_input, pool = None, False, "", None
        cur, nxt = name, _sole_successor(g, name)
        if takes(nxt, _ACTS, 1) and (g.nodes[nxt]["op"].kind is OpKind.RELU or has_lut):
            act = g.nodes[nxt]["op"].kind
            absorbed.add(nxt)
            cur, nxt = nxt, _sole_successor(g, nxt)
        if takes(nxt, {OpKind.ADD}, 2):
            residual = True
            residual_input = next(p for p in g.predecessors(nxt) if p != cur)
            absorbed.add(nxt)
            cur, nxt = nxt, _sole_successor(g, nxt)
            if act is None and takes(nxt, {OpKind.RELU}, 1):
                act = OpKind.RELU  # ReLU after the add: same SDP pass, same element rate
                absorbed.add(nxt)
                cur, nxt = nxt, _sole_successor(g, nxt)
        if op.kind is OpKind.CONV and takes(nxt, {OpKind.POOL}, 1) and op.count == g.nodes[nxt]["op"].count:
            pool = g.nodes[nxt]["op"].attrs.pool
            absorbed.add(nxt)
        if act or residual or pool:
            fused[name] = Fused(activation=act, residual=residual, residual_input=residual_input, pool=pool)
    return fused, absorbed


# ops whose SDP can write their output at another precision for a consumer that runs at one
_CONVERTERS = {OpKind.MATMUL, OpKind.ROTARY, OpKind.ATTN_CONTEXT}


def fuse_graph(g: nx.DiGraph, ctx: LoweringContext) -> tuple[dict[str, Fused], set[str]]:
    """The fusion pass under a lowering context: `fuse`, and under the KV-cache precision what-if
    (ctx.kv_precision) the output conversions at the edges of attention: each producer of an op at the
    caches' precision (rules.at_cache_precision: the q, k and v projections or their rotary) writes its
    output at that precision, and PV writes back at the model's (SDP's output convertor, one pass where
    it can, rules.SDP_OUTPUTS)."""
    fused, absorbed = fuse(g, has_lut=ctx.has_lut)
    if ctx.cache_precision is ctx.precision:
        return fused, absorbed
    ops = {name: g.nodes[name]["op"] for name in g.nodes}
    order = [name for name, op in ops.items() if at_cache_precision(op)]  # the graph's order: stable errors
    cached = set(order)
    want: dict[str, object] = {}
    for name in order:
        for p in g.predecessors(name):
            if p not in cached:
                want[p] = ctx.cache_precision
        if any(s not in cached for s in g.successors(name)):
            want[name] = ctx.precision
    for name, prec in want.items():
        op = ops[name]
        if op.kind not in _CONVERTERS or name in absorbed:
            raise NvdlaError(
                f"the KV-cache precision what-if (--kv-precision): {name} ({op.kind.value}) feeds or follows "
                "attention, and only a matmul, rotary or PV converts its output on the way"
            )
        fused[name] = dataclasses.replace(fused.get(name, Fused()), out_precision=prec)
    return fused, absorbed
