"""Energy and area of a run: the simulator's activity counts times the components' costs (components.py),
with the named overheads fitted on NVIDIA's table (calibration.py, docs/energy.md).

Energy of a hardware layer, per unit (pJ, NVDLA core), each x DYNAMIC_FACTOR:
- CMAC: MACs the array performs x the MAC cell's energy at the layer's precision;
- CBUF: bytes CSC reads (data atoms, weights per stripe) and CDMA writes (fetched data and weights), at
  the bank's energy per entry read / write spread over the entry's bytes;
- CACC: one adder per partial sum, an assembly-buffer read and write per atomic op (per kernel of the
  group, in units of the entry's atomic_k), the delivery buffer's write and read per output atom;
- SDP: per output element, each stage the layer uses (ALU: bias, ReLU, residual add; MUL: scale, the
  LUT's interpolation, the output converter);
- PDP / CDP: an adder per input element (pooling; CDP's window sum and a multiplier per element).
Over a run (run_energy): the always-on power (ALWAYS_ON_FACTOR x the build's full-rate switching power:
the clock tree and ungated logic) and every component's leakage, both over the run's time.
DRAM energy (bytes read and written x the device's energy per byte, not calibrated) is a system figure
kept apart: the primer's power column is the NVDLA core's.

Not modelled (docs/energy.md): clock gating, voltage and frequency scaling, glitches; the host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.energy.calibration import ALWAYS_ON_FACTOR, DYNAMIC_FACTOR, area_overhead
from nvdla_sim.energy.components import Cost, components
from nvdla_sim.engine.stats import Activity, LayerStats
from nvdla_sim.processors import activity
from nvdla_sim.system import dram
from nvdla_sim.system.dram import AccessMix
from nvdla_sim.system.memory import memory_model

UNITS = ("cmac", "cbuf", "cacc", "sdp", "pdp", "cdp")


@dataclass(frozen=True)
class Energy:
    """Dynamic energy of NVDLA's units (pJ), and the DRAM's (a system figure, not the core's)."""

    cmac: float = 0.0
    cbuf: float = 0.0
    cacc: float = 0.0
    sdp: float = 0.0
    pdp: float = 0.0
    cdp: float = 0.0
    dram: float = 0.0

    @cached_property  # a map's energy reads it for every task of every decode step
    def core(self) -> float:
        return sum(getattr(self, u) for u in UNITS)

    def scaled(self, n: float) -> Energy:
        return Energy(*(getattr(self, f) * n for f in (*UNITS, "dram")))

    def __add__(self, other: Energy) -> Energy:
        return Energy(*(getattr(self, f) + getattr(other, f) for f in (*UNITS, "dram")))

    def by_unit(self) -> dict[str, float]:
        return {u: getattr(self, u) for u in UNITS}

    @staticmethod
    def total(parts: list[Energy]) -> Energy:
        """The sum of `parts`, field by field in their order: the same floats as adding them one by one
        (not builtins.sum, whose compensated float sum since Python 3.12 rounds differently)."""
        cmac = cbuf = cacc = sdp = pdp = cdp = dram = 0.0
        for p in parts:
            cmac += p.cmac
            cbuf += p.cbuf
            cacc += p.cacc
            sdp += p.sdp
            pdp += p.pdp
            cdp += p.cdp
            dram += p.dram
        return Energy(cmac, cbuf, cacc, sdp, pdp, cdp, dram)


def layer_energy(layer, stats: LayerStats, hw: HwConfig) -> Energy:
    """Dynamic energy of one hardware layer as simulated (`stats`, with its plan for a convolution): its
    processor's action counts (nvdla_sim.processors) priced by activity_energy; under the dram memory model
    its DRAM traffic priced by the device's commands for the mix it ran at (dram_command_energy)."""
    a = activity(layer, stats, hw)
    e = activity_energy(a, hw)
    if stats.dram_mix is None:
        return e
    return replace(e, dram=dram_command_energy(a.dram_read_bytes, a.dram_write_bytes, stats.dram_mix, hw))


def dram_command_energy(read_bytes: float, write_bytes: float, mix: AccessMix, hw: HwConfig) -> float:
    """The dram memory model's DRAM energy of a run's traffic (pJ): the device's read and write bursts and the
    activates its mix makes (dram.command_energy_pj); standby and refresh are the run's time's
    (dram_background_pj)."""
    return dram.command_energy_pj(dram.device(hw.memory.device), read_bytes, write_bytes, mix)


def dram_priced_as(hw: HwConfig) -> str:
    """What prices a run's DRAM energy: the tech's device by the byte (hwcomponents: "LPDDR4"), or the dram
    memory model's device by its commands and its standby and refresh over the run's time."""
    label = hw.memory.device_label
    return f"{label}: its commands, standby and refresh" if label else hw.tech.dram_device


def dram_background_pj(hw: HwConfig, cycles: int) -> float:
    """The DRAM's standby and refresh energy over a run's `cycles`: the memory model's background power
    (the dram model's channels' ranks in active standby and refreshing; 0 under the models that price DRAM by
    the byte) over their time."""
    return memory_model(hw).background_mw() * cycles * 1e3 / hw.clock_mhz


def activity_energy(a: Activity, hw: HwConfig) -> Energy:
    """Action counts priced: the components' energy per action x DYNAMIC_FACTOR; DRAM at the device's."""
    e = _component_energy(a, hw)
    return Energy(*(getattr(e, u) * DYNAMIC_FACTOR for u in UNITS), dram=e.dram)


def dram_energy(read_bytes: float, write_bytes: float, hw: HwConfig) -> Energy:
    """The DRAM's energy (pJ) for bytes read and written at the device's energy per byte (tech.dram_device;
    components.DRAM_PJ_PER_BYTE)."""
    c = components(hw)
    return Energy(dram=read_bytes * c.dram_read_pj_per_byte + write_bytes * c.dram_write_pj_per_byte)


def _component_energy(a: Activity, hw: HwConfig) -> Energy:
    c = components(hw)
    k = hw.mac.atomic_k
    cacc = (
        a.cacc_partial_sums * c.cacc_adder.energy_pj
        + a.cacc_partial_sums / k * (c.cacc_assembly.energy_pj + c.cacc_assembly.write_pj)
        + a.cacc_outputs / k * (c.cacc_delivery.energy_pj + c.cacc_delivery.write_pj)
    )
    return Energy(
        cmac=a.macs * c.mac(a.mac_precision).energy_pj if a.macs else 0.0,
        cbuf=(a.cbuf_read_bytes * c.cbuf_bank.energy_pj + a.cbuf_write_bytes * c.cbuf_bank.write_pj)
        / hw.cbuf_entry_bytes,
        cacc=cacc,
        sdp=a.sdp_elements * (a.sdp_alu_ops * c.sdp_alu.energy_pj + a.sdp_mul_ops * c.sdp_mul.energy_pj),
        pdp=a.pdp_elements * c.elem_adder.energy_pj,
        cdp=a.cdp_elements * (a.cdp_window * c.elem_adder.energy_pj + c.sdp_mul.energy_pj),
        dram=dram_energy(a.dram_read_bytes, a.dram_write_bytes, hw).dram,
    )


@dataclass(frozen=True)
class Area:
    """Area (um^2) and leakage (uW) of a build, by block: the components, and what they leave out (wiring,
    placement density, control, DMA engines, register files, the other memories) as AREA_OVERHEAD - 1
    times their area, the block "other"."""

    blocks: tuple[tuple[str, Cost, int], ...]  # (block, its component, how many)
    overhead: float = 1.0  # cell area / the components' area (calibration.area_overhead at the node)

    @property
    def components_um2(self) -> float:
        return sum(cost.area_um2 * n for _, cost, n in self.blocks)

    def by_block(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cost, n in self.blocks:
            out[name] = out.get(name, 0.0) + cost.area_um2 * n
        out["other"] = (self.overhead - 1) * self.components_um2
        return out

    @property
    def total_um2(self) -> float:
        return self.overhead * self.components_um2

    @property
    def leak_uw(self) -> float:
        return sum(cost.leak_uw * n for _, cost, n in self.blocks)


@lru_cache(maxsize=256)  # pure; every map prices its leakage and reports its area with it
def area(hw: HwConfig) -> Area:
    """The build's components and how many of each (MAC cells, CBUF banks, CACC buffers and adders,
    SDP/PDP/CDP lanes at their throughputs)."""
    c = components(hw)
    macs = hw.mac.atomic_c * hw.mac.atomic_k
    cells = ("cmac", c.mac_int8, macs) if c.mac_wide is None else ("cmac", c.mac_wide, macs // 2)
    sdp_lanes = hw.sdp.bs_throughput + hw.sdp.bn_throughput + hw.sdp.ew_throughput
    blocks = (
        cells,
        ("cbuf", c.cbuf_bank, hw.cbuf.bank_count),
        ("cacc", c.cacc_assembly, 1),
        ("cacc", c.cacc_delivery, 1),
        ("cacc", c.cacc_adder, hw.mac.atomic_k),
        ("sdp", c.sdp_alu, sdp_lanes),
        ("sdp", c.sdp_mul, sdp_lanes),
        ("pdp", c.elem_adder, hw.pdp.throughput),
        ("cdp", c.elem_adder, hw.cdp.throughput),
        ("cdp", c.sdp_mul, hw.cdp.throughput),
    )
    return Area(blocks, area_overhead(hw.tech.node_nm))


def leakage_pj(hw: HwConfig, cycles: int) -> float:
    """Every component's leakage over `cycles` at the build's clock (uW x us = pJ)."""
    return area(hw).leak_uw * cycles / hw.clock_mhz


@lru_cache(maxsize=256)
def full_rate_pj_per_cycle(hw: HwConfig) -> float:
    """The components' energy of one cycle with every component of area(hw) acting once (the build at its
    full rate): every MAC cell, CACC adder and SDP/PDP/CDP lane; a read and a write of each SRAM, of
    CBUF's one bank (a port's entry a cycle, not every bank)."""
    return sum((1 if name == "cbuf" else n) * (cost.energy_pj + cost.write_pj) for name, cost, n in area(hw).blocks)


def always_on_pj(hw: HwConfig, cycles: int) -> float:
    """The clock tree and ungated logic over `cycles`: ALWAYS_ON_FACTOR x the full-rate switching energy."""
    return ALWAYS_ON_FACTOR * full_rate_pj_per_cycle(hw) * cycles


def peak_power_mw(hw: HwConfig) -> float:
    """NVDLA core power with every component acting every cycle, at the build's clock."""
    per_cycle = (DYNAMIC_FACTOR + ALWAYS_ON_FACTOR) * full_rate_pj_per_cycle(hw)
    return per_cycle * hw.clock_mhz * 1e-3 + area(hw).leak_uw * 1e-3


@dataclass(frozen=True)
class RunEnergy:
    """NVDLA core energy of a run (pJ): its units' dynamic energy, the always-on power and leakage over
    its time; DRAM apart (units.dram)."""

    units: Energy
    always_on: float
    leakage: float
    dram_background: float = 0.0  # the DRAM's standby and refresh over the run's time (the dram model)

    @property
    def core(self) -> float:
        return self.units.core + self.always_on + self.leakage

    @property
    def dram(self) -> float:
        """The DRAM's energy over the run: its traffic's (per byte, or its commands') and its background's."""
        return self.units.dram + self.dram_background

    def by_unit(self) -> dict[str, float]:
        return {**self.units.by_unit(), "always_on": self.always_on, "leakage": self.leakage}


def run_energy(units: Energy, hw: HwConfig, cycles: int) -> RunEnergy:
    """A run's core energy: the units' dynamic energy (layer_energy over its layers) plus the always-on
    power and leakage over its `cycles`."""
    return RunEnergy(units, always_on_pj(hw, cycles), leakage_pj(hw, cycles), dram_background_pj(hw, cycles))
