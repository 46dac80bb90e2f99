//! The other int8 layers and tensor moves: Add, global average and max pooling, reshapes,
//! Concat, and QuantizeLinear / DequantizeLinear nodes.

use super::*;

impl<'g> Lowerer<'g> {
    pub(super) fn add(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let bin =
            n.op.as_any()
                .downcast_ref::<Binary>()
                .expect("Binary")
                .clone();
        let (at, bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        if self.g.const_value(at).is_some() || self.g.const_value(bt).is_some() {
            return Err("Add of a constant (bias-like add outside a layer)".into());
        }
        let (fa, fb) = (self.g.fact(at).clone(), self.g.fact(bt).clone());
        if fa.shape != fb.shape || !(2..=4).contains(&fa.rank()) {
            return Err(format!("operands {:?} and {:?}: the accelerator adds tensors of the same shape (no broadcasting)", fa.shape, fb.shape));
        }
        let (out, target) = self.out_target(ix, bin.activation)?;
        let a = self.as_q8(at)?;
        let b = self.as_q8(bt)?;
        if a.zp != 0 || b.zp != 0 {
            return Err(format!("operand zero points {} and {} (int8 domain): the accelerator's add has no input offsets", a.zp, b.zp));
        }
        let (ra, rb) = (a.scale / out.scale, b.scale / out.scale);
        let mut chosen = None;
        for s in (0u8..=16).rev() {
            let k = f64::from(1u32 << s);
            let (ma, mb) = ((ra * k).round(), (rb * k).round());
            if ma <= 32767.0 && mb <= 32767.0 && ma >= 1.0 && mb >= 1.0 {
                let dev = 128.0 * ((ma / k - ra).abs() + (mb / k - rb).abs());
                chosen = Some((s, ma as i16, mb as i16, dev));
                break;
            }
        }
        let (s, ma, mb, dev) =
            chosen.ok_or("operand scale ratios do not fit 16-bit multipliers")?;
        if self.pow2_only && !((ma as u16).is_power_of_two() && (mb as u16).is_power_of_two()) {
            return Err("the config has no ALU multiplier and the add needs one".into());
        }
        let requant = Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![1],
            shift: s,
            zero_point: clamp_i8(i64::from(out.zp)),
            lo: out.lo,
            hi: out.hi,
        };
        let note = if self.quantized_model {
            let c = RequantChoice {
                requant: requant.clone(),
                effective: vec![f64::from(ma) / f64::from(1u32 << s)],
                mul_rel_error: dev / 256.0,
                trunc_error: 0.0,
                deviation: dev,
            };
            self.check_fidelity(&c, &out, true)?
        } else {
            format!("post-training int8 (operand multipliers {ma}, {mb} / 2^{s})")
        };
        let name = self.node_name(ix);
        let layer = QAdd {
            name,
            mul_a: ma,
            mul_b: mb,
            requant,
        };
        self.accel(ix, Layer::Add(layer), vec![a.v, b.v], out, target, note);
        Ok(())
    }

