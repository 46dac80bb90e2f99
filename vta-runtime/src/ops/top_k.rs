//! `TopK`: the `k` largest (or smallest) elements along an axis and their indices, as a
//! detector's post-processing picks its best-scoring boxes. `k` is a constant (an attribute
//! before opset 10, a constant input after), so the output shapes are static. Elements are
//! ordered by value, equal values by index (ONNX: the lower index first), whether or not
//! `sorted` asks for an order; NaN counts as larger than every number.

use std::cmp::Ordering;

use ndarray::{ArrayD, Axis};

use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{map_same, DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct TopK {
    pub axis: i64,
    /// The largest elements (`largest = 1`) or the smallest.
    pub largest: bool,
    /// `k` from the attribute (opset < 10); `None` when given as input 1.
    pub attr_k: Option<i64>,
}

impl TopK {
    fn k(&self, given: Option<&Tensor>, n: usize) -> Result<usize, String> {
        let k = match (self.attr_k, given) {
            (Some(k), _) => k,
            (None, Some(t)) => match t.to_i64_vec()[..] {
                [k] => k,
                _ => return Err(format!("K must hold one value, got shape {:?}", t.shape())),
            },
            (None, None) => return Err("TopK needs K: a constant input".into()),
        };
        usize::try_from(k)
            .ok()
            .filter(|&k| k <= n)
            .ok_or_else(|| format!("K = {k} must lie in [0, {n}], the length of the axis"))
    }

    /// The order of the selected indices along one lane of values.
    fn order(&self, lane: &[f64]) -> Vec<usize> {
        let by_value = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => a.partial_cmp(&b).expect("not NaN"),
        };
        let mut idx: Vec<usize> = (0..lane.len()).collect();
        idx.sort_by(|&i, &j| {
            let o = by_value(lane[i], lane[j]);
            (if self.largest { o.reverse() } else { o }).then(i.cmp(&j))
        });
        idx
    }
}

fn take<T: Clone>(x: &ArrayD<T>, a: usize, picks: &[Vec<usize>], k: usize) -> ArrayD<T> {
    let mut shape = x.shape().to_vec();
    shape[a] = k;
    let mut out = ArrayD::from_elem(shape, x.first().expect("non-empty").clone());
    for ((mut dst, src), lane) in out
        .lanes_mut(Axis(a))
        .into_iter()
        .zip(x.lanes(Axis(a)))
        .zip(picks)
    {
        for (d, &i) in dst.iter_mut().zip(lane) {
            *d = src[i].clone();
        }
    }
    out
}

impl Op for TopK {
    fn op_type(&self) -> &'static str {
        "TopK"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let a = axis(self.axis, x.rank())?;
        if self.attr_k.is_none() && in_const(inputs, 1).is_none() {
            return Err("K must be a constant (the output shapes are static)".into());
        }
        let k = self.k(in_const(inputs, 1), x.shape[a])?;
        let mut shape = x.shape.clone();
        shape[a] = k;
        Ok(vec![
            Fact::new(x.dtype, shape.clone()),
            Fact::new(DType::I64, shape),
        ])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?;
        let a = axis(self.axis, x.shape().len())?;
        let n = x.shape()[a];
        let k = self.k(inputs.get(1).copied().flatten(), n)?;
        if x.is_empty() {
            let mut shape = x.shape().to_vec();
            shape[a] = k;
            let f = Fact::new(x.dtype(), shape.clone());
            return Ok(vec![
                Tensor::zeros(&f),
                Tensor::zeros(&Fact::new(DType::I64, shape)),
            ]);
        }
        let values = ArrayD::from_shape_vec(x.shape(), x.to_f64_vec()).expect("same shape");
        let picks: Vec<Vec<usize>> = values
            .lanes(Axis(a))
            .into_iter()
            .map(|lane| {
                let lane: Vec<f64> = lane.iter().copied().collect();
                let mut order = self.order(&lane);
                order.truncate(k);
                order
            })
            .collect();
        let mut shape = x.shape().to_vec();
        shape[a] = k;
        let mut indices = ArrayD::<i64>::zeros(shape);
        for (mut dst, lane) in indices.lanes_mut(Axis(a)).into_iter().zip(&picks) {
            for (d, &i) in dst.iter_mut().zip(lane) {
                *d = i as i64;
            }
        }
        Ok(vec![
            map_same!(x, v => take(v, a, &picks, k)),
            Tensor::I64(indices),
        ])
    }

    fn summary(&self) -> String {
        format!(
            "axis={} {}",
            self.axis,
            if self.largest { "largest" } else { "smallest" }
        )
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr2;

    fn top(x: ArrayD<f32>, k: i64, largest: bool) -> (ArrayD<f32>, ArrayD<i64>) {
        let op = TopK {
            axis: -1,
            largest,
            attr_k: Some(k),
        };
        let out = op.eval(&[Some(&Tensor::F32(x))]).unwrap();
        match &out[..] {
            [Tensor::F32(v), Tensor::I64(i)] => (v.clone(), i.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn picks_by_value_and_equal_values_by_index() {
        let x = arr2(&[[1.0, 3.0, 3.0, 2.0], [0.0, -1.0, 5.0, 5.0]]).into_dyn();
        let (v, i) = top(x.clone(), 3, true);
        assert_eq!(v, arr2(&[[3.0, 3.0, 2.0], [5.0, 5.0, 0.0]]).into_dyn());
        assert_eq!(i, arr2(&[[1, 2, 3], [2, 3, 0]]).into_dyn());
        let (v, i) = top(x, 2, false);
        assert_eq!(v, arr2(&[[1.0, 2.0], [-1.0, 0.0]]).into_dyn());
        assert_eq!(i, arr2(&[[0, 3], [1, 0]]).into_dyn());
    }

    #[test]
    fn k_beyond_the_axis_is_refused() {
        let op = TopK {
            axis: 1,
            largest: true,
            attr_k: Some(5),
        };
        let x = Tensor::F32(arr2(&[[1.0, 2.0]]).into_dyn());
        let e = op.eval(&[Some(&x)]).unwrap_err();
        assert!(e.contains("K = 5 must lie in [0, 2]"), "{e}");
    }
}
