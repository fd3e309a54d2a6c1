"""The package installs the normal way: a wheel in a fresh venv, used from a directory outside the checkout.

Builds the wheel with pip (build isolation: setuptools from the package registry), installs it with the
pinned dependencies into a new venv, and runs `nvdla configs`, `nvdla map` and `nvdla rtl emit` from a
temporary directory, where no path of the source tree can be found by accident. Where the packages cannot
be fetched (no index reachable, or a pin or the build's setuptools missing from it) the test is skipped
with pip's own words; any other failure of pip fails it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_REQUIRES = "setuptools>=68"  # pyproject.toml [build-system] requires

# What pip prints when a package cannot be fetched: the index cannot be reached, or holds no distribution
# of a requirement (a pin of requirements.lock, or the build's setuptools)
FETCH_FAILURES = (
    "No matching distribution found",
    "Could not find a version that satisfies the requirement",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ProxyError",
    "Read timed out",
    "ConnectTimeoutError",
)


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> str:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout


def _pip(cmd: list[str], cwd: Path, what: str) -> None:
    """Run a pip command; skip the test if it failed for want of a package it could not fetch."""
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1200)
    if p.returncode == 0:
        return
    why = next((ln.strip() for ln in (p.stdout + p.stderr).splitlines() if any(f in ln for f in FETCH_FAILURES)), "")
    if why:
        pytest.skip(f"{what}: packages cannot be fetched on this machine (pip: {why})")
    pytest.fail(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def test_wheel_in_a_clean_venv(tmp_path):
    from nvdla_mapper.frontends.presets import PRESETS, build_graph
    from nvdla_mapper.passes import map_model
    from nvdla_sim import Precision, load_config

    # the build's own requirement first, briefly: an offline machine is told in seconds, not after retries
    probe = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--retries", "0", "--timeout", "20"]
    _pip([*probe, "-d", str(tmp_path / "probe"), BUILD_REQUIRES], tmp_path, f"building the wheel ({BUILD_REQUIRES})")
    dist = tmp_path / "dist"
    _pip([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)], tmp_path, "the wheel")
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nvdla_sim/configs/nv_small.toml" in names and "nvdla_validation/nvdla_rtl/run_reference.py" in names
    tops = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
    assert tops == {"nvdla_cli", "nvdla_sim", "nvdla_mapper", "nvdla_rtl", "nvdla_validation"}, tops
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _pip([*pip, "-r", str(ROOT / "requirements.lock")], tmp_path, "the pinned dependencies (requirements.lock)")
    _run([*pip, "--no-deps", str(wheel)], tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    nvdla = str(venv / "bin" / "nvdla")
    assert "nv_full" in _run([nvdla, "configs"], work)
    _run([nvdla, "map", "bert-base", "--hw", "nv_full", "--seq", "128", "--precision", "int8", "--report", "out"], work)
    report = json.loads((work / "out" / "report.json").read_text())
    # the installed package's figures are the source tree's (hwcomponents from the wheel's venv)
    here = map_model(build_graph(PRESETS["bert-base"], seq=128), load_config("nv_full"), precision=Precision.INT8)
    assert report["model_macs"] == 11_174_217_216
    assert report["total_cycles"] == here.total_cycles
    assert report["energy"]["core_uj_per_inference"] == here.energy().core_uj_per_inference
    assert report["energy"]["area_mm2"] == here.energy().area_mm2
    _run([nvdla, "rtl", "emit", "--hw", "nv_small", "-o", "rtl_out"], work)
    assert any("module" in f.read_text() for f in (work / "rtl_out").glob("*.v"))
