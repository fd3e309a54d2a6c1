"""Self-contained HTML report (tables + matplotlib PNGs embedded as data URIs, no scripts, opens offline).

Everything shown is read from MapResult.to_dict(); the renderer only formats and draws.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from nvdla_mapper.lowering.rules import resources_phrase
from nvdla_mapper.reports.numbers import rate
from nvdla_mapper.reports.power import power_profile
from nvdla_sim.files import write_text

_BOUND_NOTE = (
    "What each layer's time is made of: compute (the MAC array), cbuf (weight loads between stripes), "
    "dram (the memory port or waits for fetches), compute+dram (neither fills three quarters of the layer; "
    "the MACs and the waits for re-fetched operands ran in turn), sdp (the output drain), host (CPU "
    "fallback), pdp and cdp (their element rates). See docs/mapping.md, 'Labels that explain'."
)

_ENERGY_NOTE = (
    "From the Accelergy project's component library (hwcomponents, CACTI for the SRAMs) at the config's "
    "node, with three overheads fitted on NVIDIA's primer table (area: wiring, control and the rest; energy: "
    "NVIDIA's energy per action against the library's, and the always-on clock tree); DRAM "
    "energy is a system figure, not the NVDLA core's. See docs/energy.md for the fit and its errors."
)


def _energy_rows(en: dict[str, Any], batch: int) -> list[list[str]]:
    per_batch = f" (the batch of {batch})" if batch > 1 else ""
    rows = [
        ["NVDLA core energy per inference", f"{en['core_uj_per_inference']:,.1f} uJ"],
        *([[f"NVDLA core energy{per_batch}", f"{en['batch_core_uj']:,.1f} uJ"]] if batch > 1 else []),
        *[[f"  {u}{per_batch}", f"{v:,.2f} uJ"] for u, v in en["by_unit_uj"].items()],
        [
            f"DRAM energy per inference ({en['dram_device']}, system; all traffic)",
            f"{en['dram_uj_per_inference']:,.1f} uJ",
        ],
        *([[f"DRAM energy{per_batch}", f"{en['batch_dram_uj']:,.1f} uJ"]] if batch > 1 else []),
        [
            f"host energy per inference (system; its busy time at {en['host_active_power_w']:g} W)",
            f"{en['host_uj_per_inference']:,.1f} uJ",
        ],
        ["average core power", f"{en['average_core_power_mw']:,.1f} mW"],
        ["peak core power (every unit at full rate)", f"{en['peak_core_power_mw']:,.1f} mW"],
        ["TOPS/W (model MACs)", f"{en['tops_per_w']:.2f}"],
        ["energy-delay product", f"{en['edp_uj_ms']:,.1f} uJ ms"],
        [f"area at {en['tech_node_nm']:g} nm", f"{en['area_mm2']:.3f} mm2"],
        *[[f"  {b}", f"{v:.3f} mm2"] for b, v in en["area_by_block_mm2"].items()],
    ]
    if en.get("zero_gating_whatif"):
        zg = en["zero_gating_whatif"]
        rows.append([zg["label"] + per_batch, f"{zg['batch_core_uj']:,.1f} uJ ({zg['batch_saved_uj']:,.1f} uJ less)"])
    return rows


def _pyplot():
    """matplotlib.pyplot with the file-only Agg backend, imported on first use (it costs about half a
    second, which a map or generate run without --report does not pay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


GROUP_COLOURS = {
    "matmul": "#4472c4",
    "attention": "#ed7d31",
    "softmax": "#a5a5a5",
    "layernorm": "#ffc000",
    "elementwise": "#5b9bd5",
    "host": "#c00000",
    "other": "#70ad47",
}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def roofline_plot(d: dict[str, Any]) -> str:
    peak, bw = d["peak_macs_per_cycle"], d["dram_bytes_per_cycle"]
    rows = [r for r in d["layers"] if r["hardware_macs"] > 0]
    fig, ax = _pyplot().subplots(figsize=(7, 4.2))
    xs = [max(r["macs_per_dram_byte"], 1e-3) for r in rows]
    lo, hi = min([*xs, 0.1]) / 2, max([*xs, peak / bw * 4]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, x * bw) for x in grid], "k-", lw=1.5, label=f"roof: {peak} MACs/cycle, {bw:g} B/cycle")
    for group in sorted({r["group"] for r in rows}):
        sel = [r for r in rows if r["group"] == group]
        ax.scatter(
            [max(r["macs_per_dram_byte"], 1e-3) for r in sel],
            [r["macs_per_cycle"] for r in sel],
            s=18,
            color=GROUP_COLOURS.get(group, "#888"),
            label=group,
            alpha=0.8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte)")
    ax.set_ylabel("achieved MACs per cycle")
    ax.set_title("Roofline (hardware layers)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    return _png(fig)


def breakdown_plot(d: dict[str, Any]) -> str:
    blocks = d["cycles_by_block"]
    names = list(blocks)
    groups = sorted({g for b in blocks.values() for g in b})
    fig, ax = _pyplot().subplots(figsize=(max(6, 0.35 * len(names)), 4))
    bottom = [0.0] * len(names)
    for g in groups:
        vals = [blocks[n].get(g, 0) / d["hw_config"]["clock_mhz"] for n in names]
        ax.bar(names, vals, bottom=bottom, color=GROUP_COLOURS.get(g, "#888"), label=g)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("busy time (us, summed over resources)")
    ax.set_title("Time by op type per block")
    ax.tick_params(axis="x", rotation=90, labelsize=7)
    ax.legend(fontsize=7)
    return _png(fig)


def units_plot(d: dict[str, Any]) -> str:
    util = d["unit_utilization"]
    fig, ax = _pyplot().subplots(figsize=(6, 3))
    names = list(util)
    ax.barh(names, [100 * util[n] for n in names], color="#4472c4")
    ax.set_xlabel("busy % of end-to-end cycles")
    ax.set_xlim(0, 100)
    ax.set_title("Per-unit utilization")
    return _png(fig)


def energy_plot(d: dict[str, Any]) -> str:
    """Energy by unit (always-on and leakage included) and the core power over time (reports.power)."""
    en = d["energy"]
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(11, 3.2), gridspec_kw={"width_ratios": [1, 2]})
    units = list(en["by_unit_uj"])
    left.barh(units, [en["by_unit_uj"][u] for u in units], color="#c0504d")
    left.set_xlabel("NVDLA energy (uJ)")
    left.set_title(f"Energy by unit ({en['batch_core_uj']:,.0f} uJ, the run)")
    clock = d["hw_config"]["clock_mhz"]
    pieces = power_profile(d)
    xs = [x for a, b, _ in pieces for x in (a / clock, b / clock)]
    ys = [p for _, _, p in pieces for _ in (0, 1)]
    right.plot(xs, ys, color="#c0504d", lw=0.8)
    right.axhline(en["average_core_power_mw"], color="#444", ls="--", lw=0.8, label="average")
    right.set_xlabel("time (us)")
    right.set_ylabel("NVDLA core power (mW)")
    right.set_title("Power over time")
    right.legend(fontsize=7)
    return _png(fig)


