"""NVDLA register programs: NVIDIA's trace-test format (`.cfg` command file + `.dat` memory images).

A trace test (hw@nv_small:verif/tests/trace_tests/<config>/<test>/, format per doc/hw/v2/verif_guide.rst)
is a list of commands:

    mem_init(pri_mem, 0x80000400, 0x2100, ALL_ZERO);
    mem_load(pri_mem, 0x80000400, "x_dt.dat");
    reg_write(NVDLA_CDMA.D_DATAIN_SIZE_0_0, 0x0);
    poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0, 0x1);
    intr_notify(SDP_0, sync_id_0);
    check_crc(sync_id_0, 1, 0xa0000000, 0x8, 0x8f68a2ae);
    check_file(sync_id_0, pri_mem, 0x80080000, 0x800, "golden.dat");
    check_nothing(sync_id_1);

`.dat` files hold `{offset:0x0, size:4, payload:0x00 0x10 0x00 0x00}` records. This module parses both
into plain data and keeps a sparse byte memory; it does not interpret registers (regdecode does).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_sim.errors import TraceError

PAGE_BYTES = 1 << 12


@dataclass(frozen=True)
class RegWrite:
    unit: str  # e.g. "NVDLA_CDMA"
    reg: str  # e.g. "D_DATAIN_SIZE_0_0"
    value: int
    line: int


@dataclass(frozen=True)
class RegPoll:
    unit: str
    reg: str
    value: int
    line: int


@dataclass(frozen=True)
class MemInit:
    memory: str
    base: int
    size: int
    pattern: str
    line: int


@dataclass(frozen=True)
class MemLoad:
    memory: str
    base: int
    path: Path
    line: int


@dataclass(frozen=True)
class IntrNotify:
    source: str  # e.g. "SDP_0": unit and register group whose done interrupt is awaited
    sync_id: str
    line: int


@dataclass(frozen=True)
class Check:
    kind: str  # "crc", "file" or "nothing"
    sync_id: str
    memory: str = ""
    base: int = 0
    size: int = 0
    crc: int | None = None  # golden CRC (check_crc), or the CRC of the golden file (check_file)
    path: Path | None = None
    line: int = 0


Command = RegWrite | RegPoll | MemInit | MemLoad | IntrNotify | Check


@dataclass
class Program:
    """A parsed trace test: commands in order, plus the test folder for memory images."""

    name: str
    folder: Path
    commands: list[Command] = field(default_factory=list)

    @property
    def writes(self) -> list[RegWrite]:
        return [c for c in self.commands if isinstance(c, RegWrite)]

    @property
    def checks(self) -> list[Check]:
        return [c for c in self.commands if isinstance(c, Check)]


_NUM = r"(?:0x[0-9a-fA-F]+|\d+)"
_REG = re.compile(rf"^(reg_write|poll_reg_equal)\(\s*(NVDLA_\w+)\.(\w+)\s*,\s*({_NUM})\s*\)$")
_MEM_INIT = re.compile(rf"^mem_init\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\w+)\s*\)$")
_MEM_LOAD = re.compile(rf'^mem_load\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)$')
_INTR = re.compile(r"^intr_notify\(\s*(?:(\w+)\s*,\s*)?(\w+)\s*\)$")
_CHECK_CRC = re.compile(rf"^check_crc\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\)$")
_CHECK_FILE = re.compile(rf'^check_file\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)$')
_CHECK_NOTHING = re.compile(r"^check_nothing\(\s*(\w+)\s*\)$")
_DAT = re.compile(r"^\{\s*offset\s*:\s*(\w+)\s*,\s*size\s*:\s*(\w+)\s*,\s*payload\s*:\s*([0-9a-fA-Fx ]*)\}\s*,?$")


def find_cfg(path: str | Path) -> Path:
    """The .cfg of a trace test given its folder or the file itself."""
    p = Path(path)
    if p.is_dir():
        cfgs = sorted(p.glob("*.cfg"))
        if len(cfgs) != 1:
            raise TraceError(f"{p}: expected one .cfg trace file in the test folder, found {len(cfgs)}")
        return cfgs[0]
    if p.suffix == ".cfg" and p.is_file():
        return p
    raise TraceError(f"{p}: not a trace-test folder or .cfg file")


def parse_program(path: str | Path) -> Program:
    """Parse a trace test (folder or .cfg). Raises TraceError naming the file and line."""
    cfg = find_cfg(path)
    try:
        text = cfg.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{cfg}: cannot read trace ({e})") from None
    prog = Program(name=cfg.stem, folder=cfg.parent)
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if not line.endswith(";"):
            raise TraceError(f"{cfg}:{no}: command does not end with ';': {raw.strip()!r}")
        prog.commands.append(_parse_command(line[:-1].strip(), cfg, no))
    return prog


def _parse_command(line: str, cfg: Path, no: int) -> Command:
    if m := _REG.match(line):
        kind, unit, reg, value = m.groups()
        cls = RegWrite if kind == "reg_write" else RegPoll
        return cls(unit, reg, int(value, 0) & 0xFFFFFFFF, no)
    if m := _MEM_INIT.match(line):
        mem, base, size, pattern = m.groups()
        if pattern != "ALL_ZERO":
            raise TraceError(f"{cfg}:{no}: mem_init pattern {pattern!r} is not supported (only ALL_ZERO)")
        return MemInit(_memory(mem, cfg, no), int(base, 0), int(size, 0), pattern, no)
    if m := _MEM_LOAD.match(line):
        mem, base, fname = m.groups()
        return MemLoad(_memory(mem, cfg, no), int(base, 0), cfg.parent / fname, no)
    if m := _INTR.match(line):
        return IntrNotify(m.group(1) or "", m.group(2), no)
    if m := _CHECK_CRC.match(line):
        sync, mem, base, size, crc = m.groups()
        return Check("crc", sync, _memory(mem, cfg, no), int(base, 0), int(size, 0), int(crc, 0), line=no)
    if m := _CHECK_FILE.match(line):
        sync, mem, base, size, fname = m.groups()
        golden = cfg.parent / fname
        data = load_dat(golden, size=int(size, 0))
        return Check("file", sync, _memory(mem, cfg, no), int(base, 0), int(size, 0), crc32(data), path=golden, line=no)
    if m := _CHECK_NOTHING.match(line):
        return Check("nothing", m.group(1), line=no)
    verb = line.split("(", 1)[0]
    raise TraceError(
        f"{cfg}:{no}: unsupported trace command {verb!r}; supported: reg_write, poll_reg_equal, mem_init, "
        "mem_load, intr_notify, check_crc, check_file, check_nothing"
    )


def _memory(name: str, cfg: Path, no: int) -> str:
    """Memory type: 'pri_mem' or '1' is the primary memory (DBBIF), 'sec_mem' or '2' the secondary one
    (SRAMIF, on builds that have it). Both are one address space here, as in NVIDIA's testbench, which
    sends an address with bit 31 clear to the secondary port (verif/verilator/nvdla.cpp, TraceLoader)."""
    if name in ("pri_mem", "1"):
        return "pri"
    if name in ("sec_mem", "2"):
        return "sec"
    raise TraceError(f"{cfg}:{no}: memory {name!r} is not one of pri_mem (1) or sec_mem (2)")


def load_dat(path: Path, *, size: int | None = None) -> np.ndarray:
    """Bytes of a `.dat` memory image (records at offsets; gaps are zero), optionally padded/cut to `size`."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: cannot read memory image ({e})") from None
    chunks: list[tuple[int, bytes]] = []
    end = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line in ("", "{", "}"):
            continue
        m = _DAT.match(line)
        if not m:
            raise TraceError(f"{path}:{no}: not a '{{offset:..., size:..., payload:...}}' record: {line[:60]!r}")
        off, n = int(m.group(1), 0), int(m.group(2), 0)
        payload = bytes(int(b, 16) for b in m.group(3).split())
        if len(payload) != n:
            raise TraceError(f"{path}:{no}: record says size {n} but has {len(payload)} payload bytes")
        chunks.append((off, payload))
        end = max(end, off + n)
    out = np.zeros(end if size is None else size, np.uint8)
    for off, payload in chunks:
        take = len(payload) if size is None else max(0, min(len(payload), size - off))
        out[off : off + take] = np.frombuffer(payload[:take], np.uint8)
    return out


