"""The mapping options a user chooses, as closed sets (enums): what the CLI offers, what the mapper and the
studies take, and what a misspelt value is refused against. Light to import (the CLI builds its choices
from it before any model code loads)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

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


class PruneKind(Option):
    """How static weights are pruned (--prune): not at all, 2:4 structured (two of every four along the
    reduction zeroed), or by magnitude (the smallest share S of each matrix zeroed)."""

    NONE = "none"
    TWO_FOUR = "2:4"
    MAGNITUDE = "magnitude"


@dataclass(frozen=True)
class Pruning:
    """A pruning of the static weights, parsed once from its spelling ("", "2:4", "magnitude:S" with
    0 <= S < 1); str() spells it back ("" for none)."""

    kind: PruneKind = PruneKind.NONE
    sparsity: float = 0.0  # the share of weights zeroed (2:4: one half)

    @classmethod
    def parse(cls, spec: Pruning | str | None) -> Pruning:
        """`spec` as a Pruning; a one-line error naming --prune and its grammar otherwise."""
        if isinstance(spec, Pruning):
            return spec
        if spec is None or spec in ("", "none"):
            return cls()
        if spec == "2:4":
            return cls(PruneKind.TWO_FOUR, 0.5)
        name, _, value = str(spec).partition(":")
        try:
            sparsity = float(value)
            ok = name == "magnitude" and 0 <= sparsity < 1
        except ValueError:
            ok = False
        if not ok:
            raise NvdlaError(f"--prune must be 2:4 or magnitude:S with 0 <= S < 1, not {spec!r}")
        return cls(PruneKind.MAGNITUDE, sparsity)

    def __bool__(self) -> bool:
        return self.kind is not PruneKind.NONE

    def __str__(self) -> str:
        if self.kind is PruneKind.MAGNITUDE:
            return f"magnitude:{self.sparsity!r}"
        return "" if self.kind is PruneKind.NONE else self.kind.value

    @property
    def density(self) -> float:
        """The share of weights kept."""
        return 1.0 - self.sparsity


NO_PRUNING = Pruning()  # frozen: one value every default shares
