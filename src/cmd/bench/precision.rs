//! `vta bench precision`: the digits CNN post-training quantized to each config's widths and
//! run on its 100 test digits, every layer checked bit-exactly against the integer reference:
//! accuracy against the labels and agreement with the fp32 model, per precision, weight
//! clipping and rounding (a benchmark of the quantizer, not a timed figure).

use anyhow::Result;
use clap::Args;
use compiler::frontend::{FrontendOptions, WeightClip, WeightRounding};

use super::super::demo::{evaluate_digits, precision};
use super::super::run::{device, Backend, RtlArgs, BACKEND_HELP};

#[derive(Args)]
pub struct PrecisionArgs {
    /// Configs to compare, comma-separated: presets, files or width variants of a preset
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "i8w8,i8w4,i4w4,i8w2,i4w2",
        value_name = "CONFIG,..."
    )]
    configs: Vec<String>,
    #[arg(long, default_value = "fsim", value_name = "BACKEND", help = BACKEND_HELP)]
    backend: Backend,
    #[command(flatten)]
    rtl: RtlArgs,
    /// Print the rows as JSON
    #[arg(long)]
    json: bool,
}

/// One measured row.
struct Row {
    config: String,
    precision: String,
    weights: &'static str,
    accel: usize,
    steps: usize,
    right: usize,
    fp32_right: usize,
    agree: usize,
    n: usize,
    checked: bool,
}

pub fn run(a: PrecisionArgs) -> Result<String> {
    a.rtl.refuse_unless_rtl(&a.backend, &[])?;
    let mut rows = Vec::new();
    for spec in &a.configs {
        let cfg = super::super::load_config(Some(spec))?;
        // Clipping and error feedback change nothing at 8 bits that round-to-nearest with a
        // max range would not give.
        // (clip, rounding, 8-bit first and last layers, name)
        let methods: &[(WeightClip, WeightRounding, bool, &str)] = if cfg.wgt_width() >= 8 {
            &[(WeightClip::Max, WeightRounding::Nearest, true, "max")]
        } else {
            &[
                (
                    WeightClip::Max,
                    WeightRounding::Nearest,
                    false,
                    "max, all layers narrow",
                ),
                (
                    WeightClip::MinError,
                    WeightRounding::ErrorFeedback,
                    false,
                    "min-error + error feedback, all layers narrow",
                ),
                (WeightClip::Max, WeightRounding::Nearest, true, "max"),
                (
                    WeightClip::MinError,
                    WeightRounding::Nearest,
                    true,
                    "min-error",
                ),
                (
                    WeightClip::MinError,
                    WeightRounding::ErrorFeedback,
                    true,
                    "min-error + error feedback",
                ),
            ]
        };
        for &(clip, rounding, keep_ends_8bit, name) in methods {
            let opts = FrontendOptions {
                weight_clip: clip,
                weight_rounding: rounding,
                keep_ends_8bit,
                ..Default::default()
            };
            let mut dev = device(&a.backend, &cfg, &a.rtl, true)?;
            let e = evaluate_digits(&cfg, &opts, dev.as_mut())?;
            rows.push(Row {
                config: spec.clone(),
                precision: precision(&cfg),
                weights: name,
                accel: e.model.counts().0,
                steps: e.model.plan.steps.len(),
                right: e.right,
                fp32_right: e.fp32_right,
                agree: e.agree,
                n: e.n,
                checked: e.samples.checked.is_some(),
            });
        }
    }
    if a.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "config": r.config,
                    "precision": r.precision,
                    "weights": r.weights,
                    "accelerator_steps": r.accel,
                    "steps": r.steps,
                    "correct": r.right,
                    "fp32_correct": r.fp32_right,
                    "same_class_as_fp32": r.agree,
                    "samples": r.n,
                    "bit_exact": r.checked,
                })
            })
            .collect();
        return Ok(super::super::json::text(&serde_json::json!({
            "bench": "precision",
            "network": "digits CNN",
            "backend": a.backend.to_string(),
            "rows": rows,
        })));
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.config.clone(),
                r.precision.clone(),
                r.weights.to_string(),
                format!("{}/{}", r.accel, r.steps),
                format!("{}/{}", r.right, r.n),
                format!("{}/{}", r.fp32_right, r.n),
                format!("{}/{}", r.agree, r.n),
                if r.checked { "yes" } else { "not checked" }.to_string(),
            ]
        })
        .collect();
    let head = [
        "config",
        "precision",
        "weights",
        "steps on accel",
        "accuracy",
        "fp32",
        "same class as fp32",
        "bit-exact",
    ];
    let right = [false, false, false, true, true, true, true, false];
    Ok(format!(
        "digits CNN, post-training quantized to each config's widths, 100 test digits on {}:\n{}",
        a.backend,
        vta_runtime::report::columns(&head, &table, &right)
    ))
}
