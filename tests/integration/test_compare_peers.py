"""benchmarks/compare_peers.py without the peers: its workloads, hardware equivalents and the project's
side, and the committed comparison (validation/data/peers_rtl.json) against today's model."""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cp():
    spec = importlib.util.spec_from_file_location("compare_peers", ROOT / "benchmarks" / "compare_peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_workloads_and_equivalents(cp, tmp_path):
    cfgs, shapes, rtl = cp.workload("bert-base")
    assert cfgs == "nv_small,nv_full" and not rtl
    assert {s[0]: s[1:] for s in shapes}["ffn1"] == (128, 768, 3072, 12)
    assert sum(m * k * n * c for _, m, k, n, c in shapes) == 12 * (4 * 128 * 768 * 768 + 2 * 128 * 768 * 3072
                                                                 + 24 * 128 * 64 * 128)  # fmt: skip
    job = cp.hw_job("nv_full", shapes, tmp_path)
    assert job["array"] == [64, 32] and job["cbuf_bytes"] == 512 * 1024 and job["dram_bytes_per_cycle"] == 64
    assert job["acc_bytes"] == 136 * 128  # unit_description.rst: 136 B x 128 entries at INT8
    with pytest.raises(SystemExit, match="choose bert-base, reduced or rtl"):
        cp.workload("resnet")


def test_project_side_on_the_rtl_shapes_and_the_committed_comparison(cp, tmp_path):
    _, shapes, rtl = cp.workload("rtl")
    assert len(shapes) == 11
    now = cp.project_job(cp.hw_job("nv_small_rtl_tb", shapes, tmp_path))["layers"]
    for name, *_ in shapes:
        assert abs(now[name]["total"] / rtl[name] - 1) < 0.04, name  # worst 3.7% (QK^T at 64, section 5)
    saved = json.loads((ROOT / "validation/data/peers_rtl.json").read_text())
    assert saved["command"].startswith("python benchmarks/compare_peers.py") and saved["date"]
    runs = saved["configs"]["nv_small_rtl_tb"]
    for name, *_ in shapes:  # the committed project column is today's model (else re-run the comparison)
        assert abs(runs["project"]["layers"][name]["total"] / now[name]["total"] - 1) < 0.01, name

    def err(tool):
        return statistics.median(abs(runs[tool]["layers"][n]["total"] / rtl[n] - 1) for n, *_ in shapes)

    assert err("project") < 0.01 < err("zigzag") < err("scalesim")  # as docs/validation.md section 6 says
