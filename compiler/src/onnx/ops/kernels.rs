//! ONNX attributes of 2-D windows (the kernels themselves are in `vta_runtime::ops::kernels`).

pub use vta_runtime::ops::kernels::*;

use super::{to_usizes, ParseCtx};

/// Parsing of a [`Window`] from a node's attributes.
pub trait WindowFromOnnx: Sized {
    /// Parses `kernel_shape`, `strides`, `dilations`, `pads`, `auto_pad` (and `ceil_mode`
    /// for pools); only 2-D windows are supported.
    fn parse(ctx: &ParseCtx, pool: bool) -> Result<Self, String>;
}

impl WindowFromOnnx for Window {
    fn parse(ctx: &ParseCtx, pool: bool) -> Result<Window, String> {
        let two = |name: &str, v: Option<Vec<i64>>, def: usize| -> Result<(usize, usize), String> {
            match v {
                None => Ok((def, def)),
                Some(v) if v.len() == 2 => {
                    let u = to_usizes(&v, name)?;
                    if u.contains(&0) {
                        return Err(format!("{name} must be positive, got {v:?}"));
                    }
                    Ok((u[0], u[1]))
                }
                Some(v) => Err(format!(
                    "{name} {v:?} has {} values; only 2-D windows (NCHW inputs) are supported, \
                     and 1-D ones, taken as 1 x k (3-D and larger windows have no lowering)",
                    v.len()
                )),
            }
        };
        let kernel = match ctx.ints("kernel_shape")? {
            None if pool => return Err("kernel_shape is required".into()),
            None => None,
            Some(k) => Some(two("kernel_shape", Some(k), 1)?),
        };
        let stride = two("strides", ctx.ints("strides")?, 1)?;
        let dilation = two("dilations", ctx.ints("dilations")?, 1)?;
        let auto = ctx.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
        let pad = match auto.as_str() {
            "NOTSET" | "" => match ctx.ints("pads")? {
                None => PadSpec::Explicit([0; 4]),
                Some(p) if p.len() == 4 => {
                    let p = to_usizes(&p, "pads")?;
                    // ONNX order: [x1_begin, x2_begin, x1_end, x2_end].
                    PadSpec::Explicit([p[0], p[1], p[2], p[3]])
                }
                Some(p) => {
                    return Err(format!(
                        "pads {p:?} has {} values; only 2-D windows are supported",
                        p.len()
                    ))
                }
            },
            "VALID" => PadSpec::Valid,
            "SAME_UPPER" => PadSpec::SameUpper,
            "SAME_LOWER" => PadSpec::SameLower,
            other => return Err(format!("unknown auto_pad '{other}'")),
        };
        let ceil_mode = pool && ctx.int("ceil_mode", 0)? != 0;
        Ok(Window {
            kernel,
            stride,
            dilation,
            pad,
            ceil_mode,
        })
    }
}
