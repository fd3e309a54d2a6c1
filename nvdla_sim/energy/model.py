"""Energy and area of a run: the simulator's activity counts times the components' costs (components.py).

Energy of a hardware layer, per unit (pJ, NVDLA core):
- CMAC: MACs the array performs x the MAC cell's energy at the layer's precision;
- CBUF: bytes CSC reads (data atoms, weights per stripe) and CDMA writes (fetched data and weights), at
  the bank's energy per entry read / write spread over the entry's bytes;
- CACC: one adder per partial sum, an assembly-buffer read and write per atomic op (per kernel of the
  group, in units of the entry's atomic_k), the delivery buffer's write and read per output atom;
- SDP: per output element, each stage the layer uses (ALU: bias, ReLU, residual add; MUL: scale, the
  LUT's interpolation, the output converter);
- PDP / CDP: an adder per input element (pooling; CDP's window sum and a multiplier per element);
- leakage: every component's leakage over the run's time (MapResult adds it once, over the whole run).
DRAM energy (bytes read and written x the device's energy per byte) is a system figure kept apart: the
primer's power column is the NVDLA core's.

Not modelled (docs/energy.md): clock tree and wiring beyond the components' own, control and register
files, clock gating, voltage and frequency scaling, glitches; the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.energy.components import Components, Cost, components
from nvdla_sim.engine.conv import conv_activity
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.layers import CdpLayer, ConvLayer, OperandMode, PdpLayer, SdpLayer, SdpSpec

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

    @property
    def core(self) -> float:
        return sum(getattr(self, u) for u in UNITS)

    def scaled(self, n: float) -> Energy:
        return Energy(*(getattr(self, f) * n for f in (*UNITS, "dram")))

    def __add__(self, other: Energy) -> Energy:
        return Energy(*(getattr(self, f) + getattr(other, f) for f in (*UNITS, "dram")))

    def by_unit(self) -> dict[str, float]:
        return {u: getattr(self, u) for u in UNITS}


def _stage_ops(spec: SdpSpec) -> tuple[int, int]:
    """(ALU, MUL) operations per output element of the SDP stages a layer uses; the output converter is a
    multiply (scale) on every element."""
    alu = int(spec.bias is not OperandMode.NONE) + int(spec.relu) + int(spec.eltwise is not OperandMode.NONE)
    mul = 1 + int(spec.scale is not OperandMode.NONE) + int(spec.lut)
    return alu, mul


def _sdp_pj(c: Components, spec: SdpSpec, elements: int) -> float:
    alu, mul = _stage_ops(spec)
    return elements * (alu * c.sdp_alu.energy_pj + mul * c.sdp_mul.energy_pj)


def layer_energy(layer, stats: LayerStats, hw: HwConfig) -> Energy:
    """Dynamic energy of one hardware layer as simulated (`stats`, with its plan for a convolution)."""
    c = components(hw)
    dram = stats.traffic.dram_read * c.dram_read_pj_per_byte + stats.traffic.dram_write * c.dram_write_pj_per_byte
    if isinstance(layer, ConvLayer):
        if stats.plan is None:
            raise ValueError(f"{layer.name}: convolution stats without their plan")
        act = conv_activity(layer, stats.plan, hw)
        entry = hw.cbuf_entry_bytes
        written = stats.detail.get("data_bytes_fetched", 0) + stats.detail.get("weight_bytes_fetched", 0)
        k = hw.mac.atomic_k
        cacc = (
            act.partial_sums * c.cacc_adder.energy_pj
            + act.partial_sums / k * (c.cacc_assembly.energy_pj + c.cacc_assembly.write_pj)
            + act.outputs / k * (c.cacc_delivery.energy_pj + c.cacc_delivery.write_pj)
        )
        return Energy(
            cmac=layer.performed_macs * c.mac(layer.precision).energy_pj,
            cbuf=(act.cbuf_read_bytes * c.cbuf_bank.energy_pj + written * c.cbuf_bank.write_pj) / entry,
            cacc=cacc,
            sdp=_sdp_pj(c, layer.sdp, act.outputs),
            pdp=act.outputs * c.elem_adder.energy_pj if layer.pool is not None else 0.0,
            dram=dram,
        )
    if isinstance(layer, SdpLayer):
        return Energy(sdp=_sdp_pj(c, layer.sdp, layer.width * layer.height * layer.channels), dram=dram)
    if isinstance(layer, PdpLayer):
        return Energy(pdp=layer.width * layer.height * layer.channels * c.elem_adder.energy_pj, dram=dram)
    if isinstance(layer, CdpLayer):
        n = layer.width * layer.height * layer.channels
        return Energy(cdp=n * (layer.window * c.elem_adder.energy_pj + c.sdp_mul.energy_pj), dram=dram)
    raise TypeError(f"no energy model for {type(layer).__name__}")


@dataclass(frozen=True)
class Area:
    """Area (um^2) and leakage (uW) of a build, by block."""

    blocks: tuple[tuple[str, Cost, int], ...]  # (block, its component, how many)

    def by_block(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cost, n in self.blocks:
            out[name] = out.get(name, 0.0) + cost.area_um2 * n
        return out

    @property
    def total_um2(self) -> float:
        return sum(cost.area_um2 * n for _, cost, n in self.blocks)

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
    return Area(blocks)


def leakage_pj(hw: HwConfig, cycles: int) -> float:
    """Every component's leakage over `cycles` at the build's clock (uW x us = pJ)."""
    return area(hw).leak_uw * cycles / hw.clock_mhz
