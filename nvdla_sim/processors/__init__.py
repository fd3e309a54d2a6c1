"""NVDLA's processors, one module each, and their registry: what the simulator, the energy model, the
mapper and the program passes iterate instead of naming a processor.

Adding a processor is one module or package here (its hardware layer in nvdla_sim.layers, its timing, fixed
latencies and activity behind base.Processor, its register view behind registers.RegisterView) and one entry
in PROCESSORS.
"""

from __future__ import annotations

from typing import Union

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import Activity, LayerStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.processors.base import Processor
from nvdla_sim.processors.bdma import BDMA
from nvdla_sim.processors.cdp import CDP
from nvdla_sim.processors.conv import CONV
from nvdla_sim.processors.pdp import PDP
from nvdla_sim.processors.registers import RegisterView
from nvdla_sim.processors.rubik import RUBIK
from nvdla_sim.processors.sdp import SDP

# in the order a layer's register snapshot is decoded: CONV before SDP, as a convolution takes its SDP pass
# (RegisterView.takes) and an SDP pass enabled alone is an offline one
PROCESSORS: tuple[Processor, ...] = (CONV, SDP, PDP, CDP, BDMA, RUBIK)
_BY_LAYER: dict[type, Processor] = {p.layer_type: p for p in PROCESSORS}
AnyLayer = Union[tuple(_BY_LAYER)]  # noqa: UP007 (built from the registry)  # a layer of any processor


def _by_type(table: dict[type, object], value, what: str, kinds: str):
    """table[type(value)], or a one-line TypeError naming what would be valid."""
    found = table.get(type(value))
    if found is None:
        known = ", ".join(t.__name__ for t in table)
        raise TypeError(f"{what} a {type(value).__name__}; the {kinds} are {known}")
    return found


def processor_of(layer) -> Processor:
    """The processor that runs a hardware layer."""
    return _by_type(_BY_LAYER, layer, "no processor runs", "hardware layers")


REGISTER_VIEWS: tuple[RegisterView, ...] = tuple(p.registers for p in PROCESSORS if p.registers is not None)
_VIEW_OF_OP: dict[type, RegisterView] = {v.op_type: v for v in REGISTER_VIEWS}


def register_view(op) -> RegisterView:
    """The register view of a decoded operation's processor."""
    return _by_type(_VIEW_OF_OP, op, "no processor's registers hold", "operations")


def engines() -> tuple[str, ...]:
    """What runs hardware layers side by side: the core's pipeline and each processor beside it."""
    return tuple(dict.fromkeys(p.engine for p in PROCESSORS))


def copy_processors() -> tuple[Processor, ...]:
    """The processors that copy memory to memory, whether or not a build has them."""
    return tuple(p for p in PROCESSORS if p.copy_atom_bytes)


def copy_processor(hw: HwConfig) -> Processor | None:
    """The build's memory-to-memory copy engine, if it has one."""
    return next((p for p in copy_processors() if p.present(hw)), None)


def simulate(
    layer, hw: HwConfig, plan: TilePlan | None = None, *, record_events: bool = True, steady: SteadyState = STEADY
) -> LayerStats:
    """Simulate one hardware layer on its processor. Convolution layers use `plan` (default:
    tiling.default_plan); `steady` says how steady states are skipped (engine.steady: STEADY, or ONE_BY_ONE
    for the reference that times every item)."""
    return processor_of(layer).simulate(layer, hw, plan, record_events=record_events, steady=steady)


def fixed_latency(layer, hw: HwConfig) -> tuple[int, int, int]:
    """(launch, pipeline, completion) cycles a hardware layer adds to its streaming time, from its
    D_OP_ENABLE write to its interrupt (TimingConfig, measured on the nv_small RTL)."""
    return processor_of(layer).fixed_latency(layer, hw)


def activity(layer, stats: LayerStats, hw: HwConfig) -> Activity:
    """A simulated hardware layer's action counts, for the energy model."""
    return processor_of(layer).activity(layer, stats, hw)


__all__ = [
    "PROCESSORS",
    "REGISTER_VIEWS",
    "AnyLayer",
    "Processor",
    "activity",
    "copy_processor",
    "copy_processors",
    "engines",
    "fixed_latency",
    "processor_of",
    "register_view",
    "simulate",
]
