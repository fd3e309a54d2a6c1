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

It also reads the traceplayer format of branch nvdlav1 (nv_full's tests, hw@nvdlav1:verif/traces/
traceplayer/<test>/input.txn):

    load_mem 0x80000000 0x1000 input_feature_map.dat #comment
    write_reg 0xffff1405 0x11001100 #NVDLA_CDMA.D_MISC_CFG_0FULL_INPUT, FULL_WEIGHT, ...
    read_reg 0xffff1401 0x00010001 0x00000000 #NVDLA_CDMA.S_POINTER_0...
    wait
    dump_mem 0x80400000 0x20 output_feature_map.dat

Registers are taken by the name in the comment (the address map differs between builds), the comment's
text glued after the name is cut at the longest known register name; `wait` waits for an interrupt; a
`dump_mem` is a check of the memory against the dumped file (the golden output); `read_reg` compares
a register value on the testbench (kept as a RegRead with the value: a driver's log's reads are what it
observed, program/sequence.py). Its `.dat` files are a `Key = value` header and
bytes as `0x..` tokens (a dump adds its own header and `===` lines).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_sim.errors import TraceError
from nvdla_sim.registers.addresses import address_map as lookup_map
from nvdla_sim.registers.addresses import byte_address

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
class RegRead:
    """A register read a driver's log records, with the value it returned (`read_reg ADDR MASK VALUE`;
    gem5-NVDLA's `until` lines are reads of GLB S_INTR_STATUS that returned a non-zero value)."""

    unit: str
    reg: str
    value: int
    mask: int
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


@dataclass(frozen=True)
class MemAccess:
    """One transfer of NVDLA's data bus a virtual platform's log records (nvdla.dbb_adaptor; sram_adaptor for
    CV-SRAM): what NVDLA read from memory or wrote to it; `enabled` marks the bytes the transfer carried (its
    byte enables; None: all)."""

    write: bool
    addr: int
    data: bytes
    line: int
    sram: bool = False
    enabled: tuple[bool, ...] | None = None


Command = RegWrite | RegPoll | RegRead | MemInit | MemLoad | IntrNotify | Check | MemAccess


@dataclass
class Program:
    """A parsed trace test: commands in order, plus the test folder for memory images."""

    name: str
    folder: Path
    commands: list[Command] = field(default_factory=list)
    path: Path | None = None  # the file read (errors name it)
    by_address: bool = False  # registers given by address, not named (a driver's log, not a trace test)

    @property
    def writes(self) -> list[RegWrite]:
        return [c for c in self.commands if isinstance(c, RegWrite)]

    @property
    def checks(self) -> list[Check]:
        return [c for c in self.commands if isinstance(c, Check)]

    @property
    def driver_log(self) -> bool:
        """Whether the program is a driver's log (program/sequence.py): register accesses only, its ends read
        from GLB S_INTR_STATUS, none of a trace test's interrupt waits (intr_notify, the traceplayer's
        `wait`), memory images or checks; its registers given by address, or a status read showing a bit."""
        if any(isinstance(c, IntrNotify | MemInit | MemLoad | Check) for c in self.commands):
            return False
        return self.by_address or any(
            isinstance(c, RegRead) and c.reg == "S_INTR_STATUS_0" and c.value & c.mask for c in self.commands
        )

    @property
    def where(self) -> str:
        """The file (or test) errors name."""
        return str(self.path) if self.path is not None else self.name


