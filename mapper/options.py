"""The mapping options a user chooses, as closed sets (enums): what the CLI offers, what the mapper and the
studies take, and what a misspelt value is refused against. Light to import (the CLI builds its choices
from it before any model code loads)."""

from __future__ import annotations

import enum

from nvdla_sim.errors import NvdlaError


class Placement(enum.Enum):
    """Where an op that NVDLA may or may not run goes (--softmax, --layernorm): the mapper's choice for the
    build (AUTO), NVDLA's units, or the host CPU."""

    AUTO = "auto"
    NVDLA = "nvdla"
    HOST = "host"

    @classmethod
    def parse(cls, value: Placement | str, what: str) -> Placement:
        """`value` as a Placement (a member, or its exact name in lower case); a one-line error naming `what`
        and the valid values otherwise (a misspelt option never maps another way)."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise NvdlaError(f"{what} {value!r}: valid are {', '.join(p.value for p in cls)}") from None
