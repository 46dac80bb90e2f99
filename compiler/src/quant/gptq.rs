//! Error-feedback rounding of post-training quantized weights (GPTQ-style, training-free):
//! each output channel's weights are rounded one input column at a time, and the error each
//! rounding makes is pushed onto the columns not yet rounded, weighted by how the layer's
//! inputs correlate over the calibration samples, so that the layer's *outputs* on those
//! inputs stay close to the float ones. At 2 bits, where rounding each weight to its nearest
//! level loses most of a network's accuracy, this keeps most of it.
//!
//! For a layer `y = W x` with inputs `X` (one row per output position of every calibration
//! sample), `H = X^T X` is the Hessian of the output error `||(W - Q) X^T||^2` in each row of
//! `W`. With `U` the upper Cholesky factor of `H^-1` (after damping `H`'s diagonal by 1% of
//! its mean, which keeps it invertible and the corrections tame), row `w` is rounded as
//!
//! ```text
//! for j in 0..K:  q_j = clamp(round(w_j / s), -qmax, qmax)
//!                 e   = (w_j - q_j * s) / U[j][j]
//!                 w_k -= e * U[j][k]      for k > j
//! ```
//!
//! [`collect`] builds `H` for every convolution (one group, no dilation) and dense layer with
//! constant weights whose reduction is at most [`MAX_COLUMNS`] wide, from at most
//! [`MAX_ROWS`] input rows spread over the samples; [`round_rows`] rounds a layer's weights
//! with it.

use std::collections::HashMap;

use ndarray::ArrayD;
use petgraph::stable_graph::NodeIndex;

use crate::graph::ops::conv::Conv;
use crate::graph::ops::gemm::Gemm;
use crate::graph::ops::matmul::MatMul;
use crate::graph::{Graph, Tensor};

/// Widest reduction (input columns of a dense layer, `C * kh * kw` of a convolution) given
/// error feedback: `H` has `K^2` entries and its Cholesky factorizations take `K^3 / 3`
/// steps each, about a second at this width.
pub const MAX_COLUMNS: usize = 1152;

/// Input rows (output positions over all samples) a layer's `H` is built from at most:
/// enough for the widest layer's `H` to have full rank, and a bound on the time.
pub const MAX_ROWS: usize = 4096;

/// A layer's `H = X^T X` as it is accumulated (row-major, `k x k`, the upper triangle).
#[derive(Debug, Clone, PartialEq)]
struct Hessian {
    k: usize,
    h: Vec<f64>,
    /// Input rows it was built from.
    rows: usize,
}

/// What a layer's rounding needs: the upper factor `U` of its damped `H^-1` (row-major,
/// `k x k`), factored once however often the layer is rounded.
#[derive(Debug, Clone, PartialEq)]
pub struct Feedback {
    pub k: usize,
    u: Vec<f64>,
    /// Input rows `H` was built from.
    pub rows: usize,
}

/// The error feedback of a graph's eligible layers, by node.
pub type Feedbacks = HashMap<NodeIndex, Feedback>;

/// How a layer's input becomes rows of its reduction.
enum Rows {
    /// A convolution: im2col with this geometry.
    Conv {
        kernel: (usize, usize),
        stride: (usize, usize),
        pad: [usize; 4],
        out: (usize, usize),
    },
    /// A dense layer: the last axis is the reduction.
    Dense,
}

