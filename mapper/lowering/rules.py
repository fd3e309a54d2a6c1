"""Lower workload ops to NVDLA hardware layers (or host / copy tasks), one registered function per OpKind.

Mapping choices (see docs/mapping.md):
* linear layers: 1x1 convolutions with fused SDP (bias; GELU via LUT or ReLU; residual add via EW);
* attention QK^T and PV: one 1x1 convolution per head/window with K (resp. V^T) loaded through the
  CDMA weight path, after a re-layout copy into weight format (BDMA when present, else the host);
* softmax on the host by default; on NVDLA with --softmax nvdla (needs the SDP LUT; measured inaccurate
  at INT8, docs/quantization.md): exp via LUT, row sums via a 1x1 convolution with ones, reciprocal via
  LUT, normalisation as an SDP per-element multiply;
* layernorm on the host by default; on NVDLA with --layernorm nvdla (a what-if: needs LUT + EW and INT16,
  INT8 layers; not all of its steps run on NVDLA v1, docs/quantization.md): the steps of
  numerics.layernorm_steps (row sums and broadcasts as ones-kernel convolutions, the statistics at INT16,
  rsqrt via LUT, normalise + affine via SDP). Embedding lookups always run on the host.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from nvdla_mapper.numerics import sparsity
from nvdla_mapper.options import Granularity, KvPlan, MapOptions, Placement, WeightTreatment
from nvdla_mapper.workload import Block, Op, OpKind, Relayout
from nvdla_sim.config import HwConfig
from nvdla_sim.engine.tiling import bytes_per_kernel
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer, ConvShape, HwLayer, OperandMode, PdpLayer, PoolSpec, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import PROCESSORS, AnyLayer, Processor, copy_processor, copy_processors, engines, processor_of
from nvdla_sim.system.host import HostModel, HostOp, HostWork, host_model
from nvdla_sim.units import cdma
from nvdla_sim.values import field_hash, state_without_hash

MAX_DIM = 8192


class _Resources(enum.Enum):
    __hash__ = object.__hash__  # a member is its own identity; Enum's hash(name) runs Python code per lookup


# Where a task runs; each runs one task at a time (schedule.py): NVDLA (the core's pipeline: convolution, SDP,
# PDP, CDP, one hardware layer at a time), each processor that runs beside it (its engine: BDMA's copies), and
# HOST (the CPU: fallbacks, embedding lookups, element scatters). From the processor registry.
Resource = _Resources("Resource", [(e.upper(), e) for e in (*engines(), "host")])


def resource_label(resource: Resource) -> str:
    """How reports name a resource: NVDLA, a processor beside the core by its label (BDMA), host."""
    if resource is Resource.NVDLA:
        return "NVDLA"
    if resource is Resource.HOST:
        return "host"
    return next(p.label for p in PROCESSORS if p.engine == resource.value)


def resources_phrase() -> str:
    """Every resource, named for a sentence: "NVDLA, BDMA and host"."""
    names = [resource_label(r) for r in Resource]
    return ", ".join(names[:-1]) + " and " + names[-1]


def copies_phrase() -> str:
    """The processors that copy memory, named for a sentence ("BDMA")."""
    return " or ".join(p.label for p in copy_processors())


# each hardware layer type's resource: its processor's engine
_RESOURCE_OF: dict[type, Resource] = {p.layer_type: Resource(p.engine) for p in PROCESSORS}


def resource_of(layer: AnyLayer) -> Resource:
    """The resource that runs a hardware layer: its processor's engine."""
    found = _RESOURCE_OF.get(type(layer))
    return found if found is not None else Resource(processor_of(layer).engine)  # processor_of names the error


@dataclass(frozen=True)
class Task:
    """One schedulable step: a hardware layer, a copy, or a host computation, repeated `count` times."""

    name: str
    op: str
    group: str
    resource: Resource
    count: int = 1
    layer: AnyLayer | None = None  # a hardware layer of any processor (nvdla_sim.processors)
    host_work: HostWork | None = None  # per instance, a host task's work (nvdla_sim.system.host)
    note: str = ""
    # bytes of the model's static weights this task keeps in DRAM, counted once over its instances (a
    # convolution's groups each have filters, its batch instances share them); 0 for a linear layer's
    # later row pieces (they read the first piece's weights again) and for tasks without parameters
    stored_weight_bytes: int = 0
    static_weights: bool = False  # a layer of an op with model weights (workload.HAS_STATIC_WEIGHTS)
    # the layer whose searched tiling plan this one runs (None: its own). Attention against a KV cache is
    # planned at its length bucket (passes.lower_op, options.KvPlan): this is the same layer against
    # bucket_keys(keys) keys, and the plan found for it runs at the layer's own length
    plan_at: HwLayer | None = None
    block: Block | None = None  # the model block of its op (workload.Block), for reports and step templates
    # a hardware layer of its op's own product (a matmul, QK^T or PV against fresh keys, a partial-sum add of
    # a split one): where it sits, as MatmulPiece's (first row, first output column, first reduction
    # channel; of V^T's product where V is computed transposed); None for the steps around a product
    # (re-layouts, conversions, a softmax's or a norm's steps, a broadcast) and for the decode step's
    # products against the KV caches (their per-group and heads-as-pixels forms)
    piece: tuple[int, int, int] | None = None

    __hash__ = field_hash

    @property
    def model_block(self) -> Block:
        """Its op's block (a task made without one: its op's own)."""
        return (
            self.block if self.block is not None else Block(self.op)
        )  # computed once: tasks key the pass memo and the energy memo (nvdla_sim.values)

    __getstate__ = state_without_hash


@dataclass(frozen=True)
class Choice:
    """Equivalent lowerings of one op, each (label, tasks); the mapper keeps the one its own simulation
    of the tasks finds fastest (passes.cheapest), as a compiler with a cost model would."""

    options: tuple[tuple[str, tuple[Task, ...]], ...]


@dataclass(frozen=True)
class Fused:
    """What the fusion pass folded into a matmul's or convolution's SDP (and PDP)."""

    activation: OpKind | None = None  # ReLU, or a LUT activation (GELU, tanh, ...)
    residual: bool = False  # per-element add of another tensor (EW, or X2 per-element without EW)
    residual_input: str = ""  # the op producing the other operand
    pool: PoolSpec | None = None  # on-the-fly pooling after SDP (convolutions)
    # the precision its output is written at where its consumer runs at another (the KV-cache precision
    # what-if: q/k/v into the caches' precision, attention's output back to the model's); None: its own
    out_precision: Precision | None = None


