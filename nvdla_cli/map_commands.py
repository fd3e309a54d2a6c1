"""`nvdla map` and `nvdla zoo` subcommands (registered into the nvdla CLI)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from nvdla_cli.console import TerminalProgress, warn_config
from nvdla_cli.flags import Needs, check_needs, finite_positive, options
from nvdla_cli.paths import output_dir, output_file
from nvdla_mapper.lowering.rules import copies_phrase, resources_phrase
from nvdla_mapper.options import Granularity, InstanceDram, KvPlan, Placement, PruneKind, Pruning
from nvdla_sim.config import HOST_PROFILES, load_config
from nvdla_sim.energy.model import dram_priced_as
from nvdla_sim.errors import NvdlaError, check_int
from nvdla_sim.files import write_json, write_rows, write_table
from nvdla_sim.precision import Precision

PLACEMENTS = Placement.values()  # --softmax and --layernorm


def add_commands(sub, registry: dict) -> None:
    m = sub.add_parser("map", help="map a transformer onto NVDLA, simulate it and report")
    m.add_argument(
        "model", help="transformer or CNN preset (see `nvdla zoo`), a Hugging Face config.json, or an .onnx file"
    )
    m.add_argument("--hw", default="nv_full", help="config name or .toml path")
    m.add_argument("--seq", type=int, default=None,
                   help="tokens per sequence (default 128; vision models run their image's tokens; CNNs have none)")  # fmt: skip
    m.add_argument("--dec-seq", type=int, default=None, help="decoder sequence length (T5); default --seq")
    m.add_argument(
        "--head",
        choices=["auto", "none", "lm", "lm_last", "cls"],
        default="auto",
        help="model head: LM head (vocabulary projection), classifier, or none (auto: lm for GPT-2/T5/XLNet, cls else)",
    )
    m.add_argument(
        "--extend-positions", action="store_true", help="map a --seq beyond the model's learned positions (what-if)"
    )
    m.add_argument("--batch", type=int, default=1)
    m.add_argument("--precision", default="int8", help="int8, int16 or fp16")
    m.add_argument("--softmax", choices=PLACEMENTS, default="auto")
    m.add_argument("--layernorm", choices=PLACEMENTS, default="auto",
                   help="where LayerNorm runs: auto (the host, on every build), host, or nvdla (its steps, numerics.layernorm_steps: a what-if for INT8 layers on a build with the LUT and INT16; SDP cannot write their INT8 output from INT16)")  # fmt: skip
    m.add_argument("--host-fallback", action="store_true", help="run unsupported ONNX ops on the host")
    m.add_argument("--host", choices=list(HOST_PROFILES), default=None,
                   help="the host CPU's profile (host.profile, each figure with its source: docs/modelling.md; "
                   "default: the config's [host], assumed_embedded when it has none)")  # fmt: skip
    m.add_argument(
        "--host-gflops",
        type=float,
        default=None,
        help="the host's sustained GFLOP/s (host.gflops; default: the config's [host], 20 when it has none)",
    )
    m.add_argument(
        "--host-gbs",
        type=float,
        default=None,
        help="the host's memory GB/s (host.mem_gbs; default: the config's [host], 10 when it has none)",
    )
    m.add_argument("--host-overhead-us", type=float, default=None,
                   help="one hand-off to the host, us (host.overhead_us; default: the config's [host], 10 when it has none)")  # fmt: skip
    m.add_argument("--report", help="directory for report.html, report.json, layers.csv and trace.json")
    q = m.add_argument_group("quantization and sparsity")
    _quant_flags(q)
    _weight_flags(q)
    m.add_argument("--top", type=int, default=15, help="rows of the per-layer table to print")
    m.add_argument(
        "--emit-program",
        metavar="DIR",
        help="write every hardware layer as an NVDLA register program (trace test) with its expected CRC",
    )
    m.add_argument("--layer", metavar="NAME", help="with --emit-program: only this task (e.g. layer0.attn.q)")
    registry["map"] = _map
    sw = sub.add_parser("sweep", help="run a design-space sweep from a TOML file (resumable, SQLite)")
    sw.add_argument("file", help="sweep TOML (see mapper/studies/sweep.py and examples/sweep_bert.toml)")
    sw.add_argument("--db", default=None, help="SQLite results file (default: <out>/sweep.sqlite)")
    sw.add_argument("--out", default="out/sweep", help="directory for the database, pareto.csv and pareto.png")
    sw.add_argument(
        "--executor", choices=["serial", "local", "dask"], default=None, help="default: local, or dask with --scheduler"
    )
    sw.add_argument("--workers", type=int, default=2, help="local worker processes")
    sw.add_argument("--scheduler", default=None, help="dask.distributed scheduler address, e.g. tcp://host:8786")
    sw.add_argument("--rank", metavar="METRIC", default=None,
                    help="rank the points by this metric (e.g. core_energy_uj; overrides the file's [rank])")  # fmt: skip
    sw.add_argument("--where", metavar="CONSTRAINT", action="append", default=None,
                    help="with --rank: keep points meeting METRIC<=N or METRIC>=N (repeatable; e.g. latency_ms<=20)")  # fmt: skip
    registry["sweep"] = _sweep
    ge = sub.add_parser("generate", help="autoregressive generation: prefill, then decode steps with a KV cache")
    ge.add_argument(
        "model", help="decoder preset (gpt2, ...) or a Hugging Face config.json (gpt2, llama, mistral, qwen2)"
    )
    ge.add_argument("--hw", default="nv_full", help="config name or .toml path")
    ge.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence")
    ge.add_argument("--new-tokens", type=int, default=128, help="tokens to generate per sequence")
    ge.add_argument("--batch", default="1", help="sequences decoded together, or a list (1,2,4,8) for a batch sweep")
    ge.add_argument("--precision", default="int8", help="int8, int16 or fp16")
    ge.add_argument("--softmax", choices=PLACEMENTS, default="auto")
    ge.add_argument("--layernorm", choices=PLACEMENTS, default="auto",
                    help="where LayerNorm runs: auto (the host, on every build), host, or nvdla (its steps, numerics.layernorm_steps: a what-if for INT8 layers on a build with the LUT and INT16; SDP cannot write their INT8 output from INT16)")  # fmt: skip
    ge.add_argument("--tp", type=int, default=1,
                    help="tensor parallel: the model split by heads and FFN columns over this many instances of the "
                         "build, in step, the partial sums added by SDP passes (default 1)")  # fmt: skip
    _instance_dram_flag(ge, "--tp-dram", "--tp", "instance", "sharing its rate")
    ge.add_argument("--report", help="directory for report.html, generate.json and tokens.csv")
    ge.add_argument("--jobs", type=int, default=None,
                    help="processes the decode steps are shared out to (default: this machine's cores; "
                         "the same figures with any number)")  # fmt: skip
    _dram_flag(ge)
    _kv_plan_flag(ge)
    gw = ge.add_argument_group("weight what-ifs (the static weights a decode step streams; the KV cache stays dense)")
    _weight_flags(gw)
    _kv_flag(gw)
    _quant_flags(ge.add_argument_group("INT8 accuracy (the model's block, or a trained model's task, bit-exact)"))
    registry["generate"] = _generate
    se = sub.add_parser(
        "serve", help="many requests on one build: continuous batching over a paged KV cache (TTFT, TPOT, p50/p90/p99)"
    )
    se.add_argument("model", help="decoder preset (gpt2, ...) or a Hugging Face config.json")
    se.add_argument("--hw", default="nv_full", help="config name or .toml path")
    se.add_argument("--rate", type=float, default=10.0, help="Poisson arrivals per second (without --trace)")
    se.add_argument("--requests", type=int, default=100, help="requests to simulate (without --trace)")
    se.add_argument("--prompt", type=int, default=128, help="prompt tokens per request (without --trace)")
    se.add_argument("--output", type=int, default=32, help="output tokens per request (without --trace)")
    se.add_argument("--trace", help="CSV of requests: arrival_s, prompt, output")
    se.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals")
    se.add_argument("--block-tokens", type=int, default=16, help="KV positions per cache block")
    se.add_argument("--max-batch", type=int, default=32, help="requests running at once")
    se.add_argument("--replicas", type=int, default=1,
                    help="instances of the build serving the requests, each with the whole model and its own KV "
                         "cache, the requests dealt round robin in order of arrival (default 1)")  # fmt: skip
    _instance_dram_flag(se, "--replicas-dram", "--replicas", "replica", "their loops advancing together")
    se.add_argument("--policy", choices=["fcfs-prefill-first", "chunked-prefill"], default="fcfs-prefill-first",
                    help="whole prompts first, then a decode step (vLLM's default); or every iteration all decodes "
                         "and prompt chunks up to --chunk-tokens (Sarathi-Serve)")  # fmt: skip
    se.add_argument("--chunk-tokens", type=int, default=256, help="tokens per iteration with --policy chunked-prefill")
    se.add_argument("--preemption", choices=["recompute", "swap"], default="recompute",
                    help="when the KV cache is full: free the victim's blocks and prefill it again (recompute), or "
                         "copy its cache to host memory and back (swap)")  # fmt: skip
    _dram_flag(se)
    _kv_plan_flag(se)
    se.add_argument("--precision", default="int8", help="int8, int16 or fp16")
    se.add_argument("--report", help="directory for report.html, serve.json and requests.csv (sweep.json, sweep.csv)")
    sww = se.add_argument_group("weight what-ifs (the static weights every iteration streams; KV stays dense)")
    _weight_flags(sww)
    _kv_flag(sww)
    _quant_flags(se.add_argument_group("INT8 accuracy (the model's block, or a trained model's task, bit-exact)"))
    sw = se.add_argument_group("request rates: the latency-throughput curve and the highest rate a target allows")
    sw.add_argument("--rates", help="comma-separated Poisson rates per second to sweep (the same seeded draws, scaled)")
    sw.add_argument("--slo-ttft-ms", type=float, help="latency target: time to first token at --slo-percentile, ms")
    sw.add_argument("--slo-tpot-ms", type=float, help="latency target: time per output token at --slo-percentile, ms")
    sw.add_argument("--slo-percentile", type=int, default=99, help="50, 90 or 99 (default 99)")
    sw.add_argument("--bisect", type=int, default=4,
                    help="bisection steps between the highest swept rate that meets the target and the next")  # fmt: skip
    registry["serve"] = _serve
    z = sub.add_parser("zoo", help="list model presets")
    z.set_defaults()
    registry["zoo"] = _zoo
    ac = sub.add_parser(
        "accuracy", help="a trained model's task accuracy, float and INT8 through the bit-exact datapath"
    )
    ac.add_argument(
        "model", help="a shipped trained model (vit_digits, char_gpt) or the <name>.config.json of one train.py wrote"
    )
    ac.add_argument("--hw", default="nv_small", help="config name or .toml path")
    ac.add_argument("--quantize", choices=["per-tensor", "per-channel"], default="per-channel",
                    help="weight scales (activations are per tensor)")  # fmt: skip
    ac.add_argument("--calib", default="max", help="max, percentile:P (e.g. percentile:99.9) or entropy")
    ac.add_argument("--dynamic", action="store_true", help="dynamic (per-input) activation scales")
    ac.add_argument("--samples", type=int, default=None,
                    help="test images (ViT) or held-out windows (GPT) from the first; default all")  # fmt: skip
    ac.add_argument("--prompts", type=int, default=4, help="greedy continuations compared (GPT)")
    ac.add_argument("--new-tokens", type=int, default=16, help="characters each continuation generates (GPT)")
    acr = ac.add_argument_group("recipes beyond post-training scales (validation/trained/evaluate.py runs them all)")
    acr.add_argument("--smooth", type=float, default=0.0, help="SmoothQuant migration strength alpha (0.5: theirs)")
    acr.add_argument("--qat", metavar="NAME", default="",
                     help="learned scales and weights of quantization-aware training (char_gpt_qat)")  # fmt: skip
    acr.add_argument(
        "--prune", default="", type=Pruning.parse, help="2:4 or magnitude:S, the INT8 run's weights pruned"
    )
    acr.add_argument("--finetuned", metavar="NAME", default="",
                     help="the pruned model's fine-tuned weights (char_gpt_m50_ft, char_gpt_24_ft)")  # fmt: skip
    acr.add_argument("--only", default="",
                     help="comma-separated parts run in INT8, the rest float (embedding, projection, attention, "
                     "ffn, head, residual: the residual stream in memory; on a build with SDP's LUT also gelu, "
                     "layernorm with --layernorm nvdla, and softmax with --softmax nvdla): the loss attributed "
                     "by part")  # fmt: skip
    ac.add_argument("--precision", choices=["int8", "int16", "fp16"], default="int8",
                    help="the datapath's precision (int16 and fp16 on builds that have them, e.g. nv_full; "
                    "fp16 takes no scales: its values as FP16, GELU in the LUT's FP16 mode)")  # fmt: skip
    ac.add_argument("--softmax", choices=PLACEMENTS, default="auto",
                    help="where the softmax runs, as map's --softmax (nvdla: SDP's LUT, as the mapper lowers it)")  # fmt: skip
    ac.add_argument("--layernorm", choices=PLACEMENTS, default="auto",
                    help="where LayerNorm runs, as map's --layernorm (auto: the host; nvdla: its steps, "
                    "numerics.layernorm_steps, a what-if on a build with the LUT and INT16)")  # fmt: skip
    ac.add_argument("--json", metavar="FILE", help="write the result row as JSON")
    registry["accuracy"] = _accuracy_command


def _quantized(a: argparse.Namespace) -> bool:
    return a.quantize is not None


_QUANT_NEEDS = [
    Needs(f, _quantized, "goes with --quantize (the INT8 accuracy run it sets up); add --quantize per-channel")
    for f in ("calib", "calib_data", "dynamic")
]
_WEIGHT_NEEDS = [
    Needs(
        "sparse_mac_whatif",
        lambda a: a.prune.kind is PruneKind.TWO_FOUR,
        "is a 2:4-sparse MAC array: it needs --prune 2:4",
    ),
]
_MAP_NEEDS = [
    *_QUANT_NEEDS,
    *_WEIGHT_NEEDS,
    Needs("layer", lambda a: a.emit_program is not None, "chooses the layer --emit-program writes; give --emit-program DIR too"),
]  # fmt: skip
_GENERATE_NEEDS = [
    *_QUANT_NEEDS,
    *_WEIGHT_NEEDS,
    Needs("tp_dram", lambda a: a.tp != 1, "says where tensor-parallel instances keep their data: give --tp N (N > 1)"),
]  # fmt: skip


def _arrivals_given(a: argparse.Namespace) -> bool:
    return a.trace is None


def _slo_given(a: argparse.Namespace) -> bool:
    return a.slo_ttft_ms is not None or a.slo_tpot_ms is not None


_SERVE_NEEDS = [
    *_QUANT_NEEDS,
    *_WEIGHT_NEEDS,
    Needs("replicas_dram", lambda a: a.replicas != 1, "says where the replicas keep their data: give --replicas N"),
    Needs("chunk_tokens", lambda a: a.policy == "chunked-prefill",
          "sizes the iterations of --policy chunked-prefill; the default policy prefills whole prompts"),
    *(Needs(f, _arrivals_given, "describes the Poisson arrivals; --trace gives the requests (arrival_s, prompt, output)")
      for f in ("rate", "requests", "prompt", "output", "seed")),
    Needs("rates", _arrivals_given, "sweeps Poisson rates; leave out --trace"),
    Needs("rate", lambda a: a.rates is None, "is one rate; --rates gives the rates to sweep"),
    *(Needs(f, lambda a: a.rates is not None,
            "is a latency target that picks the highest of the rates --rates sweeps; give --rates too")
      for f in ("slo_ttft_ms", "slo_tpot_ms")),
    *(Needs(f, _slo_given, "goes with a latency target (--slo-ttft-ms or --slo-tpot-ms)")
      for f in ("slo_percentile", "bisect")),
]  # fmt: skip
_SWEEP_NEEDS = [
    Needs("where", lambda a: a.rank is not None,
          "goes with --rank: the two replace the file's [rank] (its objective and constraints); give --rank METRIC"),
    Needs("workers", lambda a: (a.executor or ("dask" if a.scheduler else "local")) == "local",
          "is the local executor's process count; --executor dask uses the cluster's workers"),
    Needs("scheduler", lambda a: a.executor in (None, "dask"), "is a dask.distributed address; it goes with --executor dask"),
    Needs("scheduler", lambda a: "://" in a.scheduler, lambda a: f"{a.scheduler!r}: give a dask.distributed address such as tcp://host:8786"),
]  # fmt: skip
_ACCURACY_NEEDS = [
    Needs("finetuned", lambda a: bool(a.prune), "holds the fine-tuned weights of a pruned model; give --prune too"),
    *(Needs(f, lambda a: a.precision != "fp16", "sets INT8 scales; --precision fp16 takes none")
      for f in ("quantize", "calib", "dynamic", "qat")),
    Needs("only", lambda a: bool(a.only.strip(" ,")), "needs at least one part (embedding, projection, attention, ...)"),
]  # fmt: skip


def _sweep(args: argparse.Namespace) -> int:
    from nvdla_mapper.studies.sweep import (
        check_metric,
        load_sweep,
        open_db,
        pareto_front,
        parse_constraint,
        phase_of,
        rank,
        run_sweep,
        write_pareto,
        write_ranking,
    )

    check_needs(args, _SWEEP_NEEDS)
    spec = load_sweep(args.file)
    objective = args.rank or spec.objective
    constraints = tuple(parse_constraint(t) for t in args.where) if args.where is not None else spec.constraints
    if objective is not None:
        check_metric(objective, "rank objective")  # before the sweep runs
    if args.rank is not None and spec.objective is not None and args.where is None and spec.constraints:
        print(f"nvdla: note: ranking by --rank {args.rank} with the file's constraints "
              f"{' and '.join(str(c) for c in spec.constraints)} (--where replaces them)", file=sys.stderr)  # fmt: skip
    executor = args.executor or ("dask" if args.scheduler else "local")
    if args.workers < 1:
        raise NvdlaError(f"--workers must be >= 1, not {args.workers}")
    out = output_dir(args.out, "--out")
    db = output_file(args.db, "--db") if args.db is not None else out / "sweep.sqlite"
    open_db(db).close()  # a file that is not a sweep database: said now, not after the points
    n = len(spec.points())
    t0 = time.perf_counter()
    run = run_sweep(spec, db, executor=executor, workers=args.workers, scheduler=args.scheduler, progress=True)
    rows = run.rows
    wall = time.perf_counter() - t0
    paths = write_pareto(rows, out)
    errors = [r for r in rows if r["status"] != "ok"]
    front = pareto_front(rows)
    print(
        f"sweep {spec.name}: {len(rows)}/{n} points in {db} ({wall:.1f} s this run), {len(errors)} errors, "
        f"{len(front)} on the Pareto front of latency, NVDLA energy and area"
    )
    clamped = sum(1 for r in rows if r.get("notes"))
    if clamped:
        first = next(r["notes"] for r in rows if r.get("notes"))
        print(f"nvdla: warning: {clamped} points' configs were not taken as given (column notes), e.g. {first}",
              file=sys.stderr)  # fmt: skip
    print(
        f"  this run: {run.evaluated} evaluated ({run.recomputed} of them recomputed: made by another model version "
        f"or configuration), {run.reused} reused; model version {run.model_version}"
    )
    for r in front[:10]:
        print(f"  {_point_line(r)}")
    if objective is not None:
        ranked = rank(rows, objective, constraints)
        where = " and ".join(str(c) for c in constraints) or "no constraint"
        ok = sum(1 for r in rows if r["status"] == "ok")
        print(f"ranked by {objective} with {where}: {len(ranked)} of {ok} points qualify")
        shown: dict[tuple, int] = {}
        for r in ranked:  # the best three of each workload
            key = (r["model"], r["seq"], r["batch"], phase_of(r))
            shown[key] = shown.get(key, 0) + 1
            if shown[key] <= 3:
                print(f"  {shown[key]:>2}. {objective} {r[objective]:,.4g}  {_point_line(r)}")
        print(f"wrote {write_ranking(ranked, out)}", file=sys.stderr)
    for r in errors[:5]:
        print(f"  error {r['id']}: {r['error']}", file=sys.stderr)
    print(f"wrote {paths['csv']} (and a CSV per pair of latency, energy, area) and {paths['png']}", file=sys.stderr)
    if rows and len(errors) == len(rows):  # nothing to compare: a failure, whatever was written
        print(f"nvdla: error: every point of {spec.name} failed (the first: {errors[0]['error']})", file=sys.stderr)
        return 1
    return 0


def _point_line(r: dict) -> str:
    from nvdla_mapper.studies.sweep import phase_of

    return (
        f"{r['model']} {phase_of(r)} s{r['seq']} b{r['batch']}  {r['latency_ms']:.3f} ms  {r['core_energy_uj']:,.1f} uJ  "
        f"{r['area_mm2']:.3f} mm2  {int(r['peak_macs_per_cycle'])} MACs  {int(r['cbuf_bytes']) // 1024} KiB  "
        f"{json.dumps(r['params']['hw'], sort_keys=True)}"
    )


def _precision(text: str) -> Precision:
    try:
        return Precision.parse(text)
    except ValueError as e:
        raise NvdlaError(str(e)) from None


def _batches(text: str) -> list[int]:
    """--batch: one positive integer or a comma-separated list of them, run in order, each once."""
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or any(b < 1 for b in out):
        raise NvdlaError(f"--batch {text!r}: give a positive integer or a comma-separated list such as 1,2,4,8")
    return list(dict.fromkeys(out))


def _weight_flags(group: argparse._ArgumentGroup) -> None:
    """The weight treatment's flags (WeightTreatment), shared by map, generate and serve."""
    group.add_argument(
        "--prune", default="", type=Pruning.parse, help="2:4 or magnitude:S (fraction S of weights zeroed)"
    )
    group.add_argument("--weight-compression", action="store_true", help="store weights NVDLA-compressed (nv_full)")
    group.add_argument(
        "--sparse-mac-whatif",
        action="store_true",
        help="what-if beyond NVDLA v1: a 2:4-sparse MAC array (needs --prune 2:4)",
    )


