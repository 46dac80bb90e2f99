//! Single-input element-wise functions of float tensors: `Sigmoid`, `HardSigmoid`,
//! `HardSwish`, `Tanh`, `LeakyRelu`, `Erf`, `Exp`, `Gelu`, `Softplus`, `Mish`, `Sqrt`, `Floor`,
//! `Ceil`, `Round`, and SiLU
//! (`x * Sigmoid(x)`, which the graph passes fuse from its two ONNX nodes).
//!
//! [`Unary::apply`] is the one scalar definition: [`Op::eval`] maps it over a tensor, and the
//! quantized table activation (`crate::qlayer::QTable::build`) evaluates it on the 256 int8
//! inputs, so a table and the float op agree bit for bit on every dequantized input.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

/// Which function, with its ONNX attributes.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum UnaryKind {
    Sigmoid,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x * HardSigmoid(x)` with `alpha = 1/6`, `beta = 0.5`.
    HardSwish,
    Tanh,
    /// `x` for `x >= 0`, `alpha * x` otherwise.
    LeakyRelu {
        alpha: f32,
    },
    Erf,
    Exp,
    /// `0.5 x (1 + erf(x / sqrt 2))`, or with `tanh` its tanh approximation
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    Gelu {
        tanh: bool,
    },
    /// `ln(1 + exp(x))`.
    Softplus,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x * sigmoid(x)` (not an ONNX operator: the fusion of `Mul(x, Sigmoid(x))`).
    Silu,
    /// The square root (NaN below 0, as ONNX and IEEE 754 define it).
    Sqrt,
    Floor,
    Ceil,
    /// To the nearest integer, halves to even (ONNX's `Round`, numpy's `round`).
    Round,
}

/// A single-input element-wise float function.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Unary {
    pub kind: UnaryKind,
}

/// The logistic function, without overflow for large `|x|`.
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn hard_sigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    (alpha * x + beta).clamp(0.0, 1.0)
}

/// `ln(1 + e^x)` without overflow for large `x`.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// The error function in f64: its Taylor series below 2.5, the continued fraction of
/// `erfc` above (both converge to about 1e-15), rounded to f32 by the callers: far below f32's
/// resolution, so `Erf` and `Gelu` are correctly rounded but for rare near-ties.
pub fn erf(x: f64) -> f64 {
    let ax = x.abs();
    let e = if ax < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let (mut term, mut sum) = (ax, ax);
        let x2 = ax * ax;
        for n in 1..80 {
            term *= -x2 / f64::from(n);
            let t = term / f64::from(2 * n + 1);
            sum += t;
            if t.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        // erfc(x) = exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))
        let mut t = ax;
        for n in (1..=60).rev() {
            t = ax + f64::from(n) / 2.0 / t;
        }
        1.0 - (-ax * ax).exp() * std::f64::consts::FRAC_2_SQRT_PI / 2.0 / t
    };
    if x < 0.0 {
        -e
    } else {
        e
    }
}

impl UnaryKind {
    /// The ONNX op type (`"Silu"` for the fused SiLU).
    pub fn name(&self) -> &'static str {
        match self {
            UnaryKind::Sigmoid => "Sigmoid",
            UnaryKind::HardSigmoid { .. } => "HardSigmoid",
            UnaryKind::HardSwish => "HardSwish",
            UnaryKind::Tanh => "Tanh",
            UnaryKind::LeakyRelu { .. } => "LeakyRelu",
            UnaryKind::Erf => "Erf",
            UnaryKind::Exp => "Exp",
            UnaryKind::Gelu { .. } => "Gelu",
            UnaryKind::Softplus => "Softplus",
            UnaryKind::Mish => "Mish",
            UnaryKind::Silu => "Silu",
            UnaryKind::Sqrt => "Sqrt",
            UnaryKind::Floor => "Floor",
            UnaryKind::Ceil => "Ceil",
            UnaryKind::Round => "Round",
        }
    }
}

impl Unary {
    pub fn new(kind: UnaryKind) -> Unary {
        Unary { kind }
    }

