//! `vta demo`: the toolkit's main job on its embedded default — compile a real trained
//! network (the digits CNN of `compiler::zoo::digits`) for an accelerator config, run its 100
//! held-out test digits on a backend, check every layer bit-exactly against the integer
//! reference, and report accuracy against the fp32 model.

use std::fmt::Write as _;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::{npy_to_f32, FrontendOptions};
use compiler::graph::Tensor;
use compiler::zoo::digits;
use isa::npy;
use vta_runtime::io as runtime;

use super::run::{device, run_samples, Backend, RtlArgs, Samples, BACKEND_HELP};

#[derive(Args)]
pub struct DemoArgs {
    /// Accelerator config (JSON file or preset) to compile for
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    #[arg(long, default_value = "fsim", value_name = "BACKEND", help = BACKEND_HELP)]
    backend: Backend,
    #[command(flatten)]
    rtl: RtlArgs,
}

fn embedded(name: &str, bytes: &[u8]) -> Result<npy::Array> {
    npy::decode(bytes).map_err(|e| anyhow!("embedded {name}: {e}"))
}

/// Index of the largest score (the first one on ties).
fn argmax(v: &[f32]) -> usize {
    (0..v.len())
        .max_by(|&i, &j| v[i].total_cmp(&v[j]).then(j.cmp(&i)))
        .unwrap_or(0)
}

/// The class of each row of a [N, classes] float32 array.
fn argmax_rows(a: &npy::Array) -> Vec<usize> {
    let scores: Vec<f32> = a
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    scores.chunks_exact(a.shape[1]).map(argmax).collect()
}

/// The digits CNN compiled for a config and run on its 100 test digits.
pub struct DigitsEval {
    pub model: Compiled,
    pub samples: Samples,
    /// Test digits, and how many the accelerator's model, and the fp32 model, got right.
    pub n: usize,
    pub right: usize,
    pub fp32_right: usize,
    /// Digits on which the accelerator's model gives the fp32 model's class.
    pub agree: usize,
}

pub const SOURCE: &str = "digits CNN (embedded tiny_cnn.onnx)";

/// Compiles the embedded digits CNN for `cfg` (post-training quantized to its widths with
/// `opts`) and runs the test digits on `dev`, checking every layer against the integer
/// reference.
pub fn evaluate_digits(
    cfg: &isa::HwConfig,
    opts: &FrontendOptions,
    dev: &mut dyn drivers::Device,
) -> Result<DigitsEval> {
    let calib =
        npy_to_f32(&embedded("calibration", digits::CALIBRATION_NPY)?).map_err(|e| anyhow!(e))?;
    let model = {
        let progress = super::progress::Progress::spinner("compiling the digits CNN");
        Compiled::compile_observed(
            digits::ONNX.to_vec(),
            SOURCE,
            &[calib],
            cfg,
            opts,
            &BackendOptions::default(),
            &mut |s| progress.message(s),
        )?
    };
    let test = embedded("test digits", digits::TEST_NPY)?;
    let labels = embedded("labels", digits::TEST_LABELS_NPY)?;
    let labels: Vec<usize> = labels
        .data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as usize)
        .collect();
    let fp32 = argmax_rows(&embedded("fp32 outputs", digits::FP32_OUTPUT_NPY)?);
    let input =
        runtime::tensor_from_npy(&test).map_err(|e| anyhow!("embedded test digits: {e}"))?;
    let runs = model
        .model
        .split_samples(vec![input])
        .map_err(|e| anyhow!("embedded test digits: {e}"))?;
    let samples = run_samples(&model, dev, &runs, true, SOURCE).context("the digits run failed")?;
    let ours = samples.outputs[0]
        .iter()
        .map(|t| match t {
            Tensor::F32(a) => Ok(argmax(&a.iter().copied().collect::<Vec<f32>>())),
            other => Err(anyhow!(
                "the digits model gave {} instead of float32 scores",
                other.fact()
            )),
        })
        .collect::<Result<Vec<usize>>>()?;
    let right = |p: &[usize]| p.iter().zip(&labels).filter(|(a, b)| a == b).count();
    Ok(DigitsEval {
        n: labels.len(),
        right: right(&ours),
        fp32_right: right(&fp32),
        agree: ours.iter().zip(&fp32).filter(|(a, b)| a == b).count(),
        model,
        samples,
    })
}

/// `int8`, or `w4a4` for other widths.
pub fn precision(cfg: &isa::HwConfig) -> String {
    match (cfg.wgt_width(), cfg.inp_width()) {
        (8, 8) => "int8".into(),
        (w, a) => format!("w{w}a{a}"),
    }
}

pub fn run(a: DemoArgs) -> Result<String> {
    a.rtl.refuse_unless_rtl(&a.backend, &[])?;
    let cfg = super::load_config(a.config.as_deref())?;
    let mut dev = device(&a.backend, &cfg, &a.rtl, true)?;
    let e = evaluate_digits(&cfg, &FrontendOptions::default(), dev.as_mut())?;
    let (model, n) = (&e.model, e.n);
    let (na, nc) = model.counts();
    let mut text = String::new();
    writeln!(text, "{SOURCE}")?;
    writeln!(
        text,
        "compiled for {} in {:.1} ms: {} steps, {na} on the accelerator, {nc} on the CPU",
        cfg.config_string(),
        model.times.compile().as_secs_f64() * 1e3,
        model.plan.steps.len()
    )?;
    writeln!(
        text,
        "ran {n} test digits on {}; per layer, summed:",
        e.samples.total.backend
    )?;
    text.push_str(&e.samples.total.table());
    if let Some((layers, accel, elements)) = e.samples.checked {
        writeln!(
            text,
            "bit-exact against the integer reference: {n} digits x {layers} layers ({accel} on the accelerator), {elements} elements{}",
            super::run::race_free(&a.backend)
        )?;
    }
    writeln!(
        text,
        "accuracy: accelerator ({}) {}/{n}, fp32 model {}/{n}; same class as fp32 on {}/{n}",
        precision(&cfg),
        e.right,
        e.fp32_right,
        e.agree
    )?;
    Ok(text)
}
