//! The lowered plan the runtime executes: an ordered list of [`Step`]s over tensors
//! identified by [`ValueId`].
//!
//! - [`StepKind::Quantize`]: float32 in, int8 out (the model's input quantization):
//!   `q = clamp(round_half_even(x / scale) + zero_point, lo, hi)`, `[lo, hi]` the int8 range
//!   or the narrower one of a core's lanes;
//! - [`StepKind::Accel`]: one accelerator layer of [`crate::qlayer`] on int8 tensors, with
//!   the exact semantics of its `reference` function;
//! - [`StepKind::Cpu`]: a fallback op run on the CPU with exact ONNX semantics (integer ops
//!   bit-exact, float ops in f32), or an exact representation change (uint8 <-> int8);
//! - [`StepKind::Dequantize`]: int8 in, float32 out (`x = (q - zero_point) * scale`), so
//!   the plan's outputs compare directly with the user's framework.
//!
//! Every accelerator tensor is int8 in NCHW (activations) order; a uint8 ONNX tensor is held
//! as `uint8 - 128` (an exact shift of its zero point). Values flagged `constant` are known at
//! compile time (weights of CPU ops).

use std::fmt;
use std::sync::Arc;

use crate::ops::{AnyOp, TensorInfo};
use crate::qlayer::{
    QAdd, QAffine, QBinary, QConcat, QConv2d, QDense, QGlobalAvgPool, QLeakyRelu, QMaxPool, QSlice,
    QTable, QUpsample, Requant,
};
use crate::tensor::{Fact, Tensor};

/// Index of a value in [`Plan::values`].
pub type ValueId = usize;

/// Affine quantization of an int8 plan value: `real = scale * (q - zero_point)`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct QuantParams {
    pub scale: f32,
    pub zero_point: i32,
}

/// A tensor of the plan.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct PlanValue {
    pub name: String,
    pub fact: Fact,
    /// For quantized values: what real number each element stands for.
    pub quant: Option<QuantParams>,
    /// Compile-time constant (weights or parameters of CPU steps).
    pub constant: Option<Arc<Tensor>>,
    /// For int8 values, where known: bounds every element lies within (the clamp of the
    /// step producing it). A core whose lanes are narrower than 8 bits reads a value only
    /// when these bounds fit its lanes.
    pub range: Option<(i8, i8)>,
}

/// One accelerator layer.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum Layer {
    /// Input 0: int8 [N, C, H, W]; output int8 [N, O, OH, OW].
    Conv2d(QConv2d),
    /// Input 0: int8 [N, K]; output int8 [N, M].
    Dense(QDense),
    /// Inputs 0 and 1: int8 of the same shape (rank 2 to 4; read as NCHW with missing
    /// trailing dimensions of 1, channel axis 1); output the same shape.
    Add(QAdd),
    /// Input 0: int8 [N, C, H, W].
    MaxPool(QMaxPool),
    /// Input 0: int8 [N, C, H, W]; output [N, C, 1, 1].
    GlobalAvgPool(QGlobalAvgPool),
    /// Input 0: int8 of any shape; output the same shape (a 256-entry lookup table).
    Table(QTable),
    /// Input 0: int8 (rank 2 to 4, NCHW); output the same shape.
    Affine(QAffine),
    /// Inputs 0 and 1: int8 (rank 2 to 4, NCHW), the second of the same shape or
    /// `[N, C, 1, 1]`; output the shape of the first.
    Binary(QBinary),
    /// Input 0: int8 (rank 2 to 4, NCHW); output the same shape.
    LeakyRelu(QLeakyRelu),
    /// Input 0: int8 [N, C, H, W]; output [N, C, H * fy, W * fx].
    Upsample(QUpsample),
    /// Inputs: int8 (rank 2 to 4, NCHW) equal but for their channels; output their
    /// concatenation along the channels.
    Concat(QConcat),
    /// Input 0: int8 (rank 2 to 4, NCHW); output `len` of its channels.
    Slice(QSlice),
}

