"""Plain, addable statistics: per-unit busy/stall, per-layer results and the timeline.

Reports are rendered from these; nothing here is computed inside a renderer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from nvdla_sim.engine.tiling import TilePlan


class Unit(enum.Enum):
    """Hardware units that report busy/stall cycles."""

    CDMA = "cdma"
    CSC = "csc"
    CMAC = "cmac"
    CACC = "cacc"
    SDP = "sdp"
    PDP = "pdp"
    CDP = "cdp"
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
    detail: dict[str, Any] = field(default_factory=dict)
    plan: TilePlan | None = None  # the tile plan a convolution-pipeline layer ran

    @property
    def mac_utilization(self) -> float:
        """Useful MACs / (peak MACs per cycle x cycles)."""
        if self.cycles == 0 or self.peak_macs_per_cycle == 0:
            return 0.0
        return self.macs / (self.peak_macs_per_cycle * self.cycles)

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
            "detail": self.detail,
            "plan": self.plan.to_dict() if self.plan else None,
        }
