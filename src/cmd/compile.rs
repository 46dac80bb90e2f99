//! `vta compile`: an ONNX model to a compiled model file (plan + accelerator programs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::{
    load_calibration_npy, ActivationClip, FrontendOptions, RequantFidelity, WeightClip,
    WeightRounding,
};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

#[derive(Args)]
pub struct CompileArgs {
    /// ONNX model (float32, QDQ or QOperator; int4/int2 QDQ, Brevitas QCDQ and QONNX Quant too)
    model: PathBuf,
    /// Compiled model to write [default: MODEL with the extension .vtab]
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[arg(long, value_name = "FILE|PRESET", help = super::CONFIG_HELP)]
    config: Option<String>,
    /// Calibration inputs of a float model (.npy, float32): samples of the model's input, or
    /// several stacked along the first axis; repeat the option for more files. The ranges
    /// found are stored in the compiled model
    #[arg(long, value_name = "X.npy")]
    calibrate: Vec<PathBuf>,
    /// Offload a quantized (QDQ/QOperator) layer only when the accelerator's requantization
    /// is bit-identical to ONNX's; others run on the CPU exactly [default: offload layers
    /// provably within 1 LSB of ONNX]
    #[arg(long)]
    bit_exact: bool,
    /// Give every accelerator layer a device launch of its own, for per-layer device
    /// counters in `vta run` (a residual add that runs in the epilogue of the convolution
    /// feeding it shares that convolution's) [default: one launch per run of consecutive
    /// accelerator layers, activations staying in device memory between them]
    #[arg(long)]
    launch_per_layer: bool,
    /// Give every branch launches of its own: a new launch where an accelerator layer does
    /// not read the layer before it, at a fork and at a join of independent branches
    /// (inception branches, fire-module expands, detection heads), so that
    /// `vta run --schedule by-op|by-path|dynamic` can run independent branches on different
    /// devices at once [default: branches share a launch, activations staying in device
    /// memory]
    #[arg(long)]
    split_branches: bool,
    /// Run depthwise convolutions on the GEMM core with diagonal weight tiles: fewer cycles,
    /// but BLOCK_IN times their real MACs [default: on the ALU, at their real MACs, on configs
    /// with ALU MUL]
    #[arg(long)]
    depthwise_on_gemm: bool,
    #[arg(long, value_name = "SIZE", value_parser = vta_runtime::budget::parse_size, help = super::MEMORY_BUDGET_HELP)]
    memory_budget: Option<u64>,
    /// Fix the shape of a model input whose dimensions besides the batch are symbolic
    /// (e.g. an OCR model's `x` of 1x3x48xW): NAME=DIMS such as x=1x3x48x320 (or just DIMS
    /// for a model with one input); dimensions the model fixes must agree. Repeat per input
    #[arg(long, value_name = "NAME=DIMS", value_parser = parse_input_shape)]
    input_shape: Vec<(Option<String>, Vec<usize>)>,
    /// How post-training quantization chooses each output channel's weight range: max (no
    /// weight clipped), min-error (the range with the least squared error), auto (min-error
    /// below 8-bit weights). The config's widths set the precision (`--config i4w4`)
    #[arg(long, value_enum, default_value = "auto", value_name = "HOW")]
    weight_clip: WeightClipArg,
    /// How post-training quantization rounds weights: nearest (each weight to its nearest
    /// level), error-feedback (GPTQ-style: each rounding's error compensated by the weights
    /// not yet rounded, over the calibration inputs), auto (error-feedback below 8-bit
    /// weights)
    #[arg(long, value_enum, default_value = "auto", value_name = "HOW")]
    weight_rounding: WeightRoundingArg,
    /// Below 8-bit weights, keep the first and the last layer's weights at 8 bits (where a
    /// network loses the most accuracy; a core with narrower weight lanes runs those two
    /// layers bit-sliced, one GEMM pass per weight digit)
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    keep_ends_8bit: bool,
    /// How post-training quantization chooses each activation's range: max (the largest
    /// magnitude over the calibration samples), min-error (the range with the least squared
    /// quantization error over them), auto (min-error below 8-bit activations)
    #[arg(long, value_enum, default_value = "auto", value_name = "HOW")]
    activation_clip: WeightClipArg,
    /// Print the report as JSON (output file, op-support table, step counts, launches,
    /// compile times)
    #[arg(long)]
    json: bool,
}

/// `--weight-clip` and `--activation-clip`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WeightClipArg {
    Max,
    MinError,
    Auto,
}

impl From<WeightClipArg> for WeightClip {
    fn from(a: WeightClipArg) -> Self {
        match a {
            WeightClipArg::Max => WeightClip::Max,
            WeightClipArg::MinError => WeightClip::MinError,
            WeightClipArg::Auto => WeightClip::Auto,
        }
    }
}

impl From<WeightClipArg> for ActivationClip {
    fn from(a: WeightClipArg) -> Self {
        match a {
            WeightClipArg::Max => ActivationClip::Max,
            WeightClipArg::MinError => ActivationClip::MinError,
            WeightClipArg::Auto => ActivationClip::Auto,
        }
    }
}

/// `--weight-rounding`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WeightRoundingArg {
    Nearest,
    ErrorFeedback,
    Auto,
}

impl From<WeightRoundingArg> for WeightRounding {
    fn from(a: WeightRoundingArg) -> Self {
        match a {
            WeightRoundingArg::Nearest => WeightRounding::Nearest,
            WeightRoundingArg::ErrorFeedback => WeightRounding::ErrorFeedback,
            WeightRoundingArg::Auto => WeightRounding::Auto,
        }
    }
}

