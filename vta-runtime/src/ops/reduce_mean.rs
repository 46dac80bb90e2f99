//! `ReduceMean` (float, CPU): the mean over some axes (all without any), with axes from the
//! attribute (opset < 18) or a constant input, keeping the reduced axes as 1 or dropping
//! them. Transformer necks normalize with it (LayerNorm exported as ReduceMean, Sub, Pow,
//! ReduceMean, Add, Sqrt, Div).

use ndarray::{ArrayD, Axis, IxDyn};

use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ReduceMean {
    /// The attribute's axes (opset < 18); `None`: from input 1, or every axis.
    pub attr_axes: Option<Vec<i64>>,
    pub keepdims: bool,
    /// With no axes, reduce nothing (opset 18's `noop_with_empty_axes`) instead of all.
    pub noop_with_empty_axes: bool,
}

impl ReduceMean {
    /// The reduced axes of a rank-`rank` input, sorted and distinct.
    fn axes(&self, given: Option<Vec<i64>>, rank: usize) -> Result<Vec<usize>, String> {
        let axes = self.attr_axes.clone().or(given).unwrap_or_default();
        if axes.is_empty() {
            return Ok(if self.noop_with_empty_axes {
                vec![]
            } else {
                (0..rank).collect()
            });
        }
        let mut ax: Vec<usize> = axes
            .iter()
            .map(|&a| axis(a, rank))
            .collect::<Result<_, _>>()?;
        ax.sort_unstable();
        ax.dedup();
        Ok(ax)
    }

    fn out_shape(&self, s: &[usize], ax: &[usize]) -> Vec<usize> {
        s.iter()
            .enumerate()
            .filter_map(|(i, &d)| match (ax.contains(&i), self.keepdims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect()
    }
}

impl Op for ReduceMean {
    fn op_type(&self) -> &'static str {
        "ReduceMean"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        if x.dtype != DType::F32 {
            return Err(format!("ReduceMean needs a float input, got {}", x.dtype));
        }
        if self.attr_axes.is_none()
            && inputs.get(1).copied().flatten().is_some()
            && in_const(inputs, 1).is_none()
        {
            return Err("axes must be a constant".into());
        }
        let ax = self.axes(in_const(inputs, 1).map(|t| t.to_i64_vec()), x.rank())?;
        Ok(vec![Fact::new(DType::F32, self.out_shape(&x.shape, &ax))])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?.as_f32()?;
        let given = inputs.get(1).copied().flatten().map(|t| t.to_i64_vec());
        let ax = self.axes(given, x.ndim())?;
        let out_shape = self.out_shape(x.shape(), &ax);
        // Sum the reduced axes from the last, in f64 so the order of a long sum does not
        // show in the f32 result, then divide by the count.
        let mut acc: ArrayD<f64> = x.mapv(f64::from);
        let mut count = 1usize;
        for &a in ax.iter().rev() {
            count *= x.shape()[a];
            acc = acc.sum_axis(Axis(a));
        }
        let n = count.max(1) as f64;
        let v: Vec<f32> = acc.iter().map(|&s| (s / n) as f32).collect();
        Ok(vec![Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&out_shape), v).map_err(|e| e.to_string())?,
        )])
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: &ReduceMean, x: Vec<f32>, s: &[usize]) -> (Vec<usize>, Vec<f32>) {
        let x = Tensor::F32(ArrayD::from_shape_vec(IxDyn(s), x).unwrap());
        let y = op.eval(&[Some(&x)]).unwrap().remove(0);
        (
            y.shape().to_vec(),
            y.as_f32().unwrap().iter().copied().collect(),
        )
    }

    #[test]
    fn means_over_axes_with_and_without_keepdims() {
        let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let last = |keepdims| ReduceMean {
            attr_axes: Some(vec![-1]),
            keepdims,
            noop_with_empty_axes: false,
        };
        assert_eq!(
            run(&last(true), x.clone(), &[2, 3]),
            (vec![2, 1], vec![1.0, 4.0])
        );
        assert_eq!(
            run(&last(false), x.clone(), &[2, 3]),
            (vec![2], vec![1.0, 4.0])
        );
        let all = ReduceMean {
            attr_axes: None,
            keepdims: true,
            noop_with_empty_axes: false,
        };
        assert_eq!(run(&all, x.clone(), &[2, 3]), (vec![1, 1], vec![2.5]));
        let bad = ReduceMean {
            attr_axes: Some(vec![2]),
            keepdims: true,
            noop_with_empty_axes: false,
        };
        let t = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2, 3]), x).unwrap());
        assert!(bad.eval(&[Some(&t)]).unwrap_err().contains("out of range"));
    }
}