# Output conversions SDP's output convertor makes (NVIDIA's C model, cmod/hls/sdp/sdp_c.cpp on nvdla/hw
# master: FP16 processing writes FP16 or INT16, Fp16ToInt16; integer processing writes INT8, INT16 or, by
# Int17ToFp16, FP16). FP16 -> INT8 takes two passes: FP16 -> INT16, then an integer SDP pass to INT8.
SDP_OUTPUTS = {
    Precision.INT8: frozenset(Precision),
    Precision.INT16: frozenset(Precision),
    Precision.FP16: frozenset({Precision.FP16, Precision.INT16}),
}
# the cache relayouts: they move K and V into (and within) the caches, at the caches' precision
CACHE_RELAYOUTS = frozenset({Relayout.K_APPEND, Relayout.V_APPEND, Relayout.V_CACHE})


def at_cache_precision(op: Op) -> bool:
    """Ops that run at the KV caches' precision under the KV-precision what-if: QK^T, the softmax, PV
    (every operand read from or computed against the caches) and the cache appends and fills."""
    if op.kind in (OpKind.ATTN_SCORES, OpKind.ATTN_CONTEXT, OpKind.SOFTMAX):
        return True
    return op.kind is OpKind.TRANSPOSE and op.attrs.relayout in CACHE_RELAYOUTS


# How attention against a KV cache (a decode step's QK^T and PV, whose keys grow by one every token) is
# planned. "bucket": once per length bucket, as a program compiled for a range of shapes runs (TensorRT's
# optimization profiles choose tactics at one shape of a range and run every shape of it with them; an
# NVDLA loadable is compiled for fixed dimensions, and a runtime that writes each step's key count into
# the same layer registers runs one plan over many lengths): the lowering option and every hardware
# layer's tiling plan are chosen at bucket_keys(keys), the power of two at or above the keys, and the
# layers are simulated at their own length with that plan, so each step is timed exactly and its cost
# changes where the keys do, while the plan changes only at powers of two (an op whose layers at the
# bucket differ in more than their keys, in form or layout, is planned at its own length: passes.
# _same_but_keys). "length": chosen at every
# length (a tiling search per step). Measured (docs/mapping.md, "Generation at scale"): TinyLlama's
# fused QK^T on nv_full at 2,049-4,096 keys runs its 4,096-key plan within 0.0-0.9% of the plan
# searched at its own length, for a simulation instead of a search each step (options.KvPlan).


def bucket_keys(keys: int) -> int:
    """The length a KV-cache attention op of `keys` keys is planned at under kv_plan "bucket"."""
    return 1 << max(keys - 1, 0).bit_length()


@dataclass
class LoweringContext:
    """What the lowering rules read: the build, the map's options, the host model, and what fusion gave
    each op."""

    hw: HwConfig
    options: MapOptions = field(default_factory=MapOptions)
    host: HostModel | None = None  # None: the model hw's [host] section chooses (system.host.host_model)
    fused: dict[str, Fused] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.host is None:
            self.host = host_model(self.hw.host)

    @classmethod
    def of(cls, hw: HwConfig, *, host: HostModel | None = None, **options) -> LoweringContext:
        """A context under MapOptions(**options) (a test's or a tool's shorthand)."""
        return cls(hw, MapOptions(**options), host)

    # the options, as the rules read them
    @property
    def precision(self) -> Precision:
        return self.options.precision

    @property
    def softmax(self) -> Placement:
        return self.options.softmax

    @property
    def layernorm(self) -> Placement:
        return self.options.layernorm

    @property
    def weights(self) -> WeightTreatment:
        return self.options.weights

    @property
    def kv_precision(self) -> Precision | None:
        """The KV-cache precision what-if: attention and its caches at this precision, the rest at
        `precision` (None: the model's precision everywhere)."""
        return self.options.kv_precision

    @property
    def kv_plan(self) -> KvPlan:
        """How attention against a KV cache chooses its lowering and tiling."""
        return self.options.kv_plan

    @property
    def cache_precision(self) -> Precision:
        return self.options.cache_precision

    def at_precision(self, precision: Precision) -> LoweringContext:
        """The same context with its layers at `precision` (the fusion shared)."""
        return dataclasses.replace(self, options=dataclasses.replace(self.options, precision=precision))

    @property
    def copier(self) -> Processor | None:
        """The build's memory-to-memory copy engine (BDMA), None without one."""
        return copy_processor(self.hw)

    def for_op(self, op: Op) -> LoweringContext:
        """The context an op is lowered under: the caches' precision for attention (at_cache_precision),
        the model's for the rest; the fusion (and its conversions) shared."""
        if self.cache_precision is self.precision or not at_cache_precision(op):
            return self
        options = dataclasses.replace(self.options, precision=self.cache_precision, kv_precision=None)
        return dataclasses.replace(self, options=options)

    def weighted(self, layer: ConvLayer) -> ConvLayer:
        """Apply the weight treatment to a layer with static weights."""
        w = self.weights
        if not w.active:
            return layer
        if w.compression and not self.hw.weight_compression:
            raise NvdlaError(f"{self.hw.name} has no weight compression (weight_compression = false in its config)")
        stored = None
        if w.compression:
            s = layer.shape
            dense = cdma.weight_bytes(s.out_k, s.kernel_w * s.kernel_h * s.in_c * layer.precision.bytes, self.hw)
            groups = math.ceil(s.out_k / self.hw.kernels_per_atomic(layer.precision))
            stored = sparsity.compressed_bytes(
                dense, density=w.density, element_bytes=layer.precision.bytes, kernel_groups=groups
            )
        return dataclasses.replace(layer, weight_bytes=stored, sparse_mac=w.sparse_mac)

    @property
    def has_lut(self) -> bool:
        return self.hw.sdp.lut and self.hw.sdp.ew_throughput > 0

    @property
    def has_ew(self) -> bool:
        return self.hw.sdp.ew_throughput > 0

    def mode(self, which: str) -> Placement:
        """Where the op `which` ("softmax" or "layernorm") runs on this build at this precision: NVDLA or
        the host (never AUTO); a one-line error where NVDLA was asked for and cannot run it."""
        want: Placement = getattr(self, which)
        ok = self.has_lut
        if want is Placement.NVDLA and not ok:
            raise NvdlaError(f"--{which} nvdla needs the SDP LUT and EW units; {self.hw.name} has none (use host)")
        if which == "softmax" and self.precision is not Precision.INT8:
            # The exp LUT runs on the raw scores (no row-max subtraction: a max over a row of keys is a
            # reduction across channels, which neither SDP nor PDP does). INT8 scores are bounded by their
            # requantization scale, so one table covers them; INT16/FP16 scores are not (FP16 exp
            # overflows past ln 65504 = 11.09), so their softmax runs on the host.
            if want is Placement.NVDLA:
                raise NvdlaError(
                    f"--softmax nvdla covers INT8 scores only (the exp LUT has no row-max subtraction); "
                    f"{self.precision.value} scores need --softmax host"
                )
            return Placement.HOST
        if which == "layernorm" and (self.precision is not Precision.INT8 or Precision.INT16 not in self.hw.precisions):
            # numerics.layernorm_steps keeps 2**7 (x - mean) and the squares at INT16: an INT8 layer's
            # statistics fit, on a build with an INT16 datapath; an INT16 layer's would need 32-bit
            # intermediates, and an FP16 layer's steps are not written (they are integer: INT16
            # statistics, an INT8 output). Otherwise the LayerNorm runs on the host.
            if want is Placement.NVDLA:
                why = (
                    f"{self.precision.value} layers"
                    if self.precision is not Precision.INT8
                    else f"{self.hw.name} has no int16 datapath"
                )
                raise NvdlaError(
                    f"--layernorm nvdla needs INT8 layers on a build with INT16 (its statistics are INT16); "
                    f"{why}: use --layernorm host"
                )
            return Placement.HOST
        if want is Placement.AUTO:
            # the softmax on the host: its LUT lowering (lower_softmax: exp of the raw INT8 scores, no row
            # max) is the --softmax nvdla what-if, because measured on the trained models it does not keep
            # their accuracy (rows whose scores sit far below the tensor's largest lose every exp to
            # rounding: docs/quantization.md, "The LUT steps on nv_full"). LayerNorm on the host too: its
            # steps (lower_layernorm) keep the accuracy but cannot all run on NVDLA v1 (measured on nv_full's
            # RTL: SDP has no INT16-to-INT8 output mode, so the normalisation over INT16 d hangs it, and the
            # centring pass reads -mean in a layout no INT16 convolution writes; docs/quantization.md
            # "LayerNorm in NVDLA's steps"), so they are the --layernorm nvdla what-if
            return Placement.NVDLA if ok and which not in ("softmax", "layernorm") else Placement.HOST
        return want


