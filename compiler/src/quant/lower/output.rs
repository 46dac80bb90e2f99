//! A layer's output: the requantization's fidelity checks, the clamp of a fused activation,
//! and where the int8 result goes (its scale and zero point, the activations fused into it).

use super::*;

impl<'g> Lowerer<'g> {
    pub(super) fn check_fidelity(
        &self,
        c: &RequantChoice,
        out: &QOut,
        float_semantics: bool,
    ) -> R<String> {
        let r = &c.requant;
        match self.opts.fidelity {
            RequantFidelity::BitExact => {
                if float_semantics {
                    return Err("bit-exact mode: a QDQ layer is defined by float arithmetic, which the integer accelerator cannot reproduce bit for bit".into());
                }
                if c.mul_rel_error != 0.0 || r.pre_shift != 0 || r.shift != 0 {
                    return Err(format!(
                        "bit-exact mode: ONNX rounds acc * M (M = {:.4e}) half to even; the accelerator's mul/2^{} with round-half-up is not bit-identical",
                        c.effective[0],
                        u32::from(r.pre_shift) + u32::from(r.shift)
                    ));
                }
                Ok("bit-exact requantization".into())
            }
            RequantFidelity::WithinOneLsb => {
                let total = c.deviation + out.extra_dev;
                if total >= MAX_DEVIATION {
                    return Err(format!(
                        "the requantization needs more precision than the accelerator's Requant gives (deviation bound {total:.2} LSB >= {MAX_DEVIATION}; mul <= 32767, shift <= 16)"
                    ));
                }
                let fused = if out.extra_dev > 0.0 {
                    format!(" incl. {:.2} from fusing two quantizations", out.extra_dev)
                } else {
                    String::new()
                };
                Ok(format!(
                    "requant mul/2^{} (rel. error {:.1e}, deviation <= {total:.3} LSB{fused}): within 1 of ONNX's result",
                    u32::from(r.pre_shift) + u32::from(r.shift),
                    c.mul_rel_error,
                ))
            }
        }
    }

    pub(super) fn check_muls(&self, r: &Requant) -> R<()> {
        if self.pow2_only
            && r.mul
                .iter()
                .any(|&m| m <= 0 || !(m as u16).is_power_of_two())
        {
            return Err("the config has no ALU multiplier and the requantization needs one".into());
        }
        Ok(())
    }

    /// The clamp of an activation in the output's int8 domain (ONNX: `Q(clip(r)) =
    /// clamp(Q(r), Q(min), Q(max))` since rounding is monotonic), within `(lo, hi)`: the
    /// int8 range or a narrower one (post-training quantization to a core's lanes, an
    /// imported int4/int2 or clipped quantization).
    fn out_clamp(act: Option<Activation>, scale: f32, zp: i32, (lo, hi): (i32, i32)) -> (i8, i8) {
        match act {
            None => (lo as i8, hi as i8),
            Some(a) => {
                let q = |v: f32| {
                    if v.is_infinite() {
                        if v > 0.0 {
                            hi
                        } else {
                            lo
                        }
                    } else {
                        quantize_value(v, scale, zp, lo, hi)
                    }
                };
                (q(a.min) as i8, q(a.max) as i8)
            }
        }
    }

