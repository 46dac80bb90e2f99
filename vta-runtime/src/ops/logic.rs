//! `Not`, `And`, `Or`, `Xor` of bool tensors (held as uint8 0/1, see [`super::compare`]), with
//! numpy broadcasting: the masks exported models combine before a `Where`.

use ndarray::{IxDyn, Zip};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicKind {
    Not,
    And,
    Or,
    Xor,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Logic {
    pub kind: LogicKind,
}

fn bools<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a ndarray::ArrayD<u8>, String> {
    match arg(inputs, i, "input")? {
        Tensor::U8(a) => Ok(a),
        t => Err(format!("input {i} must be bool, got {}", t.dtype())),
    }
}

impl Op for Logic {
    fn op_type(&self) -> &'static str {
        match self.kind {
            LogicKind::Not => "Not",
            LogicKind::And => "And",
            LogicKind::Or => "Or",
            LogicKind::Xor => "Xor",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        let mut shape = a.shape.clone();
        let mut types = vec![a.dtype];
        if self.kind != LogicKind::Not {
            let b = in_fact(inputs, 1, "B")?;
            shape = broadcast_shapes(&a.shape, &b.shape)?;
            types.push(b.dtype);
        }
        if types.iter().any(|&t| t != DType::U8) {
            return Err(format!(
                "{} needs bool inputs, got {types:?}",
                self.op_type()
            ));
        }
        Ok(vec![Fact::new(DType::U8, shape)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = bools(inputs, 0)?;
        if self.kind == LogicKind::Not {
            return Ok(vec![Tensor::U8(a.mapv(|v| u8::from(v == 0)))]);
        }
        let b = bools(inputs, 1)?;
        let s = broadcast_shapes(a.shape(), b.shape())?;
        let av = a.broadcast(IxDyn(&s)).ok_or("broadcast")?;
        let bv = b.broadcast(IxDyn(&s)).ok_or("broadcast")?;
        let k = self.kind;
        Ok(vec![Tensor::U8(Zip::from(&av).and(&bv).map_collect(
            |&x, &y| {
                let (x, y) = (x != 0, y != 0);
                u8::from(match k {
                    LogicKind::And => x && y,
                    LogicKind::Or => x || y,
                    _ => x != y,
                })
            },
        ))])
    }

    op_boilerplate!();
}
