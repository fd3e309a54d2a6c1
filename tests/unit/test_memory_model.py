"""The memory as a system part (nvdla_sim/system/memory.py): the config's [memory] model chooses how the
memories are timed; the simulator, its floors and BDMA ask the model. A second model (refresh) is selected
from a TOML file and checked by hand arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

from nvdla_sim import load_config, load_config_file
from nvdla_sim.engine import bounds
from nvdla_sim.errors import ConfigError
from nvdla_sim.layers import Memory, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import simulate
from nvdla_sim.processors.bdma import BdmaLayer
from nvdla_sim.system.memory import FluidMemory, MemoryPort, RefreshMemory, RefreshPort, memory_model

FULL = load_config("nv_full")


def _refresh_toml(tmp_path, interval_ns=3904, refresh_ns=280):
    """nv_full with LPDDR4's all-bank refresh (JESD209-4: tREFI 3.904 us; tRFCab 280 ns for 8 Gb a channel)."""
    text = FULL.to_toml()
    fluid = 'model = "fluid"\n'
    assert fluid in text
    refresh = f'model = "refresh"\nrefresh_interval_ns = {interval_ns}\nrefresh_ns = {refresh_ns}\n'
    path = tmp_path / "nv_full_refresh.toml"
    path.write_text(text.replace(fluid, refresh, 1))
    return path


def test_the_shipped_configs_are_fluid_and_ask_the_model_for_rate_and_latency():
    m = memory_model(FULL)
    assert isinstance(m, FluidMemory) and m.periodic
    # nv_full: a 512-bit DBB port (64 B a cycle), PRIMARY_MEMIF_LATENCY 1,200; a 512-bit SRAMIF, latency 128
    assert (m.bytes_per_cycle(Memory.DRAM), m.latency(Memory.DRAM)) == (64, 1200)
    assert (m.bytes_per_cycle(Memory.SRAM), m.latency(Memory.SRAM)) == (64, 128)
    ports = m.ports()
    assert set(ports) == {Memory.DRAM, Memory.SRAM} and ports[Memory.DRAM].bytes_per_cycle == 64
    small = memory_model(load_config("nv_small"))  # no SECONDARY_MEMIF: one port
    assert set(small.ports()) == {Memory.DRAM} and small.bytes_per_cycle(Memory.SRAM) == 0
    # the floor asks it: 64 KiB read and written over 64 B a cycle
    assert bounds.transfer_floor(1 << 16, 1 << 16, FULL) == 2048


def test_a_refresh_model_from_a_toml_file(tmp_path):
    hw = load_config_file(_refresh_toml(tmp_path))
    m = memory_model(hw)
    assert isinstance(m, RefreshMemory) and not m.periodic
    # nv_full's clock: 1 GHz, so 3,904 ns = 3,904 cycles and 280 ns = 280 cycles
    assert hw.clock_mhz == 1000 and (m.refresh_interval, m.refresh_cycles) == (3904, 280)
    assert isinstance(m.ports()[Memory.DRAM], RefreshPort)


def test_a_refreshing_port_by_hand():
    """64 B a cycle, a refresh every 100 cycles taking 10: 6,400 B ready at 0 fill [0, 100); 12,800 B ready
    at 0 on a fresh port (200 cycles of transfer) stop for [100, 110) and [200, 210) and end at 220; the busy
    time counts transfers only."""
    port = RefreshPort(64, 0, interval=100, blackout=10)
    assert port.reserve(0, 6400) == (0, 100)
    port = RefreshPort(64, 0, interval=100, blackout=10)
    assert port.reserve(0, 12_800) == (0, 220) and port.busy_cycles == 200 and port.last_beat == 220
    # a transfer ready inside a window starts after it
    assert port.reserve(305, 64) == (310, 311)
    fluid = MemoryPort(64, 0)
    assert fluid.reserve(0, 12_800) == (0, 200)
    # windows are booked only as far as the transfers can reach: 20 short transfers over 200 cycles leave
    # the windows at 100 and 200 (and at most the next) booked, not one more per transfer
    port = RefreshPort(64, 0, interval=100, blackout=10)
    for i in range(20):
        port.reserve(10 * i, 64)
    assert port.last_beat == 191 and [w for w in port.booked_after(195)] in ([(200, 210)], [(200, 210), (300, 310)])


