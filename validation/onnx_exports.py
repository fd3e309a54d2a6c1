"""Export small but real Hugging Face transformers to ONNX with both torch exporters (issue 19).

    python -m nvdla_validation.onnx_exports [--out validation/data/onnx] [--only NAME ...]

Exporters: `torchscript` (opset 17), `dynamo` (opset 18), and for BERT, GPT-2 and T5's encoder
`dynamo23` (opset 23, where attention is ONNX's own Attention op).
Needs the optional extra `export` (torch, transformers; a CPU torch wheel is enough). CI never runs
this: it commits what it wrote, `<model>_<exporter>.onnx` (weights inline, each under 1 MB), the
model's `config.json` as `<model>.config.json` (the same architecture through the config path), and
`versions.json` with the library versions and the command. Models have random weights from a fixed
seed, 2 layers, hidden 64; inputs are `input_ids` (batch, seq), with `attention_mask` for the *_masked
models, or `pixel_values` (batch, 3, H, W); batch and seq are dynamic. A model an exporter cannot export is recorded in
versions.json with the exporter's one-line error, not left out silently.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).parent / "data" / "onnx"
EXPORTERS = ("torchscript", "dynamo")
# the dynamo exporter at opset 23 writes scaled_dot_product_attention as ONNX's own Attention op
OPSET23 = ("bert", "gpt2", "t5_encoder")
SEQ = 64  # the example input's sequence length (dynamic axes keep it free)


def _models():
    """name -> (model, input names, example tensors, config). The *_masked models take the padding
    mask too (attention_mask), as most exported encoders and decoders do."""
    import torch
    import transformers as tf

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
    bert = tf.BertConfig(vocab_size=128, max_position_embeddings=128, num_labels=2, **small)
    gpt2 = tf.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=2, n_inner=256, n_positions=128)
    t5 = tf.T5Config(vocab_size=128, d_model=64, d_kv=32, d_ff=256, num_layers=2, num_heads=2)
    vit = tf.ViTConfig(image_size=64, patch_size=8, num_channels=3, num_labels=10, **small)
    ids = (torch.randint(0, 128, (1, SEQ)),)
    masked = (*ids, torch.ones(1, SEQ, dtype=torch.long))
    text, text_mask = ("input_ids",), ("input_ids", "attention_mask")
    return {
        "bert": (tf.BertForSequenceClassification(bert), text, ids, bert),
        "bert_masked": (tf.BertForSequenceClassification(bert), text_mask, masked, bert),
        "gpt2": (tf.GPT2LMHeadModel(gpt2), text, ids, gpt2),
        "gpt2_masked": (tf.GPT2LMHeadModel(gpt2), text_mask, masked, gpt2),
        "t5_encoder": (tf.T5EncoderModel(t5), text, ids, t5),
        "vit": (tf.ViTForImageClassification(vit), ("pixel_values",), (torch.randn(1, 3, 64, 64),), vit),
    }


def export_full_gpt2(out_dir: Path) -> Path:
    """GPT-2 small at full size (12 layers, hidden 768, the Hugging Face default config, random weights)
    with the dynamo exporter, weights in an external-data file: about 0.5 GB, never committed."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gpt2_12layer_dynamo.onnx"
    _export(tf.GPT2LMHeadModel(cfg), ("input_ids",), (torch.randint(0, 1000, (1, SEQ)),), path, "dynamo",
            external_data=True)  # fmt: skip
    cfg_json = {**cfg.to_dict(), "architectures": ["GPT2LMHeadModel"]}
    (out_dir / "gpt2_12layer.config.json").write_text(json.dumps(cfg_json, indent=1) + "\n")
    return path


def _wrapped(model, input_names: tuple[str, ...]):
    """The model called with its inputs only, returning the first output tensor (logits or hidden
    states): exporters trace keyword arguments such as use_cache poorly."""
    import torch

    class Only(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *xs):
            out = self.model(**dict(zip(input_names, xs, strict=True)), return_dict=True)
            return out[0]

    return Only().eval()


