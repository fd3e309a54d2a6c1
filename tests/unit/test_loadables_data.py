"""The committed reading of NVIDIA's regression loadables (validation/data/loadables.json, made by
nvdla_validation.nvdla_sw.loadables): the shapes decoded obey the convolution and pooling arithmetic the
hardware computes (an output size from the input, kernel, stride and pads), each convolution's kernels are
as deep as its input, and with a checkout of nvdla/sw (NVDLA_SW) a rerun gives the committed rows."""

import json
import os
from pathlib import Path

import pytest

from nvdla_validation.nvdla_sw.loadables import find, row

DOC = json.loads((Path(__file__).resolve().parents[2] / "validation" / "data" / "loadables.json").read_text())
ROWS = {r["name"]: r for r in DOC["rows"]}
OPS = [(r["name"], i, o) for r in DOC["rows"] for i, o in enumerate(r["operations"])]


def _out(size: int, kernel: int, stride: int, pad_a: int, pad_b: int, dilation: int = 1) -> int:
    return (size + pad_a + pad_b - ((kernel - 1) * dilation + 1)) // stride + 1


def test_every_unit_and_the_network_are_read():
    assert {o["unit"] for _, _, o in OPS} == {"BDMA", "CONV", "SDP", "PDP", "CDP", "RUBIK"}
    lenet = ROWS["NN_L0_0"]  # Caffe's MNIST LeNet in FP16 between two CPU tasks
    assert lenet["tasks"] == ["EMU1", "DLA1", "EMU1"] and lenet["firmware_interface"] == "0.11"
    assert [o["unit"] for o in lenet["operations"]] == ["CONV", "SDP", "PDP"] * 2 + [
        "CONV",
        "SDP",
        "SDP",
        "CONV",
        "SDP",
    ]
    assert [o["dst"]["whc"] for o in lenet["operations"] if o["unit"] == "CONV"] == [
        [24, 24, 20], [8, 8, 50], [1, 1, 500], [1, 1, 10]
    ]  # fmt: skip
    assert all(r["golden_md5"] for r in ROWS.values())


@pytest.mark.parametrize(("name", "index", "op"), [o for o in OPS if o[2]["unit"] == "CONV"], ids=lambda v: str(v))
def test_convolution_shapes_obey_the_arithmetic(name, index, op):
    (w, h, c), (ow, oh, _) = op["src"]["whc"], op["dst"]["whc"]
    (kw, kh, kc), (sx, sy), (pl, pr, pt, pb), (dx, dy) = op["kernel"], op["stride"], op["pad"], op["dilation"]
    assert kc == c
    assert (ow, oh) == (_out(w, kw, sx, pl, pr, dx), _out(h, kh, sy, pt, pb, dy))
    assert op["bytes_per_kernel"] == kw * kh * kc * (1 if op["precision"] == 0 else 2)


@pytest.mark.parametrize(("name", "index", "op"), [o for o in OPS if o[2]["unit"] == "PDP"], ids=lambda v: str(v))
def test_pooling_shapes_obey_the_arithmetic(name, index, op):
    (w, h, c), (ow, oh, oc) = op["src"]["whc"], op["dst"]["whc"]
    (px, py), (sx, sy), (pl, pr, pt, pb) = op["pool"], op["stride"], op["pad"]
    assert oc == c and (ow, oh) == (_out(w, px, sx, pl, pr), _out(h, py, sy, pt, pb))


@pytest.mark.skipif(not os.environ.get("NVDLA_SW"), reason="set NVDLA_SW to a checkout of nvdla/sw")
def test_a_rerun_gives_the_committed_rows():
    found, missing = find(Path(os.environ["NVDLA_SW"]))
    assert missing == DOC["missing"]
    for name, path, golden in found:
        assert row(name, path, golden) == ROWS[name], name


# ---- the loadables run (validation/data/loadable_runs.json, nvdla_validation.nvdla_sw.loadable_runs) ----

RUNS = json.loads((Path(__file__).resolve().parents[2] / "validation" / "data" / "loadable_runs.json").read_text())
RUN_ROWS = {r["name"]: r for r in RUNS["rows"]}


def test_every_computed_output_is_the_goldens():
    """Each loadable whose outputs the model computes wrote the runtime image whose md5 NVIDIA's golden holds
    (the goldens' md5s as the reading script took them from lead.md5, loadables.json)."""
    computed = [r for r in RUN_ROWS.values() if r.get("model_md5")]
    for r in computed:
        assert r["golden_md5"] == ROWS[r["name"]]["golden_md5"] and r["model_md5"] == r["golden_md5"], r["name"]
        assert r["match"] is True and r["outputs_not_computed"] is None
    # every loadable in the mirror: the 14 unit tests, Rubik's contract among them, and LeNet whole (CPU task,
    # DLA task, CPU softmax)
    assert {r["name"] for r in computed} == set(RUN_ROWS) and {"NN_L0_0", "RBK_L0_0"} <= set(RUN_ROWS)
    assert len(computed) == 15


