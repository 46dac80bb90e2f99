//! `Resize` (and the older `Upsample`) in `nearest`, `linear` and `cubic` modes, any rank:
//! each axis maps output coordinates to input coordinates (the
//! `coordinate_transformation_mode`), then takes the nearest cell (`nearest_mode`),
//! interpolates linearly between the two neighbours (multilinear over every resized axis;
//! coordinates clamped to the input, as onnxruntime does), or cubically between four (one
//! axis after another, in f64 as ONNX's reference does; cells beyond the edge repeat it, or
//! with `exclude_outside` get no weight); with `antialias`, downsampling widens the linear or
//! cubic kernel by `1 / scale`. Coordinates are computed in f32, as onnxruntime
//! does. Nearest mode works on any element type (it only moves data); the others, and
//! `tf_crop_and_resize` (whose cells outside the region of interest take the
//! `extrapolation_value`), need float.
//!
//! Every attribute of opset 25's Resize is implemented.

use ndarray::{ArrayD, Dimension, IxDyn};

use super::TensorInfo;
use super::{arg, axis, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest,
    Linear,
    /// With the parameters of [`Resize::cubic`].
    Cubic,
}

/// `cubic` mode's parameters.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Cubic {
    /// `cubic_coeff_a`.
    pub a: f32,
    /// `exclude_outside`: the taps beyond the input get no weight, the others renormalized.
    pub exclude_outside: bool,
}

impl Default for Cubic {
    fn default() -> Cubic {
        Cubic {
            a: -0.75,
            exclude_outside: false,
        }
    }
}

/// `coordinate_transformation_mode`: output coordinate `o` to input coordinate.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordMode {
    /// `(o + 0.5) / scale - 0.5`.
    HalfPixel,
    /// `(o + 0.5) / scale - 0.5`, or 0 when the output length is 1.
    PytorchHalfPixel,
    /// `o * (in - 1) / (out - 1)`, or 0 when the output length is 1.
    AlignCorners,
    /// `o / scale`.
    Asymmetric,
    /// `(o + 0.5) / scale`.
    TfHalfPixelForNn,
    /// Half pixel about the centre of the input (opset 19).
    HalfPixelSymmetric,
    /// `o * (end - start) * (in - 1) / (out - 1) + start * (in - 1)` over the region of
    /// interest `[start, end]` (input 1, fractions of the axis); outside the input, the
    /// extrapolation value.
    TfCropAndResize,
}

/// `nearest_mode`: how a fractional input coordinate becomes an index.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// `keep_aspect_ratio_policy` (opset 18): how `sizes` become the output size.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AspectPolicy {
    /// Every axis to its size.
    #[default]
    Stretch,
    /// One scale for the resized axes, the smallest of `size / length`.
    NotLarger,
    /// One scale for the resized axes, the largest of `size / length`.
    NotSmaller,
}

/// Where the output size comes from.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum SizeSource {
    /// `Resize` opset 10 and `Upsample` opset 9: scales are input 1.
    ScalesInput,
    /// `Resize` opset >= 11: `roi` (input 1, unused), `scales` (input 2) or `sizes` (input 3).
    ScalesOrSizes,
    /// `Upsample` opset 7: the `scales` attribute.
    Attribute(Vec<f32>),
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coord: CoordMode,
    pub nearest: NearestMode,
    pub source: SizeSource,
    /// The axes `scales`/`sizes` refer to (opset 18); `None`: all axes.
    pub axes: Option<Vec<i64>>,
    #[serde(default)]
    pub policy: AspectPolicy,
    #[serde(default)]
    pub cubic: Cubic,
    /// `extrapolation_value` (`tf_crop_and_resize`).
    #[serde(default)]
    pub extrapolation: f32,
    /// `antialias` (linear and cubic modes): downsampling widens the kernel by `1 / scale`.
    #[serde(default)]
    pub antialias: bool,
}

/// How one axis is resized: per output index, the two input indices and the weight of the
/// second (nearest: the same index twice, weight 0).
#[derive(Debug, Clone, PartialEq)]
pub struct AxisMap {
    pub taps: Vec<(usize, usize, f32)>,
}