    pub(super) fn global_pool(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let (_, _, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        if let Some(ap) = n.op.as_any().downcast_ref::<AveragePool>() {
            if !ap.is_global(h, w) {
                return Err("AveragePool with a window smaller than the input (only global average pooling is offloaded)".into());
            }
        }
        let (out, target) = self.out_target(ix, None)?;
        let x = self.as_q8(xt)?;
        let hw = (h * w) as i64;
        if x.zp != 0 {
            return self.global_pool_as_conv(
                ix,
                x,
                dims4(&self.g.fact(xt).shape, "input")?,
                out,
                target,
            );
        }
        let (lo, hi) = self.range_of(x.v);
        let ranges = [AccRange {
            lo: hw * i64::from(lo),
            hi: hw * i64::from(hi),
        }];
        let m = x.scale / (out.scale * hw as f64);
        let c = self.make_requant(&[m], &ranges, MulRounding::Nearest, &out)?;
        let note = if self.quantized_model {
            self.check_fidelity(&c, &out, true)?
        } else {
            format!(
                "post-training int8 (1/{hw} as mul/2^{}, deviation <= {:.3} LSB)",
                u32::from(c.requant.pre_shift) + u32::from(c.requant.shift),
                c.deviation
            )
        };
        let name = self.node_name(ix);
        self.accel(
            ix,
            Layer::GlobalAvgPool(QGlobalAvgPool {
                name,
                requant: c.requant,
            }),
            vec![x.v],
            out,
            target,
            note,
        );
        Ok(())
    }

    /// A global average pool whose input zero point is not 0 (int8 domain), as a depthwise
    /// convolution with unit weights over the whole plane: its bias `-h*w*zp` subtracts the
    /// zero point exactly, which the accelerator's average pool (no input offset) cannot.
    fn global_pool_as_conv(
        &mut self,
        ix: NodeIndex,
        x: QIn,
        (n, c, h, w): (usize, usize, usize, usize),
        out: QOut,
        target: OutTarget,
    ) -> R<()> {
        let hw = (h * w) as i64;
        let bias = -hw * i64::from(x.zp);
        let (lo, hi) = self.range_of(x.v);
        let ranges = [AccRange {
            lo: hw * i64::from(lo) + bias,
            hi: hw * i64::from(hi) + bias,
        }];
        let m = x.scale / (out.scale * hw as f64);
        let (rq, _) = self.make_requant_precise(&[m], &ranges, &[], &out)?;
        let note = self.check_fidelity(&rq, &out, true)?;
        let name = self.node_name(ix);
        let layer = QConv2d {
            name: name.clone(),
            input_shape: [n, c, h, w],
            weight: Array4::from_elem((c, 1, h, w), 1i8),
            bias: vec![
                i32::try_from(bias).map_err(|_| "the zero-point bias does not fit int32")?;
                c
            ],
            stride: (1, 1),
            pad: [0; 4],
            groups: c,
            requant: rq.requant,
        };
        self.accel(
            ix,
            Layer::Conv2d(layer),
            vec![x.v],
            out,
            target,
            format!(
                "input zero point {} (int8 domain): a depthwise convolution with unit weights over the plane, the zero point in its bias; {note}",
                x.zp
            ),
        );
        Ok(())
    }

    /// The int8 form of a pooling/reshaping op's input: (value, how to represent the output).
    /// The quantization that plan value `v`, passed through from tensor `t`, stands for: the
    /// representation's (a scale folded into it, as a Mul by a positive constant does,
    /// changes it and not the value), else the value's own.
    /// A QuantizeLinear found to be the identity on its input's integers keeps that input's
    /// plan value, whose annotation may then be another scale (the same integers for a
    /// folded scale): its own parameters are taken.
    pub(super) fn passthrough_quant(&self, t: TensorId, v: ValueId) -> Option<QuantParams> {
        if let Some(Repr::Deq { scale, zp, .. }) = self.repr.get(&t) {
            return Some(QuantParams {
                scale: *scale,
                zero_point: *zp,
            });
        }
        let quantized_by = self
            .g
            .producer(t)
            .filter(|&q| self.g.dag[q].op.as_any().is::<QuantizeLinear>());
        if let Some(q) = quantized_by {
            let params = self.q_params(q).and_then(|(scale, zp, dt)| {
                let e = centring(self.q_saturation(q, dt)?);
                Ok(QuantParams {
                    scale,
                    zero_point: zp - offset_of(dt) - e,
                })
            });
            if let Ok(p) = params {
                return Some(p);
            }
        }
        self.plan.values[v].quant
    }

    pub(super) fn int8_passthrough(&mut self, t: TensorId) -> R<(ValueId, ReprOf)> {
        match self.repr.get(&t).copied() {
            Some(Repr::Deq { q, scale, zp }) => {
                Ok((q, Box::new(move |v| Repr::Deq { q: v, scale, zp })))
            }
            Some(Repr::Shifted(v)) => Ok((v, Box::new(Repr::Shifted))),
            Some(Repr::Offset(v, off)) => Ok((v, Box::new(move |v| Repr::Offset(v, off)))),
            Some(Repr::Exact(_)) if matches!(self.g.fact(t).dtype, DType::I8 | DType::U8) => {
                let (v, off) = self.as_i8(t)?;
                Ok((
                    v,
                    if off == 128 {
                        Box::new(Repr::Shifted)
                    } else {
                        Box::new(Repr::Exact)
                    },
                ))
            }
            _ if self.stats.is_some() && self.g.fact(t).dtype == DType::F32 => {
                let q = self.as_q8(t)?;
                let (scale, zp) = (q.scale as f32, q.zp);
                Ok((q.v, Box::new(move |v| Repr::Deq { q: v, scale, zp })))
            }
            _ => Err(format!(
                "input '{}' is not an int8 tensor",
                self.g.tensors[t].name
            )),
        }
    }

    pub(super) fn max_pool(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let mp =
            n.op.as_any()
                .downcast_ref::<MaxPool>()
                .expect("MaxPool")
                .clone();
        if mp.indices.is_some() {
            return Err("the Indices output (int64 positions) is computed on the CPU".into());
        }
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        let (_, _, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        let geo = mp.window.resolve((h, w), (1, 1))?;
        if geo.dilation != (1, 1) {
            return Err("dilated max pooling".into());
        }
        let mut pad = geo.pad;
        // ceil_mode: extend the bottom/right padding so the floor formula gives the same
        // size (padding never wins, and every window keeps a real cell).
        pad[2] =
            pad[2].max(((geo.out.0 - 1) * geo.stride.0 + geo.kernel.0).saturating_sub(h + pad[0]));
        pad[3] =
            pad[3].max(((geo.out.1 - 1) * geo.stride.1 + geo.kernel.1).saturating_sub(w + pad[1]));
        let layer = QMaxPool {
            name: self.node_name(ix),
            kernel: geo.kernel,
            stride: geo.stride,
            pad,
        };
        if layer.output_hw(h, w) != geo.out {
            return Err("internal: max pool output size".into());
        }
        let (xv, mk) = self.int8_passthrough(xt)?;
        let range = self.range_of(xv);
        let qp = self.passthrough_quant(xt, xv);
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, qp);
        self.ranges.insert(v, range);
        let step = self.push(
            &self.node_name(ix),
            vec![xv],
            vec![v],
            StepKind::Accel(Layer::MaxPool(layer)),
        );
        self.repr.insert(yt, mk(v));
        self.set_status(
            ix,
            Support::Accel {
                layer: "QMaxPool",
                step,
                note: "max commutes with the int8 quantization (exact)".into(),
            },
        );
        Ok(())
    }

    /// Reshape-like ops on an int8 tensor: an exact CPU step on the int8 data.
    pub(super) fn reshape_int8(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        let (xv, mk) = self.int8_passthrough(xt)?;
        let mut args = vec![Some(xv)];
        for t in n.inputs.iter().skip(1).copied().collect::<Vec<_>>() {
            args.push(match t {
                Some(t) => Some(self.exact(t, "reshape")?),
                None => None,
            });
        }
        let range = self.range_of(xv);
        let qp = self.passthrough_quant(xt, xv);
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, qp);
        self.ranges.insert(v, range);
        let reason =
            "layout-only op on the int8 tensor (a row-major reshape: no data change)".to_string();
        let inputs = args.iter().flatten().copied().collect();
        let op = self.g.dag[ix].op.to_any();
        let step = self.push(
            &self.node_name(ix),
            inputs,
            vec![v],
            StepKind::Cpu(CpuOp {
                op,
                args,
                reason: reason.clone(),
            }),
        );
        self.repr.insert(yt, mk(v));
        self.set_status(ix, Support::Cpu { step, reason });
        Ok(())
    }