_NUM = r"(?:0x[0-9a-fA-F]+|\d+)"
_REG = re.compile(rf"^(reg_write|poll_reg_equal)\(\s*(NVDLA_\w+)\.(\w+)\s*,\s*({_NUM})\s*\)$")
_MEM_INIT = re.compile(rf"^mem_init\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\w+)\s*\)$")
_MEM_LOAD = re.compile(rf'^mem_load\(\s*(\w+)\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)$')
_INTR = re.compile(r"^intr_notify\(\s*(?:(\w+)\s*,\s*)?(\w+)\s*\)$")
_CHECK_CRC = re.compile(rf"^check_crc\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\)$")
_CHECK_FILE = re.compile(rf'^check_file\(\s*(\w+)\s*,\s*(\w+)\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*"([^"]+)"\s*\)$')
_CHECK_NOTHING = re.compile(r"^check_nothing\(\s*(\w+)\s*\)$")
# nv_large's generated tests mark the order of the units' register streams (a multi-threaded testbench);
# one trace runs its commands in order, so the marks carry nothing here
_SYNC = re.compile(r"^sync_(notify|wait)\(\s*\w+\s*,\s*\w+\s*\)$")
_DAT = re.compile(r"^\{\s*offset\s*:\s*(\w+)\s*,\s*size\s*:\s*(\w+)\s*,\s*payload\s*:\s*([0-9a-fA-Fx ]*)\}\s*,?$")


def find_cfg(path: str | Path) -> Path:
    """The trace file of a test given its folder or the file itself: its .cfg, or one .txn (nvdlav1's and
    gem5-NVDLA's input.txn, a driver log's output.txn)."""
    p = Path(path)
    if p.is_dir():
        cfgs = sorted(p.glob("*.cfg"))
        txns = sorted(p.glob("*.txn"))
        if not cfgs and (p / "input.txn") in txns:  # the traceplayer's (gem5-NVDLA keeps backups beside it)
            return p / "input.txn"
        if not cfgs and len(txns) == 1:
            return txns[0]
        logs = sorted(p.glob("*.log"))
        if not cfgs and not txns and len(logs) == 1:  # a virtual platform's sc.log
            return logs[0]
        if len(cfgs) != 1:
            raise TraceError(
                f"{p}: expected one .cfg trace file (or one .txn or .log log) in the test folder, found {len(cfgs)} "
                f".cfg, {len(txns)} .txn and {len(sorted(p.glob('*.log')))} .log"
            )
        return cfgs[0]
    if p.suffix in (".cfg", ".txn", ".log") and p.is_file():
        return p
    raise TraceError(f"{p}: not a trace-test folder, .cfg or .txn file, or a virtual platform's .log")


def parse_program(path: str | Path, *, address_map: str | None = None) -> Program:
    """Parse a trace test (folder or .cfg) or a .txn log. A .txn register given by its address, not a
    comment naming it, is looked up in `address_map` (registers.addresses.MAPS; the config's [driver]
    address_map). Raises TraceError naming the file and line."""
    cfg = find_cfg(path)
    try:
        text = cfg.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{cfg}: cannot read trace ({e})") from None
    if cfg.suffix == ".txn":
        return _parse_txn(cfg, text, address_map)
    if cfg.suffix == ".log":
        return _parse_sclog(cfg, text, address_map)
    prog = Program(name=cfg.stem, folder=cfg.parent)
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if not line.endswith(";"):
            raise TraceError(f"{cfg}:{no}: command does not end with ';': {raw.strip()!r}")
        if _SYNC.match(line[:-1].strip()):
            continue  # ordering between the register streams of units; a serial trace is already in order
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
        "mem_load, intr_notify, check_crc, check_file, check_nothing (sync_notify / sync_wait are skipped)"
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


def _txn_memory(addr: int) -> str:
    """nvdlav1's testbench sends an address with bit 31 clear to the secondary port (nvdla.cpp)."""
    return "pri" if addr & 0x80000000 else "sec"


def txn_register(comment: str, txn: Path, no: int) -> tuple[str, str]:
    """(unit, register) from a traceplayer comment `NVDLA_UNIT.REG_0<text glued on>`: the longest prefix
    ending in `_0` that the model knows, else the shortest (an unknown register, named as such)."""
    from nvdla_sim.registers.fields import is_known

    m = re.match(r"^(NVDLA_\w+?)\.(\w+)", comment)
    if not m:
        raise TraceError(
            f"{txn}:{no}: write_reg without a '#NVDLA_UNIT.REGISTER' comment (registers are taken by name)"
        )
    unit, text = m.groups()
    ends = [i + 2 for i in range(len(text) - 1) if text[i : i + 2] == "_0"]
    if not ends:
        raise TraceError(f"{txn}:{no}: no register name ending in _0 in {comment[:60]!r}")
    known = [e for e in ends if is_known(unit, text[:e])]
    return unit, text[: (known[-1] if known else ends[0])]


