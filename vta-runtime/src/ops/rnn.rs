//! `RNN`, `GRU` and `LSTM`: one-layer recurrent networks with ONNX's semantics in f32 (gate
//! orders, biases `Wb + Rb`, peepholes, `clip`, `input_forget`, `linear_before_reset`, every
//! activation function of the spec, directions forward/reverse/bidirectional, `layout` 0
//! (time-major) and 1 (batch-major), `initial_h`/`initial_c`, and `sequence_lens`: a shorter
//! sequence stops early, its `Y` rows past the end are 0 and `Y_h`/`Y_c` hold its last
//! state, as onnxruntime does). The three share their loop; [`Cell`] says which one. An LSTM
//! may have onnxruntime's dynamically quantized weights (`com.microsoft.DynamicQuantizeLSTM`,
//! [`Recurrent::quantized`]).

use ndarray::{ArrayD, IxDyn};

use super::dynamic_quantize_linear::dynamic_qparams;
use super::kernels::round_half_even;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

/// The recurrent cell, with its own attributes.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm { input_forget: bool },
}

impl Cell {
    pub fn op_type(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru { .. } => "GRU",
            Cell::Lstm { .. } => "LSTM",
        }
    }

    /// Gates (blocks of `hidden_size` rows of W and R).
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }

    /// The activation functions of one direction, by default (f, g, h as the spec names them).
    pub fn default_activations(self) -> Vec<Func> {
        match self {
            Cell::Rnn => vec![Func::Tanh],
            Cell::Gru { .. } => vec![Func::Sigmoid, Func::Tanh],
            Cell::Lstm { .. } => vec![Func::Sigmoid, Func::Tanh, Func::Tanh],
        }
    }
}

/// An activation function of the recurrent ops (the spec's list, with its parameters).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Func {
    Relu,
    Tanh,
    Sigmoid,
    Affine { alpha: f32, beta: f32 },
    LeakyRelu { alpha: f32 },
    ThresholdedRelu { alpha: f32 },
    ScaledTanh { alpha: f32, beta: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    Elu { alpha: f32 },
    Softsign,
    Softplus,
}

impl Func {
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Func::Relu => x.max(0.0),
            Func::Tanh => x.tanh(),
            Func::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Func::Affine { alpha, beta } => alpha * x + beta,
            Func::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            Func::ThresholdedRelu { alpha } => {
                if x >= alpha {
                    x
                } else {
                    0.0
                }
            }
            Func::ScaledTanh { alpha, beta } => alpha * (beta * x).tanh(),
            Func::HardSigmoid { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
            Func::Elu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * (x.exp() - 1.0)
                }
            }
            Func::Softsign => x / (1.0 + x.abs()),
            Func::Softplus => x.exp().ln_1p(),
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