def test_a_memory_bound_stream_slows_by_the_refresh_share():
    """An SDP pass over 4 MiB on nv_full behind 8 GB/s of DRAM (8 B a cycle at 1 GHz: memory-bound, SDP
    takes 16 B a cycle); with refresh the port is away 280 of every 3,904 cycles, so the stream takes
    3,904 / 3,624 = 1.0773x as long (to 1%: the first chunk's latency and the tail are not stretched)."""
    slow = FULL.with_values(**{"memory.dram_bandwidth_gbs": 8})
    refresh = slow.with_values(
        **{"memory.model": "refresh", "memory.refresh_interval_ns": 3904, "memory.refresh_ns": 280}
    )
    layer = SdpLayer("copy", 64, 64, 1024, Precision.INT8, SdpSpec())
    fluid_st = simulate(layer, slow, record_events=False)
    refresh_st = simulate(layer, refresh, record_events=False)
    assert fluid_st.traffic == refresh_st.traffic and fluid_st.bound.value == "dram"
    assert fluid_st.cycles == pytest.approx(2 * (4 << 20) / 8, rel=0.01)
    assert refresh_st.cycles / fluid_st.cycles == pytest.approx(3904 / 3624, rel=0.01)


def test_bdma_asks_the_memory_model(tmp_path):
    """A 1 MiB copy behind a 32-cycle memory (BDMA's 245 read credits then cover the round trip) reads and
    writes 2 MiB over the 64 B port: 32,768 beats, its last write request in the last beat's slot, 32,767;
    they cross 8 refreshes of 280 cycles at 3,904-cycle intervals: 32,767 + 8 x 280 = 35,007."""
    copy = BdmaLayer.of_bytes("copy", 1 << 20)
    near = {"memory.dram_latency_cycles": 32}
    assert simulate(copy, FULL.with_values(**near)).cycles == 32_767
    refresh = load_config_file(_refresh_toml(tmp_path)).with_values(**near)
    assert simulate(copy, refresh).cycles == 32_767 + 8 * 280


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"memory.model": "ramulator"}, r"memory\.model 'ramulator' is not one of fluid, refresh, dram$"),
        ({"memory.model": "refresh"}, r"memory\.model refresh needs memory\.refresh_interval_ns"),
        ({"memory.refresh_ns": 280.0}, r"memory\.refresh_ns is the refresh model's; memory\.model is 'fluid'$"),
        (
            {"memory.model": "refresh", "memory.refresh_interval_ns": 500, "memory.refresh_ns": 280},
            r"memory\.refresh_ns \(280\) must be under half of memory\.refresh_interval_ns \(500\)",
        ),
        (
            {"memory.model": "refresh", "memory.refresh_interval_ns": -1, "memory.refresh_ns": 280},
            r"memory\.refresh_interval_ns must be a finite number of ns above 0, not -1$",
        ),
    ],
)
def test_bad_memory_models_are_one_line_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        FULL.with_values(**change)


def test_the_fluid_model_is_what_the_ports_were():
    """The ports a run gets are the model's: the same rate, latency and write channel as the config's."""
    tb = load_config("nv_small")
    ports = memory_model(tb).ports()
    assert ports[Memory.DRAM].bytes_per_cycle == tb.dram_bytes_per_cycle
    assert ports[Memory.DRAM].latency == tb.memory.dram_latency_cycles
    assert (ports[Memory.DRAM].write_port is not None) == tb.memory.separate_write_channel
    assert dataclasses.replace(tb.memory, model="fluid") == tb.memory
