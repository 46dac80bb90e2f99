#!/usr/bin/env python3
"""Makes compiler/tests/data/ortq/edge_qop.onnx and its data: a small model whose onnxruntime
QOperator form uses the com.microsoft element-wise operators (Conv, SiLU as QLinearSigmoid and
QLinearMul, Conv, QLinearLeakyRelu, QLinearConcat, Conv, QLinearAveragePool), quantized with
quantize_static's defaults; edge_inputs.npy (4 inputs) and edge_qop_ort.npy (onnxruntime's
outputs on them). Needs numpy, onnx and onnxruntime:

    python3 scripts/ort-quant-edge.py compiler/tests/data/ortq
"""
import numpy as np, onnx, os, sys
from onnx import helper, TensorProto, numpy_helper
from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader
import onnxruntime as ort
rng=np.random.default_rng(3)
def w(name, shape, s=0.3): return numpy_helper.from_array((rng.standard_normal(shape)*s).astype(np.float32), name)
inits=[w("w1",[16,3,3,3]),w("b1",[16],0.1),w("w2",[16,16,1,1]),w("w3",[16,32,1,1])]
nodes=[helper.make_node("Conv",["x","w1","b1"],["c1"],pads=[1,1,1,1],name="c1"),
 helper.make_node("Sigmoid",["c1"],["s"],name="sig"),
 helper.make_node("Mul",["c1","s"],["silu"],name="mul"),
 helper.make_node("Conv",["silu","w2"],["c2"],name="c2"),
 helper.make_node("LeakyRelu",["c2"],["lr"],alpha=0.1,name="lrelu"),
 helper.make_node("Concat",["silu","lr"],["cat"],axis=1,name="cat"),
 helper.make_node("Conv",["cat","w3"],["c3"],name="c3"),
 helper.make_node("AveragePool",["c3"],["ap"],kernel_shape=[2,2],strides=[2,2],name="avg")]
g=helper.make_graph(nodes,"edge",[helper.make_tensor_value_info("x",TensorProto.FLOAT,[1,3,8,8])],[helper.make_tensor_value_info("ap",TensorProto.FLOAT,[1,16,4,4])],inits)
m=helper.make_model(g,opset_imports=[helper.make_opsetid("",13)]); m.ir_version=8
out=sys.argv[1]; os.makedirs(out,exist_ok=True)
onnx.save(m,"/tmp/ortq_edge_f.onnx")
class R(CalibrationDataReader):
    def __init__(s): s.it=iter([{"x":rng.standard_normal((1,3,8,8)).astype(np.float32)} for _ in range(8)])
    def get_next(s): return next(s.it,None)
p=os.path.join(out,"edge_qop.onnx")
quantize_static("/tmp/ortq_edge_f.onnx",p,R(),quant_format=QuantFormat.QOperator,activation_type=QuantType.QUInt8,weight_type=QuantType.QInt8)
mq=onnx.load(p); print(sorted(set((n.domain,n.op_type) for n in mq.graph.node)))
xs=np.random.default_rng(9).standard_normal((4,3,8,8)).astype(np.float32)
s=ort.InferenceSession(p,providers=["CPUExecutionProvider"])
y=np.concatenate([s.run(None,{"x":x[None]})[0] for x in xs])
np.save(os.path.join(out,"edge_inputs.npy"),xs); np.save(os.path.join(out,"edge_qop_ort.npy"),y)
