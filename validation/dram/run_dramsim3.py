"""Run the request streams of streams.py on DRAMsim3 built from a user's checkout, and write what it measured.

    python -m nvdla_validation.dram.run_dramsim3 DRAMSIM3 [--build DIR] [--out FILE] [--only NAME]

DRAMSIM3 is a checkout of github.com/umd-memsys/DRAMsim3 or a bare git mirror of it. Its sources are copied
into the build folder (default: $XDG_CACHE_HOME/nvdla-sim/dramsim3/<commit>, outside this repository and the
checkout, kept between runs) and built there with CMake (its library), with this project's driver
(dramsim3_driver.cc) linked against it. Each stream runs from its first request ready (cycle 0) until its
last request completes (a read's data returned; a write taken into the controller's write buffer, as
DRAMsim3 posts writes). Written per stream: the transactions and their bytes, the cycles and bandwidth, the
read latency from a request's ready cycle (mean, median, p90, max) and from its acceptance, and DRAMsim3's
own counts (activates, precharges, row hits, refreshes) and energy. The default output is
validation/data/dramsim3_streams.json.
"""

from __future__ import annotations

import argparse
import configparser
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from nvdla_sim.files import write_json
from nvdla_sim.system.dram import ControllerPolicy, DramDevice, percentile
from nvdla_validation.dram.streams import DRAMSIM3_CONFIG, ONE_CHANNEL_OF, STREAMS, Stream, trace_text

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "dramsim3_streams.json"

DRIVER = HERE / "dramsim3_driver.cc"
COUNTS = ("num_act_cmds", "num_pre_cmds", "num_read_row_hits", "num_write_row_hits", "num_ref_cmds",
          "num_read_cmds", "num_write_cmds")  # fmt: skip
ENERGY = ("act_energy", "read_energy", "write_energy", "ref_energy", "total_energy")  # pJ, DRAMsim3's


class Failure(Exception):
    """A step that cannot go on: one line naming what and where."""


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise Failure(f"{cmd[0]}: not found (DRAMsim3 needs cmake, make and a C++ compiler)") from None
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise Failure(f"{' '.join(cmd[:3])} failed in {cwd or '.'}: {' / '.join(tail)}")
    return done.stdout


def source_commit(src: Path) -> str:
    if not src.exists():
        raise Failure(f"{src}: no such checkout of DRAMsim3 (git clone https://github.com/umd-memsys/DRAMsim3)")
    try:
        return _run(["git", "-C", str(src), "rev-parse", "HEAD"]).strip()
    except Failure:
        raise Failure(f"{src}: not a git checkout or mirror of DRAMsim3") from None