impl Direction {
    pub fn count(self) -> usize {
        if self == Direction::Bidirectional {
            2
        } else {
            1
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Recurrent {
    pub cell: Cell,
    pub direction: Direction,
    /// The `hidden_size` attribute, checked against R's shape when given.
    pub hidden_size: Option<usize>,
    /// The activation functions of each direction in turn (forward first), as many per
    /// direction as [`Cell::default_activations`] has.
    pub activations: Vec<Func>,
    /// Gate pre-activations are clamped to `[-clip, clip]`.
    pub clip: Option<f32>,
    /// `layout = 1`: X, Y, initial and final states have the batch first.
    pub batch_major: bool,
    /// onnxruntime's `com.microsoft.DynamicQuantizeLSTM` (an LSTM): W `[dirs, input, 4
    /// hidden]` and R `[dirs, hidden, 4 hidden]` are int8/uint8 and transposed, with scales
    /// and zero points as inputs 8 to 11; the input of each matrix product is quantized per
    /// inference as DynamicQuantizeLinear does (the whole sequence for W, each step's state of
    /// all batch rows together for R), the product is exact in int32 and scaled back to float,
    /// as onnxruntime computes it with one intra-op thread (with more, it quantizes each
    /// thread's share of a batch of 2 or more rows by itself, so its result depends on its
    /// thread count).
    pub quantized: bool,
}

/// Sizes of one evaluation.
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
}

impl Recurrent {
    /// A weight shape as the float op has it (`[dirs, rows, k]`).
    fn canonical(&self, shape: &[usize]) -> Vec<usize> {
        let mut v = shape.to_vec();
        if self.quantized && v.len() == 3 {
            v.swap(1, 2);
        }
        v
    }

    fn dims(&self, x: &[usize], w: &[usize], r: &[usize]) -> Result<Dims, String> {
        if x.len() != 3 {
            return Err(format!("X must have rank 3, got shape {x:?}"));
        }
        let (seq, batch) = if self.batch_major {
            (x[1], x[0])
        } else {
            (x[0], x[1])
        };
        if r.len() != 3 {
            return Err(format!("R must have rank 3, got shape {r:?}"));
        }
        let hidden = r[2];
        if hidden == 0 || x.contains(&0) {
            return Err(format!(
                "X {x:?} and the hidden size {hidden} (from R) must have no zero dimension"
            ));
        }
        if let Some(h) = self.hidden_size {
            if h != hidden {
                return Err(format!(
                    "hidden_size is {h} but R's shape {r:?} has hidden size {hidden}"
                ));
            }
        }
        let dirs = self.direction.count();
        let rows = self.cell.gates() * hidden;
        if w != [dirs, rows, x[2]] {
            return Err(format!(
                "W has shape {w:?}, expected {:?} (directions, {} gates x hidden_size, input size)",
                [dirs, rows, x[2]],
                self.cell.gates()
            ));
        }
        if r != [dirs, rows, hidden] {
            return Err(format!(
                "R has shape {r:?}, expected {:?} (directions, {} gates x hidden_size, \
                 hidden_size)",
                [dirs, rows, hidden],
                self.cell.gates()
            ));
        }
        let per_dir = self.cell.default_activations().len();
        if self.activations.len() != per_dir * dirs {
            return Err(format!(
                "{} activation functions for {dirs} direction(s) of {}, expected {}",
                self.activations.len(),
                self.cell.op_type(),
                per_dir * dirs
            ));
        }
        Ok(Dims {
            seq,
            batch,
            input: x[2],
            hidden,
            dirs,
        })
    }

    /// Shape of a state (`[dirs, batch, hidden]`, batch first with layout 1).
    fn state_shape(&self, d: &Dims) -> Vec<usize> {
        if self.batch_major {
            vec![d.batch, d.dirs, d.hidden]
        } else {
            vec![d.dirs, d.batch, d.hidden]
        }
    }

    fn y_shape(&self, d: &Dims) -> Vec<usize> {
        if self.batch_major {
            vec![d.batch, d.seq, d.dirs, d.hidden]
        } else {
            vec![d.seq, d.dirs, d.batch, d.hidden]
        }
    }

    fn clip(&self, v: f32) -> f32 {
        match self.clip {
            Some(c) => v.clamp(-c, c),
            None => v,
        }
    }
}

/// `sum_k a[k] * b[k]`.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// An optional float input of an exact shape, or zeros.
fn optional(
    inputs: &[Option<&Tensor>],
    i: usize,
    what: &str,
    shape: &[usize],
) -> Result<ArrayD<f32>, String> {
    match inputs.get(i).copied().flatten() {
        None => Ok(ArrayD::zeros(IxDyn(shape))),
        Some(t) => {
            let a = t.as_f32()?;
            if a.shape() != shape {
                return Err(format!(
                    "{what} has shape {:?}, expected {shape:?}",
                    a.shape()
                ));
            }
            Ok(a.as_standard_layout().into_owned())
        }
    }
}

/// One direction's weight matrix, `rows` rows of `k` (gate-major, as ONNX's float W and R
/// are), with what turns an integer product into a float.
enum Matrix {
    Float(Vec<f32>),
    /// onnxruntime's quantized weights: `w - zp` and the scale of every row (one per
    /// direction, or one per row).
    Int {
        w: Vec<i32>,
        scale: Vec<f32>,
    },
}

impl Matrix {
    /// `a M^T` for the rows of `a` (each `k` long): in float, or as onnxruntime's quantized
    /// GEMM computes it — `a` quantized to uint8 as a whole with its own range (as
    /// DynamicQuantizeLinear does), the product exact in int32, then `acc * (a_scale *
    /// scale[row])` in f32.
    fn product(&self, a: &[&[f32]], rows: usize, k: usize) -> Vec<Vec<f32>> {
        match self {
            Matrix::Float(w) => a
                .iter()
                .map(|x| (0..rows).map(|j| dot(x, &w[j * k..(j + 1) * k])).collect())
                .collect(),
            Matrix::Int { w, scale } => {
                let all = || a.iter().flat_map(|x| x.iter().copied());
                let (a_scale, zp) = dynamic_qparams(all());
                let q: Vec<i32> = all()
                    .map(|v| {
                        (round_half_even(v / a_scale) + f32::from(zp)).clamp(0.0, 255.0) as i32
                            - i32::from(zp)
                    })
                    .collect();
                q.chunks(k)
                    .map(|x| {
                        (0..rows)
                            .map(|j| {
                                // int32 accumulation that wraps, as onnxruntime's does
                                // (a product of two 9-bit values cannot overflow).
                                let acc = x
                                    .iter()
                                    .zip(&w[j * k..(j + 1) * k])
                                    .fold(0i32, |s, (a, b)| s.wrapping_add(a * b));
                                let s = scale[if scale.len() == 1 { 0 } else { j }];
                                acc as f32 * (a_scale * s)
                            })
                            .collect()
                    })
                    .collect()
            }
        }
    }
}

/// onnxruntime's DynamicQuantizeLSTM weight input `i` (`[dirs, k, rows]`, transposed) of one
/// direction as a [`Matrix`] (`rows` rows of `k`), with its scale (input `s`: one per
/// direction or `[dirs, rows]`) and zero point (input `s + 1`: one per direction; onnxruntime
/// reads a single value).
fn quantized_matrix(
    inputs: &[Option<&Tensor>],
    (i, s): (usize, usize),
    what: &str,
    (dir, dirs): (usize, usize),
    rows: usize,
    k: usize,
) -> Result<Matrix, String> {
    let t = arg(inputs, i, what)?;
    let v = t.to_i32_array()?;
    let v = v.as_standard_layout();
    let v = v.as_slice().unwrap();
    let scale = arg(inputs, s, &format!("{what}_scale"))?.as_f32()?;
    let scales: Vec<f32> = scale.iter().copied().collect();
    let scale = match scales.len() {
        n if n == dirs => vec![scales[dir]],
        n if n == dirs * rows => scales[dir * rows..(dir + 1) * rows].to_vec(),
        n => {
            return Err(format!(
                "{what}_scale has {n} values; it needs one per direction or one per gate row"
            ))
        }
    };
    let zps = inputs
        .get(s + 1)
        .copied()
        .flatten()
        .map_or_else(|| vec![0; dirs], |z| z.to_i64_vec());
    let per = zps.len() / dirs;
    let zs = zps.get(dir * per..(dir + 1) * per).unwrap_or(&[]);
    let zp = match zs.first() {
        Some(&z) if zs.iter().all(|&v| v == z) => z as i32,
        _ => {
            return Err(format!(
                "{what}_zero_point must be one value per direction (onnxruntime reads one); \
                 got {zps:?}"
            ))
        }
    };
    let base = dir * k * rows;
    let mut w = vec![0i32; rows * k];
    for c in 0..k {
        for j in 0..rows {
            w[j * k + c] = v[base + c * rows + j] - zp;
        }
    }
    Ok(Matrix::Int { w, scale })
}

impl Op for Recurrent {
    fn op_type(&self) -> &'static str {
        if self.quantized {
            "DynamicQuantizeLSTM"
        } else {
            self.cell.op_type()
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let w = in_fact(inputs, 1, "W")?;
        let r = in_fact(inputs, 2, "R")?;
        let weight_ok = |t: DType| {
            if self.quantized {
                matches!(t, DType::I8 | DType::U8)
            } else {
                t == DType::F32
            }
        };
        if x.dtype != DType::F32 {
            return Err(format!("X must be float, got {}", x.dtype));
        }
        for (f, what) in [(w, "W"), (r, "R")] {
            if !weight_ok(f.dtype) {
                return Err(format!(
                    "{what} must be {}, got {}",
                    if self.quantized {
                        "int8 or uint8"
                    } else {
                        "float"
                    },
                    f.dtype
                ));
            }
        }
        if self.quantized {
            for (i, what) in [(8, "W_scale"), (10, "R_scale")] {
                in_fact(inputs, i, what)?;
            }
        }
        let d = self.dims(
            &x.shape,
            &self.canonical(&w.shape),
            &self.canonical(&r.shape),
        )?;
        let mut facts = vec![
            Fact::new(DType::F32, self.y_shape(&d)),
            Fact::new(DType::F32, self.state_shape(&d)),
        ];
        if matches!(self.cell, Cell::Lstm { .. }) {
            facts.push(Fact::new(DType::F32, self.state_shape(&d)));
        }
        Ok(facts)
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let w = arg(inputs, 1, "W")?;
        let r = arg(inputs, 2, "R")?;
        let d = self.dims(
            x.shape(),
            &self.canonical(w.shape()),
            &self.canonical(r.shape()),
        )?;
        let (h, g) = (d.hidden, self.cell.gates());
        let x = x.as_standard_layout();
        let xs = x.as_slice().unwrap();
        let b = optional(inputs, 3, "B", &[d.dirs, 2 * g * h])?;
        let lens = match inputs.get(4).copied().flatten() {
            None => vec![d.seq; d.batch],
            Some(t) => {
                let v = t.to_i64_vec();
                if v.len() != d.batch {
                    return Err(format!(
                        "sequence_lens has {} values for a batch of {}",
                        v.len(),
                        d.batch
                    ));
                }
                v.iter()
                    .map(|&l| {
                        usize::try_from(l)
                            .ok()
                            .filter(|&l| (1..=d.seq).contains(&l))
                            .ok_or_else(|| {
                                format!("sequence_lens value {l} is not in 1..={}", d.seq)
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        if self.quantized && lens.iter().any(|&l| l != d.seq) {
            return Err(format!(
                "sequence_lens {lens:?} shorter than the sequence ({}) is not supported by \
                 DynamicQuantizeLSTM (onnxruntime's per-step quantization of a partial batch); \
                 pad the sequences to the same length",
                d.seq
            ));
        }
        let state = self.state_shape(&d);
        let h0 = optional(inputs, 5, "initial_h", &state)?;
        let c0 = optional(inputs, 6, "initial_c", &state)?;
        let p = optional(inputs, 7, "P", &[d.dirs, 3 * h])?;
        let mut y = ArrayD::<f32>::zeros(IxDyn(&self.y_shape(&d)));
        let mut yh = ArrayD::<f32>::zeros(IxDyn(&state));
        let mut yc = ArrayD::<f32>::zeros(IxDyn(&state));
        let per_dir = self.activations.len() / d.dirs;
        let rows = g * h;
        let sidx = |n: usize, dir: usize, k: usize| {
            if self.batch_major {
                [n, dir, k]
            } else {
                [dir, n, k]
            }
        };
        let xrow = |n: usize, t: usize| {
            let o = if self.batch_major {
                (n * d.seq + t) * d.input
            } else {
                (t * d.batch + n) * d.input
            };
            &xs[o..o + d.input]
        };
        for dir in 0..d.dirs {
            let reverse = self.direction == Direction::Reverse || dir == 1;
            let acts = &self.activations[dir * per_dir..(dir + 1) * per_dir];
            let (wm, rm) = if self.quantized {
                (
                    quantized_matrix(inputs, (1, 8), "W", (dir, d.dirs), rows, d.input)?,
                    quantized_matrix(inputs, (2, 10), "R", (dir, d.dirs), rows, h)?,
                )
            } else {
                let slice = |t: &Tensor, k: usize| -> Result<Matrix, String> {
                    let a = t.as_f32()?.as_standard_layout().into_owned();
                    let v = a.as_slice().unwrap();
                    Ok(Matrix::Float(
                        v[dir * rows * k..(dir + 1) * rows * k].to_vec(),
                    ))
                };
                (slice(w, d.input)?, slice(r, h)?)
            };
            // The float op adds Wb to x W^T and Rb to h R^T (ONNX's order); onnxruntime's
            // quantized kernel adds Wb + Rb to their sum.
            let (wb, rb, both): (Vec<f32>, Vec<f32>, Vec<f32>) = {
                let wb: Vec<f32> = (0..rows).map(|k| b[[dir, k]]).collect();
                let rb: Vec<f32> = (0..rows).map(|k| b[[dir, rows + k]]).collect();
                if self.quantized {
                    let both = wb.iter().zip(&rb).map(|(a, c)| a + c).collect();
                    (vec![0.0; rows], vec![0.0; rows], both)
                } else {
                    (wb, rb, vec![0.0; rows])
                }
            };
            // x W^T + Wb for every (step, batch) row, time-major: onnxruntime's quantized
            // kernel quantizes the whole sequence at once.
            let order: Vec<&[f32]> = (0..d.seq)
                .flat_map(|t| (0..d.batch).map(move |n| (t, n)))
                .map(|(t, n)| xrow(n, t))
                .collect();
            let mut xw = wm.product(&order, rows, d.input);
            for v in &mut xw {
                for (a, c) in v.iter_mut().zip(&wb) {
                    *a += c;
                }
            }
            let mut hs: Vec<Vec<f32>> = (0..d.batch)
                .map(|n| (0..h).map(|k| h0[&sidx(n, dir, k)[..]]).collect())
                .collect();
            let mut cs: Vec<Vec<f32>> = (0..d.batch)
                .map(|n| (0..h).map(|k| c0[&sidx(n, dir, k)[..]]).collect())
                .collect();
            for step in 0..d.seq {
                let active: Vec<usize> = (0..d.batch).filter(|&n| step < lens[n]).collect();
                let hrefs: Vec<&[f32]> = active.iter().map(|&n| &hs[n][..]).collect();
                let mut hr = rm.product(&hrefs, rows, h);
                for v in &mut hr {
                    for (a, c) in v.iter_mut().zip(&rb) {
                        *a += c;
                    }
                }
                for (&n, hr) in active.iter().zip(&hr) {
                    let t = if reverse { lens[n] - 1 - step } else { step };
                    let xw = &xw[t * d.batch + n];
                    let pre = |k: usize| (xw[k] + hr[k]) + both[k];
                    let next: Vec<f32> = match self.cell {
                        Cell::Rnn => (0..h).map(|k| acts[0].apply(self.clip(pre(k)))).collect(),
                        Cell::Gru {
                            linear_before_reset,
                        } => {
                            let (f, gg) = (acts[0], acts[1]);
                            let z: Vec<f32> = (0..h).map(|k| f.apply(self.clip(pre(k)))).collect();
                            let rg: Vec<f32> =
                                (0..h).map(|k| f.apply(self.clip(pre(h + k)))).collect();
                            let rh: Vec<f32> = hs[n].iter().zip(&rg).map(|(a, c)| a * c).collect();
                            let rec: Vec<f32> = match (&rm, linear_before_reset) {
                                (_, true) => (0..h).map(|k| rg[k] * hr[2 * h + k]).collect(),
                                (Matrix::Float(wr), false) => (0..h)
                                    .map(|k| {
                                        dot(&rh, &wr[(2 * h + k) * h..(2 * h + k + 1) * h])
                                            + rb[2 * h + k]
                                    })
                                    .collect(),
                                (Matrix::Int { .. }, false) => {
                                    return Err("a GRU with quantized weights is not an operator \
                                                of ONNX or onnxruntime"
                                        .into())
                                }
                            };
                            (0..h)
                                .map(|k| {
                                    let cand = gg.apply(self.clip(xw[2 * h + k] + rec[k]));
                                    (1.0 - z[k]) * cand + z[k] * hs[n][k]
                                })
                                .collect()
                        }
                        Cell::Lstm { input_forget } => {
                            let (f, gg, hh) = (acts[0], acts[1], acts[2]);
                            let cs = &mut cs[n];
                            (0..h)
                                .map(|k| {
                                    let i = f.apply(self.clip(pre(k) + p[[dir, k]] * cs[k]));
                                    let fg = if input_forget {
                                        1.0 - i
                                    } else {
                                        f.apply(
                                            self.clip(pre(2 * h + k) + p[[dir, 2 * h + k]] * cs[k]),
                                        )
                                    };
                                    let c = gg.apply(self.clip(pre(3 * h + k)));
                                    cs[k] = fg * cs[k] + i * c;
                                    let o =
                                        f.apply(self.clip(pre(h + k) + p[[dir, h + k]] * cs[k]));
                                    o * hh.apply(cs[k])
                                })
                                .collect()
                        }
                    };
                    for (k, &v) in next.iter().enumerate() {
                        let at = if self.batch_major {
                            [n, t, dir, k]
                        } else {
                            [t, dir, n, k]
                        };
                        y[&at[..]] = v;
                    }
                    hs[n] = next;
                }
            }
            for n in 0..d.batch {
                for k in 0..h {
                    yh[&sidx(n, dir, k)[..]] = hs[n][k];
                    yc[&sidx(n, dir, k)[..]] = cs[n][k];
                }
            }
        }
        let mut out = vec![Tensor::F32(y), Tensor::F32(yh)];
        if matches!(self.cell, Cell::Lstm { .. }) {
            out.push(Tensor::F32(yc));
        }
        Ok(out)
    }

    fn summary(&self) -> String {
        format!("{:?}, {:?}", self.cell, self.direction)
    }

    op_boilerplate!();
}
