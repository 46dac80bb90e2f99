//! `RNN`, `GRU`, `LSTM` and onnxruntime's `com.microsoft.DynamicQuantizeLSTM` from the
//! attributes of an ONNX node; the ops themselves (facts, semantics) are
//! `vta_runtime::ops::rnn`.

pub use vta_runtime::ops::rnn::*;

use super::{FromOnnx, ParseCtx};

/// The activation functions named by the node, with their `activation_alpha`/`beta`: the
/// values are consumed in order by the functions that take them (as onnxruntime reads the
/// lists), a missing one is the default of the ONNX operator of that name.
fn activations(ctx: &ParseCtx, cell: Cell, dirs: usize) -> Result<Vec<Func>, String> {
    let Some(names) = ctx.strings("activations")? else {
        return Ok(cell.default_activations().repeat(dirs));
    };
    let mut alphas = ctx
        .floats("activation_alpha")?
        .unwrap_or_default()
        .into_iter();
    let mut betas = ctx
        .floats("activation_beta")?
        .unwrap_or_default()
        .into_iter();
    let mut funcs = Vec::with_capacity(names.len());
    for name in &names {
        let mut alpha = |d: f32| alphas.next().unwrap_or(d);
        let f = match name.to_ascii_lowercase().as_str() {
            "relu" => Func::Relu,
            "tanh" => Func::Tanh,
            "sigmoid" => Func::Sigmoid,
            "affine" => Func::Affine {
                alpha: alpha(1.0),
                beta: betas.next().unwrap_or(0.0),
            },
            "leakyrelu" => Func::LeakyRelu { alpha: alpha(0.01) },
            "thresholdedrelu" => Func::ThresholdedRelu { alpha: alpha(1.0) },
            "scaledtanh" => Func::ScaledTanh {
                alpha: alpha(1.0),
                beta: betas.next().unwrap_or(1.0),
            },
            "hardsigmoid" => Func::HardSigmoid {
                alpha: alpha(0.2),
                beta: betas.next().unwrap_or(0.5),
            },
            "elu" => Func::Elu { alpha: alpha(1.0) },
            "softsign" => Func::Softsign,
            "softplus" => Func::Softplus,
            other => {
                return Err(format!(
                    "activation function '{other}' is not one of ONNX's (Relu, Tanh, Sigmoid, \
                     Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, \
                     Softsign, Softplus)"
                ))
            }
        };
        funcs.push(f);
    }
    let per_dir = cell.default_activations().len();
    if funcs.len() != per_dir * dirs {
        return Err(format!(
            "attribute 'activations' names {} functions; {} with {dirs} direction(s) takes {} \
             ({per_dir} per direction, the forward direction's first)",
            funcs.len(),
            cell.op_type(),
            per_dir * dirs
        ));
    }
    Ok(funcs)
}

impl FromOnnx for Recurrent {
    fn parse(ctx: &ParseCtx) -> Result<Recurrent, String> {
        let cell = match ctx.node.op_type.as_str() {
            "RNN" => Cell::Rnn,
            "GRU" => Cell::Gru {
                linear_before_reset: ctx.int("linear_before_reset", 0)? != 0,
            },
            _ => Cell::Lstm {
                input_forget: ctx.int("input_forget", 0)? != 0,
            },
        };
        let direction = match ctx.string("direction")?.as_deref() {
            None | Some("forward") => Direction::Forward,
            Some("reverse") => Direction::Reverse,
            Some("bidirectional") => Direction::Bidirectional,
            Some(other) => {
                return Err(format!(
                    "attribute 'direction' is '{other}'; it must be forward, reverse or \
                     bidirectional"
                ))
            }
        };
        let hidden_size = ctx
            .opt_int("hidden_size")?
            .map(|h| {
                usize::try_from(h)
                    .ok()
                    .filter(|&h| h > 0)
                    .ok_or_else(|| format!("hidden_size must be positive, got {h}"))
            })
            .transpose()?;
        let clip = ctx.opt_float("clip")?;
        if let Some(c) = clip {
            if c.is_nan() || c <= 0.0 {
                return Err(format!("attribute 'clip' must be positive, got {c}"));
            }
        }
        let layout = ctx.int("layout", 0)?;
        if !(0..=1).contains(&layout) {
            return Err(format!("attribute 'layout' must be 0 or 1, got {layout}"));
        }
        Ok(Recurrent {
            cell,
            direction,
            hidden_size,
            activations: activations(ctx, cell, direction.count())?,
            clip,
            batch_major: layout == 1,
            quantized: ctx.node.op_type == "DynamicQuantizeLSTM",
        })
    }
}