def _export(model, names: tuple[str, ...], example: tuple, path: Path, exporter: str, *, external_data=False) -> int:
    """Export with one of the two torch exporters; batch and sequence dims dynamic. Returns the opset."""
    import torch

    axes = {n: ({0: "batch", 1: "seq"} if n != "pixel_values" else {0: "batch"}) for n in names}
    if exporter == "torchscript":
        kw = dict(dynamo=False, opset_version=17, dynamic_axes=axes)
    else:
        dims = tuple({i: torch.export.Dim.AUTO for i in axes[n]} for n in names)
        # forward(*xs): the inputs are one (varargs) argument, so are their dynamic shapes
        opset = 23 if exporter == "dynamo23" else 18
        kw = dict(dynamo=True, opset_version=opset, dynamic_shapes=(dims,), external_data=external_data)
    with torch.no_grad():
        torch.onnx.export(_wrapped(model, names), example, str(path), input_names=list(names),
                          output_names=["out"], **kw)  # fmt: skip
    _rename_dims(path, axes)
    return kw["opset_version"]


def export_one(name: str, exporter: str, out_dir: Path) -> dict:
    import torch

    torch.manual_seed(0)
    model, names, example, _ = _models()[name]
    path = out_dir / f"{name}_{exporter}.onnx"
    opset = _export(model, names, example, path, exporter)
    return {"file": path.name, "bytes": path.stat().st_size, "opset": opset, "inputs": list(names)}


def _rename_dims(path: Path, axes: dict[str, dict[int, str]]) -> None:
    """The dynamo exporter names dynamic dims s0, s1...; name them batch / seq (input name -> position ->
    name) as the importer binds them, in one load and save of the model."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # external weights stay where they are
    renames = {}
    for vi in model.graph.input:
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param and i in axes.get(vi.name, {}):
                renames[d.dim_param] = axes[vi.name][i]
    if not renames or all(k == v for k, v in renames.items()):
        return
    for vi in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in renames:
                d.dim_param = renames[d.dim_param]
    onnx.save(model, str(path))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nvdla_validation.onnx_exports", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the .onnx files and versions.json")
    ap.add_argument(
        "--only", nargs="*", default=None, help="model names (bert bert_masked gpt2 gpt2_masked t5_encoder vit)"
    )
    ap.add_argument("--full-gpt2", type=Path, metavar="DIR", help="instead: export a 12-layer GPT-2 into DIR")
    args = ap.parse_args(argv)
    try:
        import onnx
        import torch
        import transformers
    except ImportError as e:
        print(f"onnx_exports: needs the optional extra 'export' (torch, transformers): {e}", file=sys.stderr)
        return 2
    if args.full_gpt2:
        print(export_full_gpt2(args.full_gpt2))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(_models())
    record = {
        "command": "python -m nvdla_validation.onnx_exports " + " ".join(argv if argv is not None else sys.argv[1:]),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnx": onnx.__version__,
        },
        "exports": {},
    }
    try:
        import onnxscript

        record["versions"]["onnxscript"] = onnxscript.__version__
    except ImportError:
        pass
    models = _models()
    for name in names:
        if not name.endswith("_masked"):  # a masked model has its unmasked twin's config
            cfg = {**models[name][3].to_dict(), "architectures": [type(models[name][0]).__name__]}  # as save_pretrained
            text = json.dumps(cfg, indent=1, sort_keys=True, default=str) + "\n"
            (args.out / f"{name}.config.json").write_text(text)
        for exporter in (*EXPORTERS, "dynamo23") if name in OPSET23 else EXPORTERS:
            key = f"{name}_{exporter}"
            try:
                record["exports"][key] = export_one(name, exporter, args.out)
                print(f"{key}: {record['exports'][key]['bytes']:,} bytes")
            except Exception as e:  # an exporter's failure is a result to record
                lines = [ln for ln in str(e).splitlines() if ln.strip()]
                # torch.onnx's own message leads with advice; the cause follows "## Exception summary"
                cause = next((i + 1 for i, ln in enumerate(lines) if "Exception summary" in ln), 0)
                msg = lines[cause][:300] if cause < len(lines) else ""
                record["exports"][key] = {"error": f"{type(e).__name__}: {msg}"}
                print(f"{key}: FAILED {record['exports'][key]['error']}")
    vpath = args.out / "versions.json"
    old = json.loads(vpath.read_text()) if vpath.exists() else {}
    if old and args.only:
        record["exports"] = {**old.get("exports", {}), **record["exports"]}
    vpath.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
