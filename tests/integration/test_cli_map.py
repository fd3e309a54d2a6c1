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
