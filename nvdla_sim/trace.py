"""Chrome / Perfetto trace export of a timeline (JSON "traceEvents", complete events, times in us)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from .stats import Event, Unit

_TIDS = {u: i for i, u in enumerate(Unit)}


def trace_events(events: Iterable[Event], *, clock_mhz: float, pid: int = 1, process: str = "nvdla") -> list[dict]:
    """Convert cycle events to Chrome trace dicts; one thread per unit, `ts`/`dur` in microseconds."""
    out: list[dict] = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}]
    used = set()
    for e in events:
        used.add(e.unit)
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": _TIDS[e.unit],
                "name": e.name,
                "ts": e.start / clock_mhz,
                "dur": max(e.end - e.start, 0) / clock_mhz,
                "args": {"start_cycle": e.start, "end_cycle": e.end},
            }
        )
    for u in used:
        out.append({"ph": "M", "pid": pid, "tid": _TIDS[u], "name": "thread_name", "args": {"name": u.value.upper()}})
    return out


def write_trace(path: str | Path, events: Iterable[Event], *, clock_mhz: float, process: str = "nvdla") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"traceEvents": trace_events(events, clock_mhz=clock_mhz, process=process), "displayTimeUnit": "ns"}
    path.write_text(json.dumps(doc))
    return path
