"""A batch of images through one convolution on NVIDIA's nv_small RTL vs the model (committed RTL rows).

validation/data/nvdla_rtl_batch.json, made by validation/nvdla_rtl/batch_programs.py: one hardware layer
per image and band, the kernels kept across the images (weight-stationary) or fetched for each
(data-stationary). CI regenerates the programs (no RTL) and checks the committed rows against the model.
"""

from __future__ import annotations

from nvdla_validation.nvdla_rtl.batch_programs import CASES, generate
from nvdla_validation.nvdla_rtl.compare import changed_programs, compare, load_rows
from nvdla_validation.nvdla_rtl.transformer_programs import DATA

DOC = load_rows(DATA.with_name("nvdla_rtl_batch.json"))
ROWS = {r["name"]: r for r in DOC["rows"]}
MODEL = {r.name: r for r in compare(DOC)}


def test_every_image_wrote_the_models_bytes_with_one_interrupt_per_hardware_layer():
    assert DOC["command"] == (
        "python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/batch "
        "--out validation/data/nvdla_rtl_batch.json"
    )
    assert set(ROWS) == {c.name for c in CASES}
    for c in CASES:
        r = ROWS[c.name]
        assert r["status"] == "pass" and r["interrupts"] == len(r["layers"]) == len(r["checks"]), c.name


def test_regenerated_programs_are_the_measured_ones(tmp_path):
    assert changed_programs(generate, DOC, tmp_path) == []


def test_the_chain_model_times_the_batches_within_the_validation_targets():
    """Within 10% each (the per-layer targets are 5% median, 25% worst); the kept kernels save the RTL
    38% on four 2x2 images whose 8 KB of weights outweigh their compute (5,687 against 9,137 cycles),
    and the model sees the saving (6,154 against 8,938)."""
    assert all(abs(r.ratio - 1) <= 0.10 for r in MODEL.values()), {n: r.ratio for n, r in MODEL.items()}
    rtl = {n: ROWS[n]["span_cycles"] for n in ("batch_ws_fc", "batch_ds_fc")}
    assert rtl["batch_ws_fc"] < 0.7 * rtl["batch_ds_fc"]
    assert MODEL["batch_ws_fc"].model_cycles < 0.75 * MODEL["batch_ds_fc"].model_cycles
