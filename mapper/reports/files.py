"""A map's files: report.json, layers.csv and the Perfetto trace.json, written atomically into a folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from nvdla_mapper.results import MapResult
from nvdla_sim.engine.trace import span_events, write_trace_doc
from nvdla_sim.errors import NvdlaError


def trace_spans(result: MapResult) -> list[tuple[str, str, int, int]]:
    """Timeline spans per resource (NVDLA core, BDMA, host) for the Perfetto trace."""
    return [(r.task.resource.upper(), r.task.name, r.start, r.end) for r in result.results]


def output_folder(path: str | Path, flag: str) -> Path:
    """The folder a command writes into, created if missing; a one-line error if it cannot be."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise NvdlaError(f"{flag} {out}: exists and is not a folder; give a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NvdlaError(f"{flag} {out}: cannot create the folder ({e.strerror})") from None
    return out


def write_results(result: MapResult, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, layers.csv and trace.json (and return their paths)."""
    out = output_folder(out_dir, "--report")
    d = result.to_dict()
    paths = {"json": out / "report.json", "csv": out / "layers.csv", "trace": out / "trace.json"}
    process = f"{result.model} on {result.hw.fingerprint}"
    write_trace_doc(paths["trace"], span_events(trace_spans(result), clock_mhz=result.hw.clock_mhz, process=process))
    tmp = paths["json"].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(d, indent=2))
    tmp.replace(paths["json"])
    with paths["csv"].open("w", newline="") as f:
        rows = d["layers"]
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["name"])
        w.writeheader()
        w.writerows(rows)
    return paths
