"""A map's files: report.json, layers.csv and the Perfetto trace.json, written atomically into a folder."""

from __future__ import annotations

from pathlib import Path

from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import layer_events
from nvdla_mapper.reports.power import counter_events
from nvdla_mapper.results import MapResult
from nvdla_sim.engine.stats import Unit
from nvdla_sim.engine.trace import span_events, write_trace_doc
from nvdla_sim.errors import NvdlaError
from nvdla_sim.files import write_json, write_table
from nvdla_sim.processors import fixed_latency, processor_of

# Timeline tracks of a map's trace: a unit's events go to its track (CSC and CMAC work in lock step; the
# conv pipeline's drain is SDP's, its writes the write DMA's)
UNIT_TRACKS = {
    Unit.CDMA: "CDMA", Unit.CSC: "CSC/CMAC", Unit.CMAC: "CSC/CMAC", Unit.CACC: "CACC", Unit.SDP: "SDP",
    Unit.PDP: "PDP", Unit.CDP: "CDP", Unit.DRAM: "DMA write", Unit.SRAM: "DMA write",
}  # fmt: skip


def trace_spans(result: MapResult) -> list[tuple[str, str, int, int]]:
    """Timeline spans for the Perfetto trace: the hardware layers on the `NVDLA layers` track, and under
    them one track per unit (CDMA, CSC/CMAC, CACC, SDP, PDP, CDP, DMA write) with each layer's window of
    activity on that unit: from its first event in the first instance to its last in the last instance,
    offset by the layer's launch and kept inside the layer's span (so a unit's slices never overlap: the
    core runs one layer at a time); BDMA copies and host work on tracks of their own."""
    spans: list[tuple[str, str, int, int]] = []
    hw = result.hw
    for r in result.results:
        t = r.task
        if t.resource is not Resource.NVDLA:  # a processor beside the core (a copy), or the host
            label = processor_of(t.layer).label if t.layer is not None else t.resource.value
            spans.append((label, t.name, r.start, r.end))
            continue
        spans.append(("NVDLA layers", t.name, r.start, r.end))
        launch = fixed_latency(t.layer, hw)[0]
        windows: dict[str, list[int]] = {}
        for e in layer_events(t.layer, hw, t.plan_at):
            w = windows.setdefault(UNIT_TRACKS.get(e.unit, e.unit.value.upper()), [e.start, e.end])
            w[0], w[1] = min(w[0], e.start), max(w[1], e.end)
        tail = r.end - r.start - r.cycles_per_instance  # the later instances, after the first
        for track, (a, b) in windows.items():
            start = min(r.start + launch + a, r.end)
            spans.append((track, t.name, start, max(start, min(r.start + launch + b + tail, r.end))))
    return spans


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


def write_results(result: MapResult, out_dir: str | Path, *, options: dict | None = None) -> dict[str, Path]:
    """Write report.json, layers.csv and trace.json (the timeline and a power counter track), and return
    their paths. `options`: what produced the result (the command's options), recorded in report.json."""
    out = output_folder(out_dir, "--report")
    d = result.to_dict() | ({"options": options} if options is not None else {})
    paths = {"json": out / "report.json", "csv": out / "layers.csv", "trace": out / "trace.json"}
    process = f"{result.model} on {result.hw.fingerprint}"
    spans = span_events(trace_spans(result), clock_mhz=result.hw.clock_mhz, process=process)
    write_trace_doc(paths["trace"], spans + counter_events(d))
    write_json(paths["json"], d, indent=2, newline=False)
    rows = d["layers"]
    write_table(paths["csv"], list(rows[0]) if rows else ["name"], rows)
    return paths