    /// The function on one value, in f32 (the one definition the op and the quantized tables
    /// share).
    pub fn apply(&self, x: f32) -> f32 {
        match self.kind {
            UnaryKind::Sigmoid => sigmoid(x),
            UnaryKind::HardSigmoid { alpha, beta } => hard_sigmoid(x, alpha, beta),
            UnaryKind::HardSwish => x * hard_sigmoid(x, 1.0 / 6.0, 0.5),
            UnaryKind::Tanh => x.tanh(),
            UnaryKind::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            UnaryKind::Erf => erf(f64::from(x)) as f32,
            UnaryKind::Exp => x.exp(),
            UnaryKind::Gelu { tanh: false } => {
                let x64 = f64::from(x);
                (0.5 * x64 * (1.0 + erf(x64 / std::f64::consts::SQRT_2))) as f32
            }
            UnaryKind::Gelu { tanh: true } => {
                let c = (2.0f32 / std::f32::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
            }
            UnaryKind::Softplus => softplus(x),
            UnaryKind::Mish => x * softplus(x).tanh(),
            UnaryKind::Silu => x * sigmoid(x),
            UnaryKind::Sqrt => x.sqrt(),
            UnaryKind::Floor => x.floor(),
            UnaryKind::Ceil => x.ceil(),
            UnaryKind::Round => x.round_ties_even(),
        }
    }
}

impl Op for Unary {
    fn op_type(&self) -> &'static str {
        self.kind.name()
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if x.dtype != DType::F32 {
            return Err(format!(
                "{} is supported on float tensors, got {}",
                self.op_type(),
                x.dtype
            ));
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        Ok(vec![Tensor::F32(x.mapv(|v| self.apply(v)))])
    }

    fn summary(&self) -> String {
        match self.kind {
            UnaryKind::HardSigmoid { alpha, beta } => format!("alpha {alpha} beta {beta}"),
            UnaryKind::LeakyRelu { alpha } => format!("alpha {alpha}"),
            UnaryKind::Gelu { tanh: true } => "tanh approximation".into(),
            _ => String::new(),
        }
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf values from tables (15 digits).
        for (x, want) in [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.5, 0.999_999_256_901_627_7),
            (5.0, 0.999_999_999_998_462_5),
        ] {
            assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-14);
        }
    }

    #[test]
    fn functions_have_their_definitions() {
        let f = |k| Unary::new(k);
        assert_eq!(f(UnaryKind::Sigmoid).apply(0.0), 0.5);
        assert!((f(UnaryKind::Sigmoid).apply(-100.0)).abs() < 1e-30);
        assert_eq!(f(UnaryKind::Sigmoid).apply(100.0), 1.0);
        assert_eq!(f(UnaryKind::HardSwish).apply(-3.0), 0.0);
        assert_eq!(f(UnaryKind::HardSwish).apply(3.0), 3.0);
        assert_eq!(f(UnaryKind::HardSwish).apply(1.0), 1.0 * (1.0 / 6.0 + 0.5));
        let hs = f(UnaryKind::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        });
        assert_eq!(hs.apply(10.0), 1.0);
        assert_eq!(hs.apply(-10.0), 0.0);
        let lr = f(UnaryKind::LeakyRelu { alpha: 0.1 });
        assert_eq!(lr.apply(-2.0), -0.2);
        assert_eq!(lr.apply(2.0), 2.0);
        assert_eq!(f(UnaryKind::Silu).apply(2.0), 2.0 * sigmoid(2.0));
        assert!((f(UnaryKind::Gelu { tanh: false }).apply(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((f(UnaryKind::Gelu { tanh: true }).apply(1.0) - 0.841_192).abs() < 1e-5);
        assert!((f(UnaryKind::Softplus).apply(0.0) - std::f32::consts::LN_2).abs() < 1e-7);
        assert_eq!(f(UnaryKind::Softplus).apply(100.0), 100.0);
        assert!((f(UnaryKind::Mish).apply(1.0) - 0.865_098_4).abs() < 1e-6);
        assert_eq!(f(UnaryKind::Sqrt).apply(6.25), 2.5);
        assert!(f(UnaryKind::Sqrt).apply(-1.0).is_nan());
    }
}