def _quant_flags(group: argparse._ArgumentGroup) -> None:
    """The INT8 accuracy flags (QuantSettings), shared by map, generate and serve."""
    group.add_argument(
        "--quantize",
        choices=["per-tensor", "per-channel"],
        default=None,
        help="run one block INT8-quantized through the bit-exact model and report its error "
        "(a trained model's config.json: its task accuracy too)",
    )
    group.add_argument(
        "--calib",
        default="max",
        help="calibration: max, percentile:P (e.g. percentile:99.9) or entropy (KL, activations)",
    )
    group.add_argument(
        "--calib-data", default=None, help=".npy calibration activations [N, seq, hidden]; default seeded"
    )
    group.add_argument("--dynamic", action="store_true", help="dynamic (per-input) activation scales")


def _dram_flag(parser) -> None:
    parser.add_argument("--dram-gib", type=float, default=None,
                        help="the system's DRAM for weights and KV cache (memory.dram_size_gib; default: the "
                             "config's, else NVDLA's address space)")  # fmt: skip


def _with_dram(hw, args: argparse.Namespace):
    finite_positive("--dram-gib", args.dram_gib)
    if args.dram_gib is None:
        return hw
    reach = 2**hw.memory.address_bits / 2**30
    if args.dram_gib > reach:
        print(f"nvdla: note: --dram-gib {args.dram_gib:g} is more than {hw.name}'s {hw.memory.address_bits}-bit "
              f"addresses reach ({reach:g} GiB); NVDLA uses {reach:g} GiB of it", file=sys.stderr)  # fmt: skip
    return hw.with_values(**{"memory.dram_size_gib": args.dram_gib})


