"""`nvdla dram STREAM --device NAME`: a request stream timed on the DRAM model, end to end through the CLI,
against DRAMsim3's committed figures for the same stream; bad input gets one line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_cli.main import main
from nvdla_validation.dram.streams import STREAMS, trace_text

DOC = json.loads((Path(__file__).resolve().parents[2] / "validation/data/dramsim3_streams.json").read_text())
ROWS = {r["name"]: r for r in DOC["rows"]}


@pytest.mark.parametrize(("name", "device"), [("seq_read@LPDDR4_8Gb_x16_2400", "LPDDR4-2400"),
                                              ("two_masters_read_write@DDR4_8Gb_x16_3200", "DDR4-3200")])  # fmt: skip
def test_a_stream_file_times_as_dramsim3_did(name, device, tmp_path, capsys):
    stream = next(s for s in STREAMS if s.name == name)
    f = tmp_path / "stream.txt"
    f.write_text(trace_text(stream.requests()))
    assert main(["dram", str(f), "--device", device, "--json"]) == 0
    got, ref = json.loads(capsys.readouterr().out), ROWS[name]
    assert (got["cycles"], got["requests"], got["writes"]) == (ref["cycles"], ref["requests"], ref["writes"])
    assert got["served_gbs"] == pytest.approx(ref["bandwidth_gbs"], abs=1e-3)
    # the bus: its bursts (DRAMsim3's read and write commands) over the time, within its peak
    bursts = ref["dramsim3"]["num_read_cmds"] + ref["dramsim3"]["num_write_cmds"]
    assert got["bus_gbs"] == pytest.approx(bursts * ref["request_bytes"] / (ref["cycles"] * ref["tck_ns"]), abs=1e-3)
    assert got["bus_gbs"] <= got["peak_gbs"]
    e = got["energy"]
    assert e["total"] == pytest.approx(ref["dramsim3"]["total_energy_pj"] * ref["tck_ns"], rel=1e-6)
    assert got["energy_pj_per_bus_byte"] == pytest.approx(e["total"] / (bursts * ref["request_bytes"]), rel=1e-3)
    assert got["read_latency_mean"] == pytest.approx(ref["read_latency_cycles"]["mean_from_accept"], abs=1e-3)
    assert got["activates"] == ref["dramsim3"]["num_act_cmds"]
    assert main(["dram", str(f), "--device", device]) == 0
    assert f"{ref['cycles']:,} memory clocks" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "device", "message"),
    [
        ("0 0x0 R\n", "DDR5", "unknown DRAM device 'DDR5'; devices: LPDDR4-2400, DDR4-3200"),
        ("0 0x0 X\n", "LPDDR4-2400", ":1: expected 'CYCLE ADDRESS R|W [MASTER]', not '0 0x0 X'"),
        ("0 0x0 R a b\n", "LPDDR4-2400", ":1: expected 'CYCLE ADDRESS R|W [MASTER]'"),
        ("0 zero R\n", "LPDDR4-2400", ":1: CYCLE and ADDRESS must be integers"),
        ("5 0x0 R\n3 0x80 R\n", "LPDDR4-2400", ":2: cycle 3 is before the previous request's 5"),
        (
            "0 0x40 R\n",
            "LPDDR4-2400",
            ":1: address 0x40 is not a transaction of LPDDR4-2400's channel (multiples of 128",
        ),
        ("0 0x200000000 R\n", "LPDDR4-2400", "below 0x200000000"),
        ("# nothing\n", "LPDDR4-2400", "no requests (one a line: CYCLE ADDRESS R|W [MASTER])"),
        ("0 0x0 R a\n0 0x80 R\n", "LPDDR4-2400", "request 2 names no master where others do"),
    ],
)
def test_bad_input_is_one_line(text, device, message, tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text(text)
    assert main(["dram", str(f), "--device", device]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err


def test_a_missing_stream_file(tmp_path, capsys):
    assert main(["dram", str(tmp_path / "none.txt")]) == 2
    assert "cannot read the request stream" in capsys.readouterr().err


def test_two_streaming_masters_on_one_channel_each_get_half(tmp_path, capsys):
    """The saturated case by hand: two masters each reading 2,048 transactions of 128 bytes in sequence, all
    ready at once, in two ranks of one LPDDR4-2400 channel (no row of one in the other's banks). The bus moves
    one 128-byte burst every 8 clocks at best (19.28 GB/s); taking the masters' requests in turn it serves
    each half of that: each gets 9.64 GB/s (within 5%: the rows opened and the refreshes), and takes about
    twice as long as alone (where one stream has the whole bus)."""
    from nvdla_validation.dram.streams import LPDDR4_2400

    rank1 = LPDDR4_2400.address(rank=1)
    lines = [f"0 {i * 128:#x} R first\n0 {rank1 + i * 128:#x} R second\n" for i in range(2048)]
    f = tmp_path / "two.txt"
    f.write_text("".join(lines))
    assert main(["dram", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    half = 128 / (8 * 0.83) / 2
    assert [m["name"] for m in doc["masters"]] == ["first", "second"]
    for m in doc["masters"]:
        assert m["shared_gbs"] == pytest.approx(half, rel=0.05)
        assert m["alone_gbs"] == pytest.approx(2 * half, rel=0.08)
        assert 1.8 < m["slowdown"] < 2.2
    a, b = doc["masters"]
    assert a["shared_gbs"] == pytest.approx(b["shared_gbs"], rel=0.01)  # a fair share
    assert main(["dram", str(f)]) == 0
    assert "slowdown" in capsys.readouterr().out
