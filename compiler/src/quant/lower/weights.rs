//! Quantization parameters and weights: DequantizeLinear / QuantizeLinear parameters,
//! dequantized and post-training-quantized weights, integer biases, requantization, and
//! the layers imported from QDQ and QOperator forms.

use super::*;

impl<'g> Lowerer<'g> {
    /// Per-tensor constant (scale, zero point) of a DequantizeLinear node.
    pub(super) fn dq_params(&self, dq: NodeIndex) -> R<(f32, i32)> {
        let s = self
            .g
            .const_input(dq, 1)
            .ok_or("DequantizeLinear scale is not a constant")?;
        if s.len() != 1 {
            return Err("per-axis dequantization".into());
        }
        Ok((s.scalar_f32()?, scalar_i32(self.g.const_input(dq, 2))))
    }

    /// The single QuantizeLinear node reading `t`.
    pub(super) fn sole_q(&self, t: TensorId) -> Option<NodeIndex> {
        if self.g.is_output(t) {
            return None;
        }
        let c = self.g.consumers(t);
        match c.as_slice() {
            [(q, 0)] if self.g.dag[*q].op.as_any().is::<QuantizeLinear>() => Some(*q),
            _ => None,
        }
    }

    /// Per-tensor constant (scale, zero point, dtype) of a QuantizeLinear node.
    pub(super) fn q_params(&self, q: NodeIndex) -> R<(f32, i32, DType)> {
        let s = self
            .g
            .const_input(q, 1)
            .ok_or("QuantizeLinear scale is not a constant")?;
        let z = self.g.const_input(q, 2);
        if self.g.dag[q].inputs.get(2).copied().flatten().is_some() && z.is_none() {
            return Err("QuantizeLinear zero point is not a constant".into());
        }
        if s.len() != 1 {
            return Err("per-axis output quantization".into());
        }
        let dt = match z {
            Some(z) => z.dtype(),
            None => self.g.fact(self.g.dag[q].outputs[0]).dtype,
        };
        Ok((s.scalar_f32()?, scalar_i32(z), dt))
    }

    /// The values a QuantizeLinear node of output type `dt` saturates to, in the int8 domain
    /// (uint8 held shifted by -128): all of int8, or the narrower range of an int4/int2
    /// output or a fused integer Clip (Brevitas QCDQ, QONNX).
    pub(super) fn q_saturation(&self, q: NodeIndex, dt: DType) -> R<(i32, i32)> {
        let op = self.g.dag[q]
            .op
            .as_any()
            .downcast_ref::<QuantizeLinear>()
            .ok_or("not a QuantizeLinear")?;
        let (lo, hi) = op.saturation(dt)?;
        Ok((lo - offset_of(dt), hi - offset_of(dt)))
    }

    /// Quantized constant weights behind a DequantizeLinear: (int values minus zero point,
    /// per-channel scales along `axis`, the DQ node).
    pub(super) fn dq_weights(
        &self,
        t: TensorId,
        axis: usize,
    ) -> R<(ArrayD<i32>, Vec<f64>, NodeIndex)> {
        let dq = self.const_dq(t).ok_or_else(|| {
            format!(
                "weight '{}' is not a DequantizeLinear of constants",
                self.g.tensors[t].name
            )
        })?;
        let n = &self.g.dag[dq];
        let op =
            n.op.as_any()
                .downcast_ref::<DequantizeLinear>()
                .expect("DQ");
        let x = self.g.const_input(dq, 0).expect("const");
        let p = QParams::new(
            self.g.const_input(dq, 1).expect("const"),
            self.g.const_input(dq, 2),
            op.axis,
            x.shape(),
        )?;
        let c = x.shape().get(axis).copied().unwrap_or(1);
        if p.axis.is_some_and(|a| a != axis) {
            return Err(format!(
                "weights quantized along axis {:?}, expected per-tensor or axis {axis}",
                p.axis
            ));
        }
        let mut w = x.to_i32_array()?;
        for (idx, v) in w.indexed_iter_mut() {
            let (_, z) = p.at(idx.slice());
            *v -= z;
        }
        let scales: Vec<f64> = (0..c)
            .map(|i| {
                f64::from(if p.axis.is_some() {
                    p.scale[i]
                } else {
                    p.scale[0]
                })
            })
            .collect();
        Ok((w, scales, dq))
    }