impl Layer {
    /// Checks the layer's parameters against its input and output facts, so that its reference
    /// and its programs only ever see consistent shapes (a plan read from a file is checked
    /// before it runs).
    pub fn check(&self, inputs: &[&Fact], out: &Fact) -> Result<(), String> {
        let x = inputs.first().ok_or("no input")?;
        let requant = |r: &Requant, channels: usize| -> Result<(), String> {
            if r.mul.len() != 1 && r.mul.len() != channels {
                return Err(format!(
                    "{} multipliers for {channels} channels",
                    r.mul.len()
                ));
            }
            if r.shift > 31
                || r.pre_shift > 31
                || r.lo > r.hi
                || r.acc_clamp.is_some_and(|(lo, hi)| lo > hi)
            {
                return Err(format!("requantization {r:?} is out of range"));
            }
            Ok(())
        };
        let want_out = |shape: Vec<usize>| {
            if out.shape == shape {
                Ok(())
            } else {
                Err(format!("computes {shape:?}, the plan's output is {out}"))
            }
        };
        match self {
            Layer::Conv2d(l) => {
                let [n, c, h, w] = x.nchw()?;
                let [o, ci, kh, kw]: [usize; 4] = l
                    .weight
                    .shape()
                    .try_into()
                    .map_err(|_| "weight is not 4-D")?;
                if [n, c, h, w] != l.input_shape {
                    return Err(format!("input {x} is not {:?}", l.input_shape));
                }
                let fits = l.groups > 0
                    && c % l.groups == 0
                    && o % l.groups == 0
                    && ci == c / l.groups
                    && l.stride.0 > 0
                    && l.stride.1 > 0
                    && kh > 0
                    && kw > 0
                    && kh <= h + l.pad[0] + l.pad[2]
                    && kw <= w + l.pad[1] + l.pad[3];
                if !fits || l.bias.len() != o {
                    return Err(format!(
                        "weight {:?}, {} biases, groups {}, stride {:?} and pads {:?} do not fit input {x}",
                        l.weight.shape(),
                        l.bias.len(),
                        l.groups,
                        l.stride,
                        l.pad
                    ));
                }
                requant(&l.requant, o)?;
                want_out(l.output_shape().to_vec())
            }
            Layer::Dense(l) => {
                let (m, k) = l.weight.dim();
                let [nx, kx] = x.shape[..] else {
                    return Err(format!("input {x} is not 2-D"));
                };
                if kx != k || l.bias.len() != m {
                    return Err(format!(
                        "weight [{m}, {k}] and {} biases do not fit input {x}",
                        l.bias.len()
                    ));
                }
                requant(&l.requant, m)?;
                want_out(vec![nx, m])
            }
            Layer::Add(l) => {
                let y = inputs.get(1).ok_or("no second input")?;
                if x != y {
                    return Err(format!("operands {x} and {y} differ"));
                }
                requant(&l.requant, x.nchw()?[1])?;
                want_out(x.shape.clone())
            }
            Layer::MaxPool(l) => {
                let [n, c, h, w] = x.nchw()?;
                let (k, s, p) = (l.kernel, l.stride, l.pad);
                if k.0 == 0
                    || k.1 == 0
                    || s.0 == 0
                    || s.1 == 0
                    || k.0 > h + p[0] + p[2]
                    || k.1 > w + p[1] + p[3]
                {
                    return Err(format!(
                        "window {k:?} stride {s:?} pads {p:?} do not fit input {x}"
                    ));
                }
                let (oh, ow) = l.output_hw(h, w);
                want_out(vec![n, c, oh, ow])
            }
            Layer::GlobalAvgPool(l) => {
                let [n, c, _, _] = x.nchw()?;
                requant(&l.requant, c)?;
                want_out(vec![n, c, 1, 1])
            }
            Layer::Table(l) => {
                l.check()?;
                want_out(x.shape.clone())
            }
            Layer::Affine(l) => {
                let c = x.nchw()?[1];
                l.check(c)?;
                requant(&l.requant, c)?;
                want_out(x.shape.clone())
            }
            Layer::Binary(l) => {
                let y = inputs.get(1).ok_or("no second input")?;
                if !QBinary::operands_fit(&x.shape, &y.shape) {
                    return Err(format!(
                        "operands {x} and {y}: the second must have the first's shape or [N, C, 1, 1]"
                    ));
                }
                requant(&l.requant, x.nchw()?[1])?;
                want_out(x.shape.clone())
            }
            Layer::LeakyRelu(l) => {
                let c = x.nchw()?[1];
                if l.mul_neg.len() != 1 && l.mul_neg.len() != c {
                    return Err(format!("{} slopes for {c} channels", l.mul_neg.len()));
                }
                requant(&l.requant, c)?;
                want_out(x.shape.clone())
            }
            Layer::Upsample(l) => {
                let [n, c, h, w] = x.nchw()?;
                if x.rank() != 4 || l.factor.0 == 0 || l.factor.1 == 0 {
                    return Err(format!("factors {:?} for input {x}", l.factor));
                }
                want_out(l.output_shape([n, c, h, w]).to_vec())
            }
            Layer::Concat(_) => {
                let shapes: Vec<&[usize]> = inputs.iter().map(|f| f.shape.as_slice()).collect();
                want_out(QConcat::output_shape(&shapes)?)
            }
            Layer::Slice(l) => {
                let c = x.nchw()?[1];
                if l.len == 0 || l.start + l.len > c {
                    return Err(format!("channels {}..{} of {x}", l.start, l.start + l.len));
                }
                let mut s = x.shape.clone();
                s[1] = l.len;
                want_out(s)
            }
        }
    }

