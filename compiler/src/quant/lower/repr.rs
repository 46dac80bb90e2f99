//! Representations of graph tensors in the plan ([`Repr`]): constants, the exact ONNX
//! value on demand (Dequantize / I8ToU8 steps), and the int8 forms accelerator layers take.

use super::*;

impl<'g> Lowerer<'g> {
    /// A DequantizeLinear node with constant inputs producing `t`, if any.
    pub(super) fn const_dq(&self, t: TensorId) -> Option<NodeIndex> {
        let p = self.g.producer(t)?;
        let n = &self.g.dag[p];
        let all_const = n
            .inputs
            .iter()
            .flatten()
            .all(|&i| self.g.const_value(i).is_some());
        (n.op.as_any().is::<DequantizeLinear>() && all_const).then_some(p)
    }

    /// The plan value holding exactly the ONNX value of `t` (for CPU ops and outputs).
    pub(super) fn exact(&mut self, t: TensorId, consumer: &str) -> R<ValueId> {
        if let Some(v) = self.g.tensors[t].value.clone() {
            return Ok(self.const_value(t, v));
        }
        if let Some(&v) = self.exact_cache.get(&t) {
            return Ok(v);
        }
        if let Some(dq) = self.const_dq(t) {
            let n = &self.g.dag[dq];
            let args: Vec<Option<&Tensor>> = n
                .inputs
                .iter()
                .map(|i| i.and_then(|i| self.g.const_value(i)))
                .collect();
            let v = n.op.eval(&args)?.remove(0);
            let id = self.const_value(t, Arc::new(v));
            self.exact_cache.insert(t, id);
            self.set_status(
                dq,
                Support::Removed {
                    how: "dequantized constant, evaluated at compile time".into(),
                },
            );
            return Ok(id);
        }
        let name = self.g.tensors[t].name.clone();
        let fact = self.g.fact(t).clone();
        let v = match self.repr.get(&t).copied() {
            Some(Repr::Exact(v)) => v,
            Some(Repr::Shifted(q)) => {
                let out = self.plan.add_value(name.clone(), fact.clone(), None);
                self.push(
                    &format!("{name}:to_uint8"),
                    vec![q],
                    vec![out],
                    StepKind::Cpu(CpuOp {
                        op: I8ToU8.into(),
                        args: vec![Some(q)],
                        reason: format!("uint8 value for {consumer}"),
                    }),
                );
                out
            }
            Some(Repr::Offset(q, offset)) => {
                let out = self.plan.add_value(name.clone(), fact.clone(), None);
                self.push(
                    &format!("{name}:offset"),
                    vec![q],
                    vec![out],
                    StepKind::Cpu(CpuOp {
                        op: I8Offset {
                            offset,
                            to: fact.dtype,
                        }
                        .into(),
                        args: vec![Some(q)],
                        reason: format!(
                            "value for {consumer}: the narrow range held centred in the lanes, \
                             moved back by {offset}"
                        ),
                    }),
                );
                out
            }
            Some(Repr::Deq { q, scale, zp }) => {
                let out = self.plan.add_value(name.clone(), fact.clone(), None);
                let step = self.push(
                    &format!("{name}:dequantize"),
                    vec![q],
                    vec![out],
                    StepKind::Dequantize(QuantParams {
                        scale,
                        zero_point: zp,
                    }),
                );
                if let Some(p) = self.g.producer(t) {
                    if self.g.dag[p].op.as_any().is::<DequantizeLinear>() {
                        self.set_status(
                            p,
                            Support::Cpu {
                                step,
                                reason: format!("float value needed by {consumer} (CPU)"),
                            },
                        );
                    }
                }
                out
            }
            None => {
                return Err(format!(
                    "internal: tensor '{name}' has no value in the plan"
                ))
            }
        };
        self.exact_cache.insert(t, v);
        Ok(v)
    }

    /// An integer ONNX tensor as int8: (value, offset) with `onnx = value + offset`.
    pub(super) fn as_i8(&mut self, t: TensorId) -> R<(ValueId, i32)> {
        if let Some(&v) = self.i8_cache.get(&t) {
            return Ok((v, 128));
        }
        let fact = self.g.fact(t).clone();
        match (self.repr.get(&t).copied(), fact.dtype) {
            (Some(Repr::Shifted(v)), _) => Ok((v, 128)),
            (Some(Repr::Offset(v, off)), _) => Ok((v, off)),
            (Some(Repr::Exact(v)), DType::I8) => Ok((v, 0)),
            (Some(Repr::Exact(v)), DType::U8) => {
                let name = self.g.tensors[t].name.clone();
                let out = self.plan.add_value(
                    format!("{name}:i8"),
                    Fact::new(DType::I8, fact.shape.clone()),
                    None,
                );
                self.push(
                    &format!("{name}:to_int8"),
                    vec![v],
                    vec![out],
                    StepKind::Cpu(CpuOp {
                        op: U8ToI8.into(),
                        args: vec![Some(v)],
                        reason: "uint8 held as int8 (u - 128) for the accelerator".into(),
                    }),
                );
                self.i8_cache.insert(t, out);
                Ok((out, 128))
            }
            _ => Err(format!(
                "tensor '{}' ({}) is not an int8/uint8 activation",
                self.g.tensors[t].name, fact
            )),
        }
    }

    /// A float ONNX tensor as a quantized int8 operand.
    pub(super) fn as_q8(&mut self, t: TensorId) -> R<QIn> {
        if let Some(Repr::Deq { q, scale, zp }) = self.repr.get(&t).copied() {
            return Ok(QIn {
                v: q,
                scale: f64::from(scale),
                zp,
            });
        }
        if let Some(&q) = self.q8_cache.get(&t) {
            return Ok(q);
        }
        let Some(stats) = self.stats else {
            return Err(format!(
                "input '{}' is a float tensor without quantization parameters",
                self.g.tensors[t].name
            ));
        };
        if self.g.tensors[t].value.is_some() {
            return Err(format!("input '{}' is a constant", self.g.tensors[t].name));
        }
        let x = self.exact(t, "quantization")?;
        let scale = stats.scale(t, self.act.1);
        let name = self.g.tensors[t].name.clone();
        let fact = Fact::new(DType::I8, self.g.fact(t).shape.clone());
        let qp = QuantParams {
            scale,
            zero_point: 0,
        };
        let out = self.plan.add_value(format!("{name}:q"), fact, Some(qp));
        let (lo, hi) = self.act;
        self.push(
            &format!("{name}:quantize"),
            vec![x],
            vec![out],
            StepKind::Quantize {
                q: qp,
                lo: lo as i8,
                hi: hi as i8,
            },
        );
        self.ranges.insert(out, self.act);
        let q = QIn {
            v: out,
            scale: f64::from(scale),
            zp: 0,
        };
        self.q8_cache.insert(t, q);
        Ok(q)
    }

    pub(super) fn range_of(&self, v: ValueId) -> (i32, i32) {
        self.ranges.get(&v).copied().unwrap_or((-128, 127))
    }
}
