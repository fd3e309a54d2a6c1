"""End-to-end through the `nvdla` console entry point (in-process main() and one real subprocess)."""

import json
import subprocess
import sys
import zlib

import pytest

from nvdla_cli.main import main
from tests.unit.test_trace import partial_overlaps

NVDLA = [sys.executable, "-m", "nvdla_cli.main"]


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_configs_table_and_json(capsys):
    rc, out, _ = run(capsys, "configs")
    assert rc == 0 and "nv_full" in out and "int8:2048" in out and "512Ki" in out and "fitted on NVIDIA's primer" in out
    rc, out, _ = run(capsys, "configs", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["nv_small"]["peak_macs_per_cycle"] == {"int8": 64}
    # components-only area: nv_full's 2,048 INT8 MACs (1,024 INT16 cells) and 512 KiB outweigh nv_small's
    assert rows["nv_full"]["area_mm2"] > 5 * rows["nv_small"]["area_mm2"] > 0


def test_simulate_matmul_prints_and_traces(capsys, tmp_path):
    trace = tmp_path / "t.json"
    rc, out, err = run(
        capsys,
        "simulate",
        "--hw",
        "nv_full",
        "--op",
        "matmul",
        "--m",
        "128",
        "--k",
        "768",
        "--n",
        "768",
        "--precision",
        "int8",
        "--trace",
        str(trace),
    )
    assert rc == 0
    assert "cycles" in out and "MAC utilization" in out and "DRAM read/write" in out
    doc = json.loads(trace.read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert xs and {"CDMA", "CMAC", "SDP"} <= {
        e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"
    }
    assert all(e["dur"] >= 0 for e in xs)
    assert partial_overlaps(doc) == []  # weight fetches in flight together sit on lanes of the CDMA track


def test_simulate_json_matches_model(capsys):
    rc, out, _ = run(capsys, "simulate", "--m", "64", "--k", "256", "--n", "128", "--json", "--hw", "nv_small")
    d = json.loads(out)
    assert rc == 0 and d["macs"] == 64 * 256 * 128 and d["cycles"] >= d["lower_bound_cycles"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["simulate", "--hw", "nv_small", "--m", "8", "--k", "8", "--n", "8", "--precision", "fp16"],
            "nv_small does not support fp16",
        ),
        (["simulate", "--hw", "nope", "--m", "8", "--k", "8", "--n", "8"], "unknown hardware config 'nope'"),
        (["simulate", "--m", "8", "--k", "8"], "--op matmul needs --n"),
        (
            ["simulate", "--op", "conv", "--width", "8", "--height", "8", "--channels", "9000", "--kernels", "8"],
            "in_c must be an integer in 1..8192",
        ),
        (["simulate", "--hw", "nv_small", "--m", "8", "--k", "8", "--n", "8", "--lut"], "nv_small has no SDP EW"),
    ],
)
def test_bad_input_is_one_clear_line(capsys, argv, message):
    rc, _, err = run(capsys, *argv)
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_console_script_subprocess(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('name = "x"\nclock_mhz = 100\nprecisions = ["int8"]\n')
    r = subprocess.run(
        [sys.executable, "-m", "nvdla_cli.main", "simulate", "--hw", str(cfg), "--m", "8", "--k", "8", "--n", "8"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2
    assert "bad.toml: missing required field 'mac'" in r.stderr and "Traceback" not in r.stderr


def test_simulate_trace_test_end_to_end(tmp_path):
    """`nvdla simulate --trace-test DIR` on a program of our own: cycles, units, checks, JSON."""
    from tests.unit.test_regprog import sdp_program, write_test

    # pass-through SDP with zero strides: every line lands on the first, so the output's first atom is the
    # input's first atom (1 2 3 4 0 0 0 0)
    good = zlib.crc32(bytes([1, 2, 3, 4, 0, 0, 0, 0]))
    d = write_test(tmp_path, sdp_program(8, 8, 32, crc=good))
    out = subprocess.run([*NVDLA, "simulate", "--trace-test", str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "on nv_small_rtl_tb" in out.stdout and "sdp " in out.stdout
    assert f"golden CRC 0x{good:08x}, model CRC 0x{good:08x}  match" in out.stdout
    (tmp_path / "bad").mkdir()
    bad = write_test(tmp_path / "bad", sdp_program(8, 8, 32, crc=good ^ 1))
    wrong = subprocess.run([*NVDLA, "simulate", "--trace-test", str(bad)], capture_output=True, text=True)
    assert wrong.returncode == 1 and "MISMATCH" in wrong.stdout
    js = subprocess.run([*NVDLA, "simulate", "--trace-test", str(d), "--json"], capture_output=True, text=True)
    doc = json.loads(js.stdout)
    # 8x8 pixels x 4 atoms x 8 lanes at 1 lane/cycle, plus launch, memory latency, pipeline and completion
    assert 2048 < doc["cycles"] < 2048 + 150
    assert doc["layers"][0]["kind"] == "sdp" and doc["unknown_registers"] == []
    # its energy: SDP's element work, and the always-on power and leakage over the program's cycles
    from nvdla_sim import load_config
    from nvdla_sim.energy.calibration import ALWAYS_ON_FACTOR
    from nvdla_sim.energy.model import full_rate_pj_per_cycle

    en = doc["energy"]
    hw = load_config("nv_small_rtl_tb")
    assert en["by_unit_nj"]["sdp"] > 0 and en["by_unit_nj"]["cmac"] == 0
    always_on = ALWAYS_ON_FACTOR * full_rate_pj_per_cycle(hw) * doc["cycles"] / 1e3
    assert en["by_unit_nj"]["always_on"] == pytest.approx(always_on, rel=1e-3)
    assert en["core_nj"] == pytest.approx(sum(en["by_unit_nj"].values()), rel=1e-3)
    assert "nJ in NVDLA (sdp " in out.stdout


def test_simulate_trace_test_errors_are_one_line(tmp_path):
    out = subprocess.run(
        [*NVDLA, "simulate", "--trace-test", str(tmp_path / "missing")], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "not a trace-test folder" in out.stderr


def test_a_matmul_past_the_register_fields_is_split(capsys):
    assert main(["simulate", "--hw", "nv_small", "--m", "8", "--k", "9000", "--n", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    names = [lay["name"] for lay in d["layers"]]
    assert names == ["matmul_8x9000x8[k 0:8192]", "matmul_8x9000x8[k 8192:9000]", "matmul_8x9000x8[+ partial 1]"]
    assert d["cycles"] == sum(lay["cycles"] for lay in d["layers"])
    # 8 x 9000 x 8 = 576,000 MACs (no padding on 8 x 8 MACs: 8,192 and 808 channels, 8 kernels) x 0.2002 pJ
    # (the INT8 MAC at 16 nm) x 0.4465 (the fitted dynamic factor) = 51.5 nJ in CMAC
    assert d["energy"]["by_unit_nj"]["cmac"] == pytest.approx(576_000 * 0.2002 * 0.4465 / 1e3, rel=1e-3)
    assert d["energy"]["by_unit_nj"]["sdp"] > 0  # the partial sums' add


def test_simulate_matmul_takes_the_mappers_layout(capsys, tmp_path):
    """Issue #27 item 3: `simulate --op matmul --m 512 --k 5632 --n 2048` (TinyLlama's ffn2 at 512 tokens)
    failed with 'no CBUF-legal tiling' while `nvdla map` ran the same op: simulate laid the tokens out in
    rows of 64, the mapper in rows of at most a quarter of CBUF (nv_full: 131,072 / 5,632 B -> 23, so the
    largest divisor of 512 is 16). Both now take the mapper's layout and time the layer (with its bias) alike; --row
    chooses another, and a row that does not divide m is refused."""
    from nvdla_mapper.passes import map_model
    from nvdla_mapper.workload import Graph, Op, OpKind
    from nvdla_sim.config import load_config
    from nvdla_sim.precision import Precision

    assert main(["simulate", "--hw", "nv_full", "--op", "matmul", "--m", "512", "--k", "5632", "--n", "2048",
                 "--bias", "--json"]) == 0  # fmt: skip
    sim = json.loads(capsys.readouterr().out)
    g = Graph("ffn2", batch=1, seq=512)
    x = g.add(Op("x", OpKind.GATHER, 512, 5632, group="host"))
    g.add(Op("ffn2", OpKind.MATMUL, 512, 2048, k=5632, group="matmul"), x)
    res = map_model(g.g, load_config("nv_full"), precision=Precision.INT8)
    (layer,) = [r for r in res.results if r.task.op == "ffn2"]
    assert layer.task.layer.shape.in_w == 16 and sim["cycles"] == layer.stats.cycles
    assert main(["simulate", "--hw", "nv_full", "--op", "matmul", "--m", "512", "--k", "5632", "--n", "2048",
                 "--row", "7"]) == 2  # fmt: skip
    assert "--row 7 must divide --m 512" in capsys.readouterr().err


def test_quantize_per_tensor_runs_a_llama_block(capsys, tmp_path):
    """Issue #27 item 3: `map --quantize per-tensor` on a TinyLlama-shaped config.json failed on the same
    layout; the accuracy study now lays its matmuls out as the map does."""
    cfg = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 1, "num_attention_heads": 32,
           "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc = main(["map", str(tmp_path / "config.json"), "--hw", "nv_full", "--seq", "32", "--quantize", "per-tensor"])
    out = capsys.readouterr().out
    assert rc == 0 and "INT8 accuracy" in out and "ffn2" in out


def test_simulate_prices_the_layer(capsys):
    """16 x 64 -> 32 on nv_small, INT8: 32,768 MACs x 0.2002 pJ (hwcomponents' Aladdin INT8 MAC at 16 nm)
    x 0.4465 (the dynamic factor fitted on NVIDIA's primer table, docs/energy.md) = 2.9 nJ; DRAM: 1,024 B of input, 2,048 B of weights, 512 B of output = 3,584 B x 64 pJ (LPDDR4,
    0.51 nJ per 64-bit access) = 229.4 nJ."""
    rc, out, _ = run(capsys, "simulate", "--op", "matmul", "--m", "16", "--k", "64", "--n", "32", "--hw", "nv_small")
    assert rc == 0 and "(cmac 2.9, " in out and "DRAM 229.4 nJ (LPDDR4)" in out
    rc, out, _ = run(capsys, "simulate", "--op", "matmul", "--m", "16", "--k", "64", "--n", "32", "--hw", "nv_small",
                     "--json")  # fmt: skip
    energy = json.loads(out)["energy"]
    assert energy["by_unit_nj"]["cmac"] == pytest.approx(32_768 * 0.2002 * 0.4465 / 1e3, rel=1e-3)
    assert energy["dram_nj"] == pytest.approx(3_584 * 64 / 1e3, rel=1e-3)