def build(src: Path, folder: Path) -> Path:
    """The driver built against DRAMsim3 in `folder` (built once per commit); returns its path."""
    driver = folder / "dramsim3_driver"
    if driver.exists() and driver.stat().st_mtime >= DRIVER.stat().st_mtime:
        return driver
    copy = folder / "src"
    if copy.exists():
        shutil.rmtree(copy)
    copy.mkdir(parents=True)
    if (src / "src" / "dramsim3.h").is_file():  # a checkout
        shutil.copytree(src, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git", "build"))
    else:  # a bare mirror
        archive = subprocess.run(["git", "-C", str(src), "archive", "HEAD"], capture_output=True, check=False)
        if archive.returncode:
            raise Failure(f"{src}: git archive HEAD failed (not a DRAMsim3 checkout or mirror)")
        subprocess.run(["tar", "x", "-C", str(copy)], input=archive.stdout, check=True)
    if not (copy / "src" / "dramsim3.h").is_file():
        raise Failure(f"{src}: no src/dramsim3.h: not a checkout of DRAMsim3")
    cmake = folder / "cmake"
    _run(["cmake", "-S", str(copy), "-B", str(cmake), "-DCMAKE_BUILD_TYPE=Release"])
    _run(["make", "-C", str(cmake), f"-j{os.cpu_count() or 1}", "dramsim3"])
    _run(["c++", "-O2", "-std=c++11", f"-I{copy / 'src'}", str(DRIVER), f"-L{copy}", "-ldramsim3",
          f"-Wl,-rpath,{copy}", "-o", str(driver)])  # fmt: skip
    return driver


def write_one_channel_configs(configs: Path) -> None:
    """Beside DRAMsim3's .ini files, one channel of each multi-channel part (streams.ONE_CHANNEL_OF): its
    .ini with `channels = 1`, every other value as DRAMsim3 ships it."""
    for derived, original in ONE_CHANNEL_OF.items():
        ini = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
        ini.optionxform = str  # keep DRAMsim3's key case
        if not ini.read(configs / f"{original}.ini"):
            raise Failure(f"{configs / original}.ini: missing from the checkout (its one channel is {derived})")
        ini.set("system", "channels", "1")
        with open(configs / f"{derived}.ini", "w") as f:
            ini.write(f)


def check_device(dev: DramDevice, ini: Path) -> None:
    """Every figure the DRAM model holds for `dev` (geometry, mapping, timing, power) and its controller's policy
    are those of DRAMsim3's .ini."""
    if not ini.is_file():
        raise Failure(f"{ini}: missing from the checkout (the streams name DRAMsim3 config {ini.stem})")
    c = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    c.read(ini)
    width = c.getint("dram_structure", "device_width")
    theirs = {
        "bus_bits": c.getint("system", "bus_width"), "burst_length": c.getint("dram_structure", "BL"),
        "columns": c.getint("dram_structure", "columns"), "bankgroups": c.getint("dram_structure", "bankgroups"),
        "banks_per_group": c.getint("dram_structure", "banks_per_group"),
        "rows": c.getint("dram_structure", "rows"), "tck_ns": c.getfloat("timing", "tCK"),
        "mapping": c.get("system", "address_mapping"), "device_width": width,
    }  # fmt: skip
    # what DRAMsim3 runs where its .ini is silent (configuration.cc's defaults); HBM's activate to read and to
    # write are tRCDRD and tRCDWR, its columns twice the .ini's (a column of device_width x 2: prefetch)
    hbm = c.get("dram_structure", "protocol").startswith("HBM")
    if hbm:
        theirs["columns"] *= 2
    banks = theirs["bankgroups"] * theirs["banks_per_group"]
    megs_per_rank = theirs["rows"] * theirs["columns"] * width * banks // 8 // (1 << 20) * (theirs["bus_bits"] // width)
    theirs["ranks"] = max(1, c.getint("system", "channel_size") // megs_per_rank)
    defaults = {"tRTRS": 2, "tRTP": 5, "AL": 0, "tPPD": 0}
    timing = ("CL", "CWL", "tRCD", "tRP", "tRAS", "tRFC", "tREFI", "tRRD_S", "tRRD_L", "tWTR_S", "tWTR_L", "tFAW",
              "tWR", "tRTP", "tCCD_S", "tCCD_L", "tRTRS", "AL", "tPPD")  # fmt: skip
    theirs |= {k: c.getint("timing", "tRCDRD" if hbm and k == "tRCD" else k, fallback=defaults.get(k)) for k in timing}
    if hbm:
        theirs |= {"tRCDWR": c.getint("timing", "tRCDWR"), "dual_command": True}
    theirs |= {k: c.getfloat("power", k) for k in ("VDD", "IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W", "IDD5AB")}
    wrong = {k: (getattr(dev, k), v) for k, v in theirs.items() if getattr(dev, k) != v}
    policy = ControllerPolicy()
    system = {
        "channels": (1, c.getint("system", "channels")),
        "trans_queue_size": (policy.transactions, c.getint("system", "trans_queue_size")),
        "cmd_queue_size": (policy.bank_queue, c.getint("system", "cmd_queue_size")),
        "queue_structure": ("PER_BANK", c.get("system", "queue_structure")),
        "row_buf_policy": ("OPEN_PAGE", c.get("system", "row_buf_policy")),
        "refresh_policy": ("RANK_LEVEL_STAGGERED", c.get("system", "refresh_policy", fallback="RANK_LEVEL_STAGGERED")),
    }
    wrong |= {k: v for k, v in system.items() if v[0] != v[1]}
    if wrong:
        raise Failure(f"{ini}: differs from the DRAM model's {dev.name} (the model, the .ini): {wrong}")


def run_stream(driver: Path, src_copy: Path, stream: Stream) -> dict:
    ini = src_copy / "configs" / f"{stream.dramsim3_config}.ini"
    requests = stream.requests()
    with tempfile.TemporaryDirectory(prefix="dramsim3_") as tmp:
        t = Path(tmp)
        (t / "requests.txt").write_text(trace_text(requests))
        _run([str(driver), str(ini), str(t / "requests.txt"), str(t)])
        got = json.loads((t / "requests.json").read_text())
        stats = json.loads((t / "dramsim3.json").read_text())["0"]
    dev = stream.device
    if (got["bus_bits"], got["burst_length"], got["tck_ns"]) != (dev.bus_bits, dev.burst_length, dev.tck_ns):
        raise Failure(f"{stream.name}: DRAMsim3 ran another device than streams.py describes")
    cycles = got["last_done"] + 1
    nbytes = len(requests) * dev.request_bytes
    reads = got["read_latency_from_ready"]
    row = {
        "name": stream.name, "device": stream.dramsim3_config, "pattern": stream.pattern, "what": stream.what,
        "requests": len(requests), "reads": got["reads"], "writes": got["writes"], "request_bytes": dev.request_bytes,
        "bytes": nbytes, "tck_ns": dev.tck_ns, "cycles": cycles,
        "bandwidth_gbs": round(nbytes / (cycles * dev.tck_ns), 4),
        "peak_gbs": round(dev.request_bytes / (dev.burst_cycles * dev.tck_ns), 4),
    }  # fmt: skip
    if reads:
        row["read_latency_cycles"] = {
            "mean": round(statistics.fmean(reads), 3), "p50": percentile(reads, 0.5), "p90": percentile(reads, 0.9),
            "max": float(max(reads)), "mean_from_accept": round(statistics.fmean(got["read_latency_from_accept"]), 3),
        }  # fmt: skip
    row["dramsim3"] = {k: stats[k] for k in COUNTS} | {f"{k}_pj": round(stats[k], 1) for k in ENERGY}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dramsim3", type=Path, help="a checkout or bare git mirror of umd-memsys/DRAMsim3")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nvdla-sim" / "dramsim3"
    ap.add_argument("--build", type=Path, default=None, help=f"build folder (default {cache}/<commit>)")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the results")
    ap.add_argument("--only", default=None, help="run only the streams whose name contains this")
    args = ap.parse_args(argv)
    try:
        commit = source_commit(args.dramsim3)
        folder = args.build or cache / commit
        driver = build(args.dramsim3, folder)
        streams = [s for s in STREAMS if args.only is None or args.only in s.name]
        if not streams:
            raise Failure(f"--only {args.only!r}: no stream's name contains it; names: {STREAMS[0].name}, ...")
        write_one_channel_configs(folder / "src" / "configs")
        for dev in {s.device for s in streams}:
            check_device(dev, folder / "src" / "configs" / f"{DRAMSIM3_CONFIG[dev.name]}.ini")
        rows = []
        for s in streams:
            rows.append(run_stream(driver, folder / "src", s))
            r = rows[-1]
            lat = r.get("read_latency_cycles", {}).get("mean", "-")
            print(f"{s.name:50s} {r['cycles']:8,d} cycles  {r['bandwidth_gbs']:7.2f} GB/s  read latency {lat}")
    except Failure as e:
        print(f"run_dramsim3: {e}", file=sys.stderr)
        return 2
    doc = {
        "what": "DRAMsim3 (umd-memsys/DRAMsim3) on the request streams of nvdla_validation.dram.streams",
        "command": "python -m nvdla_validation.dram.run_dramsim3 DRAMSIM3_CHECKOUT",
        "source_commit": commit,
        "date": datetime.date.today().isoformat(),
        "cycle_definition": "memory clock cycles (tCK) from the first request ready (cycle 0) to the last request "
        "completed (a read's data returned, a write taken into the controller's write buffer); requests offered "
        "in order, one a cycle at most, a request the controller cannot take holding back those behind it",
        "rows": rows,
    }
    write_json(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
