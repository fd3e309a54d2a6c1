"""Frozen value types that are hashed often: the hash of their fields, computed once per instance.

HwConfig and ConvLayer key the simulator's caches (footprint, group_blocks, the tiling search); their
dataclass hash walks every nested field on every lookup, which took a sixth of a mapping's time. The
value is the same as the generated hash's (a tuple of the fields), stored on first use.
"""

from __future__ import annotations

import dataclasses


def field_hash(self) -> int:
    """`__hash__` for a frozen dataclass: hash(tuple of its fields), computed on first use."""
    h = self.__dict__.get("_field_hash")
    if h is None:
        h = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
        object.__setattr__(self, "_field_hash", h)
    return h


def state_without_hash(self) -> dict:
    """`__getstate__` to go with field_hash: a pickled copy (a sweep worker, another process with its own
    string-hash seed) computes its own hash."""
    return {k: v for k, v in self.__dict__.items() if k != "_field_hash"}
