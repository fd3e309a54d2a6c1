"""Every printed figure says what it counts, and adds up to what its label says (issue 55). The expected
values come from outside the code under test: hand arithmetic, the component library's DRAM energy per
byte (docs/energy.md: LPDDR4 0.51 nJ per 64-bit access, 64 pJ a byte), another path through the files
the command wrote, or the model's architecture."""

from __future__ import annotations

import csv
import itertools
import json
import re

import pytest

from nvdla_cli.main import main

# GPT-2's decoder as a config.json small enough for several CLI runs in a test: 2 layers, hidden 128
TINY_GPT2 = {"model_type": "gpt2", "n_embd": 128, "n_head": 4, "n_layer": 2, "n_positions": 512, "vocab_size": 1000}
LPDDR4_PJ_PER_BYTE = 64.0  # docs/energy.md: hwcomponents' LPDDR4, 0.51 nJ per 64-bit access


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    p = tmp_path_factory.mktemp("tiny") / "config.json"
    p.write_text(json.dumps(TINY_GPT2))
    return str(p)


def _run(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def _report(path) -> dict:
    return json.loads((path / "report.json").read_text())


def _rows(path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_map_energy_per_inference_is_half_the_batch_of_two(tiny, tmp_path, capsys):
    out1 = _run(capsys, ["map", tiny, "--hw", "nv_full", "--seq", "64", "--report", str(tmp_path / "b1")])
    out2 = _run(
        capsys, ["map", tiny, "--hw", "nv_full", "--seq", "64", "--batch", "2", "--report", str(tmp_path / "b2")]
    )
    e1, e2 = _report(tmp_path / "b1")["energy"], _report(tmp_path / "b2")["energy"]
    # the printed line: per inference, then the batch's, and the first is half the second
    m = re.search(r"energy +([\d,.]+) uJ in NVDLA per inference \(([\d,.]+) for the batch of 2\)", out2)
    assert m, out2
    per, batch = (float(x.replace(",", "")) for x in m.groups())
    assert per == pytest.approx(batch / 2, abs=0.08)  # each printed to 0.1
    assert "for the batch" not in out1 and f"{e1['core_uj_per_inference']:,.1f} uJ in NVDLA per inference" in out1
    # the batch's MAC energy is twice one inference's: twice the model's MACs on the same array
    assert e2["by_unit_uj"]["cmac"] == pytest.approx(2 * e1["by_unit_uj"]["cmac"], rel=1e-9)
    assert e2["dram_uj_per_inference"] == pytest.approx(e2["batch_dram_uj"] / 2, abs=1e-5)


def test_dram_energy_counts_every_byte_the_run_moves(tmp_path, capsys):
    # BERT-base on nv_full moves K^T and V re-layouts through BDMA: those copies count too
    _run(capsys, ["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--report", str(tmp_path)])
    d = _report(tmp_path)
    rows = _rows(tmp_path / "layers.csv")
    bdma = [r for r in rows if r["resource"] == "bdma"]
    assert bdma and all(int(r["dram_read"]) > 0 for r in bdma)
    moved = sum(int(r["dram_read"]) + int(r["dram_write"]) for r in rows)
    assert d["energy"]["batch_dram_uj"] == pytest.approx(moved * LPDDR4_PJ_PER_BYTE * 1e-6, rel=1e-6)


def test_shares_add_up_to_what_their_labels_say(tmp_path, capsys):
    out = _run(capsys, ["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--report", str(tmp_path)])
    d = _report(tmp_path)
    rows = _rows(tmp_path / "layers.csv")
    total = d["total_cycles"]
    # busy over the run: each resource's own tasks' cycles (it runs one at a time) over the wall time; a
    # task streaming behind another's instances holds its resource a little longer than it works
    for res in ("nvdla", "bdma", "host"):
        mine = [r for r in rows if r["resource"] == res]
        spans = sorted((int(r["start"]), int(r["end"])) for r in mine)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # never two at once
        busy = sum(int(r["cycles"]) for r in mine)
        assert busy <= sum(b - a for a, b in spans) <= total
        assert d["busy_share_of_run_by_resource"][res] == pytest.approx(busy / total, abs=1e-6)
    host = re.search(r"busy over the run .*host ([\d.]+)%", out)
    assert host and float(host.group(1)) == pytest.approx(100 * d["busy_share_of_run_by_resource"]["host"], abs=0.05)
    # resource time by group: shares of the summed busy time, which add to 100% (not of the wall time)
    line = next(x for x in out.splitlines() if x.strip().startswith("resource time by group"))
    shares = [float(x) for x in re.findall(r" ([\d.]+)%", line)]
    assert sum(shares) == pytest.approx(100, abs=0.1 * len(shares))
    summed = sum(int(r["cycles"]) for r in rows)
    assert summed > total  # the resources overlap: their summed time passes the wall time
    assert sum(d["cycles_by_group"].values()) == summed


def test_hardware_and_model_macs_named_apart(tmp_path, capsys):
    # a 2:4-sparse MAC array (a what-if) performs half the model's MACs in the projections
    _run(capsys, ["map", "bert-base", "--hw", "nv_full", "--seq", "32", "--prune", "2:4", "--sparse-mac-whatif",
                  "--report", str(tmp_path)])  # fmt: skip
    d = _report(tmp_path)
    # BERT-base at 32 tokens, by hand: 12 layers of Q, K, V, O (768 x 768) and the FFN (768 x 3072 twice)
    # per token, QK^T and PV (32 x 64 per head, 12 heads), and the pooler/classifier head
    per_layer = 32 * (4 * 768 * 768 + 2 * 768 * 3072) + 2 * 12 * 32 * 32 * 64
    assert d["model_macs"] >= 12 * per_layer
    assert d["hardware_macs"] < d["model_macs"]  # the sparse array skips the zeros
    peak = d["peak_macs_per_cycle"]
    assert d["hardware_mac_utilization"] == pytest.approx(d["hardware_macs"] / (peak * d["total_cycles"]), rel=1e-5)
    assert d["model_mac_utilization"] == pytest.approx(d["model_macs"] / (peak * d["total_cycles"]), rel=1e-5)
    assert sum(int(r["hardware_macs"]) for r in _rows(tmp_path / "layers.csv")) == d["hardware_macs"]


def test_a_slow_runs_throughput_keeps_its_digits(tiny, capsys):
    out = _run(capsys, ["map", "gpt2-xl", "--hw", "nv_small", "--seq", "8", "--top", "0"])
    m = re.search(r"= ([\d,.]+) ms at 1000 MHz  \(([\d.,]+) inferences/s\)", out)
    assert m, out
    ms, rate = (float(x.replace(",", "")) for x in m.groups())
    assert rate == pytest.approx(1000 / ms, rel=5e-3) and rate > 0


def test_generate_totals_are_the_sum_of_their_parts(tiny, tmp_path, capsys):
    out = _run(capsys, ["generate", tiny, "--hw", "nv_full", "--prompt", "16", "--new-tokens", "6", "--batch", "1,3",
                        "--jobs", "1", "--report", str(tmp_path)])  # fmt: skip
    runs = json.loads((tmp_path / "generate.json").read_text())
    tokens = _rows(tmp_path / "tokens.csv")
    for d in runs:
        b, en = d["batch"], d["energy"]
        steps = [r for r in tokens if int(r["batch"]) == b and int(r["token"]) > 1]
        ms = [float(r["ms"]) for r in steps]
        assert len(steps) == 5  # tokens 2..6 of each sequence: one decode step each
        # mean and median named apart, each from tokens.csv by hand
        assert d["per_token_ms"]["mean_step"] == pytest.approx(sum(ms) / 5, abs=1e-4)
        assert d["per_token_ms"]["median_step"] == pytest.approx(sorted(ms)[2], abs=1e-4)
        # decode tokens/s: every step's tokens over the steps' time = batch / mean step
        assert d["decode_tokens_per_s_aggregate"] == pytest.approx(b * 5 / (sum(ms) / 1e3), rel=1e-4)
        # energy: prefill + decode = total, and per token is the decode over its tokens
        assert en["prefill_core_uj"] + en["decode_core_uj"] == pytest.approx(en["total_core_uj"], abs=2e-6)
        assert en["prefill_dram_uj"] + en["decode_dram_uj"] == pytest.approx(en["total_dram_uj"], abs=2e-6)
        assert en["decode_core_uj_per_token"] == pytest.approx(en["decode_core_uj"] / (5 * b), rel=1e-5)
        # the host's: its busy time at its active power, summed the same way
        assert en["prefill_host_uj"] + en["decode_host_uj"] == pytest.approx(en["total_host_uj"], abs=2e-6)
        assert en["decode_host_uj_per_token"] == pytest.approx(en["decode_host_uj"] / (5 * b), rel=1e-5)
        assert en["host_active_power_w"] == 3.7 and en["decode_host_uj"] > 0
        # the run's average power: its energy over its time (tokens.csv's ms, prefill included)
        seconds = sum(float(r["ms"]) for r in tokens if int(r["batch"]) == b) / 1e3
        assert en["average_core_power_mw"] == pytest.approx(en["total_core_uj"] * 1e-6 / seconds * 1e3, rel=1e-3)
        assert d["options"]["batch"] == "1,3" and d["options"]["prompt"] == 16
    # the batch table prints the mean step beside the median and tokens/s = batch / mean step
    row = next(x for x in out.splitlines() if re.match(r"\s+3\s+[\d.]+\s+[\d.]+\s+[\d,.]+", x))
    _, median, mean, tps = row.split()[:4]
    # tokens/s over the printed mean, to the rounding of its 3 decimals of ms (and of tokens/s's one decimal)
    rounding = 0.0005 / float(mean) + 0.05 / float(tps.replace(",", ""))
    assert float(tps.replace(",", "")) == pytest.approx(3 * 1000 / float(mean), rel=rounding + 1e-4)
    assert float(mean) == pytest.approx(runs[1]["per_token_ms"]["mean_step"], abs=5e-4)
    assert float(median) == pytest.approx(runs[1]["per_token_ms"]["median_step"], abs=1e-3)


def test_the_sweep_csv_reproduces_its_own_tops_per_w(tmp_path, capsys):
    # two builds and two batches: hardware and model MACs both in the file, TOPS/W from the model's
    (tmp_path / "s.toml").write_text(
        'name = "t"\nbase = "nv_full"\n[space]\n"mac.atomic_c" = [32, 64]\nprecision = ["int8"]\n'
        '[workloads]\nmodels = ["bert-base"]\nseq = [32]\nbatch = [1, 2]\n'
    )
    _run(capsys, ["sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--executor", "serial"])
    import sqlite3

    con = sqlite3.connect(tmp_path / "o" / "sweep.sqlite")
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM sweep_rows")]
    con.close()
    assert len(rows) == 4
    for r in rows:
        # TOPS/W: two operations per model MAC over the core energy, from the row's own columns
        assert r["tops_per_w"] == pytest.approx(2 * r["model_macs"] / (r["core_energy_uj"] * 1e-6) / 1e12, rel=2e-3)
        # BERT-base's matmuls are padded to no tile here: the array performs the model's MACs
        assert r["hardware_macs"] >= r["model_macs"] > 0
        assert r["core_energy_uj_per_inference"] == pytest.approx(r["core_energy_uj"] / r["batch"], rel=1e-6)
        # the host's energy: its busy cycles (host_cycles) at nv_full's 1 GHz and the config's 3.7 W
        assert r["host_energy_uj"] == pytest.approx(3.7 * r["host_cycles"] / 1000.0, rel=1e-6) and r["host_cycles"] > 0
        assert r["host_energy_uj_per_inference"] == pytest.approx(r["host_energy_uj"] / r["batch"], rel=1e-6)
    for front in (tmp_path / "o").glob("pareto*.csv"):
        for r in _rows(front):
            assert float(r["tops_per_w"]) == pytest.approx(
                2 * float(r["model_macs"]) / (float(r["core_energy_uj"]) * 1e-6) / 1e12, rel=2e-3
            )


def test_serve_and_generate_size_the_cache_by_the_configs_dram(tmp_path, capsys):
    # nv_full's 32 GiB (configs/nv_full.toml: Jetson AGX Xavier), less GPT-2's INT8 weights, by hand: 12 layers
    # of 4 x 768^2 + 2 x 768 x 3072, and the tied 50,257 x 768 embedding; a position is K and V of 12 layers
    weights = 12 * (4 * 768**2 + 2 * 768 * 3072) + 50257 * 768
    per_block = 16 * 2 * 12 * 768
    blocks = (32 * 2**30 - weights) // per_block
    out = _run(capsys, ["serve", "gpt2", "--hw", "nv_full", "--requests", "2", "--prompt", "8", "--output", "2"])
    assert f"KV cache {blocks:,} blocks of 16 positions (beside the weights in the 32 GiB of DRAM in nv_full)" in out
    _run(capsys, ["generate", "gpt2", "--hw", "nv_full", "--prompt", "8", "--new-tokens", "2", "--jobs", "1",
                  "--report", str(tmp_path)])  # fmt: skip
    (d,) = json.loads((tmp_path / "generate.json").read_text())
    assert d["fits"]["max_positions_at_batch"] == (32 * 2**30 - weights) // (2 * 12 * 768)
    assert d["fits"]["limited_by"] == "the 32 GiB of DRAM in nv_full"


def test_the_readmes_rate_sweep_can_preempt(tmp_path, capsys):
    """The README's `serve --rates` example at its highest rate fills its KV cache: requests are preempted,
    and the files record the preemption policy with the other options."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.startswith("./nvdla serve") and "--rates" in x]
    argv = shlex.split(line.split("#")[0])[1:]
    i = argv.index("--rates")
    top = max(float(r) for r in argv[i + 1].split(","))
    argv[i + 1] = f"{top:g}"  # the highest rate alone: the others only add time here
    j = argv.index("--report")
    argv[j + 1] = str(tmp_path)
    out = _run(capsys, argv)
    d = json.loads((tmp_path / "sweep.json").read_text())
    (point,) = d["rates"]
    assert point["preemptions"] > 0, out
    assert d["preemption"] == "recompute" and d["chunk_tokens"] is None and d["options"]["dram_gib"] == 0.2


def test_every_help_states_every_default():
    """Every option of every command whose value has a default says it in --help."""
    import argparse

    from nvdla_cli.flags import parsers
    from nvdla_cli.main import build_parser

    missing = []
    for p in parsers(build_parser()):
        text = p.format_help()
        for a in p._actions:
            if not a.option_strings or isinstance(a, argparse._HelpAction | argparse._StoreConstAction):
                continue
            shown = p._get_formatter()._get_help_string(a) % {"default": a.default}  # as --help prints it
            if "default" not in shown.lower():
                missing.append(f"{p.prog} {a.option_strings[0]}")
        assert "%(default)" not in text
    assert not missing, missing


def test_serve_files_record_every_option(tmp_path, capsys):
    _run(capsys, ["serve", "gpt2", "--hw", "nv_full", "--requests", "3", "--prompt", "8", "--output", "2",
                  "--policy", "chunked-prefill", "--chunk-tokens", "64", "--report", str(tmp_path)])  # fmt: skip
    d = json.loads((tmp_path / "serve.json").read_text())
    o = d["options"]
    assert (o["policy"], o["chunk_tokens"], o["preemption"], o["requests"], o["hw"]) == (
        "chunked-prefill",
        64,
        "recompute",
        3,
        "nv_full",
    )
    assert {"chunk_tokens", "policy", "requests"} <= set(o["typed"]) and "preemption" not in o["typed"]
    assert d["chunk_tokens"] == 64 and d["preemption"] == "recompute"