    /// Integer bias at scale `s_x * s_w[c]` from a bias input that is absent, a float
    /// constant, or a DequantizeLinear of an int32 constant; also returns the DQ node.
    pub(super) fn int_bias(
        &self,
        t: Option<TensorId>,
        n: usize,
        sx: f64,
        sw: &[f64],
    ) -> R<(Vec<i64>, Option<NodeIndex>)> {
        let Some(t) = t else {
            return Ok((vec![0; n], None));
        };
        if let Some(dq) = self.const_dq(t) {
            let x = self.g.const_input(dq, 0).expect("const");
            if x.dtype() != DType::I32 || x.len() != n {
                return Err("bias is not an int32 vector".into());
            }
            let op = self.g.dag[dq]
                .op
                .as_any()
                .downcast_ref::<DequantizeLinear>()
                .expect("DQ");
            let p = QParams::new(
                self.g.const_input(dq, 1).expect("const"),
                self.g.const_input(dq, 2),
                op.axis,
                x.shape(),
            )?;
            let b = x.to_i64_vec();
            let v = (0..n)
                .map(|c| {
                    let (s, z) = p.at(&[c]);
                    let want = sx * sw[c];
                    // onnxruntime writes the bias scale as the f32 product s_x * s_w.
                    if (f64::from(s) - want).abs() <= want * 1e-6 && z == 0 {
                        b[c]
                    } else {
                        ((b[c] - i64::from(z)) as f64 * f64::from(s) / want).round() as i64
                    }
                })
                .collect();
            return Ok((v, Some(dq)));
        }
        let v = self.g.const_value(t).ok_or("bias is not a constant")?;
        let f = f32_of(v)?;
        if f.len() != n {
            return Err(format!("bias has {} values, expected {n}", f.len()));
        }
        Ok((
            (0..n)
                .map(|c| (f64::from(f[c]) / (sx * sw[c])).round() as i64)
                .collect(),
            None,
        ))
    }

    pub(super) fn make_requant(
        &self,
        m: &[f64],
        ranges: &[AccRange],
        rounding: MulRounding,
        out: &QOut,
    ) -> R<RequantChoice> {
        let c = choose_requant(
            m,
            ranges,
            rounding,
            self.pow2_only,
            clamp_i8(i64::from(out.zp)),
            out.lo,
            out.hi,
        )?;
        self.check_muls(&c.requant)?;
        Ok(c)
    }

