"""Plain, addable statistics: per-unit busy/stall, per-layer results and the timeline.

Reports are rendered from these; nothing here is computed inside a renderer.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.precision import Precision
from nvdla_sim.system.dram import AccessMix


class Unit(enum.Enum):
    """Hardware units that report busy/stall cycles."""

    CDMA = "cdma"
    CSC = "csc"
    CMAC = "cmac"
    CACC = "cacc"
    SDP = "sdp"
    PDP = "pdp"
    CDP = "cdp"
    BDMA = "bdma"
    RUBIK = "rubik"
    DRAM = "dram"
    SRAM = "sram"
    HOST = "host"


class Bound(enum.Enum):
    """What limits a layer's cycles."""

    COMPUTE = "compute"  # MAC array busy
    CBUF = "cbuf"  # weight-load bubbles between stripes (CBUF -> CMAC bandwidth)
    SDP = "sdp"  # CACC -> SDP output drain or SDP element rate
    PDP = "pdp"  # PDP element rate (standalone pooling)
    CDP = "cdp"  # CDP element rate (local response normalisation)
    DRAM = "dram"  # memory bandwidth or latency
    RUBIK = "rubik"  # Rubik's request rate (a write request's command cycle beside its data beats)
    SERIAL = "compute+dram"  # MACs and memory in turn, neither filling the run (fetches cannot run ahead)
    HOST = "host"  # runs on the host CPU


@dataclass(frozen=True)
class UnitStats:
    """Cycles a unit spent working (busy) and waiting on a neighbour while the layer ran (stall)."""

    busy: int = 0
    stall: int = 0

    def __add__(self, other: UnitStats) -> UnitStats:
        return UnitStats(self.busy + other.busy, self.stall + other.stall)

    def to_dict(self) -> dict[str, int]:
        return {"busy": self.busy, "stall": self.stall}


@dataclass(frozen=True)
class Event:
    """One timeline interval in cycles: unit `unit` did `name` over [start, end)."""

    unit: Unit
    name: str
    start: int
    end: int

    def shifted(self, offset: int) -> Event:
        return Event(self.unit, self.name, self.start + offset, self.end + offset)


@dataclass(frozen=True)
class Traffic:
    """Bytes moved per memory, by direction."""

    dram_read: int = 0
    dram_write: int = 0
    sram_read: int = 0
    sram_write: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.dram_read + other.dram_read,
            self.dram_write + other.dram_write,
            self.sram_read + other.sram_read,
            self.sram_write + other.sram_write,
        )

    @property
    def dram_total(self) -> int:
        return self.dram_read + self.dram_write

    def to_dict(self) -> dict[str, int]:
        return {
            "dram_read": self.dram_read,
            "dram_write": self.dram_write,
            "sram_read": self.sram_read,
            "sram_write": self.sram_write,
        }


@dataclass(frozen=True)
class TimeBreakdown:
    """What a convolution's streaming time is made of (cycles): MAC work, CBUF weight-load bubbles, waits on
    memory and on SDP's drain, and the rest (layer boundaries, tails, fills)."""

    mac: int
    weight_load: int
    wait_memory: int
    wait_sdp: int
    other: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class ConvDetail:
    """What a convolution-pipeline layer's run was made of, beyond its cycles and traffic."""

    items: int  # pipeline items (a band of rows against a kernel group)
    refetch_factor: float  # bytes read / the compulsory reads (input, weights, SDP operands once): 1.0 = none
    prologue_cycles: int  # cycles before the first MAC (the first fetch exposed)
    weight_load_bubbles: int
    wait_fetch: int
    wait_sdp: int
    time_breakdown: TimeBreakdown
    sdp_elements_per_cycle: float
    data_tiles: int
    weight_tiles: int
    hardware_layers: int
    # when each hardware layer's last atom leaves (its interrupt, less the fixed completion latency)
    hardware_layer_ends: tuple[int, ...]
    weight_ring_groups: int
    weight_bytes_fetched: int  # bytes CDMA wrote into CBUF's weight banks
    data_bytes_fetched: int  # bytes CDMA wrote into CBUF's data banks
    sparse_mac_whatif: bool
    # how far the plan is proven from the best legal plan (0: the best; > 0 when the search budget ran out);
    # None when the plan was not searched
    search_proven_gap: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "search_proven_gap"}
        out["time_breakdown"] = self.time_breakdown.to_dict()
        out["hardware_layer_ends"] = list(self.hardware_layer_ends)
        if self.search_proven_gap is not None:
            out["search_proven_gap"] = self.search_proven_gap
        return out


