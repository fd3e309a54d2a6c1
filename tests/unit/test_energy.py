"""Energy and area (issue 28, first step): component costs against values measured with the component
library outside the project (issue 28's text), and the energy of small cases derived by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.passes import map_model
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.config import TechConfig
from nvdla_sim.energy.calibration import ALWAYS_ON_FACTOR, DYNAMIC_FACTOR
from nvdla_sim.energy.components import components
from nvdla_sim.energy.model import always_on_pj, area, layer_energy, leakage_pj
from nvdla_sim.engine.conv import conv_activity, simulate_conv
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import ConfigError

SMALL = load_config("nv_small")


def test_component_costs_are_the_librarys():
    """Measured with hwcomponents outside the project (issue 28): an 8-bit MAC with a 32-bit adder at
    0.20 pJ and 185 um^2 at 16 nm, 0.59 pJ and 369 um^2 at 28 nm; a 512 x 64-bit SRAM at 16 nm 2,552 um^2
    and 1.0 pJ per read (nv_small's CBUF bank: 512 entries of 8 bytes); LPDDR4 0.51 nJ per 64-bit access."""
    c16 = components(SMALL)
    assert c16.mac_int8.energy_pj == pytest.approx(0.20, rel=0.01)
    assert c16.mac_int8.area_um2 == pytest.approx(185, rel=0.01)
    c28 = components(dataclasses.replace(SMALL, tech=TechConfig(node_nm=28)))
    assert c28.mac_int8.energy_pj == pytest.approx(0.59, rel=0.01)
    assert c28.mac_int8.area_um2 == pytest.approx(369, rel=0.01)
    assert (SMALL.cbuf_entries_per_bank, SMALL.cbuf_entry_bytes) == (512, 8)
    assert c16.cbuf_bank.area_um2 == pytest.approx(2552, rel=0.01)
    assert c16.cbuf_bank.energy_pj == pytest.approx(1.0, rel=0.02)
    assert c16.dram_read_pj_per_byte == pytest.approx(510 / 8, rel=0.01)


def test_a_matmuls_energy_by_hand():
    """16 x 64 -> 32 on nv_small (8 x 8 INT8 MACs), one band, all kernels: 4 kernel groups x 16 pixels x 8
    channel blocks = 512 atomic ops, one stripe of 16 per group and block: 32 weight loads; CSC reads 512
    data atoms of 8 B and 32 x 8 kernels x 8 B of weights = 6,144 B; 4,096 partial sums; 512 outputs.
    CMAC energy = 32,768 MACs x the MAC's energy; CBUF = reads x read energy per entry / 8 B + the
    fetched input (1,024 B) and weights (2,048 B) x write energy per entry / 8 B; both x the fitted
    DYNAMIC_FACTOR (docs/energy.md); DRAM at the device's 64 pJ a byte, not scaled."""
    layer = ConvLayer("mm", ConvShape.matmul(16, 64, 32), Precision.INT8)
    plan = TilePlan(8, 8, layer.shape.out_h, 32)
    act = conv_activity(layer, plan, SMALL)
    assert (act.atomic_ops, act.weight_loads, act.cbuf_read_bytes, act.partial_sums, act.outputs) == (
        512, 32, 6_144, 4_096, 512,
    )  # fmt: skip
    st = simulate_conv(layer, SMALL, plan, record_events=False)
    c = components(SMALL)
    e = layer_energy(layer, st, SMALL)
    assert e.cmac == pytest.approx(16 * 64 * 32 * c.mac_int8.energy_pj * DYNAMIC_FACTOR)
    assert e.cbuf == pytest.approx((6_144 * c.cbuf_bank.energy_pj + 3_072 * c.cbuf_bank.write_pj) / 8 * DYNAMIC_FACTOR)
    reads, writes = st.traffic.dram_read, st.traffic.dram_write
    assert writes == 16 * 32 and e.dram == pytest.approx((reads + writes) * 64, rel=0.01)


def test_leakage_scales_with_time_and_area_with_the_cbuf():
    """nv_small's leakage by hand from the component table: 8 x 8 INT8 MAC cells, 32 CBUF banks, CACC's two
    buffers and 8 adders, SDP's 1 + 1 lanes (no EW) of an ALU and a multiplier, PDP's adder, CDP's adder and
    multiplier; over 1,000 cycles at 1,000 MHz (1 us): uW x us = pJ."""
    c = components(SMALL)
    leak_uw = (
        64 * c.mac_int8.leak_uw
        + 32 * c.cbuf_bank.leak_uw
        + c.cacc_assembly.leak_uw
        + c.cacc_delivery.leak_uw
        + 8 * c.cacc_adder.leak_uw
        + 2 * (c.sdp_alu.leak_uw + c.sdp_mul.leak_uw)
        + c.elem_adder.leak_uw
        + c.elem_adder.leak_uw
        + c.sdp_mul.leak_uw
    )
    assert leakage_pj(SMALL, 1_000) == pytest.approx(leak_uw, rel=1e-9)  # uW x 1 us
    assert leakage_pj(SMALL, 2_000) == pytest.approx(2 * leakage_pj(SMALL, 1_000))
    assert always_on_pj(SMALL, 2_000) == pytest.approx(2 * always_on_pj(SMALL, 1_000))
    deeper = SMALL.with_values(**{"cbuf.bank_depth": 2 * SMALL.cbuf.bank_depth})
    cbuf, cbuf2 = area(SMALL).by_block()["cbuf"], area(deeper).by_block()["cbuf"]
    assert cbuf == pytest.approx(32 * components(SMALL).cbuf_bank.area_um2)
    assert cbuf2 == pytest.approx(32 * components(deeper).cbuf_bank.area_um2) and cbuf2 > cbuf


def test_bad_technology_fields_are_named():
    with pytest.raises(ConfigError, match=r"tech.node_nm must be a number of nanometres in 5..65, not 3"):
        SMALL.with_values(**{"tech.node_nm": 3})
    with pytest.raises(ConfigError, match=r"tech.dram_device 'GDDR9' is not one of LPDDR4, LPDDR, DDR3, HBM2"):
        SMALL.with_values(**{"tech.dram_device": "GDDR9"})


def test_a_map_reports_energy_power_and_area():
    """BERT-base at 32 tokens on nv_full (1 GHz), its energy by hand from the component table (docs/energy.md):
    - CMAC: the MACs (12 blocks of Q, K, V, O, QK^T, PV and the FFN, the pooler and the classifier; no
      padding at 32 tokens) x the INT8 MAC's energy x DYNAMIC_FACTOR;
    - always-on: ALWAYS_ON_FACTOR x the build's energy a cycle with every component acting (1,024 MAC cells
      of two INT8 multipliers, one CBUF bank read and written, CACC's two buffers read and written and its
      32 adders, SDP's 16 + 16 + 4 lanes of an ALU and a multiplier, PDP's 8 adders, CDP's 8 adders and
      multipliers) over the run's cycles;
    - leakage: the same components' (16 CBUF banks) over the run: uW x us = pJ;
    - DRAM: LPDDR4's 64 pJ a byte over the bytes the rows move (layers and BDMA copies);
    - area: AREA_OVERHEAD (4.074 at 16 nm) x the components' area.
    The rows' energies add up to the run's less always-on and leakage; average power is the energy over the
    time: 1 uJ over 1e6 cycles (a millisecond) is 1 mW."""
    hw = load_config("nv_full")
    res = map_model(build_graph(PRESETS["bert-base"], seq=32), hw, precision=Precision.INT8)
    d = json.loads(json.dumps(res.to_dict()))
    en, units, cycles = d["energy"], d["energy"]["by_unit_uj"], d["total_cycles"]
    c = components(hw)
    s = 32
    macs = 12 * (4 * s * 768 * 768 + 2 * 12 * s * 64 * s + 2 * s * 768 * 3072) + 768 * 768 + 768 * 2
    assert d["hardware_macs"] == macs
    assert units["cmac"] == pytest.approx(macs * c.mac_int8.energy_pj * DYNAMIC_FACTOR * 1e-6, rel=1e-6)
    sram = (c.cbuf_bank, c.cacc_assembly, c.cacc_delivery)
    full_rate_pj = (
        1024 * c.mac_wide.energy_pj
        + sum(m.energy_pj + m.write_pj for m in sram)
        + 32 * c.cacc_adder.energy_pj
        + 36 * (c.sdp_alu.energy_pj + c.sdp_mul.energy_pj)
        + 8 * c.elem_adder.energy_pj
        + 8 * (c.elem_adder.energy_pj + c.sdp_mul.energy_pj)
    )
    assert units["always_on"] == pytest.approx(ALWAYS_ON_FACTOR * full_rate_pj * cycles * 1e-6, rel=1e-5)
    # nv_full's blocks by hand: 1024 MAC cells, 16 CBUF banks, CACC's two buffers and 32 adders, 36 SDP
    # lanes (16 + 16 + 4), 8 PDP and 8 CDP lanes
    blocks = [(1024, c.mac_wide), (16, c.cbuf_bank), (1, c.cacc_assembly), (1, c.cacc_delivery), (32, c.cacc_adder),
              (36, c.sdp_alu), (36, c.sdp_mul), (8, c.elem_adder), (8, c.elem_adder), (8, c.sdp_mul)]  # fmt: skip

    def over_blocks(attr: str) -> float:
        return sum(n * getattr(part, attr) for n, part in blocks)

    leak_uw, area_um2 = over_blocks("leak_uw"), over_blocks("area_um2")
    assert units["leakage"] == pytest.approx(leak_uw * cycles / 1000 * 1e-6, rel=1e-5)
    assert en["area_mm2"] == pytest.approx(4.074 * area_um2 * 1e-6, rel=1e-5)
    moved = sum(r["dram_read"] + r["dram_write"] for r in d["layers"])
    assert en["batch_dram_uj"] == pytest.approx(64 * moved * 1e-6, rel=1e-6)
    # every layer's row (layers.csv) carries its energy; they add up to the run's, always-on and leakage apart
    core = en["batch_core_uj"]
    layers = sum(r["core_energy_uj"] for r in d["layers"])
    assert layers == pytest.approx(core - units["leakage"] - units["always_on"], rel=1e-5)
    assert core == pytest.approx(sum(units.values()), rel=1e-5) and en["core_uj_per_inference"] == core
    assert en["average_core_power_mw"] == pytest.approx(core * 1e6 / cycles, rel=1e-4)
    assert en["tops_per_w"] == pytest.approx(2 * macs / (core * 1e-6) / 1e12, rel=1e-3) and en["calibrated"]


def test_zero_gating_whatif_saves_the_pruned_layers_multiplies():
    """Magnitude pruning at 50% on the dense array: if zero weights gated their multipliers, the layers with
    static weights would spend half their CMAC energy: half of (their performed MACs x instances x the MAC's
    energy x the dynamic factor); attention's activation matmuls are not pruned."""
    from nvdla_mapper.options import WeightTreatment
    from nvdla_sim.energy.calibration import DYNAMIC_FACTOR

    hw = load_config("nv_full")
    g = build_graph(PRESETS["bert-base"], seq=32)
    res = map_model(g, hw, precision=Precision.INT8, weights=WeightTreatment(prune="magnitude:0.5"))
    zg = res.energy().zero_gating_whatif
    # by hand: per block Q, K, V, O (32 x 768 x 768) and the FFN (32 x 768 x 3072 and back), the pooler and
    # the classifier on one token; not QK^T and PV
    macs = 12 * (4 * 32 * 768 * 768 + 2 * 32 * 768 * 3072) + 768 * 768 + 768 * 2
    expected = 0.5 * macs * components(hw).mac_int8.energy_pj * DYNAMIC_FACTOR * 1e-6
    assert zg.density == 0.5 and zg.batch_saved_uj == pytest.approx(expected, rel=1e-4)
    assert zg.batch_core_uj == pytest.approx(res.energy().batch_core_uj - zg.batch_saved_uj, rel=1e-5)
    assert map_model(g, hw, precision=Precision.INT8).energy().zero_gating_whatif is None
