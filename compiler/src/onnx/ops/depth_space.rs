//! `SpaceToDepth` and `DepthToSpace` from the attributes of an ONNX node (`blocksize`, and
//! `mode` for `DepthToSpace`); the op itself is `vta_runtime::ops::depth_space`.

pub use vta_runtime::ops::depth_space::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for DepthSpace {
    fn parse(ctx: &ParseCtx) -> Result<DepthSpace, String> {
        let b = ctx
            .opt_int("blocksize")?
            .ok_or("attribute 'blocksize' is required")?;
        let block = usize::try_from(b)
            .ok()
            .filter(|&b| b >= 1)
            .ok_or_else(|| format!("blocksize must be at least 1, got {b}"))?;
        let kind = if ctx.node.op_type == "SpaceToDepth" {
            DepthSpaceKind::SpaceToDepth
        } else {
            match ctx.string("mode")?.as_deref() {
                None | Some("DCR") => DepthSpaceKind::DepthToSpaceDcr,
                Some("CRD") => DepthSpaceKind::DepthToSpaceCrd,
                Some(other) => {
                    return Err(format!(
                        "DepthToSpace mode '{other}' is unknown (ONNX defines DCR and CRD)"
                    ))
                }
            }
        };
        Ok(DepthSpace { kind, block })
    }
}
