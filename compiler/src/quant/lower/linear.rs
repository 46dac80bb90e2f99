//! Convolutions and dense layers (float with post-training quantization, QDQ, QLinearConv,
//! QLinearMatMul) lowered to accelerator layers.

use super::*;

impl<'g> Lowerer<'g> {
    pub(super) fn conv(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let conv = n.op.as_any().downcast_ref::<Conv>().expect("Conv").clone();
        let (xt, wt, bt) = (
            n.inputs[0].ok_or("no input")?,
            n.inputs[1].ok_or("no weight")?,
            n.inputs.get(2).copied().flatten(),
        );
        let xs = self.g.fact(xt).shape.clone();
        let ws = self.g.fact(wt).shape.clone();
        let x_shape = [xs[0], xs[1], xs[2], xs[3]];
        let geo = conv.window.resolve((xs[2], xs[3]), (ws[2], ws[3]))?;
        if geo.dilation != (1, 1) {
            return Err(format!(
                "dilation {:?}: the accelerator's convolution has no dilation",
                geo.dilation
            ));
        }
        let name = self.node_name(ix);
        if self.quantized_model {
            let (w, sw, wdq) = self.dq_weights(wt, 0)?;
            let (out, target) = self.out_target(ix, conv.activation)?;
            let x = self.as_q8(xt)?;
            let (bias, bdq) = self.int_bias(bt, ws[0], x.scale, &sw)?;
            let (x, x_shape, geo, padded) = self.pad_with_zero_point(&name, x, x_shape, geo);
            let (layer, note) = self.imported_conv(
                &name, x, x_shape, w, &sw, bias, &geo, conv.group, &out, true,
            )?;
            let note = format!("{}{note}", Self::padded_note(padded, x.zp));
            self.accel(
                ix,
                Layer::Conv2d(layer),
                vec![x.v],
                out,
                target,
                format!("QDQ conv: {note}"),
            );
            self.set_fused_params(wdq, bdq, &name);
        } else {
            let w = self
                .g
                .const_value(wt)
                .ok_or("weights are not constant")?
                .as_f32()?
                .clone();
            let b = match bt {
                None => None,
                Some(b) => Some(f32_of(
                    self.g.const_value(b).ok_or("bias is not constant")?,
                )?),
            };
            let (out, target) = self.out_target(ix, conv.activation)?;
            let x = self.as_q8(xt)?;
            let (q, bias, requant, note) =
                self.ptq_weights(x, &w, b.as_deref(), &out, geo.pad != [0; 4], Some(ix))?;
            let weight = Array4::from_shape_vec((ws[0], ws[1], ws[2], ws[3]), q)
                .map_err(|e| e.to_string())?;
            let layer = QConv2d {
                name: name.clone(),
                input_shape: x_shape,
                weight,
                bias,
                stride: geo.stride,
                pad: geo.pad,
                groups: conv.group,
                requant,
            };
            self.accel(ix, Layer::Conv2d(layer), vec![x.v], out, target, note);
        }
        Ok(())
    }

