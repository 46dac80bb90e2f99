//! `ConvTranspose` from the attributes of an ONNX node; the op itself is
//! `vta_runtime::ops::conv_transpose`.

pub use vta_runtime::ops::conv_transpose::*;

use super::{to_usizes, FromOnnx, ParseCtx};

impl FromOnnx for ConvTranspose {
    fn parse(ctx: &ParseCtx) -> Result<ConvTranspose, String> {
        let two = |name: &str, def: usize| -> Result<(usize, usize), String> {
            match ctx.ints(name)? {
                None => Ok((def, def)),
                Some(v) if v.len() == 2 => {
                    let u = to_usizes(&v, name)?;
                    Ok((u[0], u[1]))
                }
                Some(v) => Err(format!(
                    "{name} {v:?} has {} values; only 2-D transposed convolutions are supported",
                    v.len()
                )),
            }
        };
        let group = ctx.int("group", 1)?;
        if group < 1 {
            return Err(format!("group must be positive, got {group}"));
        }
        let pads = match ctx.ints("pads")? {
            None => [0; 4],
            Some(p) if p.len() == 4 => {
                let p = to_usizes(&p, "pads")?;
                [p[0], p[1], p[2], p[3]]
            }
            Some(p) => return Err(format!("pads {p:?} should have 4 values")),
        };
        let auto_pad = match ctx.string("auto_pad")?.as_deref().unwrap_or("NOTSET") {
            "NOTSET" | "" => AutoPad::NotSet,
            "VALID" => AutoPad::Valid,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            other => return Err(format!("unknown auto_pad '{other}'")),
        };
        let output_shape = match ctx.ints("output_shape")? {
            None => None,
            Some(v) => {
                let u = to_usizes(&v, "output_shape")?;
                match u[..] {
                    [h, w] | [_, _, h, w] => Some((h, w)),
                    _ => return Err(format!("output_shape {v:?} should have 2 values")),
                }
            }
        };
        let kernel = match ctx.ints("kernel_shape")? {
            None => None,
            Some(_) => Some(two("kernel_shape", 1)?),
        };
        Ok(ConvTranspose {
            kernel,
            stride: two("strides", 1)?,
            dilation: two("dilations", 1)?,
            group: group as usize,
            pads,
            auto_pad,
            output_padding: two("output_padding", 0)?,
            output_shape,
            activation: None,
        })
    }
}
