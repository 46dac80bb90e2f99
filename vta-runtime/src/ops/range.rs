//! `Range(start, limit, delta)`: `start, start + delta, ...` up to `limit` (exclusive). The
//! output's length depends on the input values, so they must be constants: in exported shape
//! subgraphs (`torch.arange(h)` with `h` taken from a static shape) they fold to constants.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Range;

/// The scalar value of an input, as f64 (float) or i64 (integer).
fn scalar(t: &Tensor, what: &str) -> Result<(f64, i64), String> {
    if t.len() != 1 {
        return Err(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        ));
    }
    Ok((t.to_f64_vec()[0], t.to_i64_vec()[0]))
}

/// The number of elements: `max(ceil((limit - start) / delta), 0)`, exact for integers.
fn count(
    dtype: DType,
    start: (f64, i64),
    limit: (f64, i64),
    delta: (f64, i64),
) -> Result<usize, String> {
    if delta.0 == 0.0 {
        return Err("Range delta is 0 (the range would be infinite)".into());
    }
    let n = if dtype == DType::F32 {
        let n = ((limit.0 - start.0) / delta.0).ceil();
        if !n.is_finite() {
            return Err(format!(
                "Range({}, {}, {}) has no finite length",
                start.0, limit.0, delta.0
            ));
        }
        n.max(0.0) as u64
    } else {
        let span = i128::from(limit.1) - i128::from(start.1);
        let d = i128::from(delta.1);
        let n = span / d + i128::from(span % d != 0 && (span < 0) == (d < 0));
        u64::try_from(n.max(0)).unwrap_or(u64::MAX)
    };
    usize::try_from(n).map_err(|_| format!("Range has {n} elements, too many"))
}

fn inputs_of(t: [&Tensor; 3]) -> Result<(DType, [(f64, i64); 3]), String> {
    let dtype = t[0].dtype();
    if t.iter().any(|x| x.dtype() != dtype) {
        return Err("start, limit and delta must have the same type".into());
    }
    if !matches!(dtype, DType::F32 | DType::I32 | DType::I64) {
        return Err(format!(
            "Range is supported on float, int32 and int64, got {dtype}"
        ));
    }
    Ok((
        dtype,
        [
            scalar(t[0], "start")?,
            scalar(t[1], "limit")?,
            scalar(t[2], "delta")?,
        ],
    ))
}

impl Op for Range {
    fn op_type(&self) -> &'static str {
        "Range"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let names = ["start", "limit", "delta"];
        let mut vals = Vec::with_capacity(3);
        for (i, what) in names.iter().enumerate() {
            in_fact(inputs, i, what)?;
            vals.push(in_const(inputs, i).ok_or_else(|| {
                format!(
                    "Range's {what} must be a constant: the range's length is the output \
                     shape, which must be static (computed from static shapes alone it folds; \
                     here it depends on run-time values)"
                )
            })?);
        }
        let (dtype, [s, l, d]) = inputs_of([vals[0], vals[1], vals[2]])?;
        Ok(vec![Fact::new(dtype, [count(dtype, s, l, d)?])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let (dtype, [s, l, d]) = inputs_of([
            arg(inputs, 0, "start")?,
            arg(inputs, 1, "limit")?,
            arg(inputs, 2, "delta")?,
        ])?;
        let n = count(dtype, s, l, d)?;
        let shape = IxDyn(&[n]);
        Ok(vec![match dtype {
            DType::F32 => {
                let (s, d) = (s.0 as f32, d.0 as f32);
                Tensor::F32(ArrayD::from_shape_fn(shape, |i| s + i[0] as f32 * d))
            }
            DType::I32 => Tensor::I32(ArrayD::from_shape_fn(shape, |i| {
                s.1.wrapping_add((i[0] as i64).wrapping_mul(d.1)) as i32
            })),
            _ => Tensor::I64(ArrayD::from_shape_fn(shape, |i| {
                s.1.wrapping_add((i[0] as i64).wrapping_mul(d.1))
            })),
        }])
    }

    op_boilerplate!();
}
