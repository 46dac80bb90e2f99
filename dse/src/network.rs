//! The network a sweep compiles: a built-in one (the digits CNN, ResNet-18 from the zoo) or an
//! ONNX file, imported and calibrated once and compiled for every config.

use std::path::{Path, PathBuf};

use compiler::compile::{BackendOptions, Compiled, Imported};
use compiler::frontend::{load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::zoo::{self, digits, ResNetOptions};
use vta_runtime::model::Model;
use vta_runtime::tensor::{DType, Tensor};

use crate::Error;

/// Which network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkSpec {
    /// The embedded trained digits CNN (8x8 inputs), calibrated on its embedded samples.
    Digits,
    /// ResNet-18 from the zoo (seed 0) at `size` x `size`, calibrated on one pseudo-random
    /// sample.
    Resnet18 { size: usize },
    /// An ONNX file; a float model needs calibration inputs (.npy).
    File {
        path: PathBuf,
        calibration: Vec<PathBuf>,
    },
}

impl NetworkSpec {
    /// A short name for tables and file names: `digits`, `resnet18`, `resnet18-56`, or the
    /// file's stem.
    pub fn name(&self) -> String {
        match self {
            NetworkSpec::Digits => "digits".into(),
            NetworkSpec::Resnet18 { size: 224 } => "resnet18".into(),
            NetworkSpec::Resnet18 { size } => format!("resnet18-{size}"),
            NetworkSpec::File { path, .. } => path
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
        }
    }
}

/// A network ready to be compiled for any config.
pub struct Network {
    /// [`NetworkSpec::name`].
    pub name: String,
    /// A hash of the ONNX bytes and the calibration inputs (16 hex digits): what the
    /// compiled programs depend on besides the config.
    pub hash: String,
    imported: Imported,
    opts: FrontendOptions,
}

impl Network {
    /// Reads (or builds) the network, imports it and calibrates it.
    pub fn load(spec: &NetworkSpec) -> Result<Network, Error> {
        let (onnx, source, calibration) = match spec {
            NetworkSpec::Digits => {
                let calib = isa::npy::decode(digits::CALIBRATION_NPY)
                    .map_err(|e| Error::Network(format!("embedded digits calibration: {e}")))?;
                let calib = npy_to_f32(&calib)
                    .map_err(|e| Error::Network(format!("embedded digits calibration: {e}")))?;
                (
                    digits::ONNX.to_vec(),
                    "digits CNN (embedded tiny_cnn.onnx)".to_string(),
                    vec![calib],
                )
            }
            NetworkSpec::Resnet18 { size } => {
                let opts = ResNetOptions {
                    size: *size,
                    ..Default::default()
                };
                let onnx = zoo::resnet18_bytes(&opts)
                    .map_err(|e| Error::Network(format!("resnet18: {e}")))?;
                let sample = zoo::sample_input(&[1, 3, *size, *size], 0);
                (
                    onnx,
                    format!("ResNet-18 ({size}x{size}, zoo seed 0)"),
                    vec![sample],
                )
            }
            NetworkSpec::File { path, calibration } => {
                let onnx = std::fs::read(path)
                    .map_err(|e| Error::Network(format!("cannot read {}: {e}", path.display())))?;
                let paths: Vec<&Path> = calibration.iter().map(|p| p.as_path()).collect();
                let calib = load_calibration_npy(&paths)?;
                (onnx, path.display().to_string(), calib)
            }
        };
        let mut hash_input = onnx.clone();
        for a in &calibration {
            hash_input.extend(a.iter().flat_map(|x| x.to_le_bytes()));
        }
        // Every layer narrow: a design point must run the whole network on its accelerator,
        // and a narrower core cannot run 8-bit first and last layers (no bit-sliced layers
        // yet), so keeping them at 8 bits would take every narrow config off the front.
        let opts = FrontendOptions {
            keep_ends_8bit: false,
            ..FrontendOptions::default()
        };
        let imported = Imported::new(&onnx, &source, &calibration, &opts, &mut |_| {})?;
        Ok(Network {
            name: spec.name(),
            hash: format!("{:016x}", isa::container::fnv1a(&hash_input)),
            imported,
            opts,
        })
    }

    /// The network compiled for `cfg` (one launch per run of consecutive accelerator steps,
    /// as `vta compile` does).
    pub fn compile(&self, cfg: &isa::HwConfig) -> Result<Compiled, Error> {
        Ok(Compiled::compile_imported(
            &self.imported,
            cfg,
            &self.opts,
            &BackendOptions::default(),
            &mut |_| {},
        )?)
    }
}

/// Deterministic inputs for `model`'s inputs (a standard-normal sample for float inputs,
/// zeros otherwise): the accelerator's cycles do not depend on the data.
pub fn sample_inputs(model: &Model) -> Vec<Tensor> {
    model
        .plan
        .inputs
        .iter()
        .map(|&v| {
            let fact = &model.plan.values[v].fact;
            let shape = ndarray::IxDyn(&fact.shape);
            match fact.dtype {
                DType::F32 => Tensor::F32(zoo::sample_input(&fact.shape, 0)),
                DType::I8 => Tensor::I8(ndarray::ArrayD::zeros(shape)),
                DType::U8 => Tensor::U8(ndarray::ArrayD::zeros(shape)),
                DType::I32 => Tensor::I32(ndarray::ArrayD::zeros(shape)),
                DType::I64 => Tensor::I64(ndarray::ArrayD::zeros(shape)),
            }
        })
        .collect()
}
