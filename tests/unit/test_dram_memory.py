"""The dram memory model (nvdla_sim.system.memory.DramMemory, issue 58): a run's DRAM port at the rate the DRAM
device model sustains for the run's mix of DMA clients. Expected rates come from DRAMsim3's runs of the same
mixes (validation/data/dramsim3_streams.json, the field's reference, built from its checkout by
validation/dram/run_dramsim3.py), and by hand from the configs' figures; the configs' errors name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_sim import ConfigError, Precision, load_config
from nvdla_sim.config import MEMORY_DEVICES, load_config_file
from nvdla_sim.engine.tile_pipeline import Buffer, Channel, Fetch, Item, items_mix
from nvdla_sim.layers import Memory, SdpLayer, SdpSpec
from nvdla_sim.processors import simulate
from nvdla_sim.system import dram
from nvdla_sim.system.memory import DramMemory, FluidMemory, memory_model
from nvdla_validation.dram.streams import DRAMSIM3_CONFIG, NVDLA_MIXES

ROWS = {
    r["name"]: r
    for r in json.loads((Path(__file__).resolve().parents[2] / "validation/data/dramsim3_streams.json").read_text())[
        "rows"
    ]
}
LPDDR4 = dram.DEVICES["LPDDR4-2400"]
SYSTEM = load_config("nv_full_lpddr4")


def _dramsim3_bus_gbs(label: str, dev: dram.DramDevice) -> float:
    """The bursts DRAMsim3's bus carried over its time for the mix's stream (GB/s, one channel)."""
    row = ROWS[f"mix_{label.replace(' ', '_')}@{DRAMSIM3_CONFIG[dev.name]}"]
    counts = row["dramsim3"]
    return (counts["num_read_cmds"] + counts["num_write_cmds"]) * dev.request_bytes / (row["cycles"] * dev.tck_ns)


@pytest.mark.parametrize("label", NVDLA_MIXES[:8])
def test_a_mixs_rate_is_dramsim3s(label):
    """The rate a mix is priced at is DRAMsim3's for the same requests (to the cycle: the issue's bar is 5%)."""
    got = dram.mix_figures(LPDDR4, dram.AccessMix.parse(label))
    assert got.gbs == pytest.approx(_dramsim3_bus_gbs(label, LPDDR4), rel=1e-9)
    assert got.efficiency == pytest.approx(got.gbs / LPDDR4.peak_gbs)


def test_a_runs_mix_from_its_items():
    """Each DMA channel's DRAM reads, SDP's operand streams and the writes, in sixteenths of their bytes; SRAM's
    traffic is not the DRAM's; a client under half a sixteenth is left out."""
    items = [
        Item("a", (Fetch(0, Buffer.CBUF_DATA, Channel.CDMA_DAT, 6000, Memory.DRAM, "d"),
                   Fetch(1, Buffer.CBUF_WEIGHT, Channel.CDMA_WT, 3000, Memory.DRAM, "w"),
                   Fetch(2, Buffer.ERDMA, Channel.ERDMA, 9000, Memory.SRAM, "s")), (0, 1, 2), (),
             write_bytes=2000, write_memory=Memory.DRAM, drain_reads=900),
        Item("b", (Fetch(3, Buffer.CBUF_DATA, Channel.CDMA_DAT, 2000, Memory.DRAM, "d"),), (3,), (),
             write_bytes=2000, write_memory=Memory.DRAM, drain_reads=100),
    ]  # fmt: skip
    # reads: CDMA data 8,000, weights 3,000, operands 1,000; writes 4,000: of 16,000, 8 + 3 + 1 + 4 sixteenths
    assert items_mix(items).label() == "R8 R3 R1 W4"
    assert dram.AccessMix.of([100, 1], 0).label() == "R16"  # 1/101 of the bytes: under half a sixteenth
    assert dram.AccessMix.of([], 0) == dram.SEQUENTIAL_READ


