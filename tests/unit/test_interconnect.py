"""The interconnect between NVDLA's DBBIF and the memory controller, a system part chosen in the config
([interconnect]; nvdla_sim/system/interconnect.py): the shipped configs' direct port and a SoC fabric,
selected from a TOML file; expected values by hand from the fabric's figures."""

from __future__ import annotations

import pytest

from nvdla_sim import Precision, load_config
from nvdla_sim.config import load_config_file
from nvdla_sim.errors import ConfigError
from nvdla_sim.layers import Memory, SdpLayer, SdpSpec
from nvdla_sim.processors import simulate
from nvdla_sim.processors.bdma import BdmaLayer
from nvdla_sim.system.interconnect import DirectPort, Fabric, interconnect
from nvdla_sim.system.memory import memory_model

FULL = load_config("nv_full")


def _fabric_toml(tmp_path, body='model = "fabric"\nhop_cycles = 50\nwidth_bits = 256\n'):
    """nv_full's config as written by to_toml, its [interconnect] section replaced by `body`."""
    text = FULL.to_toml()
    direct = '[interconnect]\nmodel = "direct"\n'
    assert direct in text
    path = tmp_path / "nv_full_fabric.toml"
    path.write_text(text.replace(direct, "[interconnect]\n" + body))
    return path


def test_the_shipped_configs_are_direct():
    for name in ("nv_small", "nv_full", "nv_large", "nv_full_rtl_tb"):
        hw = load_config(name)
        assert hw.interconnect.model == "direct" and isinstance(interconnect(hw), DirectPort)
    assert memory_model(FULL).latency(Memory.DRAM) == 1200 and memory_model(FULL).bytes_per_cycle(Memory.DRAM) == 64


def test_a_fabric_from_a_toml_adds_its_hops_and_caps_the_rate(tmp_path):
    """50 clocks each way and a 256-bit path at NVDLA's clock: every DRAM read's round trip 1,200 + 2 x 50 =
    1,300 clocks, the rate min(64, 32) = 32 bytes a clock; on-chip SRAM is not behind it."""
    hw = load_config_file(_fabric_toml(tmp_path))
    assert isinstance(interconnect(hw), Fabric)
    m = memory_model(hw)
    assert (m.latency(Memory.DRAM), m.bytes_per_cycle(Memory.DRAM)) == (1300, 32)
    assert hw.to_toml() == load_config_file(_fabric_toml(tmp_path)).to_toml()  # it writes back as it reads


def test_a_copy_and_a_stream_behind_the_fabric_by_hand(tmp_path):
    """A one-atom BDMA copy: its read beat at 0, back at 1,300, its write request 17 later: 1,317 (1,217 on the
    direct port: the fabric's 100-clock round trip). Behind a 64-bit fabric (8 bytes a clock) an SDP pass over a
    4 MiB cube reads and writes 8 MiB on the one channel: 1,048,576 clocks (to 1%: the first read's latency
    and the tail)."""
    hw = load_config_file(_fabric_toml(tmp_path))
    one = BdmaLayer("copy", 32)
    assert simulate(one, hw).cycles == 1317 and simulate(one, FULL).cycles == 1217
    narrow = load_config_file(_fabric_toml(tmp_path, 'model = "fabric"\nhop_cycles = 50\nwidth_bits = 64\n'))
    layer = SdpLayer("pass", 64, 64, 1024, Precision.INT8, SdpSpec())
    assert simulate(layer, narrow, record_events=False).cycles == pytest.approx(2 * (4 << 20) / 8, rel=0.01)