def _txn_target(
    arg: str, comment: str, address_map: str | None, txn: Path, no: int, *, read: bool = False
) -> tuple[str, str] | None:
    """(unit, register) of a .txn access: by the name in its comment, else by its address, a byte address
    (the kernel-mode driver's) or the traceplayer's word address 0xffff0000 | byte >> 2. A read without a
    name or a map is None: a trace test's compare, not modelled."""
    if comment.startswith("NVDLA_"):
        return txn_register(comment, txn, no)
    if address_map is None and read:
        return None
    if address_map is None:
        raise TraceError(
            f"{txn}:{no}: a register given by address ({arg}) needs an address map: the config's [driver] "
            "address_map (nv_small, nv_full)"
        )
    return lookup_map(address_map).register_at(byte_address(int(arg, 0)), f"{txn}:{no}")


def _parse_txn(txn: Path, text: str, address_map: str | None = None) -> Program:
    prog = Program(name=txn.parent.name, folder=txn.parent, path=txn)
    waits = 0
    for no, raw in enumerate(text.splitlines(), 1):
        body, _, comment = raw.partition("#")
        words = body.split()
        if not words:
            continue
        verb, args = words[0], words[1:]
        try:
            if verb == "load_mem" and len(args) == 3:
                base, size = int(args[0], 0), int(args[1], 0)
                prog.commands.append(MemInit(_txn_memory(base), base, size, "ALL_ZERO", no))
                prog.commands.append(MemLoad(_txn_memory(base), base, txn.parent / args[2], no))
            elif verb == "write_reg" and len(args) == 2:
                unit, reg = _txn_target(args[0], comment.strip(), address_map, txn, no)
                prog.by_address |= not comment.strip().startswith("NVDLA_")
                prog.commands.append(RegWrite(unit, reg, int(args[1], 0) & 0xFFFFFFFF, no))
            elif verb == "read_reg" and len(args) == 3:
                target = _txn_target(args[0], comment.strip(), address_map, txn, no, read=True)
                if target is not None:
                    prog.commands.append(RegRead(*target, int(args[2], 0) & 0xFFFFFFFF, int(args[1], 0), no))
            elif verb == "until" and len(args) == 2:  # gem5-NVDLA: the interrupt status the driver read
                target = _txn_target(args[0], comment.strip(), address_map, txn, no, read=True)
                if target is not None and target[1] != "S_INTR_STATUS_0":
                    raise TraceError(f"{txn}:{no}: `until` waits on GLB S_INTR_STATUS, not {target[0]}.{target[1]}")
                if target is not None:
                    prog.commands.append(RegRead(*target, int(args[1], 0) & 0xFFFFFFFF, 0xFFFFFFFF, no))
            elif verb == "wait" and not args:
                waits += 1
                prog.commands.append(IntrNotify("", f"wait_{waits}", no))
            elif verb == "dump_mem" and len(args) == 3:
                base, size = int(args[0], 0), int(args[1], 0)
                golden = txn.parent / args[2]
                crc = crc32(load_dat(golden, size=size))
                prog.commands.append(Check("file", f"wait_{waits}", _txn_memory(base), base, size, crc, golden, no))
            else:
                raise TraceError(
                    f"{txn}:{no}: {raw.strip()[:60]!r} is not one of load_mem ADDR SIZE FILE, write_reg ADDR VALUE "
                    "[#NAME], read_reg ADDR MASK VALUE [#NAME], until ADDR VALUE, wait, dump_mem ADDR SIZE FILE"
                )
        except ValueError:
            raise TraceError(f"{txn}:{no}: not a number in {raw.strip()[:60]!r}") from None
    return prog


