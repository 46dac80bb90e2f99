//! Reference networks written as ONNX models from Rust, with deterministic pseudo-random
//! weights: real architectures to compile, run and benchmark without downloading anything.
//!
//! - [`resnet18`]: ResNet-18 with torchvision's architecture (`torchvision.models.resnet18`),
//!   exported the way `torch.onnx.export` writes it (opset 13: Conv, BatchNormalization, Relu,
//!   MaxPool, Add, GlobalAveragePool, Flatten, Gemm; initializer names as in torchvision's
//!   `state_dict`). `vta zoo resnet18 -o resnet18.onnx` writes it.
//! - [`digits`]: a small CNN trained on handwritten digits, with its test data, embedded.
//! - [`sample_input`]: a deterministic pseudo-random input (standard normal, like a normalized
//!   image), for calibration and runs.
//!
//! The weights are not trained: they are drawn from a seeded generator with He-like scales
//! (`N(0, 2 / fan_in)` for convolutions) and BatchNorm statistics that are random but sane
//! (scale near 1, small shifts and means, variances in [0.5, 1.5]), with the second
//! BatchNorm of every residual branch scaled down (0.2..0.5) so activations stay in a
//! well-conditioned range through the eight residual additions. The same seed always gives the
//! same bytes.

pub mod digits;
mod resnet;
mod rng;

pub use resnet::{resnet18, resnet18_bytes, ResNetOptions, RESNET18_PARAMS};
pub use rng::Rng;

use ndarray::{ArrayD, IxDyn};

/// Serializes a model as `.onnx` bytes (the encoding side of [`crate::onnx`]'s messages).
pub fn encode_model(model: &crate::onnx::proto::ModelProto) -> Vec<u8> {
    prost::Message::encode_to_vec(model)
}

/// A deterministic pseudo-random float32 tensor of standard-normal values.
pub fn sample_input(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut rng = Rng::new(seed ^ 0x5A4D_504C_4549_4E50);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || rng.normal())
}
