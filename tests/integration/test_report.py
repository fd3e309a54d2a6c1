"""report.html: self-contained, its tables match report.json, and it renders in headless Chromium."""

import base64
import io
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from PIL import Image

from nvdla_cli.main import main
from tests.unit.test_trace import partial_overlaps, thread_names


class _Doc(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: dict[str, str] = {}
        self.external: list[str] = []
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(a.get("id", ""), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""
        elif tag == "img":
            self.images[a.get("id", "")] = a.get("src", "")
        if tag in ("script", "link") or (tag == "img" and not a.get("src", "").startswith("data:")):
            self.external.append(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    assert main(["map", "gpt2", "--hw", "nv_large", "--seq", "64", "--report", str(out)]) == 0
    return out


def test_html_matches_json(report):
    d = json.loads((report / "report.json").read_text())
    doc = _Doc()
    doc.feed((report / "report.html").read_text())
    assert not doc.external, "report must be self-contained"
    summary = {row[0]: row[1] for row in doc.tables["summary"][1:]}
    assert summary["end-to-end cycles"] == f"{d['total_cycles']:,}"
    assert summary["latency"] == f"{d['latency_ms']:.3f} ms"
    assert summary["MAC utilization (hardware MACs)"] == f"{100 * d['hardware_mac_utilization']:.1f}%"
    assert summary["MAC utilization (model MACs)"] == f"{100 * d['model_mac_utilization']:.1f}%"
    layers = doc.tables["layers"][1:]
    assert len(layers) == len(d["layers"])
    assert [r[0] for r in layers] == [r["name"] for r in d["layers"]]
    assert [r[4] for r in layers] == [f"{r['cycles']:,}" for r in d["layers"]]
    bounds = {r[0]: r[1] for r in doc.tables["bounds"][1:]}
    assert bounds == {b: f"{c:,}" for b, c in d["cycles_by_bound"].items()}
    # every task's time under its label: the labels split the same cycles the op groups do
    assert sum(d["cycles_by_bound"].values()) == sum(d["cycles_by_group"].values())
    for label in d["cycles_by_bound"]:
        assert d["cycles_by_bound"][label] == sum(r["cycles"] for r in d["layers"] if r["bound"] == label)
    energy = {r[0]: r[1] for r in doc.tables["energy"][1:]}
    assert energy["NVDLA core energy per inference"] == f"{d['energy']['core_uj_per_inference']:,.1f} uJ"
    assert energy["average core power"] == f"{d['energy']['average_core_power_mw']:,.1f} mW"
    units = {r[0]: r[3] for r in doc.tables["units"][1:]}
    assert units == {u: f"{100 * v:.1f}%" for u, v in d["unit_utilization"].items()}
    assert set(doc.images) == {"plot-roofline", "plot-breakdown", "plot-units", "plot-timeline", "plot-energy"}
    for src in doc.images.values():
        img = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        assert img.size[0] > 200 and img.size[1] > 100
    trace = json.loads((report / "trace.json").read_text())
    tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    layer_spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and tracks[e["tid"]] == "NVDLA layers"]
    assert len(layer_spans) == len([r for r in d["layers"] if r["resource"] == "nvdla"])
    assert {"NVDLA layers", "CDMA", "CSC/CMAC", "SDP", "DMA write"} <= thread_names(trace)
    assert partial_overlaps(trace) == []


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")
def test_renders_in_headless_chromium(report, tmp_path):
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    url = (report / "report.html").as_uri()
    r = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert '<table id="layers">' in r.stdout and r.stdout.count("<img") == 5
    console_errors = [line for line in r.stderr.splitlines() if "CONSOLE" in line and "rror" in line]
    assert not console_errors, console_errors
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, "--window-size=1200,1600", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100  # something was drawn, not a blank page


def test_generate_report_has_readable_headers_and_rounded_figures(tmp_path):
    """Issue #26: the generate summary showed snake_case keys and raw figures (334.4078, 75497472)."""
    import re

    assert main(["generate", "gpt2", "--hw", "nv_small", "--prompt", "8", "--new-tokens", "3", "--batch", "1,2",
                "--report", str(tmp_path)]) == 0  # fmt: skip
    page = (tmp_path / "report.html").read_text()
    table = page[page.index('<table id="runs">') : page.index("</table>")]
    headers = re.findall(r"<th>(.*?)</th>", table)
    assert headers[:3] == ["Batch", "Time to first token (ms)", "Total (ms)"]
    assert not [h for h in headers if re.fullmatch(r"[a-z]+(_[a-z]+)+", h)]
    cells = re.findall(r"<td>(.*?)</td>", table)
    assert cells and not [c for c in cells if re.search(r"\d\.\d{4,}", c) or re.fullmatch(r"\d{5,}", c)]
    # KV cache at the end, batch 2: 2 x 12 layers x 768 x (8 + 3 - 1 positions) bytes (INT8), in MiB
    assert f"{2 * 2 * 12 * 768 * 10 / 2**20:,.1f}" in cells


def test_the_report_says_what_timed_its_memory(report):
    """nv_large's config: the fluid model, its DRAM port of 256 bits (32 bytes a clock) at 1,024 clocks a read
    (PRIMARY_MEMIF_WIDTH_256, _LATENCY_1024: configs/nv_large.toml), no fabric."""
    d = json.loads((report / "report.json").read_text())
    want = {"model": "fluid", "dram_bytes_per_cycle": 32, "dram_latency_cycles": 1024, "interconnect": "direct",
            "device": ""}  # fmt: skip
    assert d["memory"] == want
