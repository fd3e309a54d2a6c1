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
    assert got["bandwidth_gbs"] == pytest.approx(ref["bandwidth_gbs"], abs=1e-3)
    assert got["read_latency_mean"] == pytest.approx(ref["read_latency_cycles"]["mean_from_accept"], abs=1e-3)
    assert got["activates"] == ref["dramsim3"]["num_act_cmds"]
    assert main(["dram", str(f), "--device", device]) == 0
    assert f"{ref['cycles']:,} memory clocks" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "device", "message"),
    [
        ("0 0x0 R\n", "DDR5", "unknown DRAM device 'DDR5'; devices: LPDDR4-2400, DDR4-3200"),
        ("0 0x0 X\n", "LPDDR4-2400", ":1: expected 'CYCLE ADDRESS R|W', not '0 0x0 X'"),
        ("0 zero R\n", "LPDDR4-2400", ":1: CYCLE and ADDRESS must be integers"),
        ("5 0x0 R\n3 0x80 R\n", "LPDDR4-2400", ":2: cycle 3 is before the previous request's 5"),
        (
            "0 0x40 R\n",
            "LPDDR4-2400",
            ":1: address 0x40 is not a transaction of LPDDR4-2400's channel (multiples of 128",
        ),
        ("0 0x200000000 R\n", "LPDDR4-2400", "below 0x200000000"),
        ("# nothing\n", "LPDDR4-2400", "no requests (one a line: CYCLE ADDRESS R|W)"),
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
