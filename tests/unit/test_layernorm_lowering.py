"""LayerNorm lowered as the steps numerics.layernorm_steps computes (rules.lower_layernorm), timed with the
operand streams those steps read, and emitted as register programs with the numbers they compute."""

from __future__ import annotations

import dataclasses

import pytest

from nvdla_mapper.export.layer_programs import layernorm_programs
from nvdla_mapper.lowering.rules import LoweringContext, lower_layernorm
from nvdla_mapper.numerics import layernorm_steps as norm
from nvdla_mapper.workload import Op, OpKind
from nvdla_sim import Precision, load_config
from nvdla_sim.errors import NvdlaError, TraceError
from nvdla_sim.layers import ConvLayer, OperandMode, SdpLayer, SdpSpec
from nvdla_sim.units import sdp

I8, I16 = Precision.INT8, Precision.INT16


def _tasks(
    hw: str, *, rms: bool = False, precision: Precision = I8, layernorm: str = "nvdla", m: int = 64, n: int = 128
):
    op = Op("ln", OpKind.LAYERNORM, m, n, group="layernorm", attrs={"rms": rms})
    ctx = LoweringContext.of(hw=load_config(hw), precision=precision, layernorm=layernorm)
    return lower_layernorm(op, ctx)


def test_layernorm_steps_and_their_precisions_on_nv_full():
    """Seven hardware layers in the order of the steps; the statistics at INT16 (-mean and d written at
    INT16 from INT8 data, the squares, rstd and the broadcasts read and written at INT16); the
    normalisation reads d and rstd at INT16 and writes the layer's INT8."""
    tasks = _tasks("nv_full")
    assert [t.name for t in tasks] == [f"ln.{s}" for s in norm.LAYERNORM_STEPS]
    layers = {t.name.split(".")[1]: t.layer for t in tasks}
    read = {s: lay.precision for s, lay in layers.items()}
    written = {s: lay.sdp.out_precision or lay.precision for s, lay in layers.items()}
    assert read == {"sum": I8, "broadcast_mean": I16, "centre": I8, "square": I16, "rsqrt": I16,
                    "broadcast_rstd": I16, "normalize": I16}  # fmt: skip
    assert written == {**{s: I16 for s in read}, "normalize": I8}
    assert isinstance(layers["sum"], ConvLayer) and layers["sum"].shape.out_k == 1
    assert isinstance(layers["broadcast_mean"], ConvLayer) and layers["broadcast_mean"].shape.in_c == 1
    assert isinstance(layers["centre"], SdpLayer) and layers["centre"].sdp.operand_precision is I16
    # the centring and the squares use the X stages only (16 elements a cycle on nv_full, Y 4)
    assert not layers["centre"].sdp.uses_y and not layers["square"].sdp.uses_y
    assert layers["rsqrt"].sdp.lut and layers["normalize"].sdp.eltwise_pairs


def test_rmsnorm_steps():
    tasks = _tasks("nv_full", rms=True)
    assert [t.name for t in tasks] == [f"ln.{s}" for s in norm.RMSNORM_STEPS]
    square, normalize = tasks[0].layer, tasks[-1].layer
    assert square.precision is I8 and square.sdp.out_precision is I16
    # rstd (INT16) multiplies INT8 x; gamma is X2's per channel: no Y stage
    assert normalize.precision is I8 and normalize.sdp.operand_precision is I16 and not normalize.sdp.uses_y


@pytest.mark.parametrize("hw", ["nv_full", "nv_large", "nv_small_256_full_rtl_tb", "nv_small"])
def test_the_mappers_choice_is_the_host_on_every_build(hw):
    """Not every step runs on NVDLA v1 (SDP has no INT16-to-INT8 output: the normalisation hangs nv_full's
    RTL), so `--layernorm auto` puts LayerNorm on the host; the steps are the `--layernorm nvdla` what-if."""
    (task,) = _tasks(hw, layernorm="auto")
    assert task.layer is None and "host" in task.note


def test_int16_layers_run_layernorm_on_the_host():
    (task,) = _tasks("nv_full", precision=I16, layernorm="auto")
    assert task.layer is None


@pytest.mark.parametrize(
    ("hw", "precision", "what"),
    [("nv_large", I8, "nv_large has no int16 datapath"), ("nv_full", I16, "int16 layers")],
)
def test_asking_for_nvdla_where_it_cannot_run_is_a_one_line_error(hw, precision, what):
    with pytest.raises(NvdlaError, match=what) as e:
        _tasks(hw, precision=precision, layernorm="nvdla")
    assert "\n" not in str(e.value) and "--layernorm host" in str(e.value)