    /// [`Self::make_requant`] for a convolution or dense layer of an imported model, whose
    /// worst-case accumulator is far larger than the range where outputs do not saturate:
    /// with an accumulator clamp ([`crate::quant::choose_requant_clamped`]) when that makes the result
    /// closer to ONNX's (two more ALU instructions per output element). Channels whose
    /// output is a constant (`constants`, see [`constant_output`]) are left out of the
    /// choice and realized exactly ([`choose_requant_with_constants`]).
    pub(super) fn make_requant_precise(
        &self,
        m: &[f64],
        ranges: &[AccRange],
        constants: &[Option<i8>],
        out: &QOut,
    ) -> R<(RequantChoice, Vec<ConstantChannel>)> {
        let zp = clamp_i8(i64::from(out.zp));
        let choose = |clamp: bool| {
            choose_requant_with_constants(
                m,
                ranges,
                constants,
                self.pow2_only,
                zp,
                out.lo,
                out.hi,
                clamp,
            )
            .and_then(|c| self.check_muls(&c.0.requant).map(|_| c))
        };
        match (choose(false), choose(true)) {
            (Ok(p), Ok(c)) if c.0.deviation + 0.002 < p.0.deviation => Ok(c),
            (Ok(p), _) => Ok(p),
            (Err(_), Ok(c)) => Ok(c),
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// The channels of an imported layer whose output is the same for every reachable
    /// accumulator (per [`constant_output`], ONNX's f32 multiplier included).
    fn constant_channels(x: QIn, sw: &[f64], ranges: &[AccRange], out: &QOut) -> Vec<Option<i8>> {
        let zp = clamp_i8(i64::from(out.zp));
        ranges
            .iter()
            .zip(sw)
            .map(|(&rg, &s)| {
                let m = x.scale * s / out.scale;
                let m_onnx = (x.scale as f32) * (s as f32) / (out.scale as f32);
                constant_output(rg, m, m_onnx, zp, out.lo, out.hi)
            })
            .collect()
    }

    /// Zeroes the weights of the channels of `w` (`[O, ...]`, flattened per channel) that
    /// [`Self::make_requant_precise`] made constant and sets their bias; returns the
    /// support-table note that says how many there are.
    fn apply_constant_channels(
        w: &mut [i32],
        bias: &mut [i64],
        constant: &[ConstantChannel],
    ) -> String {
        let per = w.len() / bias.len().max(1);
        for k in constant {
            w[k.channel * per..(k.channel + 1) * per].fill(0);
            bias[k.channel] = i64::from(k.acc);
        }
        if constant.is_empty() {
            String::new()
        } else {
            format!(
                "; {} channel(s) with a constant output for every input: weights zeroed, bias \
                 set to give that output exactly",
                constant.len()
            )
        }
    }

    // ---------------------------------------------------------------- convolution / dense

    /// A convolution input whose zero point is not 0 in the int8 domain, padded with that
    /// zero point by an exact int8 data-movement step on the CPU, so that the layer itself
    /// has no padding and the zero point folds into its bias (the accelerator pads with 0
    /// only, which would stand for a real value other than 0). Returns the input, its shape
    /// and the geometry the layer then has, and whether a padding step was added.
    pub(super) fn pad_with_zero_point(
        &mut self,
        name: &str,
        x: QIn,
        x_shape: [usize; 4],
        geo: Geometry,
    ) -> (QIn, [usize; 4], Geometry, bool) {
        if x.zp == 0 || geo.pad == [0; 4] {
            return (x, x_shape, geo, false);
        }
        let [t, l, b, r] = geo.pad.map(|p| p as i64);
        let shape = [
            x_shape[0],
            x_shape[1],
            x_shape[2] + geo.pad[0] + geo.pad[2],
            x_shape[3] + geo.pad[1] + geo.pad[3],
        ];
        let op = Pad {
            mode: crate::graph::ops::pad::PadMode::Constant,
            attrs: Some((vec![0, 0, t, l, 0, 0, b, r], x.zp as f32)),
        };
        let qp = QuantParams {
            scale: x.scale as f32,
            zero_point: x.zp,
        };
        let out = self.plan.add_value(
            format!("{name}:zero_point_padded"),
            Fact::new(DType::I8, shape.to_vec()),
            Some(qp),
        );
        self.push(
            &format!("{name}:pad_zero_point"),
            vec![x.v],
            vec![out],
            StepKind::Cpu(CpuOp {
                op: op.into(),
                args: vec![Some(x.v)],
                reason: format!(
                    "padding with the input's zero point {} (int8 domain): the accelerator pads with 0",
                    x.zp
                ),
            }),
        );
        let (lo, hi) = self.range_of(x.v);
        self.ranges.insert(out, (lo.min(x.zp), hi.max(x.zp)));
        (
            QIn { v: out, ..x },
            shape,
            Geometry { pad: [0; 4], ..geo },
            true,
        )
    }

    /// The support-table note of a layer whose input [`Self::pad_with_zero_point`] padded.
    pub(super) fn padded_note(padded: bool, zp: i32) -> String {
        if padded {
            format!("input padded with its zero point {zp} (int8 domain) on the CPU; ")
        } else {
            String::new()
        }
    }

    /// An imported quantized convolution (QLinearConv or QDQ), weights already centered.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn imported_conv(
        &self,
        name: &str,
        x: QIn,
        x_shape: [usize; 4],
        w: ArrayD<i32>,
        sw: &[f64],
        mut bias: Vec<i64>,
        geo: &Geometry,
        group: usize,
        out: &QOut,
        float_semantics: bool,
    ) -> R<(QConv2d, String)> {
        if geo.dilation != (1, 1) {
            return Err(format!(
                "dilation {:?}: the accelerator's convolution has no dilation",
                geo.dilation
            ));
        }
        let o = w.shape()[0];
        let per = w.len() / o.max(1);
        let wv: Vec<i32> = w.iter().cloned().collect();
        if x.zp != 0 {
            if geo.pad != [0; 4] {
                return Err(format!(
                    "input zero point {} (int8 domain) with padding: the accelerator pads with 0, which would not be the real zero",
                    x.zp
                ));
            }
            for (c, b) in bias.iter_mut().enumerate() {
                let s: i64 = wv[c * per..(c + 1) * per]
                    .iter()
                    .map(|&v| i64::from(v))
                    .sum();
                *b -= i64::from(x.zp) * s;
            }
        }
        if let Some(bad) = wv.iter().find(|v| !(-128..=127).contains(*v)) {
            return Err(format!(
                "weights minus their zero point do not fit int8 (value {bad})"
            ));
        }
        let (mut lo, mut hi) = self.range_of(x.v);
        if geo.pad != [0; 4] {
            lo = lo.min(0);
            hi = hi.max(0);
        }
        let ranges = conv_acc_ranges(&wv, o, &bias, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let constants = Self::constant_channels(x, sw, &ranges, out);
        let (c, constant) = self.make_requant_precise(&m, &ranges, &constants, out)?;
        let mut wv = wv;
        let note = self.check_fidelity(&c, out, float_semantics)?
            + &Self::apply_constant_channels(&mut wv, &mut bias, &constant);
        let bias32 = bias
            .iter()
            .map(|&b| i32::try_from(b).map_err(|_| format!("bias {b} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        let shape = w.shape().to_vec();
        let w8 = Array4::from_shape_vec(
            (shape[0], shape[1], shape[2], shape[3]),
            wv.iter().map(|&v| v as i8).collect(),
        )
        .map_err(|e| e.to_string())?;
        let layer = QConv2d {
            name: name.to_string(),
            input_shape: x_shape,
            weight: w8,
            bias: bias32,
            stride: geo.stride,
            pad: geo.pad,
            groups: group,
            requant: c.requant,
        };
        if layer.output_shape() != [x_shape[0], o, geo.out.0, geo.out.1] {
            return Err("internal: output shape mismatch".into());
        }
        Ok((layer, note))
    }

    /// An imported quantized dense layer (weights [M, K] centered).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn imported_dense(
        &self,
        name: &str,
        x: QIn,
        w: Array2<i32>,
        sw: &[f64],
        mut bias: Vec<i64>,
        out: &QOut,
        float_semantics: bool,
    ) -> R<(QDense, String)> {
        let (mo, _) = w.dim();
        if x.zp != 0 {
            for (c, b) in bias.iter_mut().enumerate() {
                let s: i64 = w.row(c).iter().map(|&v| i64::from(v)).sum();
                *b -= i64::from(x.zp) * s;
            }
        }
        let wv: Vec<i32> = w.iter().cloned().collect();
        if let Some(bad) = wv.iter().find(|v| !(-128..=127).contains(*v)) {
            return Err(format!(
                "weights minus their zero point do not fit int8 (value {bad})"
            ));
        }
        let (lo, hi) = self.range_of(x.v);
        let ranges = conv_acc_ranges(&wv, mo, &bias, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let constants = Self::constant_channels(x, sw, &ranges, out);
        let (c, constant) = self.make_requant_precise(&m, &ranges, &constants, out)?;
        let mut wv = wv;
        let note = self.check_fidelity(&c, out, float_semantics)?
            + &Self::apply_constant_channels(&mut wv, &mut bias, &constant);
        let bias32 = bias
            .iter()
            .map(|&b| i32::try_from(b).map_err(|_| format!("bias {b} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        let weight = Array2::from_shape_vec(w.dim(), wv.iter().map(|&v| v as i8).collect())
            .map_err(|e| e.to_string())?;
        Ok((
            QDense {
                name: name.to_string(),
                weight,
                bias: bias32,
                requant: c.requant,
            },
            note,
        ))
    }

    /// Post-training quantization of float weights `w` ([O, ...]) and bias: per-channel
    /// symmetric int8 weights whose scales are widened so that the requantization multiplier
    /// is exact, rounded with error feedback when `layer` (the graph node) has it.
    /// Returns (int8 weights, int32 bias, requant, note).
    pub(super) fn ptq_weights(
        &self,
        x: QIn,
        w: &ArrayD<f32>,
        b: Option<&[f32]>,
        out: &QOut,
        pad_zero: bool,
        layer: Option<NodeIndex>,
    ) -> R<(Vec<i8>, Vec<i32>, Requant, String)> {
        if x.zp != 0 {
            return Err("internal: post-training quantized inputs have zero point 0".into());
        }
        let o = w.shape()[0];
        let per = w.len() / o.max(1);
        let wv: Vec<f32> = w.iter().cloned().collect();
        let end = layer.is_some_and(|ix| self.ends.contains(&ix));
        let wgt_max = if end { 127 } else { self.wgt_max };
        let min_error = match self.opts.weight_clip {
            WeightClip::Max => false,
            WeightClip::MinError => true,
            WeightClip::Auto => wgt_max < 127,
        };
        let sw: Vec<f64> = (0..o)
            .map(|c| {
                let ws = &wv[c * per..(c + 1) * per];
                let m = ws.iter().fold(0f32, |a, v| a.max(v.abs()));
                let qmax = f64::from(wgt_max);
                let from_weights = if m > 0.0 && min_error {
                    min_error_scale(ws, f64::from(m), qmax)
                } else if m > 0.0 {
                    f64::from(m) / qmax
                } else {
                    1.0 / qmax
                };
                // A channel whose weights are all but zero (BatchNorm folded into a dead
                // channel) with a real bias would need a bias beyond int32 at the weights'
                // scale: widen the scale until the bias fits with room to spare (the weights
                // then round to the few levels they are worth).
                let bias = b.map_or(0.0, |b| f64::from(b[c]).abs());
                from_weights.max(bias / (x.scale * f64::from(1u32 << 30)))
            })
            .collect();
        let qmax = f64::from(wgt_max);
        let nearest = |sw: &[f64]| -> Vec<i32> {
            (0..o * per)
                .map(|i| (f64::from(wv[i]) / sw[i / per]).round().clamp(-qmax, qmax) as i32)
                .collect()
        };
        let feedback = layer.and_then(|ix| self.feedback?.get(&ix));
        let rounded = |sw: &[f64]| -> Option<Vec<i32>> {
            feedback.and_then(|f| super::super::gptq::round_rows(&wv, sw, qmax, f))
        };
        let bias_q = |sw: &[f64]| -> Vec<i64> {
            (0..o)
                .map(|c| b.map_or(0, |b| (f64::from(b[c]) / (x.scale * sw[c])).round() as i64))
                .collect()
        };
        let (q0, b0) = (rounded(&sw).unwrap_or_else(|| nearest(&sw)), bias_q(&sw));
        // A bias beyond int32 at these scales (a tiny input scale, e.g. an input that was 0
        // throughout calibration) cannot be requantized on the accelerator.
        if let Some(&v) = b0.iter().find(|v| i32::try_from(**v).is_err()) {
            return Err(format!(
                "bias {v} does not fit int32 at input scale {:.3e} (the input's calibrated range \
                 is too small)",
                x.scale
            ));
        }
        let (mut lo, mut hi) = self.range_of(x.v);
        if pad_zero {
            lo = lo.min(0);
            hi = hi.max(0);
        }
        let ranges = conv_acc_ranges(&q0, o, &b0, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let c = self.make_requant(&m, &ranges, MulRounding::Up, out)?;
        // Widen each channel's weight scale so that x_scale * w_scale / y_scale == mul / 2^e.
        let sw2: Vec<f64> = c
            .effective
            .iter()
            .map(|me| me * out.scale / x.scale)
            .collect();
        let bq = bias_q(&sw2);
        // Error feedback may move a weight further from zero than rounding to nearest at
        // the first scale did; the requantization was chosen for the accumulators of `q0`,
        // so the layer keeps its error-feedback weights only when theirs stay inside.
        let (q, rounding) = match rounded(&sw2) {
            Some(q) if within(&conv_acc_ranges(&q, o, &bq, lo, hi), &ranges) => (
                q,
                format!(
                    ", error-feedback rounding over {} input rows",
                    feedback.map_or(0, |f| f.rows)
                ),
            ),
            Some(_) => (
                nearest(&sw2),
                ", rounded to nearest (error feedback would widen the accumulators)".into(),
            ),
            None => (nearest(&sw2), String::new()),
        };
        let bias = bq
            .iter()
            .map(|&v| i32::try_from(v).map_err(|_| format!("bias {v} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        let widen = sw2
            .iter()
            .zip(&sw)
            .map(|(a, b)| a / b - 1.0)
            .fold(0.0, f64::max);
        let widths = if end {
            format!(
                "{} with 8-bit weights (first or last layer)",
                self.ptq_widths()
            )
        } else {
            self.ptq_widths()
        };
        let note = format!(
            "post-training {widths} (per-channel weights widened <= {:.2}%{rounding}, requant mul/2^{}, pre-shift loss <= {:.3} LSB)",
            widen * 100.0,
            u32::from(c.requant.pre_shift) + u32::from(c.requant.shift),
            c.trunc_error
        );
        Ok((q.iter().map(|&v| v as i8).collect(), bias, c.requant, note))
    }
}

/// Whether every channel's accumulator range `a` lies inside `b`'s.
fn within(a: &[AccRange], b: &[AccRange]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.lo >= y.lo && x.hi <= y.hi)
}

/// The step of symmetric `[-qmax, qmax]` quantization of `ws` with the least squared error,
/// among clipping ranges from `max` (the largest magnitude) down to `max / 5` in 2% steps.
fn min_error_scale(ws: &[f32], max: f64, qmax: f64) -> f64 {
    let error = |s: f64| -> f64 {
        ws.iter()
            .map(|&w| {
                let w = f64::from(w);
                let q = (w / s).round().clamp(-qmax, qmax);
                (w - q * s).powi(2)
            })
            .sum()
    };
    (0..=40)
        .map(|k| max * (1.0 - 0.02 * f64::from(k)) / qmax)
        .map(|s| (error(s), s))
        .fold((f64::INFINITY, max / qmax), |best, c| {
            if c.0 < best.0 {
                c
            } else {
                best
            }
        })
        .1
}
