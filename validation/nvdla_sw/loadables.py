"""Read NVIDIA's regression loadables with nvdla_sim.program.loadable; write validation/data/loadables.json.

    python -m nvdla_validation.nvdla_sw.loadables SW_CHECKOUT

nvdla/sw's `regression/flatbufs/kmd/*/*_fbuf` are loadables NVIDIA's compiler wrote for its KMD regression
(one per unit test, and NN_L0_0: an FP16 LeNet with CPU tasks around its DLA task); `regression/golden/
<test>_<hash>/dla/lead.md5` holds the md5 of each test's output. The files stay in the checkout. Each row
holds what the reader decoded: the tasks, the firmware interface, and per operation its unit, cubes
(memory entry, offset, width x height x channels, strides) and shape fields; the golden's md5 beside it,
for the step that runs them (docs/driver_programs.md). A loadable missing from a checkout (some are
absent from its mirrors) is left out and said.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nvdla_sim.program.loadable.container import read_loadable
from nvdla_sim.program.loadable.descriptors import ConvOpDesc, DataCube, PdpOpDesc
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation, dla_network
from nvdla_validation.nvdla_sw import write_rows

OUT = Path(__file__).resolve().parents[2] / "validation" / "data" / "loadables.json"
FLATBUFS = "regression/flatbufs/kmd"
GOLDEN = "regression/golden"


def _cube(net: DlaNetwork, cube: DataCube | None) -> dict | None:
    if cube is None:
        return None
    place = net.place(cube)
    return {
        "memory": place.mem_type.name,
        "mem_id": place.mem_id,
        "offset": place.offset,
        "whc": [cube.width, cube.height, cube.channel],
        "line_stride": cube.line_stride,
        "surf_stride": cube.surf_stride,
        "size": cube.size,
    }


def _shape(op: DlaOperation) -> dict:
    d = op.op
    if isinstance(d, ConvOpDesc):
        return {
            "kernel": [d.kernel_width_csc, d.kernel_height_csc, d.kernel_channel_csc],
            "stride": [d.conv_stride_x, d.conv_stride_y],
            "pad": [d.pad_x_left, d.pad_x_right, d.pad_y_top, d.pad_y_bottom],
            "dilation": [d.dilation_x, d.dilation_y],
            "precision": d.in_precision,
            "banks": [d.data_bank, d.weight_bank],
            "bytes_per_kernel": d.bytes_per_kernel,
        }
    if isinstance(d, PdpOpDesc):
        return {
            "pool": [d.pool_width + 1, d.pool_height + 1],
            "stride": [d.stride_x, d.stride_y],
            "pad": [d.pad_left, d.pad_right, d.pad_top, d.pad_bottom],
            "mode": d.pool_mode,
            "splits": d.split_num,
        }
    return {}


def row(name: str, path: Path, golden: Path | None) -> dict:
    lo = read_loadable(path)
    net = dla_network(lo)
    md5 = None
    if golden is not None and (golden / "dla" / "lead.md5").is_file():
        md5 = (golden / "dla" / "lead.md5").read_text().split()[0]
    return {
        "name": name,
        "loadable_version": str(lo.version),
        "tasks": [t.interface.name for t in lo.tasks],
        "dla_task": net.task.id,
        "firmware_interface": ".".join(map(str, net.interface)),
        "memories": len(lo.memories),
        "outputs": list(net.outputs()),
        "operations": [
            {
                "unit": o.op_type.name,
                "describe": o.op.describe(),
                "consumers": [[i, e.name] for i, e in o.consumers()],
                "src": _cube(net, o.source),
                "dst": _cube(net, o.destination),
                **_shape(o),
            }
            for o in net.operations
        ],
        "golden": golden.name if golden is not None else None,
        "golden_md5": md5,
    }


def find(sw: Path) -> tuple[list[tuple[str, Path, Path | None]], list[str]]:
    """(name, loadable, golden folder) of every regression loadable in the checkout, and those absent."""
    goldens = {p.name.rsplit("_", 1)[0]: p for p in (sw / GOLDEN).glob("*_*") if p.is_dir()}
    found, missing = [], []
    for path in sorted((sw / FLATBUFS).glob("*/*_fbuf")):
        name = path.name.removesuffix("_fbuf")
        if not path.stat().st_size:
            missing.append(name)
            continue
        found.append((name, path, goldens.get(name)))
    return found, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sw", type=Path, help="a checkout of github.com/nvdla/sw")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    found, missing = find(args.sw)
    rows = []
    for name, path, golden in found:
        rows.append(row(name, path, golden))
        units = " ".join(o["unit"].lower() for o in rows[-1]["operations"])
        print(f"{name:<28} {rows[-1]['firmware_interface']:>5}  {units}", file=sys.stderr)
    write_rows(
        args.out,
        what="NVIDIA's regression loadables (nvdla/sw regression/flatbufs/kmd) read by "
        "nvdla_sim.program.loadable (docs/driver_programs.md)",
        command="python -m nvdla_validation.nvdla_sw.loadables SW_CHECKOUT",
        missing=missing,
        rows=rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