def _row_pieces(m: int, width_for) -> list[tuple[int, int, int]]:
    """(first row, rows, row length) pieces of m rows such that each piece is `rows / row length` <= 8192
    lines of at most 64 (the 13-bit height field): one hardware layer each. `width_for(rows)` gives the
    row length a piece would use; pieces past 8192 rows take the largest multiple of it that fits."""
    out, m0 = [], 0
    while m0 < m:
        rest = m - m0
        if rest <= MAX_DIM:
            out.append((m0, rest, width_for(rest)))
            break
        r = width_for(64 * (rest // 64)) if rest >= 64 else 1
        size = min(rest, MAX_DIM * r) // r * r
        out.append((m0, size, width_for(size)))
        m0 += size
    return out


def matmul_layers(name: str, m: int, k: int, n: int, ctx: LoweringContext, spec: SdpSpec) -> list[HwLayer]:
    """The hardware layers of an m x k x n matmul (see matmul_pieces)."""
    return [p.layer for p in matmul_pieces(name, m, k, n, ctx, spec)]


@dataclass(frozen=True)
class MatmulPiece:
    """One hardware layer of a split matmul and where it sits: its first row, first output column and
    first reduction channel (all 0 for an unsplit matmul; a partial-sum SDP pass has the piece's)."""

    layer: HwLayer
    m0: int
    n0: int
    k0: int


def matmul_pieces(name: str, m: int, k: int, n: int, ctx: LoweringContext, spec: SdpSpec) -> list[MatmulPiece]:
    """m x k x n as one or more 1x1 convolutions. Past the 13-bit register fields (8192) the op is split:
    tokens into row pieces, outputs into kernel groups of <= 8192, and the reduction into channel pieces
    whose partial results SDP adds up (EW, or the X1 ALU with a per-element operand), one hardware layer
    each. The partials are written at the layer's precision (as NVDLA writes any output)."""
    k_pieces = [(k0, min(MAX_DIM, k - k0)) for k0 in range(0, k, MAX_DIM)]
    m_pieces = _row_pieces(m, lambda rows: _row_for(rows, min(k, MAX_DIM), ctx))
    layers: list[MatmulPiece] = []
    for m0, mm, row in m_pieces:
        for n0 in range(0, n, MAX_DIM):
            nn = min(MAX_DIM, n - n0)
            for i, (k0, kk) in enumerate(k_pieces):
                where = _piece(m0, mm, len(m_pieces) > 1, n0, nn, n > MAX_DIM)
                tag = ", ".join(where + ([f"k {k0}:{k0 + kk}"] if len(k_pieces) > 1 else []))
                shape = ConvShape.matmul(mm, kk, nn, row=row)
                # bias and residual ride on the first partial; the activation waits for the last add
                if len(k_pieces) == 1:
                    piece_spec = spec
                else:  # partial sums stay at the layer's precision: the last add converts
                    piece_spec = (
                        dataclasses.replace(spec, relu=False, lut=False, out_precision=None) if i == 0 else SdpSpec()
                    )
                layer = ConvLayer(f"{name}[{tag}]" if tag else name, shape, ctx.precision, piece_spec)
                layers.append(MatmulPiece(layer, m0, n0, k0))
            for i in range(1, len(k_pieces)):
                add = SdpSpec(eltwise=OperandMode.PER_ELEMENT) if ctx.has_ew else SdpSpec(bias=OperandMode.PER_ELEMENT)
                last = i == len(k_pieces) - 1
                add = (
                    dataclasses.replace(add, relu=spec.relu, lut=spec.lut, out_precision=spec.out_precision)
                    if last
                    else add
                )
                tag = ", ".join([*_piece(m0, mm, len(m_pieces) > 1, n0, nn, n > MAX_DIM), f"+ partial {i}"])
                layers += [MatmulPiece(sdp, m0, n0, 0) for sdp in _sdp_passes(f"{name}[{tag}]", mm, nn, ctx, add)]
    return layers


def matmul_layout(m: int, k: int, n: int, ctx: LoweringContext) -> ConvShape:
    """The layout the mapper gives an m x k x n matmul within the register fields: m tokens as rows of
    `_row_for` pixels. One policy for `nvdla map`, `nvdla simulate --op matmul` and the accuracy study."""
    return ConvShape.matmul(m, k, n, row=_row_for(m, k, ctx))


def _row_for(m: int, k: int, ctx: LoweringContext) -> int:
    """Tokens per CBUF row: the largest divisor of m up to 64 whose row of k channels uses at most a quarter
    of the CBUF, so data can be tiled by rows while weights keep most banks."""
    budget = ctx.hw.cbuf_bytes // 4
    fits = [d for d in range(1, min(m, 64) + 1) if m % d == 0 and d * k * ctx.precision.bytes <= budget]
    return max(fits, default=1)


def _piece(m0: int, mm: int, split_rows: bool, n0: int, nn: int, split_cols: bool) -> list[str]:
    """The name parts of one piece of a split op: its rows and its output channels, where split."""
    return [f"rows {m0}:{m0 + mm}"] * split_rows + [f"{n0}:{n0 + nn}"] * split_cols


def _sdp_passes(name: str, m: int, n: int, ctx: LoweringContext, spec: SdpSpec) -> list[SdpLayer]:
    """An m x n SDP pass as W x H x C cubes within the 8192 register limits: one hardware layer each."""
    rows = _row_pieces(m, lambda r: max(d for d in range(1, min(r, 64) + 1) if r % d == 0))
    out = []
    for m0, mm, w in rows:
        for n0 in range(0, n, MAX_DIM):
            nn = min(MAX_DIM, n - n0)
            tag = ", ".join(_piece(m0, mm, len(rows) > 1, n0, nn, n > MAX_DIM))
            out.append(SdpLayer(f"{name}[{tag}]" if tag else name, w, mm // w, nn, ctx.precision, spec))
    return out


CAUSAL_BAND = 64  # queries per band of a causal attention: keys past the band's last query are skipped


def causal_bands(op: Op) -> list[tuple[int, int, int]]:
    """(first query, queries, keys) per band of rows. A causal self-attention (as many queries as keys)
    computes, for each band of CAUSAL_BAND queries, only the keys up to its last query: the tiles above
    the diagonal are fully masked and never run. Anything else is one band of all keys."""
    keys = op.k if op.kind is OpKind.ATTN_CONTEXT else op.n
    if not op.attrs.causal or op.m != keys or op.m <= CAUSAL_BAND:
        return [(0, op.m, keys)]
    return [(r, min(CAUSAL_BAND, op.m - r), min(op.m, r + CAUSAL_BAND)) for r in range(0, op.m, CAUSAL_BAND)]


def _banded(name: str, i: int, n_bands: int) -> str:
    return name if n_bands == 1 else f"{name}.band{i}"


def _hw(op: Op, layer: HwLayer, count: int | None = None, note: str = "") -> Task:
    return Task(
        layer.name, op.name, op.group, resource_of(layer), count or op.count, layer=layer, note=note, block=op.block
    )


def _product(op: Op, piece: MatmulPiece, count: int | None = None, note: str = "", *, row: int = 0) -> Task:
    """A hardware layer of the op's own product (Task.piece), its rows from `row` on (a causal band's)."""
    return dataclasses.replace(_hw(op, piece.layer, count, note), piece=(row + piece.m0, piece.n0, piece.k0))


def _host_task(op: Op, name: str, work: HostWork, *, count: int, note: str) -> Task:
    return Task(name, op.name, "host", Resource.HOST, count, host_work=work, note=note, block=op.block)


def _host(
    op: Op, name: str, ctx: LoweringContext, kind: HostOp, *, note: str, count: int = 1, share: float = 1.0,
    flops_per_element: float | None = None,
) -> Task:  # fmt: skip
    """Host computation of `kind` over the op's elements (`share` of them computed): read and write each
    once."""
    per = op.elements // max(count, 1)
    work = HostWork(kind, per, 2 * per * ctx.precision.bytes, share, flops_per_element)
    return _host_task(op, name, work, count=count, note=note)


def _host_copy(op: Op, name: str, nbytes: float, *, count: int, note: str) -> Task:
    """A host copy of `nbytes` read and written in all (a re-layout, a scatter, a transpose)."""
    return _host_task(op, name, HostWork(HostOp.COPY, 0, nbytes), count=count, note=note)


def _relayout(
    op: Op, name: str, nbytes: int, ctx: LoweringContext, count: int, what: str, *, whole_atoms: bool = True
) -> Task:
    """Copy into CDMA weight format (or another strided layout): the build's copy engine (BDMA) where present
    and the pieces are whole atoms of its (BDMA moves 32-byte atoms), else a host copy (read + write)."""
    copier = ctx.copier
    if copier is not None and whole_atoms:
        layer = copier.copy_layer(name, nbytes)
        return Task(
            name, op.name, op.group, resource_of(layer), count, layer=layer, note=f"{copier.label} re-layout of {what}",
            block=op.block,
        )  # fmt: skip
    why = f"no {copies_phrase()} on this config" if copier is None else "pieces are not whole memory atoms"
    note = f"host re-layout of {what} ({why})"
    return _host_copy(op, name, 2 * nbytes, count=count, note=note)


# ---- per-kind lowerings -----------------------------------------------------------------------------


def _fused_sdp(
    f: Fused, ctx: LoweringContext, *, scale: OperandMode = OperandMode.NONE, weights: bool = True
) -> SdpSpec:
    """SDP pass of a linear layer or convolution: bias, optional scale (folded BN), activation, residual.
    Under a per-channel recipe (MapOptions.requant) the requantization's multipliers are a per-kernel
    stream: X2's (numerics.quant.requant_sdp), or X1's pairs beside the bias without the EW unit."""
    if weights and ctx.options.requant is Granularity.PER_CHANNEL and scale is OperandMode.NONE:
        scale = OperandMode.PER_KERNEL
    residual_mode = OperandMode.NONE
    pairs = False
    if f.residual:
        if ctx.has_ew:
            residual_mode = OperandMode.PER_ELEMENT  # Y's ALU, through E-RDMA's convertor
        else:
            # no EW unit: X1 takes the bias and the multipliers (a folded BN's scale, the requantization) as
            # per-kernel pairs to a step a power of two below the residual's, X2's ALU adds the residual
            # from N-RDMA shifted left (an X operand has a shift, no scale: numerics.quant.residual_sdp);
            # one multiplier for every kernel (a per-tensor recipe) is a register value beside the bias
            scale, pairs = OperandMode.PER_ELEMENT, scale is OperandMode.PER_KERNEL
    lut = f.activation in (OpKind.GELU, OpKind.LUT)
    return SdpSpec(
        bias=OperandMode.PER_KERNEL, bias_pairs=pairs, scale=scale, relu=f.activation is OpKind.RELU, lut=lut,
        eltwise=residual_mode, out_precision=converted_output(ctx.precision, f.out_precision),
    )  # fmt: skip


def converted_output(proc: Precision, want: Precision | None) -> Precision | None:
    """What an SDP processing at `proc` writes when its consumer wants `want` (SDP_OUTPUTS): `want` itself,
    or INT16 on the way to it (conversion_passes adds the second pass); None: no conversion."""
    if want is None or want is proc:
        return None
    return want if want in SDP_OUTPUTS[proc] else Precision.INT16


def conversion_passes(op: Op, rows: int, cols: int, ctx: LoweringContext) -> list[Task]:
    """The SDP passes that finish an op's output conversion where its own SDP cannot reach the wanted
    precision in one step (FP16 -> INT8: the op writes INT16, then an integer pass writes INT8)."""
    want = ctx.fused.get(op.name, Fused()).out_precision
    via = converted_output(ctx.precision, want)
    if via is None or via is want:
        return []
    ctx.hw.check_precision(via)
    passes = _sdp_passes(f"{op.name}.to_{want.value}", rows, cols, ctx.at_precision(via),
                         SdpSpec(out_precision=want))  # fmt: skip
    return [_hw(op, lay, 1, note=f"{via.value} -> {want.value} (SDP's output convertor)") for lay in passes]


def lower_conv(op: Op, ctx: LoweringContext) -> list[Task] | Choice:
    """A convolution as one task of its batch's images (they share each group's kernels: kept across
    images where the search finds it faster), its groups independent instances. The network's input
    (<= 4 channels) can be read as a pixel image (CDMA_IMG, channel extension) or, laid out by the host
    in feature format, as any other layer: both are timed and the faster kept."""
    if op.attrs.image_input:
        modes = (("image input (pixel format)", True), ("feature-format input (direct convolution)", False))
        return Choice(tuple((label, (_conv_task(op, ctx, image),)) for label, image in modes))
    return [_conv_task(op, ctx, False)]


def _conv_task(op: Op, ctx: LoweringContext, image_input: bool) -> Task:
    f = ctx.fused.get(op.name, Fused())
    spec = _fused_sdp(f, ctx, scale=OperandMode.PER_KERNEL if op.attrs.bn else OperandMode.NONE)
    layer = ctx.weighted(
        ConvLayer(
            op.name,
            op.attrs.conv,
            ctx.precision,
            spec,
            pool=f.pool,
            image_input=image_input,
            images=op.count // op.attrs.groups,
        )
    )
    note = f"groups={op.attrs.groups}" if op.attrs.groups > 1 else ""
    stored = _stored_weights(layer) * op.attrs.groups
    task = _hw(op, layer, count=op.attrs.groups, note=note)
    return dataclasses.replace(task, stored_weight_bytes=stored, static_weights=True)


def _data_cube_weights(
    name: str, m: int, k: int, n: int, ctx: LoweringContext, spec: SdpSpec
) -> list[tuple[MatmulPiece, int]]:
    """The pieces of a matmul whose data cube (m x k) is a weight matrix (V^T = W_v^T X^T), with the weight
    bytes each keeps in DRAM: its data cube, counted on the first piece of kernels that reads it."""
    return [
        (p, p.layer.shape.in_w * p.layer.shape.in_h * p.layer.shape.in_c * ctx.precision.bytes
         if isinstance(p.layer, ConvLayer) and p.n0 == 0 else 0)
        for p in matmul_pieces(name, m, k, n, ctx, spec)
    ]  # fmt: skip


def _stored_weights(layer: ConvLayer) -> int:
    """Bytes a layer's kernels occupy in DRAM: compressed where the weight treatment set them, else dense."""
    dense = layer.shape.out_k * bytes_per_kernel(layer)
    return layer.weight_bytes if layer.weight_bytes is not None else dense


def lower_pool(op: Op, ctx: LoweringContext) -> list[Task]:
    w, h, c = op.attrs.input_whc
    return [_hw(op, PdpLayer(op.name, w, h, c, ctx.precision, op.attrs.pool), note="PDP from memory")]


def lower_matmul(op: Op, ctx: LoweringContext) -> list[Task]:
    f = ctx.fused.get(op.name, Fused())
    # a per-channel recipe scales per channel the weights of the layers with a bias (the accuracy study's
    # _NvdlaRun._operands: a bias-free projection keeps one scale, its multiplier a register value)
    spec = _fused_sdp(f, ctx, weights=op.weight_elems > 0 and op.attrs.bias)
    if not op.attrs.bias and spec.bias is OperandMode.PER_KERNEL:  # a projection without bias
        spec = dataclasses.replace(spec, bias=OperandMode.NONE)
    tasks = []
    if op.attrs.feeds_context and value_transposed(ctx):
        # V for P V: computed transposed, V^T = W_v^T X^T (W_v^T as the data cube, X as the kernels), so
        # that V^T lands in feature format with keys as channels and BDMA's 32-byte strided copy puts it
        # in weight format (an element transpose of V is beyond BDMA). X reaches weight format the same
        # way. V's bias moves to PV's per-kernel SDP bias, or V^T's own (_transposed_v_sdp).
        return [
            _relayout(
                op,
                f"{op.name}.x_relayout",
                op.m * op.k * ctx.precision.bytes,
                ctx,
                1,
                "X into weight format (tokens as kernels)",
            ),
            *[
                # W_v^T is this layer's data cube: still the model's weights in DRAM, dense
                dataclasses.replace(
                    _product(op, piece, 1, note="V^T = W_v^T X^T"), stored_weight_bytes=stored, static_weights=True
                )
                for piece, stored in _data_cube_weights(
                    op.name, op.n, op.k, op.m, ctx, _transposed_v_sdp(op, ctx, spec)
                )
            ],
            *conversion_passes(op, op.n, op.m, ctx),
        ]
    if op.attrs.im2col:
        note = "patch extraction (stride > 8 is beyond the conv core's 3-bit stride field)"
        nbytes = 2 * op.m * op.k * ctx.precision.bytes
        tasks.append(_host_copy(op, f"{op.name}.im2col", nbytes, count=1, note=note))
    static = op.weight_elems > 0
    for piece in matmul_pieces(op.name, op.m, op.k, op.n, ctx, spec):
        layer = piece.layer
        if not isinstance(layer, ConvLayer) or not static:  # partial-sum adds; a ones-vector reduction
            tasks.append(_product(op, piece, 1))
            continue
        layer = ctx.weighted(layer)
        stored = _stored_weights(layer) if piece.m0 == 0 else 0  # later row pieces reread these kernels
        task = _product(op, dataclasses.replace(piece, layer=layer), 1)
        tasks.append(dataclasses.replace(task, stored_weight_bytes=stored, static_weights=True))
    return tasks + conversion_passes(op, op.m, op.n, ctx)


def _transposed_v_sdp(op: Op, ctx: LoweringContext, spec: SdpSpec) -> SdpSpec:
    """The SDP of V^T = W_v^T X^T. V's bias is per pixel there: PV adds it (P (V + b) = P V + b, a row of
    the host's softmax summing to 1) where the host normalises; where SDP's LUT softmax does, PV runs on
    the unnormalised exps, so V^T's X1 adds it per element (B-RDMA: the bias broadcast over the tokens, in
    accumulator steps: 16-bit operands, as X1's operand is; numerics.quant._bias_stage)."""
    if op.attrs.bias and ctx.mode("softmax") is Placement.NVDLA:
        return SdpSpec(
            bias=OperandMode.PER_ELEMENT, out_precision=spec.out_precision, operand_precision=Precision.INT16
        )
    return SdpSpec(out_precision=spec.out_precision)


def value_transposed(ctx: LoweringContext) -> bool:
    """Whether V (an op that feeds_context) is computed transposed, V^T = W_v^T X^T: on a build with a copy
    engine to put X and V^T into weight format (lower_matmul)."""
    return ctx.copier is not None


def value_bias_in_context(ctx: LoweringContext) -> bool:
    """Whether PV adds V's bias (V computed transposed, the host normalising: _transposed_v_sdp)."""
    return value_transposed(ctx) and ctx.mode("softmax") is not Placement.NVDLA


def lower_scores(op: Op, ctx: LoweringContext) -> list[Task] | Choice:
    # the causal mask: a per-element operand when SDP's LUT computes the softmax; a host softmax knows
    # the positions and masks as it goes, so the scores need no mask cube at all
    mask = op.attrs.causal and ctx.mode("softmax") is Placement.NVDLA
    extra = OperandMode.PER_ELEMENT if (op.attrs.bias or mask) else OperandMode.NONE
    scale = OperandMode.NONE if op.attrs.scale == 1.0 else OperandMode.REG  # T5: unscaled
    if extra is not OperandMode.NONE and not ctx.has_ew:
        spec = SdpSpec(bias=OperandMode.PER_ELEMENT, scale=scale)
    else:
        spec = SdpSpec(scale=scale, eltwise=extra)
    if op.attrs.cached:  # a decode step reads the K cache, kept in weight format
        per_group = [_hw(op, layer) for layer in matmul_layers(op.name, op.m, op.k, op.n, ctx, spec)]
        return _heads_choice(op, ctx, per_group, spec, scores=True)
    bpe = ctx.precision.bytes
    # one re-layout per K head: grouped-query heads share theirs
    kv_count = op.count // op.attrs.kv_share
    tasks = [_relayout(op, f"{op.name}.k_relayout", op.n * op.k * bpe, ctx, kv_count, "K into weight format")]
    bands = causal_bands(op)
    for i, (first, rows, keys) in enumerate(bands):
        note = "causal: keys past the band's last query skipped" if len(bands) > 1 else ""
        name = _banded(op.name, i, len(bands))
        tasks += [_product(op, p, note=note, row=first) for p in matmul_pieces(name, rows, op.k, keys, ctx, spec)]
    if op.attrs.relative_shift:
        tasks.append(  # one hand-off per layer for all heads (the shift is the same strided re-index)
            _host(
                op,
                f"{op.name}.rel_shift",
                ctx,
                HostOp.COPY,
                count=1,
                note="XLNet relative shift (a strided re-index), all heads at once",
            )
        )
    return tasks


def _heads_choice(op: Op, ctx: LoweringContext, per_group: list[Task], spec: SdpSpec, *, scores: bool) -> Choice:
    """A decode step's attention against the caches, lowered two ways for the mapper to pick from:
    one layer per sequence and K/V group (its query heads as pixels against the group's cached kernels),
    or one layer per sequence with all its heads as pixels against every group's cached kernels at once.
    The second reads each cached key once per sequence in one layer instead of one per group, and pays
    the fixed latencies once; it multiplies by `groups` the MACs (zero blocks of a block-diagonal
    operand) and needs a strided copy: QK^T puts each head's q on its own pixel inside its group's
    channels (a block-diagonal cube, zeroed once: the copy rewrites only the diagonal), PV's output
    keeps each head's block of its own pixel (the diagonal, gathered back into token order)."""
    groups = op.attrs.kv_groups
    if groups == 1:
        return Choice((("per sequence", tuple(per_group)),))
    heads, hd, seqs = op.m * groups, (op.k if scores else op.n), op.count // groups
    piece = hd * (spec.out_precision or ctx.precision).bytes  # the q copied in, or PV's output gathered
    whole = piece % ctx.hw.memory.memory_atomic_bytes == 0
    nbytes = seqs * heads * piece
    label = f"1 layer per sequence ({heads} heads as pixels against all {groups} K/V groups)"
    note = f"heads as pixels, block-diagonal over the {groups} K/V groups"
    if scores:
        copy = _relayout(
            op, f"{op.name}.q_blockdiag", nbytes, ctx, 1, "each head's q onto its pixel in its group's channels",
            whole_atoms=whole,
        )  # fmt: skip
        layers = matmul_layers(op.name, heads, hd * groups, op.n, ctx, spec)
        fused = [copy, *[_hw(op, layer, seqs, note=note) for layer in layers]]
    else:
        layers = matmul_layers(op.name, heads, op.k, hd * groups, ctx, spec)
        gather = _relayout(
            op, f"{op.name}.diag_gather", nbytes, ctx, 1, "each head's block of its own pixel", whole_atoms=whole
        )
        fused = [*[_hw(op, layer, seqs, note=note) for layer in layers], gather]
    return Choice(((f"{groups} layers per sequence (one per K/V group)", tuple(per_group)), (label, tuple(fused))))


def lower_context(op: Op, ctx: LoweringContext) -> list[Task] | Choice:
    # under the KV-precision what-if the output goes back to the model's precision, written by the last
    # SDP pass: the normalisation's when SDP computes the softmax, else PV's own
    out = converted_output(ctx.precision, ctx.fused.get(op.name, Fused()).out_precision)
    sdp_softmax = ctx.mode("softmax") is Placement.NVDLA
    pv_out = None if sdp_softmax else out
    finish = [*_context_normalize(op, ctx, out), *conversion_passes(op, op.m * op.count, op.n, ctx)]
    if op.attrs.cached:  # V^T cache in weight format; the softmax's normalisation follows the gather
        spec = SdpSpec(out_precision=pv_out)
        per_group = [_hw(op, layer) for layer in matmul_layers(op.name, op.m, op.k, op.n, ctx, spec)]
        choice = _heads_choice(op, ctx, per_group, spec, scores=False)
        return Choice(tuple((label, (*tasks, *finish)) for label, tasks in choice.options))
    bpe = ctx.precision.bytes
    copier = ctx.copier
    strided = f" ({copier.copy_atom_bytes}-byte strided copy of the transposed projection)" if copier else ""
    what = "V^T into weight format" + strided
    kv_count = op.count // op.attrs.kv_share
    tasks = [_relayout(op, f"{op.name}.v_relayout", op.k * op.n * bpe, ctx, kv_count, what)]
    # V's bias, moved here where V is computed transposed and the host normalises (_transposed_v_sdp)
    bias = OperandMode.PER_KERNEL if value_bias_in_context(ctx) and op.attrs.value_bias else OperandMode.NONE
    spec = SdpSpec(bias=bias, out_precision=pv_out)
    bands = causal_bands(op)
    for i, (first, rows, keys) in enumerate(bands):
        name = _banded(op.name, i, len(bands))
        tasks += [_product(op, p, row=first) for p in matmul_pieces(name, rows, keys, op.n, ctx, spec)]
    return tasks + finish


def _context_normalize(op: Op, ctx: LoweringContext, out: Precision | None = None) -> list[Task]:
    """The softmax's 1/sum applied to PV's output rows (SDP softmax only; a host softmax normalises),
    written at `out` (a conversion) or the layer's precision."""
    tasks: list[Task] = []
    if ctx.mode("softmax") is Placement.NVDLA:
        # SDP operands are per layer, per channel or per element, never per pixel: 1/sum [m, 1] is
        # broadcast to [m, n] by a 1x1 conv with one input channel and n all-ones kernels
        # like the softmax steps, one layer over the rows of all instances (per-row work)
        c = op.count
        tasks += [
            _hw(op, layer, 1, note="broadcast 1/sum over the row (ones kernels)")
            for layer in matmul_layers(f"{op.name}.broadcast", op.m * c, 1, op.n, ctx, SdpSpec())
        ]
        norm = SdpSpec(eltwise=OperandMode.PER_ELEMENT, out_precision=out)
        tasks += [
            _hw(op, lay, 1, note="softmax 1/sum")
            for lay in _sdp_passes(f"{op.name}.normalize", op.m * c, op.n, ctx, norm)
        ]
    return tasks


def lower_softmax(op: Op, ctx: LoweringContext) -> list[Task]:
    bands = causal_bands(op)
    if ctx.mode("softmax") is Placement.HOST:
        computed = sum(rows * keys for _, rows, keys in bands) / (op.m * op.n)  # only the unmasked scores
        # per instance (head, window, sequence); the host takes all ready instances at each hand-off
        return [
            _host(
                op,
                op.name,
                ctx,
                HostOp.SOFTMAX,
                share=computed,
                count=op.count,
                note="softmax on host" + ("" if ctx.has_lut else f" ({ctx.hw.name} has no SDP LUT)"),
            )
        ]
    # Every head's (and window's, sequence's) scores are rows of one cube (QK^T writes each instance at
    # its own pixel offset), and the softmax steps are per row: each runs as one layer over all instances.
    c = op.count
    tasks = []
    for i, (_, rows, keys) in enumerate(bands):
        name = _banded(op.name, i, len(bands))
        tasks += [
            _hw(op, lay, 1, note="exp via SDP LUT over all instances (no row-max subtraction: measured inaccurate)")
            for lay in _sdp_passes(f"{name}.exp", rows * c, keys, ctx, SdpSpec(lut=True))
        ]
        tasks += [_hw(op, layer, 1) for layer in matmul_layers(f"{name}.rowsum", rows * c, keys, 1, ctx, SdpSpec())]
    tasks += [
        _hw(op, lay, 1, note="1/sum via SDP LUT")
        for lay in _sdp_passes(f"{op.name}.recip", op.m * c, 1, ctx, SdpSpec(lut=True))
    ]
    return tasks


def lower_layernorm(op: Op, ctx: LoweringContext) -> list[Task]:
    """LayerNorm (RMSNorm) on NVDLA as numerics.layernorm_steps computes it, every step a hardware layer:
    the row sums (a ones kernel) writing -mean at INT16, its broadcast over the row (ones kernels, INT16),
    the centring pass (X1 x 2**7, X2 adds -mean from N-RDMA) writing d at INT16, d squared (X1's
    multiplier, B-RDMA reading d again) at INT16, the squares' sums (a ones kernel at INT16) with n eps
    added and rsqrt looked up in its SDP writing rstd at INT16, rstd's broadcast (INT16), and the
    normalisation: X1 multiplies d by rstd per element (B-RDMA), Y takes gamma and beta per channel
    (E-RDMA pairs), written at the layer's precision. RMSNorm squares x itself and normalises x: rstd an
    INT16 operand of INT8 data, gamma X2's per channel, no Y. INT8 layers only: the statistics of INT16
    data would not fit INT16 (LoweringContext.mode puts them on the host)."""
    if ctx.mode("layernorm") is Placement.HOST:
        return [_host(op, op.name, ctx, HostOp.LAYERNORM, note="layernorm on host")]
    i16 = Precision.INT16
    wide = ctx.at_precision(i16)  # the statistics' layers: INT16 data and kernels
    m, n = op.m, op.n
    tasks: list[Task] = []

    def conv(step: str, k: int, out: int, c: LoweringContext, spec: SdpSpec, note: str) -> None:
        tasks.extend(_hw(op, lay, note=note) for lay in matmul_layers(f"{op.name}.{step}", m, k, out, c, spec))

    def sdp(step: str, c: LoweringContext, spec: SdpSpec, note: str) -> None:
        tasks.extend(_hw(op, lay, note=note) for lay in _sdp_passes(f"{op.name}.{step}", m, n, c, spec))

    per_element = OperandMode.PER_ELEMENT
    if op.attrs.rms:
        sdp("square", ctx, SdpSpec(bias=per_element, out_precision=i16), "x squared (X1, B-RDMA: x), INT16")
        # X1 multiplies x by rstd (INT16 operands of INT8 data), X2 by gamma per channel
        norm = SdpSpec(bias=per_element, scale=OperandMode.PER_KERNEL, operand_precision=i16)
        data = ctx
    else:
        conv("sum", n, 1, ctx, SdpSpec(out_precision=i16), "row sums (a ones kernel), -mean at INT16")
        conv("broadcast_mean", 1, n, wide, SdpSpec(), "-mean over the row (ones kernels)")
        centre = SdpSpec(bias=OperandMode.REG, scale=per_element, out_precision=i16, operand_precision=i16)
        sdp("centre", ctx, centre, "d = 2**7 (x - mean) (X1 x 2**7, X2 adds -mean from N-RDMA), INT16")
        sdp("square", wide, SdpSpec(bias=per_element), "d squared (X1, B-RDMA: d), INT16")
        # X1 multiplies d by rstd; Y takes gamma and beta per channel, (ALU, MUL) pairs from E-RDMA
        norm = SdpSpec(
            bias=per_element, eltwise=OperandMode.PER_KERNEL, eltwise_pairs=True, out_precision=ctx.precision
        )
        data = wide
    conv("rsqrt", n, 1, wide, SdpSpec(bias=OperandMode.REG, lut=True), "sums of squares + n eps, rsqrt via LUT, INT16")
    conv("broadcast_rstd", 1, n, wide, SdpSpec(), "rstd over the row (ones kernels)")
    sdp("normalize", data, norm, "x rstd (X1, B-RDMA), gamma (and beta) per channel")
    return tasks


def lower_elementwise(op: Op, ctx: LoweringContext) -> list[Task]:
    if op.kind in (OpKind.GELU, OpKind.LUT):
        if not ctx.has_lut:
            what = "GELU" if op.kind is OpKind.GELU else op.attrs.func
            return [_host(op, op.name, ctx, HostOp.ACTIVATION, note=f"{what} on host ({ctx.hw.name} has no SDP LUT)")]
        spec = SdpSpec(lut=True)
    elif op.kind is OpKind.RELU:
        spec = SdpSpec(relu=True)
    elif op.kind is OpKind.SCALE:
        spec = SdpSpec(scale=OperandMode.REG)
    elif op.kind is OpKind.MUL:
        if not ctx.has_ew:
            return [_host(op, op.name, ctx, HostOp.ELEMENTWISE, note="elementwise multiply on host (no SDP EW)")]
        spec = SdpSpec(eltwise=OperandMode.PER_ELEMENT)
    else:  # ADD
        # without EW: X2's ALU adds the operand after X1's multiplier (a register) took the input to a step a
        # power of two below the operand's, as a fused residual add does (numerics.quant.residual_sdp)
        spec = SdpSpec(eltwise=OperandMode.PER_ELEMENT) if ctx.has_ew else SdpSpec(scale=OperandMode.PER_ELEMENT)
    return [_hw(op, lay) for lay in _sdp_passes(op.name, op.m, op.n, ctx, spec)]


def lower_rotary(op: Op, ctx: LoweringContext) -> list[Task]:
    """x cos + rotate_half(x) sin per head. rotate_half swaps each head's two halves (the sign folds into
    the sin table): whole memory atoms when head_dim / 2 fills atoms, so a BDMA copy (the host without
    BDMA); then two SDP passes with per-element cos / sin operands (X stages from B/N-RDMA)."""
    hd = op.attrs.head_dim
    atom = ctx.hw.memory.memory_atomic_bytes // ctx.precision.bytes
    want = ctx.fused.get(op.name, Fused()).out_precision
    if (hd // 2) % atom:
        note = f"rotary on host (head_dim/2 = {hd // 2} is not whole atoms)"
        if want is None:
            return [_host(op, op.name, ctx, HostOp.ROTARY, note=note)]
        # the host reads the model's precision and writes the caches' (it converts as it goes)
        work = HostWork(HostOp.ROTARY, op.elements, op.elements * (ctx.precision.bytes + want.bytes))
        return [_host_task(op, op.name, work, count=1, note=f"{note}, to {want.value}")]
    swap = _relayout(op, f"{op.name}.rotate_half", op.elements * ctx.precision.bytes, ctx, 1, "rotate_half (atoms)")
    sin = _sdp_passes(f"{op.name}.sin", op.m, op.n, ctx, SdpSpec(scale=OperandMode.PER_ELEMENT))
    cos_add = SdpSpec(
        bias=OperandMode.PER_ELEMENT, scale=OperandMode.PER_ELEMENT, out_precision=converted_output(ctx.precision, want)
    )
    cos = _sdp_passes(f"{op.name}.cos_add", op.m, op.n, ctx, cos_add)
    return [
        swap, *[_hw(op, lay) for lay in sin], *[_hw(op, lay, note="x cos + rotate_half(x) sin") for lay in cos],
        *conversion_passes(op, op.m, op.n, ctx),
    ]  # fmt: skip


def lower_gather(op: Op, ctx: LoweringContext) -> list[Task]:
    return [_host(op, op.name, ctx, HostOp.GATHER, note="embedding lookup on host")]


def lower_layout(op: Op, ctx: LoweringContext) -> list[Task]:
    if op.kind is OpKind.RESHAPE:
        return []  # a view: strides change, no data moves
    nbytes = op.elements * ctx.precision.bytes
    relayout = op.attrs.relayout
    if relayout is Relayout.K_APPEND:  # one kernel more in the weight-format K cache: whole atoms
        return [_relayout(op, op.name, nbytes, ctx, 1, "the new K into the weight-format cache")]
    if relayout is Relayout.V_CACHE:  # V into the V^T cache at once (T5's prefill): an element transpose
        return [_host_copy(op, op.name, 2 * nbytes, count=1, note="V^T cache fill: an element transpose")]
    if relayout is Relayout.V_APPEND:  # keys are the channels of the cached V^T: an element scatter
        note = "V^T cache append: an element scatter (keys are channels of the cached V^T)"
        return [_host_copy(op, op.name, 2 * nbytes, count=1, note=note)]
    if relayout is Relayout.ROLL:  # whole pixels move (all channels of an atom together): a BDMA copy
        return [_relayout(op, op.name, op.elements * ctx.precision.bytes, ctx, 1, "cyclic shift of the window grid")]
    return [_relayout(op, op.name, op.elements * ctx.precision.bytes, ctx, 1, "a transposed tensor")]


def lower_host(op: Op, ctx: LoweringContext) -> list[Task]:
    return [
        _host(
            op,
            op.name,
            ctx,
            HostOp.FALLBACK,
            flops_per_element=op.attrs.flops_per_elem,
            note=op.attrs.note or f"unsupported op {op.attrs.op_type or '?'} on host (fallback requested)",
        )
    ]


LOWERINGS: dict[OpKind, Callable[[Op, LoweringContext], list[Task] | Choice]] = {
    OpKind.MATMUL: lower_matmul,
    OpKind.CONV: lower_conv,
    OpKind.POOL: lower_pool,
    OpKind.ATTN_SCORES: lower_scores,
    OpKind.ATTN_CONTEXT: lower_context,
    OpKind.SOFTMAX: lower_softmax,
    OpKind.LAYERNORM: lower_layernorm,
    OpKind.GELU: lower_elementwise,
    OpKind.LUT: lower_elementwise,
    OpKind.RELU: lower_elementwise,
    OpKind.ADD: lower_elementwise,
    OpKind.MUL: lower_elementwise,
    OpKind.SCALE: lower_elementwise,
    OpKind.GATHER: lower_gather,
    OpKind.ROTARY: lower_rotary,
    OpKind.TRANSPOSE: lower_layout,
    OpKind.RESHAPE: lower_layout,
    OpKind.HOST: lower_host,
}


def lower(op: Op, ctx: LoweringContext) -> list[Task] | Choice:
    try:
        fn = LOWERINGS[op.kind]
    except KeyError:
        raise NvdlaError(
            f"no lowering for op kind {op.kind.value}; known: {', '.join(k.value for k in LOWERINGS)}"
        ) from None
    return fn(op, ctx)