def test_each_build_runs_its_own_loadables():
    assert {r["hw"] for r in RUN_ROWS.values() if r["name"].endswith("_small")} == {"nv_small_rtl_tb"}
    assert {r["hw"] for r in RUN_ROWS.values() if r["name"].endswith("_large")} == {"nv_large_rtl_tb"}
    lenet = RUN_ROWS["NN_L0_0"]  # 11 firmware operations: 4 convolutions with their SDP passes on the fly
    assert lenet["firmware_operations"] == 11 and len(lenet["operations"]) == 7
    for r in RUN_ROWS.values():
        if "cycles" in r:  # the network's time holds each operation's and the driver's register accesses
            assert r["cycles"] >= max(o["end"] for o in r["operations"]) >= sum(o["cycles"] for o in r["operations"])


@pytest.mark.skipif(not os.environ.get("NVDLA_SW"), reason="set NVDLA_SW to a checkout of nvdla/sw")
def test_a_rerun_of_the_loadables_gives_the_committed_rows():
    from nvdla_validation.nvdla_sw import loadable_runs

    found, missing = find(Path(os.environ["NVDLA_SW"]))
    assert missing == RUNS["missing"]
    for name, path, golden in found:
        assert loadable_runs.row(name, path, golden) == RUN_ROWS[name], name


# ---- the loadables on NVIDIA's RTL (validation/data/nvdla_rtl_loadables*.json, nvdla_rtl.loadable_rtl) ----

DATA = Path(__file__).resolve().parents[2] / "validation" / "data"
RTL = {
    "_small": json.loads((DATA / "nvdla_rtl_loadables.json").read_text()),
    "_large": json.loads((DATA / "nvdla_rtl_loadables_nv_large.json").read_text()),
}


@pytest.mark.parametrize("suffix", sorted(RTL))
def test_nvidias_rtl_runs_the_firmwares_programs_to_the_goldens(suffix):
    """Each nv_small (nv_large) regression loadable, programmed by the model's firmware, ran on NVIDIA's
    nv_small (master's nv_large) RTL: the RTL's output equalled the model's byte for byte (the testbench's dump
    check), whose md5 is NVIDIA's golden; the network's time within 5% of the RTL's, each operation's within
    5%, the span the same on both sides (from the first register write)."""
    rows = {r["name"]: r for r in RTL[suffix]["rows"]}
    assert set(rows) == {n for n in RUN_ROWS if n.endswith(suffix)} == {
        f"{u}_L0_0{suffix}" for u in ("CONV_D", "SDP_X1", "PDP", "CDP")
    }  # fmt: skip
    for name, r in rows.items():
        assert r["status"] == "pass" and r["model_md5"] == ROWS[name]["golden_md5"], name
        assert abs(r["model_cycles"] / r["rtl_cycles"] - 1) < 0.05, name
        for op in r["operations"]:
            assert abs(op["model_cycles"] / op["rtl_cycles"] - 1) < 0.05, (name, op)
    # the span: the operations' own time is inside it, with at least a write and the end read around each
    for r in rows.values():
        assert r["rtl_cycles"] > sum(op["rtl_cycles"] for op in r["operations"]) + 19


NV_FULL = json.loads((DATA / "nvdla_rtl_loadables_nv_full.json").read_text())


def test_nv_fulls_loadables_run_on_its_rtl_to_the_goldens():
    """The seven nv_full regression loadables (no build suffix: BDMA, CDP, CONV_D, NN_L0_0 = LeNet in FP16
    whole, PDP, RBK, SDP_X1), programmed by the model's firmware, ran on NVIDIA's nv_full RTL (branch
    nvdlav1): each output equal to the model's byte for byte (LeNet's: its DLA task's logits, the CPU softmax
    not being the RTL's), whose md5 is NVIDIA's golden for the single-unit ones. Cycles as they stand
    (measured 2026-12-07): LeNet whole +0.4%, CONV_D +0.1%, PDP +1.1%, SDP_X1 -1.2%, Rubik +2.4% (its
    requests' event timing, fitted on programs of our own, not on this one), BDMA +4.8% (its transfer +2.4%,
    the rest the driver's CSB accesses and where its status poll fell), CDP -1.3% (INT16 LRN: CDP takes
    its throughput in bytes, 4 INT16 elements a cycle; -17.7% at 8)."""
    rows = {r["name"]: r for r in NV_FULL["rows"]}
    assert set(rows) == {f"{u}_L0_0" for u in ("BDMA", "CDP", "CONV_D", "NN", "PDP", "RBK", "SDP_X1")}
    assert all(r["status"] == "pass" for r in rows.values())
    for name, r in rows.items():
        if name != "NN_L0_0":
            assert r["model_md5"] == ROWS[name]["golden_md5"], name
    err = {n: r["model_cycles"] / r["rtl_cycles"] - 1 for n, r in rows.items()}
    assert all(abs(err[n]) < 0.02 for n in ("CONV_D_L0_0", "NN_L0_0", "PDP_L0_0", "SDP_X1_L0_0")), err
    assert abs(err["RBK_L0_0"]) < 0.05 and abs(err["BDMA_L0_0"]) < 0.05 and abs(err["CDP_L0_0"]) < 0.02, err
    assert all(abs(e) < 0.2 for e in err.values()), err
