"""The package installs the normal way: a wheel in a fresh venv, used from a directory outside the checkout.

Builds the wheel with pip (build isolation: setuptools from the package registry), installs it with the
pinned dependencies into a new venv, and runs `nvdla configs`, `nvdla map` and `nvdla rtl emit` from a
temporary directory, where no path of the source tree can be found by accident.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> str:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout


def test_wheel_in_a_clean_venv(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)], tmp_path)
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nvdla_sim/configs/nv_small.toml" in names and "nvdla_validation/nvdla_rtl/run_reference.py" in names
    tops = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
    assert tops == {"nvdla_cli", "nvdla_sim", "nvdla_mapper", "nvdla_rtl", "nvdla_validation"}, tops
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, "-r", str(ROOT / "requirements.lock")], tmp_path)
    _run([*pip, "--no-deps", str(wheel)], tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    nvdla = str(venv / "bin" / "nvdla")
    assert "nv_full" in _run([nvdla, "configs"], work)
    _run([nvdla, "map", "bert-base", "--hw", "nv_full", "--seq", "128", "--precision", "int8", "--report", "out"], work)
    report = json.loads((work / "out" / "report.json").read_text())
    assert report["model_macs"] == 11_174_217_216
    assert report["energy"]["core_uj"] > 0 and report["energy"]["area_mm2"] > 0  # hwcomponents from the wheel's venv
    _run([nvdla, "rtl", "emit", "--hw", "nv_small", "-o", "rtl_out"], work)
    assert any("module" in f.read_text() for f in (work / "rtl_out").glob("*.v"))
