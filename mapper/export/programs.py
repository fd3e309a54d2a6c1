"""`nvdla map ... --emit-program DIR`: the mapped model's hardware layers as NVDLA register programs.

One trace test per task (a split convolution's hardware layers in one program), in NVIDIA's trace-test format,
plus DIR/programs.json: for each program the task it belongs to, the model's cycles (op enable to
interrupt), the mapper's cycles for one instance of the task, and the expected output CRCs (the
bit-exact model's). Run the folder on NVIDIA's RTL with

    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir DIR --out results.json

and every program whose check passes wrote exactly the model's bytes. Tasks run on the host (softmax,
layernorm, GELU without the SDP LUT, re-layouts without BDMA) have no program; programs.json names them.
"""

from __future__ import annotations

import difflib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvdla_mapper.export.layer_programs import layer_programs, layernorm_programs, program_name
from nvdla_mapper.lowering.rules import Resource, Task
from nvdla_mapper.numerics import layernorm_steps as norm
from nvdla_mapper.reports.files import output_folder
from nvdla_mapper.results import MapResult, TaskResult
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.errors import NvdlaError, TraceError
from nvdla_sim.files import write_json

MANIFEST = "programs.json"


@dataclass
class EmitResult:
    folder: Path
    programs: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # hardware layers without a program
    host: list[str] = field(default_factory=list)  # tasks that run on the host or BDMA


def _plan(r: TaskResult) -> TilePlan | None:
    return r.stats.plan if r.stats else None


def check_layer(layer: str, tasks: list[Task], *, model: str) -> None:
    """`layer` must name a hardware layer among `tasks` (the lowered model: checked before mapping, so a
    typo is reported at once); the error suggests the nearest names."""
    found = [t for t in tasks if t.name == layer]
    if not found:
        names = [t.name for t in tasks if t.resource is Resource.NVDLA]
        near = difflib.get_close_matches(layer, names, n=3, cutoff=0.6)
        parts = [t for t in names if t.startswith(layer + ".") or t.startswith(layer + "[")]
        if parts:
            hint = f"{layer} runs as {len(parts)} layers: " + ", ".join(parts[:6]) + (", ..." if len(parts) > 6 else "")
        elif near:
            hint = "did you mean " + ", ".join(near)
        else:
            hint = "hardware layers: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        raise NvdlaError(f"--layer {layer!r}: no such task in {model}; {hint}")
    if found[0].resource is not Resource.NVDLA:  # the host's work, or a processor beside the core (a copy)
        t = found[0]
        raise NvdlaError(f"--layer {layer!r} runs on the {t.resource.value} ({t.note}); it has no NVDLA program")


def emit_programs(result: MapResult, folder: str | Path, *, layer: str | None = None, prefix: str = "") -> EmitResult:
    """Write a program for every hardware layer of `result` (or for the task named `layer`), named
    `prefix` + the task's name; a layer's operands are seeded by the task's name alone."""
    out = EmitResult(Path(folder))
    rows = result.results
    if layer is not None:
        check_layer(layer, [r.task for r in rows], model=result.model)
        rows = [r for r in rows if r.task.name == layer]
    output_folder(out.folder, "--emit-program")
    norms = _layernorms(result.results)
    for r in rows:
        t = r.task
        if t.resource is not Resource.NVDLA:  # no register program written for it
            out.host.append(f"{t.name} ({t.resource.value}: {t.note})" if t.note else f"{t.name} ({t.resource.value})")
            continue
        try:
            if t.op in norms:  # a LayerNorm's step: its numbers are the program's (layer_programs.layernorm_programs)
                made = norms[t.op].program(t.op, t.name[len(t.op) + 1 :], result, prefix)
                if isinstance(made, TraceError):
                    raise made
                progs = [made]
            else:
                seed = zlib.crc32(program_name(t.name).encode())
                progs = layer_programs(t.layer, result.hw, plan=_plan(r), name=prefix + t.name, seed=seed)
        except (TraceError, NvdlaError) as e:
            if layer is not None:
                raise NvdlaError(f"{t.name}: {e}") from None
            out.skipped.append({"task": t.name, "reason": str(e)})
            continue
        for lp in progs:
            lp.program.write(out.folder)
            out.programs.append(
                {
                    "name": lp.program.name,
                    "task": t.name,
                    "group": t.group,
                    "count": t.count,
                    "band": list(lp.band) if lp.band else None,
                    "kernels": list(lp.kernels) if lp.kernels else None,
                    "hardware_layers": lp.hardware_layers,
                    "model_cycles": lp.model_cycles,
                    "mapper_cycles_per_instance": r.cycles_per_instance,
                    "macs": getattr(lp.layer, "macs", 0),
                    "checks": [{"base": b, "size": s, "crc": f"0x{c:08x}"} for b, s, c in lp.program.expected],
                }
            )
    doc = {
        "model": result.model,
        "hw": result.hw.name,
        "precision": result.precision.value,
        "batch": result.batch,
        "seq": result.seq,
        "programs": out.programs,
        "skipped": out.skipped,
        "host_tasks": out.host,
    }
    write_json(out.folder / MANIFEST, doc)
    return out


@dataclass
class _Norm:
    """A LayerNorm op of the results: whether RMSNorm, its step name -> task result, and its programs once
    made (layer_programs.layernorm_programs: one seeded input for all its steps)."""

    rms: bool
    steps: dict[str, TaskResult]
    programs: dict | None = None

    def program(self, op: str, step: str, result: MapResult, prefix: str):
        if self.programs is None:
            layers = {name: (r.task.layer, _plan(r)) for name, r in self.steps.items()}
            seed = zlib.crc32(program_name(op).encode())
            self.programs = layernorm_programs(prefix + op, layers, result.hw, rms=self.rms, seed=seed)
        return self.programs[step]


def _layernorms(results: list[TaskResult]) -> dict[str, _Norm]:
    """The LayerNorm ops among the results, by op name: those whose hardware tasks are exactly the steps of
    numerics.layernorm_steps, one layer each."""
    by_op: dict[str, dict[str, TaskResult]] = {}
    for r in results:
        if r.task.layer is not None and r.task.name.startswith(r.task.op + "."):
            by_op.setdefault(r.task.op, {})[r.task.name[len(r.task.op) + 1 :]] = r
    return {
        op: _Norm(rms, steps)
        for op, steps in by_op.items()
        for rms, names in ((False, norm.LAYERNORM_STEPS), (True, norm.RMSNORM_STEPS))
        if set(steps) == set(names)
    }


def summary(res: EmitResult) -> str:
    lines = [f"wrote {len(res.programs)} NVDLA register programs to {res.folder} ({MANIFEST} lists them)"]
    if res.skipped:
        lines.append(f"  {len(res.skipped)} hardware layers without a program:")
        lines += [f"    - {s['task']}: {s['reason']}" for s in res.skipped[:10]]
    hosts = [h for h in res.host if f"({Resource.HOST.value}" in h]
    if hosts:
        lines.append(f"  {len(hosts)} host tasks (no program), e.g. {hosts[0]}")
    return "\n".join(lines)