def txn_text(commands: list[Command], address_map: str) -> str:
    """Register accesses as a kernel-mode driver's log (`write_reg ADDR VALUE`, `read_reg ADDR MASK VALUE`, the
    byte addresses of build map `address_map`, each line's register named in its comment), as
    vineetbitsp/RISC-V-NVDLA's output.txn holds them; parse_program reads it back."""
    am = lookup_map(address_map)
    lines = []
    for c in commands:
        if isinstance(c, RegWrite):
            lines.append(f"write_reg {am.address(c.unit, c.reg):#06x} {c.value:#010x}  # {c.unit}.{c.reg}")
        elif isinstance(c, RegRead):
            lines.append(
                f"read_reg {am.address(c.unit, c.reg):#06x} {c.mask:#010x} {c.value:#010x}  # {c.unit}.{c.reg}"
            )
        else:
            raise TraceError(f"a driver's log holds register writes and reads, not {type(c).__name__}")
    return "\n".join(lines) + "\n"


_SCLOG = re.compile(
    r"nvdla\.(csb|dbb|sram)_adaptor: GP: iswrite=([01]) addr=(0x[0-9a-fA-F]+) len=(\d+) data=0x((?: [0-9a-fA-FX_]+)*) "
    r"resp=(\S+)"
)


def _payload(groups: str, where: str) -> tuple[bytes, tuple[bool, ...]]:
    """The bytes of an adaptor's data field, as nvdla/vp's gp2str prints them: a whole word as one
    little-endian 32-bit number; the bytes before the first word boundary, the bytes of a word not all
    enabled and the bytes after the last, each on its own (`ab_cd`, `XX` for a byte not enabled)."""
    data, enabled = bytearray(), []
    for g in groups.split():
        if "_" in g or len(g) == 2:
            for part in g.split("_"):
                if part == "XX":
                    data.append(0)
                    enabled.append(False)
                elif re.fullmatch(r"[0-9a-fA-F]{2}", part):
                    data.append(int(part, 16))
                    enabled.append(True)
                else:
                    raise TraceError(f"{where}: {g!r} is not a data group (a byte ab, bytes ab_cd, XX not enabled)")
        elif re.fullmatch(r"[0-9a-fA-F]{8}", g):
            data += int(g, 16).to_bytes(4, "little")
            enabled += [True] * 4
        else:
            raise TraceError(f"{where}: {g!r} is not a data group (a 32-bit word of 8 hex digits, or bytes ab_cd)")
    return bytes(data), tuple(enabled)


def _parse_sclog(log: Path, text: str, address_map: str | None) -> Program:
    """A virtual platform's sc.log (nvdla/vp): the lines of `nvdla.csb_adaptor` (NVDLA's register accesses,
    byte addresses of the build's map: a driver's log) and of `nvdla.dbb_adaptor` / `nvdla.sram_adaptor`
    (its memory transfers: MemAccess, with their byte enables); every other line (the C model's messages)
    is left out. The data field as nvdla/vp's gp2str writes it (_payload)."""
    if address_map is None:
        raise TraceError(f"{log}: a virtual platform's log gives registers by address; it needs an address map")
    am = lookup_map(address_map)
    prog = Program(name=log.parent.name, folder=log.parent, path=log, by_address=True)
    for no, raw in enumerate(text.splitlines(), 1):
        if "_adaptor: GP:" not in raw:
            continue
        where = f"{log}:{no}"
        m = _SCLOG.search(raw)
        if m is None:
            raise TraceError(f"{where}: not an adaptor transfer (GP: iswrite= addr= len= data=0x ... resp=): "
                             f"{raw.strip()[:80]!r}")  # fmt: skip
        port, write, addr, size, groups, resp = m.groups()
        if resp != "TLM_OK_RESPONSE":
            raise TraceError(f"{where}: the transfer failed ({resp}); the log holds no value for it")
        payload, enabled = _payload(groups, where)
        if len(payload) != int(size):
            raise TraceError(f"{where}: len={size}, but its data holds {len(payload)} bytes")
        address = int(addr, 16)
        if port != "csb":
            prog.commands.append(MemAccess(write == "1", address, payload, no, port == "sram",
                                           None if all(enabled) else enabled))  # fmt: skip
            continue
        if int(size) != 4 or not all(enabled):
            raise TraceError(f"{where}: a register access carries one whole 32-bit word (len=4), not len={size}")
        unit, reg = am.register_at(byte_address(address), where)
        value = int.from_bytes(payload, "little")
        if write == "1":
            prog.commands.append(RegWrite(unit, reg, value, no))
        else:
            prog.commands.append(RegRead(unit, reg, value, 0xFFFFFFFF, no))
    if not any(isinstance(c, RegWrite) for c in prog.commands):
        raise TraceError(f"{log}: no nvdla.csb_adaptor register write (a virtual platform's sc.log holds them)")
    return prog


