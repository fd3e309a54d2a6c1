"""Architecture-exploration sweeps: a design space x workloads, stored in SQLite, resumable, with a Pareto front.

Sweep file (TOML):

    name = "bert_space"
    base = "nv_full"                         # config name or .toml path
    [space]                                  # dotted HwConfig fields (see HwConfig.with_values), precision,
                                             # instances: that many of the build at once on its DRAM, or
                                             # tensor_parallel (decode): the model split by heads and FFN
                                             # columns over that many of the build, in step
    "mac.atomic_c" = [32, 64]
    "cbuf.bank_depth" = [256, 512]
    "memory.dram_bandwidth_gbs" = [25.6, 51.2]
    clock_mhz = [800.0, 1000.0]
    precision = ["int8"]
    [workloads]
    models = ["bert-base"]                   # presets or config.json paths
    seq = [128]                              # prefill: the prompt; decode: the cached tokens before the step
    batch = [1]
    phase = ["prefill", "decode"]            # optional (default prefill: the forward pass `nvdla map` runs);
                                             # decode: one token-by-token step with a KV cache
    [options]                                # optional: softmax / layernorm placement, where decode
    softmax = "auto"                         # attention is planned (kv_plan = "bucket" or "length"), and
                                             # where tensor-parallel instances keep their data
                                             # (tp_dram = "own" ports or the build's one "shared" DRAM)
    [rank]                                   # optional: the best point by an objective, within constraints
    objective = "core_energy_uj"             # a sweep metric (METRICS)
    constraints = ["latency_ms<=20", "area_mm2<=2"]

`nvdla sweep` writes the Pareto fronts over latency, NVDLA energy and area (every pair and all three)
as CSVs and a plot, and with [rank] (or --rank / --where) the ranking of the points that meet the
constraints.

Each point has a stable id (hash of its parameters); a result row is committed as soon as the point
finishes, so a killed sweep resumes with nothing lost or duplicated. Each row records the model version
(`model_version`: a hash of the simulator's and mapper's code) and the digest of the configuration it
ran (`config_digest`); a resumed sweep recomputes the rows another version or another configuration
made, and says how many. Points are evaluated by a pure, picklable function, so the local process pool
and a dask.distributed cluster give identical rows.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import functools
import hashlib
import importlib
import itertools
import json
import math
import sqlite3
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_mapper.frontends.presets import ModelSpec, check_generative, decode_step_graph, tensor_shard
from nvdla_mapper.frontends.resolve import fixed_sequence, model_graph, resolve_model
from nvdla_mapper.options import InstanceDram, KvPlan, MapOptions, Placement
from nvdla_mapper.passes import map_model
from nvdla_mapper.results import MapResult, demand_profile
from nvdla_mapper.studies.parallel import alike_time, reduction, row_parallel_layers
from nvdla_mapper.studies.system import MAX_INSTANCES, shared_copies
from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.errors import ConfigError, NvdlaError
from nvdla_sim.files import write_table
from nvdla_sim.precision import Precision

METRICS = (
    "total_cycles",
    "latency_ms",
    "hardware_macs",  # what the MAC array performs (tile padding, zero blocks)
    "model_macs",  # the model's own multiply-accumulates, which tops_per_w counts
    "hardware_mac_utilization",  # hardware MACs over the peak x total_cycles
    "model_mac_utilization",  # model MACs over the peak x total_cycles
    "peak_macs_per_cycle",
    "cbuf_bytes",
    "dram_bytes",
    "host_tasks",
    "host_cycles",
    "throughput_inferences_per_s",
    # energy and area (issue 28; components from hwcomponents with the fitted overheads: docs/energy.md)
    # the point's run: its whole batch (a decode point: one step of `batch` tokens)
    "core_energy_uj",
    "dram_energy_uj",  # every DRAM byte the run moves (hardware layers and BDMA copies)
    "system_energy_uj",  # NVDLA core + DRAM: what a decode step costs the system (DRAM dominates it)
    "core_energy_uj_per_inference",  # core_energy_uj / batch (a decode point: per generated token)
    "system_energy_uj_per_inference",  # system_energy_uj / batch
    "host_energy_uj",  # the host's busy time (host_cycles) at its active power ([host] active_power_w)
    "host_energy_uj_per_inference",  # host_energy_uj / batch
    "average_core_power_mw",
    "peak_core_power_mw",
    "tops_per_w",
    "area_mm2",
    # several instances of the point's build, each running the workload at once on the build's DRAM ([space]
    # instances; mapper/studies/system.py): the figures above are then the system's (its time until the last
    # ends, every instance's work, energy and area); slowdown is an instance's time shared over alone
    "instances",
    "slowdown",
    # the model split over `tensor_parallel` instances of the build by heads and FFN columns, in step
    # ([space] tensor_parallel, decode points; studies/parallel.py): the figures above are then the system's
    # (a step with its reductions, every instance's work, energy and area; slowdown: on one shared DRAM, the
    # step over its time with a DRAM port each)
    "tensor_parallel",
)
_TOP_KEYS = {"name", "base", "space", "workloads", "options", "rank"}
_RANK_KEYS = {"objective", "constraints"}
_WORKLOAD_KEYS = {"models", "seq", "batch", "phase"}
PHASES = ("prefill", "decode")
_OPTION_KEYS = {"softmax", "layernorm", "kv_plan", "tp_dram"}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    base: str
    space: dict[str, list[Any]]
    models: list[str]
    seqs: list[int]
    batches: list[int]
    options: dict[str, str]
    phases: tuple[str, ...] = ("prefill",)
    objective: str | None = None  # [rank] objective: rank the points by it
    constraints: tuple[Constraint, ...] = ()  # [rank] constraints

    def points(self) -> list[dict[str, Any]]:
        keys = sorted(self.space)
        out = []
        for values in itertools.product(*(self.space[k] for k in keys)):
            hw_params = dict(zip(keys, values, strict=True))
            for model, seq, batch, phase in itertools.product(self.models, self.seqs, self.batches, self.phases):
                p = {
                    "base": self.base,
                    "hw": hw_params,
                    "model": model,
                    "seq": seq,
                    "batch": batch,
                    "options": self.options,
                }
                if phase != "prefill":  # prefill points keep the ids they had before phases existed
                    p["phase"] = phase
                p["id"] = point_id(p)
                out.append(p)
        return out


def point_id(p: dict[str, Any]) -> str:
    keys = ("base", "hw", "model", "seq", "batch", "options", "phase")  # phase only on decode points
    key = json.dumps({k: p[k] for k in keys if k in p}, sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:16]


# The code a sweep row's figures come from: the simulator and the mapper up to the result model. Reports,
# program export and the studies only present or reuse those figures, so editing them keeps old rows.
_MODEL_ROOMS = ("nvdla_sim", "nvdla_mapper")
_NOT_MODEL = ("reports", "export", "studies")
# a study a row's figures come from (the instances and tensor_parallel axes)
_MODEL_STUDIES = ("studies/system.py", "studies/parallel.py")


@functools.cache
def model_version() -> str:
    """Fingerprint of the timing and mapping model: a hash of the syntax trees of the modules that compute a
    row (comments and formatting do not count). A row made by another version is recomputed on resume."""
    h = hashlib.sha1()
    for pkg in _MODEL_ROOMS:
        root = Path(importlib.import_module(pkg).__file__).parent
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root)
            if rel.parts[0] in _NOT_MODEL and rel.as_posix() not in _MODEL_STUDIES:
                continue
            h.update(f"{pkg}/{rel.as_posix()}".encode())
            h.update(ast.dump(ast.parse(f.read_text())).encode())
    return h.hexdigest()[:12]


def config_digest(hw: HwConfig) -> str:
    """Fingerprint of every value of a configuration (a custom TOML edited in place changes it)."""
    return hashlib.sha1(json.dumps(hw.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:12]


def point_config(p: dict[str, Any]) -> tuple[HwConfig, Precision]:
    """The configuration and precision a sweep point runs."""
    hw_params = dict(p["hw"])
    prec = Precision.parse(str(hw_params.pop("precision", "int8")))
    hw_params.pop("instances", None)  # how many of the build, not a field of it
    hw_params.pop("tensor_parallel", None)
    base = load_config(p["base"])
    return (base.with_values(**hw_params) if hw_params else base), prec


def load_sweep(path: str | Path) -> SweepSpec:
    """Parse and validate a sweep file; every error names the file and the key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise NvdlaError(f"{path}: cannot read sweep file ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise NvdlaError(f"{path}: not valid TOML ({e})") from None
    return sweep_from_dict(data, source=str(path))


def sweep_from_dict(data: dict[str, Any], *, source: str = "sweep") -> SweepSpec:
    def err(msg: str) -> NvdlaError:
        return NvdlaError(f"{source}: {msg}")

    _check_keys(data, _TOP_KEYS, "", err)
    base = data.get("base", "nv_full")
    try:
        hw = load_config(base)
    except ConfigError as e:
        raise err(f"base: {e}") from None
    space = data.get("space", {})
    if not isinstance(space, dict):
        raise err("[space] must be a table of lists")
    for k, v in space.items():
        if not isinstance(v, list) or not v:
            raise err(f"space.{k} must be a non-empty list, not {v!r}")
        if k == "precision":
            for pv in v:
                try:
                    Precision.parse(str(pv))
                except ValueError as e:
                    raise err(f"space.precision: {e}") from None
            continue
        if k in ("instances", "tensor_parallel"):
            if not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_INSTANCES for n in v):
                raise err(f"space.{k} must be whole numbers of NVDLA instances from 1 to {MAX_INSTANCES}, "
                          f"not {v!r}")  # fmt: skip
            continue
        try:
            hw.with_values(**{k: v[0]})
        except ConfigError as e:
            raise err(f"space.{k}: {e}") from None
    wl = data.get("workloads")
    if not isinstance(wl, dict):
        raise err("missing [workloads] table (models, seq, batch)")
    _check_keys(wl, _WORKLOAD_KEYS, " in [workloads]", err)
    models = wl.get("models")
    if not isinstance(models, list) or not models:
        raise err("workloads.models must be a non-empty list of presets or config.json paths")
    for m in models:
        try:
            if str(m) not in CNN_PRESETS:
                resolve_model(str(m))
        except NvdlaError as e:
            raise err(f"workloads.models: {e}") from None
    seqs, batches = wl.get("seq", [128]), wl.get("batch", [1])
    for name, vals in (("seq", seqs), ("batch", batches)):
        if not isinstance(vals, list) or not vals or not all(isinstance(x, int) and x >= 1 for x in vals):
            raise err(f"workloads.{name} must be a non-empty list of positive integers, not {vals!r}")
    phases = wl.get("phase", ["prefill"])
    if not isinstance(phases, list) or not phases or any(ph not in PHASES for ph in phases):
        raise err(f"workloads.phase must be a non-empty list of {', '.join(PHASES)}, not {phases!r}")
    if "decode" in phases:
        for m in models:
            src = None if str(m) in CNN_PRESETS else resolve_model(str(m))
            if not isinstance(src, ModelSpec):
                raise err(f"workloads.phase decode: {m} is not a transformer preset or config.json")
            try:
                check_generative(src)
            except NvdlaError as e:
                raise err(f"workloads.phase decode: {e}") from None
    if max(space.get("tensor_parallel", [1])) > 1:
        if phases != ["decode"]:
            raise err(f"space.tensor_parallel splits a decode step over instances: give workloads.phase = "
                      f"[\"decode\"], not {phases!r}")  # fmt: skip
        if max(space.get("instances", [1])) > 1:
            raise err("space.tensor_parallel and space.instances: one model split over instances, or copies of "
                      "it at once; not both in one sweep")  # fmt: skip
    options = data.get("options", {})
    _check_keys(options, _OPTION_KEYS, " in [options]", err)
    for k, v in options.items():
        valid = tuple((KvPlan if k == "kv_plan" else InstanceDram if k == "tp_dram" else Placement).values())
        if v not in valid:
            raise err(f"options.{k} must be {', '.join(valid[:-1])} or {valid[-1]}, not {v!r}")
    rank_table = data.get("rank", {})
    if not isinstance(rank_table, dict):
        raise err("[rank] must be a table (objective, constraints)")
    _check_keys(rank_table, _RANK_KEYS, " in [rank]", err)
    objective = rank_table.get("objective")
    if objective is not None:
        try:
            check_metric(objective, "rank.objective")
        except NvdlaError as e:
            raise err(str(e)) from None
    texts = rank_table.get("constraints", [])
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise err('rank.constraints must be a list of strings like "latency_ms<=20"')
    try:
        constraints = tuple(parse_constraint(t) for t in texts)
    except NvdlaError as e:
        raise err(f"rank.constraints: {e}") from None
    return SweepSpec(
        str(data.get("name", "sweep")), str(base), space, [str(m) for m in models], seqs, batches, options,
        tuple(phases), objective, constraints,
    )  # fmt: skip


