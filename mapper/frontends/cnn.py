"""CNN zoo with the layer shapes of the original papers, built into the same workload graph.

LeNet-5 (LeCun et al. 1998: 32x32 input, tanh, average subsampling), Caffe's MNIST LeNet (BVLC Caffe
examples/mnist/lenet.prototxt: 28x28 input, 20 and 50 5x5 kernels, max pooling, 500 and 10 fully connected
with a ReLU between: the network of NVIDIA's regression NN_L0_0 and of the public nv_small driver logs),
the CIFAR-10 ResNet of the public nv_small driver logs (vineetbitsp/RISC-V-NVDLA models/resnet-18-cifar/
deploy.prototxt, "resnet18-cifar10": He et al. 2016's CIFAR stem and 16, 32, 64-channel stages, of 3, 3 and 2
basic blocks, 1x1 stride-2 projections, global average pooling, 10 classes), AlexNet (Krizhevsky et al. 2012:
227x227 input, two-tower grouped conv2/4/5; LRN omitted), ResNet-18 / ResNet-50 (He et al. 2016, Table 1;
ResNet-50 bottlenecks stride on the first 1x1 as in the paper; BN folded into SDP), GoogLeNet (Szegedy
et al. 2014, Table 1; LRN and auxiliary classifiers omitted).
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from nvdla_mapper.workload import Block, Graph, Op, OpKind, verify
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvShape, PoolMode, PoolSpec

Tensor = tuple[str, int, int, int]  # (producing op, width, height, channels)


class CnnBuilder:
    def __init__(self, name: str, batch: int, image: tuple[int, int, int]) -> None:
        if batch < 1:
            raise NvdlaError(f"batch must be >= 1, not {batch}")
        self.g = Graph(name, batch=batch, seq=0)  # an image input has no sequence
        self.batch = batch
        w, h, c = image
        self.input: Tensor = (self.g.add(Op("input", OpKind.RESHAPE, w * h, c, group="other")), w, h, c)

    def conv(
        self,
        name: str,
        x: Tensor,
        k: int,
        size: int,
        *,
        stride: int = 1,
        pad: int = 0,
        groups: int = 1,
        act: OpKind | None = OpKind.RELU,
        bn: bool = False,
    ) -> Tensor:
        src, w, h, c = x
        if c % groups or k % groups:
            raise NvdlaError(f"{name}: channels {c} and kernels {k} must divide into {groups} groups")
        cs = ConvShape.square(w, h, c // groups, k // groups, kernel=size, stride=stride, pad=pad)
        op = Op(
            name,
            OpKind.CONV,
            cs.out_pixels,
            k // groups,
            k=cs.in_c * size * size,
            count=self.batch * groups,
            group="conv",
            attrs={"conv": cs, "bn": bn, "groups": groups, "image_input": src == self.input[0] and c <= 4},
        )
        out = self.g.add(op, src)
        if act is not None:
            out = self.g.add(
                Op(
                    f"{name}.act",
                    act,
                    cs.out_pixels,
                    k,
                    count=self.batch,
                    group="elementwise",
                    attrs={"func": "tanh"} if act is OpKind.LUT else {},
                    block=Block(name),  # its layer's (a block's inside one)
                ),
                out,
            )
        return out, cs.out_w, cs.out_h, k

    def pool(
        self,
        name: str,
        x: Tensor,
        size: int,
        stride: int,
        *,
        mode: PoolMode = PoolMode.MAX,
        pad: int = 0,
        pad_end: int | None = None,
    ) -> Tensor:
        src, w, h, c = x
        end = pad if pad_end is None else pad_end
        spec = PoolSpec(mode, size, size, stride, stride, pad, end, pad, end)
        ow, oh = spec.out_size(w, h)
        out = self.g.add(
            Op(
                name,
                OpKind.POOL,
                ow * oh,
                c,
                count=self.batch,
                group="pool",
                attrs={"pool": spec, "input_whc": (w, h, c)},
            ),
            src,
        )
        return out, ow, oh, c

    def fc(self, name: str, x: Tensor, n: int, *, act: OpKind | None = OpKind.RELU) -> Tensor:
        """Fully connected. On a W x H x C input NVDLA runs it as a W x H convolution (the reduction stays
        within the 8192-channel field); on a 1 x 1 x C input as a 1x1 convolution of one pixel."""
        src, w, h, c = x
        if w * h > 1:
            if w != h:
                raise NvdlaError(f"{name}: fully connected input {w}x{h} must be square to run as one convolution")
            return self.conv(name, x, n, w, act=act)
        out = self.g.add(Op(name, OpKind.MATMUL, self.batch, n, k=c, group="matmul"), src)
        if act is not None:
            out = self.g.add(
                Op(
                    f"{name}.act",
                    act,
                    self.batch,
                    n,
                    group="elementwise",
                    attrs={"func": "tanh"} if act is OpKind.LUT else {},
                    block=Block(name),
                ),
                out,
            )
        return out, 1, 1, n

    def add(self, name: str, a: Tensor, b: Tensor, *, relu: bool = True) -> Tensor:
        _, w, h, c = a
        out = self.g.add(Op(name, OpKind.ADD, w * h, c, count=self.batch, group="elementwise"), a[0], b[0])
        if relu:
            relu_op = Op(
                f"{name}.relu", OpKind.RELU, w * h, c, count=self.batch, group="elementwise", block=Block(name)
            )
            out = self.g.add(relu_op, out)
        return out, w, h, c

    def concat(self, name: str, xs: list[Tensor]) -> Tensor:
        """Channel concat: branches write adjacent surfaces of one cube, so no data moves."""
        _, w, h, _ = xs[0]
        c = sum(x[3] for x in xs)
        out = self.g.add(Op(name, OpKind.RESHAPE, w * h, c, group="other"), *(x[0] for x in xs))
        return out, w, h, c


def lenet5(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("lenet5", batch, (32, 32, 1))
    x = b.conv("c1", b.input, 6, 5, act=OpKind.LUT)
    x = b.pool("s2", x, 2, 2, mode=PoolMode.AVG)
    x = b.conv("c3", x, 16, 5, act=OpKind.LUT)
    x = b.pool("s4", x, 2, 2, mode=PoolMode.AVG)
    x = b.conv("c5", x, 120, 5, act=OpKind.LUT)
    x = b.fc("f6", x, 84, act=OpKind.LUT)
    b.fc("output", x, 10, act=None)
    return verify(b.g.g)


def lenet_mnist(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("lenet_mnist", batch, (28, 28, 1))
    x = b.conv("conv1", b.input, 20, 5, act=None)
    x = b.pool("pool1", x, 2, 2)
    x = b.conv("conv2", x, 50, 5, act=None)
    x = b.pool("pool2", x, 2, 2)
    x = b.fc("ip1", x, 500)
    b.fc("ip2", x, 10, act=None)
    return verify(b.g.g)


def resnet18_cifar(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("resnet18_cifar", batch, (32, 32, 3))
    x = b.conv("conv1", b.input, 16, 3, pad=1, bn=True)
    x = _basic_stages(b, x, (16, 32, 64), (3, 3, 2))
    x = b.pool("avgpool", x, 8, 1, mode=PoolMode.AVG)
    b.fc("fc", x, 10, act=None)
    return verify(b.g.g)


def alexnet(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("alexnet", batch, (227, 227, 3))
    x = b.conv("conv1", b.input, 96, 11, stride=4)
    x = b.pool("pool1", x, 3, 2)
    x = b.conv("conv2", x, 256, 5, pad=2, groups=2)
    x = b.pool("pool2", x, 3, 2)
    x = b.conv("conv3", x, 384, 3, pad=1)
    x = b.conv("conv4", x, 384, 3, pad=1, groups=2)
    x = b.conv("conv5", x, 256, 3, pad=1, groups=2)
    x = b.pool("pool5", x, 3, 2)
    x = b.fc("fc6", x, 4096)
    x = b.fc("fc7", x, 4096)
    b.fc("fc8", x, 1000, act=None)
    return verify(b.g.g)


def _stem(b: CnnBuilder) -> Tensor:
    x = b.conv("conv1", b.input, 64, 7, stride=2, pad=3, bn=True)
    return b.pool("pool1", x, 3, 2, pad=1)


def _head(b: CnnBuilder, x: Tensor) -> None:
    x = b.pool("avgpool", x, 7, 1, mode=PoolMode.AVG)
    b.fc("fc", x, 1000, act=None)


def _basic_stages(b: CnnBuilder, x: Tensor, channels: tuple[int, ...], blocks: tuple[int, ...]) -> Tensor:
    """He et al.'s basic-block stages (conv2_ onwards): two 3x3 convolutions a block, the first of each stage
    after the first with stride 2 and a 1x1 stride-2 projection of the shortcut."""
    for stage, (ch, n) in enumerate(zip(channels, blocks, strict=True), start=2):
        for i in range(n):
            stride = 2 if stage > 2 and i == 0 else 1
            with b.g.block(f"conv{stage}_", i + 1) as p:
                y = b.conv(f"{p}.a", x, ch, 3, stride=stride, pad=1, bn=True)
                y = b.conv(f"{p}.b", y, ch, 3, pad=1, bn=True, act=None)
                short = b.conv(f"{p}.down", x, ch, 1, stride=stride, bn=True, act=None) if stride == 2 else x
                x = b.add(f"{p}.add", y, short)
    return x


def resnet18(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("resnet18", batch, (224, 224, 3))
    x = _basic_stages(b, _stem(b), (64, 128, 256, 512), (2, 2, 2, 2))
    _head(b, x)
    return verify(b.g.g)


def resnet50(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("resnet50", batch, (224, 224, 3))
    x = _stem(b)
    for stage, (ch, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True), start=2):
        for i in range(blocks):
            stride = 2 if stage > 2 and i == 0 else 1
            with b.g.block(f"conv{stage}_", i + 1) as p:
                y = b.conv(f"{p}.a", x, ch, 1, stride=stride, bn=True)
                y = b.conv(f"{p}.b", y, ch, 3, pad=1, bn=True)
                y = b.conv(f"{p}.c", y, 4 * ch, 1, bn=True, act=None)
                short = b.conv(f"{p}.down", x, 4 * ch, 1, stride=stride, bn=True, act=None) if i == 0 else x
                x = b.add(f"{p}.add", y, short)
    _head(b, x)
    return verify(b.g.g)


# GoogLeNet Table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj
_INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def googlenet(batch: int = 1) -> nx.DiGraph:
    b = CnnBuilder("googlenet", batch, (224, 224, 3))
    x = b.conv("conv1", b.input, 64, 7, stride=2, pad=3)
    x = b.pool("pool1", x, 3, 2, pad=0, pad_end=1)
    with b.g.block("conv2"):
        x = b.conv("conv2.reduce", x, 64, 1)
        x = b.conv("conv2", x, 192, 3, pad=1)
    x = b.pool("pool2", x, 3, 2, pad=0, pad_end=1)
    for name, (n1, r3, n3, r5, n5, pp) in _INCEPTION.items():
        with b.g.block(f"inception{name}") as p:  # each module its own widths: a block of its own
            a = b.conv(f"{p}.1x1", x, n1, 1)
            c3 = b.conv(f"{p}.3x3", b.conv(f"{p}.3x3r", x, r3, 1), n3, 3, pad=1)
            c5 = b.conv(f"{p}.5x5", b.conv(f"{p}.5x5r", x, r5, 1), n5, 5, pad=2)
            pj = b.conv(f"{p}.proj", b.pool(f"{p}.pool", x, 3, 1, pad=1), pp, 1)
            x = b.concat(f"{p}.concat", [a, c3, c5, pj])
        if name in ("3b", "4e"):
            x = b.pool(f"pool_{name}", x, 3, 2, pad=0, pad_end=1)
    _head(b, x)
    return verify(b.g.g)


CNN_PRESETS: dict[str, Callable[[int], nx.DiGraph]] = {
    "lenet5": lenet5,
    "lenet_mnist": lenet_mnist,
    "resnet18_cifar": resnet18_cifar,
    "alexnet": alexnet,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "googlenet": googlenet,
}
