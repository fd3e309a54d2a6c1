"""What lies between NVDLA's DRAM interface (DBBIF) and the memory controller, behind one interface
(Interconnect), the model chosen by the config's [interconnect] model (config.InterconnectConfig;
docs/modelling.md, "Memory"). NVDLA's side of the interface (its data width, bursts, the latency FIFOs its
build sized) is the build's, read from [memory] by the DMA clients; an interconnect says what the path adds:

* direct (DirectPort: every shipped config): the port wired to the controller, nothing added (NVIDIA's
  testbench connects DBBIF to its memory model so).
* fabric (Fabric): a SoC interconnect of hop_cycles each way, added to every read's round trip, and a data
  path of width_bits a cycle of NVDLA's clock, which caps the rate the memory gives NVDLA.

The memory model (memory.py) asks it for the DRAM port's rate and latency, so every floor, port, copy and
credit pacing that asks the memory model sees the path. On-chip SRAM (SRAMIF) is NVDLA's own second port,
not behind it. Several masters sharing the path (arbitration) come with issue 58. Adding a model is one class
here with `from_config`, `added_latency` and `bytes_per_cycle`, an entry in MODELS and its name in
config.INTERCONNECT_MODELS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from nvdla_sim.config import HwConfig


class Interconnect(Protocol):
    """What the path from DBBIF to the memory controller adds."""

    def added_latency(self) -> int: ...  # NVDLA clocks added to a read's round trip

    def bytes_per_cycle(self) -> float: ...  # the most the path carries a cycle (math.inf: no limit)


@dataclass(frozen=True)
class DirectPort:
    """DBBIF wired to the memory controller (module doc)."""

    @classmethod
    def from_config(cls, hw: HwConfig) -> DirectPort:
        return cls()

    def added_latency(self) -> int:
        return 0

    def bytes_per_cycle(self) -> float:
        return math.inf


@dataclass(frozen=True)
class Fabric:
    """A SoC interconnect between DBBIF and the controller (module doc)."""

    hop_cycles: int
    width_bytes: int

    @classmethod
    def from_config(cls, hw: HwConfig) -> Fabric:
        ic = hw.interconnect
        assert ic.hop_cycles is not None and ic.width_bits is not None  # InterconnectConfig checks them
        return cls(ic.hop_cycles, ic.width_bits // 8)

    def added_latency(self) -> int:
        return 2 * self.hop_cycles  # the request's way there and the data's way back

    def bytes_per_cycle(self) -> float:
        return float(self.width_bytes)


MODELS = {"direct": DirectPort, "fabric": Fabric}


@lru_cache(maxsize=256)
def interconnect(hw: HwConfig) -> Interconnect:
    """The interconnect the config's [interconnect] model names, with its figures."""
    return MODELS[hw.interconnect.model].from_config(hw)