/// The layers of `g` error feedback applies to: (node, its input tensor, how to read rows,
/// the reduction's width).
fn eligible(g: &Graph) -> Vec<(NodeIndex, usize, Rows, usize)> {
    let mut out = vec![];
    for ix in g.topo_order() {
        let n = &g.dag[ix];
        let (Some(x), Some(w)) = (
            n.inputs.first().copied().flatten(),
            n.inputs.get(1).copied().flatten(),
        ) else {
            continue;
        };
        if g.const_value(w).is_none() {
            continue;
        }
        let (xs, ws) = (&g.fact(x).shape, &g.fact(w).shape);
        let any = n.op.as_any();
        let found = if let Some(conv) = any.downcast_ref::<Conv>() {
            if conv.group != 1 || xs.len() != 4 || ws.len() != 4 {
                continue;
            }
            match conv.window.resolve((xs[2], xs[3]), (ws[2], ws[3])) {
                Ok(geo) if geo.dilation == (1, 1) => Some((
                    Rows::Conv {
                        kernel: geo.kernel,
                        stride: geo.stride,
                        pad: geo.pad,
                        out: geo.out,
                    },
                    ws[1] * ws[2] * ws[3],
                )),
                _ => None,
            }
        } else if let Some(gemm) = any.downcast_ref::<Gemm>() {
            (!gemm.trans_a && ws.len() == 2)
                .then(|| (Rows::Dense, if gemm.trans_b { ws[1] } else { ws[0] }))
        } else if any.is::<MatMul>() && ws.len() == 2 {
            Some((Rows::Dense, ws[0]))
        } else {
            None
        };
        if let Some((rows, k)) = found {
            // A dense layer reads rows of its input's last axis.
            let reads_rows = match rows {
                Rows::Dense => xs.last() == Some(&k),
                Rows::Conv { .. } => true,
            };
            if k <= MAX_COLUMNS && reads_rows {
                out.push((ix, x, rows, k));
            }
        }
    }
    out
}

/// The convolutions and dense layers of `g` with constant weights, in topological order.
pub fn weight_layers(g: &Graph) -> Vec<NodeIndex> {
    g.topo_order()
        .into_iter()
        .filter(|&ix| {
            let n = &g.dag[ix];
            let any = n.op.as_any();
            (any.is::<Conv>() || any.is::<Gemm>() || any.is::<MatMul>())
                && n.inputs
                    .get(1)
                    .copied()
                    .flatten()
                    .is_some_and(|w| g.const_value(w).is_some())
        })
        .collect()
}

/// Runs `g` on `samples` (float inputs of the model's one input), builds the Hessian of
/// every eligible layer and factors it (see the module docs); a layer whose Hessian cannot
/// be factored is left out (it rounds to nearest).
pub fn collect(g: &Graph, samples: &[ArrayD<f32>]) -> Result<Feedbacks, String> {
    let layers = eligible(g);
    if layers.is_empty() || samples.is_empty() {
        return Ok(Feedbacks::new());
    }
    let mut hs: Vec<Hessian> = layers
        .iter()
        .map(|&(_, _, _, k)| Hessian {
            k,
            h: vec![0.0; k * k],
            rows: 0,
        })
        .collect();
    for (i, x) in samples.iter().enumerate() {
        let vals = g
            .run(&[Tensor::F32(x.clone())])
            .map_err(|e| format!("error feedback: running calibration sample {i}: {e}"))?;
        for ((_, t, rows, k), h) in layers.iter().zip(&mut hs) {
            let Some(Tensor::F32(a)) = &vals[*t] else {
                continue;
            };
            let budget = MAX_ROWS / samples.len().max(1);
            accumulate(h, a, rows, *k, budget.max(1));
        }
    }
    Ok(layers
        .into_iter()
        .zip(hs)
        .filter(|(_, h)| h.rows > 0)
        .filter_map(|((ix, ..), h)| Some((ix, factor(&h)?)))
        .collect())
}

/// The error feedback of `h`, or `None` when it cannot be factored.
fn factor(h: &Hessian) -> Option<Feedback> {
    Some(Feedback {
        k: h.k,
        u: inverse_upper_factor(h)?,
        rows: h.rows,
    })
}