def _check_keys(table: dict, allowed: set[str], where: str, err: Callable[[str], NvdlaError]) -> None:
    extra = set(table) - allowed
    if extra:
        raise err(f"unknown key(s) {sorted(extra)}{where}; allowed: {sorted(allowed)}")


def check_metric(name: str, what: str) -> None:
    """A one-line error unless `name` is a sweep metric (`what` says where it was given)."""
    if name not in METRICS:
        raise NvdlaError(f"{what} {name!r} is not a sweep metric; one of {', '.join(METRICS)}")


def evaluate_point(p: dict[str, Any]) -> dict[str, Any]:
    """Map one workload on one config; returns a result row (status 'error' with the message on failure)."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"id": p["id"], "params": p}
    try:
        hw, prec = point_config(p)
        opts = p.get("options", {})
        options = MapOptions(precision=prec, softmax=opts.get("softmax", "auto"),
                             layernorm=opts.get("layernorm", "auto"), kv_plan=opts.get("kv_plan", "bucket"))  # fmt: skip
        shards = p["hw"].get("tensor_parallel", 1)
        if p.get("phase", "prefill") == "decode":  # one step: every sequence has seq cached tokens, adds one
            spec = resolve_model(p["model"])
            shard = tensor_shard(spec, shards)
            g = decode_step_graph(
                shard, batch=p["batch"], kv_len=p["seq"], cross_len=p["seq"] if spec.decoder_layers else 0
            )
            res = map_model(g, hw, options, seq=p["seq"], batch=p["batch"])
        else:
            # a CNN or a vision model runs its own sequence whatever the sweep's seq axis says
            seq = p["seq"] if fixed_sequence(p["model"]) is None else None
            res = map_model(model_graph(p["model"], batch=p["batch"], seq=seq), hw, options)
        row.update(status="ok", error="", hw_fingerprint=hw.fingerprint, seq=res.seq, config_digest=config_digest(hw),
                   notes="; ".join(hw.notes))  # fmt: skip  # seq: what the model ran (image tokens, 0 for a CNN)
        copies = p["hw"].get("instances", 1)
        if shards > 1:
            shared = InstanceDram.parse(opts.get("tp_dram", "own"), "options.tp_dram") is InstanceDram.SHARED
            row.update(_tensor_parallel_figures(res, spec, hw, prec, shards, shared))
        else:
            row.update(_figures(res, hw, prec) if copies == 1 else _system_figures(res, hw, prec, copies))
    except NvdlaError as e:
        row.update(status="error", error=str(e), hw_fingerprint="", config_digest="", notes="",
                   **dict.fromkeys(METRICS, None))  # fmt: skip
    row["model_version"] = model_version()  # as the worker that computed it sees it
    row["wall_s"] = time.perf_counter() - t0
    return row


def _figures(res: MapResult, hw: HwConfig, prec: Precision) -> dict[str, Any]:
    """A point's metrics from its run on one instance."""
    en, host = res.energy(), res.host_fallback()
    return dict(
        total_cycles=res.total_cycles,
        latency_ms=res.latency_ms,
        hardware_macs=res.macs,
        model_macs=res.model_macs,
        hardware_mac_utilization=round(res.mac_utilization, 6),
        model_mac_utilization=round(res.model_mac_utilization, 6),
        peak_macs_per_cycle=hw.peak_macs_per_cycle(prec),
        cbuf_bytes=hw.cbuf_bytes,
        dram_bytes=res.figures().dram_bytes,
        host_tasks=host.tasks,
        host_cycles=host.cycles,
        throughput_inferences_per_s=res.throughput,
        core_energy_uj=en.batch_core_uj,
        dram_energy_uj=en.batch_dram_uj,
        system_energy_uj=round(en.batch_core_uj + en.batch_dram_uj, 6),
        core_energy_uj_per_inference=en.core_uj_per_inference,
        system_energy_uj_per_inference=round((en.batch_core_uj + en.batch_dram_uj) / res.batch, 6),
        host_energy_uj=en.batch_host_uj,
        host_energy_uj_per_inference=en.host_uj_per_inference,
        average_core_power_mw=en.average_core_power_mw,
        peak_core_power_mw=en.peak_core_power_mw,
        tops_per_w=en.tops_per_w,
        area_mm2=en.area_mm2,
        instances=1,
        slowdown=1.0,
        tensor_parallel=1,
    )


