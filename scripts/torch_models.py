"""PyTorch-built networks for `real-networks.py`: torchvision architectures and a YOLO-style
detector made here, exported to ONNX with deterministic weights, in float and as PyTorch's own quantized export
(QDQ: QuantizeLinear/DequantizeLinear pairs around float operators).

No weights are downloaded (nothing outside the package registries is reachable here): each
network is built with its constructor's own initialization under a fixed seed, and its batch
norms get seeded running statistics, so the exported model is the same on every machine with
the same torch version. Needs `torch` and `torchvision` (CPU wheels are enough).
"""
import torch
import torch.nn as nn

TORCHVISION = ("mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
               "resnet50", "googlenet", "squeezenet1_1", "regnet_y_400mf")


class ConvBnSiLU(nn.Sequential):
    def __init__(self, cin, cout, k=3, s=1):
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = ConvBnSiLU(c, c), ConvBnSiLU(c, c)

    def forward(self, x):
        return x + self.b(self.a(x))


class C2f(nn.Module):
    """YOLOv8's cross-stage block: split the channels in two, chain bottlenecks on one half,
    concatenate every intermediate."""

    def __init__(self, cin, cout, n=1):
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBnSiLU(cin, 2 * self.c, 1)
        self.m = nn.ModuleList(Bottleneck(self.c) for _ in range(n))
        self.cv2 = ConvBnSiLU((2 + n) * self.c, cout, 1)

    def forward(self, x):
        halves = self.cv1(x).chunk(2, 1)
        y = [halves[0], halves[1]]  # indexed, not unpacked: torch.fx traces it for QDQ export
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1 = ConvBnSiLU(c, c // 2, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.cv2 = ConvBnSiLU(c * 2, c, 1)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class YoloStyle(nn.Module):
    """A YOLOv8n-shaped detector at 1/4 of its width: backbone of strided convolutions and C2f
    blocks, SPPF, a feature-pyramid neck with nearest upsampling and concatenation, and
    three heads (box and class maps per scale), flattened and concatenated like YOLO's
    output."""

    def __init__(self, classes=16, w=(16, 32, 64, 128)):
        super().__init__()
        self.stem = nn.Sequential(ConvBnSiLU(3, w[0], 3, 2), ConvBnSiLU(w[0], w[1], 3, 2),
                                  C2f(w[1], w[1]))
        self.p3 = nn.Sequential(ConvBnSiLU(w[1], w[2], 3, 2), C2f(w[2], w[2], 2))
        self.p4 = nn.Sequential(ConvBnSiLU(w[2], w[3], 3, 2), C2f(w[3], w[3], 2))
        self.p5 = nn.Sequential(ConvBnSiLU(w[3], w[3], 3, 2), C2f(w[3], w[3]), SPPF(w[3]))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = C2f(2 * w[3], w[3])
        self.n3 = C2f(w[3] + w[2], w[2])
        self.heads = nn.ModuleList(
            nn.Sequential(ConvBnSiLU(c, c), nn.Conv2d(c, 4 + classes, 1)) for c in
            (w[2], w[3], w[3]))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        outs = [h(f).flatten(2) for h, f in zip(self.heads, (n3, n4, p5))]
        boxes_and_classes = torch.cat(outs, 2)
        return boxes_and_classes.sigmoid()


def build(arch):
    torch.manual_seed(0)
    if arch == "yolo_style":
        net = YoloStyle()
    elif arch in TORCHVISION:
        import torchvision
        # GoogLeNet's auxiliary heads only run in training; without them it exports as used.
        extra = {"aux_logits": False, "init_weights": True} if arch == "googlenet" else {}
        net = getattr(torchvision.models, arch)(weights=None, **extra)
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    # Freshly built batch norms hold mean 0, variance 1; seeded statistics make them real
    # per-channel scales and shifts, as in a trained network.
    g = torch.Generator().manual_seed(1)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return net.eval()


def export(arch, shape, path):
    """Writes `arch` as an ONNX model (opset 17, input `x` of `shape`) to `path`."""
    net = build(arch)
    with torch.no_grad():
        torch.onnx.export(net, torch.zeros(shape), path, opset_version=17, dynamo=False,
                          input_names=["x"], output_names=["y"])


class FrozenFakeQuant(nn.Module):
    """A calibrated fake-quantizer with its scale and zero point fixed, written so that the
    ONNX exporter sees plain `fake_quantize_*` calls (QuantizeLinear + DequantizeLinear)
    instead of the observer's data-dependent update."""

    def __init__(self, fq):
        super().__init__()
        self.qmin, self.qmax, self.axis = fq.quant_min, fq.quant_max, fq.ch_axis
        self.per_channel = fq.is_per_channel
        if self.per_channel:
            self.register_buffer("scale", fq.scale.detach().clone())
            self.register_buffer("zero_point", fq.zero_point.detach().to(torch.int32).clone())
        else:
            self.s, self.z = float(fq.scale), int(fq.zero_point)

    def forward(self, x):
        if self.per_channel:
            return torch.fake_quantize_per_channel_affine(x, self.scale, self.zero_point,
                                                          self.axis, self.qmin, self.qmax)
        return torch.fake_quantize_per_tensor_affine(x, self.s, self.z, self.qmin, self.qmax)


def _freeze_fake_quants(module):
    from torch.ao.quantization import FakeQuantize
    # _modules, not named_children: one quantizer may be registered under several names.
    for name, child in list(module._modules.items()):
        if isinstance(child, FakeQuantize):
            setattr(module, name, FrozenFakeQuant(child))
        elif child is not None:
            _freeze_fake_quants(child)


def export_qdq(arch, shape, path, samples):
    """Writes `arch` quantized by PyTorch (torch.ao FX graph mode: batch norms folded, uint8
    activations per tensor, int8 weights per output channel, calibrated on `samples`) as a
    QDQ ONNX model to `path`."""
    from torch.ao.quantization import (FakeQuantize, MovingAverageMinMaxObserver,
                                       MovingAveragePerChannelMinMaxObserver, QConfig,
                                       QConfigMapping)
    from torch.ao.quantization.quantize_fx import prepare_qat_fx
    from torch.fx.experimental.optimization import fuse

    qconfig = QConfig(
        activation=FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                          quant_max=255, dtype=torch.quint8),
        weight=FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver,
                                      quant_min=-128, quant_max=127, dtype=torch.qint8,
                                      qscheme=torch.per_channel_symmetric, ch_axis=0))
    example = torch.zeros(shape)
    # Fake-quant (QAT) preparation, not post-training convert: its modules export to QDQ.
    net = prepare_qat_fx(fuse(build(arch)).train(), QConfigMapping().set_global(qconfig),
                         (example,)).eval()
    with torch.no_grad():
        for x in samples:
            net(torch.from_numpy(x[None]))
        _freeze_fake_quants(net)
        torch.onnx.export(net, example, path, opset_version=17, dynamo=False,
                          input_names=["x"], output_names=["y"])
