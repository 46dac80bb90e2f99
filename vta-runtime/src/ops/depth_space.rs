//! `SpaceToDepth` and `DepthToSpace` (modes `DCR` and `CRD`): rearrangements of NCHW tensors
//! between `block x block` spatial tiles and channels, each a reshape to rank 6, a transpose and
//! a reshape back (ONNX's own definition), exact for every element type.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{map_same, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthSpaceKind {
    SpaceToDepth,
    /// `DepthToSpace` mode `DCR`: depth, then column, then row (the default).
    DepthToSpaceDcr,
    /// `DepthToSpace` mode `CRD`: column, row, then depth (pixel shuffle).
    DepthToSpaceCrd,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct DepthSpace {
    pub kind: DepthSpaceKind,
    pub block: usize,
}

/// The rank-6 shape the input is viewed as, the permutation of its axes, and the output shape.
type Rearrangement = ([usize; 6], [usize; 6], [usize; 4]);

impl DepthSpace {
    fn plan(&self, s: &[usize]) -> Result<Rearrangement, String> {
        let &[n, c, h, w] = s else {
            return Err(format!(
                "{} needs a rank-4 NCHW input, got shape {s:?}",
                self.op_type()
            ));
        };
        let b = self.block;
        let too_big = || format!("blocksize {b} is too large for shape {s:?}");
        let bb = b.checked_mul(b).ok_or_else(too_big)?;
        if b == 0 {
            return Err("blocksize must be at least 1".into());
        }
        Ok(match self.kind {
            DepthSpaceKind::SpaceToDepth => {
                if h % b != 0 || w % b != 0 {
                    return Err(format!(
                        "SpaceToDepth with blocksize {b} needs height and width divisible by \
                         {b}, got shape {s:?}"
                    ));
                }
                let depth = c.checked_mul(bb).ok_or_else(too_big)?;
                (
                    [n, c, h / b, b, w / b, b],
                    [0, 3, 5, 1, 2, 4],
                    [n, depth, h / b, w / b],
                )
            }
            k => {
                if c % bb != 0 {
                    return Err(format!(
                        "DepthToSpace with blocksize {b} needs channels divisible by {bb}, got \
                         shape {s:?}"
                    ));
                }
                let (hb, wb) = (h.checked_mul(b), w.checked_mul(b));
                let out = [n, c / bb, hb.ok_or_else(too_big)?, wb.ok_or_else(too_big)?];
                if k == DepthSpaceKind::DepthToSpaceDcr {
                    ([n, b, b, c / bb, h, w], [0, 3, 4, 1, 5, 2], out)
                } else {
                    ([n, c / bb, b, b, h, w], [0, 1, 4, 2, 5, 3], out)
                }
            }
        })
    }
}

fn rearrange<T: Clone>(
    a: &ArrayD<T>,
    view: &[usize],
    perm: &[usize],
    out: &[usize],
) -> Result<ArrayD<T>, String> {
    let a = a.as_standard_layout();
    let v = a
        .view()
        .into_shape_with_order(IxDyn(view))
        .map_err(|e| e.to_string())?
        .permuted_axes(IxDyn(perm));
    let flat: Vec<T> = v.iter().cloned().collect();
    ArrayD::from_shape_vec(IxDyn(out), flat).map_err(|e| e.to_string())
}

impl Op for DepthSpace {
    fn op_type(&self) -> &'static str {
        match self.kind {
            DepthSpaceKind::SpaceToDepth => "SpaceToDepth",
            _ => "DepthToSpace",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        let (_, _, out) = self.plan(&x.shape)?;
        Ok(vec![Fact::new(x.dtype, out)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?;
        let (view, perm, out) = self.plan(x.shape())?;
        Ok(vec![map_same!(x, a => rearrange(a, &view, &perm, &out)?)])
    }

    fn summary(&self) -> String {
        let mode = match self.kind {
            DepthSpaceKind::SpaceToDepth => "",
            DepthSpaceKind::DepthToSpaceDcr => ", DCR",
            DepthSpaceKind::DepthToSpaceCrd => ", CRD",
        };
        format!("blocksize {}{mode}", self.block)
    }

    op_boilerplate!();
}