impl Resize {
    /// Output shape and per-axis scales for an input of `shape`, given the (constant) `scales`
    /// and `sizes` tensors (absent or empty when not given).
    pub fn resolve(
        &self,
        shape: &[usize],
        scales: Option<&Tensor>,
        sizes: Option<&Tensor>,
    ) -> Result<(Vec<usize>, Vec<f32>), String> {
        let r = shape.len();
        let axes: Vec<usize> = match &self.axes {
            Some(a) => a.iter().map(|&a| axis(a, r)).collect::<Result<_, _>>()?,
            None => (0..r).collect(),
        };
        let mut out = shape.to_vec();
        let mut sc = vec![1.0f32; r];
        fn given(t: Option<&Tensor>) -> Option<&Tensor> {
            t.filter(|t| !t.is_empty())
        }
        let attr_scales;
        let scales = match &self.source {
            SizeSource::Attribute(v) => {
                attr_scales =
                    Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.clone()).expect("1-D"));
                Some(&attr_scales)
            }
            _ => given(scales),
        };
        if let Some(sz) = given(sizes) {
            let v = sz.to_i64_vec();
            if v.len() != axes.len() {
                return Err(format!("{} sizes for {} axes", v.len(), axes.len()));
            }
            for (&a, &n) in axes.iter().zip(&v) {
                if n <= 0 {
                    return Err(format!("output size {n} for axis {a}"));
                }
                out[a] = n as usize;
                sc[a] = n as f32 / shape[a] as f32;
            }
            if self.policy != AspectPolicy::Stretch {
                let ratios = axes.iter().map(|&a| sc[a]);
                let s = if self.policy == AspectPolicy::NotLarger {
                    ratios.fold(f32::INFINITY, f32::min)
                } else {
                    ratios.fold(0.0, f32::max)
                };
                for &a in &axes {
                    // ONNX rounds half up here (not to even).
                    out[a] = ((s * shape[a] as f32 + 0.5).floor() as usize).max(1);
                    sc[a] = s;
                }
            }
        } else if let Some(s) = scales {
            let v: Vec<f32> = s.as_f32()?.iter().cloned().collect();
            if v.len() != axes.len() {
                return Err(format!("{} scales for {} axes", v.len(), axes.len()));
            }
            for (&a, &f) in axes.iter().zip(&v) {
                if !(f.is_finite() && f > 0.0) {
                    return Err(format!("scale {f} for axis {a}"));
                }
                let n = (f * shape[a] as f32).floor();
                if !(1.0..=f32::from(u16::MAX) * 256.0).contains(&n) {
                    return Err(format!("scale {f} gives axis {a} a size of {n}"));
                }
                out[a] = n as usize;
                sc[a] = f;
            }
        } else {
            return Err("neither scales nor sizes is given".into());
        }
        Ok((out, sc))
    }

    /// The input coordinate of output cell `o` of an axis from `len_in` to `len_out` cells at
    /// `scale` (`coordinate_transformation_mode`), `roi` its region of interest.
    pub fn coordinate(
        &self,
        o: usize,
        len_in: usize,
        len_out: usize,
        scale: f32,
        roi: (f32, f32),
    ) -> f32 {
        let of = o as f32;
        match self.coord {
            CoordMode::TfCropAndResize => {
                let (start, end) = roi;
                let last = len_in as f32 - 1.0;
                let centre = if len_out == 1 {
                    (end - start) * last / 2.0
                } else {
                    of * (end - start) * last / (len_out as f32 - 1.0)
                };
                centre + start * last
            }
            CoordMode::HalfPixel => (of + 0.5) / scale - 0.5,
            CoordMode::PytorchHalfPixel => {
                if len_out > 1 {
                    (of + 0.5) / scale - 0.5
                } else {
                    0.0
                }
            }
            CoordMode::AlignCorners => {
                // ONNX's length_resized is `len_in * scale`, not rounded to the
                // output's length (they differ when a scale is given, not a size); a
                // scale derived from a size gives the size back up to rounding.
                let resized = len_in as f32 * scale;
                let resized = if (resized - len_out as f32).abs() < 1e-3 {
                    len_out as f32
                } else {
                    resized
                };
                if len_out == 1 || resized <= 1.0 {
                    0.0
                } else {
                    of * (len_in as f32 - 1.0) / (resized - 1.0)
                }
            }
            CoordMode::Asymmetric => of / scale,
            CoordMode::TfHalfPixelForNn => (of + 0.5) / scale,
            CoordMode::HalfPixelSymmetric => {
                let adj = len_out as f32 / (scale * len_in as f32);
                let center = len_in as f32 / 2.0;
                center * (1.0 - adj) + (of + 0.5) / scale - 0.5
            }
        }
    }

    /// The index map of one axis from `len_in` to `len_out` cells at `scale`.
    pub fn axis_map(&self, len_in: usize, len_out: usize, scale: f32) -> AxisMap {
        self.axis_map_in(len_in, len_out, scale, (0.0, 1.0))
    }

    /// [`Resize::axis_map`] over the region of interest `roi`.
    fn axis_map_in(&self, len_in: usize, len_out: usize, scale: f32, roi: (f32, f32)) -> AxisMap {
        let taps = (0..len_out)
            .map(|o| {
                if len_in == len_out && scale == 1.0 && roi == (0.0, 1.0) {
                    return (o, o, 0.0);
                }
                let x = self.coordinate(o, len_in, len_out, scale, roi);
                let last = len_in - 1;
                match self.mode {
                    ResizeMode::Nearest => {
                        let f = x.floor();
                        let i = match self.nearest {
                            NearestMode::Floor => f,
                            NearestMode::Ceil => x.ceil(),
                            NearestMode::RoundPreferFloor if x - f == 0.5 => f,
                            NearestMode::RoundPreferCeil if x - f == 0.5 => f + 1.0,
                            _ => x.round(),
                        };
                        let i = (i.max(0.0) as usize).min(last);
                        (i, i, 0.0)
                    }
                    // (cubic and antialiased resizing take their windows themselves:
                    // `Resize::window`)
                    ResizeMode::Linear | ResizeMode::Cubic => {
                        let xc = x.clamp(0.0, last as f32);
                        let i0 = (xc.floor() as usize).min(last);
                        let i1 = (i0 + 1).min(last);
                        (i0, i1, xc - i0 as f32)
                    }
                }
            })
            .collect();
        AxisMap { taps }
    }

    /// The weights of the window of input cells around a coordinate whose distance above the
    /// window's middle cell is `t` (in (0, 1]), at `scale`: ONNX's kernels, the cubic
    /// (`cubic_coeff_a`) or the linear one, with `antialias` stretched by `1 / scale` when
    /// downsampling and normalized.
    fn kernel(&self, t: f64, scale: f64) -> Vec<f64> {
        let a = f64::from(self.cubic.a);
        let cubic = |d: f64| {
            let d = d.abs();
            if d <= 1.0 {
                ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
            } else if d < 2.0 {
                ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
            } else {
                0.0
            }
        };
        let (f, reach): (&dyn Fn(f64) -> f64, f64) = if self.mode == ResizeMode::Cubic {
            (&cubic, 2.0)
        } else {
            (&|d: f64| (1.0 - d.abs()).clamp(0.0, 1.0), 1.0)
        };
        let s = if self.antialias { scale.min(1.0) } else { 1.0 };
        // the cells within the kernel's reach, as many on either side of the middle
        let start = (-reach / s).floor() as i64 + 1;
        let w: Vec<f64> = (start..2 - start).map(|i| f(s * (i as f64 - t))).collect();
        if self.antialias {
            let sum: f64 = w.iter().sum();
            w.iter().map(|v| v / sum).collect()
        } else {
            w
        }
    }

    /// The input cells of an axis of `len` cells weighted for coordinate `x` at `scale`
    /// (ONNX's window: as many cells below `x` as above, an integer `x` counted with the cells
    /// above; beyond the edge the edge cell, or with `exclude_outside` no weight).
    fn window(&self, x: f64, len: usize, scale: f64) -> Vec<(usize, f64)> {
        let f = x.floor();
        let t = if x == f { 1.0 } else { x - f };
        let mut w = self.kernel(t, scale);
        let half = (w.len() / 2) as f64;
        let start = if x == f { f - half } else { f - half + 1.0 };
        let at = |k: usize| start + k as f64;
        if self.cubic.exclude_outside {
            for (k, w) in w.iter_mut().enumerate() {
                if at(k) < 0.0 || at(k) >= len as f64 {
                    *w = 0.0;
                }
            }
            let sum: f64 = w.iter().sum();
            if sum != 0.0 {
                w.iter_mut().for_each(|w| *w /= sum);
            }
        }
        w.into_iter()
            .enumerate()
            .map(|(k, w)| (at(k).clamp(0.0, (len - 1) as f64) as usize, w))
            .collect()
    }

    /// Cubic or antialiased resizing of a float tensor to `out` at scales `sc`, one axis after
    /// another.
    fn separable(
        &self,
        x: &ArrayD<f32>,
        out: &[usize],
        sc: &[f32],
        rois: &[(f32, f32)],
    ) -> ArrayD<f32> {
        let mut cur = x.mapv(f64::from);
        for a in 0..x.ndim() {
            let len = cur.shape()[a];
            if len == out[a] && sc[a] == 1.0 && rois[a] == (0.0, 1.0) {
                continue;
            }
            let taps: Vec<Vec<(usize, f64)>> = (0..out[a])
                .map(|o| {
                    let x = self.coordinate(o, len, out[a], sc[a], rois[a]);
                    self.window(f64::from(x), len, f64::from(sc[a]))
                })
                .collect();
            let mut shape = cur.shape().to_vec();
            shape[a] = out[a];
            cur = ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
                let mut at = ix.as_array_view().to_vec();
                taps[ix[a]]
                    .iter()
                    .map(|&(i, w)| {
                        at[a] = i;
                        w * cur[&at[..]]
                    })
                    .sum()
            });
        }
        cur.mapv(|v| v as f32)
    }

    /// Whether nearest resizing of an axis from `len_in` to `len_in * k` repeats every input
    /// cell `k` times (`out[o] = in[o / k]`).
    pub fn is_repeat(map: &AxisMap, k: usize) -> bool {
        map.taps
            .iter()
            .enumerate()
            .all(|(o, &(i0, i1, _))| i0 == o / k && i1 == i0)
    }

    /// The region of interest of every axis, `(start, end)`: `tf_crop_and_resize`'s `roi`
    /// (starts, then ends, of the resized axes), otherwise the whole axis.
    fn rois(&self, r: usize, roi: Option<&Tensor>) -> Result<Vec<(f32, f32)>, String> {
        let mut rois = vec![(0.0, 1.0); r];
        if self.coord != CoordMode::TfCropAndResize {
            return Ok(rois);
        }
        let axes: Vec<usize> = match &self.axes {
            Some(a) => a.iter().map(|&a| axis(a, r)).collect::<Result<_, _>>()?,
            None => (0..r).collect(),
        };
        let v: Vec<f32> = roi
            .ok_or("tf_crop_and_resize needs the roi input")?
            .as_f32()?
            .iter()
            .copied()
            .collect();
        if v.len() != 2 * axes.len() {
            return Err(format!(
                "roi has {} values for {} axes",
                v.len(),
                axes.len()
            ));
        }
        for (k, &a) in axes.iter().enumerate() {
            rois[a] = (v[k], v[axes.len() + k]);
        }
        Ok(rois)
    }

    /// Whether output cell `o` of an axis falls outside the input (`tf_crop_and_resize`; its
    /// coordinates do not depend on the scale).
    fn outside(&self, o: usize, len_in: usize, len_out: usize, roi: (f32, f32)) -> bool {
        let x = self.coordinate(o, len_in, len_out, 1.0, roi);
        !(0.0..=(len_in as f32 - 1.0)).contains(&x)
    }

    /// The scales and sizes inputs of an op with these inputs.
    fn size_inputs<'a, T>(&self, inputs: &[Option<&'a T>]) -> (Option<&'a T>, Option<&'a T>) {
        let at = |i: usize| inputs.get(i).copied().flatten();
        match self.source {
            SizeSource::ScalesInput => (at(1), None),
            SizeSource::ScalesOrSizes => (at(2), at(3)),
            SizeSource::Attribute(_) => (None, None),
        }
    }
}