/// `x=1x3x48x320` (or `1,3,48,320`), or the dimensions alone.
fn parse_input_shape(s: &str) -> std::result::Result<(Option<String>, Vec<usize>), String> {
    let (name, dims) = match s.rsplit_once('=') {
        Some((n, d)) if !n.is_empty() => (Some(n.to_string()), d),
        Some((_, _)) => return Err(format!("'{s}' has no input name before '='")),
        None => (None, s),
    };
    let dims: Vec<usize> = dims
        .split(['x', ','])
        .map(|d| d.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            format!(
                "'{s}' is not a shape: give NAME=DIMS with dimensions of at least 1 separated \
                 by x, e.g. x=1x3x48x320"
            )
        })?;
    Ok((name, dims))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub fn run(a: CompileArgs) -> Result<String> {
    let t_all = Instant::now();
    let cfg = super::load_config(a.config.as_deref())?;
    let onnx = super::read_input(&a.model)?;
    let t = Instant::now();
    let paths: Vec<&Path> = a.calibrate.iter().map(|p| p.as_path()).collect();
    let calibration = load_calibration_npy(&paths)?;
    let t_read_calib = t.elapsed();
    let opts = FrontendOptions {
        fidelity: if a.bit_exact {
            RequantFidelity::BitExact
        } else {
            RequantFidelity::WithinOneLsb
        },
        memory_budget: a.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
        input_shapes: a
            .input_shape
            .into_iter()
            .map(|(n, d)| (n.unwrap_or_default(), d))
            .collect(),
        weight_clip: a.weight_clip.into(),
        weight_rounding: a.weight_rounding.into(),
        keep_ends_8bit: a.keep_ends_8bit,
        activation_clip: a.activation_clip.into(),
        ..Default::default()
    };
    let source = a.model.display().to_string();
    let path = a.output.unwrap_or_else(|| a.model.with_extension("vtab"));
    if same_file(&path, &a.model) {
        anyhow::bail!(
            "-o {}: that is the model being compiled; writing the compiled model there would \
             overwrite it (choose another output file)",
            path.display()
        );
    }
    let model = {
        let progress = super::progress::Progress::spinner(&format!("compiling {source}"));
        let backend = BackendOptions {
            launch_per_layer: a.launch_per_layer,
            depthwise_on_gemm: a.depthwise_on_gemm,
            split_branches: a.split_branches,
        };
        Compiled::compile_observed(
            onnx,
            &source,
            &calibration,
            &cfg,
            &opts,
            &backend,
            &mut |s| progress.message(s),
        )?
    };
    let bytes = model
        .to_bytes()
        .with_context(|| format!("{source}: cannot write the compiled model"))?;
    std::fs::write(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;

    if a.json {
        return Ok(super::json::text(&compile_json(
            &model,
            &source,
            &path,
            bytes.len(),
            t_all.elapsed(),
        )));
    }
    let mut text = String::new();
    writeln!(
        text,
        "{source}: compiled for {} -> {} ({:.1} KiB)",
        cfg.config_string(),
        path.display(),
        bytes.len() as f64 / 1024.0
    )?;
    text.push_str(&model.compile_report());
    let tm = &model.times;
    let calib = match model.calibration_samples {
        Some(samples) => format!(
            "; calibration {} ({samples} sample(s), {} file(s) read in {})",
            ms(tm.calibration),
            a.calibrate.len(),
            ms(t_read_calib)
        ),
        None if !a.calibrate.is_empty() => {
            "; the calibration inputs were not needed (the model is already quantized)".into()
        }
        None => String::new(),
    };
    writeln!(
        text,
        "compile time: {} (import {}, quantization and lowering {}, back end {}){calib}; {} in all",
        ms(tm.compile()),
        ms(tm.import),
        ms(tm.lowering),
        ms(tm.backend),
        ms(t_all.elapsed())
    )?;
    Ok(text)
}

/// The `--json` document of a compile: [`Compiled::report_json`] with the model file, the
/// output file, its size and the total time.
fn compile_json(
    model: &Compiled,
    source: &str,
    path: &Path,
    bytes: usize,
    total: Duration,
) -> serde_json::Value {
    let serde_json::Value::Object(report) = model.report_json() else {
        unreachable!("the compile report is an object")
    };
    let mut doc = serde_json::Map::new();
    doc.insert("model".into(), source.into());
    doc.insert("output".into(), path.display().to_string().into());
    doc.insert("bytes".into(), bytes.into());
    for (k, mut v) in report {
        if k == "model" {
            continue;
        }
        if let (true, Some(times)) = (k == "times_ms", v.as_object_mut()) {
            times.insert("total".into(), super::json::ms(total).into());
        }
        doc.insert(k, v);
    }
    serde_json::Value::Object(doc)
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_input_shape;

    #[test]
    fn input_shapes_parse_with_or_without_a_name() {
        assert_eq!(
            parse_input_shape("x=1x3x48x320"),
            Ok((Some("x".into()), vec![1, 3, 48, 320]))
        );
        assert_eq!(parse_input_shape("1,3,8,8"), Ok((None, vec![1, 3, 8, 8])));
        // Names may contain '=' only before the last one.
        assert_eq!(
            parse_input_shape("a=b=2x2"),
            Ok((Some("a=b".into()), vec![2, 2]))
        );
        for bad in ["x=1x0x4", "x=", "=1x3", "x=1xx3", "x=-1x3"] {
            assert!(parse_input_shape(bad).is_err(), "{bad}");
        }
        assert!(parse_input_shape("=1x3")
            .unwrap_err()
            .contains("no input name"));
    }
}