    /// The layer kind as named in `qlayer` (`"QConv2d"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Conv2d(_) => "QConv2d",
            Layer::Dense(_) => "QDense",
            Layer::Add(_) => "QAdd",
            Layer::MaxPool(_) => "QMaxPool",
            Layer::GlobalAvgPool(_) => "QGlobalAvgPool",
            Layer::Table(_) => "QTable",
            Layer::Affine(_) => "QAffine",
            Layer::Binary(_) => "QBinary",
            Layer::LeakyRelu(_) => "QLeakyRelu",
            Layer::Upsample(_) => "QUpsample",
            Layer::Concat(_) => "QConcat",
            Layer::Slice(_) => "QSlice",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Layer::Conv2d(l) => &l.name,
            Layer::Dense(l) => &l.name,
            Layer::Add(l) => &l.name,
            Layer::MaxPool(l) => &l.name,
            Layer::GlobalAvgPool(l) => &l.name,
            Layer::Table(l) => &l.name,
            Layer::Affine(l) => &l.name,
            Layer::Binary(l) => &l.name,
            Layer::LeakyRelu(l) => &l.name,
            Layer::Upsample(l) => &l.name,
            Layer::Concat(l) => &l.name,
            Layer::Slice(l) => &l.name,
        }
    }
}

/// A CPU fallback op: an op with its argument slots (`None` for omitted optional inputs;
/// constant arguments are plan values with [`PlanValue::constant`]).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct CpuOp {
    pub op: AnyOp,
    pub args: Vec<Option<ValueId>>,
    /// Why this is not on the accelerator.
    pub reason: String,
}

/// What a step does.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub enum StepKind {
    /// float32 -> int8: `q = clamp(round_half_even(x / scale) + zero_point, lo, hi)`.
    Quantize { q: QuantParams, lo: i8, hi: i8 },
    /// int8 -> float32: `x = (q - zero_point) * scale`.
    Dequantize(QuantParams),
    /// An accelerator layer.
    Accel(Layer),
    /// A CPU fallback op.
    Cpu(CpuOp),
}

/// One step of the plan.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct Step {
    /// The ONNX node (or model input/output) the step comes from.
    pub name: String,
    /// Values read (constants included), in argument order.
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub kind: StepKind,
}

