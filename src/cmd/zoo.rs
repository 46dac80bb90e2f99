//! `vta zoo`: write a reference network as an ONNX model.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::{Args, ValueEnum};
use compiler::zoo::{self, ResNetOptions};
use isa::npy;
use vta_runtime::io as runtime;

#[derive(Clone, Copy, ValueEnum)]
pub enum Net {
    /// ResNet-18, torchvision's architecture (float32, opset 13)
    Resnet18,
}

#[derive(Args)]
pub struct ZooArgs {
    /// The network
    #[arg(value_enum)]
    net: Net,
    /// ONNX file to write [default: NET.onnx]
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Seed of the deterministic pseudo-random weights
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Input height and width
    #[arg(long, default_value_t = 224)]
    size: usize,
    /// Also write a deterministic pseudo-random input (float32, standard normal) to this
    /// .npy file, for `vta compile --calibrate` and `vta run --input`
    #[arg(long, value_name = "X.npy")]
    sample: Option<PathBuf>,
}

pub fn run(a: ZooArgs) -> Result<String> {
    let opts = ResNetOptions {
        seed: a.seed,
        size: a.size,
        ..Default::default()
    };
    let bytes = match a.net {
        Net::Resnet18 => zoo::resnet18_bytes(&opts).map_err(|e| anyhow!("resnet18: {e}"))?,
    };
    let path = a.output.unwrap_or_else(|| PathBuf::from("resnet18.onnx"));
    std::fs::write(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
    let mut text = String::new();
    writeln!(
        text,
        "{}: ResNet-18 (torchvision architecture), input 'input' float[1, 3, {s}, {s}], output 'output' float[1, 1000], {} parameters, untrained weights from seed {}, {:.1} MB",
        path.display(),
        zoo::RESNET18_PARAMS,
        a.seed,
        bytes.len() as f64 / 1e6,
        s = a.size
    )?;
    if let Some(sample) = a.sample {
        let x = compiler::graph::Tensor::F32(zoo::sample_input(&[1, 3, a.size, a.size], a.seed));
        let (elem, shape, data) = runtime::tensor_to_npy(&x);
        npy::write_file(&sample, elem, &shape, &data)
            .with_context(|| format!("cannot write {}", sample.display()))?;
        writeln!(
            text,
            "{}: a pseudo-random input float[1, 3, {s}, {s}] (seed {})",
            sample.display(),
            a.seed,
            s = a.size
        )?;
    }
    Ok(text)
}