def test_the_ports_rate_by_hand_from_dramsim3():
    """nv_full_lpddr4: two LPDDR4-2400 channels at NVDLA's 1 GHz. A run reading and writing alike (R8 W8) gets
    twice DRAMsim3's rate for that mix a channel, in bytes a nanosecond = bytes a clock; the floors' rate is the
    two channels' peak: 2 x 128 bytes every 8 clocks of 0.83 ns = 38.554 bytes a clock, under DBBIF's 64."""
    m = memory_model(SYSTEM)
    assert isinstance(m, DramMemory)
    port = m.ports(dram.AccessMix.parse("R8 W8"))[Memory.DRAM]
    assert port.bytes_per_cycle == pytest.approx(2 * _dramsim3_bus_gbs("R8 W8", LPDDR4), rel=1e-9)
    assert m.bytes_per_cycle(Memory.DRAM) == pytest.approx(2 * 128 / (8 * 0.83))
    # a lone read: taken at clock 1, activated at 2, read 15 later, its data 17 + 8 after: 42 clocks of 0.83 ns
    assert m.latency(Memory.DRAM) == 35  # ceil(42 x 0.83) = ceil(34.86)
    assert m.bytes_per_cycle(Memory.SRAM) == 64 and m.latency(Memory.SRAM) == 128  # nv_full's SRAMIF, as it was


def test_a_dram_bound_pass_runs_at_the_devices_rate_for_its_mix():
    """An SDP pass over a 4 MiB cube on one LPDDR4-2400 channel reads and writes 4 MiB each (R8 W8): its time
    is 8 MiB at DRAMsim3's rate for that mix (to 1%: the first read's latency and the tail); the fluid port at
    the same peak and latency is faster by the mix's loss."""
    one = SYSTEM.with_values(**{"memory.channels": 1})
    layer = SdpLayer("pass", 64, 64, 1024, Precision.INT8, SdpSpec())
    cycles = simulate(layer, one, record_events=False).cycles
    assert cycles == pytest.approx(2 * (4 << 20) / _dramsim3_bus_gbs("R8 W8", LPDDR4), rel=0.01)
    fluid = load_config("nv_full").with_values(
        **{"memory.dram_bandwidth_gbs": LPDDR4.peak_gbs, "memory.dram_latency_cycles": 35}
    )
    fluid_cycles = simulate(layer, fluid, record_events=False).cycles
    assert isinstance(memory_model(fluid), FluidMemory)
    assert cycles / fluid_cycles == pytest.approx(LPDDR4.peak_gbs / _dramsim3_bus_gbs("R8 W8", LPDDR4), rel=0.01)


def test_the_known_devices_hold_what_the_config_says():
    """config.MEMORY_DEVICES (the names and GiB a channel the config checks) are the device model's."""
    assert set(MEMORY_DEVICES) == set(dram.DEVICES)
    for name, gib in MEMORY_DEVICES.items():
        assert dram.DEVICES[name].capacity_bytes == gib * 2**30