@dataclass(frozen=True)
class StreamDetail:
    """What a standalone SDP / PDP / CDP layer's stream was made of."""

    elements: int  # elements of the input cube
    elements_per_cycle: float  # the unit's rate
    chunks: int  # RDMA chunks the stream was cut into (pipeline items)
    prologue_cycles: int  # cycles before the unit's first element (the first chunk's fetch)

    refetch_factor = 1.0  # a stream reads its input once

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CopyDetail:
    """What a copy engine's (BDMA's) transfer was: bytes read from the source and written to the destination."""

    bytes_copied: int
    prologue_cycles: int = 0

    refetch_factor = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Detail = ConvDetail | StreamDetail | CopyDetail


@dataclass(frozen=True)
class Activity:
    """A hardware layer's action counts by component, what the energy model prices (energy.model): each
    processor (nvdla_sim.processors) counts its own. Zero for a component the layer does not use."""

    macs: int = 0  # multiply-accumulates the MAC array performs
    mac_precision: Precision | None = None  # ... at this precision
    cbuf_read_bytes: int = 0  # CSC's reads of CBUF (data atoms, weights per stripe)
    cbuf_write_bytes: int = 0  # CDMA's writes into CBUF (fetched data and weights)
    cacc_partial_sums: int = 0  # CACC accumulations
    cacc_outputs: int = 0  # output elements CACC delivers
    sdp_elements: int = 0  # elements through SDP
    sdp_alu_ops: int = 0  # ALU operations per SDP element (bias, ReLU, residual add)
    sdp_mul_ops: int = 0  # multiplies per SDP element (scale, LUT interpolation, the output converter)
    pdp_elements: int = 0  # elements PDP adds into its windows
    cdp_elements: int = 0  # elements CDP normalises
    cdp_window: int = 0  # channels in each CDP window sum
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0


def _add_units(a: dict[Unit, UnitStats], b: dict[Unit, UnitStats]) -> dict[Unit, UnitStats]:
    out = dict(a)
    for u, s in b.items():
        out[u] = out.get(u, UnitStats()) + s
    return out


@dataclass(frozen=True)
class LayerStats:
    """Result of simulating one hardware layer (or, when added, a sequence of them run back to back)."""

    name: str
    cycles: int
    macs: int
    peak_macs_per_cycle: int
    traffic: Traffic
    units: dict[Unit, UnitStats]
    bound: Bound
    lower_bound_cycles: int
    events: tuple[Event, ...] = ()
    detail: Detail | None = None  # what the run was made of, by kind of layer
    plan: TilePlan | None = None  # the tile plan a convolution-pipeline layer ran
    # the DRAM clients' mix its DRAM port ran at (the dram memory model: energy prices its commands); None
    # where the memory model has one rate for any
    dram_mix: AccessMix | None = None

    @property
    def mac_utilization(self) -> float:
        """Useful MACs / (peak MACs per cycle x cycles)."""
        if self.cycles == 0 or self.peak_macs_per_cycle == 0:
            return 0.0
        return self.macs / (self.peak_macs_per_cycle * self.cycles)

    @property
    def prologue_cycles(self) -> int:
        """Cycles before the layer's first compute (0 when its detail does not say)."""
        return 0 if self.detail is None else self.detail.prologue_cycles

    @property
    def refetch_factor(self) -> float:
        """Bytes read over the compulsory reads (1.0 when its detail does not say)."""
        return 1.0 if self.detail is None else self.detail.refetch_factor

    def unit_utilization(self, unit: Unit) -> float:
        s = self.units.get(unit)
        return 0.0 if s is None or self.cycles == 0 else s.busy / self.cycles

    def __add__(self, other: LayerStats) -> LayerStats:
        """Sequential composition: `other` starts when `self` ends."""
        return LayerStats(
            name=f"{self.name}+{other.name}",
            cycles=self.cycles + other.cycles,
            macs=self.macs + other.macs,
            peak_macs_per_cycle=max(self.peak_macs_per_cycle, other.peak_macs_per_cycle),
            traffic=self.traffic + other.traffic,
            units=_add_units(self.units, other.units),
            bound=self.bound if self.cycles >= other.cycles else other.bound,
            lower_bound_cycles=self.lower_bound_cycles + other.lower_bound_cycles,
            events=self.events + tuple(e.shifted(self.cycles) for e in other.events),
            # alike runs keep their mix; runs of two mixes are priced per byte (one mix cannot stand for both)
            dram_mix=self.dram_mix if self.dram_mix == other.dram_mix else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cycles": self.cycles,
            "macs": self.macs,
            "mac_utilization": round(self.mac_utilization, 6),
            "bound": self.bound.value,
            "lower_bound_cycles": self.lower_bound_cycles,
            "traffic": self.traffic.to_dict(),
            "units": {u.value: s.to_dict() for u, s in self.units.items()},
            "detail": self.detail.to_dict() if self.detail is not None else {},
            "plan": self.plan.to_dict() if self.plan else None,
        }