def test_operand_streams_of_another_size_by_hand():
    """The centring pass over 64 x 128 INT8 values reads -mean per element at INT16: 64 x 128 x 2 = 16,384
    operand bytes (8,192 if they were the data's size); gamma and beta as (ALU, MUL) pairs are 4 bytes a
    channel (512 for 128), not 2."""
    centre = SdpSpec(bias=OperandMode.REG, scale=OperandMode.PER_ELEMENT, out_precision=I16, operand_precision=I16)
    assert sdp.operand_read_bytes(centre, pixels=64, channels=128, operand_bytes=1) == 16384
    plain = dataclasses.replace(centre, operand_precision=None)
    assert sdp.operand_read_bytes(plain, pixels=64, channels=128, operand_bytes=1) == 8192
    pairs = SdpSpec(eltwise=OperandMode.PER_KERNEL, eltwise_pairs=True)
    assert sdp.operand_read_bytes(pairs, pixels=64, channels=128, operand_bytes=2) == 512
    assert sdp.operand_read_bytes(dataclasses.replace(pairs, eltwise_pairs=False), pixels=64, channels=128,
                                  operand_bytes=2) == 256  # fmt: skip


@pytest.mark.parametrize("rms", [False, True])
def test_programs_compute_the_layernorm_and_time_as_the_mapper_costs_them(rms):
    """Each step's program carries the numbers of one seeded LayerNorm (it is checked, when made, against
    the integer arithmetic of numerics.layernorm_steps and run through the bit-exact model); read back
    from its registers, each is timed as the mapper costs its layer (the decoded SDP spec: operand sizes,
    pairs)."""
    from nvdla_mapper.passes import layer_cycles
    from nvdla_sim.processors.sdp.registers import sdp_spec

    hw = load_config("nv_full")
    tasks = _tasks("nv_full", rms=rms, m=32, n=96)
    layers = {t.name.split(".")[1]: (t.layer, None) for t in tasks}
    progs = layernorm_programs("ln", layers, hw, rms=rms, seed=5)
    assert list(progs) == list(norm.RMSNORM_STEPS if rms else norm.LAYERNORM_STEPS)
    if not rms:  # the normalisation over INT16 d writes INT8: SDP has no such mode (nv_full's RTL hangs on it)
        assert isinstance(progs.pop("normalize"), TraceError)
    for step, lp in progs.items():
        layer = layers[step][0]
        spec = sdp_spec(lp.op.sdp if isinstance(layer, ConvLayer) else lp.op)
        assert spec.operand_precision == layer.sdp.operand_precision, step
        assert spec.eltwise_pairs == layer.sdp.eltwise_pairs, step
        assert lp.model_cycles == layer_cycles(layer, hw, None, 1)[1], step


def test_programs_refuse_other_steps():
    hw = load_config("nv_full")
    tasks = _tasks("nv_full")[:-1]
    with pytest.raises(TraceError, match="layernorm steps"):
        layernorm_programs("ln", {t.name.split(".")[1]: (t.layer, None) for t in tasks}, hw, rms=False, seed=1)


def test_layernorm_programs_rows_are_seeded():
    """The same seed makes the same programs (the suites' CRCs are stable), another seed other data."""
    hw = load_config("nv_full")
    layers = {t.name.split(".")[1]: (t.layer, None) for t in _tasks("nv_full", m=16, n=64)}
    a, b = (layernorm_programs("ln", layers, hw, rms=False, seed=s) for s in (3, 3))
    c = layernorm_programs("ln", layers, hw, rms=False, seed=4)
    crcs = [[x.program.expected for x in p.values() if not isinstance(x, TraceError)] for p in (a, b, c)]
    assert crcs[0] == crcs[1] != crcs[2] and len(crcs[0]) == 6


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["accuracy", "vit_digits", "--hw", "nv_large_rtl_tb", "--layernorm", "nvdla"], "no int16 datapath"),
        (["accuracy", "char_gpt", "--hw", "nv_full", "--smooth", "0.5", "--layernorm", "nvdla"], "SmoothQuant or QAT"),
        (["map", "bert-base", "--hw", "nv_large", "--layernorm", "nvdla"], "no int16 datapath"),
    ],
)
def test_the_cli_names_why_layernorm_cannot_run_on_nvdla(argv, what, capsys):
    from nvdla_cli.main import main

    assert main([*argv, "--samples", "2"] if argv[0] == "accuracy" else argv) != 0
    err = capsys.readouterr().err.strip()
    assert what in err and "--layernorm host" in err and len(err.splitlines()) == 1