/// Nearest resize of any element type: every output cell copies one input cell.
fn gather<T: Copy>(x: &ArrayD<T>, out: &[usize], maps: &[AxisMap]) -> ArrayD<T> {
    let xs = x.as_standard_layout();
    let v = xs.as_slice().expect("standard layout");
    let strides: Vec<usize> = (0..x.ndim())
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    ArrayD::from_shape_fn(IxDyn(out), |ix| {
        let off: usize = (0..maps.len())
            .map(|a| maps[a].taps[ix[a]].0 * strides[a])
            .sum();
        v[off]
    })
}

/// Multilinear resize of a float tensor.
fn interpolate(x: &ArrayD<f32>, out: &[usize], maps: &[AxisMap]) -> ArrayD<f32> {
    let xs = x.as_standard_layout();
    let v = xs.as_slice().expect("standard layout");
    let r = x.ndim();
    let strides: Vec<usize> = (0..r)
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    let linear: Vec<usize> = (0..r)
        .filter(|&a| maps[a].taps.iter().any(|t| t.0 != t.1))
        .collect();
    ArrayD::from_shape_fn(IxDyn(out), |ix| {
        let base: usize = (0..r).map(|a| maps[a].taps[ix[a]].0 * strides[a]).sum();
        let mut acc = 0.0f32;
        for corner in 0..1usize << linear.len() {
            let mut w = 1.0f32;
            let mut off = base;
            for (k, &a) in linear.iter().enumerate() {
                let (i0, i1, t) = maps[a].taps[ix[a]];
                if corner >> k & 1 == 1 {
                    w *= t;
                    off = off - i0 * strides[a] + i1 * strides[a];
                } else {
                    w *= 1.0 - t;
                }
            }
            acc += w * v[off];
        }
        acc
    })
}

