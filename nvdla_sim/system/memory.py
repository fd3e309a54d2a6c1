"""The memories NVDLA's DMA engines reach (DRAM through the primary port, on-chip SRAM through the secondary),
behind one interface (MemoryModel), the model chosen by the config's [memory] model (config.MemoryConfig;
docs/modelling.md, "Memory").

A run books its transfers on the model's ports (MemoryPort: a calendar of busy intervals); the simulator's
floors and the tiling search ask the model for each memory's rate and latency rather than deriving them.
Two models:
* fluid (FluidMemory): each memory one port of `width / 8` bytes a cycle (capped by dram_bandwidth_gbs),
  a transfer filling the earliest free gaps at or after its ready time, reads completing the memory's
  latency after their last beat (back-to-back reads overlap it), writes posted. Its state repeats with the
  traffic, so a run of alike work may be fast-forwarded by whole periods (engine.tile_pipeline).
* refresh (RefreshMemory): the fluid port with the DRAM's all-bank refresh: every refresh_interval_ns
  (JEDEC tREFI) the device takes no transfer for refresh_ns (tRFCab). Its refresh windows sit at absolute
  times, so its runs are timed item by item.
* dram (DramMemory): the DRAM port's rate is what the device model (system/dram.py: banks, rows, refresh,
  turnarounds, the controller's scheduling, cycle by cycle) sustains for the run's mix of clients (its DMA
  engines' shares of reads and writes: dram.AccessMix), over the config's `channels` channels of its `device`; its
  read latency a lone read's on the device. A run asks for its ports with its mix (`ports(mix)`).
Adding a model is one class here with `from_config` and an entry in MODELS (and its name in
config.MEMORY_MODELS).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from nvdla_sim.config import HwConfig
from nvdla_sim.layers import Memory
from nvdla_sim.system import dram
from nvdla_sim.system.interconnect import interconnect


@dataclass
class MemoryPort:
    """One memory port: `bytes_per_cycle`, a read `latency`, and the calendar of its busy intervals."""

    bytes_per_cycle: float
    latency: int
    _starts: list[float] = field(default_factory=list)
    _ends: list[float] = field(default_factory=list)
    busy_cycles: float = 0.0
    bytes_moved: int = 0
    write_port: MemoryPort | None = None  # independent write channel, when the memory has one
    mix: dram.AccessMix | None = None  # the run's DRAM clients its rate is for (the dram model; None: any)

    periodic = True  # its state repeats with the traffic: whole periods of alike work may be skipped (jump)

    @property
    def last_beat(self) -> float:
        """When the last booked transfer on this port (and its write channel) ends, in cycles."""
        own = self._ends[-1] if self._ends else 0.0
        return max(own, self.write_port.last_beat if self.write_port else 0.0)

    @property
    def writes(self) -> MemoryPort:
        """The port that posted writes use: the write channel if separate, else this (shared) port."""
        return self.write_port or self

    @property
    def channel_busy(self) -> float:
        """Busy cycles of the busier channel (a shared port already holds its writes)."""
        return max(self.busy_cycles, self.write_port.busy_cycles if self.write_port else 0.0)

    def reserve(self, ready: float, nbytes: int) -> tuple[float, float]:
        """Book `nbytes` from `ready` on; return (first beat, last beat) in cycles."""
        if nbytes <= 0:
            return ready, ready
        need = nbytes / self.bytes_per_cycle
        self.busy_cycles += need
        self.bytes_moved += nbytes
        starts, ends = self._starts, self._ends
        if not ends or ready >= ends[-1]:  # past every booking: one interval at the end (as below, faster)
            end = ready + need
            if ends and abs(ends[-1] - ready) < 1e-9:
                ends[-1] = end
            else:
                starts.append(ready)
                ends.append(end)
            return ready, end
        if ready >= starts[-1]:  # inside the last booking: right after it, the interval grown (as below)
            first = ends[-1]
            ends[-1] = first + need
            return first, ends[-1]
        i = bisect.bisect_right(ends, ready)  # first interval ending after ready
        t = ready
        first: float | None = None
        new: list[tuple[float, float]] = []
        while need > 1e-12:
            if i < len(starts) and starts[i] <= t:
                t = max(t, ends[i])
                i += 1
                continue
            gap_end = starts[i] if i < len(starts) else float("inf")
            take = min(need, gap_end - t)
            if take > 0:
                new.append((t, t + take))
                if first is None:
                    first = t
                need -= take
                t += take
        for s, e in new:
            self._insert(s, e)
        assert first is not None
        return first, t

    def booked_after(self, t: float) -> list[tuple[float, float]]:
        """The booked intervals that end after `t`: all a transfer ready at `t` or later can meet."""
        i = bisect.bisect_right(self._ends, t)
        return list(zip(self._starts[i:], self._ends[i:], strict=True))

    def jump(self, t: float, by: float, *, busy: float, nbytes: int) -> None:
        """Stand for transfers of `nbytes` and `busy` cycles booked in a stretch skipped after `t` (a steady
        state repeating itself, tile_pipeline._FastForward): the intervals ending after `t` move `by` later,
        the counters grow; nothing ready before `t` + `by` is asked of the port again."""
        i = bisect.bisect_right(self._ends, t)
        self._starts[i:] = [v + by for v in self._starts[i:]]
        self._ends[i:] = [v + by for v in self._ends[i:]]
        self.busy_cycles += busy
        self.bytes_moved += nbytes

    def _insert(self, s: float, e: float) -> None:
        starts, ends = self._starts, self._ends
        i = bisect.bisect_left(starts, s)
        starts.insert(i, s)
        ends.insert(i, e)
        # merge with neighbours that touch
        if i + 1 < len(starts) and abs(starts[i + 1] - e) < 1e-9:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        if i > 0 and abs(ends[i - 1] - starts[i]) < 1e-9:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]


@dataclass
class RefreshPort(MemoryPort):
    """A port whose device refreshes: no transfer in [k x interval, k x interval + blackout) for k >= 1.
    The windows are booked ahead of the transfers that could meet them (not counted as busy)."""

    interval: float = math.inf  # cycles between refreshes (tREFI)
    blackout: float = 0.0  # cycles a refresh takes (tRFCab)
    _next_window: int = 1  # windows 1 .. _next_window - 1 are booked (window k starts at k x interval)
    _last_transfer: float = 0.0  # the end of the last transfer (windows aside)

    periodic = False  # its windows sit at absolute times

    @property
    def last_beat(self) -> float:
        return max(self._last_transfer, self.write_port.last_beat if self.write_port else 0.0)

    def reserve(self, ready: float, nbytes: int) -> tuple[float, float]:
        if nbytes <= 0:
            return ready, ready
        # past the last transfer only windows can stop this one: it ends by `bound`, having crossed at most
        # need / (interval - blackout) + 1 windows (config: blackout < interval / 2); book those before it
        start = max(ready, self._last_transfer)
        need = nbytes / self.bytes_per_cycle
        bound = start + need + (need / (self.interval - self.blackout) + 2) * self.blackout
        while self._next_window * self.interval < bound:
            at = self._next_window * self.interval
            self._insert(at, at + self.blackout)
            self._next_window += 1
        first, last = super().reserve(ready, nbytes)
        self._last_transfer = max(self._last_transfer, last)
        return first, last

    def jump(self, t: float, by: float, *, busy: float, nbytes: int) -> None:
        raise RuntimeError("a refreshing port's windows sit at absolute times: its runs are not fast-forwarded")


class MemoryModel(Protocol):
    """What the simulator asks of the memories: fresh ports for a run, and each memory's rate and latency
    (for floors, the search's bounds and the DMA queues' sizing)."""

    periodic: bool  # its ports' state repeats with the traffic: a run may skip whole periods of alike work
    mixes: bool  # its DRAM port's rate depends on the run's mix of clients (ports(mix)): a run gives it

    def ports(self, mix: dram.AccessMix | None = None) -> dict[Memory, MemoryPort]: ...

    def bytes_per_cycle(self, memory: Memory) -> float: ...

    def latency(self, memory: Memory) -> int: ...

    def dram_gbs(self, mix: dram.AccessMix | None = None) -> float: ...  # bytes a ns the DRAM gives `mix`

    def background_mw(self) -> float: ...  # the DRAM's power whatever it serves (0: priced by the byte)


@dataclass(frozen=True)
class FluidMemory:
    """Each memory one fluid port (module docstring)."""

    dram_bytes_per_cycle: float
    dram_latency: int
    sram_bytes_per_cycle: float  # 0: no SRAM
    sram_latency: int
    separate_write_channel: bool
    cycles_per_ns: float = 1.0  # NVDLA's clock

    periodic = True
    mixes = False

    @classmethod
    def from_config(cls, hw: HwConfig) -> FluidMemory:
        m = hw.memory
        sram = hw.sram_bytes_per_cycle if m.has_sram else 0.0
        path = interconnect(hw)  # between DBBIF and the DRAM's controller: its latency and rate
        dram_rate = min(hw.dram_bytes_per_cycle, path.bytes_per_cycle())
        return cls(
            dram_rate, m.dram_latency_cycles + path.added_latency(), sram, m.sram_latency_cycles,
            m.separate_write_channel, hw.clock_mhz / 1e3,
        )  # fmt: skip

    def bytes_per_cycle(self, memory: Memory) -> float:
        return self.dram_bytes_per_cycle if memory is Memory.DRAM else self.sram_bytes_per_cycle

    def dram_gbs(self, mix: dram.AccessMix | None = None) -> float:
        """The port's rate in bytes a ns, whatever asks (the fluid model's DRAM is its port)."""
        return self.dram_bytes_per_cycle * self.cycles_per_ns

    def background_mw(self) -> float:
        return 0.0  # its DRAM priced by the byte (tech.dram_device)

    def latency(self, memory: Memory) -> int:
        return self.dram_latency if memory is Memory.DRAM else self.sram_latency

    def _port(self, memory: Memory, latency: int) -> MemoryPort:
        return MemoryPort(self.bytes_per_cycle(memory), latency)

    def ports(self, mix: dram.AccessMix | None = None) -> dict[Memory, MemoryPort]:
        ports = {Memory.DRAM: self._port(Memory.DRAM, self.dram_latency)}
        if self.sram_bytes_per_cycle:
            ports[Memory.SRAM] = self._port(Memory.SRAM, self.sram_latency)
        if self.separate_write_channel:
            for memory, port in ports.items():
                port.write_port = self._port(memory, 0)
        return ports


@dataclass(frozen=True)
class RefreshMemory(FluidMemory):
    """The fluid ports with the DRAM's all-bank refresh (module docstring); SRAM does not refresh."""

    refresh_interval: float = math.inf  # cycles (tREFI at the build's clock)
    refresh_cycles: float = 0.0  # cycles (tRFCab)

    periodic = False

    @classmethod
    def from_config(cls, hw: HwConfig) -> RefreshMemory:
        m = hw.memory
        fluid = FluidMemory.from_config(hw)
        cycles_per_ns = hw.clock_mhz / 1e3
        return cls(
            **{f: getattr(fluid, f) for f in FluidMemory.__dataclass_fields__},
            refresh_interval=m.refresh_interval_ns * cycles_per_ns,
            refresh_cycles=m.refresh_ns * cycles_per_ns,
        )

    def _port(self, memory: Memory, latency: int) -> MemoryPort:
        if memory is Memory.SRAM:
            return super()._port(memory, latency)
        return RefreshPort(
            self.dram_bytes_per_cycle, latency, interval=self.refresh_interval, blackout=self.refresh_cycles
        )