    pub(super) fn qlinear_conv(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let op =
            n.op.as_any()
                .downcast_ref::<QLinearConv>()
                .expect("QLinearConv")
                .clone();
        let ins = n.inputs.clone();
        let c = |i: usize| {
            ins.get(i)
                .copied()
                .flatten()
                .and_then(|t| self.g.const_value(t))
        };
        for (i, what) in [
            (1, "x_scale"),
            (2, "x_zero_point"),
            (3, "w"),
            (4, "w_scale"),
            (5, "w_zero_point"),
            (6, "y_scale"),
            (7, "y_zero_point"),
        ] {
            if ins.get(i).copied().flatten().is_some() && c(i).is_none() {
                return Err(format!("{what} is not a constant"));
            }
        }
        if ins.get(8).copied().flatten().is_some() && c(8).is_none() {
            return Err("bias is not a constant".into());
        }
        let w = c(3).ok_or("no weights")?;
        let (o, _, kh, kw) = dims4(w.shape(), "w")?;
        let sw: Vec<f64> = crate::graph::ops::qlinear_conv::per_channel_f32(
            c(4).ok_or("no w_scale")?,
            o,
            "w_scale",
        )?
        .into_iter()
        .map(f64::from)
        .collect();
        let wz = crate::graph::ops::qlinear_conv::per_channel_i32(c(5), o, "w_zero_point")?;
        let wc = crate::graph::ops::qlinear_conv::centered_per_channel(w, &wz)?;
        let xs_ = c(1).ok_or("no x_scale")?.scalar_f32()?;
        let xz = scalar_i32(c(2));
        let ys = c(6).ok_or("no y_scale")?.scalar_f32()?;
        let yzt = c(7).ok_or("no y_zero_point")?;
        let ydt = yzt.dtype();
        let yz8 = scalar_i32(Some(yzt)) - offset_of(ydt);
        let bias: Vec<i64> = match c(8) {
            Some(b) => b.to_i64_vec(),
            None => vec![0; o],
        };
        let xt = ins[0].ok_or("no input")?;
        let xsh = self.g.fact(xt).shape.clone();
        let geo = op.window.resolve((xsh[2], xsh[3]), (kh, kw))?;
        let (xv, off) = self.as_i8(xt)?;
        let x = QIn {
            v: xv,
            scale: f64::from(xs_),
            zp: xz - off,
        };
        let out = QOut {
            scale: f64::from(ys),
            zp: yz8,
            lo: -128,
            hi: 127,
            dtype: ydt,
            offset: offset_of(ydt),
            extra_dev: 0.0,
        };
        let name = self.node_name(ix);
        let (x, x_shape, geo, padded) =
            self.pad_with_zero_point(&name, x, [xsh[0], xsh[1], xsh[2], xsh[3]], geo);
        let (layer, note) = self.imported_conv(
            &name, x, x_shape, wc, &sw, bias, &geo, op.group, &out, false,
        )?;
        let note = format!("{}{note}", Self::padded_note(padded, x.zp));
        self.integer_output(ix, Layer::Conv2d(layer), x.v, out, note, ydt);
        Ok(())
    }