impl Op for Resize {
    fn op_type(&self) -> &'static str {
        "Resize"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if self.mode != ResizeMode::Nearest && x.dtype != DType::F32 {
            return Err(format!(
                "{:?} Resize is supported on float tensors, got {}",
                self.mode, x.dtype
            ));
        }
        if self.coord == CoordMode::TfCropAndResize && x.dtype != DType::F32 {
            return Err(format!(
                "tf_crop_and_resize is supported on float tensors, got {}",
                x.dtype
            ));
        }
        let (scales, sizes) = self.size_inputs(inputs);
        if self.coord == CoordMode::TfCropAndResize && sizes.is_none_or(|s| s.fact.is_empty()) {
            return Err(
                "tf_crop_and_resize with scales is not supported (its output size \
                        depends on the region of interest): give sizes instead"
                    .into(),
            );
        }
        let constant = |t: Option<&TensorInfo>, what: &str| -> Result<(), String> {
            match t {
                Some(t) if t.value.is_none() && !t.fact.is_empty() => Err(format!(
                    "{what} is computed at run time; the importer needs it constant (static shapes)"
                )),
                _ => Ok(()),
            }
        };
        constant(scales, "scales")?;
        constant(sizes, "sizes")?;
        fn value(t: Option<&TensorInfo>) -> Option<&Tensor> {
            t.and_then(|t| t.value.as_deref())
        }
        let (sc, sz) = (value(scales), value(sizes));
        let (out, _) = self.resolve(&x.shape, sc, sz)?;
        Ok(vec![Fact::new(x.dtype, out)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?;
        let (scales, sizes) = self.size_inputs(inputs);
        let shape = x.shape();
        let rois = self.rois(shape.len(), inputs.get(1).copied().flatten())?;
        let (out, sc) = self.resolve(shape, scales, sizes)?;
        let maps: Vec<AxisMap> = (0..shape.len())
            .map(|a| self.axis_map_in(shape[a], out[a], sc[a], rois[a]))
            .collect();
        let y = match (self.mode, x) {
            (ResizeMode::Cubic, Tensor::F32(a)) | (ResizeMode::Linear, Tensor::F32(a))
                if self.mode == ResizeMode::Cubic || self.antialias =>
            {
                Tensor::F32(self.separable(a, &out, &sc, &rois))
            }
            (ResizeMode::Linear, Tensor::F32(a)) => Tensor::F32(interpolate(a, &out, &maps)),
            (ResizeMode::Linear | ResizeMode::Cubic, t) => {
                return Err(format!("linear Resize of {} is not supported", t.dtype()))
            }
            (ResizeMode::Nearest, Tensor::F32(a)) => Tensor::F32(gather(a, &out, &maps)),
            (ResizeMode::Nearest, Tensor::I8(a)) => Tensor::I8(gather(a, &out, &maps)),
            (ResizeMode::Nearest, Tensor::U8(a)) => Tensor::U8(gather(a, &out, &maps)),
            (ResizeMode::Nearest, Tensor::I32(a)) => Tensor::I32(gather(a, &out, &maps)),
            (ResizeMode::Nearest, Tensor::I64(a)) => Tensor::I64(gather(a, &out, &maps)),
        };
        if self.coord != CoordMode::TfCropAndResize {
            return Ok(vec![y]);
        }
        let outside: Vec<Vec<bool>> = (0..shape.len())
            .map(|a| {
                (0..out[a])
                    .map(|o| self.outside(o, shape[a], out[a], rois[a]))
                    .collect()
            })
            .collect();
        let mut y = y.as_f32()?.clone();
        for (ix, v) in y.indexed_iter_mut() {
            if (0..ix.ndim()).any(|a| outside[a][ix[a]]) {
                *v = self.extrapolation;
            }
        }
        Ok(vec![Tensor::F32(y)])
    }

    fn summary(&self) -> String {
        format!("{:?} {:?}", self.mode, self.coord).to_lowercase()
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(mode: ResizeMode, coord: CoordMode, nearest: NearestMode) -> Resize {
        Resize {
            mode,
            coord,
            nearest,
            source: SizeSource::ScalesOrSizes,
            axes: None,
            policy: AspectPolicy::Stretch,
            cubic: Cubic::default(),
            extrapolation: 0.0,
            antialias: false,
        }
    }

    #[test]
    fn nearest_upsampling_by_integer_factors_repeats_cells() {
        use CoordMode::*;
        use NearestMode::*;
        for (coord, nearest) in [
            (HalfPixel, RoundPreferFloor),
            (HalfPixel, RoundPreferCeil),
            (PytorchHalfPixel, RoundPreferFloor),
            (Asymmetric, Floor),
        ] {
            let r = op(ResizeMode::Nearest, coord, nearest);
            for k in 2..5 {
                let m = r.axis_map(7, 7 * k, k as f32);
                assert!(
                    Resize::is_repeat(&m, k),
                    "{coord:?} {nearest:?} x{k}: {m:?}"
                );
            }
        }
        // Other combinations do not repeat every cell k times.
        for (coord, nearest) in [(HalfPixel, Floor), (Asymmetric, RoundPreferFloor)] {
            let r = op(ResizeMode::Nearest, coord, nearest);
            assert!(!Resize::is_repeat(&r.axis_map(7, 21, 3.0), 3));
        }
        // align_corners does not repeat cells.
        let r = op(
            ResizeMode::Nearest,
            CoordMode::AlignCorners,
            NearestMode::RoundPreferFloor,
        );
        assert!(!Resize::is_repeat(&r.axis_map(7, 21, 3.0), 3));
    }

    #[test]
    fn align_corners_with_a_scale_uses_the_unrounded_resized_length() {
        // ONNX's resize_downsample_scales_linear_align_corners: 4 cells at 0.6 are 2, the
        // second at 1 * 3 / (2.4 - 1).
        let r = op(
            ResizeMode::Linear,
            CoordMode::AlignCorners,
            NearestMode::RoundPreferFloor,
        );
        let m = r.axis_map(4, 2, 0.6);
        assert_eq!((m.taps[1].0, m.taps[1].1), (2, 3));
        assert!((m.taps[1].2 - 1.0 / 7.0).abs() < 1e-6, "{m:?}");
    }

    #[test]
    fn windows_interpolate_and_exclude_outside_renormalizes() {
        let mut r = op(ResizeMode::Cubic, CoordMode::HalfPixel, NearestMode::Floor);
        // On a cell: that cell alone (the taps below and above it weigh 0).
        let on = r.window(3.0, 8, 2.0);
        assert_eq!(on, [(1, 0.0), (2, 0.0), (3, 1.0), (4, 0.0)]);
        // Half way: symmetric weights summing to 1, a = -0.75: [-0.09375, 0.59375, ...].
        let half = r.window(0.5, 8, 2.0);
        assert_eq!(
            half,
            [(0, -0.09375), (0, 0.59375), (1, 0.59375), (2, -0.09375)]
        );
        // Antialiased downsampling by 2: a linear kernel twice as wide, normalized.
        let mut lin = op(ResizeMode::Linear, CoordMode::HalfPixel, NearestMode::Floor);
        lin.antialias = true;
        let w = lin.window(2.5, 8, 0.5);
        assert_eq!(w, [(1, 0.125), (2, 0.375), (3, 0.375), (4, 0.125)]);
        r.cubic.exclude_outside = true;
        let w: Vec<f64> = r.window(0.5, 8, 2.0).iter().map(|t| t.1).collect();
        assert_eq!(w[0], 0.0);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn tf_crop_and_resize_maps_the_region_of_interest_and_marks_cells_outside() {
        let mut r = op(
            ResizeMode::Linear,
            CoordMode::TfCropAndResize,
            NearestMode::Floor,
        );
        r.axes = Some(vec![1]);
        let roi = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![0.25, 1.5]).unwrap());
        let rois = r.rois(2, Some(&roi)).unwrap();
        assert_eq!(rois, [(0.0, 1.0), (0.25, 1.5)]);
        // 5 cells, 6 outputs over [0.25, 1.5] of the axis: coordinates 1, 2, ..., 6.
        let x: Vec<f32> = (0..6)
            .map(|o| r.coordinate(o, 5, 6, 1.0, rois[1]))
            .collect();
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let outside: Vec<bool> = (0..6).map(|o| r.outside(o, 5, 6, rois[1])).collect();
        assert_eq!(outside, [false, false, false, false, true, true]);
    }

    #[test]
    fn keep_aspect_ratio_policies_give_one_scale_to_the_resized_axes() {
        let sizes = Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![7, 8]).unwrap());
        let mut r = op(
            ResizeMode::Nearest,
            CoordMode::HalfPixel,
            NearestMode::Floor,
        );
        r.axes = Some(vec![2, 3]);
        for (policy, out, scale) in [
            (AspectPolicy::NotLarger, [7, 7], 7.0 / 4.0),
            (AspectPolicy::NotSmaller, [8, 8], 2.0),
        ] {
            r.policy = policy;
            let (shape, sc) = r.resolve(&[1, 1, 4, 4], None, Some(&sizes)).unwrap();
            assert_eq!(shape, [1, 1, out[0], out[1]], "{policy:?}");
            assert_eq!(sc, [1.0, 1.0, scale, scale], "{policy:?}");
        }
    }

    #[test]
    fn linear_half_pixel_matches_the_onnx_example() {
        // ONNX's resize_upsample_scales_linear: [[1, 2], [3, 4]] x2.
        let r = op(
            ResizeMode::Linear,
            CoordMode::HalfPixel,
            NearestMode::RoundPreferFloor,
        );
        let x = ArrayD::from_shape_vec(IxDyn(&[1, 1, 2, 2]), vec![1f32, 2., 3., 4.]).unwrap();
        let scales =
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![1., 1., 2., 2.]).unwrap());
        let y = r
            .eval(&[Some(&Tensor::F32(x)), None, Some(&scales), None])
            .unwrap();
        let want = [
            1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0,
        ];
        let got: Vec<f32> = y[0].as_f32().unwrap().iter().cloned().collect();
        assert_eq!(got, want);
    }
}