def _kv_flag(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--kv-precision",
        default=None,
        help="the KV caches' precision (int8, int16, fp16; default the model's): attention runs at it, the "
        "projections convert into it in their SDP; compared with the caches at the model's precision",
    )


def _kv_plan_flag(parser) -> None:
    parser.add_argument(
        "--kv-plan", default=KvPlan.BUCKET.value, choices=KvPlan.values(),
        help="where attention against the KV caches is planned (lowering and tiling): bucket (default) at "
        "the power of two at or above its keys, run at every length with that plan, as a program compiled "
        "for a range of lengths; length: a search at every length",
    )  # fmt: skip


def _bound_name(bound) -> str:
    return bound.value if bound is not None else "-"


def _print_kv_whatif(r, base) -> None:
    """The KV-cache precision against the caches at the model's precision: step time, bytes, what fits
    (two GenerateResults)."""
    med, base_med = r.per_token_ms().median_step, base.per_token_ms().median_step
    f, bf = r.fits(), base.fits()
    line = (
        f"  KV cache {r.kv_precision_used.value} (model {r.precision.value})  {r.kv_bytes_per_token:,} bytes per "
        f"position ({base.kv_bytes_per_token:,} at {base.kv_precision_used.value}); DRAM {r.dram_bytes_per_token:,} "
        f"bytes per token ({base.dram_bytes_per_token:,})"
    )
    if med is not None and base_med is not None:
        line += f"; {med:.3f} ms per decode step, median ({base_med:.3f}, {base_med / med:.2f}x)"
    print(line)
    print(
        f"  what fits            {f.max_positions_at_batch:,} positions per sequence at batch {r.batch} "
        f"({bf.max_positions_at_batch:,}), {f.max_batch_at_positions:,} sequences of "
        f"{r.prompt + r.new_tokens} positions ({bf.max_batch_at_positions:,}), beside the weights "
        f"in {f.limited_by}"
        + (f"; the model has {f.model_max_positions:,} positions" if f.model_max_positions else "")
        + ("; the config states no DRAM size (--dram-gib sets one)" if "address space" in f.limited_by else "")
    )


