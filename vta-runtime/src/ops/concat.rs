//! `Concat` along one axis, any type.

use ndarray::{concatenate, ArrayD, ArrayViewD, Axis};

use super::TensorInfo;
use super::{axis, in_fact, op_boilerplate, Op};
use crate::tensor::Fact;
use crate::tensor::Tensor;

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Concat {
    pub axis: i64,
}

fn cat<T: Clone>(parts: Vec<&ArrayD<T>>, a: usize) -> Result<ArrayD<T>, String> {
    let views: Vec<ArrayViewD<T>> = parts.iter().map(|p| p.view()).collect();
    let joined = concatenate(Axis(a), &views).map_err(|e| e.to_string())?;
    // ndarray lays the result out with the joined axis outermost; the steps after this one
    // (reshapes, uploads to the device) read tensors in row-major order.
    Ok(if joined.is_standard_layout() {
        joined
    } else {
        joined.as_standard_layout().into_owned()
    })
}

impl Op for Concat {
    fn op_type(&self) -> &'static str {
        "Concat"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let first = in_fact(inputs, 0, "inputs")?;
        let a = axis(self.axis, first.rank())?;
        let mut shape = first.shape.clone();
        shape[a] = 0;
        for i in 0..inputs.len() {
            let f = in_fact(inputs, i, "inputs")?;
            if f.dtype != first.dtype || f.rank() != first.rank() {
                return Err(format!("Concat inputs differ: {first} and {f}"));
            }
            for d in 0..f.rank() {
                if d != a && f.shape[d] != first.shape[d] {
                    return Err(format!(
                        "Concat inputs differ off the axis: {first} and {f}"
                    ));
                }
            }
            shape[a] += f.shape[a];
        }
        Ok(vec![Fact::new(first.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let ts: Vec<&Tensor> = inputs
            .iter()
            .map(|t| t.ok_or("missing Concat input"))
            .collect::<Result<_, _>>()?;
        let first = ts.first().ok_or("Concat needs inputs")?;
        let a = axis(self.axis, first.shape().len())?;
        macro_rules! go {
            ($v:ident) => {{
                let parts = ts
                    .iter()
                    .map(|t| match t {
                        Tensor::$v(x) => Ok(x),
                        _ => Err("Concat inputs have different types".to_string()),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::$v(cat(parts, a)?)
            }};
        }
        Ok(vec![match first {
            Tensor::F32(_) => go!(F32),
            Tensor::I8(_) => go!(I8),
            Tensor::U8(_) => go!(U8),
            Tensor::I32(_) => go!(I32),
            Tensor::I64(_) => go!(I64),
        }])
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_off_the_first_axis_in_row_major_order() {
        let x = ArrayD::from_shape_vec(vec![1, 2, 3], (0..6).collect::<Vec<i32>>()).unwrap();
        let y = ArrayD::from_shape_vec(vec![1, 2, 1], vec![6, 7]).unwrap();
        let out = Concat { axis: -1 }
            .eval(&[Some(&Tensor::I32(x)), Some(&Tensor::I32(y))])
            .unwrap();
        let Tensor::I32(z) = &out[0] else {
            panic!("an int32 result")
        };
        assert!(z.is_standard_layout());
        assert_eq!(z.shape(), &[1, 2, 4]);
        assert_eq!(z.as_slice().unwrap(), &[0, 1, 2, 6, 3, 4, 5, 7]);
    }
}