def _memory(tmp_path, body: str) -> Path:
    path = tmp_path / "system.toml"
    path.write_text(f'base = "nv_full"\nname = "system"\n[memory]\n{body}')
    return path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('model = "dram"\nchannels = 2\n', "memory.device None is not one of LPDDR4-2400, DDR4-3200"),
        ('model = "dram"\ndevice = "HBM9"\nchannels = 2\n', "memory.device 'HBM9' is not one of LPDDR4-2400"),
        ('model = "dram"\ndevice = "DDR4-3200"\nchannels = 0\n', "memory.channels must be a whole number of DRAM "
                                                                 "channels from 1 to 64, not 0"),
        ('model = "dram"\ndevice = "DDR4-3200"\n', "memory.channels must be a whole number of DRAM channels"),
        ('model = "dram"\ndevice = "DDR4-3200"\nchannels = 2\ndram_bandwidth_gbs = 20.0\n',
         "memory.dram_bandwidth_gbs is the fluid port's; under memory.model dram the bandwidth is the device's"),
        ('model = "dram"\ndevice = "DDR4-3200"\nchannels = 2\n',  # nv_full's 32 GiB
         "memory.dram_size_gib 32 is more than memory.channels (2) of DDR4-3200 hold (16 GiB)"),
        ('device = "DDR4-3200"\n', "memory.device is the dram model's; memory.model is 'fluid'"),
        ('model = "hbm"\n', "memory.model 'hbm' is not one of fluid, refresh, dram"),
    ],
)  # fmt: skip
def test_a_bad_memory_system_is_one_line_naming_the_field(tmp_path, body, message):
    path = _memory(tmp_path, body)
    with pytest.raises(ConfigError) as e:
        load_config_file(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_a_config_on_a_base_changes_only_what_it_says(tmp_path):
    """configs/nv_full_lpddr4.toml is nv_full with its [memory] model, device, channels and DRAM size."""
    full = load_config("nv_full").to_dict()
    mine = SYSTEM.to_dict()
    changed = {(sec, k) for sec, v in mine.items() if isinstance(v, dict) for k in v if v[k] != full[sec][k]}
    assert changed == {("memory", "model"), ("memory", "device"), ("memory", "channels"), ("memory", "dram_size_gib")}
    assert {k for k in mine if not isinstance(mine[k], dict) and mine[k] != full[k]} == {"name"}
    # a base given by path, relative to the file; a loop of bases and an unknown base are one line each
    _memory(tmp_path, 'model = "dram"\ndevice = "LPDDR4-2400"\nchannels = 4\ndram_size_gib = 16\n')
    (tmp_path / "a.toml").write_text('base = "system.toml"\nname = "a"\n[mac]\npipeline_cycles = 9\n')
    a = load_config_file(tmp_path / "a.toml")
    assert (a.name, a.mac.pipeline_cycles, a.memory.channels, a.memory.dram_size_gib) == ("a", 9, 4, 16)
    (tmp_path / "b.toml").write_text('base = "c.toml"\n')
    (tmp_path / "c.toml").write_text('base = "b.toml"\n')
    with pytest.raises(ConfigError, match=r"base 'b.toml' leads back to .*b.toml \(a config cannot be its own base\)"):
        load_config_file(tmp_path / "b.toml")
    (tmp_path / "d.toml").write_text('base = "nv_mega"\n')
    with pytest.raises(
        ConfigError, match=r"d.toml: base .nv_mega. is neither a shipped config \(.*nv_full, .* nor a file"
    ):
        load_config_file(tmp_path / "d.toml")


def test_a_disk_cache_keeps_values_between_processes(tmp_path, monkeypatch):
    """What a DiskCache computes is kept in $XDG_CACHE_HOME/nvdla-sim/<name>.json and read back by the next
    process (a new cache object) without computing; a file it cannot read only costs the computing."""
    from nvdla_sim.files import DiskCache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    first = DiskCache("t")
    assert first.get("k", lambda: calls.append(1) or [1.5, 2]) == [1.5, 2]
    assert first.get("k", lambda: calls.append(1) or 0) == [1.5, 2] and len(calls) == 1
    assert DiskCache("t").get("k", lambda: calls.append(1) or 0) == [1.5, 2] and len(calls) == 1
    (tmp_path / "nvdla-sim" / "t.json").write_text("{not json")
    assert DiskCache("t").get("k", lambda: 7) == 7


def test_a_dram_bound_pass_is_priced_by_its_commands_and_its_time():
    """The SDP pass above on one LPDDR4-2400 channel, by hand from the device's IDD currents (DRAMsim3's
    LPDDR4_8Gb_x16_2400.ini: four x16 devices a rank at 1.2 V, 0.83 ns clocks): each 128-byte read burst
    1.2 x 4 x 0.83 x (243 - 47) mA x 8 clocks, each write (228 - 47); each activate with its precharge
    1.2 x 4 x 0.83 x (80 x 47 - (47 x 32 + 34 x 15)) at the rate DRAMsim3 opened rows for the same mix; and
    over the pass's time, two ranks in active standby (47 mA) refreshing for 392 clocks every 8,660."""
    from nvdla_sim.energy.model import dram_background_pj, layer_energy

    one = SYSTEM.with_values(**{"memory.channels": 1})
    layer = SdpLayer("pass", 64, 64, 1024, Precision.INT8, SdpSpec())
    stats = simulate(layer, one, record_events=False)
    assert stats.dram_mix == dram.AccessMix.parse("R8 W8")
    k = 1.2 * 4 * 0.83
    n = (4 << 20) // 128  # transactions each way
    row = ROWS[f"mix_R8_W8@{DRAMSIM3_CONFIG['LPDDR4-2400']}"]["dramsim3"]
    activates = row["num_act_cmds"] / (row["num_read_cmds"] + row["num_write_cmds"])
    commands = n * k * (243 - 47) * 8 + n * k * (228 - 47) * 8 + 2 * n * activates * k * (80 * 47 - (47 * 32 + 34 * 15))
    assert layer_energy(layer, stats, one).dram == pytest.approx(commands, rel=1e-9)
    standby_mw = 2 * (k * 47 + k * (280 - 47) * 392 / 8660) / 0.83
    assert dram_background_pj(one, stats.cycles) == pytest.approx(standby_mw * stats.cycles, rel=1e-9)  # 1 ns a cycle
    # under the fluid model the bytes are priced as before (hwcomponents' LPDDR4 per byte), with no standby
    fluid = load_config("nv_full")
    assert dram_background_pj(fluid, stats.cycles) == 0
    assert simulate(layer, fluid, record_events=False).dram_mix is None
