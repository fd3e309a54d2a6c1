import csv
import json

from nvdla_sim.cli import main


def test_map_bert_writes_json_and_csv(tmp_path, capsys):
    rc = main(["map", "bert-base", "--hw", "nv_full", "--seq", "128", "--precision", "int8", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "end-to-end" in out and "ms at 1000 MHz" in out
    d = json.loads((tmp_path / "report.json").read_text())
    with (tmp_path / "layers.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(d["layers"]) > 100
    assert d["total_cycles"] == max(int(r["end"]) for r in rows)
    assert d["macs"] == 11_180_900_352
    assert d["host_fallback"]["tasks"] >= 1  # the embedding lookup
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
