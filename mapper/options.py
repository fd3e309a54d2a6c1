"""The mapping options a user chooses: closed sets (enums) for what the CLI offers and a misspelt value is
refused against, the weight treatment, and MapOptions, the one frozen, validated value that map, generate,
serve, sweep and the accuracy study pass on and that keys the pass memo. Light to import (the CLI builds
its choices from it before any model code loads)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision


class Option(enum.Enum):
    """A closed set of choices whose values are what the CLI and files spell."""

    @classmethod
    def parse(cls, value: Option | str, what: str):
        """`value` as a member (a member, or its value exactly); a one-line error naming `what` and the
        valid values otherwise (a misspelt option never maps another way)."""
        return _member(cls, value, what)

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class Placement(Option):
    """Where an op that NVDLA may or may not run goes (--softmax, --layernorm): the mapper's choice for the
    build (AUTO), NVDLA's units, or the host CPU."""

    AUTO = "auto"
    NVDLA = "nvdla"
    HOST = "host"


class InstanceDram(Option):
    """Where several NVDLA instances of a run keep their data (--tp-dram, --replicas-dram): each on a DRAM
    port of its own (HBM channels, a chip each), or all on the build's one DRAM, sharing its rate."""

    OWN = "own"
    SHARED = "shared"


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


@dataclass(frozen=True)
class WeightTreatment:
    """How static weights are stored and computed: pruning density, NVDLA compression, sparse what-if."""

    prune: Pruning = NO_PRUNING  # options.Pruning; its spelling ("", "2:4", "magnitude:S") is parsed
    compression: bool = False
    sparse_mac: bool = False  # 2:4 sparse MAC array: beyond NVDLA v1

    def __post_init__(self) -> None:
        object.__setattr__(self, "prune", Pruning.parse(self.prune))
        if self.sparse_mac and self.prune.kind is not PruneKind.TWO_FOUR:
            raise NvdlaError("--sparse-mac-whatif models a 2:4-sparse MAC array; it needs --prune 2:4")

    @property
    def density(self) -> float:
        return self.prune.density

    @property
    def active(self) -> bool:
        return bool(self.prune or self.compression or self.sparse_mac)

    def to_dict(self) -> dict:
        return {
            "prune": str(self.prune) or "none",
            "density": self.density,
            "compression": self.compression,
            "sparse_mac_whatif": self.sparse_mac,
        }


NO_TREATMENT = WeightTreatment()


class Granularity(enum.Enum):
    """The weights' quantization scales: one per tensor, or one per output channel. It decides the
    requantization's multipliers in SDP: one register value (per tensor), or a per-kernel stream that
    X2's N-RDMA reads beside the layer (per channel)."""

    PER_TENSOR = "per-tensor"
    PER_CHANNEL = "per-channel"


@dataclass(frozen=True)
class MapOptions:
    """What a map is asked besides the model and the build: the precision, where the softmax and the norms
    run (--softmax, --layernorm), the weight treatment, the KV caches' precision (None: the model's) and
    where attention against them is planned. Validated once, here: a misspelt value is a one-line error
    naming the valid ones. Frozen and hashable: the pass memo is keyed by it."""

    precision: Precision = Precision.INT8
    softmax: Placement = Placement.AUTO  # given as a Placement or its value ("auto", "nvdla", "host")
    layernorm: Placement = Placement.AUTO
    weights: WeightTreatment = NO_TREATMENT
    kv_precision: Precision | None = None
    kv_plan: KvPlan = KvPlan.BUCKET
    # the quantization recipe's weight scales (--quantize's granularity): a per-channel recipe's
    # requantization reads its multipliers per kernel (X2's N-RDMA), which the layers' timing counts
    requant: Granularity = Granularity.PER_TENSOR

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "requant", _member(Granularity, self.requant, "requant (--quantize)"))
        set_(self, "precision", _member(Precision, self.precision, "precision"))
        if self.kv_precision is not None:
            set_(self, "kv_precision", _member(Precision, self.kv_precision, "--kv-precision"))
        set_(self, "softmax", Placement.parse(self.softmax, "softmax"))
        set_(self, "layernorm", Placement.parse(self.layernorm, "layernorm"))
        set_(self, "kv_plan", KvPlan.parse(self.kv_plan, "--kv-plan"))
        if self.weights is None:
            set_(self, "weights", NO_TREATMENT)
        elif not isinstance(self.weights, WeightTreatment):
            raise NvdlaError(f"weights must be a WeightTreatment, not {type(self.weights).__name__}")

    @classmethod
    def of(cls, options: MapOptions | None = None, **given) -> MapOptions:
        """`options` (default: every default) with the fields `given` other than None: the keyword form
        map_model, new_memo and generate accept beside an options object. None means "not given", so a
        keyword cannot set a field back to None or its default: replace it in the object for that
        (dataclasses.replace(options, kv_precision=None))."""
        base = options if options is not None else cls()
        changes = {k: v for k, v in given.items() if v is not None}
        return dataclasses.replace(base, **changes) if changes else base

    @property
    def cache_precision(self) -> Precision:
        """The KV caches' precision: the what-if's, or the model's."""
        return self.kv_precision or self.precision


def _member(kind: type[enum.Enum], value, what: str):
    """`value` as a member of `kind` (a member, or its value exactly); a one-line error naming `what` and
    the valid values otherwise."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise NvdlaError(f"{what} {value!r}: valid are {', '.join(m.value for m in kind)}") from None
