"""The host CPU: what the work the mapper leaves to it costs, behind one interface (HostModel), the model
chosen by a config's [host] section (config.HostConfig; docs/modelling.md, "The host").

The mapper describes each piece of host work by kind (HostOp) and size (HostWork); a host model turns it
into cycles of the accelerator's clock, hand-off included. Two models:
* roofline (RooflineHost): the larger of the work's FLOPs at `gflops` and its bytes at `mem_gbs`, plus
  one hand-off; FLOPs per element per kind from FLOPS_PER_ELEMENT (assumed figures of a scalar
  implementation; a fallback op brings its own);
* per_element (PerElementHost): a measured time per element for each kind (a benchmark of the kernels on
  the CPU at hand gives it), or the bytes at `mem_gbs` where larger, plus one hand-off.
Adding a model is one class here with `from_config` and an entry in MODELS (and its name in
config.HOST_MODELS)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from nvdla_sim.config import HostConfig, HostOp


@dataclass(frozen=True)
class HostWork:
    """One instance of a host task: `elements` it computes over, `nbytes` it reads and writes; `share` of
    the elements actually computed (a causal softmax's unmasked scores); a fallback op's FLOPs per
    element."""

    kind: HostOp
    elements: int
    nbytes: float
    share: float = 1.0
    flops_per_element: float | None = None


class HostModel(Protocol):
    """What the mapper asks of a host: one hand-off's cycles, and an instance of work's, hand-off included
    (both in cycles of the accelerator's clock); and its energy over cycles it is busy."""

    active_power_w: float  # its power while it works

    def overhead_cycles(self, clock_mhz: float) -> int: ...

    def cycles(self, work: HostWork, clock_mhz: float) -> int: ...

    def energy_pj(self, cycles: float, clock_mhz: float) -> float: ...


def active_energy_pj(power_w: float, cycles: float, clock_mhz: float) -> float:
    """`power_w` over `cycles` of a `clock_mhz` clock, in pJ (W x us = uJ)."""
    return power_w * cycles / clock_mhz * 1e6


# FLOPs per element of each kind in a scalar implementation (assumed, session 1; issue 57 measures them):
# softmax 10 per score (max, subtract, exp ~6, sum, divide), LayerNorm 8 (sum, square-sum, subtract,
# multiply, affine), an activation 20 (GELU's tanh polynomial), a multiply 1, rotary 3 (two multiplies
# and an add); gathers and copies move bytes only
FLOPS_PER_ELEMENT = {
    HostOp.SOFTMAX: 10,
    HostOp.LAYERNORM: 8,
    HostOp.ACTIVATION: 20,
    HostOp.ELEMENTWISE: 1,
    HostOp.ROTARY: 3,
    HostOp.GATHER: 0,
    HostOp.COPY: 0,
}


def _fallback_flops(work: HostWork) -> float:
    if work.flops_per_element is None:
        raise ValueError("a fallback op's host work carries its FLOPs per element")
    return work.flops_per_element


class _HandOffAndPower:
    """What both host models share: a hand-off of `overhead_us`, and energy at `active_power_w` while busy."""

    overhead_us: float
    active_power_w: float

    def overhead_cycles(self, clock_mhz: float) -> int:
        return math.ceil(self.overhead_us * clock_mhz)

    def energy_pj(self, cycles: float, clock_mhz: float) -> float:
        return active_energy_pj(self.active_power_w, cycles, clock_mhz)


@dataclass(frozen=True)
class RooflineHost(_HandOffAndPower):
    """Each instance of work at the larger of its FLOPs at `gflops` and its bytes at `mem_gbs`, plus one
    hand-off of `overhead_us` (config.HostConfig's figures)."""

    gflops: float = 20.0
    mem_gbs: float = 10.0
    overhead_us: float = 10.0
    active_power_w: float = 3.7

    @classmethod
    def from_config(cls, c: HostConfig) -> RooflineHost:
        return cls(c.gflops, c.mem_gbs, c.overhead_us, c.active_power_w)

    def flops(self, work: HostWork) -> float:
        per = _fallback_flops(work) if work.kind is HostOp.FALLBACK else FLOPS_PER_ELEMENT[work.kind] * work.share
        return per * work.elements

    def cycles(self, work: HostWork, clock_mhz: float) -> int:
        us = self.overhead_us + max(self.flops(work) / (self.gflops * 1e3), work.nbytes / (self.mem_gbs * 1e3))
        return math.ceil(us * clock_mhz)


@dataclass(frozen=True)
class PerElementHost(_HandOffAndPower):
    """Each instance of work at its kind's time per element (ns; gathers and copies none) or its bytes at
    `mem_gbs`, whichever is longer, plus one hand-off; a fallback op's FLOPs at `gflops`."""

    ns_per_element: tuple[tuple[str, float], ...]
    gflops: float = 20.0
    mem_gbs: float = 10.0
    overhead_us: float = 10.0
    active_power_w: float = 3.7

    @classmethod
    def from_config(cls, c: HostConfig) -> PerElementHost:
        return cls(c.ns_per_element, c.gflops, c.mem_gbs, c.overhead_us, c.active_power_w)

    def compute_us(self, work: HostWork) -> float:
        if work.kind is HostOp.FALLBACK:
            return _fallback_flops(work) * work.elements / (self.gflops * 1e3)
        ns = dict(self.ns_per_element).get(work.kind.value, 0.0)
        return ns * work.share * work.elements * 1e-3

    def cycles(self, work: HostWork, clock_mhz: float) -> int:
        us = self.overhead_us + max(self.compute_us(work), work.nbytes / (self.mem_gbs * 1e3))
        return math.ceil(us * clock_mhz)


MODELS: dict[str, Callable[[HostConfig], HostModel]] = {
    "roofline": RooflineHost.from_config,
    "per_element": PerElementHost.from_config,
}


def host_model(c: HostConfig) -> HostModel:
    """The host model a config's [host] section chooses."""
    return MODELS[c.model](c)
