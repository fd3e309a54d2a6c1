"""Any model source by name or path -> a workload graph: transformer and CNN presets, a Hugging Face
config.json (or the folder holding it), an .onnx file. The one entry the CLI, sweeps and studies use."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import DEFAULT_SEQ, PRESETS, ModelSpec, build_graph
from nvdla_sim.errors import NvdlaError, check_int


def resolve_model(name_or_path: str) -> ModelSpec | Path:
    """A preset name, a config.json path (-> ModelSpec), or an .onnx path (returned as Path)."""
    p = Path(name_or_path)
    if p.suffix == ".onnx":
        if not p.exists():
            raise NvdlaError(f"{p}: ONNX file not found")
        return p
    if p.suffix == ".json":
        return from_hf_config(p)
    if name_or_path in PRESETS:  # a preset name never resolves to a folder of that name
        return PRESETS[name_or_path]
    if "/" in name_or_path or "\\" in name_or_path:  # a path to a Hugging Face model folder
        if p.is_file():
            raise NvdlaError(
                f"{p}: not a model (a preset name, a config.json, an .onnx file or a folder with config.json)"
            )
        if not p.is_dir():
            raise NvdlaError(f"{p}: no such folder (a model folder holds config.json)")
        return from_hf_config(p / "config.json")
    if name_or_path in CNN_PRESETS:  # reached by the commands that take transformers only
        raise NvdlaError(f"{name_or_path} is a CNN; this command takes a transformer preset or a config.json")
    names = ", ".join([*PRESETS, *CNN_PRESETS])
    raise NvdlaError(f"unknown model {name_or_path!r}; presets: {names} (or a config.json / .onnx path)")


def model_graph(
    name_or_path: str,
    *,
    batch: int = 1,
    seq: int | None = None,
    dec_seq: int | None = None,
    host_fallback: bool = False,
    extend_positions: bool = False,
    head: str = "auto",
) -> nx.DiGraph:
    """Workload graph of any model source: a CNN or transformer preset, a config.json, or an .onnx file.
    `seq` None takes the model's own (DEFAULT_SEQ for text models; a vision model's image tokens); a CNN
    has no sequence, and a `seq` for one is refused."""
    if dec_seq is not None:
        check_int(dec_seq, "--dec-seq")
    if name_or_path in CNN_PRESETS:
        if seq is not None:
            raise NvdlaError(f"--seq {seq}: {name_or_path} is a CNN; its input is an image, with no sequence")
        if dec_seq is not None:
            raise NvdlaError(f"--dec-seq {dec_seq}: {name_or_path} is a CNN; it has no decoder")
        if head != "auto":
            raise NvdlaError(f"--head {head}: {name_or_path} is a CNN; --head chooses a transformer's head")
        if host_fallback:
            raise NvdlaError("--host-fallback runs an ONNX graph's unsupported ops on the host; give an .onnx file")
        return CNN_PRESETS[name_or_path](batch)
    src = resolve_model(name_or_path)
    if host_fallback and not isinstance(src, Path):
        raise NvdlaError("--host-fallback runs an ONNX graph's unsupported ops on the host; give an .onnx file")
    if head != "auto" and isinstance(src, Path):
        raise NvdlaError(f"--head {head}: an ONNX graph has the head it was exported with")
    if dec_seq is not None and (isinstance(src, Path) or not src.decoder_layers):
        raise NvdlaError(
            f"--dec-seq {dec_seq}: {name_or_path} has no separate decoder (an encoder-decoder such as t5-base "
            "does); its sequence is --seq"
        )
    if isinstance(src, Path):
        # onnx and onnx_ir take two seconds to import: only a run that reads an .onnx file pays them
        from nvdla_mapper.frontends.onnx_import import graph_from_onnx

        return graph_from_onnx(src, batch=batch, seq=DEFAULT_SEQ if seq is None else seq, host_fallback=host_fallback)
    return build_graph(src, batch=batch, seq=seq, dec_seq=dec_seq, extend_positions=extend_positions, head=head)


def fixed_sequence(name_or_path: str) -> int | None:
    """The tokens a model runs whatever --seq says (0 for a CNN, the image tokens of a vision model), or
    None for a model that takes a sequence length."""
    if name_or_path in CNN_PRESETS:
        return 0
    src = resolve_model(name_or_path)
    return src.image_tokens or None if isinstance(src, ModelSpec) else None