def _print_weight_whatif(r, dense) -> None:
    """The weight treatment against the dense run: weights stored, time and energy per generated token (two
    GenerateResults)."""
    w = r.weights_report()
    what = ", ".join(
        x for x in (f"prune {w.prune}" if w.prune != "none" else "", "compression" if w.compression else "",
                    "2:4 sparse MACs (what-if)" if w.sparse_mac_whatif else "") if x
    )  # fmt: skip
    med, base_med = r.per_token_ms().median_step, dense.per_token_ms().median_step
    e, base_e = r.energy().decode_core_uj_per_token, dense.energy().decode_core_uj_per_token
    line = (
        f"  weights ({what})  {w.stored_weight_bytes:,} bytes stored of {w.dense_weight_bytes:,} dense; "
        f"DRAM {r.dram_bytes_per_token:,} bytes per token (dense {dense.dram_bytes_per_token:,})"
    )
    if med is not None and base_med is not None:
        line += f"; {med:.3f} ms per decode step, median (dense {base_med:.3f}, {base_med / med:.2f}x)"
    if e and base_e:
        line += f", {e:,.1f} uJ per token (dense {base_e:,.1f})"
    print(line)
    if w.prune != "none" and not w.compression and not w.sparse_mac_whatif:
        print(
            "  note: pruned zeros are still stored and multiplied: without --weight-compression NVDLA v1 gains nothing"
        )