/// Adds at most `budget` rows of `a` (evenly spread over them) to `h`.
fn accumulate(h: &mut Hessian, a: &ArrayD<f32>, rows: &Rows, k: usize, budget: usize) {
    let a = a.as_standard_layout();
    let data = a.as_slice().expect("standard layout");
    let mut row = vec![0f64; k];
    match rows {
        Rows::Dense => {
            let n = data.len() / k;
            let step = n.div_ceil(budget).max(1);
            for r in (0..n).step_by(step) {
                for (d, &v) in row.iter_mut().zip(&data[r * k..(r + 1) * k]) {
                    *d = f64::from(v);
                }
                add_outer(h, &row);
            }
        }
        Rows::Conv {
            kernel,
            stride,
            pad,
            out,
        } => {
            let s = a.shape();
            let (batch, c, hh, ww) = (s[0], s[1], s[2], s[3]);
            let positions = batch * out.0 * out.1;
            let step = positions.div_ceil(budget).max(1);
            for p in (0..positions).step_by(step) {
                let (n, oy, ox) = (p / (out.0 * out.1), p / out.1 % out.0, p % out.1);
                let mut j = 0;
                for ci in 0..c {
                    for ky in 0..kernel.0 {
                        for kx in 0..kernel.1 {
                            let y = (oy * stride.0 + ky).checked_sub(pad[0]);
                            let x = (ox * stride.1 + kx).checked_sub(pad[1]);
                            row[j] = match (y, x) {
                                (Some(y), Some(x)) if y < hh && x < ww => {
                                    f64::from(data[((n * c + ci) * hh + y) * ww + x])
                                }
                                _ => 0.0,
                            };
                            j += 1;
                        }
                    }
                }
                add_outer(h, &row);
            }
        }
    }
}

impl Hessian {
    /// The whole symmetric matrix (row-major) from the accumulated upper triangle.
    fn full(&self) -> Vec<f64> {
        let k = self.k;
        let mut a = vec![0f64; k * k];
        for i in 0..k {
            for j in i..k {
                a[i * k + j] = self.h[i * k + j];
                a[j * k + i] = self.h[i * k + j];
            }
        }
        a
    }
}

/// `h += v v^T` (the upper triangle; [`Hessian::full`] mirrors it).
fn add_outer(h: &mut Hessian, v: &[f64]) {
    let k = h.k;
    for (i, &vi) in v.iter().enumerate() {
        if vi == 0.0 {
            continue;
        }
        let hr = &mut h.h[i * k..(i + 1) * k];
        for (x, &vj) in hr[i..].iter_mut().zip(&v[i..]) {
            *x += vi * vj;
        }
    }
    h.rows += 1;
}

/// The lower Cholesky factor of the symmetric positive definite `a` (`k x k`), in place;
/// `None` when `a` is not positive definite.
fn cholesky(a: &mut [f64], k: usize) -> Option<()> {
    for j in 0..k {
        let mut d = a[j * k + j];
        for p in 0..j {
            d -= a[j * k + p] * a[j * k + p];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * k + j] = d;
        for i in j + 1..k {
            let mut s = a[i * k + j];
            for p in 0..j {
                s -= a[i * k + p] * a[j * k + p];
            }
            a[i * k + j] = s / d;
        }
        for i in 0..j {
            a[i * k + j] = 0.0;
        }
    }
    Some(())
}

/// The upper factor `U` of `H^-1 = U^T U` for the (damped) `H`: `H^-1` from `H`'s Cholesky
/// factor, then `U` as the transpose of `H^-1`'s lower Cholesky factor.
fn inverse_upper_factor(h: &Hessian) -> Option<Vec<f64>> {
    let k = h.k;
    let mut a = h.full();
    let mean = (0..k).map(|i| a[i * k + i]).sum::<f64>() / k as f64;
    let damp = 0.01 * if mean > 0.0 { mean } else { 1.0 };
    for i in 0..k {
        // A column no sample ever excites keeps its nearest rounding (its row of H is 0).
        if a[i * k + i] == 0.0 {
            a[i * k + i] = 1.0;
        }
        a[i * k + i] += damp;
    }
    cholesky(&mut a, k)?;
    // L^-1 by forward substitution, then H^-1 = L^-T L^-1.
    let mut linv = vec![0f64; k * k];
    for c in 0..k {
        for i in c..k {
            let mut s = if i == c { 1.0 } else { 0.0 };
            for p in c..i {
                s -= a[i * k + p] * linv[p * k + c];
            }
            linv[i * k + c] = s / a[i * k + i];
        }
    }
    let mut hinv = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..=i {
            let s: f64 = (i..k).map(|p| linv[p * k + i] * linv[p * k + j]).sum();
            hinv[i * k + j] = s;
            hinv[j * k + i] = s;
        }
    }
    cholesky(&mut hinv, k)?;
    let mut u = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..=i {
            u[j * k + i] = hinv[i * k + j];
        }
    }
    Some(u)
}

