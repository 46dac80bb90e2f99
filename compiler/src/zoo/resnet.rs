//! ResNet-18 (torchvision's `resnet18`) as an ONNX `ModelProto`.

use super::Rng;
use crate::onnx::proto::{
    attribute_type, data_type, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};

/// Parameters of ResNet-18 with 1000 classes (torchvision's count: 11,689,512).
pub const RESNET18_PARAMS: usize = 11_689_512;

/// How to build [`resnet18`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResNetOptions {
    /// Seed of the weights.
    pub seed: u64,
    /// Input height and width (224 for ImageNet; any size from 16 keeps the architecture and
    /// layer count, with smaller feature maps).
    pub size: usize,
    /// Batch size of the input (1).
    pub batch: usize,
    /// Output classes (1000).
    pub classes: usize,
}

impl Default for ResNetOptions {
    fn default() -> Self {
        ResNetOptions {
            seed: 0,
            size: 224,
            batch: 1,
            classes: 1000,
        }
    }
}

/// Builds the graph: nodes, initializers and the generator of the weights.
struct Builder {
    rng: Rng,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    params: usize,
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i: v,
        ..Default::default()
    }
}

fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f: v,
        ..Default::default()
    }
}

fn tensor_info(name: &str, shape: &[usize]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d as i64),
                            ..Default::default()
                        })
                        .collect(),
                }),
            }),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

impl Builder {
    fn init(&mut self, name: &str, shape: &[usize], mut f: impl FnMut(&mut Rng) -> f32) {
        let n: usize = shape.iter().product();
        let mut raw = Vec::with_capacity(n * 4);
        for _ in 0..n {
            raw.extend_from_slice(&f(&mut self.rng).to_le_bytes());
        }
        if !name.contains("running_") {
            self.params += n;
        }
        self.inits.push(TensorProto {
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: data_type::FLOAT,
            name: name.into(),
            raw_data: raw,
            ..Default::default()
        });
    }

    fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        output: &str,
        attrs: Vec<AttributeProto>,
    ) -> String {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            name: name.into(),
            op_type: op.into(),
            attribute: attrs,
            ..Default::default()
        });
        output.to_string()
    }

    /// A bias-free convolution (He-normal weights, std sqrt(2 / fan_in)).
    #[allow(clippy::too_many_arguments)]
    fn conv(
        &mut self,
        scope: &str,
        module: &str,
        x: &str,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        pad: usize,
    ) -> String {
        let w = format!("{module}.weight");
        let std = (2.0 / (cin * k * k) as f32).sqrt();
        self.init(&w, &[cout, cin, k, k], |r| r.normal() * std);
        let (k, s, p) = (k as i64, stride as i64, pad as i64);
        self.node(
            "Conv",
            &format!("{scope}/Conv"),
            &[x, &w],
            &format!("{scope}/Conv_output_0"),
            vec![
                ints("dilations", &[1, 1]),
                int("group", 1),
                ints("kernel_shape", &[k, k]),
                ints("pads", &[p, p, p, p]),
                ints("strides", &[s, s]),
            ],
        )
    }

    /// BatchNorm (inference form) with random but sane statistics; `gamma` is the range of
    /// its scale.
    fn bn(&mut self, scope: &str, module: &str, x: &str, c: usize, gamma: (f32, f32)) -> String {
        let names =
            ["weight", "bias", "running_mean", "running_var"].map(|s| format!("{module}.{s}"));
        self.init(&names[0], &[c], |r| r.uniform(gamma.0, gamma.1));
        self.init(&names[1], &[c], |r| r.uniform(-0.1, 0.1));
        self.init(&names[2], &[c], |r| r.normal() * 0.1);
        self.init(&names[3], &[c], |r| r.uniform(0.5, 1.5));
        self.node(
            "BatchNormalization",
            &format!("{scope}/BatchNormalization"),
            &[x, &names[0], &names[1], &names[2], &names[3]],
            &format!("{scope}/BatchNormalization_output_0"),
            vec![float("epsilon", 1e-5), float("momentum", 0.9)],
        )
    }

    fn relu(&mut self, scope: &str, x: &str) -> String {
        self.node(
            "Relu",
            &format!("{scope}/Relu"),
            &[x],
            &format!("{scope}/Relu_output_0"),
            vec![],
        )
    }

    /// torchvision's `BasicBlock`: conv3x3-bn-relu-conv3x3-bn (+ downsample) + identity, relu.
    fn basic_block(
        &mut self,
        layer: usize,
        block: usize,
        x: &str,
        cin: usize,
        cout: usize,
        stride: usize,
    ) -> String {
        let m = format!("layer{layer}.{block}");
        let s = format!("/layer{layer}/layer{layer}.{block}");
        let y = self.conv(
            &format!("{s}/conv1"),
            &format!("{m}.conv1"),
            x,
            cin,
            cout,
            3,
            stride,
            1,
        );
        let y = self.bn(
            &format!("{s}/bn1"),
            &format!("{m}.bn1"),
            &y,
            cout,
            (0.8, 1.2),
        );
        let y = self.relu(&format!("{s}/relu"), &y);
        let y = self.conv(
            &format!("{s}/conv2"),
            &format!("{m}.conv2"),
            &y,
            cout,
            cout,
            3,
            1,
            1,
        );
        let y = self.bn(
            &format!("{s}/bn2"),
            &format!("{m}.bn2"),
            &y,
            cout,
            (0.2, 0.5),
        );
        let identity = if stride != 1 || cin != cout {
            let d = self.conv(
                &format!("{s}/downsample/downsample.0"),
                &format!("{m}.downsample.0"),
                x,
                cin,
                cout,
                1,
                stride,
                0,
            );
            self.bn(
                &format!("{s}/downsample/downsample.1"),
                &format!("{m}.downsample.1"),
                &d,
                cout,
                (0.8, 1.2),
            )
        } else {
            x.to_string()
        };
        let sum = self.node(
            "Add",
            &format!("{s}/Add"),
            &[&y, &identity],
            &format!("{s}/Add_output_0"),
            vec![],
        );
        self.node(
            "Relu",
            &format!("{s}/relu_1/Relu"),
            &[&sum],
            &format!("{s}/relu_1/Relu_output_0"),
            vec![],
        )
    }
}

/// Spatial size after a window of `k`, stride `s`, padding `p` on both sides.
fn out_size(n: usize, k: usize, s: usize, p: usize) -> usize {
    (n + 2 * p - k) / s + 1
}

