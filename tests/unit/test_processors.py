"""The processor registry (nvdla_sim.processors): every hardware layer reaches the simulator, the energy
model and the mapper through it, and BDMA is a processor like the others, named nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nvdla_mapper.frontends.resolve import model_graph
from nvdla_mapper.lowering.rules import Resource
from nvdla_mapper.passes import map_model
from nvdla_sim import load_config
from nvdla_sim.energy.model import layer_energy
from nvdla_sim.engine.stats import Unit
from nvdla_sim.errors import ConfigError, ShapeError
from nvdla_sim.layers import ConvLayer, ConvShape, Memory, PdpLayer, PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import PROCESSORS, copy_processor, engines, fixed_latency, processor_of, simulate
from nvdla_sim.processors.bdma import BdmaLayer

ROOT = Path(__file__).resolve().parents[2]
FULL, SMALL = load_config("nv_full"), load_config("nv_small")


def test_each_layer_has_one_processor_and_an_unknown_layer_is_a_one_line_error():
    assert len({p.layer_type for p in PROCESSORS}) == len(PROCESSORS)
    assert len({p.name for p in PROCESSORS}) == len(PROCESSORS)
    assert processor_of(ConvLayer("c", ConvShape.matmul(8, 8, 8), Precision.INT8)).name == "conv"
    pdp = PdpLayer("p", 4, 4, 8, Precision.INT8, PoolSpec(PoolMode.MAX, 2, 2, 2, 2))
    assert processor_of(pdp).name == "pdp"
    with pytest.raises(
        TypeError, match=r"^no processor runs a str; the hardware layers are ConvLayer, .*BdmaLayer, RubikLayer$"
    ):
        simulate("conv1", FULL)
    # the core's processors share one engine; BDMA and Rubik run beside it (their own groups and interrupts)
    assert engines() == ("nvdla", "bdma", "rubik")
    assert {p.name for p in PROCESSORS if p.engine == "nvdla"} == {"conv", "sdp", "pdp", "cdp"}


def test_a_bdma_copy_by_hand():
    """1 MiB DRAM to DRAM on nv_full (512-bit DBB port at 64 B a cycle, 1,200-cycle latency): 32,768 atoms
    programmed as lines of 8,192 atoms (256 KiB, CFG_LINE.SIZE's 13 bits) repeated 4 times: 16,384 read beats
    of 64 B. BDMA's 245 read credits come back a cycle after their data (1,201 cycles on), so the reads go
    out 245 a round trip: the last (beat 16,383 = 66 x 245 + 213) at 66 x 1,201 + 213 = 79,479, its data at
    80,679; its 256-byte write transaction whole then, 17 cycles on its first write request (80,696) and its
    four 64-byte blocks one a cycle: the last write request at 80,699; with the launch (20) and the interrupt
    (11) around it. Its energy is DRAM's alone, 64 pJ a byte read or written (LPDDR4, hwcomponents)."""
    layer = BdmaLayer.of_bytes("copy", 1 << 20)
    assert (layer.line_bytes, layer.lines, layer.surfaces) == (8192 * 32, 4, 1)
    st = simulate(layer, FULL)
    assert st.cycles == 80_699 and fixed_latency(layer, FULL) == (20, 0, 11)
    assert (st.traffic.dram_read, st.traffic.dram_write, st.macs) == (1 << 20, 1 << 20, 0)
    e = layer_energy(layer, st, FULL)
    assert e.core == 0.0 and e.dram == pytest.approx(2 * (1 << 20) * 64, rel=0.01)


def test_a_copy_ending_inside_an_atom_moves_the_whole_atom():
    """ViT-digits' K re-layout per head: 17 keys x 16 INT8 channels = 272 bytes, 8.5 atoms: BDMA moves 9
    (288 bytes) as one line: 5 read beats at 0-4, back at 1,200-1,204; its first transaction (atoms 0-7)
    whole at 1,203, written at 1,220-1,223; its last (atom 8) whole at 1,204, its write request at 1,221 but
    the port busy until 1,224: 1,224 cycles."""
    layer = processor_of(BdmaLayer.of_bytes("x", 32)).copy_layer("k", 272)
    assert layer.bytes == 288 and simulate(layer, FULL).cycles == 1_224


def test_bdma_shapes_follow_its_registers():
    # a prime number of atoms past one line: lines of one atom
    assert BdmaLayer.of_bytes("p", 8209 * 32).line_bytes == 32
    assert BdmaLayer.of_bytes("p", 8209 * 32).lines == 8209
    assert BdmaLayer.of_bytes("s", 96).line_bytes == 96
    with pytest.raises(ShapeError, match=r"^x: a bdma copy moves whole 32-byte atoms, not 100 bytes$"):
        BdmaLayer.of_bytes("x", 100)
    with pytest.raises(ShapeError, match=r"line_bytes must be a multiple of 32 in 32\.\.262144"):
        BdmaLayer("x", 8193 * 32)
    with pytest.raises(ShapeError, match=r"lines must be an integer in 1\.\.16777216"):
        BdmaLayer("x", 32, lines=0)
    with pytest.raises(ShapeError, match=r"^x: bdma destination must be a Memory \(dram or sram\), not 'sram'$"):
        BdmaLayer("x", 32, destination="sram")


def test_each_processor_reads_fields_the_config_has():
    import dataclasses

    from nvdla_sim.config import HwConfig

    fields = {f.name for f in dataclasses.fields(HwConfig)}
    for p in PROCESSORS:
        assert p.config_sections and set(p.config_sections) <= fields, (p.name, p.config_sections)


def test_a_build_without_bdma_or_sram_refuses_its_copies():
    assert copy_processor(SMALL) is None and copy_processor(FULL).name == "bdma"
    with pytest.raises(ConfigError, match=r"^copy: nv_small has no BDMA \(its config's bdma = false\)$"):
        simulate(BdmaLayer.of_bytes("copy", 64), SMALL)
    no_sram = FULL.with_values(**{"memory.sram_width_bits": 0})
    with pytest.raises(ConfigError, match=r"no on-chip SRAM to copy from or to"):
        simulate(BdmaLayer("copy", 64, destination=Memory.SRAM), no_sram)


def test_the_mappers_copies_are_bdma_layers_timed_by_their_processor():
    """BERT-base on nv_full re-lays out X and V^T with BDMA: each copy is a BdmaLayer on the BDMA resource,
    timed by its processor (launch, requests, interrupt), its DRAM bytes twice the copy. X (128 x 768 B =
    98,304 B, 1,536 read beats) by hand: reads 245 a 1,201-cycle round trip, the last (6 x 245 + 65) at
    6 x 1,201 + 65 = 7,271, back at 8,471, its transaction's writes at 8,488-8,491; + 20 + 11 = 8,522."""
    res = map_model(model_graph("bert-base", seq=128), FULL, precision=Precision.INT8)
    copies = [r for r in res.results if r.task.resource is Resource.BDMA]
    assert copies and all(isinstance(r.task.layer, BdmaLayer) for r in copies)
    for r in copies:
        n = r.task.layer.bytes
        assert r.cycles_per_instance == simulate(r.task.layer, FULL).cycles + 20 + 11
        assert r.to_row()["dram_read"] == r.to_row()["dram_write"] == n * r.task.count
    x = next(r for r in copies if r.task.name == "layer0.attn.v.x_relayout")
    assert x.task.layer.bytes == 98_304 and x.cycles_per_instance == 8_522
    assert not [r for r in res.results if isinstance(r.task.layer, BdmaLayer) and r.task.resource is not Resource.BDMA]
    # the unit table's BDMA row: each copy's cycles from its first read to its last write, over its instances
    busy = res.unit_busy()
    assert busy["bdma"].busy == sum((r.cycles_per_instance - 31) * r.task.count for r in copies)
    layers = sum(r.stats.units[Unit.DRAM].busy * r.task.count for r in res.results if r.task.resource is Resource.NVDLA)
    bdma_port = sum(r.stats.units[Unit.DRAM].busy * r.task.count for r in copies)
    assert bdma_port == sum(2 * r.task.layer.bytes // 64 * r.task.count for r in copies)  # its bytes at 64 B a cycle
    assert busy["dram"].busy == layers + bdma_port  # the DRAM's busy time counts the copies too
    # without BDMA the same re-layouts are host copies
    small = map_model(model_graph("bert-base", seq=128), SMALL, precision=Precision.INT8)
    assert not [r for r in small.results if r.task.resource is Resource.BDMA]
    assert any("no BDMA on this config" in r.task.note for r in small.results)


def _identifiers_and_strings(path: Path) -> list[tuple[int, str]]:
    """Identifiers and string constants of a module (its docstrings left out: prose may name anything)."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.alias | ast.FunctionDef | ast.ClassDef):
            out.append((node.lineno, node.name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            out.append((node.lineno, node.value))
    return out


# Where BDMA may be named: its processor and the registry, the config's flag, the names of the units that
# report busy cycles (engine.stats.Unit), and the scripts that run NVIDIA's RTL (its unit list).
# the register map's tables (registers/) list every unit's registers and addresses as NVIDIA's spec and
# headers do: data, like the configs, that no code branches on; so do the firmware interface's descriptors
# (program/loadable/descriptors.py: dla_interface.h's structs of every unit, a file format); and the DLA
# firmware model, like NVIDIA's firmware, has a module per processor (firmware/bdma.py) and their registry
def _allowed(unit: str) -> tuple[str, ...]:
    return ("nvdla_sim/processors/", "nvdla_sim/config.py", "nvdla_sim/engine/stats.py", "nvdla_sim/registers/",
            "nvdla_sim/program/loadable/descriptors.py", f"nvdla_sim/program/loadable/firmware/{unit}.py",
            "nvdla_sim/program/loadable/firmware/registry.py", "validation/")  # fmt: skip


@pytest.mark.parametrize("unit", ["bdma", "rubik"])
def test_a_processor_is_named_only_by_its_module_the_registry_and_the_config(unit):
    """BDMA and Rubik, each added as one package and a registry entry (issue 56): nothing else names them."""
    found = []
    for package in ("nvdla_sim", "mapper", "nvdla_cli", "rtl", "validation"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(_allowed(unit)):
                continue
            found += [
                f"{rel}:{line}: {text[:60]!r}" for line, text in _identifiers_and_strings(path) if unit in text.lower()
            ]
    assert not found, "\n".join(found)


def test_the_name_check_finds_a_name():
    """The check above can fail: it finds BDMA in the processor's own module."""
    names = [t for _, t in _identifiers_and_strings(ROOT / "nvdla_sim/processors/bdma/__init__.py")]
    assert "BdmaLayer" in names and any("no BDMA" in t for t in names)


def test_reports_name_the_registrys_resources():
    """The host fallback's note names the copy engines the registry has (here BDMA), not a literal."""
    from nvdla_mapper.lowering.rules import copies_phrase, resources_phrase

    assert copies_phrase() == "BDMA" and resources_phrase() == "NVDLA, BDMA, Rubik and host"