@dataclass(frozen=True)
class DramMemory:
    """The DRAM port at the rate the device model sustains for the run's mix (module docstring); reads and
    writes share it (one bus: the mix's turnarounds are in its rate); SRAM as the fluid model has it."""

    device: dram.DramDevice
    channels: int  # channels of the device, the run's requests spread over them alike (address interleaving)
    cycles_per_ns: float  # NVDLA's clock
    path_bytes_per_cycle: float  # the most DBBIF and the interconnect carry a cycle
    dram_latency: int  # a lone read of a precharged bank on the device, plus the interconnect's round trip
    sram_bytes_per_cycle: float
    sram_latency: int

    periodic = True
    mixes = True

    @classmethod
    def from_config(cls, hw: HwConfig) -> DramMemory:
        m = hw.memory
        dev = dram.device(m.device)
        cycles_per_ns = hw.clock_mhz / 1e3
        path = interconnect(hw)
        width = m.dram_width_bits / 8  # DBBIF's data path a cycle
        latency = math.ceil(dram.idle_read_clocks(dev) * dev.tck_ns * cycles_per_ns) + path.added_latency()
        sram = hw.sram_bytes_per_cycle if m.has_sram else 0.0
        return cls(dev, m.channels, cycles_per_ns, min(width, path.bytes_per_cycle()), latency, sram,
                   m.sram_latency_cycles)  # fmt: skip

    def dram_gbs(self, mix: dram.AccessMix | None = None) -> float:
        """Bytes a ns the device's channels sustain for `mix` (None: one client streaming reads; the requests
        spread over the channels alike), whatever path a master has to it."""
        return dram.mix_figures(self.device, mix or dram.SEQUENTIAL_READ).gbs * self.channels

    def background_mw(self) -> float:
        """Every channel's ranks in active standby and refreshing (DramDevice.background_mw)."""
        return self.device.background_mw() * self.channels

    def dram_rate(self, mix: dram.AccessMix) -> float:
        """Bytes a cycle of NVDLA's the device's channels sustain for `mix`, within the path's width."""
        return min(self.path_bytes_per_cycle, self.dram_gbs(mix) / self.cycles_per_ns)

    def bytes_per_cycle(self, memory: Memory) -> float:
        """The most a port carries a cycle: for DRAM its channels' peak (the floors' and bounds' rate: no mix
        is faster), within the path's width."""
        if memory is Memory.SRAM:
            return self.sram_bytes_per_cycle
        return min(self.path_bytes_per_cycle, self.device.peak_gbs * self.channels / self.cycles_per_ns)

    def latency(self, memory: Memory) -> int:
        return self.dram_latency if memory is Memory.DRAM else self.sram_latency

    def ports(self, mix: dram.AccessMix | None = None) -> dict[Memory, MemoryPort]:
        """Fresh ports; the DRAM port at the rate of `mix` (a run's: None, one client streaming reads)."""
        mix = mix or dram.SEQUENTIAL_READ
        ports = {Memory.DRAM: MemoryPort(self.dram_rate(mix), self.dram_latency, mix=mix)}
        if self.sram_bytes_per_cycle:
            ports[Memory.SRAM] = MemoryPort(self.sram_bytes_per_cycle, self.sram_latency)
        return ports


MODELS = {"fluid": FluidMemory, "refresh": RefreshMemory, "dram": DramMemory}


@lru_cache(maxsize=256)  # pure; every layer's run asks
def memory_model(hw: HwConfig) -> MemoryModel:
    """The memory model the config's [memory] model names, with its figures."""
    return MODELS[hw.memory.model].from_config(hw)