impl Step {
    /// `"Quantize"`, `"Dequantize"`, the layer kind, or `"Cpu:<op>"`.
    pub fn kind_name(&self) -> String {
        match &self.kind {
            StepKind::Quantize { .. } => "Quantize".into(),
            StepKind::Dequantize(_) => "Dequantize".into(),
            StepKind::Accel(l) => l.kind().into(),
            StepKind::Cpu(c) => format!("Cpu:{}", c.op.op().op_type()),
        }
    }

    pub fn is_accel(&self) -> bool {
        matches!(self.kind, StepKind::Accel(_))
    }
}

/// A lowered model.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default)]
pub struct Plan {
    /// The model file, for messages.
    pub source: String,
    pub values: Vec<PlanValue>,
    /// The model's inputs, in ONNX order, with their ONNX types (float32 for float models).
    pub inputs: Vec<ValueId>,
    /// The model's outputs, in ONNX order, with their ONNX types.
    pub outputs: Vec<ValueId>,
    pub steps: Vec<Step>,
}

impl Plan {
    /// Adds a value.
    pub fn add_value(
        &mut self,
        name: impl Into<String>,
        fact: Fact,
        quant: Option<QuantParams>,
    ) -> ValueId {
        self.values.push(PlanValue {
            name: name.into(),
            fact,
            quant,
            constant: None,
            range: None,
        });
        self.values.len() - 1
    }

    /// Adds a constant value.
    pub fn add_constant(&mut self, name: impl Into<String>, t: Arc<Tensor>) -> ValueId {
        self.values.push(PlanValue {
            name: name.into(),
            fact: t.fact(),
            quant: None,
            constant: Some(t),
            range: None,
        });
        self.values.len() - 1
    }

    /// The accelerator layers, in order.
    pub fn layers(&self) -> impl Iterator<Item = &Layer> {
        self.steps.iter().filter_map(|s| match &s.kind {
            StepKind::Accel(l) => Some(l),
            _ => None,
        })
    }

    /// Checks the facts of every value against a memory budget of `limit` bytes (see
    /// [`crate::budget`]), before anything of that size is allocated.
    pub fn check_budget(&self, limit: u64) -> Result<(), String> {
        let mut budget = crate::budget::MemoryBudget::new(limit);
        self.values
            .iter()
            .try_for_each(|v| budget.charge(&v.name, &v.fact))
    }

