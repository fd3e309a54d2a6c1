"""Decode an NVDLA register program into the model's hardware layers.

The register file is replayed in order; each D_OP_ENABLE write snapshots its unit's registers. The
enabled units then form operations, as the hardware chains them (unit_description.rst "Pipelines"):

- CDMA enabled: a convolution-pipeline layer (CDMA, CSC, CMAC, CACC) with SDP on the fly, and PDP on the
  fly when SDP's OUTPUT_DST is PDP;
- SDP enabled without CDMA: an offline SDP layer reading memory through SDP_RDMA (+ PDP on the fly);
- PDP enabled with OFF_FLYING: an offline PDP layer; CDP: an offline LRN layer.

Each processor's register view (nvdla_sim.processors, RegisterView) reads its own registers; this module
replays the program, takes the snapshots and asks the views in the registry's order. Registers the model
does not understand are collected by name (`Decoded.unknown`) and refused by the
strict entry points, never ignored silently. Each operation has a `describe()` dict (plain numbers,
what validation/data rows store) and `from_description()` to rebuild it without the trace files.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import HwLayer
from nvdla_sim.processors import REGISTER_VIEWS, register_view
from nvdla_sim.processors.registers import Snapshots
from nvdla_sim.registers.fields import is_known
from nvdla_sim.registers.trace_io import Program, RegWrite

Operation = typing.Union[tuple(v.op_type for v in REGISTER_VIEWS)]  # noqa: UP007 (built from the registry)


@dataclass
class Decoded:
    operations: list[Operation]
    unknown: list[str] = field(default_factory=list)  # "UNIT.REG" written but not understood
    enables: list[str] = field(default_factory=list)  # units enabled, in order


def decode_program(prog: Program) -> Decoded:
    """Decode every operation of `prog`, in the order they were enabled: register snapshots at each unit's
    op-enable write, from the register group its S_POINTER selects. A unit enabled again starts the next
    hardware layer (a program of several layers alternates the two ping-pong groups)."""
    state: dict[tuple[str, int], dict[str, int]] = {}
    group: dict[str, int] = {}
    layers: list[dict[str, dict[str, int]]] = [{}]
    unknown: list[str] = []
    enables: list[str] = []
    enable_register = {v.starts_on: v.enable_register for v in REGISTER_VIEWS}
    for c in prog.commands:
        if not isinstance(c, RegWrite):
            continue
        if not is_known(c.unit, c.reg):
            name = f"{c.unit}.{c.reg}"
            if name not in unknown:
                unknown.append(name)
        if c.reg == "S_POINTER_0":
            group[c.unit] = c.value & 1  # PRODUCER: the group CSB writes go to
            continue
        regs = state.setdefault((c.unit, group.get(c.unit, 0)), {})
        regs[c.reg] = c.value
        if c.reg == enable_register.get(c.unit, "D_OP_ENABLE_0") and c.value & 1:
            if c.unit in layers[-1]:
                layers.append({})
            layers[-1][c.unit] = dict(regs)
            enables.append(c.unit)
    if not enables:
        raise TraceError(f"{prog.name}: the program enables no unit (no D_OP_ENABLE write of 1)")
    ops: list[Operation] = []
    for snap in layers:
        enabled = set(snap)
        for (unit, _), regs in state.items():  # units never enabled still feed their neighbours (SDP_RDMA off)
            snap.setdefault(unit, dict(regs))
        ops += operations_of(prog.name, snap, enabled)
    return Decoded(ops, unknown, enables)


def operations_of(name: str, snap: Snapshots, enabled: set[str]) -> list[Operation]:
    """The operations of one layer's snapshot: each register view whose starting unit is enabled and not
    taken by an earlier view's operation (a convolution takes its SDP pass)."""
    ops: list[Operation] = []
    left = set(enabled)
    for view in REGISTER_VIEWS:
        if view.starts_on in left:
            ops += view.decode(snap, name)
            left -= set(view.takes)
    if not ops:
        raise TraceError(f"{name}: enabled units {sorted(enabled)} form no operation the model knows")
    return ops


def hw_layer(op: Operation, name: str) -> HwLayer:
    """The model's hardware layer for a decoded operation."""
    return register_view(op).hw_layer(op, name)


# ---- descriptions (plain data) ---------------------------------------------------------------------
#
# An operation's description is its dataclass as plain JSON numbers and names, tagged with its processor's
# kind; enums by value (AluOp by its register name: D_DP_*_CFG.ALU_ALGO calls ADD "SUM"), fields an
# operation lists in OMITTED_AT_DEFAULT left out at their default (as rows recorded before they were decoded).


def describe(op: Operation) -> dict[str, Any]:
    """Plain JSON-able dict of an operation, tagged with its kind."""
    return {"kind": register_view(op).kind, **_plain(op)}


def _plain(v: Any) -> Any:
    if is_dataclass(v):
        omitted = getattr(v, "OMITTED_AT_DEFAULT", ())
        out = {}
        for f in fields(v):
            x = getattr(v, f.name)
            if f.name in omitted and x == f.default:
                continue
            out[f.name] = _plain(x)
        return out
    if isinstance(v, enum.Enum):  # Precision and the register enums: their values are the stored names
        return getattr(v, "register_name", v.value)
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def from_description(d: dict[str, Any]) -> Operation:
    """Inverse of describe()."""
    d = dict(d)
    kind = d.pop("kind")
    kinds = {v.kind: v.op_type for v in REGISTER_VIEWS}
    if kind not in kinds:
        raise TraceError(f"unknown operation kind {kind!r}; known: {', '.join(kinds)}")
    return _build(kinds[kind], d)


def _build(cls: type, d: dict[str, Any] | list) -> Any:
    """A dataclass from its description (a dict; or, as older rows store small records, a list of its first
    fields in order), each field rebuilt by its annotated type."""
    names = [f.name for f in fields(cls)]
    if isinstance(d, list):
        d = dict(zip(names, d, strict=False))
    hints = _hints(cls)
    return cls(**{n: _value(hints[n], d[n], n) for n in names if n in d})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _spellings(kind: type[enum.Enum]) -> dict[str, enum.Enum]:
    """An enum's members by the spellings describe() writes (a register name where it has one)."""
    return {getattr(m, "register_name", m.value): m for m in kind}


def _value(tp: Any, v: Any, name: str) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"field {name}: a description rebuilds X or X | None, not {tp}")
        return _value(kinds[0], v, name)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], x, name) for x in v)
        if len(v) != len(args):
            raise TraceError(f"{name} holds {len(args)} values, not {len(v)} ({v!r})")
        return tuple(_value(a, x, name) for a, x in zip(args, v, strict=True))
    if is_dataclass(tp):
        return _build(tp, v)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        stored = _spellings(tp)
        if v not in stored:
            raise TraceError(f"{name} {v!r} is not one of {', '.join(map(str, stored))}")
        return stored[v]
    return v
