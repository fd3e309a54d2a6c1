"""The host CPU as a system part behind one interface, chosen by a config's [host] section (issue 56): the
roofline model's figures by hand, a second model selected from a TOML, and bad [host] tables refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import map_model
from nvdla_sim import ConfigError, Precision, load_config
from nvdla_sim.config import load_config_file
from nvdla_sim.system.host import HostOp, HostWork, PerElementHost, RooflineHost, host_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _with_host(tmp_path, host_table: str) -> Path:
    text = (CONFIGS / "nv_full.toml").read_text()
    p = tmp_path / "nv_full_host.toml"
    p.write_text(text.replace('name = "nv_full"', 'name = "nv_full_host"') + "\n" + host_table)
    return p


def test_the_roofline_host_by_hand():
    h = RooflineHost(gflops=20.0, mem_gbs=10.0, overhead_us=10.0)
    # a LayerNorm over 128 x 768 INT8 elements: 8 FLOPs each at 20 GFLOP/s = 39.32 us, against 196,608
    # bytes at 10 GB/s = 19.66 us; plus 10 us of hand-off: 49.32 us = 49,322 cycles at 1 GHz
    work = HostWork(HostOp.LAYERNORM, 128 * 768, 2 * 128 * 768)
    assert h.cycles(work, 1000.0) == math.ceil((10 + 8 * 128 * 768 / 20e3) * 1000)
    assert h.cycles(work, 1000.0) == 49_322
    # a copy is its bytes alone: 1 MB read and written at 10 GB/s, 100 us + 10 us
    assert h.cycles(HostWork(HostOp.COPY, 0, 1_000_000), 1000.0) == 110_000
    # a causal softmax computes its unmasked share: half of 64 x 64 scores, 10 FLOPs each
    soft = HostWork(HostOp.SOFTMAX, 64 * 64, 2 * 64 * 64, share=0.5)
    assert h.cycles(soft, 1000.0) == math.ceil((10 + max(10 * 0.5 * 4096 / 20e3, 8192 / 10e3)) * 1000)
    assert h.overhead_cycles(500.0) == 5000


def test_the_shipped_configs_keep_the_roofline_defaults():
    for name in ("nv_small", "nv_large", "nv_full"):
        assert host_model(load_config(name).host) == RooflineHost(20.0, 10.0, 10.0)


def test_a_second_host_model_from_a_toml(tmp_path):
    """per_element: the LayerNorm's 98,304 elements at 2.5 ns = 245.8 us, longer than its bytes at 10 GB/s
    (19.7 us), plus 4 us of hand-off; the config file alone chooses it."""
    p = _with_host(
        tmp_path,
        '[host]\nmodel = "per_element"\noverhead_us = 4.0\n'
        "[host.ns_per_element]\nsoftmax = 3.0\nlayernorm = 2.5\nactivation = 6.0\nelementwise = 0.5\nrotary = 1.0\n",
    )
    hw = load_config_file(p)
    assert isinstance(host_model(hw.host), PerElementHost)
    res = map_model(build_graph(preset("bert-base"), seq=128), hw, precision=Precision.INT8)
    ln = [r for r in res.results if r.task.resource is Resource.HOST and "layernorm" in r.task.note]
    assert ln and all(r.cycles_per_instance == math.ceil((4.0 + 2.5 * 128 * 768 * 1e-3) * 1000) for r in ln)
    # the same model on the roofline host: 49,322 cycles each, by hand above
    base = map_model(build_graph(preset("bert-base"), seq=128), load_config("nv_full"), precision=Precision.INT8)
    ln0 = [r for r in base.results if r.task.resource is Resource.HOST and "layernorm" in r.task.note]
    assert {r.cycles_per_instance for r in ln0} == {49_322}


@pytest.mark.parametrize(("table", "message"), [
    ('[host]\nmodel = "gpu"\n', "host.model 'gpu' is not one of roofline, per_element"),
    ('[host]\nmodel = "per_element"\n[host.ns_per_element]\nsoftmax = 1.0\n',
     "host.model per_element needs host.ns_per_element for layernorm, activation, elementwise, rotary"),
    ('[host]\n[host.ns_per_element]\nsoftmax = 1.0\n', "host.ns_per_element is the per_element model's"),
    ('[host]\nmodel = "per_element"\n[host.ns_per_element]\nsoftmaxx = 1.0\n',
     "host.ns_per_element.softmaxx is not a kind of host work"),
    ("[host]\ngflops = 0\n", "host.gflops must be a finite number above 0, not 0"),
    ("[host]\noverhead_us = -1\n", "host.overhead_us must be a finite number >= 0, not -1"),
    ("[host]\nactive_power_w = -2\n", "host.active_power_w must be a finite number >= 0, not -2"),
    ("[host]\ncores = 4\n", "unknown key(s) ['cores'] in [host]"),
])  # fmt: skip
def test_bad_host_tables_are_named(tmp_path, table, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        load_config_file(_with_host(tmp_path, table))
    assert str(e.value).startswith(str(tmp_path)) and "\n" not in str(e.value)


def test_the_cli_flags_override_the_configs_host(capsys):
    from nvdla_cli.main import main

    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--host-gflops", "40", "--top", "0"]) == 0
    faster = capsys.readouterr().out
    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--top", "0"]) == 0
    base = capsys.readouterr().out

    def host_cycles(out: str) -> int:
        line = next(x for x in out.splitlines() if x.strip().startswith("host fallback"))
        return int(line.split("tasks, ")[1].split(" cycles")[0].replace(",", ""))

    assert host_cycles(faster) < host_cycles(base)


def test_a_config_written_as_toml_loads_back_equal(tmp_path):
    """HwConfig.to_toml (the RTL bench reloads a modified config by path): every shipped config and one
    with a per_element host come back equal, sub-table included."""
    from nvdla_sim.config import builtin_configs

    per = load_config("nv_full").with_values(
        **{"host.model": "per_element", "host.ns_per_element": {k: 1.5 for k in ("softmax", "layernorm", "activation",
                                                                               "elementwise", "rotary")}}
    )  # fmt: skip
    for hw in [*(load_config(p) for p in builtin_configs().values()), per]:
        p = tmp_path / f"{hw.name}.toml"
        p.write_text(hw.to_toml())
        assert load_config_file(p) == hw


def test_the_hosts_energy_by_hand(tmp_path):
    """The host's energy is its active power over its busy time: 2 W for 1 ms (10^6 cycles at 1 GHz) is
    2 mJ. BERT-base's map on nv_full prices every host task (each LayerNorm 49,322 cycles, by hand above)
    at the config's 3.7 W; a host of 0 W costs nothing, and the NVDLA and DRAM figures do not move."""
    assert RooflineHost(active_power_w=2.0).energy_pj(1_000_000, 1000.0) == pytest.approx(2e9)
    g = build_graph(preset("bert-base"), seq=128)
    res = map_model(g, load_config("nv_full"), precision=Precision.INT8)
    host = [r for r in res.results if r.task.resource is Resource.HOST]
    ln = [r for r in host if "layernorm" in r.task.note]
    assert ln and all(r.cycles == 49_322 for r in ln)  # one instance each
    en = res.energy()
    assert en.batch_host_uj == pytest.approx(3.7 * sum(r.cycles for r in host) / 1000.0, rel=1e-9)
    assert en.host_active_power_w == 3.7 and en.host_uj_per_inference == en.batch_host_uj
    idle = map_model(
        g, load_config_file(_with_host(tmp_path, "[host]\nactive_power_w = 0\n")), precision=Precision.INT8
    )
    e0 = idle.energy()
    assert e0.batch_host_uj == 0.0
    assert (e0.batch_core_uj, e0.batch_dram_uj) == (en.batch_core_uj, en.batch_dram_uj)