def _system_figures(res: MapResult, hw: HwConfig, prec: Precision, copies: int) -> dict[str, Any]:
    """A point's metrics for `copies` instances of its build each running its workload at once on the build's
    DRAM (system.shared_copies): the system's time until the last ends, every instance's work, energy and
    area, an inference each per instance's batch."""
    one = _figures(res, hw, prec)
    system = shared_copies(res, copies, res.model)
    ns = system.makespan_ns
    cores = sum(i.core_uj for i in system.instances)
    cycles = math.ceil(ns * hw.clock_mhz / 1e3)
    return _system_row(one, copies, cycles, ns, cores, system.dram_uj, system.total_uj, copies * res.batch,
                       one["dram_bytes"] * copies,
                       slowdown=round(max(i.slowdown for i in system.instances), 6))  # fmt: skip


def _tensor_parallel_figures(
    res: MapResult, spec: ModelSpec, hw: HwConfig, prec: Precision, shards: int, shared: bool
) -> dict[str, Any]:
    """A decode point's metrics for the model split over `shards` instances of its build (`res`: a shard's
    step alone): the step with a reduction after each row-parallel layer (parallel.reduction), on DRAM ports
    of their own or, `shared`, on the build's one DRAM (parallel.alike_time), every instance's work, energy
    and area."""
    one = _figures(res, hw, prec)
    red = reduction(hw, res.batch, spec.stages[0].hidden, shards, prec)
    passes = row_parallel_layers(spec)
    alike = shards if shared else 1
    step, step_core, step_dram = (
        alike_time(res.total_cycles, demand_profile(res), hw, alike) if shared else (res.total_cycles, 0.0, 0.0)
    )
    red_cycles, red_core, red_dram = (
        alike_time(red.cycles, red.profile, hw, alike) if shared else (red.cycles, 0.0, 0.0)
    )
    cycles = step + passes * red_cycles
    own = res.total_cycles + passes * red.cycles
    core = one["core_energy_uj"] + step_core + passes * (red.core_uj + red_core)  # an instance's
    dram = one["dram_energy_uj"] + step_dram + passes * (red.dram_uj + red_dram)
    return _system_row(one, shards, cycles, cycles * 1e3 / hw.clock_mhz, shards * core, shards * dram,
                       shards * (core + dram), res.batch, shards * (one["dram_bytes"] + passes * red.dram_bytes),
                       slowdown=round(cycles / own, 6), tensor_parallel=shards)  # fmt: skip