    /// Checks that every value id is in range, every step reads computed values, every constant matches its value's fact and every
    /// step writes fresh values: what a plan read from a file must satisfy before it runs.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.values.len();
        let id = |v: ValueId, what: &str| {
            if v < n {
                Ok(())
            } else {
                Err(format!("{what} refers to value {v}, the plan has {n}"))
            }
        };
        for (i, v) in self.values.iter().enumerate() {
            if let Some(c) = &v.constant {
                if c.fact() != v.fact {
                    return Err(format!(
                        "constant value {i} '{}' is {}, its fact says {}",
                        v.name,
                        c.fact(),
                        v.fact
                    ));
                }
            }
        }
        for &v in &self.inputs {
            id(v, "a model input")?;
        }
        for &v in &self.outputs {
            id(v, "a model output")?;
        }
        let mut written = vec![false; n];
        for &v in &self.inputs {
            written[v] = true;
        }
        for (k, st) in self.steps.iter().enumerate() {
            let what = format!("step {k} ({})", st.name);
            for &v in &st.inputs {
                id(v, &what)?;
                if !written[v] && self.values[v].constant.is_none() {
                    return Err(format!(
                        "{what} reads value {v} before any step computes it"
                    ));
                }
            }
            if let StepKind::Cpu(c) = &st.kind {
                for &v in c.args.iter().flatten() {
                    id(v, &what)?;
                }
            }
            if st.outputs.is_empty() {
                return Err(format!("{what} has no output"));
            }
            for &v in &st.outputs {
                id(v, &what)?;
            }
            self.check_step(st).map_err(|e| format!("{what}: {e}"))?;
            for &v in &st.outputs {
                if written[v] || self.values[v].constant.is_some() {
                    return Err(format!("{what} writes value {v}, which is already set"));
                }
                written[v] = true;
            }
        }
        // An output may be a constant (a Dropout mask in inference, a folded shape).
        if let Some(&v) = self
            .outputs
            .iter()
            .find(|&&v| !written[v] && self.values[v].constant.is_none())
        {
            return Err(format!("model output value {v} is computed by no step"));
        }
        Ok(())
    }

    /// Checks that a step's parameters fit the facts of its values (value ids in range): the
    /// layers' weights, biases, windows and requantization against their input and output
    /// shapes, a CPU op's inferred output facts against the plan's.
    fn check_step(&self, st: &Step) -> Result<(), String> {
        let fact = |v: ValueId| &self.values[v].fact;
        let ins: Vec<&Fact> = st.inputs.iter().map(|&v| fact(v)).collect();
        let out = fact(st.outputs[0]);
        match &st.kind {
            StepKind::Quantize { lo, hi, .. } if lo > hi => {
                Err(format!("saturates to an empty range [{lo}, {hi}]"))
            }
            StepKind::Quantize { .. } | StepKind::Dequantize(_) => {
                let x = ins.first().ok_or("no input")?;
                if x.shape != out.shape {
                    return Err(format!("maps {x} to {out}"));
                }
                Ok(())
            }
            StepKind::Accel(layer) => layer.check(&ins, out),
            StepKind::Cpu(c) => {
                let infos: Vec<Option<TensorInfo>> = c
                    .args
                    .iter()
                    .map(|a| {
                        a.map(|v| TensorInfo {
                            name: self.values[v].name.clone(),
                            fact: self.values[v].fact.clone(),
                            value: self.values[v].constant.clone(),
                        })
                    })
                    .collect();
                let refs: Vec<Option<&TensorInfo>> = infos.iter().map(Option::as_ref).collect();
                let facts = c.op.op().infer(&refs)?;
                let want: Vec<&Fact> = st.outputs.iter().map(|&v| fact(v)).collect();
                if facts.len() < want.len() || facts.iter().zip(&want).any(|(a, b)| a != *b) {
                    return Err(format!(
                        "{} gives {facts:?} for its inputs, the plan says {want:?}",
                        c.op.op().op_type()
                    ));
                }
                Ok(())
            }
        }
    }

    /// Number of accelerator steps and of CPU steps (quantize/dequantize included).
    pub fn counts(&self) -> (usize, usize) {
        let a = self.steps.iter().filter(|s| s.is_accel()).count();
        (a, self.steps.len() - a)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |i: &ValueId| {
            let p = &self.values[*i];
            if p.constant.is_some() {
                format!("const {}", p.name)
            } else {
                format!("%{i} {}", p.fact)
            }
        };
        writeln!(f, "plan of {}", self.source)?;
        for i in &self.inputs {
            writeln!(f, "  input  {} ({})", v(i), self.values[*i].name)?;
        }
        for (k, s) in self.steps.iter().enumerate() {
            let ins: Vec<String> = s
                .inputs
                .iter()
                .filter(|i| self.values[**i].constant.is_none())
                .map(v)
                .collect();
            let outs: Vec<String> = s.outputs.iter().map(v).collect();
            let extra = match &s.kind {
                StepKind::Quantize {
                    q,
                    lo: -128,
                    hi: 127,
                }
                | StepKind::Dequantize(q) => {
                    format!(" scale {} zp {}", q.scale, q.zero_point)
                }
                StepKind::Quantize { q, lo, hi } => {
                    format!(" scale {} zp {} to [{lo}, {hi}]", q.scale, q.zero_point)
                }
                StepKind::Cpu(c) => {
                    let sm = c.op.op().summary();
                    if sm.is_empty() {
                        String::new()
                    } else {
                        format!(" {sm}")
                    }
                }
                StepKind::Accel(_) => String::new(),
            };
            writeln!(
                f,
                "  {k:3} {:16} {:24} {} -> {}{extra}",
                s.kind_name(),
                s.name,
                ins.join(", "),
                outs.join(", ")
            )?;
        }
        for o in &self.outputs {
            writeln!(f, "  output {} ({})", v(o), self.values[*o].name)?;
        }
        Ok(())
    }
}