def test_the_measured_host_profile_is_the_benchmarks_measurement():
    """x86_vm_measured (config.HOST_PROFILES) holds what benchmarks/bench_host.py measured and committed
    (validation/data/host_x86_vm.json); its FLOP rate for fallback ops is LayerNorm's 8 FLOPs at its time."""
    import json

    from nvdla_sim.config import HOST_PROFILES

    measured = json.loads((CONFIGS.parent / "validation" / "data" / "host_x86_vm.json").read_text())
    p = HOST_PROFILES["x86_vm_measured"]
    assert dict(p.ns_per_element) == measured["ns_per_element"] and p.model == "per_element"
    assert (p.mem_gbs, p.overhead_us) == (measured["mem_gbs"], measured["handoff_us"])
    assert p.gflops == round(8 / measured["ns_per_element"]["layernorm"], 2)
    assert "bench_host.py" in p.source and "assumed" in HOST_PROFILES["assumed_embedded"].source


def test_a_profile_prices_the_host_and_a_configs_value_overrides_it():
    """The measured profile by hand: each LayerNorm of BERT-base at 128 tokens is 98,304 elements at 3.143 ns
    (308.97 us, longer than its bytes at 23 GB/s) plus one 21.61 us hand-off: 330,580 cycles at 1 GHz."""
    fields_ = ("model", "gflops", "mem_gbs", "overhead_us", "active_power_w", "ns_per_element")
    hw = load_config("nv_full").with_values(
        **{"host.profile": "x86_vm_measured", **{f"host.{f}": None for f in fields_}}
    )
    assert isinstance(host_model(hw.host), PerElementHost) and "measured" in hw.host.source
    res = map_model(build_graph(preset("bert-base"), seq=128), hw, precision=Precision.INT8)
    ln = [r for r in res.results if r.task.resource is Resource.HOST and "layernorm" in r.task.note]
    assert ln and {r.cycles_per_instance for r in ln} == {math.ceil((21.61 + 3.143 * 128 * 768 * 1e-3) * 1000)}
    mine = hw.with_values(**{"host.overhead_us": 5.0}).host
    assert mine.overhead_us == 5.0 and mine.source.endswith("the config's own overhead_us")
    with pytest.raises(ConfigError, match="host.profile 'arm' is not one of assumed_embedded, x86_vm_measured"):
        load_config("nv_full").with_values(**{"host.profile": "arm"})


def test_the_cli_names_its_host_profile(capsys):
    from nvdla_cli.main import main

    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--top", "0", "--host", "x86_vm_measured"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("host  "))
    assert "profile x86_vm_measured (per_element): measured on this project's" in line
    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--top", "0"]) == 0
    assert "profile assumed_embedded (roofline): assumed, not measured" in capsys.readouterr().out
