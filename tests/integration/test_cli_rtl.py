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