    /// Concat of int8 tensors: inputs quantized like the output are concatenated as they are,
    /// others are first rescaled to the output's quantization on the accelerator.
    pub(super) fn concat(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ins: Vec<TensorId> = n.inputs.iter().flatten().copied().collect();
        let yt = n.outputs[0];
        let mut qs = Vec::new();
        for &t in &ins {
            match self.repr.get(&t).copied() {
                Some(Repr::Deq { q, scale, zp }) => qs.push(QIn {
                    v: q,
                    scale: f64::from(scale),
                    zp,
                }),
                _ if self.stats.is_some() && self.g.fact(t).dtype == DType::F32 => {
                    qs.push(self.as_q8(t)?)
                }
                _ => {
                    return Err(format!(
                        "input '{}' is not a quantized tensor",
                        self.g.tensors[t].name
                    ))
                }
            }
        }
        let first = *qs.first().ok_or("no inputs")?;
        let same = qs
            .iter()
            .all(|q| q.scale == first.scale && q.zp == first.zp);
        // The output's quantization: the inputs' when they agree, else the following
        // QuantizeLinear's (quantized models) or the calibrated one (float models).
        let (scale, zp) = if same {
            (first.scale as f32, first.zp)
        } else if self.quantized_model {
            let q = self.sole_q(yt).ok_or(
                "inputs with different quantization and no QuantizeLinear after the Concat",
            )?;
            let (s, z, dt) = self.q_params(q)?;
            if self.q_saturation(q, dt)? != (-128, 127) {
                return Err(
                    "the QuantizeLinear after the Concat saturates to a range narrower \
                            than its type, which rescaling the inputs does not apply"
                        .into(),
                );
            }
            (s, z - offset_of(dt))
        } else {
            (self.stats.ok_or("no calibration")?.scale(yt, self.act.1), 0)
        };
        let name = self.node_name(ix);
        let mut vals = Vec::new();
        let mut rescaled = 0;
        for (k, (q, &t)) in qs.iter().zip(&ins).enumerate() {
            if f64::from(scale) == q.scale && zp == q.zp {
                vals.push(q.v);
            } else {
                let shape = self.g.fact(t).shape.clone();
                rank_check(&shape)?;
                vals.push(self.rescale(&format!("{name}:rescale{k}"), *q, &shape, scale, zp)?);
                rescaled += 1;
            }
        }
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let qp = QuantParams {
            scale,
            zero_point: zp,
        };
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, Some(qp));
        let rescaled = if rescaled == 0 {
            String::new()
        } else {
            format!(", after {rescaled} input(s) rescaled to the output's quantization")
        };
        let op = self.g.dag[ix].op.to_any();
        let crate::graph::ops::AnyOp::Concat(cat) = &op else {
            return Err("internal: not a Concat".into());
        };
        let rank = self.g.fact(yt).rank();
        let channels = (2..=4).contains(&rank)
            && crate::graph::ops::axis(cat.axis, rank).is_ok_and(|a| a == 1);
        if channels {
            let step = self.push(
                &name,
                vals,
                vec![v],
                StepKind::Accel(Layer::Concat(QConcat { name: name.clone() })),
            );
            self.repr.insert(yt, Repr::Deq { q: v, scale, zp });
            self.set_status(
                ix,
                Support::Accel {
                    layer: "QConcat",
                    step,
                    note: format!(
                        "whole channel blocks laid end to end (exact; in place or copied: \
                         see the accelerator layers){rescaled}"
                    ),
                },
            );
        } else {
            let reason =
                format!("concatenation of int8 tensors off the channel axis (exact){rescaled}");
            let step = self.push(
                &name,
                vals.clone(),
                vec![v],
                StepKind::Cpu(CpuOp {
                    op,
                    args: vals.into_iter().map(Some).collect(),
                    reason: reason.clone(),
                }),
            );
            self.repr.insert(yt, Repr::Deq { q: v, scale, zp });
            self.set_status(ix, Support::Cpu { step, reason });
        }
        Ok(())
    }

    pub(super) fn quantize_node(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        if self.g.fact(xt).dtype != DType::F32 {
            return Err("QuantizeLinear of an integer tensor".into());
        }
        let (scale, zp, dt) = self.q_params(ix)?;
        // A narrow range is held centred in the lanes (see `centring`), so that a model's
        // uint4 input fits 4-bit lanes.
        let sat = self.q_saturation(ix, dt)?;
        let e = centring(sat);
        let (zp8, lo, hi) = (zp - offset_of(dt) - e, sat.0 - e, sat.1 - e);
        let shifted = |v| held(v, offset_of(dt) + e, dt);
        match self.repr.get(&xt).copied() {
            Some(Repr::Deq { q, scale: s, zp: z })
                if s == scale
                    && z == zp8
                    && self
                        .ranges
                        .get(&q)
                        .map_or((lo, hi) == (-128, 127), |&(a, b)| a >= lo && b <= hi) =>
            {
                self.repr.insert(yt, shifted(q));
                // (a Clip fused into the quantization is removed with it: the values are
                // within its range)
                for o in &n.origin {
                    self.status.insert(
                        o.name.clone(),
                        Support::Removed {
                            how: "QuantizeLinear of a DequantizeLinear with the same parameters \
                                  (identity on the int8 data)"
                                .into(),
                        },
                    );
                }
                Ok(())
            }
            Some(Repr::Deq { .. }) => {
                Err("requantization to other parameters (done in float on the CPU)".into())
            }
            _ => {
                let x = self.exact(xt, "QuantizeLinear")?;
                let qp = QuantParams {
                    scale,
                    zero_point: zp8,
                };
                let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
                let v =
                    self.plan
                        .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, Some(qp));
                let step = self.push(
                    &self.node_name(ix),
                    vec![x],
                    vec![v],
                    StepKind::Quantize {
                        q: qp,
                        lo: lo as i8,
                        hi: hi as i8,
                    },
                );
                self.repr.insert(yt, shifted(v));
                self.ranges.insert(v, (lo, hi));
                let how = match (dt, e) {
                    (DType::U8, 0) => " (to uint8 held as int8: zero point - 128)".to_string(),
                    (_, 0) => String::new(),
                    _ => format!(
                        " (its range [{}, {}] held centred as [{lo}, {hi}]: zero point {:+})",
                        sat.0 + offset_of(dt),
                        sat.1 + offset_of(dt),
                        -(offset_of(dt) + e)
                    ),
                };
                self.set_status(
                    ix,
                    Support::Cpu {
                        step,
                        reason: format!("quantization of a float tensor{how}"),
                    },
                );
                Ok(())
            }
        }
    }

    pub(super) fn dequantize_node(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        if self.g.const_value(xt).is_some() {
            // Quantized weights: read by the consuming layer, or evaluated if a CPU op needs them.
            self.set_status(
                ix,
                Support::Removed {
                    how: "dequantized constant (read by its consumer)".into(),
                },
            );
            return Ok(());
        }
        let s = self.g.const_input(ix, 1).ok_or("scale is not a constant")?;
        let z = self.g.const_input(ix, 2);
        if s.len() != 1 {
            return Err("per-axis dequantization of an activation".into());
        }
        if !matches!(self.g.fact(xt).dtype, DType::I8 | DType::U8) {
            return Err(format!("dequantization of {}", self.g.fact(xt).dtype));
        }
        let (v, off) = self.as_i8(xt)?;
        let yt = n.outputs[0];
        self.repr.insert(
            yt,
            Repr::Deq {
                q: v,
                scale: s.scalar_f32()?,
                zp: scalar_i32(z) - off,
            },
        );
        let name = n.origin[0].name.clone();
        self.status.insert(name, Support::Fused { into: "its consumers".into(), how: "the int8 tensor is used directly (dequantization is a change of interpretation)".into() });
        Ok(())
    }
}

/// The element-wise layers take tensors of rank 2 to 4.
fn rank_check(shape: &[usize]) -> R<()> {
    if (2..=4).contains(&shape.len()) {
        Ok(())
    } else {
        Err(format!("a rank-{} input to rescale", shape.len()))
    }
}
