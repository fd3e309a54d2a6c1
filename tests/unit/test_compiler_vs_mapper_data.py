"""The committed comparison of NVIDIA's compiled programs with the mapper's (validation/data/
compiler_vs_mapper.json, nvdla_validation.compiler_vs_mapper): every convolution of each network is found in
both programs with the same shape, the figures add up, and with the public checkouts (NVDLA_RISC_V_NVDLA,
NVDLA_GEM5_NVDLA) a rerun gives the committed rows."""

import json
import os
from pathlib import Path

import pytest

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_validation import compiler_vs_mapper as cvm

DOC = json.loads((Path(__file__).resolve().parents[2] / "validation" / "data" / "compiler_vs_mapper.json").read_text())
ROWS = DOC["rows"]


def test_three_networks_on_two_builds_are_compared_layer_by_layer():
    assert {r["preset"] for r in ROWS} >= {"lenet_mnist", "resnet18_cifar", "resnet50"}
    assert {r["hw"] for r in ROWS} == {"nv_small_rtl_tb", "nv_full"}
    for r in ROWS:
        assert not r["unmatched_mapper_layers"], r["name"]
        g = CNN_PRESETS[r["preset"]](1)  # every convolution op of the preset has its row
        convs = [n for n, d in g.nodes(data=True) if getattr(d["op"].attrs, "conv", None) is not None]
        assert [row["layer"] for row in r["layers"]] == convs, r["name"]
        # a 1x1 fully connected layer is the mapper's matmul: NVIDIA's is a 1x1 convolution, left unmatched
        assert r["unmatched_nvidia_operations"] <= 2


def test_the_figures_add_up():
    for r in ROWS:
        layers = sum(row["nvidia_cycles"] for row in r["layers"])
        other = sum(r["nvidia_other_cycles"].values())
        # the network's time holds its operations' (they run in a chain: none overlaps another in these logs)
        assert r["nvidia_cycles"] >= layers + other > 0, r["name"]
        for row in r["layers"]:
            assert row["ratio"] == round(row["mapper_cycles"] / row["nvidia_cycles"], 3)
            assert bool(row["reasons"]) == (abs(row["mapper_cycles"] / row["nvidia_cycles"] - 1) >= 0.1)


ROOTS = {"risc-v-nvdla": os.environ.get("NVDLA_RISC_V_NVDLA"), "gem5-nvdla": os.environ.get("NVDLA_GEM5_NVDLA")}


@pytest.mark.skipif(not all(ROOTS.values()), reason="set NVDLA_RISC_V_NVDLA and NVDLA_GEM5_NVDLA to the checkouts")
def test_a_rerun_gives_the_committed_rows():
    for net, row in zip(cvm.NETWORKS, ROWS, strict=True):
        got = cvm.compare(net, Path(ROOTS[net.source]) / net.log)
        assert {k: v for k, v in got.items() if k != "wall_s"} == {k: v for k, v in row.items() if k != "wall_s"}
