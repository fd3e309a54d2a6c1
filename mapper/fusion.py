"""Fusion pass: fold an activation or a residual add that follows a linear layer into its SDP.

NVDLA's convolution pipeline ends in SDP, so a matmul's bias, activation (ReLU, or GELU through the
LUT) and residual add (EW per-element operand) cost no extra pass when they are the sole consumer.
"""

from __future__ import annotations

import networkx as nx

from .lowering import Fused
from .workload import OpKind

_ACTS = {OpKind.GELU, OpKind.RELU}


def fuse(g: nx.DiGraph, *, has_lut: bool) -> tuple[dict[str, Fused], set[str]]:
    """Return (matmul name -> what it absorbed, names of absorbed ops)."""
    fused: dict[str, Fused] = {}
    absorbed: set[str] = set()
    for name in g.nodes:
        op = g.nodes[name]["op"]
        if op.kind is not OpKind.MATMUL:
            continue
        succ = list(g.successors(name))
        if len(succ) != 1:
            continue
        nxt = g.nodes[succ[0]]["op"]
        act, residual = None, False
        if nxt.kind in _ACTS and list(g.predecessors(succ[0])) == [name]:
            if nxt.kind is OpKind.RELU or has_lut:
                act = nxt.kind
                absorbed.add(nxt.name)
        elif nxt.kind is OpKind.ADD and len(list(g.predecessors(succ[0]))) == 2:
            residual = True
            absorbed.add(nxt.name)
        if act or residual:
            fused[name] = Fused(activation=act, residual=residual)
    return fused, absorbed
