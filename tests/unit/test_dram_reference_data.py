"""The DRAM reference (issue 58): validation/data/dramsim3_streams.json, DRAMsim3 run on the request streams
of nvdla_validation.dram.streams by `python -m nvdla_validation.dram.run_dramsim3 DRAMSIM3_CHECKOUT`.
Checked here without DRAMsim3: the committed rows are the streams the module makes today, and their figures
agree with the devices' arithmetic (JEDEC-style parameters of DRAMsim3's configs, written in each test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_validation.dram.streams import DDR4_3200, DRAMSIM3_CONFIG, LPDDR4_2400, STREAMS

DOC = json.loads((Path(__file__).resolve().parents[2] / "validation/data/dramsim3_streams.json").read_text())
ROWS = {r["name"]: r for r in DOC["rows"]}


def test_the_committed_rows_are_todays_streams():
    """At least 20 streams over two devices (the issue's count: 28), each with the requests streams.py makes."""
    assert len(DOC["source_commit"]) == 40 and DOC["date"] and "run_dramsim3" in DOC["command"]
    assert sorted(ROWS) == sorted(s.name for s in STREAMS), "regenerate the data: the streams changed"
    assert len(ROWS) >= 20 and {r["device"] for r in ROWS.values()} == set(DRAMSIM3_CONFIG.values())
    for s in STREAMS:
        req, row = s.requests(), ROWS[s.name]
        writes = sum(w for *_, w in req)
        assert (row["requests"], row["writes"], row["reads"]) == (len(req), writes, len(req) - writes), s.name
        assert row["bytes"] == len(req) * s.device.request_bytes


def test_device_geometry_by_hand():
    """LPDDR4-2400 x16 (DRAMsim3 LPDDR4_8Gb_x16_2400.ini): four x16 devices on a 64-bit bus, BL16: 128-byte
    transactions, 8 clocks of the bus each at tCK 0.83 ns: 128 / (8 x 0.83) = 19.28 GB/s peak. DDR4-3200 x16:
    BL8, 64 bytes in 4 clocks of 0.63 ns: 25.40 GB/s. A row of one bank: 1,024 columns of 16 bits on each of
    the four devices, 8 KB; rows 128 KB apart in the address (rochrababgco: below the row, 2 ranks, 4 banks,
    2 bank groups and the columns' transactions)."""
    assert (LPDDR4_2400.request_bytes, LPDDR4_2400.burst_cycles) == (128, 8)
    assert (DDR4_3200.request_bytes, DDR4_3200.burst_cycles) == (64, 4)
    assert ROWS["seq_read@LPDDR4_8Gb_x16_2400"]["peak_gbs"] == pytest.approx(128 / (8 * 0.83), abs=1e-3)
    assert ROWS["seq_read@DDR4_8Gb_x16_3200"]["peak_gbs"] == pytest.approx(64 / (4 * 0.63), abs=1e-3)
    for dev in (LPDDR4_2400, DDR4_3200):
        assert dev.row_bytes == 8192 and dev.address(row=1) == 128 * 1024 and dev.address(bank=1) == 8192 * 2


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_streams_figures_are_consistent(name):
    """Bandwidth is the bytes over the cycles at tCK; the bursts DRAMsim3 put on the bus in that time (its read
    and write commands: a write stream's last writes are still posted in the controller's buffer when the run
    ends) fit the bus's peak; every read waits at least a row hit's CL + the burst (LPDDR4: 17 + 8; DDR4:
    22 + 4 clocks) from its acceptance on average; a read command for each read of its own place."""
    r = ROWS[name]
    assert r["bandwidth_gbs"] == pytest.approx(r["bytes"] / (r["cycles"] * r["tck_ns"]), abs=1e-3)
    bursts = r["dramsim3"]["num_read_cmds"] + r["dramsim3"]["num_write_cmds"]
    assert bursts * r["request_bytes"] / (r["cycles"] * r["tck_ns"]) <= r["peak_gbs"]
    if not r["writes"]:
        assert r["bandwidth_gbs"] <= r["peak_gbs"]
    if r["reads"]:
        row_hit = 17 + 8 if r["device"].startswith("LPDDR4") else 22 + 4
        assert r["read_latency_cycles"]["mean_from_accept"] >= row_hit
        # reads of a place already waiting merge into one read command (the fuzzes repeat places)
        stream = next(s for s in STREAMS if s.name == name)
        places = [a for _, a, w in stream.requests() if not w]
        assert r["dramsim3"]["num_read_cmds"] <= r["reads"]
        if len(set(places)) == len(places):
            assert r["dramsim3"]["num_read_cmds"] == r["reads"]


def test_what_the_reference_says_of_the_patterns():
    """What the DRAM model of issue 58 has to reproduce, as DRAMsim3 measured it (2026-12-07): one open row
    streams at the bus's peak on LPDDR4 (99.7%: its 8 KB rows cross banks, whose activates hide); short lines
    far apart open a row for every 256 bytes (1,026 activates for 2,048 transactions; 61% of the peak); two
    rows of one bank in turn lose 27%; on DDR4 one bank group's columns follow each other at tCCD_L (8
    clocks for a 4-clock burst), so a sequential stream reaches 68% and 2 KB lines spread over bank groups
    beat it (92%)."""
    bw = {n: r["bandwidth_gbs"] / r["peak_gbs"] for n, r in ROWS.items()}
    lp, dd = "@LPDDR4_8Gb_x16_2400", "@DDR4_8Gb_x16_3200"
    assert bw["seq_read" + lp] > 0.99
    assert ROWS["lines_256_stride_64k" + lp]["dramsim3"]["num_act_cmds"] >= 1024
    assert bw["lines_256_stride_64k" + lp] < 0.65 and bw["row_conflict" + lp] < 0.75
    assert bw["seq_read" + dd] < 0.70 < 0.90 < bw["lines_2k_stride_8k" + dd]


def test_a_missing_checkout_is_one_line(capsys, tmp_path):
    """The runner's bad input: a path that is no DRAMsim3 checkout stops before any build, in one line."""
    from nvdla_validation.dram.run_dramsim3 import main

    assert main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such checkout of DRAMsim3" in err
    assert main([str(tmp_path), "--out", str(tmp_path / "x.json")]) == 2
    assert "not a git checkout or mirror of DRAMsim3" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
