"""Fusion pass: fold what follows a linear layer or convolution into its SDP (and PDP) pass.

NVDLA's convolution pipeline ends in SDP (-> PDP), so when they are the sole consumer in a chain, a
layer's activation (ReLU; GELU/tanh/... through the LUT when present), residual add (EW per-element
operand), a ReLU after that add, and (for convolutions) pooling on the fly cost no extra pass.
"""

from __future__ import annotations

import networkx as nx

from nvdla_mapper.lowering.rules import Fused
from nvdla_mapper.workload import OpKind

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