/// Rounds `w` (`o` rows of `f.k` weights, row-major) to integers in `[-qmax, qmax]` at each
/// row's scale `scales[r]` with error feedback `f` (see the module docs); `None` when the
/// weights are not `o x f.k` (the caller then rounds to nearest).
pub fn round_rows(w: &[f32], scales: &[f64], qmax: f64, f: &Feedback) -> Option<Vec<i32>> {
    let (k, u) = (f.k, &f.u);
    let o = scales.len();
    if w.len() != o * k {
        return None;
    }
    let mut q = vec![0i32; o * k];
    let mut row = vec![0f64; k];
    for r in 0..o {
        let s = scales[r];
        for (d, &v) in row.iter_mut().zip(&w[r * k..(r + 1) * k]) {
            *d = f64::from(v);
        }
        for j in 0..k {
            let qj = (row[j] / s).round().clamp(-qmax, qmax);
            q[r * k + j] = qj as i32;
            let e = (row[j] - qj * s) / u[j * k + j];
            for p in j + 1..k {
                row[p] -= e * u[j * k + p];
            }
        }
    }
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hessian(rows: &[Vec<f64>]) -> Hessian {
        let k = rows[0].len();
        let mut h = Hessian {
            k,
            h: vec![0.0; k * k],
            rows: 0,
        };
        for r in rows {
            add_outer(&mut h, r);
        }
        h
    }

    /// A deterministic pseudo-random sequence in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn the_inverse_factor_reconstructs_the_damped_inverse() {
        let xs: Vec<Vec<f64>> = (0..40).map(|i| noise(6, i)).collect();
        let h = hessian(&xs);
        let u = inverse_upper_factor(&h).unwrap();
        let k = h.k;
        // U is upper triangular, and (U^T U) (H + damp) = I.
        for i in 0..k {
            for j in 0..i {
                assert_eq!(u[i * k + j], 0.0);
            }
        }
        let mut full = h.full();
        let mean = (0..k).map(|i| full[i * k + i]).sum::<f64>() / k as f64;
        for i in 0..k {
            full[i * k + i] += 0.01 * mean;
        }
        for i in 0..k {
            for j in 0..k {
                let v: f64 = (0..k)
                    .map(|m| {
                        let hinv_im: f64 = (0..k).map(|p| u[p * k + i] * u[p * k + m]).sum();
                        hinv_im * full[m * k + j]
                    })
                    .sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((v - want).abs() < 1e-9, "({i},{j}): {v}");
            }
        }
    }

    /// On correlated inputs, error feedback at 2 bits gives a smaller output error than
    /// rounding to nearest at the same scale.
    #[test]
    fn error_feedback_lowers_the_output_error_at_two_bits() {
        let k = 16;
        let base: Vec<Vec<f64>> = (0..4).map(|i| noise(k, 100 + i)).collect();
        let xs: Vec<Vec<f64>> = (0..200)
            .map(|i| {
                let c = noise(4, 500 + i);
                let n = noise(k, 900 + i);
                (0..k)
                    .map(|j| (0..4).map(|b| c[b] * base[b][j]).sum::<f64>() + 0.1 * n[j])
                    .collect()
            })
            .collect();
        let h = hessian(&xs);
        let w: Vec<f32> = noise(3 * k, 7).iter().map(|&v| v as f32).collect();
        let scales = vec![0.6; 3];
        let fb = round_rows(&w, &scales, 1.0, &factor(&h).unwrap()).unwrap();
        let nearest: Vec<i32> = w
            .iter()
            .map(|&v| (f64::from(v) / 0.6).round().clamp(-1.0, 1.0) as i32)
            .collect();
        let err = |q: &[i32]| -> f64 {
            xs.iter()
                .map(|x| {
                    (0..3)
                        .map(|r| {
                            let d: f64 = (0..k)
                                .map(|j| {
                                    (f64::from(w[r * k + j]) - 0.6 * f64::from(q[r * k + j])) * x[j]
                                })
                                .sum();
                            d * d
                        })
                        .sum::<f64>()
                })
                .sum()
        };
        assert!(fb.iter().all(|v| (-1..=1).contains(v)));
        assert!(
            err(&fb) < 0.8 * err(&nearest),
            "feedback {} vs nearest {}",
            err(&fb),
            err(&nearest)
        );
    }
}
