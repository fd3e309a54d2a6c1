import csv
import json

from nvdla_cli.main import main


def test_map_bert_writes_json_and_csv(tmp_path, capsys):
    rc = main(["map", "bert-base", "--hw", "nv_full", "--seq", "128", "--precision", "int8", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "end-to-end" in out and "ms at 1000 MHz" in out
    d = json.loads((tmp_path / "report.json").read_text())
    with (tmp_path / "layers.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(d["layers"]) > 100
    assert d["total_cycles"] == max(int(r["end"]) for r in rows)
    assert d["model_macs"] == 11_174_217_216  # with the pooler and classifier
    # the softmax and (since 2026-12-06) LayerNorm are the host's: NVDLA runs the model's MACs and no more
    assert d["macs"] == 11_174_217_216
    assert d["host_fallback"]["tasks"] >= 1  # the embedding lookup
    # the run's time by label, printed as shares of the same total as the op groups
    total = sum(d["cycles_by_group"].values())
    shares = ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(d["cycles_by_bound"].items(), key=lambda kv: -kv[1]))
    assert f"time by bound     {shares}" in out and "host" in d["cycles_by_bound"]
    en = d["energy"]
    assert f"  energy            {en['core_uj']:,.1f} uJ in NVDLA per inference" in out
    assert f"area {en['area_mm2']:.3f} mm2 at 16 nm" in out
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
    from nvdla_cli.map_commands import group_layers

    assert main(["map", "bert-base", "--hw", "nv_full", "--seq", "64", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "layer{0-11}.ffn2 x12" in out and "layer0.ffn2 " not in out
    rows = [
        {"name": f"layer{i}.x", "cycles_per_instance": 5, "count": 1, "bound": "dram", "cycles": 5}
        for i in (0, 1, 2, 5)
    ]
    rows.append({"name": "layer3.x", "cycles_per_instance": 7, "count": 1, "bound": "dram", "cycles": 7})
    merged = {r["name"]: r for r in group_layers(rows)}
    assert merged["layer{0-2,5}.x x4"]["cycles"] == 20 and "layer3.x" in merged


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


def test_accuracy_command_and_the_map_report_of_a_trained_model(tmp_path, capsys):
    """`nvdla accuracy` on the shipped ViT (its float count checked against the float reference, its INT8
    row against the study's function), and `nvdla map` of the trained config with --quantize: the task
    accuracy beside cycles and energy in the summary, report.json and report.html."""
    from pathlib import Path

    import numpy as np

    from nvdla_mapper.numerics.reference import load_weights, vit_forward
    from nvdla_mapper.studies.accuracy import QuantSettings, trained_accuracy
    from nvdla_sim.config import load_config

    trained = Path(__file__).resolve().parents[2] / "validation" / "data" / "trained"
    out = tmp_path / "acc.json"
    assert main(["accuracy", "vit_digits", "--samples", "40", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    row = json.loads(out.read_text())
    test = np.load(trained / "digits_test.npz")
    logits = vit_forward(load_weights(trained / "vit_digits.npz"), test["images"][:40], heads=4, patch=2)
    assert row["float_correct"] == int((logits.argmax(-1) == test["labels"][:40]).sum())
    assert {k: v for k, v in row.items() if k != "recipe"} == trained_accuracy(
        trained, "vit_digits", load_config("nv_small"), QuantSettings(), samples=40
    )
    assert f"int8 {row['nvdla_correct'] / 40:.1%} ({row['nvdla_correct']}/40)" in text
    rc = main(["map", str(trained / "vit_digits.config.json"), "--hw", "nv_small", "--quantize", "per-channel",
               "--report", str(tmp_path)])  # fmt: skip
    text = capsys.readouterr().out
    d = json.loads((tmp_path / "report.json").read_text())
    task = d["accuracy"]["task"]
    assert rc == 0 and task["images"] == 100 and "test accuracy     float" in text and "end-to-end" in text
    assert '<table id="task_accuracy">' in (tmp_path / "report.html").read_text()
    assert main(["accuracy", "resnet50"]) == 2
    assert "no trained model 'resnet50'; trained models: vit_digits, char_gpt" in capsys.readouterr().err
    assert main(["accuracy", "vit_digits", "--samples", "0"]) == 2
    assert "--samples must be a positive integer, not 0" in capsys.readouterr().err
