"""A DRAM device and its controller, cycle by cycle (issue 58, item 1): the timing a memory access pattern meets
in a real DRAM, where the fluid port (memory.py) has one bandwidth and one latency.

The device (DramDevice): channels of ranks of bank groups of banks, each bank with one open row; its JEDEC
timing parameters in clocks of its bus (tCK). The controller (DramController), one a channel:

* transactions (one burst: the bus width x the burst length) wait in a read queue or a posted-write buffer
  (their capacity: `transactions`); a read of an address with a write pending is served from the buffer;
* each cycle one transaction moves to its bank's command queue (`bank_queue` deep) in arrival order, from the
  write buffer while it drains (full, or more than `drain_low` writes and every command queue empty) and
  from the read queue otherwise (a read pending on the same address stops the drain, and a read moves);
* each cycle one command issues: the bank queues in turn (round robin), each offering its first command
  whose bank is ready (an activate for a closed bank, a precharge for another open row, else the read or
  write); a precharge only for the queue's first entry and only when no later entry hits the open row or
  the row has served `row_hit_cap` hits (open page, first-ready first-come first-served);
* every constraint between commands of JEDEC's tables: activate to read/write (tRCD), to precharge (tRAS), to
  activate in the bank (tRC) and in others (tRRD_L/S, tFAW), column commands in a bank group and across
  them (tCCD_L/S), read to write and write to read (tWTR_L/S), across ranks (tRTRS), to precharge (tRTP,
  tWR), precharge to activate (tRP; tPPD between precharges on LPDDR4), refresh (tRFC), staggered over the
  ranks every tREFI / ranks;
* a read's data is back CL + AL + a burst after its command; a write completes when it enters the buffer.

These are the policies of DRAMsim3's controller (umd-memsys/DRAMsim3 with OPEN_PAGE, PER_BANK queues and
RANK_LEVEL_STAGGERED refresh: its source read as the reference, this code the project's own), the field's
reference simulator. The model is held to DRAMsim3's measurements on the 28 request streams of
validation/dram/streams.py (validation/data/dramsim3_streams.json; tests/integration/test_dram_model.py):
every stream's cycles, mean read latency, activates and refreshes are DRAMsim3's to the cycle. One
departure, where DRAMsim3 stalls for ever: a read waiting for the place of a full write buffer's first
write moves to its bank while the drain waits (_move).
The memory model "dram" (memory.DramMemory) prices each run's DRAM port at the rate this model sustains for
the run's mix of clients (AccessMix, mix_figures, at the end of this module).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

from nvdla_sim.errors import ConfigError, TraceError
from nvdla_sim.files import DiskCache

RD, WR, ACT, PRE, REF = range(5)  # command types
MAPPING_FIELDS = ("ro", "ch", "ra", "ba", "bg", "co")  # an address mapping's fields (DRAMsim3's names)


@dataclass(frozen=True)
class DramDevice:
    """One channel's devices: geometry, address mapping and JEDEC timing in clocks (tCK)."""

    name: str
    bus_bits: int  # the channel's data bus (devices per rank x their width)
    burst_length: int
    ranks: int
    bankgroups: int
    banks_per_group: int
    rows: int
    columns: int
    tck_ns: float
    CL: int  # read latency (CAS)
    CWL: int  # write latency
    tRCD: int
    tRP: int
    tRAS: int
    tRFC: int
    tREFI: int
    tRRD_S: int
    tRRD_L: int
    tWTR_S: int
    tWTR_L: int
    tFAW: int
    tWR: int
    tRTP: int
    tCCD_S: int
    tCCD_L: int
    tRTRS: int = 1
    tPPD: int = 0  # precharge to precharge in other banks (LPDDR4); 0: none
    AL: int = 0
    tRCDWR: int | None = None  # activate to write where it differs from activate to read (HBM); None: tRCD
    dual_command: bool = False  # a row command and a column command may issue in one clock (HBM's split bus)
    mapping: str = "rochrababgco"  # address fields, most significant first (row, channel, rank, bank, group, column)
    source: str = ""
    # power (IDD currents in mA of one device, its supply in V; the device's datasheet values as the parameter
    # set gives them): the energy of each command and of every clock a rank stands by (DramEnergy)
    device_width: int = 16  # bits: bus_bits / device_width devices a rank
    VDD: float = 1.2
    IDD0: float | None = None  # one activate and precharge every tRC
    IDD2N: float | None = None  # precharged standby
    IDD3N: float | None = None  # active standby
    IDD4R: float | None = None  # reading
    IDD4W: float | None = None  # writing
    IDD5AB: float | None = None  # all-bank refresh

    def __post_init__(self) -> None:
        fields = [self.mapping[i : i + 2] for i in range(0, len(self.mapping), 2)]
        if len(self.mapping) != 12 or sorted(fields) != sorted(MAPPING_FIELDS):
            raise ConfigError(
                f"{self.name}: mapping {self.mapping!r} must order the six fields {', '.join(MAPPING_FIELDS)} "
                "(row, channel, rank, bank, bank group, column), each once, most significant first"
            )
        for name in ("ranks", "bankgroups", "banks_per_group", "rows", "columns", "burst_length", "bus_bits",
                     "device_width"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ConfigError(f"{self.name}: {name} must be a power of two >= 1, not {v!r}")
        if self.bus_bits % self.device_width or self.columns < self.burst_length:
            raise ConfigError(
                f"{self.name}: bus_bits ({self.bus_bits}) must hold whole devices of device_width "
                f"({self.device_width}) and columns ({self.columns}) at least one burst ({self.burst_length})"
            )
        for name in ("CL", "CWL", "tRCD", "tRP", "tRAS", "tRFC", "tREFI", "tRRD_S", "tRRD_L", "tWTR_S", "tWTR_L",
                     "tFAW", "tWR", "tRTP", "tCCD_S", "tCCD_L", "tRTRS", "tPPD", "AL"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{self.name}: {name} must be a whole number of clocks >= 0, not {v!r}")
        if self.tREFI <= 2 * self.tRFC or not (isinstance(self.tck_ns, int | float) and self.tck_ns > 0):
            raise ConfigError(f"{self.name}: tck_ns must be above 0 and tREFI more than twice tRFC")

    @property
    def request_bytes(self) -> int:
        return self.bus_bits // 8 * self.burst_length

    @property
    def burst_cycles(self) -> int:
        return self.burst_length // 2  # double data rate

    @property
    def peak_gbs(self) -> float:
        return self.request_bytes / (self.burst_cycles * self.tck_ns)

    @property
    def banks(self) -> int:
        return self.bankgroups * self.banks_per_group

    @property
    def capacity_bytes(self) -> int:
        """Bytes the channel addresses: every rank, bank, row and column."""
        return self.ranks * self.banks * self.rows * self.columns * self.bus_bits // 8

    def _fields(self) -> list[tuple[str, int]]:
        """The address fields, least significant first, with their widths in bits (above the transaction)."""
        log2 = lambda n: n.bit_length() - 1  # noqa: E731
        widths = {"ch": 0, "ra": log2(self.ranks), "bg": log2(self.bankgroups), "ba": log2(self.banks_per_group),
                  "ro": log2(self.rows), "co": log2(self.columns) - log2(self.burst_length)}  # fmt: skip
        return [(f, widths[f]) for f in reversed([self.mapping[i : i + 2] for i in range(0, 12, 2)])]

    def decode(self, addr: int) -> tuple[int, int, int, int]:
        """(rank, bank index within the rank, row, column) of a byte address."""
        value, at = addr >> (self.request_bytes.bit_length() - 1), {}
        for field, width in self._fields():
            at[field] = value & ((1 << width) - 1)
            value >>= width
        return at["ra"], at["bg"] * self.banks_per_group + at["ba"], at["ro"], at["co"]

    def address(self, *, row: int = 0, bank: int = 0, bankgroup: int = 0, rank: int = 0, column: int = 0) -> int:
        """The byte address of a transaction at these coordinates (`column` in transactions): decode's inverse."""
        at = {"ro": row, "ba": bank, "bg": bankgroup, "ra": rank, "co": column, "ch": 0}
        addr, pos = 0, self.request_bytes.bit_length() - 1
        for field, width in self._fields():
            if not 0 <= at[field] < 1 << width:
                raise ValueError(f"{self.name}: {field} {at[field]} out of range (0..{(1 << width) - 1})")
            addr |= at[field] << pos
            pos += width
        return addr

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of one bank across the rank's devices."""
        return self.columns * self.bus_bits // 8

    def command_pj(self) -> CommandEnergy:
        """The energy of each command and of a clock of standby, for a rank's devices (the IDD method of
        Micron's DDR power notes, TN-41-01 / TN-53-01; DramEnergy)."""
        missing = [n for n in ("IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W", "IDD5AB") if getattr(self, n) is None]
        if missing:
            raise ConfigError(f"{self.name}: no power figures ({', '.join(missing)}): its energy cannot be priced")
        k = self.VDD * (self.bus_bits // self.device_width) * self.tck_ns  # V x devices x ns: mA x clocks -> pJ
        burst = self.burst_cycles
        return CommandEnergy(
            k * (self.IDD0 * (self.tRAS + self.tRP) - (self.IDD3N * self.tRAS + self.IDD2N * self.tRP)),
            k * (self.IDD4R - self.IDD3N) * burst,
            k * (self.IDD4W - self.IDD3N) * burst,
            k * (self.IDD5AB - self.IDD3N) * self.tRFC,
            k * self.IDD3N,
            k * self.IDD2N,
        )

    def background_mw(self) -> float:
        """A channel's power whatever it serves (mW = pJ a ns): every rank in active standby (an open-page
        controller leaves a row open: IDD3N) and refreshing every tREFI."""
        c = self.command_pj()
        return self.ranks * (c.active_standby + c.refresh / self.tREFI) / self.tck_ns


@dataclass(frozen=True)
class CommandEnergy:
    """pJ of one command (an activate with its precharge, a read or write burst, a refresh) and of one clock a
    rank stands by with a row open or all precharged."""

    activate: float
    read: float
    write: float
    refresh: float
    active_standby: float
    precharged_standby: float


# JEDEC speed bins as DRAMsim3's parameter sets state them (configs/LPDDR4_8Gb_x16_2400.ini: JESD209-4
# LPDDR4-2400, four x16 8 Gb parts on a 64-bit channel, two ranks; configs/DDR4_8Gb_x16_3200.ini: JESD79-4
# DDR4-3200 x16 8 Gb, likewise); the geometry is validation/dram/streams.py's, checked against those files
DEVICES = {
    "LPDDR4-2400": DramDevice(
        "LPDDR4-2400", 64, 16, 2, 2, 4, 65536, 1024, 0.83, CL=17, CWL=14, tRCD=15, tRP=15, tRAS=32, tRFC=392,
        tREFI=8660, tRRD_S=8, tRRD_L=8, tWTR_S=8, tWTR_L=16, tFAW=32, tWR=30, tRTP=12, tCCD_S=4, tCCD_L=6,
        tPPD=2, source="JESD209-4 LPDDR4-2400 (DRAMsim3 configs/LPDDR4_8Gb_x16_2400.ini)",
        IDD0=80, IDD2N=34, IDD3N=47, IDD4R=243, IDD4W=228, IDD5AB=280,
    ),
    "DDR4-3200": DramDevice(
        "DDR4-3200", 64, 8, 2, 2, 4, 65536, 1024, 0.63, CL=22, CWL=16, tRCD=22, tRP=22, tRAS=52, tRFC=560,
        tREFI=12480, tRRD_S=9, tRRD_L=11, tWTR_S=4, tWTR_L=12, tFAW=48, tWR=24, tRTP=12, tCCD_S=4, tCCD_L=8,
        source="JESD79-4 DDR4-3200 (DRAMsim3 configs/DDR4_8Gb_x16_3200.ini)",
        IDD0=95, IDD2N=37, IDD3N=56, IDD4R=302, IDD4W=278, IDD5AB=280,
    ),
    # one 128-bit channel of an HBM2 stack at 2 Gb/s a pin (32 GB/s); tRTP 5 and tRTRS 2 are what DRAMsim3 runs
    # (its .ini gives tRTP_L/S, which it does not read, and no tRTRS: its defaults)
    "HBM2-2000": DramDevice(
        "HBM2-2000", 128, 4, 1, 4, 4, 32768, 128, 1.0, CL=14, CWL=4, tRCD=14, tRP=14, tRAS=34, tRFC=260,
        tREFI=3900, tRRD_S=4, tRRD_L=6, tWTR_S=6, tWTR_L=8, tFAW=30, tWR=16, tRTP=5, tCCD_S=1, tCCD_L=2, tRTRS=2,
        tRCDWR=14, dual_command=True, mapping="rorabgbachco", device_width=128,
        source="JESD235 HBM2, 2 Gb/s a pin (DRAMsim3 configs/HBM2_8Gb_x128.ini, one of its 8 channels)",
        IDD0=65, IDD2N=40, IDD3N=55, IDD4R=390, IDD4W=500, IDD5AB=250,
    ),
}  # fmt: skip


def device(name: str) -> DramDevice:
    """A device set by name; a one-line error naming the known ones."""
    if name not in DEVICES:
        raise ConfigError(f"unknown DRAM device {name!r}; devices: {', '.join(DEVICES)}")
    return DEVICES[name]


@dataclass(frozen=True)
class ControllerPolicy:
    """The controller's queues and thresholds, as DRAMsim3's parameter sets and controller have them (the
    reference the model is held to; a real controller's differ and are not published)."""

    transactions: int = 32  # read queue and write buffer, each (DRAMsim3 .ini trans_queue_size)
    bank_queue: int = 8  # commands a bank's queue holds (cmd_queue_size)
    drain_low: int = 8  # writes past which an idle controller drains the buffer (controller.cc's `> 8`)
    row_hit_cap: int = 4  # hits an open row serves before a waiting miss may close it (command_queue.cc's `>= 4`)


def _timing_tables(d: DramDevice) -> dict[tuple[int, str], tuple[tuple[int, int], ...]]:
    """For each command and scope (same bank, other banks of its group, other groups of its rank, other
    ranks, its whole rank), the commands it delays and by how many clocks."""
    burst, rl, wl = d.burst_cycles, d.AL + d.CL, d.AL + d.CWL
    read_delay, write_delay = rl + burst, wl + burst
    one_group = d.bankgroups == 1
    rtr_l = max(burst, d.tCCD_S if one_group else d.tCCD_L)
    rtr_s = max(burst, d.tCCD_S)
    wtr_l = write_delay + (d.tWTR_S if one_group else d.tWTR_L)
    rtw = rl + burst - wl + d.tRTRS
    t = {
        (RD, "bank"): ((RD, rtr_l), (WR, rtw), (PRE, d.AL + d.tRTP)),
        (RD, "group"): ((RD, rtr_l), (WR, rtw)),
        (RD, "rank"): ((RD, rtr_s), (WR, rtw)),
        (RD, "other"): ((RD, burst + d.tRTRS), (WR, read_delay + burst + d.tRTRS - write_delay)),
        (WR, "bank"): ((RD, wtr_l), (WR, rtr_l), (PRE, wl + burst + d.tWR)),
        (WR, "group"): ((RD, wtr_l), (WR, rtr_l)),
        (WR, "rank"): ((RD, write_delay + d.tWTR_S), (WR, rtr_s)),
        (WR, "other"): ((RD, write_delay + burst + d.tRTRS - read_delay), (WR, burst)),
        (ACT, "bank"): ((ACT, d.tRAS + d.tRP), (RD, d.tRCD - d.AL), (WR, (d.tRCDWR or d.tRCD) - d.AL), (PRE, d.tRAS)),
        (ACT, "group"): ((ACT, d.tRRD_S if one_group else d.tRRD_L),),
        (ACT, "rank"): ((ACT, d.tRRD_S),),
        (ACT, "other"): (),
        (PRE, "bank"): ((ACT, d.tRP), (REF, d.tRP)),
        (PRE, "group"): ((PRE, d.tPPD),) if d.tPPD else (),
        (PRE, "rank"): ((PRE, d.tPPD),) if d.tPPD else (),
        (PRE, "other"): (),
        (REF, "all"): ((ACT, d.tRFC), (REF, d.tRFC)),
    }
    return t


@dataclass(frozen=True)
class RequestTimes:
    """When each request of a stream was accepted by the controller and completed (clocks)."""

    accepted: tuple[int, ...]
    done: tuple[int, ...]
    activates: int
    refreshes: int
    read_commands: int = 0  # reads of one place waiting together are one command
    write_commands: int = 0  # writes still in the buffer at the end are not
    active_cycles: int = 0  # clocks summed over the ranks: some bank's row open
    idle_cycles: int = 0  # every bank precharged


class DramController:
    """One channel's controller and devices, clocked one cycle at a time (module doc)."""

    def __init__(self, device: DramDevice, policy: ControllerPolicy = ControllerPolicy()) -> None:
        self.d, self.p = device, policy
        d = device
        n = d.ranks * d.banks
        self.open_row = [-1] * n
        self.open_banks = [0] * d.ranks  # per rank, its banks with a row open
        self.hits = [0] * n
        self.ready = [[0] * 5 for _ in range(n)]  # per bank: earliest clock of each command type
        self.faw: list[list[int]] = [[] for _ in range(d.ranks)]
        self.queues: list[list[tuple]] = [[] for _ in range(n)]  # per bank: (type, row, col, addr)
        self.queue_at = 0
        self.read_q: list[int] = []  # addresses
        self.write_b: list[int] = []
        self.pending_reads: dict[int, list[int]] = {}  # address -> request ids
        self.pending_writes: set[int] = set()
        self.draining = 0
        self.refresh_due: list[int] = []  # ranks waiting for a refresh
        self.next_refresh_rank = 0
        self.refresh_interval = d.tREFI // d.ranks
        self.returns: list[tuple[int, int]] = []  # (clock, request id)
        self.clk = 0
        self.activates = self.refreshes = self.read_commands = self.write_commands = 0
        self.active_cycles = self.idle_cycles = 0
        self.decoded: dict[int, tuple[int, int, int, int]] = {}
        t = _timing_tables(d)
        g = d.banks_per_group
        # per issuing bank, the (bank, delays) it constrains, per command type
        self.effects: list[list[tuple[tuple[int, tuple[tuple[int, int], ...]], ...]]] = []
        for b in range(n):
            rank, bank = divmod(b, d.banks)
            per_type = []
            for c in (RD, WR, ACT, PRE):
                eff = []
                for o in range(n):
                    orank, obank = divmod(o, d.banks)
                    if o == b:
                        scope = "bank"
                    elif orank != rank:
                        scope = "other"
                    elif obank // g == bank // g:
                        scope = "group"
                    else:
                        scope = "rank"
                    if t[(c, scope)]:
                        eff.append((o, t[(c, scope)]))
                per_type.append(tuple(eff))
            per_type.append(tuple((o, t[(REF, "all")]) for o in range(rank * d.banks, (rank + 1) * d.banks)))
            self.effects.append(per_type)

    # ---- the front: transactions in and out
    def will_accept(self, write: bool) -> bool:
        return len(self.write_b if write else self.read_q) < self.p.transactions

    def add(self, rid: int, addr: int, write: bool) -> None:
        """Take request `rid` (the clock is the controller's next)."""
        when = self.clk + 1
        if write:
            if addr not in self.pending_writes:
                self.pending_writes.add(addr)
                self.write_b.append(addr)
            self.returns.append((when, rid))
        elif addr in self.pending_writes:
            self.returns.append((when, rid))
        else:
            ids = self.pending_reads.setdefault(addr, [])
            ids.append(rid)
            if len(ids) == 1:
                self.read_q.append(addr)

    def done(self) -> list[int]:
        """Requests complete by this clock (taken out)."""
        if not self.returns:
            return []
        out = [rid for c, rid in self.returns if c <= self.clk]
        if out:
            self.returns = [(c, rid) for c, rid in self.returns if c > self.clk]
        return out

    def idle(self) -> bool:
        """Nothing queued, pending or returning, and no refresh due: the next clocks only stand by."""
        return not (self.read_q or self.write_b or self.returns or self.refresh_due or any(self.queues))

    def idle_until(self, clk: int) -> int:
        """Stand idle up to `clk` (or to the next refresh's clock, which then ticks as usual) at once: each
        rank's standby clocks counted as its rows stand. Returns the clock reached."""
        interval = self.refresh_interval
        if self.clk and self.clk % interval == 0:  # this clock inserts a refresh: it ticks
            return self.clk
        target = min(clk, (self.clk // interval + 1) * interval)  # so does the next refresh's clock
        span = target - self.clk
        if span > 0:
            self._stand_by(span)
            self.clk = target
        return self.clk

    def _stand_by(self, clocks: int) -> None:
        """Count `clocks` of each rank's standby: active where a row of it is open, else precharged."""
        active = sum(1 for n in self.open_banks if n)
        self.active_cycles += active * clocks
        self.idle_cycles += (len(self.open_banks) - active) * clocks

    # ---- the clock
    def tick(self) -> None:
        d, clk = self.d, self.clk
        if clk and clk % self.refresh_interval == 0:
            self.refresh_due.append(self.next_refresh_rank)
            self.next_refresh_rank = (self.next_refresh_rank + 1) % d.ranks
        cmd = self._refresh_command() if self.refresh_due else None
        if cmd is None:
            cmd = self._next_command()
        if cmd is not None:
            self._issue(*cmd)
            if self.d.dual_command:  # HBM: a second command of the other kind (row or column) in the clock
                second = self._next_command()
                if second is not None and (second[0] in (RD, WR)) != (cmd[0] in (RD, WR)):
                    self._issue(*second)
        self._stand_by(1)  # each rank's standby this clock, after the command
        self._schedule_transaction()
        self.clk += 1

    def _addr(self, addr: int) -> tuple[int, int, int, int]:
        got = self.decoded.get(addr)
        if got is None:
            got = self.decoded[addr] = self.d.decode(addr)
        return got

    def _bank_ready(self, b: int, kind: int, row: int) -> int | None:
        """The command bank b needs next for a `kind` access to `row`, if it may issue now; else None."""
        open_row = self.open_row[b]
        need = ACT if open_row < 0 else kind if open_row == row else PRE
        if self.clk < self.ready[b][need]:
            return None
        if need == ACT:
            w = self.faw[b // self.d.banks]
            if len(w) >= 4 and self.clk < w[0]:
                return None
        return need

    def _next_command(self):
        n = len(self.queues)
        refreshing = set(self.refresh_due[:1])
        for _ in range(n):
            self.queue_at = (self.queue_at + 1) % n
            b = self.queue_at
            q = self.queues[b]
            if not q or (b // self.d.banks) in refreshing:
                continue
            for i, (kind, row, col, addr) in enumerate(q):
                need = self._bank_ready(b, kind, row)
                if need is None:
                    continue
                if need == PRE:
                    if i > 0:  # an earlier entry of this bank's queue goes first
                        continue
                    open_row = self.open_row[b]
                    hit_waiting = any(r == open_row for _, r, _, _ in q[i:])
                    if hit_waiting and self.hits[b] < self.p.row_hit_cap:
                        continue
                elif need == WR and any(k == RD and r == row and c == col for k, r, c, _ in q[:i]):
                    continue  # a write waits for an earlier read of its place
                if need in (RD, WR):
                    del q[i]
                return (need, b, row, addr)
        return None

    def _refresh_command(self):
        """The refresh the oldest due rank waits for: a precharge of an open bank, or the refresh itself."""
        rank = self.refresh_due[0]
        first = rank * self.d.banks
        all_ready = True
        for b in range(first, first + self.d.banks):
            if self.open_row[b] >= 0:
                if self.clk >= self.ready[b][PRE]:
                    return (PRE, b, -1, -1)
                all_ready = False
            elif self.clk < self.ready[b][REF]:
                all_ready = False
        return (REF, first, -1, -1) if all_ready else None

    def _issue(self, kind: int, b: int, row: int, addr: int) -> None:
        clk = self.clk
        if kind == RD:
            self.read_commands += 1
            self.hits[b] += 1
            when = clk + self.d.AL + self.d.CL + self.d.burst_cycles
            self.returns.extend((when, rid) for rid in self.pending_reads.pop(addr))
        elif kind == WR:
            self.write_commands += 1
            self.hits[b] += 1
            self.pending_writes.discard(addr)
        elif kind == ACT:
            self.open_row[b], self.hits[b] = row, 0
            self.open_banks[b // self.d.banks] += 1
            self.activates += 1
            w = self.faw[b // self.d.banks]
            if w and clk >= w[0]:
                w.pop(0)
            w.append(clk + self.d.tFAW)
        elif kind == PRE:
            self.open_row[b], self.hits[b] = -1, 0
            self.open_banks[b // self.d.banks] -= 1
        else:  # REF of the rank
            self.refresh_due.pop(0)
            self.refreshes += 1
        for o, delays in self.effects[b][kind]:
            r = self.ready[o]
            for c, delay in delays:
                if clk + delay > r[c]:
                    r[c] = clk + delay

    def _schedule_transaction(self) -> None:
        p = self.p
        full = len(self.write_b) >= p.transactions
        if not self.draining and (full or (len(self.write_b) > p.drain_low and not any(self.queues))):
            self.draining = len(self.write_b)
        if self.draining and self._move(self.write_b, WR):
            return
        self._move(self.read_q, RD)

    def _move(self, queue: list[int], kind: int) -> bool:
        """Move the first transaction of `queue` whose bank queue has room; False where a write waits for
        the place of a pending read (the drain stops, and a read moves instead: DRAMsim3 moves none, and
        stalls for ever when its write buffer is full then; no stream it times meets that)."""
        for i, addr in enumerate(queue):
            rank, bank, row, col = self._addr(addr)
            b = rank * self.d.banks + bank
            if len(self.queues[b]) >= self.p.bank_queue:
                continue
            if kind == WR:
                if addr in self.pending_reads:  # a read waits for this write's place: stop draining
                    self.draining = 0
                    return False
                self.draining -= 1
            self.queues[b].append((kind, row, col, addr))
            del queue[i]
            return True
        return True


def run_requests(device: DramDevice, requests: list[tuple[int, int, bool]],
                 policy: ControllerPolicy = ControllerPolicy()) -> RequestTimes:  # fmt: skip
    """Offer `requests` (ready clock, byte address, write?) in order, one a clock at most, as a master that
    waits when the controller cannot take the next one, and time them (RequestTimes)."""
    ctl = DramController(device, policy)
    n = len(requests)
    accepted, done = [0] * n, [0] * n
    finished = nxt = 0
    clk = 0
    busy_until = 0  # past this, with nothing offered, nothing is owed: the controller has no work left
    while finished < n:
        for rid in ctl.done():
            done[rid] = clk
            finished += 1
        if nxt < n and requests[nxt][0] > clk + 1 and ctl.idle():
            clk = ctl.idle_until(requests[nxt][0] - 1)  # idle clocks at once, a refresh on the way timed
        ctl.tick()
        if nxt < n and requests[nxt][0] <= clk and ctl.will_accept(requests[nxt][2]):
            ctl.add(nxt, requests[nxt][1], requests[nxt][2])
            accepted[nxt] = clk
            nxt += 1
            busy_until = clk
        clk += 1
        if nxt == n and clk > busy_until + 100 * (n + 1000) * (device.tRFC + device.tRAS + device.tRP):
            raise TraceError(f"{device.name}: {n - finished} of the stream's requests never completed")
    return RequestTimes(
        tuple(accepted), tuple(done), ctl.activates, ctl.refreshes, ctl.read_commands, ctl.write_commands,
        ctl.active_cycles, ctl.idle_cycles,
    )  # fmt: skip


@dataclass(frozen=True)
class DramEnergy:
    """A stream's DRAM energy in pJ, from its commands and its ranks' standby clocks (the IDD method of
    Micron's DDR power notes, TN-41-01 / TN-53-01): an activate (with its precharge) VDD x (IDD0 x tRC -
    IDD3N x tRAS - IDD2N x tRP), a read or write burst VDD x (IDD4R/W - IDD3N) x its clocks, a refresh VDD x
    (IDD5AB - IDD3N) x tRFC, a clock of standby VDD x IDD3N (a row open) or IDD2N (all precharged); each for
    every device of the rank, clocks times tCK."""

    activate: float
    read: float
    write: float
    refresh: float
    background: float

    @property
    def total(self) -> float:
        return self.activate + self.read + self.write + self.refresh + self.background

    @classmethod
    def of(cls, dev: DramDevice, t: RequestTimes) -> DramEnergy:
        c = dev.command_pj()
        return cls(
            t.activates * c.activate,
            t.read_commands * c.read,
            t.write_commands * c.write,
            t.refreshes * c.refresh,
            c.active_standby * t.active_cycles + c.precharged_standby * t.idle_cycles,
        )


@dataclass(frozen=True)
class RequestStream:
    """Requests (ready clock, byte address, write?) in order, and the master that issued each ("" unnamed)."""

    requests: tuple[tuple[int, int, bool], ...]
    masters: tuple[str, ...]

    def of_master(self, name: str) -> list[tuple[int, int, bool]]:
        return [r for r, m in zip(self.requests, self.masters, strict=True) if m == name]

    @property
    def master_names(self) -> list[str]:
        return list(dict.fromkeys(self.masters))


def read_requests(path: str | Path, dev: DramDevice) -> RequestStream:
    """A request stream file: one request a line, "CYCLE ADDRESS R|W [MASTER]" (the clock of the memory at which
    it is ready, a byte address, decimal or 0x-hex, read or write, and optionally the name of the master that
    issues it), in order of CYCLE; '#' starts a comment. Each address must lie in the device's channel and
    start a transaction (a multiple of its bytes)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{p}: cannot read the request stream ({getattr(e, 'strerror', None) or e})") from None
    out: list[tuple[int, int, bool]] = []
    masters: list[str] = []
    last = 0
    for no, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{p}:{no}"
        if len(words) not in (3, 4) or words[2].upper() not in ("R", "W"):
            raise TraceError(f"{where}: expected 'CYCLE ADDRESS R|W [MASTER]', not {raw.strip()!r}")
        try:
            cycle, addr = int(words[0], 0), int(words[1], 0)
        except ValueError:
            raise TraceError(
                f"{where}: CYCLE and ADDRESS must be integers (decimal or 0x-hex), not {raw.strip()!r}"
            ) from None
        if cycle < 0:
            raise TraceError(f"{where}: cycle {cycle} is negative; a request is ready at a clock >= 0")
        if cycle < last:
            raise TraceError(f"{where}: cycle {cycle} is before the previous request's {last}; requests come in order")
        if not 0 <= addr < dev.capacity_bytes or addr % dev.request_bytes:
            raise TraceError(
                f"{where}: address {addr:#x} is not a transaction of {dev.name}'s channel (multiples of "
                f"{dev.request_bytes} bytes below {dev.capacity_bytes:#x})"
            )
        out.append((cycle, addr, words[2].upper() == "W"))
        masters.append(words[3] if len(words) == 4 else "")
        last = cycle
    if not out:
        raise TraceError(f"{p}: no requests (one a line: CYCLE ADDRESS R|W [MASTER])")
    if "" in masters and any(masters):
        no = next(i for i, m in enumerate(masters) if not m) + 1
        raise TraceError(f"{p}: request {no} names no master where others do; name one on every line or on none")
    return RequestStream(tuple(out), tuple(masters))


def read_latencies(done, accepted, requests) -> list[int]:
    """Each read's clocks from the controller taking it to its data (writes left out)."""
    return [d - a for d, a, r in zip(done, accepted, requests, strict=True) if not r[2]]


def _mean(values: list[int]) -> float:
    return round(statistics.fmean(values), 3) if values else 0.0


@dataclass(frozen=True)
class MasterFigures:
    """One master's requests on a shared channel against the same requests alone on it."""

    name: str
    requests: int
    shared_cycles: int  # from its first request's ready clock to its last request completed, beside the others
    alone_cycles: int  # the same requests alone on the channel
    shared_gbs: float
    alone_gbs: float
    shared_read_latency: float  # mean, clocks from acceptance to the data (0 without reads)
    alone_read_latency: float

    @property
    def slowdown(self) -> float:
        return self.shared_cycles / self.alone_cycles


def master_figures(dev: DramDevice, stream: RequestStream, times: RequestTimes) -> list[MasterFigures]:
    """Each master's figures in `times` (the stream run whole) against its requests run alone."""
    out = []
    for name in stream.master_names:
        ids = [i for i, m in enumerate(stream.masters) if m == name]
        mine = [stream.requests[i] for i in ids]
        alone = run_requests(dev, mine)
        nbytes = len(ids) * dev.request_bytes
        first = mine[0][0]  # from its first request's ready clock
        shared_cycles = max(times.done[i] for i in ids) + 1 - first
        alone_cycles = max(alone.done) + 1 - first

        out.append(
            MasterFigures(
                name, len(ids), shared_cycles, alone_cycles,
                round(nbytes / (shared_cycles * dev.tck_ns), 4), round(nbytes / (alone_cycles * dev.tck_ns), 4),
                _mean(read_latencies([times.done[i] for i in ids], [times.accepted[i] for i in ids], mine)),
                _mean(read_latencies(alone.done, alone.accepted, mine)),
            )
        )  # fmt: skip
    return out


def percentile(values: list[int] | list[float], q: float) -> float:
    """The value at `q` of the sorted values, at rank round(q x (n - 1)) (run_dramsim3's rows use the same)."""
    s = sorted(values)
    return float(s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))])


@dataclass(frozen=True)
class StreamFigures:
    """What a request stream measured on a device: its time, what its requests were served at and what the
    bus carried, its read latency, commands and energy."""

    device: str
    requests: int
    reads: int
    writes: int
    cycles: int  # memory clocks from cycle 0 to the last request completed
    ns: float
    # the requests' bytes over the time: a write is served as the controller takes it into its buffer (its
    # burst may come later, or after the end), a read of a place being written from that buffer
    served_gbs: float
    bus_gbs: float  # the bursts the bus carried (read and write commands) over the time
    peak_gbs: float
    read_latency_mean: float  # clocks from the controller taking a read to its data (0 without reads)
    read_latency_p90: float
    read_latency_max: int
    activates: int
    refreshes: int
    energy: DramEnergy
    energy_pj_per_bus_byte: float  # over the bytes the bus carried

    @classmethod
    def of(cls, dev: DramDevice, requests: list[tuple[int, int, bool]], times: RequestTimes) -> StreamFigures:
        cycles = max(times.done) + 1
        lat = read_latencies(times.done, times.accepted, requests)
        bus_bytes = (times.read_commands + times.write_commands) * dev.request_bytes
        energy = DramEnergy.of(dev, times)
        ns = cycles * dev.tck_ns
        return cls(
            dev.name, len(requests), len(lat), len(requests) - len(lat), cycles, round(ns, 3),
            round(len(requests) * dev.request_bytes / ns, 4), round(bus_bytes / ns, 4), round(dev.peak_gbs, 4),
            _mean(lat), percentile(lat, 0.9) if lat else 0.0,
            max(lat, default=0), times.activates, times.refreshes, energy,
            round(energy.total / bus_bytes, 3) if bus_bytes else 0.0,
        )  # fmt: skip


# --- A run's traffic on the device (the memory model "dram", memory.DramMemory) ---------------------------

MIX_PARTS = 16  # a mix's shares are sixteenths of its bytes: alike runs share one measured figure
MIX_READ_CLIENTS = 4  # the largest readers (and writers) kept: NVDLA's CDMA data and weights, a stream unit's
# RDMA and SDP's operands read; several NVDLAs sharing the DRAM each write
MIX_OFFSET_ROWS = 5  # client k's buffer starts 5k rows past k regions: in another bank than the others' (an allocation)
MIX_TRANSACTIONS = 2048  # a mix is measured on this many transactions: about two tREFI on LPDDR4-2400 (0.2 s)


@dataclass(frozen=True)
class MixClient:
    """One DMA client of a run on the DRAM: reads or writes, and its share of the run's bytes (MIX_PARTS)."""

    write: bool
    share: int


@dataclass(frozen=True)
class AccessMix:
    """What a run asks of the DRAM at once: its clients (NVDLA's DMA engines: CDMA's data and weights, a stream
    unit's RDMA, SDP's operand RDMAs, the write DMA), each walking its own buffer in order, their requests
    interleaved in proportion to their bytes (NVDLA's MCIF arbitrates its clients request by request)."""

    clients: tuple[MixClient, ...]

    @classmethod
    def of(cls, reads: Sequence[float], writes: float | Sequence[float]) -> AccessMix:
        """The mix of clients reading `reads` bytes each and writing `writes` (one write client's bytes, or
        several clients' writing to buffers of their own), in sixteenths of their total (a client under half
        a sixteenth left out; the largest MIX_READ_CLIENTS readers and writers kept)."""
        readers = sorted((b for b in reads if b > 0), reverse=True)[:MIX_READ_CLIENTS]
        writers = sorted((b for b in ([writes] if isinstance(writes, int | float) else writes) if b > 0),
                         reverse=True)[:MIX_READ_CLIENTS]  # fmt: skip
        total = sum(readers) + sum(writers)
        if total <= 0:
            return SEQUENTIAL_READ
        parts = [MixClient(False, round(MIX_PARTS * b / total)) for b in readers]
        parts += [MixClient(True, round(MIX_PARTS * b / total)) for b in writers]
        kept = tuple(c for c in parts if c.share > 0)
        return cls(kept) if kept else SEQUENTIAL_READ

    def requests(self, dev: DramDevice, n: int = MIX_TRANSACTIONS) -> list[tuple[int, int, bool]]:
        """`n` transactions of the mix, every one ready at once (the device's sustained rate for it): the
        clients taken by smooth weighted round robin; client k walks its own buffer in order from k regions
        plus MIX_OFFSET_ROWS x k rows (a region: 1 GiB, or an eighth of a smaller channel, so that no two
        buffers meet; buffers allocated apart, each starting in another bank: where they start in one bank, as
        validation/dram/streams.py's two-master streams do, alike clients meet in it for ever;
        docs/modelling.md gives the difference)."""
        weights = [c.share for c in self.clients]
        total = sum(weights)
        current = [0] * len(weights)
        region = min(1 << 30, dev.capacity_bytes // (2 * MIX_READ_CLIENTS))
        base = [k * (region + MIX_OFFSET_ROWS * dev.row_bytes) for k in range(len(weights))]
        walked = [0] * len(weights)
        out = []
        for _ in range(n):
            for k, w in enumerate(weights):
                current[k] += w
            k = max(range(len(weights)), key=current.__getitem__)
            current[k] -= total
            addr = (base[k] + walked[k] * dev.request_bytes) % dev.capacity_bytes
            walked[k] += 1
            out.append((0, addr, self.clients[k].write))
        return out

    def label(self) -> str:
        """e.g. "R8 R4 W4": each client's direction and sixteenths (parse reads it back)."""
        return " ".join(f"{'W' if c.write else 'R'}{c.share}" for c in self.clients)

    @classmethod
    def parse(cls, label: str) -> AccessMix:
        """The mix a label names ("R8 R4 W4"); a one-line error for a malformed one."""
        clients = []
        for word in label.split():
            kind, share = word[:1].upper(), word[1:]
            if kind not in ("R", "W") or not share.isdigit() or not 0 < int(share) <= MIX_PARTS:
                raise ConfigError(
                    f"access mix {label!r}: {word!r} is not a client (R or W, then its share in sixteenths, 1-16)"
                )
            clients.append(MixClient(kind == "W", int(share)))
        if not clients:
            raise ConfigError(f"access mix {label!r}: no clients (e.g. 'R8 R4 W4')")
        return cls(tuple(clients))


SEQUENTIAL_READ = AccessMix((MixClient(False, MIX_PARTS),))  # one client streaming reads (a weight fetch)


@dataclass(frozen=True)
class MixFigures:
    """A mix measured on one channel of a device (the device model, cycle by cycle)."""

    gbs: float  # the bursts the bus carried over the time, a channel (StreamFigures.bus_gbs)
    efficiency: float  # of the channel's peak
    activates_per_request: float  # rows opened a transaction the bus carried (the mix's row misses)


def _mix_figures(dev: DramDevice, mix: AccessMix, policy: ControllerPolicy) -> MixFigures:
    times = run_requests(dev, mix.requests(dev), policy)
    cycles = max(times.done) + 1
    # the bursts the bus carried: the writes still in the buffer at the end are not yet served
    nbytes = (times.read_commands + times.write_commands) * dev.request_bytes
    gbs = nbytes / (cycles * dev.tck_ns)
    return MixFigures(gbs, gbs / dev.peak_gbs, times.activates / (times.read_commands + times.write_commands))


_MIX_MEMO: dict[tuple[DramDevice, AccessMix, ControllerPolicy], MixFigures] = {}
_MIX_DISK = DiskCache("dram_mixes")  # measured once a machine: keyed by this file's text, the device and policy
_SOURCE = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:16]


def mix_figures(dev: DramDevice, mix: AccessMix, policy: ControllerPolicy = ControllerPolicy()) -> MixFigures:
    """The device's sustained rate and activates for a mix (measured once for each: kept for the process and on
    disk, the key naming this module's text, the device, the policy and the mix)."""
    key = (dev, mix, policy)
    got = _MIX_MEMO.get(key)
    if got is None:
        disk_key = json.dumps([_SOURCE, repr(dev), repr(policy), mix.label(), MIX_TRANSACTIONS])
        got = MixFigures(*_MIX_DISK.get(disk_key, lambda: list(astuple(_mix_figures(dev, mix, policy)))))
        _MIX_MEMO[key] = got
    return got


def mixes_measured() -> list[AccessMix]:
    """The mixes measured in this process so far (every device), in the order first asked."""
    return list(dict.fromkeys(mix for _, mix, _ in _MIX_MEMO))


def forget_mixes() -> None:
    """Forget the measured mixes (a study that lists a run's own: validation/dram/nvdla_mixes.py)."""
    _MIX_MEMO.clear()


def command_energy_pj(dev: DramDevice, read_bytes: float, write_bytes: float, mix: AccessMix) -> float:
    """The DRAM commands' energy of a run's traffic (pJ): its read and write bursts, and the rows it opens at
    its mix's rate of activates a transaction (standby and refresh are the time's: background_mw)."""
    c = dev.command_pj()
    reads, writes = read_bytes / dev.request_bytes, write_bytes / dev.request_bytes
    return (
        reads * c.read + writes * c.write + (reads + writes) * mix_figures(dev, mix).activates_per_request * c.activate
    )


def idle_read_clocks(dev: DramDevice, policy: ControllerPolicy = ControllerPolicy()) -> int:
    """Clocks from the controller taking a lone read of a precharged bank to its data (activate, CAS, burst)."""
    return run_requests(dev, [(0, 0, False)], policy).done[0]
