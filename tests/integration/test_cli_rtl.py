import pytest

from nvdla_cli.main import main


def test_rtl_emit_writes_verilog(tmp_path, capsys):
    assert main(["rtl", "emit", "--hw", "nv_small", "-o", str(tmp_path)]) == 0
    path = capsys.readouterr().out.strip()
    with open(path) as f:
        text = f.read()
    assert "module nvdla_matmul_datapath" in text and "atomic_c=8 cells=8" in text


@pytest.mark.rtl
def test_rtl_verify_prints_pass_and_cycles(capsys, tmp_path):
    rc = main(["rtl", "verify", "--hw", "nv_small", "--layer", "bert-base.qkv", "--work-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "PASS: 32 outputs bit-exact" in out and "(equal)" in out and "cycles/s" in out


@pytest.mark.rtl
def test_rtl_verify_takes_a_relative_work_dir_and_merges_coverage(capsys, tmp_path, monkeypatch):
    """A relative --work-dir once ended in a cocotb traceback (the simulator runs from the build folder);
    two runs merged into one --coverage-db add up their bin hits: int8 sampled twice."""
    import yaml

    monkeypatch.chdir(tmp_path)
    for run in ("w1", "w2"):
        rc = main(["rtl", "verify", "--hw", "nv_small", "--work-dir", f"rel/{run}", "--coverage-db", "cov/db.yml"])
        out = capsys.readouterr().out
        assert rc == 0 and "PASS" in out and "all runs merged into cov/db.yml" in out, out
        assert "datapath.precision" in out and "all named points" in out
    assert (tmp_path / "rel" / "w2" / "result.json").is_file()
    db = yaml.safe_load((tmp_path / "cov" / "db.yml").read_text())
    assert db["datapath.precision"]["bins:_hits"] == {"int8": 2, "int16": 0}


def test_rtl_bad_input(capsys):
    assert main(["rtl", "verify", "--hw", "nv_small", "--layer", "bert-base.attn"]) == 2
    assert "--layer must be <model>.<layer>" in capsys.readouterr().err
    assert main(["rtl", "emit", "--hw", "nv_full", "--precision", "fp16"]) == 2
    assert "integer-only" in capsys.readouterr().err


def test_missing_iverilog_names_the_install_command(monkeypatch, capsys):
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "iverilog" else real(name, *a, **k))
    assert main(["rtl", "verify", "--hw", "nv_small", "--layer", "bert-base.qkv"]) == 2
    err = capsys.readouterr().err
    assert "Icarus Verilog (iverilog) is not on PATH" in err and "apt-get install -y iverilog" in err
