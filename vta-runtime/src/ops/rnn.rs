//! `RNN`, `GRU` and `LSTM`: one-layer recurrent networks with ONNX's semantics in f32 (gate
//! orders, biases `Wb + Rb`, peepholes, `clip`, `input_forget`, `linear_before_reset`, every
//! activation function of the spec, directions forward/reverse/bidirectional, `layout` 0
//! (time-major) and 1 (batch-major), `initial_h`/`initial_c`, and `sequence_lens`: a shorter
//! sequence stops early, its `Y` rows past the end are 0 and `Y_h`/`Y_c` hold its last
//! state, as onnxruntime does). The three share their loop; [`Cell`] says which one.

use ndarray::{ArrayD, IxDyn};

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
                "R has shape {r:?}, expected {:?} (directions, {} gates x hidden_size, hidden_size)",
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

impl Op for Recurrent {
    fn op_type(&self) -> &'static str {
        self.cell.op_type()
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let w = in_fact(inputs, 1, "W")?;
        let r = in_fact(inputs, 2, "R")?;
        for (f, what) in [(x, "X"), (w, "W"), (r, "R")] {
            if f.dtype != DType::F32 {
                return Err(format!("{what} must be float, got {}", f.dtype));
            }
        }
        let d = self.dims(&x.shape, &w.shape, &r.shape)?;
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
        let w = arg(inputs, 1, "W")?.as_f32()?;
        let r = arg(inputs, 2, "R")?.as_f32()?;
        let d = self.dims(x.shape(), w.shape(), r.shape())?;
        let (h, g) = (d.hidden, self.cell.gates());
        let x = x.as_standard_layout();
        let w = w.as_standard_layout();
        let r = r.as_standard_layout();
        let (xs, ws, rs) = (
            x.as_slice().unwrap(),
            w.as_slice().unwrap(),
            r.as_slice().unwrap(),
        );
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
                    .collect::<Result<_, _>>()?
            }
        };
        let state = self.state_shape(&d);
        let h0 = optional(inputs, 5, "initial_h", &state)?;
        let c0 = optional(inputs, 6, "initial_c", &state)?;
        let p = optional(inputs, 7, "P", &[d.dirs, 3 * h])?;
        let mut y = ArrayD::<f32>::zeros(IxDyn(&self.y_shape(&d)));
        let mut yh = ArrayD::<f32>::zeros(IxDyn(&state));
        let mut yc = ArrayD::<f32>::zeros(IxDyn(&state));
        let per_dir = self.activations.len() / d.dirs;
        // Per-step buffers: x W^T + Wb and h R^T + Rb for every gate row.
        let mut xw = vec![0f32; g * h];
        let mut hr = vec![0f32; g * h];
        for dir in 0..d.dirs {
            let reverse = self.direction == Direction::Reverse || dir == 1;
            let acts = &self.activations[dir * per_dir..(dir + 1) * per_dir];
            let wd = &ws[dir * g * h * d.input..(dir + 1) * g * h * d.input];
            let rd = &rs[dir * g * h * h..(dir + 1) * g * h * h];
            for (n, &len) in lens.iter().enumerate() {
                let sidx = |k: usize| {
                    if self.batch_major {
                        [n, dir, k]
                    } else {
                        [dir, n, k]
                    }
                };
                let mut hs: Vec<f32> = (0..h).map(|k| h0[&sidx(k)[..]]).collect();
                let mut cs: Vec<f32> = (0..h).map(|k| c0[&sidx(k)[..]]).collect();
                for step in 0..len {
                    let t = if reverse { len - 1 - step } else { step };
                    let xo = if self.batch_major {
                        (n * d.seq + t) * d.input
                    } else {
                        (t * d.batch + n) * d.input
                    };
                    let xt = &xs[xo..xo + d.input];
                    for k in 0..g * h {
                        xw[k] = dot(xt, &wd[k * d.input..(k + 1) * d.input]) + b[[dir, k]];
                        hr[k] = dot(&hs, &rd[k * h..(k + 1) * h]) + b[[dir, g * h + k]];
                    }
                    let next = match self.cell {
                        Cell::Rnn => (0..h)
                            .map(|k| acts[0].apply(self.clip(xw[k] + hr[k])))
                            .collect(),
                        Cell::Gru {
                            linear_before_reset,
                        } => {
                            let (f, gg) = (acts[0], acts[1]);
                            let z: Vec<f32> =
                                (0..h).map(|k| f.apply(self.clip(xw[k] + hr[k]))).collect();
                            let rg: Vec<f32> = (0..h)
                                .map(|k| f.apply(self.clip(xw[h + k] + hr[h + k])))
                                .collect();
                            let rh: Vec<f32> = hs.iter().zip(&rg).map(|(a, b)| a * b).collect();
                            (0..h)
                                .map(|k| {
                                    let rec = if linear_before_reset {
                                        rg[k] * hr[2 * h + k]
                                    } else {
                                        dot(&rh, &rd[(2 * h + k) * h..(2 * h + k + 1) * h])
                                            + b[[dir, 5 * h + k]]
                                    };
                                    let cand = gg.apply(self.clip(xw[2 * h + k] + rec));
                                    (1.0 - z[k]) * cand + z[k] * hs[k]
                                })
                                .collect()
                        }
                        Cell::Lstm { input_forget } => {
                            let (f, gg, hh) = (acts[0], acts[1], acts[2]);
                            let mut next = vec![0f32; h];
                            for k in 0..h {
                                let pre = |gate: usize| xw[gate * h + k] + hr[gate * h + k];
                                let i = f.apply(self.clip(pre(0) + p[[dir, k]] * cs[k]));
                                let fg = if input_forget {
                                    1.0 - i
                                } else {
                                    f.apply(self.clip(pre(2) + p[[dir, 2 * h + k]] * cs[k]))
                                };
                                let c = gg.apply(self.clip(pre(3)));
                                cs[k] = fg * cs[k] + i * c;
                                let o = f.apply(self.clip(pre(1) + p[[dir, h + k]] * cs[k]));
                                next[k] = o * hh.apply(cs[k]);
                            }
                            next
                        }
                    };
                    hs = next;
                    for (k, &v) in hs.iter().enumerate() {
                        let at = if self.batch_major {
                            [n, t, dir, k]
                        } else {
                            [t, dir, n, k]
                        };
                        y[&at[..]] = v;
                    }
                }
                for k in 0..h {
                    yh[&sidx(k)[..]] = hs[k];
                    yc[&sidx(k)[..]] = cs[k];
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