def crc32(data: np.ndarray | bytes) -> int:
    """The trace tests' CRC: CRC-32 (reflected 0xEDB88320, init and final xor 0xFFFFFFFF) over the bytes."""
    return zlib.crc32(bytes(data)) & 0xFFFFFFFF


class SparseMemory:
    """Byte-addressed memory of 4 KiB pages, zero where never written."""

    def __init__(self) -> None:
        self._pages: dict[int, np.ndarray] = {}

    def _page(self, n: int) -> np.ndarray:
        page = self._pages.get(n)
        if page is None:
            page = self._pages[n] = np.zeros(PAGE_BYTES, np.uint8)
        return page

    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes | bytearray) else data
        pos = 0
        while pos < len(buf):
            a = addr + pos
            off = a % PAGE_BYTES
            take = min(PAGE_BYTES - off, len(buf) - pos)
            self._page(a // PAGE_BYTES)[off : off + take] = buf[pos : pos + take]
            pos += take

    def read(self, addr: int, size: int) -> np.ndarray:
        out = np.zeros(size, np.uint8)
        pos = 0
        while pos < size:
            a = addr + pos
            off = a % PAGE_BYTES
            take = min(PAGE_BYTES - off, size - pos)
            page = self._pages.get(a // PAGE_BYTES)
            if page is not None:
                out[pos : pos + take] = page[off : off + take]
            pos += take
        return out


def initial_memory(prog: Program) -> SparseMemory:
    """Memory after the program's mem_init / mem_load commands (all run before the registers)."""
    mem = SparseMemory()
    for c in prog.commands:
        if isinstance(c, MemInit):
            mem.write(c.base, np.zeros(c.size, np.uint8))
        elif isinstance(c, MemLoad):
            mem.write(c.base, load_dat(c.path))
    return mem
