"""Chrome / Perfetto trace export of a timeline (JSON "traceEvents", complete events, times in us)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from nvdla_sim.engine.stats import Event


def span_events(
    spans: Iterable[tuple[str, str, int, int]], *, clock_mhz: float, pid: int = 1, process: str = "nvdla"
) -> list[dict]:
    """(track, name, start cycle, end cycle) spans -> Chrome trace dicts, one thread per track."""
    out: list[dict] = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}]
    tids: dict[str, int] = {}
    for track, name, start, end in spans:
        tid = tids.setdefault(track, len(tids))
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "name": name,
                "ts": start / clock_mhz,
                "dur": max(end - start, 0) / clock_mhz,
                "args": {"start_cycle": start, "end_cycle": end},
            }
        )
    out += [{"ph": "M", "pid": pid, "tid": t, "name": "thread_name", "args": {"name": k}} for k, t in tids.items()]
    return out


def trace_events(events: Iterable[Event], *, clock_mhz: float, pid: int = 1, process: str = "nvdla") -> list[dict]:
    """Unit events -> Chrome trace dicts; one thread per unit."""
    spans = ((e.unit.value.upper(), e.name, e.start, e.end) for e in events)
    return span_events(spans, clock_mhz=clock_mhz, pid=pid, process=process)


def write_trace_doc(path: str | Path, trace: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": trace, "displayTimeUnit": "ns"}))
    return path


def write_trace(path: str | Path, events: Iterable[Event], *, clock_mhz: float, process: str = "nvdla") -> Path:
    return write_trace_doc(path, trace_events(events, clock_mhz=clock_mhz, process=process))