/// ResNet-18 with torchvision's architecture and deterministic pseudo-random weights: conv1
/// 7x7/2 + BN + ReLU, max pool 3x3/2 (pad 1), four stages of two `BasicBlock`s (64, 128, 256,
/// 512 channels; stages 2-4 start with stride 2 and a 1x1/2 conv + BN downsample), global
/// average pool, flatten, fully connected layer (`Gemm`, transB). Input `input` float32
/// `[batch, 3, size, size]`, output `output` float32 `[batch, classes]` (logits).
///
/// Fails when `size` is too small for the five stride-2 reductions (below 16) or too large.
pub fn resnet18(opts: &ResNetOptions) -> Result<ModelProto, String> {
    if !(16..=1024).contains(&opts.size) {
        return Err(format!(
            "input size {} is outside 16..=1024 (ResNet-18 halves it five times)",
            opts.size
        ));
    }
    if !(1..=64).contains(&opts.batch) || !(1..=100_000).contains(&opts.classes) {
        return Err(format!(
            "batch {} or classes {} out of range",
            opts.batch, opts.classes
        ));
    }
    let mut b = Builder {
        rng: Rng::new(opts.seed),
        nodes: Vec::new(),
        inits: Vec::new(),
        params: 0,
    };
    let x = b.conv("/conv1", "conv1", "input", 3, 64, 7, 2, 3);
    let x = b.bn("/bn1", "bn1", &x, 64, (0.8, 1.2));
    let x = b.relu("/relu", &x);
    let mut x = b.node(
        "MaxPool",
        "/maxpool/MaxPool",
        &[&x],
        "/maxpool/MaxPool_output_0",
        vec![
            int("ceil_mode", 0),
            ints("kernel_shape", &[3, 3]),
            ints("pads", &[1, 1, 1, 1]),
            ints("strides", &[2, 2]),
        ],
    );
    let mut cin = 64;
    for (i, cout) in [64, 128, 256, 512].into_iter().enumerate() {
        let stride = if i == 0 { 1 } else { 2 };
        x = b.basic_block(i + 1, 0, &x, cin, cout, stride);
        x = b.basic_block(i + 1, 1, &x, cout, cout, 1);
        cin = cout;
    }
    let x = b.node(
        "GlobalAveragePool",
        "/avgpool/GlobalAveragePool",
        &[&x],
        "/avgpool/GlobalAveragePool_output_0",
        vec![],
    );
    let x = b.node(
        "Flatten",
        "/Flatten",
        &[&x],
        "/Flatten_output_0",
        vec![int("axis", 1)],
    );
    let bound = 1.0 / (512f32).sqrt();
    b.init("fc.weight", &[opts.classes, 512], |r| {
        r.uniform(-bound, bound)
    });
    b.init("fc.bias", &[opts.classes], |r| r.uniform(-bound, bound));
    b.node(
        "Gemm",
        "/fc/Gemm",
        &[&x, "fc.weight", "fc.bias"],
        "output",
        vec![float("alpha", 1.0), float("beta", 1.0), int("transB", 1)],
    );
    debug_assert!(opts.classes != 1000 || b.params == RESNET18_PARAMS);

    let s = opts.size;
    let final_hw = [(7, 2, 3), (3, 2, 1), (3, 2, 1), (3, 2, 1), (3, 2, 1)]
        .iter()
        .fold(s, |n, &(k, st, p)| out_size(n, k, st, p));
    debug_assert!(final_hw >= 1);
    let graph = GraphProto {
        node: b.nodes,
        name: "main_graph".into(),
        initializer: b.inits,
        input: vec![tensor_info("input", &[opts.batch, 3, s, s])],
        output: vec![tensor_info("output", &[opts.batch, opts.classes])],
        doc_string: format!(
            "ResNet-18 (torchvision architecture), {s}x{s} input, untrained deterministic \
             weights (seed {})",
            opts.seed
        ),
        ..Default::default()
    };
    Ok(ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        producer_name: "vta zoo".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(graph),
        ..Default::default()
    })
}

/// [`resnet18`] serialized as `.onnx` bytes.
pub fn resnet18_bytes(opts: &ResNetOptions) -> Result<Vec<u8>, String> {
    Ok(super::encode_model(&resnet18(opts)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchvision_parameter_count_and_determinism() {
        let small = ResNetOptions {
            size: 32,
            classes: 10,
            ..Default::default()
        };
        let m = resnet18(&small).unwrap();
        let g = m.graph.as_ref().unwrap();
        let params: i64 = g
            .initializer
            .iter()
            .map(|t| t.dims.iter().product::<i64>())
            .sum();
        // 11,689,512 parameters minus the 1000-class fc (512 * 1000 + 1000) plus a 10-class
        // one, plus the BatchNorm running statistics (buffers: 2 x 4800 channels).
        assert_eq!(params as usize, RESNET18_PARAMS - 513_000 + 5130 + 9600);
        // 20 convolutions, 20 BatchNorms, 17 ReLUs, 8 Adds, pools, flatten, fc.
        let count = |op: &str| g.node.iter().filter(|n| n.op_type == op).count();
        assert_eq!(
            (
                count("Conv"),
                count("BatchNormalization"),
                count("Relu"),
                count("Add")
            ),
            (20, 20, 17, 8)
        );
        assert_eq!(
            resnet18_bytes(&small).unwrap(),
            crate::zoo::encode_model(&m)
        );
        let other = resnet18(&ResNetOptions { seed: 1, ..small }).unwrap();
        assert_ne!(
            crate::zoo::encode_model(&other),
            crate::zoo::encode_model(&m)
        );
        assert!(resnet18(&ResNetOptions { size: 8, ..small }).is_err());
    }
}
