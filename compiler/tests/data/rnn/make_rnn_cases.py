#!/usr/bin/env python3
"""Makes the RNN/GRU/LSTM cases of compiler/tests/rnn_ops.rs: the attributes ONNX's own node
tests leave out (sequence_lens with different lengths, clip, input_forget,
linear_before_reset, non-default activation functions with activation_alpha/beta, initial
states and peepholes together, bidirectional with batch-major layout), with onnxruntime's
outputs as the expected ones.

Run from this directory with a Python that has numpy, onnx and onnxruntime:

    python3 make_rnn_cases.py

Each case is a directory `<case>/` laid out as ONNX's node tests are: `model.onnx` (one node,
opset 14) and `test_data_set_0/input_<k>.pb`, `output_<k>.pb`. onnxruntime's CPU kernels take
only `layout = 0`; the batch-major cases are the time-major ones with their inputs and
outputs transposed (numpy), so they check the layout against the same onnxruntime result.

The `dynq_` cases are LSTMs quantized by onnxruntime's `quantize_dynamic` into its
`com.microsoft.DynamicQuantizeLSTM` (int8 weights per tensor or per channel, the inputs of
the matrix products quantized per inference), with `reduce_range=True` (7-bit weights): on
x86 CPUs with AVX2 but no VNNI, onnxruntime's uint8 x int8 kernels add pairs of products in
saturating int16 (`vpmaddubsw`), so with full-range weights its results depend on the CPU
(on this machine 0.1 off the exact products at the second step of an LSTM); with 7-bit
weights no pair can saturate and onnxruntime computes the exact products, which the
compiler implements.
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = os.path.dirname(os.path.abspath(__file__))
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def case(name, op, direction, seq, batch, inp, hidden, seed, lens=None, init=False,
         peep=False, outputs=("Y", "Y_h", "Y_c"), batch_major=False, **attrs):
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    vals = {
        "X": rng.standard_normal((seq, batch, inp)).astype(np.float32),
        "W": (rng.standard_normal((dirs, g * hidden, inp)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((dirs, g * hidden, hidden)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((dirs, 2 * g * hidden)) * 0.3).astype(np.float32),
    }
    if lens is not None:
        vals["sequence_lens"] = np.array(lens, np.int32)
    if init:
        vals["initial_h"] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
        if op == "LSTM":
            vals["initial_c"] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
    if peep:
        vals["P"] = (rng.standard_normal((dirs, 3 * hidden)) * 0.5).astype(np.float32)
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    if op != "LSTM":
        order = order[:6]
    names = [n if n in vals else "" for n in order]
    while names[-1] == "":
        names.pop()
    outs = [o for o in outputs if op == "LSTM" or o != "Y_c"]

    def model(layout, shapes):
        node = helper.make_node(op, names, outs, direction=direction, hidden_size=hidden,
                                **({"layout": 1} if layout else {}), **attrs)
        ins = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens"
                                             else TensorProto.FLOAT, shapes[n])
               for n in names if n]
        y = [batch, seq, dirs, hidden] if layout else [seq, dirs, batch, hidden]
        state = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
        ys = [helper.make_tensor_value_info(o, TensorProto.FLOAT, y if o == "Y" else state)
              for o in outs if o]
        m = helper.make_model(helper.make_graph([node], name, ins, ys),
                              opset_imports=[helper.make_opsetid("", 14)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m

    m = model(False, {k: v.shape for k, v in vals.items()})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: vals[n] for n in names if n}
    ys = sess.run(None, feeds)
    if batch_major:
        state = (1, 0, 2)
        for n in ("initial_h", "initial_c"):
            if n in feeds:
                feeds[n] = feeds[n].transpose(state)
        feeds["X"] = feeds["X"].transpose(1, 0, 2)
        ys = [y.transpose(2, 0, 1, 3) if o == "Y" else y.transpose(state)
              for o, y in zip([o for o in outs if o], ys)]
        m = model(True, {k: v.shape for k, v in feeds.items()})
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, n in enumerate(n for n in names if n):
        with open(os.path.join(d, f"test_data_set_0/input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for k, (o, y) in enumerate(zip([o for o in outs if o], ys)):
        with open(os.path.join(d, f"test_data_set_0/output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, o).SerializeToString())


def dynamic_quantized(name, direction, seq, batch, inp, hidden, seed, per_channel=False):
    """An LSTM with initial states and peepholes, quantized by onnxruntime's quantize_dynamic
    into com.microsoft.DynamicQuantizeLSTM; the expected outputs are onnxruntime's."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    vals = {
        "W": (rng.standard_normal((dirs, 4 * hidden, inp)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((dirs, 4 * hidden, hidden)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((dirs, 8 * hidden)) * 0.3).astype(np.float32),
    }
    feeds = {
        "X": rng.standard_normal((seq, batch, inp)).astype(np.float32),
        "initial_h": rng.standard_normal((dirs, batch, hidden)).astype(np.float32),
        "initial_c": rng.standard_normal((dirs, batch, hidden)).astype(np.float32),
    }
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "initial_h", "initial_c"],
                            ["Y", "Y_h", "Y_c"], direction=direction, hidden_size=hidden)
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in feeds.items()]
    outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [seq, dirs, batch, hidden])] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, batch, hidden])
        for n in ("Y_h", "Y_c")]
    inits = [numpy_helper.from_array(v, n) for n, v in vals.items()]
    m = helper.make_model(helper.make_graph([node], name, ins, outs, inits),
                          opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    src = os.path.join(d, "float.onnx")
    onnx.save(m, src)
    quantize_dynamic(src, os.path.join(d, "model.onnx"), weight_type=QuantType.QInt8,
                     per_channel=per_channel, reduce_range=True)
    os.remove(src)
    q = onnx.load(os.path.join(d, "model.onnx"))
    assert [n.op_type for n in q.graph.node] == ["DynamicQuantizeLSTM"], q.graph.node
    # One intra-op thread: with a batch of 2 or more, onnxruntime quantizes the state of each
    # thread's share of the batch rows by itself, so its result depends on its thread count.
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ys = sess.run(None, feeds)
    for k, n in enumerate(feeds):
        with open(os.path.join(d, f"test_data_set_0/input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for k, (o, y) in enumerate(zip(["Y", "Y_h", "Y_c"], ys)):
        with open(os.path.join(d, f"test_data_set_0/output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, o).SerializeToString())


def main():
    for e in os.listdir(HERE):
        if os.path.isdir(os.path.join(HERE, e)):
            shutil.rmtree(os.path.join(HERE, e))
    case("lstm_bidirectional_lens_clip_peepholes", "LSTM", "bidirectional", 5, 3, 4, 6, 1,
         lens=[5, 3, 1], init=True, peep=True, clip=0.8)
    case("lstm_input_forget_activations", "LSTM", "forward", 4, 2, 3, 5, 2, init=True,
         input_forget=1, activations=["HardSigmoid", "LeakyRelu", "Softsign"],
         activation_alpha=[0.3, 0.05], activation_beta=[0.4])
    case("lstm_reverse_lens_batch_major", "LSTM", "reverse", 4, 3, 3, 4, 3, lens=[2, 4, 3],
         init=True, batch_major=True)
    case("lstm_bidirectional_batch_major", "LSTM", "bidirectional", 3, 2, 3, 4, 4,
         init=True, peep=True, batch_major=True)
    case("gru_reverse_linear_before_reset_lens", "GRU", "reverse", 5, 3, 4, 5, 5,
         lens=[4, 5, 2], init=True, linear_before_reset=1, clip=1.5)
    case("gru_bidirectional_activations", "GRU", "bidirectional", 4, 2, 3, 4, 6, init=True,
         activations=["HardSigmoid", "Elu", "Sigmoid", "ScaledTanh"],
         activation_alpha=[0.25, 0.8, 0.9], activation_beta=[0.45, 1.2])
    case("gru_bidirectional_lens_batch_major", "GRU", "bidirectional", 4, 3, 2, 3, 7,
         lens=[4, 1, 3], init=True, batch_major=True)
    case("rnn_bidirectional_lens_activations", "RNN", "bidirectional", 5, 3, 4, 4, 8,
         lens=[3, 5, 2], init=True, activations=["Relu", "Affine"],
         activation_alpha=[0.7], activation_beta=[0.1])
    dynamic_quantized("dynq_lstm_forward_batch3", "forward", 6, 3, 5, 8, 10)
    dynamic_quantized("dynq_lstm_bidirectional_per_channel", "bidirectional", 5, 1, 4, 6, 11,
                      per_channel=True)
    case("rnn_forward_clip_y_h_only", "RNN", "forward", 6, 2, 3, 5, 9, clip=0.5,
         outputs=("", "Y_h"))


if __name__ == "__main__":
    main()
