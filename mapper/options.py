"""The mapping options a user chooses, as closed sets (enums): what the CLI offers, what the mapper and the
studies take, and what a misspelt value is refused against. Light to import (the CLI builds its choices
from it before any model code loads)."""

from __future__ import annotations

import enum

from nvdla_sim.errors import NvdlaError


class Option(enum.Enum):
    """A closed set of choices whose values are what the CLI and files spell."""

    @classmethod
    def parse(cls, value: Option | str, what: str):
        """`value` as a member (a member, or its value exactly); a one-line error naming `what` and the
        valid values otherwise (a misspelt option never maps another way)."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise NvdlaError(f"{what} {value!r}: valid are {', '.join(cls.values())}") from None

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class Placement(Option):
    """Where an op that NVDLA may or may not run goes (--softmax, --layernorm): the mapper's choice for the
    build (AUTO), NVDLA's units, or the host CPU."""

    AUTO = "auto"
    NVDLA = "nvdla"
    HOST = "host"


class KvPlan(Option):
    """Where attention against a KV cache is planned (--kv-plan; lowering.rules has the measurements):
    BUCKET, its lowering and tiling chosen once at the power of two at or above its keys and run at every
    length with them (a program compiled for a range of lengths); LENGTH, searched at every length."""

    BUCKET = "bucket"
    LENGTH = "length"
