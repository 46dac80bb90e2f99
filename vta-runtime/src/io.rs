//! Model inputs and outputs as `.npy` arrays, and runs over several samples.

use isa::npy::{Array, Elem};
use ndarray::{ArrayD, Axis, IxDyn, Slice};

use crate::tensor::{Fact, Tensor};

/// A `.npy` array as a tensor of the same element type (float32, int8, uint8, int32 or
/// int64; the types ONNX models here take and return).
pub fn tensor_from_npy(a: &Array) -> Result<Tensor, String> {
    let shape = IxDyn(&a.shape);
    let d = &a.data;
    let err = |e: ndarray::ShapeError| e.to_string();
    Ok(match a.elem {
        Elem::F32 => Tensor::F32(
            ArrayD::from_shape_vec(
                shape,
                d.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect(),
            )
            .map_err(err)?,
        ),
        Elem::I8 => Tensor::I8(
            ArrayD::from_shape_vec(shape, d.iter().map(|&b| b as i8).collect()).map_err(err)?,
        ),
        Elem::U8 => Tensor::U8(ArrayD::from_shape_vec(shape, d.clone()).map_err(err)?),
        Elem::I32 => Tensor::I32(
            ArrayD::from_shape_vec(
                shape,
                d.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect(),
            )
            .map_err(err)?,
        ),
        Elem::I64 => Tensor::I64(
            ArrayD::from_shape_vec(
                shape,
                d.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            )
            .map_err(err)?,
        ),
        other => {
            return Err(format!(
                "{} arrays are not model tensors (float32, int8, uint8, int32 or int64)",
                other.numpy_name()
            ))
        }
    })
}

/// The `.npy` element type, shape and little-endian bytes of a tensor.
pub fn tensor_to_npy(t: &Tensor) -> (Elem, Vec<usize>, Vec<u8>) {
    let mut raw = Vec::new();
    let elem = match t {
        Tensor::F32(a) => {
            a.iter()
                .for_each(|v| raw.extend_from_slice(&v.to_le_bytes()));
            Elem::F32
        }
        Tensor::I8(a) => {
            raw.extend(a.iter().map(|&v| v as u8));
            Elem::I8
        }
        Tensor::U8(a) => {
            raw.extend(a.iter());
            Elem::U8
        }
        Tensor::I32(a) => {
            a.iter()
                .for_each(|v| raw.extend_from_slice(&v.to_le_bytes()));
            Elem::I32
        }
        Tensor::I64(a) => {
            a.iter()
                .for_each(|v| raw.extend_from_slice(&v.to_le_bytes()));
            Elem::I64
        }
    };
    (elem, t.shape().to_vec(), raw)
}

fn slice_axis0(t: &Tensor, from: usize, to: usize) -> Tensor {
    let s = Slice::from(from..to);
    match t {
        Tensor::F32(a) => Tensor::F32(a.slice_axis(Axis(0), s).to_owned()),
        Tensor::I8(a) => Tensor::I8(a.slice_axis(Axis(0), s).to_owned()),
        Tensor::U8(a) => Tensor::U8(a.slice_axis(Axis(0), s).to_owned()),
        Tensor::I32(a) => Tensor::I32(a.slice_axis(Axis(0), s).to_owned()),
        Tensor::I64(a) => Tensor::I64(a.slice_axis(Axis(0), s).to_owned()),
    }
}

/// Splits user inputs into runs of the model: each input must have the model input's type
/// and either its exact shape (one run) or a first axis `k` times the model's (k runs, in
/// order); all inputs must give the same `k`. `names[i]` and `facts[i]` describe model input
/// `i`; errors name the input and say what was expected.
pub fn split_samples(
    inputs: Vec<Tensor>,
    names: &[String],
    facts: &[Fact],
) -> Result<Vec<Vec<Tensor>>, String> {
    if inputs.len() != facts.len() {
        let list: Vec<String> = names
            .iter()
            .zip(facts)
            .map(|(n, f)| format!("'{n}' {f}"))
            .collect();
        return Err(format!(
            "the model has {} input(s) ({}), {} given",
            facts.len(),
            list.join(", "),
            inputs.len()
        ));
    }
    let mut runs: Option<usize> = None;
    for ((t, fact), name) in inputs.iter().zip(facts).zip(names) {
        let got = t.fact();
        let bad = || {
            let mut m = format!("input '{name}' must be {fact}, got {got}");
            if got.dtype != fact.dtype {
                m.push_str(&format!(
                    " (the element type must be {}; convert it, e.g. numpy's x.astype(np.{}))",
                    fact.dtype,
                    match fact.dtype {
                        crate::tensor::DType::F32 => "float32",
                        d => d.name(),
                    }
                ));
            } else if !fact.shape.is_empty() {
                m.push_str(&format!(
                    " (several samples may be stacked along the first axis: [{} * k{}])",
                    fact.shape[0],
                    fact.shape[1..]
                        .iter()
                        .map(|d| format!(", {d}"))
                        .collect::<String>()
                ));
            }
            m
        };
        if got.dtype != fact.dtype {
            return Err(bad());
        }
        let k = if got.shape == fact.shape {
            1
        } else if !fact.shape.is_empty()
            && got.shape.len() == fact.shape.len()
            && got.shape[1..] == fact.shape[1..]
            && fact.shape[0] > 0
            && got.shape[0] % fact.shape[0] == 0
            && got.shape[0] > 0
        {
            got.shape[0] / fact.shape[0]
        } else {
            return Err(bad());
        };
        match runs {
            Some(r) if r != k => {
                return Err(format!(
                    "input '{name}' holds {k} sample(s) but an earlier input holds {r}"
                ))
            }
            _ => runs = Some(k),
        }
    }
    let k = runs.unwrap_or(1);
    Ok((0..k)
        .map(|i| {
            inputs
                .iter()
                .zip(facts)
                .map(|(t, f)| {
                    if k == 1 {
                        t.clone()
                    } else {
                        slice_axis0(t, i * f.shape[0], (i + 1) * f.shape[0])
                    }
                })
                .collect()
        })
        .collect())
}

/// Concatenates the same output of several runs along the first axis.
pub fn concat_samples(parts: &[Tensor]) -> Result<Tensor, String> {
    fn cat<T: Clone>(v: Vec<&ArrayD<T>>) -> Result<ArrayD<T>, String> {
        let views: Vec<_> = v.iter().map(|a| a.view()).collect();
        ndarray::concatenate(Axis(0), &views).map_err(|e| e.to_string())
    }
    let first = parts.first().ok_or("no runs")?;
    if first.shape().is_empty() {
        return Err("scalar outputs cannot be concatenated".into());
    }
    macro_rules! all {
        ($v:ident) => {{
            let mut xs = Vec::new();
            for p in parts {
                match p {
                    Tensor::$v(a) => xs.push(a),
                    _ => return Err("runs returned different element types".into()),
                }
            }
            Tensor::$v(cat(xs)?)
        }};
    }
    Ok(match first {
        Tensor::F32(_) => all!(F32),
        Tensor::I8(_) => all!(I8),
        Tensor::U8(_) => all!(U8),
        Tensor::I32(_) => all!(I32),
        Tensor::I64(_) => all!(I64),
    })
}
