//! `Pad`, any element type: `constant`, `reflect`, `edge` and `wrap` modes; pads from the
//! attribute (opset < 11) or a constant input with optional `axes` (opset 18); negative pads
//! crop.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, axis, in_fact, op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Pad {
    pub mode: PadMode,
    /// `(pads, value)` from attributes (opset < 11); `None`: inputs 1 (pads), 2 (constant
    /// value) and 3 (axes).
    pub attrs: Option<(Vec<i64>, f32)>,
}

impl Pad {
    /// (begin, end) padding of every axis of a rank-`r` tensor.
    pub fn pads(
        &self,
        r: usize,
        pads: Option<&Tensor>,
        axes: Option<&Tensor>,
    ) -> Result<Vec<(i64, i64)>, String> {
        let p = match &self.attrs {
            Some((p, _)) => p.clone(),
            None => pads.ok_or("missing pads")?.to_i64_vec(),
        };
        let axes: Vec<usize> = match axes {
            Some(a) => a
                .to_i64_vec()
                .iter()
                .map(|&a| axis(a, r))
                .collect::<Result<_, _>>()?,
            None => (0..r).collect(),
        };
        if p.len() != 2 * axes.len() {
            return Err(format!("{} pads for {} axes", p.len(), axes.len()));
        }
        let mut out = vec![(0, 0); r];
        for (k, &a) in axes.iter().enumerate() {
            out[a] = (p[k], p[k + axes.len()]);
        }
        Ok(out)
    }

    /// Output shape of padding `shape`.
    pub fn out_shape(&self, shape: &[usize], pads: &[(i64, i64)]) -> Result<Vec<usize>, String> {
        shape
            .iter()
            .zip(pads)
            .map(|(&d, &(b, e))| {
                let n = d as i64 + b + e;
                if n < 1 || (self.mode == PadMode::Reflect && (b >= d as i64 || e >= d as i64)) {
                    Err(format!(
                        "pads ({b}, {e}) do not fit an axis of {d} in {:?} mode",
                        self.mode
                    ))
                } else if self.mode != PadMode::Constant && d == 0 {
                    Err("cannot pad an empty axis".into())
                } else {
                    Ok(n as usize)
                }
            })
            .collect()
    }

    /// The input index an output index reads, or `None` for the constant.
    fn source(&self, o: usize, begin: i64, d: usize) -> Option<usize> {
        let i = o as i64 - begin;
        let n = d as i64;
        if (0..n).contains(&i) {
            return Some(i as usize);
        }
        Some(match self.mode {
            PadMode::Constant => return None,
            PadMode::Edge => i.clamp(0, n - 1) as usize,
            PadMode::Wrap => i.rem_euclid(n) as usize,
            PadMode::Reflect => {
                let period = 2 * (n - 1).max(1);
                let m = i.rem_euclid(period);
                (if m < n { m } else { period - m }) as usize
            }
        })
    }
}

fn pad_array<T: Copy>(
    op: &Pad,
    x: &ArrayD<T>,
    pads: &[(i64, i64)],
    out: &[usize],
    fill: T,
) -> ArrayD<T> {
    let maps: Vec<Vec<Option<usize>>> = (0..x.ndim())
        .map(|a| {
            (0..out[a])
                .map(|o| op.source(o, pads[a].0, x.shape()[a]))
                .collect()
        })
        .collect();
    ArrayD::from_shape_fn(IxDyn(out), |ix| {
        let mut src = Vec::with_capacity(maps.len());
        for a in 0..maps.len() {
            match maps[a][ix[a]] {
                Some(i) => src.push(i),
                None => return fill,
            }
        }
        x[IxDyn(&src)]
    })
}

impl Op for Pad {
    fn op_type(&self) -> &'static str {
        "Pad"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        let c = |i: usize, what: &str| -> Result<Option<&Tensor>, String> {
            match inputs.get(i).copied().flatten() {
                None => Ok(None),
                Some(t) => t.value.as_deref().map(Some).ok_or_else(|| {
                    format!("{what} is computed at run time; the importer needs it constant")
                }),
            }
        };
        if let Some(v) = inputs.get(2).copied().flatten() {
            if v.fact.dtype != x.dtype || v.fact.len() != 1 {
                return Err(format!(
                    "constant_value {} should be one {} value",
                    v.fact, x.dtype
                ));
            }
        }
        let pads = self.pads(x.rank(), c(1, "pads")?, c(3, "axes")?)?;
        Ok(vec![Fact::new(x.dtype, self.out_shape(&x.shape, &pads)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let at = |i: usize| inputs.get(i).copied().flatten();
        let pads = self.pads(x.shape().len(), at(1), at(3))?;
        let out = self.out_shape(x.shape(), &pads)?;
        let value = at(2);
        let attr_value = self.attrs.as_ref().map_or(0.0, |a| a.1);
        Ok(vec![match x {
            Tensor::F32(a) => {
                let v = value
                    .map(|t| t.scalar_f32())
                    .transpose()?
                    .unwrap_or(attr_value);
                Tensor::F32(pad_array(self, a, &pads, &out, v))
            }
            Tensor::I8(a) => {
                let v = value.map_or(attr_value as i64, |t| t.to_i64_vec()[0]);
                Tensor::I8(pad_array(self, a, &pads, &out, v as i8))
            }
            Tensor::U8(a) => {
                let v = value.map_or(attr_value as i64, |t| t.to_i64_vec()[0]);
                Tensor::U8(pad_array(self, a, &pads, &out, v as u8))
            }
            Tensor::I32(a) => {
                let v = value.map_or(attr_value as i64, |t| t.to_i64_vec()[0]);
                Tensor::I32(pad_array(self, a, &pads, &out, v as i32))
            }
            Tensor::I64(a) => {
                let v = value.map_or(attr_value as i64, |t| t.to_i64_vec()[0]);
                Tensor::I64(pad_array(self, a, &pads, &out, v))
            }
        }])
    }

    fn summary(&self) -> String {
        format!("{:?}", self.mode).to_lowercase()
    }

    op_boilerplate!();
}