    pub(super) fn dense(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let any = n.op.as_any();
        let (gemm, is_matmul) = if let Some(g) = any.downcast_ref::<Gemm>() {
            (g.clone(), false)
        } else if any.is::<MatMul>() {
            (
                Gemm {
                    alpha: 1.0,
                    beta: 1.0,
                    trans_a: false,
                    trans_b: false,
                    activation: None,
                },
                true,
            )
        } else {
            return Err("not a matrix product".into());
        };
        if gemm.trans_a {
            return Err("transA = 1".into());
        }
        let (at, bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        let ct = if is_matmul {
            None
        } else {
            n.inputs.get(2).copied().flatten()
        };
        let rank = self.g.fact(at).rank();
        if rank < 2 || (rank > 2 && !is_matmul) {
            return Err(format!(
                "input of rank {rank} (the dense layer takes [N, K], or [..., N, K] in a MatMul)"
            ));
        }
        let name = self.node_name(ix);
        if self.quantized_model {
            let (w, sw, wdq) = self.dq_weights(bt, if gemm.trans_b { 0 } else { 1 })?;
            let w = w
                .into_dimensionality::<ndarray::Ix2>()
                .map_err(|_| "weights are not 2-D")?;
            let w = if gemm.trans_b { w } else { w.t().to_owned() };
            let (out, target) = self.out_target(ix, gemm.activation)?;
            let x = self.as_q8(at)?;
            let x = self.flatten_rows(&name, x);
            if gemm.alpha != 1.0 || gemm.beta != 1.0 {
                return Err("alpha/beta != 1 in a quantized Gemm".into());
            }
            let (bias, bdq) = match ct {
                Some(c) if self.g.fact(c).len() != w.nrows() => {
                    return Err("bias is not a vector".into())
                }
                c => self.int_bias(c, w.nrows(), x.scale, &sw)?,
            };
            let (layer, note) = self.imported_dense(&name, x, w, &sw, bias, &out, true)?;
            let yt = target.tensor;
            let step = self.accel(
                ix,
                Layer::Dense(layer),
                vec![x.v],
                out,
                target,
                format!("QDQ dense: {note}"),
            );
            self.unflatten_rows(&name, step, yt)?;
            self.set_fused_params(wdq, bdq, &name);
        } else {
            let b = self
                .g
                .const_value(bt)
                .ok_or("B is not constant")?
                .as_f32()?;
            let b2 = b
                .view()
                .into_dimensionality::<ndarray::Ix2>()
                .map_err(|_| "B is not 2-D")?;
            let w = if gemm.trans_b {
                b2.to_owned()
            } else {
                b2.t().to_owned()
            };
            let w = w.mapv(|v| v * gemm.alpha).into_dyn();
            let m = w.shape()[0];
            let bias: Option<Vec<f32>> = match ct {
                None => None,
                Some(c) => {
                    let cv = self.g.const_value(c).ok_or("C is not constant")?;
                    let v = f32_of(cv)?;
                    if v.len() == m {
                        Some(v.iter().map(|x| x * gemm.beta).collect())
                    } else if v.len() == 1 {
                        Some(vec![v[0] * gemm.beta; m])
                    } else {
                        return Err("C is not a bias vector".into());
                    }
                }
            };
            let (out, target) = self.out_target(ix, gemm.activation)?;
            let x = self.as_q8(at)?;
            let x = self.flatten_rows(&name, x);
            let (q, bias, requant, note) =
                self.ptq_weights(x, &w, bias.as_deref(), &out, false, Some(ix))?;
            let k = w.shape()[1];
            let layer = QDense {
                name: name.clone(),
                weight: Array2::from_shape_vec((m, k), q).map_err(|e| e.to_string())?,
                bias,
                requant,
            };
            let yt = target.tensor;
            let step = self.accel(ix, Layer::Dense(layer), vec![x.v], out, target, note);
            self.unflatten_rows(&name, step, yt)?;
        }
        Ok(())
    }

    /// A MatMul operand `[..., N, K]` of rank 3 or more as the dense layer's `[rows, K]`
    /// (a row-major reshape on the CPU: no data change); a 2-D operand as it is.
    fn flatten_rows(&mut self, name: &str, x: QIn) -> QIn {
        let shape = self.plan.values[x.v].fact.shape.clone();
        if shape.len() <= 2 {
            return x;
        }
        let k = shape[shape.len() - 1];
        let rows = shape[..shape.len() - 1].iter().product();
        let v = self.reshape_i8(&format!("{name}:rows"), x.v, &[rows, k]);
        QIn { v, ..x }
    }

    /// The dense layer of step `step` computed the rows `[rows, M]` of the MatMul output
    /// that graph tensor `yt` (`[..., N, M]`) holds: its value gets that 2-D shape, and a
    /// CPU reshape gives `yt`'s.
    fn unflatten_rows(&mut self, name: &str, step: usize, yt: TensorId) -> R<()> {
        let shape = self.g.fact(yt).shape.clone();
        if shape.len() <= 2 {
            return Ok(());
        }
        let v = self.plan.steps[step].outputs[0];
        let m = shape[shape.len() - 1];
        let rows = shape[..shape.len() - 1].iter().product();
        self.plan.values[v].fact = Fact::new(DType::I8, vec![rows, m]);
        let y = self.reshape_i8(&format!("{name}:unflatten"), v, &shape);
        let r = match self.repr.get(&yt) {
            Some(Repr::Exact(_)) => Repr::Exact(y),
            Some(Repr::Shifted(_)) => Repr::Shifted(y),
            Some(&Repr::Offset(_, off)) => Repr::Offset(y, off),
            Some(&Repr::Deq { scale, zp, .. }) => Repr::Deq { q: y, scale, zp },
            None => return Err("internal: the dense layer's output has no representation".into()),
        };
        self.repr.insert(yt, r);
        Ok(())
    }

    /// A CPU step reshaping int8 value `v` (row-major: no data change) to `shape`; the
    /// result keeps `v`'s quantization and range.
    fn reshape_i8(&mut self, name: &str, v: ValueId, shape: &[usize]) -> ValueId {
        let qp = self.plan.values[v].quant;
        let range = self.range_of(v);
        let out = self
            .plan
            .add_value(name, Fact::new(DType::I8, shape.to_vec()), qp);
        self.ranges.insert(out, range);
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let target = self.plan.add_constant(
            format!("{name}:shape"),
            Arc::new(Tensor::I64(
                ArrayD::from_shape_vec(ndarray::IxDyn(&[dims.len()]), dims).expect("1-D"),
            )),
        );
        self.push(
            name,
            vec![v, target],
            vec![out],
            StepKind::Cpu(CpuOp {
                op: Reshape { allowzero: false }.into(),
                args: vec![Some(v), Some(target)],
                reason: "the matrix product's rows as the dense layer reads and writes them (a \
                         row-major reshape of the int8 tensor: no data change)"
                    .into(),
            }),
        );
        out
    }

    pub(super) fn qlinear_matmul(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ins = n.inputs.clone();
        let c = |i: usize| {
            ins.get(i)
                .copied()
                .flatten()
                .and_then(|t| self.g.const_value(t))
        };
        for (i, what) in [
            (1, "a_scale"),
            (2, "a_zero_point"),
            (3, "b"),
            (4, "b_scale"),
            (5, "b_zero_point"),
            (6, "y_scale"),
            (7, "y_zero_point"),
        ] {
            if c(i).is_none() {
                return Err(format!("{what} is not a constant"));
            }
        }
        let at = ins[0].ok_or("no a")?;
        if self.g.fact(at).rank() < 2 {
            return Err(format!(
                "a has rank {} (the dense layer takes [..., N, K])",
                self.g.fact(at).rank()
            ));
        }
        let b = c(3).expect("checked");
        if b.shape().len() != 2 {
            return Err("b is not a 2-D matrix".into());
        }
        let nn = b.shape()[1];
        let bs: Vec<f64> = crate::graph::ops::qlinear_conv::per_channel_f32(
            c(4).expect("checked"),
            nn,
            "b_scale",
        )?
        .into_iter()
        .map(f64::from)
        .collect();
        let bc = crate::graph::ops::matmul_integer::center_cols(b, c(5))?;
        let w = bc
            .into_dimensionality::<ndarray::Ix2>()
            .map_err(|e| e.to_string())?
            .t()
            .to_owned();
        let as_ = c(1).expect("checked").scalar_f32()?;
        let az = scalar_i32(c(2));
        let ys = c(6).expect("checked").scalar_f32()?;
        let yzt = c(7).expect("checked");
        let ydt = yzt.dtype();
        let (av, off) = self.as_i8(at)?;
        let x = QIn {
            v: av,
            scale: f64::from(as_),
            zp: az - off,
        };
        let out = QOut {
            scale: f64::from(ys),
            zp: scalar_i32(Some(yzt)) - offset_of(ydt),
            lo: -128,
            hi: 127,
            dtype: ydt,
            offset: offset_of(ydt),
            extra_dev: 0.0,
        };
        let name = self.node_name(ix);
        let x = self.flatten_rows(&name, x);
        let (layer, note) = self.imported_dense(&name, x, w, &bs, vec![0; nn], &out, false)?;
        let step = self.integer_output(ix, Layer::Dense(layer), x.v, out, note, ydt);
        self.unflatten_rows(&name, step, self.g.dag[ix].outputs[0])?;
        Ok(())
    }

    // ---------------------------------------------------------------- element-wise / pools
}