def test_a_stream_behind_a_slower_path_than_its_build_sized_loses_its_pace():
    """nv_full's SDP read DMA keeps the reads its latency FIFO holds in flight, sized for the build's
    PRIMARY_MEMIF_LATENCY (1,200 clocks). Behind fabrics of one width, one with no hops and one with 50 each way
    (a read 1,300 clocks), the 4 MiB pass takes far more than the hops' 100 clocks longer: each of its reads
    waits the longer round trip with no more of them in flight."""
    layer = SdpLayer("pass", 64, 64, 1024, Precision.INT8, SdpSpec())
    cycles = [
        simulate(layer, FULL.with_values(**{"interconnect.model": "fabric", "interconnect.hop_cycles": hop,
                                            "interconnect.width_bits": 256}), record_events=False).cycles
        for hop in (0, 50)
    ]  # fmt: skip
    assert cycles[1] - cycles[0] > 100 * 100


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('model = "fabric"\nhop_cycles = 50\n', "interconnect.width_bits is required by the fabric model"),
        (
            'model = "direct"\nhop_cycles = 50\n',
            "interconnect.hop_cycles is the fabric model's; interconnect.model is 'direct'",
        ),
        ('model = "noc"\n', "interconnect.model 'noc' is not one of direct, fabric"),
        ('model = "fabric"\nhop_cycles = 50\nwidth_bits = 100\n', "interconnect.width_bits must be a power of two"),
        ('model = "fabric"\nhop_cycles = -1\nwidth_bits = 256\n', "interconnect.hop_cycles"),
        ('model = "fabric"\nhops = 5\n', "unknown key(s) ['hops'] in [interconnect]"),
    ],
)
def test_bad_interconnect_sections_are_one_line(tmp_path, body, message):
    with pytest.raises(ConfigError) as e:
        load_config_file(_fabric_toml(tmp_path, body))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_config_names_every_model_and_no_other():
    from nvdla_sim.config import INTERCONNECT_MODELS
    from nvdla_sim.system.interconnect import MODELS

    assert tuple(MODELS) == INTERCONNECT_MODELS


def test_the_fabrics_rate_reaches_the_mappers_figures(tmp_path):
    """Behind a 64-bit fabric (8 bytes a clock) the batch at which a decode step's weights stop being the limit
    is nv_full's INT8 peak (2,048 MACs a clock) x 1 byte a weight over 8 bytes a clock: 256 (32 on the direct
    port's 64 bytes); the report's DRAM bandwidth is the fabric's."""
    from nvdla_mapper.studies.generate import roofline_crossover

    narrow = load_config_file(_fabric_toml(tmp_path, 'model = "fabric"\nhop_cycles = 0\nwidth_bits = 64\n'))
    assert roofline_crossover(narrow, Precision.INT8) == 2048 / 8 and roofline_crossover(FULL, Precision.INT8) == 32


def test_a_run_states_what_timed_its_memory(tmp_path):
    """report.json's "memory" (and generate.json's, serve.json's): the memory model, its DRAM port with the
    interconnect's path (nv_full's 512-bit DBB: 64 bytes a clock, 1,200 clocks; behind the 256-bit fabric of
    50 hops each way: 32 and 1,300) and the interconnect's model."""
    from nvdla_mapper.results import memory_description

    assert memory_description(FULL) == {
        "model": "fluid", "dram_bytes_per_cycle": 64, "dram_latency_cycles": 1200, "interconnect": "direct",
        "device": "",
    }  # fmt: skip
    fabric = load_config_file(_fabric_toml(tmp_path))
    assert memory_description(fabric) == {
        "model": "fluid", "dram_bytes_per_cycle": 32, "dram_latency_cycles": 1300, "interconnect": "fabric",
        "device": "",
    }  # fmt: skip


def test_generate_and_serve_print_what_timed_their_memory(capsys):
    """The summaries of `nvdla generate` and `nvdla serve` name the memory model and the DRAM port they ran on
    (nv_full: 512 bits, 64 bytes a clock; 1,200 clocks a read), as `nvdla map` does."""
    from nvdla_cli.main import main

    line = "fluid model: DRAM 64 B a cycle, 1,200 cycles a read; interconnect direct"
    assert main(["generate", "gpt2", "--hw", "nv_full", "--prompt", "16", "--new-tokens", "2"]) == 0
    assert line in capsys.readouterr().out
    assert main(["serve", "gpt2", "--hw", "nv_full", "--requests", "2", "--prompt", "16", "--output", "2"]) == 0
    assert line in capsys.readouterr().out
