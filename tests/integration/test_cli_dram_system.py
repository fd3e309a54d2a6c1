"""A system config with the dram memory model (configs/nv_full_lpddr4.toml: nv_full on two LPDDR4-2400
channels) through the CLI's map, generate, serve and sweep: each runs, and each says which memory model timed
it (issue 58: "a run states which memory model timed it")."""

from __future__ import annotations

import json

import pytest

from nvdla_cli.main import main
from nvdla_mapper.studies.sweep import run_sweep, sweep_from_dict

# the DRAM port's most (two channels' peak, 2 x 128 bytes every 8 clocks of 0.83 ns, at NVDLA's 1 GHz) and a
# lone read's 42 clocks of 0.83 ns, whole NVDLA clocks up
WANT = {"model": "dram", "dram_bytes_per_cycle": pytest.approx(2 * 128 / (8 * 0.83)), "dram_latency_cycles": 35,
        "interconnect": "direct", "device": "LPDDR4-2400 x 2"}  # fmt: skip
SAYS = "memory            dram model: LPDDR4-2400 x 2 channels, DRAM at most 38.5542 B a cycle"


def test_map_generate_and_serve_run_on_the_dram_model_and_say_so(tmp_path, capsys):
    assert main(["map", "bert-base", "--hw", "nv_full_lpddr4", "--seq", "32", "--report", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "on nv_full_lpddr4_c64k32_cbuf512k_lpddr4-2400x2_1000mhz" in out and SAYS in out
    assert json.loads((tmp_path / "m" / "report.json").read_text())["memory"] == WANT
    assert main(["generate", "gpt2", "--hw", "nv_full_lpddr4", "--prompt", "8", "--new-tokens", "2", "--jobs", "1",
                 "--report", str(tmp_path / "g")]) == 0  # fmt: skip
    assert "dram model: LPDDR4-2400 x 2 channels" in capsys.readouterr().out
    (g,) = json.loads((tmp_path / "g" / "generate.json").read_text())
    assert g["memory"] == WANT
    assert main(["serve", "gpt2", "--hw", "nv_full_lpddr4", "--requests", "2", "--prompt", "8", "--output", "2",
                 "--report", str(tmp_path / "s")]) == 0  # fmt: skip
    assert "dram model: LPDDR4-2400 x 2 channels" in capsys.readouterr().out
    assert json.loads((tmp_path / "s" / "serve.json").read_text())["memory"] == WANT


def test_a_sweep_over_channels_on_the_dram_model(tmp_path):
    """One DRAM channel against two for BERT-base's seq-32 prefill: the two runs differ only in the DRAM, and
    the one with half the channels takes longer."""
    spec = sweep_from_dict(
        {"name": "ch", "base": "nv_full_lpddr4", "space": {"memory.channels": [1, 2], "memory.dram_size_gib": [8]},
         "workloads": {"models": ["bert-base"], "seq": [32]}},
        source="ch.toml",
    )  # fmt: skip
    rows = sorted(run_sweep(spec, tmp_path / "s.sqlite", executor="serial").rows,
                  key=lambda r: r["params"]["hw"]["memory.channels"])  # fmt: skip
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[0]["latency_ms"] > rows[1]["latency_ms"]
