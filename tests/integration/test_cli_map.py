import csv
import itertools
import json

import pytest

from nvdla_cli.main import main


def test_map_bert_writes_json_and_csv(tmp_path, capsys):
    """BERT-base at 128 tokens on nv_full: the figures the report prints against hand arithmetic (the model's
    MACs, each projection's m x k x n, 1 GHz's 1e6 cycles a millisecond, nv_full's 64 x 32 INT8 MACs a
    cycle), and the JSON's totals against the CSV's rows added up another way."""
    rc = main(["map", "bert-base", "--hw", "nv_full", "--seq", "128", "--precision", "int8", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    d = json.loads((tmp_path / "report.json").read_text())
    with (tmp_path / "layers.csv").open() as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert len(rows) == len(d["layers"]) > 100
    # the model's MACs by hand: 12 blocks of Q, K, V, O (128 x 768 x 768 each), QK^T and PV (12 heads of
    # 128 x 64 x 128 each), the FFN (128 x 768 x 3072 and back); the pooler (one token, 768 x 768) and the
    # classifier (768 x 2)
    block = 4 * 128 * 768 * 768 + 2 * 12 * 128 * 64 * 128 + 2 * 128 * 768 * 3072
    assert d["model_macs"] == 12 * block + 768 * 768 + 768 * 2 == 11_174_217_216
    # the softmax and (since 2026-12-06) LayerNorm are the host's: NVDLA runs the model's MACs and no more,
    # row by row (the CSV) as in total (the JSON)
    assert d["hardware_macs"] == sum(int(r["hardware_macs"]) for r in rows.values()) == 11_174_217_216
    want = {"layer0.attn.q": 128 * 768 * 768, "layer5.attn.qk": 12 * 128 * 64 * 128, "layer11.ffn1": 128 * 768 * 3072,
            "layer11.ffn2": 128 * 3072 * 768, "pooler": 768 * 768, "classifier": 768 * 2}  # fmt: skip
    assert {n: int(rows[n]["hardware_macs"]) for n in want} == want
    # host tasks: the embedding lookup, the embeddings' LayerNorm, and per block the softmax and two LayerNorms
    host = [r for r in rows.values() if r["resource"] == "host"]
    assert d["host_fallback"]["tasks"] == len(host) == 1 + 1 + 12 * 3
    # 1,000 MHz: a million cycles a millisecond, a billion a second, one inference per latency
    cycles = d["total_cycles"]
    assert d["latency_ms"] == round(cycles / 1e6, 6) and d["throughput_inferences_per_s"] == round(1e9 / cycles, 3)
    assert f"end-to-end        {cycles:,} cycles = {cycles / 1e6:.3f} ms at 1000 MHz" in out
    # the core runs one hardware layer at a time: the NVDLA rows' spans never overlap, so the run is at least
    # their cycles added up, and those at least the MACs at nv_full's peak of 64 x 32 a cycle
    spans = sorted((int(r["start"]), int(r["end"])) for r in rows.values() if r["resource"] == "nvdla")
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    nvdla = sum(int(r["cycles"]) for r in rows.values() if r["resource"] == "nvdla")
    assert d["busy_cycles_by_resource"]["nvdla"] == nvdla and 11_174_217_216 / (64 * 32) < nvdla < cycles
    assert f"busy over the run nvdla {nvdla / cycles:.1%}" in out
    # the time by group and by bound: the CSV's cycles added up by group (resource time, beyond wall time)
    by_group: dict[str, int] = {}
    for r in rows.values():
        by_group[r["group"]] = by_group.get(r["group"], 0) + int(r["cycles"])
    assert d["cycles_by_group"] == by_group and sum(by_group.values()) > cycles
    total = sum(by_group.values())
    shares = ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(d["cycles_by_bound"].items(), key=lambda kv: -kv[1]))
    assert f"resource time by bound  {shares}" in out and d["cycles_by_bound"]["host"] == d["host_fallback"]["cycles"]
    # the energy: each row's (the CSV) plus the always-on power and leakage over the run (docs/energy.md)
    en = d["energy"]
    layers_uj = sum(float(r["core_energy_uj"]) for r in rows.values())
    run_uj = layers_uj + en["by_unit_uj"]["always_on"] + en["by_unit_uj"]["leakage"]
    assert en["core_uj_per_inference"] == pytest.approx(run_uj, rel=1e-5)
    assert f"  energy            {en['core_uj_per_inference']:,.1f} uJ in NVDLA per inference" in out
    assert f"area              {en['area_mm2']:.3f} mm2 at 16 nm" in out
    assert (tmp_path / "report.html").stat().st_size > 10_000 and (tmp_path / "trace.json").exists()


def test_map_errors(capsys):
    assert main(["map", "bert-huge"]) == 2
    assert "unknown model 'bert-huge'; presets: bert-base" in capsys.readouterr().err
    assert main(["map", "bert-base", "--hw", "nv_small", "--softmax", "nvdla"]) == 2
    assert "needs the SDP LUT" in capsys.readouterr().err
    assert main(["map", "missing.onnx"]) == 2
    assert "missing.onnx: ONNX file not found" in capsys.readouterr().err


def test_map_quantize_and_sparsity_sections(tmp_path, capsys):
    rc = main(
        [
            "map",
            "bert-base",
            "--hw",
            "nv_full",
            "--seq",
            "32",
            "--quantize",
            "per-channel",
            "--calib",
            "percentile:99.9",
            "--prune",
            "2:4",
            "--weight-compression",
            "--report",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "INT8 accuracy" in out and "cycles saved vs dense" in out
    d = json.loads((tmp_path / "report.json").read_text())
    assert d["accuracy"]["granularity"] == "per-channel" and len(d["accuracy"]["layers"]) == 9
    assert d["weights"]["stored_weight_bytes"] < d["weights"]["dense_weight_bytes"]
    html = (tmp_path / "report.html").read_text()
    assert '<table id="accuracy">' in html and '<table id="weights">' in html


def test_map_emit_program_writes_runnable_programs(tmp_path, capsys):
    """One chosen layer of a mapped model as a trace test whose model run meets its own CRC and cycles."""
    from nvdla_sim.config import load_config
    from nvdla_sim.program.run import run_program

    out = tmp_path / "progs"
    args = ["map", "bert-base", "--hw", "nv_small_rtl_tb", "--seq", "64", "--top", "1"]
    assert main([*args, "--emit-program", str(out), "--layer", "layer0.attn.qk"]) == 0
    assert "wrote 1 NVDLA register programs" in capsys.readouterr().out
    doc = json.loads((out / "programs.json").read_text())
    (p,) = doc["programs"]
    assert p["task"] == "layer0.attn.qk" and p["model_cycles"] == p["mapper_cycles_per_instance"]
    run = run_program(out / p["name"], load_config("nv_small_rtl_tb"))
    assert run.cycles == p["model_cycles"] and all(c["match"] for c in run.checks)
    assert len(run.checks) == p["hardware_layers"] == len(run.decoded.operations)  # one per hardware layer
    assert [f"0x{c['golden_crc']:08x}" for c in run.checks] == [c["crc"] for c in p["checks"]]


def test_map_emit_program_errors(tmp_path, capsys):
    base = ["map", "bert-base", "--hw", "nv_small", "--seq", "64", "--top", "1"]
    assert main([*base, "--layer", "layer0.attn.q"]) == 2
    assert "give --emit-program DIR too" in capsys.readouterr().err
    assert main([*base, "--emit-program", str(tmp_path), "--layer", "nope"]) == 2
    assert "--layer 'nope': no such task in bert-base; hardware layers: layer0.attn.q" in capsys.readouterr().err
    assert main([*base, "--emit-program", str(tmp_path), "--layer", "layer0.attn.softmax"]) == 2
    assert "runs on the host" in capsys.readouterr().err


def test_identical_blocks_print_as_one_row(capsys):
    from nvdla_mapper.results import group_layers

    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "64", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "layer{0-11}.ffn2 x12" in out and "layer0.ffn2 " not in out
    from nvdla_mapper.lowering.rules import Resource, Task
    from nvdla_mapper.results import TaskResult
    from nvdla_mapper.workload import Block

    def result(block: Block, name: str, cycles: int) -> TaskResult:
        task = Task(name, name, "host", Resource.HOST, block=block)
        return TaskResult(task, cycles, 0, cycles, None, cycles)

    results = [result(Block("layer", i), f"layer{i}.x", 5) for i in (0, 1, 2, 5)]
    results.append(result(Block("layer", 3), "layer3.x", 7))  # other cycles: a row of its own
    results.append(result(Block("layer4_x"), "layer4_x", 5))  # a one-off block: never merged
    results.append(result(Block("layer4_"), "layer4_y", 5))  # named outside its block: its own row
    merged = {r["name"]: r for r in group_layers(results)}
    assert merged["layer{0-2,5}.x x4"]["cycles"] == 20 and merged["layer{0-2,5}.x x4"]["count"] == 4
    assert {"layer3.x", "layer4_x", "layer4_y"} <= set(merged) and len(merged) == 4


def test_a_bad_layer_is_named_before_the_map_runs(capsys, tmp_path, monkeypatch):
    """`--layer` is checked against the lowered model, not after the whole map: a typo costs no map."""
    import nvdla_mapper.passes

    def no_map(*a, **k):
        raise AssertionError("map_model ran before --layer was checked")

    monkeypatch.setattr(nvdla_mapper.passes, "map_model", no_map)
    rc = main(["map", "bert-base", "--hw", "nv_small_rtl_tb", "--seq", "64", "--emit-program", str(tmp_path),
               "--layer", "layer0.attn.qkk"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "no such task in bert-base; did you mean layer0.attn.qk" in err, err
    assert main(["map", "bert-base", "--layer", "layer0.attn.qk"]) == 2
    assert "give --emit-program DIR too" in capsys.readouterr().err


def test_map_emit_program_whole_model_on_a_y_unit_build(tmp_path, capsys):
    """Every hardware layer of a one-block BERT (a Hugging Face config.json) on a build with SDP's Y unit:
    softmax, layernorm and GELU emitted as programs too (none skipped), the host steps listed; the
    softmax's exp program decodes and runs to its own CRC and the mapper's cycles."""
    from nvdla_sim.config import load_config
    from nvdla_sim.program.run import run_program

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "model_type": "bert", "hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 512, "vocab_size": 30522, "max_position_embeddings": 512,
    }))  # fmt: skip
    out = tmp_path / "progs"
    args = ["map", str(cfg), "--hw", "nv_small_256_full_rtl_tb", "--seq", "64", "--top", "1", "--softmax", "nvdla"]
    assert main([*args, "--emit-program", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "NVDLA register programs" in printed and "without a program" not in printed
    assert "host tasks (no program), e.g. embed (host: embedding lookup on host)" in printed
    doc = json.loads((out / "programs.json").read_text())
    assert not doc["skipped"]
    (exp,) = [p for p in doc["programs"] if p["task"] == "layer0.attn.softmax.exp"]
    run = run_program(out / exp["name"], load_config("nv_small_256_full_rtl_tb"))
    assert run.cycles == exp["model_cycles"] == exp["mapper_cycles_per_instance"]
    assert all(c["match"] for c in run.checks)
    assert run.decoded.operations[0].ew is not None and run.decoded.operations[0].lut_enabled


def test_accuracy_with_layernorm_in_nvdlas_steps_runs_its_int16_statistics(tmp_path, capsys):
    """`--layernorm nvdla` runs LayerNorm's INT16 statistics inside an INT8 run (the lowering context at
    another precision): the ViT's first 2 test images on nv_full, both right in float and through the
    datapath with one SDP saturation, as the code before the options object printed them (commit 8c907db;
    the options refactor had broken this path with a TypeError)."""
    out = tmp_path / "acc.json"
    assert main(["accuracy", "vit_digits", "--hw", "nv_full", "--layernorm", "nvdla", "--samples", "2",
                 "--json", str(out)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    row = json.loads(out.read_text())
    assert (row["float_correct"], row["nvdla_correct"], row["saturations"]) == (2, 2, 1)
    assert "LayerNorm in NVDLA's steps" in text and "int8 100.0% (2/2)" in text


def test_accuracy_command_and_the_map_report_of_a_trained_model(tmp_path, capsys, vit_digits):
    """`nvdla accuracy` on the shipped ViT: its float count against the float reference on the same first 40
    test images, the printed line against the JSON file; `nvdla map` of the trained config with --quantize:
    the task accuracy on the first 100 images (the map's own run of the study) equal to the row committed
    in validation/data/trained/accuracy.json, beside cycles and energy in the summary, report.json and
    report.html."""
    out = tmp_path / "acc.json"
    assert main(["accuracy", "vit_digits", "--samples", "40", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    row = json.loads(out.read_text())
    assert vit_digits.test_images == 360  # the test split vit_digits.log.json names
    assert row["images"] == 40 and row["float_correct"] == vit_digits.float_correct(40)
    assert (row["model"], row["hw"], row["precision"]) == ("vit_digits", "nv_small", "int8")
    f, n8 = row["float_correct"], row["nvdla_correct"]
    # the committed run on the first 100 images has 100 - 96 = 4 wrong and 7 saturations: the first 40 no more
    assert 40 - 4 <= n8 <= 40 and 0 <= row["saturations"] <= 7
    assert text.startswith("vit_digits on nv_small, INT8 (static max activations, per-channel weights)")
    assert f"test accuracy     float {f / 40:.1%} ({f}/40), int8 {n8 / 40:.1%} ({n8}/40)" in text
    assert f"SDP saturations   {row['saturations']:,}" in text
    rc = main(["map", str(vit_digits.dir / "vit_digits.config.json"), "--hw", "nv_small", "--quantize", "per-channel",
               "--report", str(tmp_path)])  # fmt: skip
    text = capsys.readouterr().out
    task = json.loads((tmp_path / "report.json").read_text())["accuracy"]["task"]
    want = vit_digits.committed("nv_small", "static max, per-channel weights", 100)
    assert (want["float_correct"], want["nvdla_correct"], want["saturations"]) == (96, 96, 7)
    keys = ("images", "float_correct", "nvdla_correct", "saturations", "precision")
    assert rc == 0 and {k: task[k] for k in keys} == {k: want[k] for k in keys}
    assert "test accuracy     float 96.0% (96/100), int8 96.0% (96/100)" in text and "end-to-end" in text
    assert '<table id="task_accuracy">' in (tmp_path / "report.html").read_text()
    assert main(["accuracy", "resnet50"]) == 2
    assert "no trained model 'resnet50'; trained models: vit_digits, char_gpt" in capsys.readouterr().err
    assert main(["accuracy", "vit_digits", "--samples", "0"]) == 2
    assert "--samples must be a positive integer, not 0" in capsys.readouterr().err
