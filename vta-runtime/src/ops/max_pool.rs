//! `MaxPool` (2-D) on float, int8 or uint8 tensors (quantized graphs pool integers directly:
//! max commutes with an increasing affine dequantization), with ONNX's optional `Indices`
//! output. Padding never wins; of equal values the first in the window does.

use ndarray::{ArrayD, IxDyn};

use super::kernels::{dims4, Window};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct MaxPool {
    pub window: Window,
    /// Whether the node has the `Indices` output, and its layout.
    #[serde(default)]
    pub indices: Option<StorageOrder>,
}

/// `storage_order`: how `Indices` number the cells of the input, `N x C` planes of `H x W`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageOrder {
    /// `((n * C + c) * H + y) * W + x`.
    RowMajor,
    /// `(n * C + c) * H * W + x * H + y`.
    ColumnMajor,
}

/// The maxima, and their indices in `order` (row-major when not asked for).
fn pool<T: Copy + PartialOrd>(
    x: &ArrayD<T>,
    w: &Window,
    lowest: T,
    order: StorageOrder,
) -> Result<(ArrayD<T>, ArrayD<i64>), String> {
    let (n, c, h, wd) = dims4(x.shape(), "input")?;
    let g = w.resolve((h, wd), (1, 1))?;
    let (oh, ow) = g.out;
    let mut out = ArrayD::from_elem(IxDyn(&[n, c, oh, ow]), lowest);
    let mut at = ArrayD::from_elem(IxDyn(&[n, c, oh, ow]), -1i64);
    for b in 0..n {
        for ch in 0..c {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut m: Option<(T, usize, usize)> = None;
                    for ky in 0..g.kernel.0 {
                        let iy = (y * g.stride.0 + ky * g.dilation.0) as isize - g.pad[0] as isize;
                        for kx in 0..g.kernel.1 {
                            let ix =
                                (xo * g.stride.1 + kx * g.dilation.1) as isize - g.pad[1] as isize;
                            if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                let (iy, ix) = (iy as usize, ix as usize);
                                let v = x[[b, ch, iy, ix]];
                                if m.is_none_or(|(m, _, _)| v > m) {
                                    m = Some((v, iy, ix));
                                }
                            }
                        }
                    }
                    if let Some((v, iy, ix)) = m {
                        out[[b, ch, y, xo]] = v;
                        let plane = (b * c + ch) * h * wd;
                        at[[b, ch, y, xo]] = (plane
                            + match order {
                                StorageOrder::RowMajor => iy * wd + ix,
                                StorageOrder::ColumnMajor => ix * h + iy,
                            }) as i64;
                    }
                }
            }
        }
    }
    Ok((out, at))
}

impl Op for MaxPool {
    fn op_type(&self) -> &'static str {
        "MaxPool"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if !matches!(x.dtype, DType::F32 | DType::I8 | DType::U8) {
            return Err(format!(
                "MaxPool is supported on float, int8 and uint8, got {}",
                x.dtype
            ));
        }
        let (n, c, h, w) = dims4(&x.shape, "input X")?;
        let g = self.window.resolve((h, w), (1, 1))?;
        let shape = [n, c, g.out.0, g.out.1];
        let mut facts = vec![Fact::new(x.dtype, shape)];
        if self.indices.is_some() {
            facts.push(Fact::new(DType::I64, shape));
        }
        Ok(facts)
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let (w, order) = (&self.window, self.indices.unwrap_or(StorageOrder::RowMajor));
        let (y, at) = match arg(inputs, 0, "X")? {
            Tensor::F32(x) => {
                let (y, at) = pool(x, w, f32::NEG_INFINITY, order)?;
                (Tensor::F32(y), at)
            }
            Tensor::I8(x) => {
                let (y, at) = pool(x, w, i8::MIN, order)?;
                (Tensor::I8(y), at)
            }
            Tensor::U8(x) => {
                let (y, at) = pool(x, w, u8::MIN, order)?;
                (Tensor::U8(y), at)
            }
            t => return Err(format!("MaxPool on {} is not supported", t.dtype())),
        };
        Ok(if self.indices.is_some() {
            vec![y, Tensor::I64(at)]
        } else {
            vec![y]
        })
    }

    fn summary(&self) -> String {
        format!(
            "kernel {:?} {}",
            self.window.kernel.unwrap_or((1, 1)),
            self.window.summary()
        )
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::super::kernels::PadSpec;
    use super::*;

    #[test]
    fn indices_number_the_first_maximum_in_either_storage_order() {
        // One 2x3 plane, a 2x2 window of stride 1: windows [1 3; 5 5] and [3 2; 5 4].
        let x = Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&[1, 1, 2, 3]), vec![1., 3., 2., 5., 5., 4.]).unwrap(),
        );
        let window = Window {
            kernel: Some((2, 2)),
            stride: (1, 1),
            dilation: (1, 1),
            pad: PadSpec::Explicit([0; 4]),
            ceil_mode: false,
        };
        for (order, want) in [
            (StorageOrder::RowMajor, [3, 4]),
            (StorageOrder::ColumnMajor, [1, 3]),
        ] {
            let op = MaxPool {
                window: window.clone(),
                indices: Some(order),
            };
            let r = op.eval(&[Some(&x)]).unwrap();
            assert_eq!(r[1].to_i64_vec(), want, "{order:?}");
        }
    }
}