def timeline_plot(d: dict[str, Any]) -> str:
    rows = d["layers"]
    resources = sorted({r["resource"] for r in rows})
    fig, ax = _pyplot().subplots(figsize=(9, 1 + 0.6 * len(resources)))
    clock = d["hw_config"]["clock_mhz"]
    for i, res in enumerate(resources):
        for g in sorted({r["group"] for r in rows if r["resource"] == res}):
            spans = [
                (r["start"] / clock, (r["end"] - r["start"]) / clock)
                for r in rows
                if r["resource"] == res and r["group"] == g
            ]
            ax.broken_barh(spans, (i - 0.4, 0.8), color=GROUP_COLOURS.get(g, "#888"), label=f"{g}" if i == 0 else None)
    ax.set_yticks(range(len(resources)), resources)
    ax.set_xlabel("time (us)")
    ax.set_title("Timeline by resource")
    return _png(fig)


def _table(headers: list[str], rows: list[list[Any]], *, table_id: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _weights_section(d: dict[str, Any]) -> str:
    w = d["weights"]
    rows = [
        [k, "" if v is None else (f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v)]
        for k, v in w.items()
        if v != ""
    ]
    return f"<h2>Weights and sparsity</h2>{_table(['item', 'value'], rows, table_id='weights')}"


def _accuracy_section(d: dict[str, Any]) -> str:
    acc = d.get("accuracy")
    if not acc:
        return ""
    head = ", ".join(f"{k}: {v}" for k, v in acc.items() if k not in ("layers", "task"))
    rows = [
        [e["name"], f"{e['rel']:.5f}", f"{e['cosine']:.6f}", f"{e['max_abs']:.5f}", e["saturations"]]
        for e in acc["layers"]
    ]
    task = acc.get("task")
    task_html = ""
    if task:  # a trained model's task accuracy, float against INT8 through the datapath
        task_html = "<h3>Task accuracy of the trained model</h3>" + _table(
            ["measure", "value"], [[k, v] for k, v in task.items()], table_id="task_accuracy"
        )
    return (
        f"<h2>INT8 quantization accuracy</h2><p>{html.escape(head)}</p>"
        + task_html
        + _table(["layer", "relative error", "cosine", "max abs error", "saturations"], rows, table_id="accuracy")
    )


def render_html(d: dict[str, Any]) -> str:
    hf = d["host_fallback"]
    summary = [
        ["model", d["model"]],
        ["hardware", d["hw"]],
        ["precision / batch / seq", f"{d['precision']} / {d['batch']} / {d['seq']}"],
        ["end-to-end cycles", f"{d['total_cycles']:,}"],
        ["latency", f"{d['latency_ms']:.3f} ms"],
        ["throughput", f"{rate(d['throughput_inferences_per_s'])} inferences/s"],
        ["MACs on the hardware", f"{d['hardware_macs']:,}"],
        ["MACs of the model", f"{d['model_macs']:,}"],
        ["MAC utilization (hardware MACs)", f"{100 * d['hardware_mac_utilization']:.1f}%"],
        ["MAC utilization (model MACs)", f"{100 * d['model_mac_utilization']:.1f}%"],
        *[
            [f"{res} busy (share of the run's wall time)", f"{100 * v:.1f}%"]
            for res, v in d["busy_share_of_run_by_resource"].items()
        ],
        ["host fallback", f"{hf['tasks']} tasks, {hf['cycles']:,} cycles"],
    ]
    layers = [
        [
            r["name"],
            r["group"],
            r["resource"],
            r["count"],
            f"{r['cycles']:,}",
            f"{100 * r['hardware_mac_utilization']:.1f}%",
            r["bound"],
            r["start"],
            r["end"],
            r["note"],
        ]
        for r in d["layers"]
    ]
    units = [
        [u, f"{s['busy']:,}", f"{s['stall']:,}", f"{100 * d['unit_utilization'][u]:.1f}%"]
        for u, s in d["unit_busy"].items()
    ]
    groups = [[g, f"{c:,}"] for g, c in sorted(d["cycles_by_group"].items(), key=lambda kv: -kv[1])]
    bounds = [[b, f"{c:,}"] for b, c in sorted(d["cycles_by_bound"].items(), key=lambda kv: -kv[1])]
    host = [[n] for n in hf["ops"]] or [["none: every op runs on NVDLA"]]
    images = {
        "roofline": roofline_plot(d),
        "breakdown": breakdown_plot(d),
        "units": units_plot(d),
        "timeline": timeline_plot(d),
        "energy": energy_plot(d),
    }
    imgs = "".join(f'<figure><img id="plot-{k}" alt="{k}" src="{v}"></figure>' for k, v in images.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in d["notes"])
    return (
        _head(f"{d['model']} on {d['hw']}")
        + f"<h2>Summary</h2>{_table(['metric', 'value'], summary, table_id='summary')}"
        f"<h2>Plots</h2>{imgs}"
        f"<h2>Time by op type</h2>{_table(['group', f'cycles (summed over {resources_phrase()}, which overlap)'], groups, table_id='groups')}"
        f"<h2>Time by bound</h2><p>{_BOUND_NOTE}</p>"
        f"{_table(['bound', f'cycles (summed over {resources_phrase()}, which overlap)'], bounds, table_id='bounds')}"
        f"<h2>Per-unit utilization</h2>{_table(['unit', 'busy', 'stall', 'busy %'], units, table_id='units')}"
        f"<h2>Energy and area</h2><p>{_ENERGY_NOTE}</p>"
        f"{_table(['quantity', 'value'], _energy_rows(d['energy'], d['batch']), table_id='energy')}"
        f"<h2>Host fallback</h2>{_table(['op'], host, table_id='host')}"
        + _weights_section(d)
        + _accuracy_section(d)
        + "<h2>Per-layer</h2>"
        + _table(
            ["name", "group", "resource", "count", "cycles", "MAC util (hardware)", "bound", "start", "end", "note"],
            layers,
            table_id="layers",
        )
        + f"<h2>Notes</h2><ul>{notes}</ul></body></html>"
    )


CSS = (
    "body{font-family:sans-serif;margin:1.5em;max-width:1400px}table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:left}th{background:#eee}"
    "figure{display:inline-block;margin:.5em}img{max-width:100%}"
)


def _head(title: str) -> str:
    t = html.escape(title)
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{t}</title><style>{CSS}</style></head><body><h1>{t}</h1>"


def token_latency_plot(runs: list[dict[str, Any]]) -> str:
    """Latency of every generated token (the first is the prefill), per batch size."""
    fig, ax = _pyplot().subplots(figsize=(7, 3.6))
    for d in runs:
        ms = [c / d["clock_mhz"] / 1e3 for c in d["token_cycles"]]
        ax.plot(range(2, len(ms) + 1), ms[1:], label=f"batch {d['batch']}")
    ax.set(xlabel="generated token", ylabel="ms per decode step", title="Per-token latency (after the first token)")
    ax.legend()
    return _png(fig)


def batch_curve_plot(runs: list[dict[str, Any]]) -> str:
    """Decode throughput against step latency over the batch sizes: where batching stops paying."""
    fig, ax = _pyplot().subplots(figsize=(6, 3.6))
    xs = [d["per_token_ms"]["mean_step"] for d in runs]
    ys = [d["decode_tokens_per_s_aggregate"] for d in runs]
    ax.plot(xs, ys, marker="o")
    for d, x, y in zip(runs, xs, ys, strict=True):
        ax.annotate(f"b{d['batch']} ({d['decode']['bound']})", (x, y), fontsize=8)
    ax.set(
        xlabel="mean ms per decode step",
        ylabel="decode tokens/s (all sequences: batch / mean step)",
        title="Batch curve",
    )
    return _png(fig)


# The generate summary's columns: a label with its unit, the value from a run's dict, its format.
GENERATE_COLUMNS: list[tuple[str, Any, str]] = [
    ("Batch", lambda d: d["batch"], "{:d}"),
    ("Time to first token (ms)", lambda d: d["ttft_ms"], "{:,.2f}"),
    ("Total (ms)", lambda d: d["total_ms"], "{:,.1f}"),
    ("Tokens/s per sequence", lambda d: d["tokens_per_s_per_sequence"], "{:,.1f}"),
    ("Tokens/s, all sequences", lambda d: d["tokens_per_s_aggregate"], "{:,.1f}"),
    ("KV cache precision", lambda d: d.get("kv_precision", d["precision"]), "{}"),
    ("KV cache at the end (MiB)", lambda d: d["kv_cache_bytes_end"] / 2**20, "{:,.1f}"),
    ("Positions that fit per sequence", lambda d: d.get("fits", {}).get("max_positions_at_batch"), "{:,d}"),
    ("DRAM per token (MB)", lambda d: d["dram_bytes_per_token"] / 1e6, "{:,.2f}"),
    ("Median step (ms)", lambda d: d["per_token_ms"]["median_step"], "{:,.3f}"),
    ("Mean step (ms)", lambda d: d["per_token_ms"]["mean_step"], "{:,.3f}"),
    ("Decode tokens/s, all sequences (batch / mean step)", lambda d: d["decode_tokens_per_s_aggregate"], "{:,.1f}"),
    ("Prefill bound", lambda d: d["prefill"]["bound"], "{}"),
    ("Decode bound", lambda d: d["decode"]["bound"], "{}"),
    ("Decode DRAM busy", lambda d: d["decode"]["dram_utilization"], "{:.1%}"),
    ("Decode vs roofline", lambda d: d["decode"].get("over_roofline"), "{:.2f}x"),
    # energy and area: docs/energy.md
    ("Prefill NVDLA energy (uJ)", lambda d: d["energy"]["prefill_core_uj"], "{:,.1f}"),
    ("Decode NVDLA energy, every step (uJ)", lambda d: d["energy"]["decode_core_uj"], "{:,.1f}"),
    ("NVDLA energy, prefill + decode (uJ)", lambda d: d["energy"]["total_core_uj"], "{:,.1f}"),
    ("NVDLA energy per generated token, mean (uJ)", lambda d: d["energy"]["decode_core_uj_per_token"], "{:,.1f}"),
    ("Average NVDLA power (mW)", lambda d: d["energy"]["average_core_power_mw"], "{:,.1f}"),
    ("Peak NVDLA power (mW)", lambda d: d["energy"]["peak_core_power_mw"], "{:,.1f}"),
    ("TOPS/W (model MACs)", lambda d: d["energy"]["tops_per_w"], "{:.2f}"),
    ("DRAM energy, all (uJ)", lambda d: d["energy"]["total_dram_uj"], "{:,.1f}"),
    ("Host energy, all (uJ)", lambda d: d["energy"]["total_host_uj"], "{:,.1f}"),
    ("Area (mm2)", lambda d: d["energy"]["area_mm2"], "{:.3f}"),
]


def _cell(value: Any, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def write_generate_html(runs: list[dict[str, Any]], out_dir: str | Path) -> Path:
    """report.html of `nvdla generate`: summary per batch, per-token latency, the batch curve."""
    rows = [[_cell(get(d), fmt) for _, get, fmt in GENERATE_COLUMNS] for d in runs]
    d0 = runs[0]
    images = {"tokens": token_latency_plot(runs)}
    if len(runs) > 1:
        images["batch"] = batch_curve_plot(runs)
    imgs = "".join(f'<figure><img id="plot-{k}" alt="{k}" src="{v}"></figure>' for k, v in images.items())
    page = (
        _head(
            f"{d0['model']} generating on {d0['hw']} ({d0['precision']}, prompt {d0['prompt_tokens']}, "
            f"{d0['new_tokens']} new tokens)"
        )
        + "<h2>Summary</h2>"
        + _table([label for label, _, _ in GENERATE_COLUMNS], rows, table_id="runs")
        + _accuracy_section(d0)
        + f"<h2>Plots</h2>{imgs}</body></html>"
    )
    path = Path(out_dir) / "report.html"
    write_text(path, page)
    return path


def serve_timeline_plot(timeline: list[dict[str, Any]], capacity_blocks: int) -> str:
    """KV blocks held and the decode batch over time (ms) of a serving run."""
    plt = _pyplot()
    fig, (kv, batch) = plt.subplots(2, 1, figsize=(8, 4.5), sharex=True)
    t = [p["end_ms"] for p in timeline]
    kv.step(t, [p["kv_blocks"] for p in timeline], where="post", color="#4472c4")
    kv.axhline(capacity_blocks, color="#c00000", lw=0.8, ls="--", label="capacity")
    kv.set_ylabel("KV blocks held")
    kv.legend(loc="upper right", fontsize=8)
    dec = [p for p in timeline if p["decodes"]]
    batch.step([p["end_ms"] for p in dec], [p["decodes"] for p in dec], where="post", color="#ed7d31")
    batch.set_ylabel("decode batch")
    batch.set_xlabel("time (ms)")
    return _png(fig)


def serve_latency_plot(latencies: dict[str, list[float]]) -> str:
    """Distribution of each request's TTFT, time per output token and end-to-end latency (ms)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    for ax, (name, values) in zip(axes, latencies.items(), strict=True):
        if values:
            ax.hist(values, bins=30, color="#4472c4")
        ax.set_xlabel(name.replace("_", " "))
    axes[0].set_ylabel("requests")
    return _png(fig)


def write_serve_html(summary: dict[str, Any], timeline: list[dict[str, Any]], latencies, out_dir: str | Path) -> Path:
    """report.html of `nvdla serve`: percentiles, throughput, KV occupancy and batch over time."""
    pct = summary["percentiles"]
    rows = [[name, *(f"{v[f'p{q}']:,.3f}" if v else "-" for q in (50, 90, 99))] for name, v in pct.items()]
    info = [[k, str(v)] for k, v in summary.items() if not isinstance(v, dict)]
    info += [[k, str(v)] for k, v in summary["throughput"].items()]
    images = {
        "timeline": serve_timeline_plot(timeline, summary["kv_capacity_blocks"]),
        "latency": serve_latency_plot(latencies),
    }
    imgs = "".join(f'<figure><img id="plot-{k}" alt="{k}" src="{v}"></figure>' for k, v in images.items())
    page = (
        _head(f"{summary.get('model', 'model')} serving on {summary.get('hw', '')}")
        + "<h2>Latency (ms)</h2>"
        + _table(["", "p50", "p90", "p99"], rows, table_id="percentiles")
        + "<h2>Run</h2>"
        + _table(["", ""], info, table_id="run")
        + _accuracy_section(summary)
        + f"<h2>Plots</h2>{imgs}</body></html>"
    )
    path = Path(out_dir) / "report.html"
    write_text(path, page)
    return path


def serve_sweep_plot(rates: list[dict[str, Any]], slo: dict[str, float | None]) -> str:
    """Latency against throughput over a rate sweep: p50 and p99 of TTFT and of time per output token
    against the output tokens per second each rate achieved (the targets dashed)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    x = [r["output_tokens_per_s"] for r in rates]
    for ax, key, label in ((axes[0], "ttft", "TTFT (ms)"), (axes[1], "tpot", "time per output token (ms)")):
        for q, style in ((50, "o-"), (99, "s--")):
            ys = [r[f"{key}_p{q}_ms"] for r in rates]
            if all(y is not None for y in ys):
                ax.plot(x, ys, style, label=f"p{q}", ms=4)
        if slo.get(key) is not None:
            ax.axhline(slo[key], color="#c00000", lw=0.8, ls=":", label="target")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def write_sweep_serve_html(summary: dict[str, Any], out_dir: str | Path) -> Path:
    """report.html of `nvdla serve --rates`: the latency-throughput table and curve, the highest rate that
    meets the target."""
    rates = summary["rates"]
    cols = list(rates[0])
    rows = [
        [("" if r[c] is None else f"{r[c]:,.3f}" if isinstance(r[c], float) else str(r[c])) for c in cols]
        for r in rates
    ]
    info = [[k, str(v)] for k, v in summary.items() if k != "rates"]
    targets = {"ttft": summary.get("slo_ttft_ms"), "tpot": summary.get("slo_tpot_ms")}
    img = serve_sweep_plot(rates, targets)
    page = (
        _head(f"{summary.get('model', 'model')} serving on {summary.get('hw', '')}: request rates")
        + "<h2>Run</h2>"
        + _table(["", ""], info, table_id="run")
        + "<h2>Rates</h2>"
        + _table(cols, rows, table_id="rates")
        + f'<h2>Latency against throughput</h2><figure><img id="plot-sweep" alt="sweep" src="{img}"></figure></body></html>'
    )
    path = Path(out_dir) / "report.html"
    write_text(path, page)
    return path


def write_html(result, out_dir: str | Path) -> Path:
    path = Path(out_dir) / "report.html"
    write_text(path, render_html(result.to_dict()))
    return path


_SPLIT_LABELS = {
    "operations_running": "operations running (the driver's accesses meanwhile hidden)",
    "register_programming_nvdla_idle": "register programming, NVDLA idle",
    "interrupt_and_driver_nvdla_idle": "interrupt and the driver's reaction, NVDLA idle",
    "idle": "idle (neither)",
}


def sequence_timeline_plot(seq: dict[str, Any], clock_mhz: float) -> str:
    """A track per processor with its operations, and the driver's track (register bursts, waits), in us."""
    plt = _pyplot()
    tracks = list(dict.fromkeys(k for o in seq["operations"] for k in o["processors"]))
    fig, ax = plt.subplots(figsize=(9, 0.5 * (len(tracks) + 1) + 1.2))
    for y, k in enumerate(tracks):
        spans = [(o["start"] / clock_mhz, (o["end"] - o["start"]) / clock_mhz) for o in seq["operations"]
                 if k in o["processors"]]  # fmt: skip
        ax.broken_barh(spans, (y - 0.35, 0.7), facecolors="#4472c4", edgecolor="white", linewidth=0.3)
    y = len(tracks)
    for kind, colour, label in (("registers", "#a5a5a5", "register accesses"),
                                ("wait for", "#ffc000", "waits for an operation's end")):  # fmt: skip
        spans = [(d["start"] / clock_mhz, (d["end"] - d["start"]) / clock_mhz) for d in seq["driver_track"]
                 if d["what"].startswith(kind)]  # fmt: skip
        ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=colour, label=label)
    ax.set_yticks(range(len(tracks) + 1), [*tracks, "driver"])
    ax.set_xlabel("time (us)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _png(fig)


_OPERATION_COLUMNS = ["operation", "processors", "enable line", "enabled", "start", "end", "cycles (model)",
                      "waited for its processors"]  # fmt: skip


def write_sequence_html(doc: dict[str, Any], out_dir: str | Path) -> Path:
    """report.html of `nvdla simulate --trace-test LOG --report` (a driver's log) or `--loadable --report`:
    the network's cycles, where they went (program.sequence.TimeSplit, each processor's busy cycles), each
    operation, and the timeline. Everything shown is read from the command's JSON document."""
    seq, clock = doc["sequence"], doc["clock_mhz"]
    cycles = doc["cycles"]
    summary = [
        ["cycles (first register access -> the last access or operation end)", f"{cycles:,}"],
        ["time", f"{cycles / clock:,.2f} us at {clock:g} MHz"],
        ["driver profile", f"{seq['driver_profile']} ({seq['csb_write_cycles']:g} cycles a register write, "
                           f"{seq['csb_read_cycles']:g} a read, {seq['interrupt_cycles']:g} an interrupt)"],
        ["register accesses", f"{seq['register_writes']:,} writes, {seq['register_reads']:,} reads "
                              f"({seq['register_access_cycles']:,} cycles)"],
        ["operations", f"{len(seq['operations']):,}"],
        ["cycles with two or more operations at once", f"{seq['overlap_cycles']:,} (each timed alone)"],
    ]  # fmt: skip
    split = seq["time_split"]
    where = [[_SPLIT_LABELS[k], f"{v:,}", f"{v / max(cycles, 1):.1%}"] for k, v in split.items() if k in _SPLIT_LABELS]
    where.append(["host work", "not in a driver's log", "-"])
    where.append(["register programming hidden behind running operations",
                  f"{split['register_programming_hidden']:,}", "-"])  # fmt: skip
    where += [[f"processor {k} busy", f"{v:,}", f"{v / max(cycles, 1):.1%}"]
              for k, v in seq["busy_cycles_by_processor"].items()]  # fmt: skip
    ops = [[o["name"], "+".join(o["processors"]), o["enable_line"], f"{o['enabled']:,}", f"{o['start']:,}",
            f"{o['end']:,}", f"{o['cycles']:,}", f"{o['start'] - o['enabled']:,}"] for o in seq["operations"]]  # fmt: skip
    page = (
        _head(f"{doc['name']} on {doc['hw']}, as the driver ran it")
        + f"<h2>Summary</h2>{_table(['item', 'value'], summary, table_id='summary')}"
        + "<h2>Where the time goes</h2><p>Each cycle of the span in one of the first four rows (they add up to "
        "the cycles); the rows after overlap them.</p>"
        + _table(["part", "cycles", "share"], where, table_id="time-split")
        + f'<h2>Timeline</h2><figure><img id="plot-timeline" alt="timeline" '
        f'src="{sequence_timeline_plot(seq, clock)}"></figure>'
        + "<h2>Operations</h2>"
        + _table(_OPERATION_COLUMNS, ops, table_id="operations")
        + "</body></html>"
    )
    path = Path(out_dir) / "report.html"
    write_text(path, page)
    return path