def _system_row(
    one: dict[str, Any], count: int, cycles: int, ns: float, cores: float, dram: float, system: float,
    inferences: int, dram_bytes: int, **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    """A row for `count` instances of a build from one instance's (`one`, _figures): the system's time
    (`cycles`, and `ns` as the throughput and power take it), every instance's work and area, their core,
    DRAM and system energy (uJ), over `inferences`."""
    out = {m: one[m] * count for m in ("hardware_macs", "model_macs", "peak_macs_per_cycle", "cbuf_bytes",
                                        "host_tasks", "host_cycles", "host_energy_uj", "area_mm2",
                                        "peak_core_power_mw")}  # fmt: skip
    peak = out["peak_macs_per_cycle"] * cycles
    return {**one, **out,
        "total_cycles": cycles, "latency_ms": ns / 1e6, "dram_bytes": dram_bytes,
        "hardware_mac_utilization": round(out["hardware_macs"] / peak, 6) if peak else 0.0,
        "model_mac_utilization": round(out["model_macs"] / peak, 6) if peak else 0.0,
        "throughput_inferences_per_s": inferences / (ns * 1e-9) if ns else 0.0,
        "core_energy_uj": round(cores, 6), "dram_energy_uj": round(dram, 6), "system_energy_uj": round(system, 6),
        "core_energy_uj_per_inference": round(cores / inferences, 6),
        "system_energy_uj_per_inference": round(system / inferences, 6),
        "host_energy_uj_per_inference": round(out["host_energy_uj"] / inferences, 6),
        "average_core_power_mw": round(cores * 1e-6 / (ns * 1e-9) * 1e3, 3) if ns else 0.0,
        "tops_per_w": round(2 * out["model_macs"] / (cores * 1e-6) / 1e12, 6) if cores else 0.0,
        "instances": count, **extra,
    }  # fmt: skip


# ---- storage --------------------------------------------------------------------------------------


_TABLE = "sweep_rows"  # keyed by (sweep, id): two sweeps sharing a point each keep their row
_LEGACY = "points"  # the table before rows carried a model version (their rows are recomputed)


def open_db(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    cols = ", ".join(f"{m} REAL" for m in METRICS)
    try:
        con.execute("PRAGMA schema_version")  # reads the file's header: not a database, an error here
    except sqlite3.DatabaseError as e:
        con.close()
        raise NvdlaError(f"{path}: not a sweep database ({e}); give a new file or one `nvdla sweep` wrote") from None
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (sweep TEXT, id TEXT, params TEXT, status TEXT, error TEXT, "
        f"hw_fingerprint TEXT, config_digest TEXT, model_version TEXT, notes TEXT, model TEXT, seq INTEGER, batch INTEGER, "
        f"{cols}, wall_s REAL, PRIMARY KEY (sweep, id))"
    )
    # a database from before a metric existed gains its column (its rows, of another model version, are
    # recomputed by run_sweep)
    have = {r[1] for r in con.execute(f"PRAGMA table_info({_TABLE})")}
    for m in METRICS:
        if m not in have:
            con.execute(f"ALTER TABLE {_TABLE} ADD COLUMN {m} REAL")
    con.commit()
    return con


def _store(con: sqlite3.Connection, sweep: str, row: dict[str, Any]) -> None:
    p = row["params"]
    names = ["sweep", "id", "params", "status", "error", "hw_fingerprint", "config_digest", "model_version", "notes",
             "model", "seq", "batch", *METRICS, "wall_s"]  # fmt: skip
    values = [
        sweep,
        row["id"],
        json.dumps(p, sort_keys=True),
        row["status"],
        row["error"],
        row["hw_fingerprint"],
        row["config_digest"],
        row["model_version"],
        row["notes"],
        p["model"],
        row.get("seq", p["seq"]),
        p["batch"],
        *(row[m] for m in METRICS),
        row["wall_s"],
    ]
    con.execute(f"INSERT OR REPLACE INTO {_TABLE} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)
    con.commit()


def read_rows(con: sqlite3.Connection, sweep: str | None = None) -> list[dict[str, Any]]:
    con.row_factory = sqlite3.Row
    q = f"SELECT * FROM {_TABLE}" + (" WHERE sweep = ?" if sweep else "") + " ORDER BY id"
    rows = [dict(r) for r in con.execute(q, (sweep,) if sweep else ())]
    con.row_factory = None
    for r in rows:
        r["params"] = json.loads(r["params"])
    return rows


# ---- executors --------------------------------------------------------------------------------------


def _serial(fn: Callable, points: list[dict]) -> Iterable[dict]:
    for p in points:
        yield fn(p)


def _local(fn: Callable, points: list[dict], workers: int) -> Iterable[dict]:
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, p) for p in points]
        for f in cf.as_completed(futures):
            yield f.result()


def _dask(fn: Callable, points: list[dict], scheduler: str | Any) -> Iterable[dict]:
    from distributed import Client, as_completed

    client = scheduler if hasattr(scheduler, "submit") else Client(scheduler)
    try:
        futures = client.map(fn, points, pure=False)
        for f in as_completed(futures):
            yield f.result()
    finally:
        if client is not scheduler:
            client.close()


@dataclass(frozen=True)
class SweepRun:
    """What a run of a sweep did: all of its rows, and how many points it evaluated, reused and recomputed
    (rows another model version or configuration had made)."""

    rows: list[dict[str, Any]]
    evaluated: int
    reused: int
    recomputed: int
    model_version: str


def _stale(con: sqlite3.Connection, sweep: str, points: list[dict[str, Any]], version: str) -> tuple[set, set]:
    """(ids whose row is current, ids with a row made by another version or configuration)."""
    made = {r[0]: (r[1], r[2], r[3]) for r in con.execute(
        f"SELECT id, model_version, config_digest, status FROM {_TABLE} WHERE sweep = ?", (sweep,))}  # fmt: skip
    legacy = set()
    if con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name=?", (_LEGACY,)).fetchone():
        legacy = {r[0] for r in con.execute(f"SELECT id FROM {_LEGACY} WHERE sweep = ?", (sweep,))}
    current, stale = set(), set()
    for p in points:
        pid = p["id"]
        if pid in made:
            row_version, digest, status = made[pid]
            if row_version == version and (status != "ok" or digest == _digest_of(p)):
                current.add(pid)
            else:
                stale.add(pid)
        elif pid in legacy:
            stale.add(pid)
    return current, stale


def _digest_of(p: dict[str, Any]) -> str:
    return _digest_cached(p["base"], json.dumps(p["hw"], sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _digest_cached(base: str, hw_json: str) -> str:
    """A configuration's digest, loaded once per (base, values) in a run: the points of a sweep share configs."""
    try:
        return config_digest(point_config({"base": base, "hw": json.loads(hw_json)})[0])
    except NvdlaError:
        return ""


def run_sweep(
    spec: SweepSpec,
    db: str | Path,
    *,
    executor: str = "local",
    workers: int = 2,
    scheduler: str | Any | None = None,
    progress: bool = False,
) -> SweepRun:
    """Evaluate every point without a current row in `db` (none yet, or one made by another model version
    or configuration) and return all rows of this sweep (ordered by id) with what was done."""
    con = open_db(db)
    try:  # the connection closed whatever happens (a point's error, an interrupt): committed rows stay
        version = model_version()
        _digest_cached.cache_clear()  # a config file may have changed since the last run: digests per run
        points = spec.points()
        current, stale = _stale(con, spec.name, points, version)
        todo = [p for p in points if p["id"] not in current]
        if executor == "serial":
            results = _serial(evaluate_point, todo)
        elif executor == "local":
            results = _local(evaluate_point, todo, workers)
        elif executor == "dask":
            if scheduler is None:
                raise NvdlaError("the dask executor needs --scheduler tcp://host:port (or a distributed.Client)")
            results = _dask(evaluate_point, todo, scheduler)
        else:
            raise NvdlaError(f"unknown executor {executor!r}; valid: serial, local, dask")
        if todo:
            if progress:
                from tqdm import tqdm

                # on a terminal only (disable=None): piped or redirected output stays free of it
                results = tqdm(results, total=len(todo), desc=spec.name, unit="point", disable=None)
            for row in results:
                _store(con, spec.name, row)
        rows = read_rows(con, spec.name)
    finally:
        con.close()
    return SweepRun(rows, len(todo), len(current), len(stale), version)


# ---- Pareto fronts and ranking ----------------------------------------------------------------------

# The design objectives a sweep trades (all minimised): time, NVDLA core energy, silicon area.
OBJECTIVES = ("latency_ms", "core_energy_uj", "area_mm2")
# The fronts `nvdla sweep` writes: every pair, and all three together (pareto.csv).
FRONTS = (("latency_ms", "core_energy_uj"), ("latency_ms", "area_mm2"), ("core_energy_uj", "area_mm2"), OBJECTIVES)
_LABELS = {"latency_ms": "latency (ms)", "core_energy_uj": "NVDLA energy (uJ)", "area_mm2": "area (mm2)"}


def phase_of(r: dict[str, Any]) -> str:
    return r.get("params", {}).get("phase", "prefill")


def _workload(r: dict[str, Any]) -> tuple:
    return (r["model"], r["seq"], r["batch"], phase_of(r))


def pareto_front(rows: list[dict[str, Any]], axes: tuple[str, ...] = OBJECTIVES) -> list[dict[str, Any]]:
    """Rows no other row of the same workload (model, seq, batch, phase) dominates on `axes` (all minimised: no
    worse on every axis and better on one); rows with the same values on every axis are all kept."""
    ok = [r for r in rows if r["status"] == "ok"]
    by_workload: dict[tuple, list[dict[str, Any]]] = {}
    for r in ok:
        by_workload.setdefault(_workload(r), []).append(r)
    front = []
    for same in by_workload.values():
        for r in same:
            if not any(all(o[a] <= r[a] for a in axes) and any(o[a] < r[a] for a in axes) for o in same):
                front.append(r)
    return sorted(front, key=lambda r: (*_workload(r), *(r[a] for a in axes)))


@dataclass(frozen=True)
class Constraint:
    """metric <= bound or metric >= bound (a sweep METRIC)."""

    metric: str
    op: str  # "<=" or ">="
    bound: float

    def holds(self, row: dict[str, Any]) -> bool:
        v = row[self.metric]
        return v is not None and (v <= self.bound if self.op == "<=" else v >= self.bound)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    """`latency_ms<=20`, `area_mm2 <= 2`, `tops_per_w>=5`: a sweep metric, <= or >=, a number."""
    for op in ("<=", ">="):
        if op in text:
            name, _, value = (t.strip() for t in text.partition(op))
            break
    else:
        raise NvdlaError(f"constraint {text!r}: write METRIC<=NUMBER or METRIC>=NUMBER (e.g. latency_ms<=20)")
    check_metric(name, f"constraint {text!r}:")
    try:
        bound = float(value)
    except ValueError:
        raise NvdlaError(f"constraint {text!r}: {value!r} is not a number") from None
    if not math.isfinite(bound):
        raise NvdlaError(f"constraint {text!r}: the bound must be a finite number, not {value!r}")
    return Constraint(name, op, bound)


def rank(rows: list[dict[str, Any]], objective: str, constraints: tuple[Constraint, ...] = ()) -> list[dict]:
    """The points that meet every constraint, per workload (model, seq, batch, phase) and in each best first
    by `objective` (a sweep metric; minimised, except the higher-is-better throughput_inferences_per_s,
    the MAC utilizations and tops_per_w)."""
    check_metric(objective, "rank objective")
    sign = -1 if objective in _HIGHER_IS_BETTER else 1
    ok = [r for r in rows if r["status"] == "ok" and r[objective] is not None and all(c.holds(r) for c in constraints)]
    return sorted(ok, key=lambda r: (_workload(r), sign * r[objective], r["id"]))


_HIGHER_IS_BETTER = {"throughput_inferences_per_s", "hardware_mac_utilization", "model_mac_utilization", "tops_per_w"}


def _front_name(axes: tuple[str, ...]) -> str:
    return "pareto" if axes == OBJECTIVES else "pareto_" + "_vs_".join(a.split("_")[0] for a in axes)


def write_pareto(rows: list[dict[str, Any]], out_dir: str | Path) -> dict[str, Path]:
    """pareto.csv (the front over latency, energy and area), one CSV per pair of them, and pareto.png:
    every point and each pair's front, one panel per pair."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cols = ["id", "model", "seq", "batch", "phase", "hw_fingerprint", *METRICS]
    paths: dict[str, Path] = {}
    for axes in FRONTS:
        name = _front_name(axes)
        paths[name] = out / f"{name}.csv"
        front = [{**{c: r.get(c) for c in cols}, "phase": phase_of(r),
                  "hw": json.dumps(r["params"]["hw"], sort_keys=True)} for r in pareto_front(rows, axes)]  # fmt: skip
        write_table(paths[name], [*cols, "hw"], front)
    ok = [r for r in rows if r["status"] == "ok"]
    pairs = FRONTS[:3]
    fig, axs = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.2))
    for ax, (x, y) in zip(axs, pairs, strict=True):
        if ok:
            sc = ax.scatter([r[x] for r in ok], [r[y] for r in ok], c=[r["peak_macs_per_cycle"] for r in ok],
                            cmap="viridis", s=16, alpha=0.6, norm=matplotlib.colors.LogNorm())  # fmt: skip
            front = pareto_front(rows, (x, y))
            ax.plot([r[x] for r in front], [r[y] for r in front], "r-", lw=0.8)
            ax.scatter([r[x] for r in front], [r[y] for r in front], facecolors="none", edgecolors="red", s=50,
                       label=f"Pareto front ({len(front)})")  # fmt: skip
            ax.legend(fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(_LABELS[x])
        ax.set_ylabel(_LABELS[y])
    if ok:
        fig.colorbar(sc, ax=list(axs), label="MACs per cycle")
    fig.suptitle("Design space: every point and each pair's Pareto front (per workload in the CSVs)")
    paths["png"] = out / "pareto.png"
    fig.savefig(paths["png"], dpi=110, bbox_inches="tight")
    plt.close(fig)
    paths["csv"] = paths["pareto"]
    return paths


def write_ranking(ranked: list[dict[str, Any]], out_dir: str | Path) -> Path:

    path = Path(out_dir) / "ranking.csv"
    cols = ["id", "model", "seq", "batch", "phase", "hw_fingerprint", *METRICS]
    table = [{"rank": i, **{c: r.get(c) for c in cols}, "phase": phase_of(r),
              "hw": json.dumps(r["params"]["hw"], sort_keys=True)} for i, r in enumerate(ranked, 1)]  # fmt: skip
    return write_table(path, ["rank", *cols, "hw"], table)