    /// Quantization of a layer's output tensor: the following Q node (quantized models) or
    /// the calibrated scale (float models).
    pub(super) fn out_target(
        &self,
        ix: NodeIndex,
        act: Option<Activation>,
    ) -> R<(QOut, OutTarget)> {
        let t = self.g.dag[ix].outputs[0];
        if self.quantized_model {
            let q = self.sole_q(t).ok_or_else(|| {
                format!(
                    "its output '{}' is not quantized by a single QuantizeLinear",
                    self.g.tensors[t].name
                )
            })?;
            let (scale, zp, dtype) = self.q_params(q)?;
            // A narrow range is held centred in the lanes (see `centring`).
            let sat = self.q_saturation(q, dtype)?;
            let e = centring(sat);
            let zp8 = zp - offset_of(dtype) - e;
            let sat = (sat.0 - e, sat.1 - e);
            let qt = self.g.dag[q].outputs[0];
            // QDQ exporters quantize before an activation: `Q -> DQ -> Relu -> Q`. Fuse it:
            // the clamp becomes the layer's; with other parameters for the second Q, the
            // first rounding (at most s1/2 in real terms) is the extra deviation.
            if let Some((dq, relu, a2, q2)) = self.activation_chain(qt) {
                let (s1, z1) = self.dq_params(dq)?;
                // (a narrow first quantization clamps too: not fused, its own layer output)
                if s1 == scale && z1 == zp && sat == (-128, 127) {
                    let (s2, z2, dt2) = self.q_params(q2)?;
                    let sat2 = self.q_saturation(q2, dt2)?;
                    let e2 = centring(sat2);
                    let z28 = z2 - offset_of(dt2) - e2;
                    let sat2 = (sat2.0 - e2, sat2.1 - e2);
                    let act2 = act.map_or(a2, |a| a.then(a2));
                    let (lo, hi) = Self::out_clamp(Some(act2), s2, z28, sat2);
                    let extra_dev = if s2 == scale && z28 == zp8 {
                        0.0
                    } else {
                        0.5 * f64::from(scale) / f64::from(s2)
                    };
                    let out = QOut {
                        scale: f64::from(s2),
                        zp: z28,
                        lo,
                        hi,
                        dtype: dt2,
                        offset: offset_of(dt2) + e2,
                        extra_dev,
                    };
                    let tensor = self.g.dag[q2].outputs[0];
                    return Ok((
                        out,
                        OutTarget {
                            tensor,
                            q_node: Some(q),
                            chain: vec![dq, relu, q2],
                        },
                    ));
                }
            }
            let (lo, hi) = Self::out_clamp(act, scale, zp8, sat);
            Ok((
                QOut {
                    scale: f64::from(scale),
                    zp: zp8,
                    lo,
                    hi,
                    dtype,
                    offset: offset_of(dtype) + e,
                    extra_dev: 0.0,
                },
                OutTarget {
                    tensor: qt,
                    q_node: Some(q),
                    chain: vec![],
                },
            ))
        } else {
            let stats = self.stats.ok_or("no calibration")?;
            let scale = stats.scale(t, self.act.1);
            let (lo, hi) = Self::out_clamp(act, scale, 0, self.act);
            Ok((
                QOut {
                    scale: f64::from(scale),
                    zp: 0,
                    lo,
                    hi,
                    dtype: DType::F32,
                    offset: 0,
                    extra_dev: 0.0,
                },
                OutTarget {
                    tensor: t,
                    q_node: None,
                    chain: vec![],
                },
            ))
        }
    }

    /// `t -> DequantizeLinear -> Relu/Clip -> QuantizeLinear`, each the sole reader of the
    /// previous one's output: (DQ, activation node, its clamp, Q).
    fn activation_chain(
        &self,
        t: TensorId,
    ) -> Option<(NodeIndex, NodeIndex, Activation, NodeIndex)> {
        let sole = |t: TensorId| -> Option<NodeIndex> {
            if self.g.is_output(t) {
                return None;
            }
            match self.g.consumers(t).as_slice() {
                [(n, 0)] => Some(*n),
                _ => None,
            }
        };
        let dq = sole(t)?;
        if !self.g.dag[dq].op.as_any().is::<DequantizeLinear>() {
            return None;
        }
        let relu = sole(self.g.dag[dq].outputs[0])?;
        let any = self.g.dag[relu].op.as_any();
        let act = if any.is::<crate::graph::ops::relu::Relu>() {
            Activation::RELU
        } else if let Some(c) = any.downcast_ref::<crate::graph::ops::clip::Clip>() {
            c.static_bounds(&self.g.input_infos(relu))?
        } else {
            return None;
        };
        let q2 = self.sole_q(self.g.dag[relu].outputs[0])?;
        Some((dq, relu, act, q2))
    }
}
