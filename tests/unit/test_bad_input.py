"""Bad input gets a one-line NvdlaError naming the file or field, never a traceback from deep inside."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import build_graph, preset
from nvdla_sim.config import load_config_file
from nvdla_sim.errors import NvdlaError

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
HF_KEYS = ["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "n_embd",
           "n_layer", "n_head", "d_model", "num_layers", "num_heads", "d_ff", "embed_dim", "depths", "mlp_ratio",
           "image_size", "patch_size", "window_size", "vocab_size", "max_position_embeddings", "attention_window",
           "num_key_value_heads", "head_dim", "attention_bias"]  # fmt: skip


def _one_line(e: Exception, name: str) -> None:
    msg = str(e)
    assert "\n" not in msg and name in msg, msg


@SETTINGS
@given(data=st.binary(max_size=200))
def test_random_bytes_as_a_hw_config(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("cfg") / "x.toml"
    p.write_bytes(data)
    try:
        load_config_file(p)
    except NvdlaError as e:
        _one_line(e, str(p))


@SETTINGS
@given(doc=json_values)
def test_random_json_as_a_hf_config(tmp_path_factory, doc):
    p = tmp_path_factory.mktemp("hf") / "config.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(NvdlaError) as e:
        from_hf_config(p)
    _one_line(e.value, str(p))


@SETTINGS
@given(
    mt=st.sampled_from(["bert", "roberta", "gpt2", "t5", "vit", "swin", "longformer", "xlnet", "llama", "qwen2"]),
    fields=st.dictionaries(st.sampled_from(HF_KEYS), json_values, max_size=8),
)
def test_random_fields_of_a_supported_model_type(tmp_path_factory, mt, fields):
    """Any field values: a spec that builds, or a named error (never a TypeError/ValueError/KeyError)."""
    p = tmp_path_factory.mktemp("hf") / "config.json"
    p.write_text(json.dumps({**fields, "model_type": mt}))
    try:
        spec = from_hf_config(p)
    except NvdlaError as e:
        _one_line(e, str(p))
        return
    build_graph(spec, seq=None if spec.image_tokens else min(64, spec.max_positions or 64), extend_positions=True)


def test_the_four_inputs_of_issue_15(tmp_path):
    binary = tmp_path / "x.toml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(NvdlaError, match="not a text file"):
        load_config_file(binary)
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"model_type": "bert", "hidden_size": "big", "num_hidden_layers": 2,
                                 "num_attention_heads": 2}))  # fmt: skip
    with pytest.raises(NvdlaError, match="field 'hidden_size' must be an integer, not 'big'"):
        from_hf_config(typed)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(NvdlaError, match="holds a JSON object of fields, not a list"):
        from_hf_config(listed)
    with pytest.raises(NvdlaError, match="--seq 513: bert-base has 512 learned positions"):
        build_graph(preset("bert-base"), seq=513)
    assert build_graph(preset("bert-base"), seq=513, extend_positions=True).number_of_nodes() > 100
    assert build_graph(preset("t5-base"), seq=4096).number_of_nodes() > 100  # relative positions: no limit


def test_report_into_an_existing_file(tmp_path, capsys):
    from nvdla_cli.main import main

    f = tmp_path / "file"
    f.write_text("")
    assert main(["map", "bert-base", "--seq", "16", "--report", str(f)]) == 2
    assert f"--report {f}: it is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model_type": "bert", "num_hidden_layers": 10**7}, "10,000,000 transformer blocks"),
        ({"model_type": "t5", "num_layers": 600}, "1,200 transformer blocks"),
        ({"model_type": "swin", "depths": [2000], "num_heads": [3]}, "2,000 transformer blocks"),
        ({"model_type": "longformer", "attention_window": 1}, "attention_window 1 must be an even number >= 2"),
        ({"model_type": "vit", "image_size": 10**6, "patch_size": 1}, "image_size 1000000 is past the convolution"),
    ],
)
def test_configs_the_mapper_cannot_build_are_refused_up_front(tmp_path, fields, message):
    """Found by the random-fields test above: ten million layers built a graph until the OOM killer stopped
    the worker (24 GB); a window of 1 divided by zero deep in the attention lowering."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps(fields))
    with pytest.raises(NvdlaError, match=re.escape(message)) as e:
        from_hf_config(p)
    _one_line(e.value, str(p))


def test_one_integer_check_says_the_range():
    from nvdla_sim.errors import ShapeError, check_int

    assert check_int(3, "--batch") == 3
    for value, kw, message in [
        (0, {}, "--batch must be a positive integer, not 0"),
        (True, {}, "--batch must be a positive integer, not True"),
        ("4", {}, "--batch must be a positive integer, not '4'"),
        (1, {"minimum": 2}, "--batch must be an integer >= 2, not 1"),
        (
            9000,
            {"maximum": 8192, "why": " (13-bit register field)"},
            "--batch must be an integer in 1..8192 (13-bit register field), not 9000",
        ),
    ]:
        with pytest.raises(NvdlaError, match=f"^{re.escape(message)}$"):
            check_int(value, "--batch", **kw)
    with pytest.raises(ShapeError):
        check_int(0, "w", error=ShapeError)
