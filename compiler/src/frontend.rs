//! The front end's driver, the one path from ONNX to a plan that the compile driver
//! ([`crate::compile`]), the tests and the CLI all take:
//!
//! 1. [`crate::onnx::import`]: ONNX `ModelProto` to a [`Graph`], with shape inference for every
//!    node and load-time constant folding (`Constant`, `Shape`, and any op whose inputs are all
//!    constants, except `DequantizeLinear`, which carries quantized weights);
//!    Nodes it cannot import are all listed, with what would make them compile;
//! 2. [`crate::graph::passes`]: identity removal, zero Pad folding into the following Conv,
//!    SiLU/HardSwish fusion of `Mul(x, gate(x))`, BatchNorm folding into the preceding Conv,
//!    per-channel constant Mul/Add folding into Conv, MatMul + bias to Gemm, and fusion of
//!    Relu/Clip into the producing Conv/Gemm/Add;
//! 3. [`crate::quant`]: lowering to a [`Plan`] of accelerator layers ([`crate::qlayer`]) and
//!    exact CPU steps, with a [`SupportTable`] saying what happened to every ONNX node.

use std::path::Path;

use ndarray::ArrayD;

use crate::graph::{passes, Graph, Plan, SupportTable};
use crate::onnx::import::ImportError;
pub use crate::quant::{
    ActivationClip, FrontendOptions, RequantFidelity, WeightClip, WeightRounding,
};

/// Decodes an ONNX model from bytes (`source` names it in errors), imports it into the graph
/// IR, refusing tensors beyond `memory_budget` bytes (see [`vta_runtime::budget`]), and
/// simplifies it (steps 1 and 2).
pub fn import_graph(onnx: &[u8], source: &str, memory_budget: u64) -> Result<Graph, FrontendError> {
    import_graph_shaped(onnx, source, memory_budget, &[])
}

/// [`import_graph`] with the shapes of inputs fixed by name (see
/// [`FrontendOptions::input_shapes`]).
pub fn import_graph_shaped(
    onnx: &[u8],
    source: &str,
    memory_budget: u64,
    input_shapes: &[(String, Vec<usize>)],
) -> Result<Graph, FrontendError> {
    let model = crate::onnx::decode_model(onnx, source)?;
    let mut g = crate::onnx::import::import(&model, source, memory_budget, input_shapes)?;
    passes::simplify(&mut g);
    Ok(g)
}

/// Why the front end failed: the file and what is wrong, or the support table of a model
/// with nodes the compiler cannot run.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    #[error(transparent)]
    Onnx(#[from] crate::onnx::OnnxError),
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("{file}: {count} node(s) cannot be compiled:\n{table}")]
    Unsupported {
        file: String,
        count: usize,
        table: SupportTable,
    },
    #[error("{file}: calibration: {message}")]
    Calibration { file: String, message: String },
    #[error("{file}: {message}")]
    Other { file: String, message: String },
}

/// Loads an ONNX model, imports and simplifies it, quantizes it if it is a float model (with
/// the calibration inputs: one array per sample or batch for the model's single float input,
/// shaped like the input or with a leading batch axis that is a multiple of the model's batch)
/// and lowers it to a [`Plan`] for the accelerator described by `cfg`.
///
/// Returns the plan and the op-support table (one entry per ONNX node: offloaded to which
/// layer, CPU fallback and why, or removed/fused). Fails with [`FrontendError::Unsupported`]
/// (carrying the table) when any node can be neither offloaded nor run on the CPU.
pub fn load_and_plan(
    model_path: &Path,
    calibration: &[ArrayD<f32>],
    cfg: &isa::HwConfig,
    opts: &FrontendOptions,
) -> Result<(Plan, SupportTable), FrontendError> {
    let file = model_path.display().to_string();
    let bytes = std::fs::read(model_path).map_err(|e| FrontendError::Other {
        file: file.clone(),
        message: format!("cannot read the model: {e}"),
    })?;
    let g = import_graph_shaped(&bytes, &file, opts.memory_budget, &opts.input_shapes)?;
    crate::quant::plan_graph(&g, calibration, cfg, opts)
}

/// Reads calibration samples from `.npy` files (float32 or float64, any integer type
/// converted to float), one array per file.
pub fn load_calibration_npy(paths: &[&Path]) -> Result<Vec<ArrayD<f32>>, FrontendError> {
    paths
        .iter()
        .map(|p| {
            let file = p.display().to_string();
            let a = isa::npy::read_file(p).map_err(|e| FrontendError::Calibration {
                file: file.clone(),
                message: e.to_string(),
            })?;
            let x = npy_to_f32(&a).map_err(|message| FrontendError::Calibration {
                file: file.clone(),
                message,
            })?;
            if x.is_empty() {
                return Err(FrontendError::Calibration {
                    file,
                    message: format!(
                        "the file holds no samples (shape {:?}): calibration needs at least one",
                        x.shape()
                    ),
                });
            }
            Ok(x)
        })
        .collect()
}

/// Converts a `.npy` array to f32.
pub fn npy_to_f32(a: &isa::npy::Array) -> Result<ArrayD<f32>, String> {
    use isa::npy::Elem;
    let d = &a.data;
    let v: Vec<f32> = match a.elem {
        Elem::F32 => d
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
            .collect(),
        Elem::F64 => d
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8")) as f32)
            .collect(),
        Elem::I8 => d.iter().map(|&b| b as i8 as f32).collect(),
        Elem::U8 => d.iter().map(|&b| b as f32).collect(),
        Elem::I16 => d
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes(c.try_into().expect("2")) as f32)
            .collect(),
        Elem::U16 => d
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes(c.try_into().expect("2")) as f32)
            .collect(),
        Elem::I32 => d
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().expect("4")) as f32)
            .collect(),
        Elem::U32 => d
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4")) as f32)
            .collect(),
        Elem::I64 => d
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as f32)
            .collect(),
    };
    ArrayD::from_shape_vec(ndarray::IxDyn(&a.shape), v).map_err(|e| e.to_string())
}
