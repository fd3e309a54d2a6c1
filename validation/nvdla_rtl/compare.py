"""Model vs NVIDIA's nv_small RTL on the committed trace-test measurements.

    python -m nvdla_validation.nvdla_rtl.compare [--data FILE] [--markdown] [--plot docs/img/nvdla_rtl_scatter.png]
        [--builds-plot docs/img/nvdla_rtl_builds.png]

Reads validation/data/nvdla_rtl_nv_small.json (made by run_reference.py; --data
validation/data/nvdla_rtl_own.json for the programs of our own), rebuilds each test's
operations from their stored register-level description (no NVIDIA files needed), times them with
configs/nv_small_rtl_tb.toml and prints model/RTL per test, the residual per unit and the distribution
against the targets of docs/validation.md. tests/integration/test_nvdla_reference.py uses the same code.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from nvdla_sim import load_config
from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError
from nvdla_sim.program.decode import from_description
from nvdla_sim.program.run import check_supported, conv_chain_cycles, run_operations
from nvdla_sim.registers.trace_io import parse_program

DATA = Path(__file__).resolve().parent.parent / "data" / "nvdla_rtl_nv_small.json"
OWN_DATA = DATA.with_name("nvdla_rtl_own.json")  # validation/nvdla_rtl/own_programs.py on the same RTL
CONFIG = "nv_small_rtl_tb"
TARGETS = {"median": 0.05, "p90": 0.10, "worst": 0.25}  # |model/RTL - 1| over runnable tests (issue 12)


@dataclass(frozen=True)
class Row:
    name: str
    unit: str  # conv, sdp, pdp, cdp (the test family)
    rtl_cycles: int
    model_cycles: int | None
    refused: str | None  # why the model refuses the program (as the RTL build fails it)
    rtl_status: str

    @property
    def ratio(self) -> float | None:
        return None if self.model_cycles is None else self.model_cycles / self.rtl_cycles

    @property
    def error(self) -> float | None:
        r = self.ratio
        return None if r is None else abs(r - 1)


def load_rows(path: Path = DATA) -> dict:
    return json.loads(path.read_text())


def changed_programs(generate, doc: dict, folder: Path) -> list[str]:
    """Programs that `generate(folder)` writes today whose expected output CRCs differ from the rows
    measured on the RTL (`doc`): a committed row only checks the model if its program is still the one
    that ran."""
    rows = {r["name"]: r for r in doc["rows"]}
    return [
        d.name
        for d in generate(folder)
        if [c.crc for c in parse_program(d).checks] != [c["golden_crc"] for c in rows[d.name]["checks"]]
    ]


def manifest_mismatches(programs: list[dict], doc: dict) -> list[str]:
    """Programs of an emit manifest (`programs.json` rows) that are not the ones measured in `doc`: a
    name the measurements lack or have more of, or an expected output CRC that differs from the one the
    RTL met (the model's bytes changed)."""
    rows = {r["name"]: r for r in doc["rows"]}
    names = {p["name"] for p in programs}
    out = sorted(names ^ set(rows))
    for p in programs:
        if p["name"] in rows:
            committed = [f"0x{c['golden_crc']:08x}" for c in rows[p["name"]]["checks"]]
            if [c["crc"] for c in p["checks"]] != committed:
                out.append(p["name"])
    return out


def compare(doc: dict | None = None, hw: HwConfig | None = None) -> list[Row]:
    doc = doc or load_rows()
    hw = hw or load_config(CONFIG)
    out = []
    for r in doc["rows"]:
        ops = [from_description(d) for d in r.get("layers", [])]
        refused = None
        model = chain = None
        try:
            if not ops:
                raise NvdlaError(f"{r['name']}: no operation recorded ({r['status']}: {r.get('reason', '')})")
            for op in ops:
                check_supported(op, hw, r["name"])
            model = chain = conv_chain_cycles(ops, hw, r["name"])
            if model is None:
                model = max(o.cycles for o in run_operations(ops, hw, name=r["name"]))
        except NvdlaError as e:
            refused = str(e)
        layers = r.get("layers") or [{"kind": r["kind"]}]
        unit = "conv" if r["kind"] == "dc" else layers[0]["kind"]
        # convolutions in sequence: first op enable to last interrupt; else op enable to interrupt
        rtl = r.get("span_cycles") if chain is not None else r.get("op_cycles")
        out.append(Row(r["name"], unit, rtl or 0, model, refused, r["status"]))
    return out


def distribution(rows: list[Row]) -> dict[str, float]:
    errs = sorted(r.error for r in rows if r.rtl_status == "pass" and r.error is not None)
    if not errs:
        return {"n": 0}
    return {
        "n": len(errs),
        "median": statistics.median(errs),
        "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
        "worst": errs[-1],
    }


def per_unit(rows: list[Row]) -> dict[str, dict[str, float]]:
    out = {}
    for unit in ("conv", "sdp", "pdp", "cdp"):
        sel = [r for r in rows if r.unit == unit and r.rtl_status == "pass" and r.ratio is not None]
        if sel:
            ratios = sorted(r.ratio for r in sel)
            out[unit] = {"n": len(sel), "median_ratio": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
    return out


def markdown(rows: list[Row]) -> str:
    lines = ["| test | unit | RTL cycles | model cycles | model/RTL |", "|---|---|---:|---:|---:|"]
    for r in rows:
        if r.rtl_status != "pass":
            lines.append(f"| {r.name} | {r.unit} | {r.rtl_cycles} (RTL fails its CRC) | refused | - |")
            continue
        lines.append(f"| {r.name} | {r.unit} | {r.rtl_cycles:,} | {r.model_cycles:,} | {r.ratio:.3f} |")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path, own: list[Row] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"conv": "tab:blue", "sdp": "tab:orange", "pdp": "tab:green", "cdp": "tab:red"}
    fig, ax = plt.subplots(figsize=(6, 5.5))
    lo, hi = 50, 2e6
    ax.plot([lo, hi], [lo, hi], color="0.6", lw=1, label="model = RTL")
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.9", label="±10%")
    for unit, c in colours.items():
        sel = [r for r in rows if r.unit == unit and r.model_cycles is not None and r.rtl_status == "pass"]
        ax.scatter([r.rtl_cycles for r in sel], [r.model_cycles for r in sel], s=18, color=c, label=unit)
        mine = [r for r in own or [] if r.unit == unit and r.model_cycles is not None and r.rtl_status == "pass"]
        if mine:
            ax.scatter(
                [r.rtl_cycles for r in mine],
                [r.model_cycles for r in mine],
                s=26,
                color=c,
                marker="x",
                label=f"{unit} (our programs)",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(lo, hi),
        ylim=(lo, hi),
        xlabel="NVIDIA nv_small RTL cycles",
        ylabel="model cycles",
        title="Register programs: model vs RTL (op enable to interrupt)",
    )
    ax.legend(loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# Every build measured (issue 29): its testbench config, NVIDIA's tests, and the programs of ours it ran
BUILDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "nv_small": ("nv_small_rtl_tb", "nvdla_rtl_nv_small.json", ("nvdla_rtl_own.json", "nvdla_rtl_transformer.json")),
    "nv_small_256_full": ("nv_small_256_full_rtl_tb", "nvdla_rtl_nv_small_256_full.json",
                          ("nvdla_rtl_transformer_y.json",)),
    "nv_large": ("nv_large_rtl_tb", "nvdla_rtl_nv_large.json", ("nvdla_rtl_transformer_y_nv_large.json",)),
    "nv_medium_1024_full": ("nv_medium_1024_full_rtl_tb", "nvdla_rtl_nv_medium_1024_full.json",
                            ("nvdla_rtl_transformer_y_nv_medium_1024_full.json",)),
    "nv_full": ("nv_full_rtl_tb", "nvdla_rtl_nv_full.json",
                ("nvdla_rtl_own16_nv_full.json", "nvdla_rtl_ownf16_nv_full.json",
                 "nvdla_rtl_transformer_y_nv_full.json", "nvdla_rtl_transformer_bert_base_nv_full.json")),
}  # fmt: skip


def build_rows(build: str) -> tuple[list[Row], list[Row]]:
    """(NVIDIA's tests, our programs) of a build, each row timed with its testbench config."""
    config, nvidia, ours = BUILDS[build]
    hw = load_config(config)
    timed = [r for r in compare(load_rows(DATA.with_name(nvidia)), hw) if r.model_cycles and r.rtl_cycles]
    mine = [r for f in ours for r in compare(load_rows(DATA.with_name(f)), hw) if r.model_cycles and r.rtl_cycles]
    return timed, mine


def plot_builds(path: Path) -> None:
    """One log-log panel per build: model against RTL cycles, NVIDIA's tests (dots) and ours (crosses)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(BUILDS), figsize=(4.2 * len(BUILDS), 4.4))
    for ax, build in zip(axes, BUILDS, strict=True):
        nvidia, mine = build_rows(build)
        every = nvidia + mine
        lo, hi = min(r.rtl_cycles for r in every) / 2, max(r.rtl_cycles for r in every) * 2
        ax.plot([lo, hi], [lo, hi], color="0.6", lw=1)
        ax.fill_between([lo, hi], [lo * 0.95, hi * 0.95], [lo * 1.05, hi * 1.05], color="0.9", label="±5%")
        ax.scatter([r.rtl_cycles for r in nvidia], [r.model_cycles for r in nvidia], s=16, label="NVIDIA's tests")
        ax.scatter([r.rtl_cycles for r in mine], [r.model_cycles for r in mine], s=22, marker="x", label="ours")
        d = distribution(every)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="RTL cycles",
               title=f"{build}: {d['n']} programs\nmedian {d['median']:.1%}, p90 {d['p90']:.1%}, worst {d['worst']:.1%}")  # fmt: skip
        ax.title.set_fontsize(9)
    axes[0].set_ylabel("model cycles")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the per-test table as Markdown")
    ap.add_argument("--plot", help="write the log-log scatter plot (PNG) of both data files")
    ap.add_argument("--builds-plot", help="write one scatter panel per measured build (PNG)")
    ap.add_argument("--data", default=str(DATA), help="measurements (default: NVIDIA's trace tests)")
    ap.add_argument("--hw", default=CONFIG, help=f"the testbench's config (default {CONFIG}; "
                    "nv_small_256_full_rtl_tb for validation/data/nvdla_rtl_nv_small_256_full.json)")  # fmt: skip
    args = ap.parse_args(argv)
    rows = compare(load_rows(Path(args.data)), load_config(args.hw))
    if args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            ratio = "refused" if r.ratio is None else f"{r.ratio:.3f}"
            print(f"{r.name:42s} {r.unit:5s} rtl {r.rtl_cycles:>9,} model {r.model_cycles or 0:>9,} {ratio}")
    d = distribution(rows)
    print(
        f"\n{d['n']} runnable programs: median |model/RTL-1| {d['median']:.1%}, 90th percentile {d['p90']:.1%}, "
        f"worst {d['worst']:.1%} (targets {TARGETS['median']:.0%} / {TARGETS['p90']:.0%} / {TARGETS['worst']:.0%})"
    )
    for unit, s in per_unit(rows).items():
        print(
            f"  {unit}: {s['n']} tests, median model/RTL {s['median_ratio']:.3f} (range {s['min']:.3f}..{s['max']:.3f})"
        )
    if args.builds_plot:
        plot_builds(Path(args.builds_plot))
        print(f"plot: {args.builds_plot}")
    if args.plot:
        plot(compare(load_rows(DATA)), Path(args.plot), compare(load_rows(OWN_DATA)) if OWN_DATA.exists() else None)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
