#!/usr/bin/env python3
"""Makes the small models and golden data of the compiler's front-end tests.

Run from this directory with a Python that has numpy, scikit-learn, onnx and onnxruntime
(`pip install onnx onnxruntime numpy scikit-learn`):

    python3 make_models.py

The training step needs PyTorch; it runs under Debian's interpreter
(`apt-get install python3-torch`, `/usr/bin/python3`), which this script calls itself. The
tests only read the committed outputs; nothing here runs in CI.

Outputs (all small):
- digits_train.npy / digits_train_labels.npy: scratch (deleted at the end)
- tiny_cnn.onnx: float CNN for sklearn's 8x8 digits: Conv+BN+Relu, MaxPool, depthwise
  Conv+BN+Relu, pointwise Conv+BN, residual Add+Relu, Conv stride 2 + Relu,
  GlobalAveragePool, Flatten, MatMul+Add (dense), Softmax (opset 13, BatchNormalization kept)
- tiny_cnn_qdq.onnx: onnxruntime quantize_static, QDQ format, int8 symmetric activations,
  per-channel int8 weights
- tiny_cnn_qop.onnx: onnxruntime quantize_static, QOperator format (QLinearConv,
  QLinearMatMul; uint8 asymmetric activations), only standard ONNX ops
- digits_calib.npy: 32 training images [32, 1, 8, 8] float32 (pixel values 0..16)
- digits_test.npy, digits_test_labels.npy: 100 test images and labels (int64)
- tiny_cnn_out.npy, tiny_cnn_qdq_out.npy, tiny_cnn_qop_out.npy: onnxruntime's outputs on
  the test images [100, 10]
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def train():
    """Runs under Debian's python3 with torch 1.13."""
    import numpy as np
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    x = torch.tensor(np.load(os.path.join(HERE, "digits_train.npy")))
    y = torch.tensor(np.load(os.path.join(HERE, "digits_train_labels.npy")))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(8)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
            self.b2 = nn.BatchNorm2d(8)
            self.pw = nn.Conv2d(8, 8, 1, bias=False)
            self.b3 = nn.BatchNorm2d(8)
            self.c3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.fc_w = nn.Parameter(torch.randn(10, 16) * 0.1)
            self.fc_b = nn.Parameter(torch.zeros(10))

        def forward(self, x):
            x = torch.relu(self.b1(self.c1(x)))
            x = nn.functional.max_pool2d(x, 2)
            r = x
            x = torch.relu(self.b2(self.dw(x)))
            x = self.b3(self.pw(x))
            x = torch.relu(x + r)
            x = torch.relu(self.c3(x))
            x = nn.functional.adaptive_avg_pool2d(x, 1)
            x = torch.flatten(x, 1)
            x = x @ self.fc_w.t() + self.fc_b
            return torch.softmax(x, dim=1)

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for epoch in range(40):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            idx = perm[i:i + 64]
            p = net(x[idx])
            loss = nn.functional.nll_loss(torch.log(p + 1e-9), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        acc = (net(x).argmax(1) == y).float().mean().item()
    print(f"train accuracy {acc:.3f}")
    torch.onnx.export(
        net, torch.zeros(1, 1, 8, 8), os.path.join(HERE, "tiny_cnn.onnx"),
        input_names=["image"], output_names=["probs"], opset_version=13,
        training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
    )


def main():
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q
    from sklearn.datasets import load_digits

    d = load_digits()
    images = d.images.astype(np.float32).reshape(-1, 1, 8, 8)
    labels = d.target.astype(np.int64)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(images))
    train_idx, test_idx = perm[:1400], perm[1400:1500]
    np.save(os.path.join(HERE, "digits_train.npy"), images[train_idx])
    np.save(os.path.join(HERE, "digits_train_labels.npy"), labels[train_idx])
    subprocess.run(["/usr/bin/python3", __file__, "--train"], check=True)
    os.remove(os.path.join(HERE, "digits_train.npy"))
    os.remove(os.path.join(HERE, "digits_train_labels.npy"))

    calib = images[train_idx[:32]]
    test = images[test_idx]
    np.save(os.path.join(HERE, "digits_calib.npy"), calib)
    np.save(os.path.join(HERE, "digits_test.npy"), test)
    np.save(os.path.join(HERE, "digits_test_labels.npy"), labels[test_idx])

    fp = os.path.join(HERE, "tiny_cnn.onnx")
    m = onnx.load(fp)
    onnx.checker.check_model(m)
    print("float model ops:", sorted({n.op_type for n in m.graph.node}))

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"image": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    # onnxruntime's pre-processing folds BatchNormalization and constants (basic graph
    # optimizations only, so the result has standard ops), as one does before quantizing.
    pre = os.path.join(HERE, "tiny_cnn_pre.onnx")
    q.quant_pre_process(fp, pre)
    qdq = os.path.join(HERE, "tiny_cnn_qdq.onnx")
    q.quantize_static(pre, qdq, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8,
                      extra_options={"ActivationSymmetric": True})
    qop = os.path.join(HERE, "tiny_cnn_qop.onnx")
    q.quantize_static(pre, qop, Reader(), quant_format=q.QuantFormat.QOperator,
                      op_types_to_quantize=["Conv", "MatMul"], per_channel=False,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    os.remove(pre)
    for name, path in [("", fp), ("_qdq", qdq), ("_qop", qop)]:
        mm = onnx.load(path)
        print(os.path.basename(path), os.path.getsize(path), "bytes, ops:",
              sorted({n.op_type for n in mm.graph.node}),
              "domains:", sorted({n.domain for n in mm.graph.node}))
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        out = np.concatenate([s.run(None, {"image": test[i:i + 1]})[0] for i in range(len(test))])
        np.save(os.path.join(HERE, f"tiny_cnn{name}_out.npy"), out.astype(np.float32))
        print(f"  test accuracy {(out.argmax(1) == labels[test_idx]).mean():.3f}")


if __name__ == "__main__":
    if "--train" in sys.argv:
        train()
    else:
        main()