def _instance_dram_flag(parser, flag: str, count_flag: str, instance: str, together: str) -> None:
    """The flag that says where the instances `count_flag` sets keep their data (options.InstanceDram)."""
    parser.add_argument(flag, choices=InstanceDram.values(), default=InstanceDram.OWN.value,
                        help=f"with {count_flag}: each {instance} on a DRAM port of its own, or all on the build's "
                             f"one DRAM, {together} (default own)")  # fmt: skip


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _generate(args: argparse.Namespace) -> int:

    from nvdla_mapper.frontends.resolve import resolve_model
    from nvdla_mapper.options import MapOptions, WeightTreatment
    from nvdla_mapper.results import MemoryDescription
    from nvdla_mapper.studies.generate import generate

    check_needs(args, _GENERATE_NEEDS)
    out = output_dir(args.report, "--report") if args.report is not None else None
    batches = _batches(args.batch)
    prec = _precision(args.precision)
    kv = _kv_precision(args, prec)
    weights = WeightTreatment(args.prune, args.weight_compression, args.sparse_mac_whatif)
    hw = _with_dram(load_config(args.hw), args)
    warn_config(hw)
    spec = resolve_model(args.model)
    if not hasattr(spec, "stages"):
        raise NvdlaError(f"{args.model}: generation needs a preset or a config.json, not an ONNX graph")
    accuracy = _accuracy(args, hw, prec, seq=args.prompt) if args.quantize else None
    # the run's options, and the two baselines' (each whole, not left to MapOptions.of's defaults): the dense
    # weights at the same caches, the caches at the model's precision under the same weights
    opts = MapOptions(precision=prec, softmax=args.softmax, layernorm=args.layernorm, kv_plan=args.kv_plan,
                      weights=weights, kv_precision=kv, requant=_requant(args))  # fmt: skip
    dense_opts = dataclasses.replace(opts, weights=WeightTreatment())
    model_kv_opts = dataclasses.replace(opts, kv_precision=None)
    kw = dict(prompt=args.prompt, new_tokens=args.new_tokens, jobs=args.jobs if args.jobs is not None else _cores(),
              tensor_parallel=args.tp, tp_dram=args.tp_dram)  # fmt: skip
    with TerminalProgress() as progress:
        kw["progress"] = progress
        results = [generate(spec, hw, batch=b, options=opts, **kw) for b in batches]
        dense = (
            [generate(spec, hw, batch=r.batch, options=dense_opts, **kw) for r in results]
            if weights.active
            else [None] * len(results)
        )
        model_kv = [_at_model_precision(spec, hw, r.batch, model_kv_opts, kw) if kv else None for r in results]
    for r, base, kv_base in zip(results, dense, model_kv, strict=True):
        pt, pre, dec, en = r.per_token_ms(), r.prefill_figures(), r.decode_figures(), r.energy()
        print(
            f"{r.model} on {r.hw.fingerprint}, batch {r.batch}, prompt {r.prompt}, {r.new_tokens} new tokens ({prec.value})"
        )
        print(
            f"  time to first token  {r.ttft_ms:.3f} ms (prefill, {pre.bound.value}-bound, model MACs at {pre.model_mac_utilization:.1%} of peak)"
        )
        if pt.median_step is not None:
            print(
                f"  per decode step      {pt.first_step:.3f} / {pt.median_step:.3f} / {pt.mean_step:.3f} / {pt.last_step:.3f} ms (first / median / mean / last step; a step makes {r.batch} token{'s' if r.batch > 1 else ''})"
            )
        print(
            f"  total                {r.total_ms:.3f} ms: {r.tokens_per_s_per_sequence:,.1f} tokens/s per sequence, {r.tokens_per_s_aggregate:,.1f} aggregate"
        )
        print(
            f"  decode               {_bound_name(dec.bound)}-bound, DRAM {dec.dram_utilization:.1%} busy, model MACs at {dec.model_mac_utilization:.1%} of peak (hardware MACs {dec.hardware_mac_utilization:.1%}), {r.dram_bytes_per_token:,} DRAM bytes per token"
        )
        if pt.median_step is not None:
            print(
                f"  decode vs roofline   {dec.over_roofline:.2f}x the roofline (each layer at the larger of its MAC and DRAM time)"
            )
        print(f"  KV cache at the end  {r.kv_cache_bytes:,} bytes")
        if r.tensor_parallel > 1:
            print(f"  tensor parallel      {_tensor_parallel(spec, r)}")
        per_token = (
            f" + decode {en.decode_core_uj:,.1f} = {en.total_core_uj:,.1f} uJ in NVDLA"
            f" ({en.decode_core_uj_per_token:,.1f} uJ per generated token, the mean over the steps;"
            f" median step {en.decode_core_uj_per_token_median_step:,.1f})"
            if en.decode_core_uj_per_token
            else " uJ in NVDLA"
        )
        print(
            f"  energy               prefill {en.prefill_core_uj:,.1f}{per_token}; "
            f"{en.average_core_power_mw:,.1f} mW average, {en.peak_core_power_mw:,.1f} mW peak, "
            f"{en.tops_per_w:.2f} TOPS/W (model MACs)"
        )
        print(
            f"  DRAM energy          prefill {en.prefill_dram_uj:,.1f} + decode {en.decode_dram_uj:,.1f}"
            f" = {en.total_dram_uj:,.1f} uJ ({dram_priced_as(hw)}; every byte moved); area {en.area_mm2:.3f} mm2 at"
            f" {en.tech_node_nm:g} nm (docs/energy.md)"
        )
        print(
            f"  host energy          prefill {en.prefill_host_uj:,.1f} + decode {en.decode_host_uj:,.1f}"
            f" = {en.total_host_uj:,.1f} uJ (its busy time at {en.host_active_power_w:g} W active)"
        )
        print(f"  memory               {MemoryDescription.of(r.hw).summary()}")
        if base is not None:
            _print_weight_whatif(r, base)
        if isinstance(kv_base, str):
            print(f"  KV cache {r.kv_precision_used.value} (model {r.precision.value})  {r.kv_bytes_per_token:,} bytes "
                  f"per position; at {prec.value} the caches do not fit: {kv_base}")  # fmt: skip
        elif kv_base is not None:
            _print_kv_whatif(r, kv_base)
    if accuracy is not None:
        print("\n".join(format_accuracy_lines(accuracy)))
    if len(results) > 1:
        from nvdla_mapper.studies.generate import crossover_batch, roofline_crossover

        b_roof = roofline_crossover(hw, prec)
        try:
            b_sim = f"turns compute-bound at batch {crossover_batch(spec, hw, prec, kv_len=args.prompt)}"
        except NvdlaError as e:  # a figure beside the runs: said, the runs kept
            b_sim = f"does not turn compute-bound ({e})"
        print(f"  weight streaming (projections, FFN, LM head) {b_sim} (roofline estimate {b_roof:g}); "
              "attention reads each sequence's own cache at any batch")  # fmt: skip
        print("  batch  median ms/step  mean ms/step  tokens/s (batch / mean step)  decode bound")
        for r in results:
            pt = r.per_token_ms()
            print(
                f"  {r.batch:>5}  {pt.median_step or 0:>14.3f}  {pt.mean_step or 0:>12.3f}"
                f"  {r.decode_tokens_per_s_aggregate or 0:>28,.1f}  {_bound_name(r.decode_figures().bound)}"
            )
    if out is not None:
        rows = [
            {
                "options": options(args),
                **r.to_dict(),
                **({"kv_model_precision": b if isinstance(b, str) else b.to_dict()} if b else {}),
                **({"accuracy": accuracy.to_dict()} if accuracy else {}),
            }
            for r, b in zip(results, model_kv, strict=True)
        ]
        write_json(out / "generate.json", rows)
        tokens = [
            [r.batch, i + 1, r.prompt + max(i - 1, 0) if i else 0, c, round(c / r.hw.clock_mhz / 1e3, 6)]
            for r in results
            for i, c in enumerate(r.token_cycles)
        ]
        write_rows(out / "tokens.csv", ["batch", "token", "kv_len", "cycles", "ms"], tokens)
        from nvdla_mapper.reports.html import write_generate_html

        page = write_generate_html(rows, out)
        print(f"wrote {out / 'generate.json'}, {out / 'tokens.csv'} and {page}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:

    from nvdla_mapper.frontends.resolve import resolve_model
    from nvdla_mapper.options import MapOptions, WeightTreatment
    from nvdla_mapper.results import MemoryDescription, memory_description
    from nvdla_mapper.studies.generate import memory_limit
    from nvdla_mapper.studies.serve import (
        Policy,
        Preemption,
        ServeSettings,
        SimulatedCosts,
        kv_capacity_blocks,
        poisson_requests,
        read_trace,
        simulate_serving,
    )

    check_needs(args, _SERVE_NEEDS)
    finite_positive("--rate", args.rate)
    rates = _rates(args.rates) if args.rates is not None else None
    if rates is not None and args.replicas != 1:
        raise NvdlaError("--replicas with --rates: sweep the rates on one instance, or serve one rate on replicas")
    for flag in ("slo_ttft_ms", "slo_tpot_ms"):
        finite_positive(f"--{flag.replace('_', '-')}", getattr(args, flag))
    out = output_dir(args.report, "--report") if args.report is not None else None
    prec = _precision(args.precision)
    kv = _kv_precision(args, prec)
    weights = WeightTreatment(args.prune, args.weight_compression, args.sparse_mac_whatif)
    hw = _with_dram(load_config(args.hw), args)
    warn_config(hw)
    spec = resolve_model(args.model)
    if not hasattr(spec, "stages"):
        raise NvdlaError(f"{args.model}: serving needs a preset or a config.json, not an ONNX graph")
    settings = ServeSettings(
        block_tokens=args.block_tokens,
        max_batch=args.max_batch,
        preemption=Preemption(args.preemption),
        policy=Policy(args.policy),
        chunk_tokens=args.chunk_tokens,
    )
    if args.trace is not None:
        requests = read_trace(args.trace, hw.clock_mhz)
    else:
        requests = poisson_requests(
            args.requests, args.rate, prompt=args.prompt, output=args.output, clock_mhz=hw.clock_mhz, seed=args.seed
        )
    if spec.max_positions and settings.block_tokens > spec.max_positions:
        raise NvdlaError(
            f"--block-tokens {settings.block_tokens} is more than {spec.name}'s {spec.max_positions} positions"
        )
    for r in requests:
        if spec.max_positions and r.prompt + r.output > spec.max_positions:
            raise NvdlaError(
                f"request {r.id}: {r.prompt} prompt + {r.output} output tokens; {spec.name} has {spec.max_positions} positions"
            )
    # replicas on one DRAM each hold a copy of the weights and a share of the room beside them
    shared = InstanceDram.parse(args.replicas_dram, "--replicas-dram") is InstanceDram.SHARED
    sharing = args.replicas if shared else 1
    capacity = kv_capacity_blocks(spec, hw, prec, settings.block_tokens, kv_precision=kv, sharing=sharing)
    accuracy = _accuracy(args, hw, prec, seq=args.prompt) if args.quantize else None
    if rates is not None:
        code = _serve_sweep(args, rates, spec, hw, prec, settings, capacity, weights, out, kv=kv, accuracy=accuracy)
        if accuracy is not None:
            print("\n".join(format_accuracy_lines(accuracy)))
        return code
    costs = SimulatedCosts(
        spec,
        hw,
        options=MapOptions(
            precision=prec, weights=weights, kv_precision=kv, kv_plan=args.kv_plan, requant=_requant(args)
        ),
        traffic=shared,  # each iteration's DRAM bytes, for the one DRAM's shares
    )
    if args.replicas != 1:
        return _serve_replicas(args, requests, costs, capacity, settings, spec, hw, prec, out)
    with TerminalProgress() as progress:
        res = simulate_serving(requests, costs, capacity_blocks=capacity, settings=settings, progress=progress)
    res.clock_mhz = hw.clock_mhz
    arrivals = f"trace {args.trace}" if args.trace is not None else f"poisson {args.rate:g}/s seed {args.seed}"
    res.meta = {"options": options(args), "model": spec.name, "hw": hw.fingerprint, "precision": prec.value,
                "memory": memory_description(hw),
                "kv_precision": (kv or prec).value, "kv_plan": args.kv_plan, "arrivals": arrivals,
                "weights": weights.to_dict(), **({"accuracy": accuracy.to_dict()} if accuracy else {})}  # fmt: skip
    sm = res.summary()
    kv_note = f", KV cache {kv.value}" if kv else ""
    print(f"{spec.name} on {hw.fingerprint} ({prec.value}{kv_note}): {sm.requests} requests, {arrivals}, "
          f"{settings.policy.value}, KV cache {capacity:,} blocks of {settings.block_tokens} positions "
          f"(beside the weights in {memory_limit(hw)[1]})")  # fmt: skip
    if kv:
        try:
            at_model = f"{kv_capacity_blocks(spec, hw, prec, settings.block_tokens):,}"
        except NvdlaError:
            at_model = "none"
        print(f"  KV cache at {kv.value}: {capacity:,} blocks ({at_model} at the model's {prec.value})")
    if weights.active:
        print(f"  weights: prune {str(weights.prune) or 'none'}, compression {'on' if weights.compression else 'off'}"
              f"{', 2:4 sparse MACs (what-if)' if weights.sparse_mac else ''}; the KV cache stays dense")  # fmt: skip
    print(f"  memory   {MemoryDescription.of(hw).summary()}")
    for k, v in sm.percentiles.items():
        if v:
            print(f"  {k.value:<8} p50 {v.p50:>10,.3f}  p90 {v.p90:>10,.3f}  p99 {v.p99:>10,.3f}")
    print(f"  throughput {sm.output_tokens_per_s:,.1f} output tokens/s, {sm.requests_per_s:,.2f} requests/s; "
          f"mean decode batch {sm.mean_decode_batch}, peak KV {sm.peak_kv_blocks:,} blocks, "
          f"{sm.preemptions} preemptions ({settings.preemption.value}"
          + (f", {sm.swap_ms:,.3f} ms of KV copies" if sm.swap_ms else "") + ")")  # fmt: skip
    if accuracy is not None:
        print("\n".join(format_accuracy_lines(accuracy)))
    if out is not None:
        from nvdla_mapper.reports.html import write_serve_html

        timeline, d = res.timeline(), res.to_dict()
        write_json(out / "serve.json", {**d, "timeline": timeline})
        rows = res.request_rows()
        write_table(out / "requests.csv", list(rows[0]), rows)
        page = write_serve_html(d, timeline, {k.value: v for k, v in res.latencies_ms().items()}, out)
        print(f"wrote {out / 'serve.json'}, {out / 'requests.csv'} and {page}", file=sys.stderr)
    return 0


def _serve_replicas(args, requests, costs, capacity, settings, spec, hw, prec, out) -> int:
    """`nvdla serve --replicas N`: each replica's latency percentiles and throughput, and all of them together."""
    from nvdla_mapper.results import memory_description
    from nvdla_mapper.studies.serve import replicas_percentiles, serve_replicas
    from nvdla_mapper.studies.system import capacity as dram_capacity

    shared = InstanceDram.parse(args.replicas_dram, "--replicas-dram") is InstanceDram.SHARED
    with TerminalProgress() as progress:
        results = serve_replicas(requests, costs, args.replicas, capacity_blocks=capacity, settings=settings,
                                 progress=progress, shared=dram_capacity(hw) if shared else None)  # fmt: skip
    for r in results:
        r.clock_mhz = hw.clock_mhz
    where = f"all on {hw.name}'s one DRAM, sharing its rate" if shared else "its own DRAM port"
    print(f"{spec.name} on {args.replicas} x {hw.fingerprint} ({prec.value}): {len(requests)} requests dealt round robin, "
          f"{settings.policy.value}, each replica a KV cache of {capacity:,} blocks and {where}")  # fmt: skip
    rows = []
    for k, r in enumerate(results):
        sm = r.summary()
        print(f"  replica {k + 1:<3} {sm.requests:>6,} requests  {_cells(sm.percentiles)}  "
              f"{sm.output_tokens_per_s:,.1f} tokens/s")  # fmt: skip
        rows.append({"replica": k + 1, **r.to_dict()})
    together = replicas_percentiles(results)
    done = [q for r in results for q in r.requests]  # first arrival to last finish over every replica
    seconds = (max(q.finish_cycle for q in done) - min(q.request.arrival_cycle for q in done)) / hw.clock_mhz / 1e6
    tokens = sum(q.request.output for q in done)
    print(f"  all         {len(requests):>6,} requests  {_cells(together)}  "
          f"{tokens / seconds if seconds else 0:,.1f} tokens/s")  # fmt: skip
    if out is not None:
        doc = {
            "model": spec.name,
            "hw": hw.fingerprint,
            "memory": memory_description(hw),
            "replicas_dram": args.replicas_dram,  # each replica's own DRAM port ("own"), or the build's one ("shared")
            "replicas": rows,
            "percentiles": {k.value: None if v is None else dataclasses.asdict(v) for k, v in together.items()},
        }
        write_json(out / "serve.json", doc)
        print(f"wrote {out / 'serve.json'}", file=sys.stderr)
    return 0


def _cells(percentiles) -> str:
    """Each latency's p50 / p90 / p99 on one line (the kinds some request has)."""
    return "  ".join(
        f"{lat.value} p50/p90/p99 {v.p50:,.3f} / {v.p90:,.3f} / {v.p99:,.3f}" for lat, v in percentiles.items() if v
    )


def _rates(text: str) -> list[float]:
    """--rates: comma-separated finite positive rates per second."""
    try:
        rates = [float(r) for r in text.split(",") if r.strip()]
    except ValueError:
        rates = []
    if not rates or not all(0 < r < float("inf") for r in rates):
        raise NvdlaError(f"--rates must be comma-separated numbers of requests per second above 0, not {text!r}")
    return rates


def _serve_sweep(
    args: argparse.Namespace, rates: list[float], spec, hw, prec, settings, capacity: int, weights, out: Path | None,
    *, kv=None, accuracy=None,
) -> int:  # fmt: skip
    """`nvdla serve --rates ... [--slo-ttft-ms T] [--slo-tpot-ms P]`: one run per rate, the same requests."""

    from nvdla_mapper.options import MapOptions
    from nvdla_mapper.results import memory_description
    from nvdla_mapper.studies.serve import Latency, SimulatedCosts, Slo, poisson_requests, sweep_rates

    slo = None
    if args.slo_ttft_ms is not None or args.slo_tpot_ms is not None:
        slo = Slo(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_percentile)

    def arrivals(rate: float):
        return poisson_requests(
            args.requests, rate, prompt=args.prompt, output=args.output, clock_mhz=hw.clock_mhz, seed=args.seed
        )

    costs = SimulatedCosts(
        spec,
        hw,
        options=MapOptions(
            precision=prec, weights=weights, kv_precision=kv, kv_plan=args.kv_plan, requant=_requant(args)
        ),
    )
    with TerminalProgress() as progress:
        sweep = sweep_rates(
            arrivals, rates, costs, capacity_blocks=capacity, settings=settings, clock_mhz=hw.clock_mhz, slo=slo,
            bisect_steps=args.bisect, progress=progress,
        )  # fmt: skip
    d = {"options": options(args), "model": spec.name, "hw": hw.fingerprint, "precision": prec.value,
         "memory": memory_description(hw), "requests": args.requests, "prompt": args.prompt, "output": args.output, "seed": args.seed,
         "policy": settings.policy.value, "preemption": settings.preemption.value,
         "chunk_tokens": settings.chunk_tokens if settings.policy.value == "chunked-prefill" else None,
         "block_tokens": settings.block_tokens, "max_batch": settings.max_batch, "kv_capacity_blocks": capacity,
         "slo_ttft_ms": args.slo_ttft_ms, "slo_tpot_ms": args.slo_tpot_ms, "weights": weights.to_dict(),
         "kv_precision": (kv or prec).value, "kv_plan": args.kv_plan, **({"accuracy": accuracy.to_dict()} if accuracy else {}),
         **sweep.to_dict()}  # fmt: skip
    kv_note = f", KV cache {kv.value}" if kv else ""
    print(f"{spec.name} on {hw.fingerprint} ({prec.value}{kv_note}): {args.requests} requests of {args.prompt} + "
          f"{args.output} tokens, Poisson seed {args.seed}, {settings.policy.value}")  # fmt: skip
    print(f"  KV cache {capacity:,} blocks of {settings.block_tokens} positions (beside the weights in "
          f"{_memory_limit(hw)}), preemption by {settings.preemption.value}")  # fmt: skip
    print(f"  {'rate/s':>9} {'TTFT p50':>10} {'TTFT p99':>10} {'TPOT p50':>9} {'TPOT p99':>9} {'tokens/s':>10} "
          f"{'preempted':>9}  target")  # fmt: skip
    for p in sweep.points:
        ok = "" if p.meets is None else ("met" if p.meets else "missed")
        ttft, tpot = (p.summary.percentiles[k] for k in (Latency.TTFT, Latency.TPOT))
        print(f"  {p.rate_per_s:>9,.2f} {ttft.p50:>10,.3f} {ttft.p99:>10,.3f} "
              f"{tpot.p50 if tpot else 0:>9,.3f} {tpot.p99 if tpot else 0:>9,.3f} {p.summary.output_tokens_per_s:>10,.1f} "
              f"{p.summary.preemptions:>9,}  {ok}")  # fmt: skip
    if slo is not None:
        best = sweep.best_rate_per_s
        if best is None:
            print(f"  no rate run meets {slo.describe()} (the lowest, {min(rates):g}/s, misses it)")
        elif sweep.bracket:
            lo, hi = sweep.bracket
            print(f"  highest rate meeting {slo.describe()}: {best:,.2f}/s (met at {lo:,.2f}, missed at {hi:,.2f})")
        else:
            print(f"  every rate run meets {slo.describe()}; the highest is {best:,.2f}/s (sweep higher rates)")
    if out is not None:
        from nvdla_mapper.reports.html import write_sweep_serve_html

        write_json(out / "sweep.json", d)
        write_table(out / "sweep.csv", list(d["rates"][0]), d["rates"])
        page = write_sweep_serve_html(d, out)
        print(f"wrote {out / 'sweep.json'}, {out / 'sweep.csv'} and {page}", file=sys.stderr)
    return 0


def _memory_limit(hw) -> str:
    from nvdla_mapper.studies.generate import memory_limit

    return memory_limit(hw)[1]


def _trained_dir_and_name(model: str) -> tuple[Path, str]:
    """A shipped trained model's directory (nvdla_validation's package data, found without importing
    it) and name, or those of a `<name>.config.json` path."""
    import importlib.util

    p = Path(model)
    if p.name.endswith(".config.json"):
        if not p.is_file():
            raise NvdlaError(f"{p}: no such file (train.py writes <name>.config.json beside <name>.npz)")
        return p.parent, p.name.removesuffix(".config.json")
    if "/" in model or model.endswith(".json"):
        raise NvdlaError(
            f"{model}: accuracy takes a shipped trained model (vit_digits, char_gpt) or the <name>.config.json "
            "that validation/trained/train.py wrote"
        )
    found = importlib.util.find_spec("nvdla_validation")
    if found is None or not found.submodule_search_locations:
        raise NvdlaError("the shipped trained models are nvdla_validation's data, which is not installed")
    return Path(found.submodule_search_locations[0]) / "data" / "trained", model


def _requant(args: argparse.Namespace) -> Granularity:
    """The requantization the layers are timed with: --quantize's weight scales (per channel: a per-kernel
    multiplier stream in each weighted layer's SDP), per tensor without --quantize."""
    return Granularity(args.quantize) if args.quantize else Granularity.PER_TENSOR


def _quant_settings(args: argparse.Namespace, granularity: str):
    from nvdla_mapper.numerics.quant import Calibration, Granularity
    from nvdla_mapper.studies.accuracy import QuantSettings

    try:
        cal = Calibration.parse(args.calib)
    except ValueError as e:
        raise NvdlaError(f"--calib: {e}") from None
    if not 0 <= getattr(args, "smooth", 0.0) <= 1:
        raise NvdlaError(f"--smooth must be a migration strength in 0..1, not {args.smooth}")
    only = frozenset(x.strip() for x in getattr(args, "only", "").split(",") if x.strip())
    if getattr(args, "prune", ""):
        from nvdla_mapper.options import WeightTreatment

        WeightTreatment(args.prune)  # the one grammar of --prune, checked before the run
    return QuantSettings(
        Granularity(granularity), cal, args.dynamic, getattr(args, "prune", "") or "",
        smooth=getattr(args, "smooth", 0.0), only=only, learned=getattr(args, "qat", ""),
        finetuned=getattr(args, "finetuned", ""), softmax=getattr(args, "softmax", "auto"),
        layernorm=getattr(args, "layernorm", "auto"),
    )  # fmt: skip


def _accuracy_command(args: argparse.Namespace) -> int:
    from nvdla_mapper.studies.accuracy import trained_accuracy

    check_needs(args, _ACCURACY_NEEDS)
    if args.samples is not None:
        check_int(args.samples, "--samples")
    for flag in ("prompts", "new_tokens"):
        check_int(getattr(args, flag), f"--{flag.replace('_', '-')}")
    json_path = output_file(args.json, "--json") if args.json is not None else None
    directory, name = _trained_dir_and_name(args.model)
    if name == "vit_digits":  # an image classifier: no text to continue
        for flag in ("prompts", "new_tokens"):
            if flag in args.given:
                raise NvdlaError(
                    f"--{flag.replace('_', '-')} sets the GPT's greedy continuations; {name} classifies images"
                )
    hw = load_config(args.hw)
    settings = dataclasses.replace(_quant_settings(args, args.quantize), precision=Precision.parse(args.precision))
    with TerminalProgress() as progress:
        task = trained_accuracy(
            directory, name, hw, settings, samples=args.samples, prompts=args.prompts, new_tokens=args.new_tokens,
            progress=progress,
        )  # fmt: skip
    print(format_task(task))
    if json_path is not None:
        write_json(json_path, {"options": options(args), "recipe": task.recipe, **task.to_dict()})
        print(f"wrote {json_path}", file=sys.stderr)
    return 0


def format_task(task) -> str:
    """A trained model's task accuracy (accuracy_report.TaskAccuracy) as lines: float against the run through
    the datapath at its precision."""
    from nvdla_mapper.numerics.accuracy_report import TrainedAccuracy

    prec = task.precision.value
    head = f"{task.model} on {task.hw}, {prec.upper()} ({task.recipe})"
    r = task.result
    if r is None:  # the build cannot be programmed for this run
        return f"{head}: {task.error}"
    if isinstance(r, TrainedAccuracy):
        n = r.images
        return (
            f"{head}\n  test accuracy     float {r.float_correct / n:.1%} ({r.float_correct}/{n}), "
            f"{prec} {r.nvdla_correct / n:.1%} ({r.nvdla_correct}/{n})\n  SDP saturations   {r.saturations:,}"
        )
    n = r.positions
    return (
        f"{head}\n  perplexity        float {round(r.float_perplexity, 4):.4f}, {prec} {round(r.nvdla_perplexity, 4):.4f} "
        f"({r.windows} windows, {n:,} positions)\n"
        f"  next-token acc.   float {r.float_correct / n:.2%}, {prec} {r.nvdla_correct / n:.2%}\n"
        f"  greedy agreement  {r.greedy_agree}/{r.greedy_tokens} tokens equal to float's "
        f"({r.prompts} prompts; {r.greedy_prefix} before the first difference)\n"
        f"  SDP saturations   {r.saturations:,}"
    )


def _zoo(args: argparse.Namespace) -> int:
    from nvdla_mapper.frontends.cnn import CNN_PRESETS
    from nvdla_mapper.frontends.presets import PRESETS
    from nvdla_mapper.workload import OpKind, ops_in_order

    for name, spec in PRESETS.items():
        layers = sum(s.layers for s in spec.stages) + spec.decoder_layers
        print(
            f"{name:<18}{spec.family:<12}{layers:>3} blocks  hidden {spec.stages[-1].hidden:<5} attention {spec.attention.value}"
        )
    for name, build in CNN_PRESETS.items():
        ops = ops_in_order(build(1))
        convs = sum(1 for o in ops if o.kind is OpKind.CONV)
        gmacs = sum(o.macs for o in ops) / 1e9
        print(f"{name:<18}{'cnn':<12}{convs:>3} convs   {gmacs:.2f} GMACs per image")
    return 0


def _map(args: argparse.Namespace) -> int:
    from nvdla_mapper.export.programs import check_layer
    from nvdla_mapper.frontends.resolve import model_graph
    from nvdla_mapper.lowering.rules import LoweringContext
    from nvdla_mapper.options import MapOptions, WeightTreatment
    from nvdla_mapper.passes import lower_graph, map_model
    from nvdla_mapper.reports.files import write_results
    from nvdla_mapper.workload import info

    check_needs(args, _MAP_NEEDS)
    for flag, v in (("--host-gflops", args.host_gflops), ("--host-gbs", args.host_gbs)):
        finite_positive(flag, v)
    if args.host_overhead_us is not None and not 0 <= args.host_overhead_us < float("inf"):
        raise NvdlaError(f"--host-overhead-us must be a finite number >= 0, not {args.host_overhead_us}")
    if args.top < 0:
        raise NvdlaError(f"--top must be a whole number >= 0 (rows of the per-layer table), not {args.top}")
    report = output_dir(args.report, "--report") if args.report is not None else None
    programs = output_dir(args.emit_program, "--emit-program") if args.emit_program is not None else None
    prec = _precision(args.precision)
    hw = load_config(args.hw)
    if args.host is not None:  # the profile's figures replace the config's [host]
        hw = hw.with_values(**{"host.profile": args.host})
    host_flags = {
        "host.gflops": args.host_gflops,
        "host.mem_gbs": args.host_gbs,
        "host.overhead_us": args.host_overhead_us,
    }
    if any(v is not None for v in host_flags.values()):  # over the config's [host]
        hw = hw.with_values(**{k: v for k, v in host_flags.items() if v is not None})
    warn_config(hw)
    hw.check_precision(prec)
    g = model_graph(
        args.model,
        batch=args.batch,
        seq=args.seq,
        dec_seq=args.dec_seq,
        host_fallback=args.host_fallback,
        extend_positions=args.extend_positions,
        head=args.head,
    )
    weights = WeightTreatment(args.prune, args.weight_compression, args.sparse_mac_whatif)
    if args.quantize:  # its settings and files checked before the map
        _check_quant(args, prec)
    opts = MapOptions(
        precision=prec, softmax=args.softmax, layernorm=args.layernorm, weights=weights, requant=_requant(args)
    )
    if args.layer:  # checked against the lowered model before the (longer) map runs
        check_layer(args.layer, lower_graph(g, LoweringContext(hw, opts))[0], model=info(g).name)
    res = map_model(g, hw, opts)
    if args.quantize:
        res.accuracy = _accuracy(args, hw, prec)
    print(format_summary(res, top=args.top))
    if programs is not None:
        from nvdla_mapper.export.programs import emit_programs, summary

        print(summary(emit_programs(res, programs, layer=args.layer)))
    if report is not None:
        from nvdla_mapper.reports.html import write_html

        paths = write_results(res, report, options=options(args))
        paths["html"] = write_html(res, report)
        for kind, p in paths.items():
            print(f"wrote {kind}: {p}", file=sys.stderr)
    return 0


def _tensor_parallel(spec, r) -> str:
    """What a tensor-parallel run's figures are: its shards and its reductions a step."""
    n, full, shard, red = r.tensor_parallel, spec.stages[0], r.spec.stages[0], r.step_reduction
    blocks = sum(st.layers for st in spec.stages)
    shared = r.tp_dram is InstanceDram.SHARED
    where = f"all on {r.hw.name}'s one DRAM, sharing its rate" if shared else "each on its own DRAM port"
    alone = f", {red.cycles:,} alone" if shared and r.step_reduction_cycles != red.cycles else ""
    return (
        f"{n} instances of {r.hw.name} in step, each a 1/{n} shard (heads {shard.heads} of {full.heads}, FFN "
        f"{shard.ffn:,} of {full.ffn:,}, vocabulary {r.spec.vocab:,} of {spec.vocab:,}), {where}; after "
        f"each of a step's {2 * blocks} row-parallel layers {red.passes} SDP passes add the others' partial sums "
        f"({r.step_reduction_cycles:,} cycles{alone}); every figure here is one instance's"
    )


def _at_model_precision(spec, hw, batch: int, options, kw: dict):
    """`nvdla generate`'s run with the caches at the model's precision (`options`), or why it does not fit."""
    from nvdla_mapper.studies.generate import generate

    try:
        return generate(spec, hw, batch=batch, options=options, **kw)
    except NvdlaError as e:
        return str(e)


def _kv_precision(args: argparse.Namespace, prec: Precision) -> Precision | None:
    """--kv-precision, None when absent or the model's own."""
    if args.kv_precision is None:
        return None
    try:
        kv = Precision.parse(args.kv_precision)
    except ValueError as e:
        raise NvdlaError(f"--kv-precision: {e}") from None
    return None if kv is prec else kv


def _check_quant(args: argparse.Namespace, prec: Precision) -> None:
    """--quantize's settings (calibration, precision) and calibration file, as one-line errors before the
    work."""
    if prec is not Precision.INT8:
        raise NvdlaError(f"--quantize produces INT8 layers; use --precision int8, not {prec.value}")
    _quant_settings(args, args.quantize)
    if args.calib_data is not None:
        from nvdla_mapper.studies.accuracy import load_calibration

        load_calibration(Path(args.calib_data))


def _accuracy(args: argparse.Namespace, hw, prec: Precision, *, seq: int | None = None):
    """The --quantize run's AccuracyReport: the model's block and, for a shipped trained model, its task."""
    from nvdla_mapper.frontends.presets import ModelSpec, sequence_length
    from nvdla_mapper.frontends.resolve import resolve_model
    from nvdla_mapper.studies.accuracy import TRAINED_DATA, accuracy_report

    if prec is not Precision.INT8:
        raise NvdlaError(f"--quantize produces INT8 layers; use --precision int8, not {prec.value}")
    settings = _quant_settings(args, args.quantize)
    spec = resolve_model(args.model)
    if not isinstance(spec, ModelSpec):
        raise NvdlaError("--quantize runs a transformer block: give a transformer preset or a config.json")
    seq = sequence_length(spec, args.seq if seq is None else seq)
    directory, name = _trained_dir_and_name(args.model) if args.model.endswith(".config.json") else (None, "")
    trained = (directory, name) if name in TRAINED_DATA and (directory / f"{name}.npz").is_file() else None
    return accuracy_report(spec, hw, settings, seq=seq, calib=args.calib_data, trained=trained)


def format_summary(res, *, top: int) -> str:
    """The map's summary lines, read from the typed result (MapResult, EnergyReport, WeightsReport)."""
    from nvdla_mapper.reports.numbers import rate
    from nvdla_mapper.results import group_layers

    lines = [
        f"{res.model} (batch {res.batch}{f', seq {res.seq}' if res.seq else ''}, {res.precision.value}) on {res.hw.fingerprint}",
        f"  end-to-end        {res.total_cycles:,} cycles = {res.latency_ms:.3f} ms at {res.hw.clock_mhz:g} MHz"
        f"  ({rate(round(res.throughput, 3))} inferences/s)",
        f"  MACs              {res.macs:,} on the hardware, {res.model_macs:,} of the model"
        f"  (MAC utilization over the run: hardware MACs {round(res.mac_utilization, 6):.1%},"
        f" model MACs {round(res.model_mac_utilization, 6):.1%})",
        "  busy over the run "
        + ", ".join(f"{k} {v:.1%}" for k, v in res.busy_share_of_run_by_resource().items() if v)
        + " (each resource's busy time over the wall time; they overlap)",
    ]
    groups = res.by_group()
    total = sum(groups.values()) or 1
    lines.append(
        "  resource time by group  "
        + ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(groups.items(), key=lambda kv: -kv[1]))
        + f" (of the busy time summed over {resources_phrase()})"
    )
    en = res.energy()
    per = "per inference" if res.batch == 1 else f"per inference ({en.batch_core_uj:,.1f} for the batch of {res.batch})"
    dram_per = "" if res.batch == 1 else f"{en.batch_dram_uj:,.1f} for the batch; "
    lines += [
        f"  energy            {en.core_uj_per_inference:,.1f} uJ in NVDLA {per}; {en.average_core_power_mw:,.1f}"
        f" mW average, {en.peak_core_power_mw:,.1f} mW peak, {en.tops_per_w:.2f} TOPS/W (model MACs)",
        f"  DRAM energy       {en.dram_uj_per_inference:,.1f} uJ per inference ({dram_per}{en.dram_device},"
        f" every byte moved: hardware layers and {copies_phrase()} copies)",
        f"  host              profile {res.hw.host.profile} ({res.hw.host.model}): {res.hw.host.source}",
        f"  memory            {res.memory_model().summary()}",
        f"  host energy       {en.host_uj_per_inference:,.1f} uJ per inference (its busy time at"
        f" {en.host_active_power_w:g} W active, [host] active_power_w)",
        f"  area              {en.area_mm2:.3f} mm2 at {en.tech_node_nm:g} nm (docs/energy.md)",
    ]
    zg = en.zero_gating_whatif
    if zg:
        lines.append(
            f"  zero-gating what-if  {zg.batch_core_uj / res.batch:,.1f} uJ in NVDLA per inference if zero weights"
            f" gated their multipliers (density {zg.density:.2f}: {zg.batch_saved_uj / res.batch:,.1f} uJ less;"
            " not NVDLA v1)"
        )
    bounds = res.by_bound()
    lines.append(
        "  resource time by bound  "
        + ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(bounds.items(), key=lambda kv: -kv[1]))
        + " (of the same summed busy time)"
    )
    hf = res.host_fallback()
    if hf.tasks:
        lines.append(f"  host fallback     {hf.tasks} tasks, {hf.cycles:,} cycles of host time:")
        lines += [f"                    - {n}" for n in hf.ops]
    else:
        lines.append("  host fallback     none: every op runs on NVDLA")
    w = res.weights_report()
    if w.prune != "none" or w.compression:
        saved = f", {w.cycles_saved:,} cycles saved vs dense" if w.cycles_saved is not None else ""
        lines.append(
            f"  weights           {w.stored_weight_bytes:,} of {w.dense_weight_bytes:,} bytes stored "
            f"(prune {w.prune}, compression {'on' if w.compression else 'off'}){saved}"
        )
        if w.sparse_mac_label:
            lines.append(f"                    {w.sparse_mac_label}")
        if w.note:
            lines.append(f"                    note: {w.note}")
    if res.accuracy:
        lines += format_accuracy_lines(res.accuracy)
    rows = sorted(group_layers(res.results), key=lambda r: -r["cycles"])[:top]
    if not rows:  # --top 0: no table
        return "\n".join(lines)
    lines.append(f"  {'top layers by cycles (all blocks)':<38}{'count':>6}{'cycles':>14}{'MAC util':>10}  bound")
    for r in rows:
        lines.append(
            f"  {r['name'][:38]:<38}{r['count']:>6}{r['cycles']:>14,}{r['hardware_mac_utilization']:>10.1%}  {r['bound']}"
        )
    return "\n".join(lines)


def format_accuracy_lines(acc) -> list[str]:
    """The --quantize report (map, generate, serve; an accuracy_report.AccuracyReport): the block's
    per-matmul error, a trained model's task."""
    lines = [
        f"  INT8 accuracy     {acc.granularity.value}, calib {acc.calibration}"
        f"{', dynamic' if acc.dynamic else ''}; relative error / cosine vs float32:"
    ]
    lines += [
        f"                    {e.name:<10} rel {e.rel:.4f}  cos {e.cosine:.5f}  max|err| {e.max_abs:.4f}"
        for e in acc.layers
    ]
    if acc.task is not None:  # a trained model: its task accuracy through the datapath
        lines += ["  " + line for line in format_task(acc.task).splitlines()]
    return lines