def memory_from_transfers(prog: Program) -> tuple[SparseMemory, SparseMemory, dict[int, np.ndarray]]:
    """What a log's DRAM transfers say (CV-SRAM's are left out): the memory as NVDLA first read it (each
    byte's value at its first read, unless NVDLA wrote it before), the memory as NVDLA last wrote it, and
    per 4 KiB page the bytes it wrote (a mask). Kept in pages, for logs of megabytes."""
    first, last = SparseMemory(), SparseMemory()
    seen: dict[int, np.ndarray] = {}  # page -> bytes read or written already (first values are settled)
    wrote: dict[int, np.ndarray] = {}  # page -> bytes written
    for c in prog.commands:
        if not isinstance(c, MemAccess) or c.sram:
            continue
        data = np.frombuffer(c.data, np.uint8)
        on = np.ones(len(data), bool) if c.enabled is None else np.array(c.enabled, bool)
        pos = 0
        while pos < len(data):  # page by page
            a = c.addr + pos
            page, off = divmod(a, PAGE_BYTES)
            take = min(PAGE_BYTES - off, len(data) - pos)
            mask, vals = on[pos : pos + take], data[pos : pos + take]
            s = seen.setdefault(page, np.zeros(PAGE_BYTES, bool))
            if c.write:
                w = wrote.setdefault(page, np.zeros(PAGE_BYTES, bool))
                tgt = last._page(page)
                tgt[off : off + take][mask] = vals[mask]
                w[off : off + take] |= mask
            else:
                fresh = mask & ~s[off : off + take]
                first._page(page)[off : off + take][fresh] = vals[fresh]
            s[off : off + take] |= mask
            pos += take
    return first, last, wrote


_HEX_BYTE = re.compile(r"^0x[0-9a-fA-F]{1,2}$")


def _hex_dump_chunks(path: Path, text: str) -> list[tuple[int, bytes]]:
    """nvdlav1's `.dat`: `Key = value` header lines (and a dump's own header and `===` lines), then the
    bytes in order as `0x..` tokens: one chunk at offset 0."""
    data = bytearray()
    for no, raw in enumerate(text.splitlines(), 1):
        tokens = raw.split()
        if tokens and all(_HEX_BYTE.match(t) for t in tokens):
            data += bytes(int(t, 16) for t in tokens)
        elif tokens and not ("=" in raw or ":" in raw or "dump" in raw or raw.strip().startswith("=")):
            raise TraceError(f"{path}:{no}: neither a header line nor 0x.. bytes: {raw.strip()[:60]!r}")
    return [(0, bytes(data))]


def _record_chunks(path: Path, text: str) -> list[tuple[int, bytes]]:
    """The trace tests' `{offset:..., size:..., payload:...}` records."""
    chunks: list[tuple[int, bytes]] = []
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
    return chunks


def load_dat(path: Path, *, size: int | None = None) -> np.ndarray:
    """Bytes of a `.dat` memory image (records at offsets; gaps are zero; or nvdlav1's header and byte
    list), optionally padded/cut to `size`."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: cannot read memory image ({e})") from None
    chunks = (_record_chunks if text.lstrip().startswith("{") else _hex_dump_chunks)(path, text)
    end = max((off + len(payload) for off, payload in chunks), default=0)
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
