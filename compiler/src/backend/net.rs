//! Programs of one or more layers: [`NetBuilder`] places every tensor in DRAM and emits the
//! layers one after another into one instruction stream; [`LayerProgram`] runs the result.

use std::collections::HashSet;
use std::time::Duration;

use drivers::{Device, RunTimeout};
use isa::builder::Buf;
use isa::{DType, HwConfig, Role};
use ndarray::{Array4, ArrayView4};
use vta_runtime::program::{DeviceProgram, TensorSegment};

use super::conv::{self, ConvBufs};
use super::depthwise;
use super::eltwise;
use super::emit::Ctx;
use super::epilogue::{self, Epilogue};
use super::fold::{self, Fold};
use super::layout::{pack_acc_rows, ActLayout, WeightLayout};
use super::lut;
use super::tiling::{self, ConvGeom, CostEstimate, Tiling};
use super::{check_config, dense_as_conv, BackendError, RunError};
use crate::qlayer::{QAdd, QConv2d, QDense, QGlobalAvgPool, QMaxPool};

/// A tensor of a program being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tensor(usize);

/// The kind of a compiled layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    Conv,
    Dense,
    Add,
    MaxPool,
    GlobalAvgPool,
    Affine,
    Binary,
    LeakyRelu,
    Upsample,
    Concat,
    Slice,
    /// An elementwise function on the activation table ([`super::lut`]).
    TableActivation,
}

/// How one layer was compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerInfo {
    pub name: String,
    pub kind: LayerKind,
    /// The tiling chosen by the cost model (convolutions and dense layers).
    pub tiling: Option<Tiling>,
    /// The cost model's prediction for that tiling.
    pub estimate: Option<CostEstimate>,
    /// Convolutions reading a tensor from the host: the part of the window folded into the
    /// input-channel axis (the tiling is then that of the folded convolution, see
    /// [`super::fold`]).
    pub fold: Option<Fold>,
    /// Output tiles.
    pub tiles: usize,
    /// Instructions emitted for the layer (without the synchronization between layers).
    pub insns: usize,
    /// Distinct micro-op kernels the layer registered (kernels shared with earlier layers
    /// are not counted again).
    pub kernels: usize,
    /// Multiply-accumulates the device performs for the layer: GEMM micro-ops x BATCH x
    /// BLOCK_IN x BLOCK_OUT, or the ALU MUL lanes of a depthwise convolution on the ALU
    /// (0 for layers without MACs).
    pub device_macs: u64,
}

/// A compiled program ([`DeviceProgram`]: what a compiled model stores and runs) and how each
/// of its layers was compiled (the compile report's tiling table).
#[derive(Debug, Clone)]
pub struct LayerProgram {
    pub device: DeviceProgram,
    /// Per layer, in program order.
    pub layers: Vec<LayerInfo>,
}

impl std::ops::Deref for LayerProgram {
    type Target = DeviceProgram;
    fn deref(&self) -> &DeviceProgram {
        &self.device
    }
}

impl LayerProgram {
    /// Runs a program of one input and one output: packs `input`, runs, unpacks.
    pub fn run(&self, dev: &mut dyn Device, input: ArrayView4<i8>) -> Result<Array4<i8>, RunError> {
        let (mut outs, _) =
            self.run_all(dev, &[input], RunTimeout::wall(Duration::from_secs(600)))?;
        Ok(outs.swap_remove(0))
    }
}

struct TensorState {
    name: String,
    shape: [usize; 4],
    /// Segment and layout, once placed.
    bound: Option<(Buf, ActLayout)>,
    input: bool,
    /// A network input the host packs for this program (so its first reader may fold it).
    from_host: bool,
}

/// Builds one program from a sequence (or DAG) of layers, keeping activations packed in DRAM
/// between them: each layer reads its inputs' segments and writes a new one, and consecutive
/// layers are separated by a token barrier (compute waits for the previous layer's stores,
/// loads for its compute), while within a layer loads, GEMMs and stores overlap.
///
/// A layer that is refused returns its error before anything is emitted, so the builder stays
/// usable (e.g. to finish the program at the tensor before the refused layer and run that
/// layer on the CPU).
///
/// Layout rule: convolutions and dense layers read activations with BLOCK_IN lanes per
/// element; everything the accelerator writes, and what ACC8 loads read, has BLOCK_OUT lanes.
/// With `BLOCK_IN == BLOCK_OUT` any layer can feed any other; otherwise a convolution cannot
/// read a tensor the accelerator produced (the error says so; a host re-layout is needed).
/// A convolution over few channels that reads a network input first may take it with its
/// window folded into the channels ([`super::fold`]), which the host packs; no other layer of
/// the program can then read that input.
pub struct NetBuilder {
    pub(super) ctx: Ctx,
    tensors: Vec<TensorState>,
    layers: Vec<LayerInfo>,
    names: HashSet<String>,
    fold_inputs: bool,
    depthwise_alu: bool,
}

impl NetBuilder {
    /// A builder for `cfg`; fails when the config's data widths are not int8/int8/int32.
    pub fn new(cfg: &HwConfig) -> Result<Self, BackendError> {
        check_config(cfg)?;
        Ok(NetBuilder {
            ctx: Ctx::new(cfg),
            tensors: Vec::new(),
            layers: Vec::new(),
            names: ["uops".to_string()].into_iter().collect(),
            fold_inputs: true,
            depthwise_alu: true,
        })
    }

    /// Whether a convolution over few channels that is the first reader of a network input
    /// may take it folded ([`super::fold`]; on by default). A folded input can be read by
    /// no other layer of the program (a later reader gets [`BackendError::Layout`]).
    pub fn set_input_folding(&mut self, on: bool) {
        self.fold_inputs = on;
    }

    /// Whether depthwise convolutions run on the ALU at their real MAC count (on by default,
    /// on configs with ALU MUL) or on the GEMM core with diagonal weight tiles (fewer cycles,
    /// BLOCK_IN times the MACs); see [`super::depthwise`].
    pub fn set_depthwise_alu(&mut self, on: bool) {
        self.depthwise_alu = on;
    }

    pub fn config(&self) -> &HwConfig {
        &self.ctx.cfg
    }

    /// Layers compiled so far.
    pub fn layers(&self) -> &[LayerInfo] {
        &self.layers
    }

    /// The logical NCHW shape of `t`.
    pub fn shape(&self, t: Tensor) -> [usize; 4] {
        self.tensors[t.0].shape
    }

    /// The segment and layout of `t`, once a layer wrote or read it.
    pub fn segment(&self, t: Tensor) -> Option<TensorSegment> {
        let st = &self.tensors[t.0];
        st.bound.map(|(_, layout)| TensorSegment {
            name: st.name.clone(),
            layout,
        })
    }

    fn unique(&mut self, name: &str) -> String {
        let base = if name.is_empty() { "t" } else { name };
        let mut s = base.to_string();
        let mut k = 1;
        while self.names.contains(&s) {
            k += 1;
            s = format!("{base}#{k}");
        }
        self.names.insert(s.clone());
        s
    }

    /// Declares a network input of logical shape `[N, C, H, W]` (placed in DRAM when first
    /// used, in the layout its first consumer reads: a convolution over few channels may
    /// take it folded, which the host then packs).
    pub fn input(&mut self, name: &str, shape: [usize; 4]) -> Tensor {
        self.declare_input(name, shape, true)
    }

    /// Declares an input that another program leaves in device memory: like
    /// [`NetBuilder::input`], but never folded (a folded copy would have to go through the
    /// host).
    pub fn device_input(&mut self, name: &str, shape: [usize; 4]) -> Tensor {
        self.declare_input(name, shape, false)
    }

    fn declare_input(&mut self, name: &str, shape: [usize; 4], from_host: bool) -> Tensor {
        let name = self.unique(name);
        self.tensors.push(TensorState {
            name,
            shape,
            bound: None,
            input: true,
            from_host,
        });
        Tensor(self.tensors.len() - 1)
    }

    /// The segment of `t` in the layout with `block` lanes (placing a network input).
    pub(super) fn bind(
        &mut self,
        t: Tensor,
        block: usize,
        reader: &str,
    ) -> Result<Buf, BackendError> {
        let cfg = self.ctx.cfg.clone();
        let st = &self.tensors[t.0];
        match st.bound {
            Some((buf, l)) if l.block == block && l.fold.is_none() => Ok(buf),
            Some((_, l)) if l.fold.is_some() => Err(BackendError::Layout {
                tensor: st.name.clone(),
                reason: format!(
                    "the convolution reading it first takes it with its window folded into the \
                     channels, but '{reader}' reads it unfolded; read it in another program (or \
                     turn input folding off: NetBuilder::set_input_folding)"
                ),
            }),
            Some((_, l)) => Err(BackendError::Layout {
                tensor: st.name.clone(),
                reason: format!(
                    "it is packed with {} channels per element but '{reader}' reads {block} \
                     (BLOCK_IN {} != BLOCK_OUT {}); re-layout it on the host between two programs",
                    l.block,
                    cfg.block_in(),
                    cfg.block_out()
                ),
            }),
            None => {
                let l = ActLayout::new(st.shape, cfg.batch() as usize, block);
                Ok(self.bind_as(t, l))
            }
        }
    }

    /// Whether `t` is a network input from the host that no layer has placed yet (its first
    /// reader chooses its layout).
    fn unplaced_host_input(&self, t: Tensor) -> bool {
        let st = &self.tensors[t.0];
        st.from_host && st.bound.is_none()
    }

    /// Places network input `t` (not placed yet) in `layout`.
    fn bind_as(&mut self, t: Tensor, layout: ActLayout) -> Buf {
        let name = self.tensors[t.0].name.clone();
        let buf = self
            .ctx
            .b
            .buffer(&name, DType::I8, layout.segment_shape(), Role::INPUT, None);
        self.tensors[t.0].bound = Some((buf, layout));
        buf
    }

    /// A new tensor written by a layer (BLOCK_OUT layout).
    pub(super) fn produce(&mut self, name: &str, shape: [usize; 4]) -> (Tensor, Buf) {
        let name = self.unique(name);
        let l = ActLayout::out(&self.ctx.cfg, shape);
        let buf = self
            .ctx
            .b
            .buffer(&name, DType::I8, l.segment_shape(), Role::default(), None);
        self.tensors.push(TensorState {
            name,
            shape,
            bound: Some((buf, l)),
            input: false,
            from_host: false,
        });
        (Tensor(self.tensors.len() - 1), buf)
    }

    /// A constant-rows segment (per-channel tables then splats) of `blocks` channel blocks.
    pub(super) fn consts(&mut self, layer: &str, ep: &Epilogue, blocks: usize) -> Option<Buf> {
        if ep.tables.is_empty() && ep.splats.is_empty() {
            return None;
        }
        let cfg = self.ctx.cfg.clone();
        let mut bytes = Vec::new();
        for t in &ep.tables {
            bytes.extend(pack_acc_rows(&cfg, t, blocks));
        }
        for &s in &ep.splats {
            bytes.extend(super::layout::acc_splat(&cfg, s));
        }
        let rows = ep.tables.len() * blocks + ep.splats.len();
        let shape = vec![rows, cfg.batch() as usize, cfg.block_out() as usize];
        let name = self.unique(&format!("{layer}.consts"));
        Some(
            self.ctx
                .b
                .buffer(&name, DType::I32, shape, Role::default(), Some(bytes)),
        )
    }

    /// Starts a layer: a barrier after the previous one; returns the instruction count so far.
    pub(super) fn begin(&mut self) -> usize {
        if !self.layers.is_empty() {
            self.ctx.barrier();
        }
        self.ctx.stats.insns = 0;
        self.ctx.stats.kernels
    }

    pub(super) fn end(&mut self, mut info: LayerInfo, kernels_before: usize) {
        info.insns = self.ctx.stats.insns;
        info.kernels = self.ctx.stats.kernels - kernels_before;
        self.layers.push(info);
    }

    pub(super) fn check_shape(
        &self,
        layer: &str,
        t: Tensor,
        want: [usize; 4],
    ) -> Result<(), BackendError> {
        let got = self.shape(t);
        if got != want {
            return Err(BackendError::InvalidLayer {
                layer: layer.into(),
                reason: format!("input has shape {got:?}, the layer expects {want:?}"),
            });
        }
        Ok(())
    }

    /// Plans a convolution: its epilogue, geometry and (unless given) the tiling the cost
    /// model chooses.
    pub fn plan_conv(
        cfg: &HwConfig,
        layer: &QConv2d,
        tiling: Option<Tiling>,
    ) -> Result<(Epilogue, ConvGeom, Tiling, CostEstimate), BackendError> {
        check_config(cfg)?;
        let o = layer.weight.shape().first().copied().unwrap_or(0);
        let ep = epilogue::plan(cfg, &layer.name, &layer.requant, Some(&layer.bias), o)?;
        let g = ConvGeom::new(cfg, layer, &ep)?;
        let (t, e) = match tiling {
            None => tiling::choose(cfg, &layer.name, &g)?,
            Some(t) => {
                let e = tiling::estimate(&tiling::Budget::new(cfg), &g, &t).ok_or_else(|| {
                    BackendError::Unsupported {
                        layer: layer.name.clone(),
                        config: cfg.config_string(),
                        reason: format!("tiling {t:?} does not fit the scratchpads"),
                    }
                })?;
                (t, e)
            }
        };
        Ok((ep, g, t, e))
    }

    /// Adds a convolution reading `x`; returns its output.
    pub fn conv(&mut self, layer: &QConv2d, x: Tensor) -> Result<Tensor, BackendError> {
        self.conv_with(layer, x, None, LayerKind::Conv)
    }

    /// [`NetBuilder::conv`] with a given tiling instead of the cost model's choice.
    pub fn conv_tiled(
        &mut self,
        layer: &QConv2d,
        x: Tensor,
        tiling: Tiling,
    ) -> Result<Tensor, BackendError> {
        self.conv_with(layer, x, Some(tiling), LayerKind::Conv)
    }

    fn conv_with(
        &mut self,
        layer: &QConv2d,
        x: Tensor,
        tiling: Option<Tiling>,
        kind: LayerKind,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        self.check_shape(&layer.name, x, layer.input_shape)?;
        if self.depthwise_alu
            && tiling.is_none()
            && kind == LayerKind::Conv
            && depthwise::applies(&cfg, layer)
        {
            return self.depthwise(layer, x);
        }
        let plain = Self::plan_conv(&cfg, layer, tiling);
        // An invalid layer stays refused; one the accelerator cannot run unfolded (a wide
        // horizontal padding, say) may still run folded.
        let folding = self.fold_inputs
            && tiling.is_none()
            && kind == LayerKind::Conv
            && self.unplaced_host_input(x)
            && !matches!(plain, Err(BackendError::InvalidLayer { .. }));
        let best_fold = if folding {
            self.best_fold(layer, plain.as_ref().ok().map(|p| p.3.score))
        } else {
            None
        };
        let folded;
        let (layer, ep, g, t, e, input, fold) = match best_fold {
            Some((f, window, conv, (ep, g, t, e))) => {
                let l = ActLayout::inp(&cfg, layer.input_shape).folded(window);
                let input = self.bind_as(x, l);
                folded = conv;
                (&folded, ep, g, t, e, input, Some(f))
            }
            None => {
                let (ep, g, t, e) = plain?;
                let input = self.bind(x, cfg.block_in() as usize, &layer.name)?;
                (layer, ep, g, t, e, input, None)
            }
        };
        let wl = WeightLayout::new(&cfg, g.o, g.c, g.groups, g.kh, g.kw);
        let wbytes = wl.pack(layer.weight.view(), g.groups);
        let wname = self.unique(&format!("{}.weight", layer.name));
        let wshape = vec![wl.tiles, wl.block_out, wl.block_in];
        let weights = self
            .ctx
            .b
            .buffer(&wname, DType::I8, wshape, Role::default(), Some(wbytes));
        let consts = self.consts(&layer.name, &ep, g.cob);
        let (y, output) = self.produce(&format!("{}.out", layer.name), [g.n, g.o, g.oh, g.ow]);
        let k0 = self.begin();
        let bufs = ConvBufs {
            input,
            output,
            weights,
            // Never read when the epilogue has no constants.
            consts: consts.unwrap_or(weights),
        };
        conv::emit(&mut self.ctx, &g, &t, &ep, &bufs)?;
        let info = LayerInfo {
            name: layer.name.clone(),
            kind,
            tiling: Some(t),
            estimate: Some(e),
            fold,
            tiles: e.tiles as usize,
            insns: 0,
            kernels: 0,
            device_macs: e.gemm_uops * u64::from(cfg.batch() * cfg.block_in() * cfg.block_out()),
        };
        self.end(info, k0);
        Ok(y)
    }

    /// A depthwise convolution on the ALU ([`super::depthwise`]).
    fn depthwise(&mut self, layer: &QConv2d, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        let o = layer.input_shape[1];
        let ep = epilogue::plan(&cfg, &layer.name, &layer.requant, Some(&layer.bias), o)?;
        let g = ConvGeom::new(&cfg, layer, &ep)?;
        let ep = depthwise::with_weight_tables(layer, &ep);
        let t = depthwise::plan(&self.ctx, &layer.name, &g, &ep)?;
        let input = self.bind(x, cfg.block_out() as usize, &layer.name)?;
        let consts = self
            .consts(&layer.name, &ep, g.cob)
            .ok_or_else(|| BackendError::Internal("depthwise weights without a segment".into()))?;
        let (y, out) = self.produce(&format!("{}.out", layer.name), [g.n, g.o, g.oh, g.ow]);
        let k0 = self.begin();
        let tiles = depthwise::emit(&mut self.ctx, &g, &t, &ep, input, out, consts)?;
        let mut info = self.eltwise_info(&layer.name, LayerKind::Conv, tiles);
        info.device_macs = depthwise::device_macs(&cfg, &g);
        self.end(info, k0);
        Ok(y)
    }

    /// The fold of `layer`'s input (see [`super::fold`]) whose convolution the cost model
    /// scores better than `plain` (the unfolded convolution's score, `None` when it cannot
    /// run), with that convolution and its plan; `None` when no fold needs fewer GEMM
    /// micro-ops or none scores better.
    #[allow(clippy::type_complexity)]
    fn best_fold(
        &self,
        layer: &QConv2d,
        plain: Option<f64>,
    ) -> Option<(
        Fold,
        vta_runtime::layout::WindowFold,
        QConv2d,
        (Epilogue, ConvGeom, Tiling, CostEstimate),
    )> {
        let cfg = &self.ctx.cfg;
        let bi = cfg.block_in() as usize;
        let mut best = None;
        let mut best_score = plain.unwrap_or(f64::INFINITY);
        for f in Fold::ALL {
            if fold::taps(layer, Some(f), bi) >= fold::taps(layer, None, bi) {
                continue;
            }
            let Some((window, conv)) = fold::fold(layer, f) else {
                continue;
            };
            // A fold whose convolution does not fit is simply not taken.
            let Ok(p) = Self::plan_conv(cfg, &conv, None) else {
                continue;
            };
            if p.3.score < best_score {
                best_score = p.3.score;
                best = Some((f, window, conv, p));
            }
        }
        best
    }

    /// Adds a dense layer reading `x` of shape `[N, K, 1, 1]` (a batch of N vectors); its
    /// output has shape `[N, M, 1, 1]`. It runs as a 1x1 convolution tiled over the batch.
    pub fn dense(&mut self, layer: &QDense, x: Tensor) -> Result<Tensor, BackendError> {
        let n = self.shape(x)[0];
        let conv = dense_as_conv(layer, n);
        self.conv_with(&conv, x, None, LayerKind::Dense)
    }

    /// Adds a residual add of `a` and `b` (same shape).
    pub fn add(&mut self, layer: &QAdd, a: Tensor, b: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        let shape = self.shape(a);
        self.check_shape(&layer.name, b, shape)?;
        eltwise::check_add(&self.ctx, layer)?;
        let ep = epilogue::plan(&cfg, &layer.name, &layer.requant, None, shape[1])?;
        let bo = cfg.block_out() as usize;
        let ba = self.bind(a, bo, &layer.name)?;
        let bb = self.bind(b, bo, &layer.name)?;
        let consts = self.consts(&layer.name, &ep, shape[1].div_ceil(bo));
        let (y, out) = self.produce(&format!("{}.out", layer.name), shape);
        let k0 = self.begin();
        let tiles = eltwise::emit_add(&mut self.ctx, layer, &ep, shape, ba, bb, out, consts)?;
        self.end(self.eltwise_info(&layer.name, LayerKind::Add, tiles), k0);
        Ok(y)
    }

    pub(super) fn eltwise_info(&self, name: &str, kind: LayerKind, tiles: usize) -> LayerInfo {
        LayerInfo {
            name: name.into(),
            kind,
            tiling: None,
            estimate: None,
            fold: None,
            tiles,
            insns: 0,
            kernels: 0,
            device_macs: 0,
        }
    }

    /// Adds a max pool reading `x`.
    pub fn max_pool(&mut self, layer: &QMaxPool, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        let shape = self.shape(x);
        eltwise::check_max_pool(&self.ctx, layer, shape)?;
        let input = self.bind(x, cfg.block_out() as usize, &layer.name)?;
        let (oh, ow) = layer.output_hw(shape[2], shape[3]);
        let (y, out) = self.produce(&format!("{}.out", layer.name), [shape[0], shape[1], oh, ow]);
        let k0 = self.begin();
        let tiles = eltwise::emit_max_pool(&mut self.ctx, layer, shape, input, out)?;
        self.end(
            self.eltwise_info(&layer.name, LayerKind::MaxPool, tiles),
            k0,
        );
        Ok(y)
    }

    /// Adds a global average pool reading `x`; the output has shape `[N, C, 1, 1]`.
    pub fn global_avg_pool(
        &mut self,
        layer: &QGlobalAvgPool,
        x: Tensor,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        let shape = self.shape(x);
        let ep = epilogue::plan(&cfg, &layer.name, &layer.requant, None, shape[1])?;
        let need = 2 + ep.table_rows(1);
        if need > self.ctx.budget.acc_half {
            return Err(BackendError::Unsupported {
                layer: layer.name.clone(),
                config: cfg.config_string(),
                reason: format!(
                    "its constants and one band need {need} ACC rows but half of ACC holds {}",
                    self.ctx.budget.acc_half
                ),
            });
        }
        let bo = cfg.block_out() as usize;
        let input = self.bind(x, bo, &layer.name)?;
        let consts = self.consts(&layer.name, &ep, shape[1].div_ceil(bo));
        let (y, out) = self.produce(&format!("{}.out", layer.name), [shape[0], shape[1], 1, 1]);
        let k0 = self.begin();
        let tiles =
            eltwise::emit_global_avg_pool(&mut self.ctx, layer, &ep, shape, input, out, consts)?;
        self.end(
            self.eltwise_info(&layer.name, LayerKind::GlobalAvgPool, tiles),
            k0,
        );
        Ok(y)
    }

    /// Adds an elementwise int8 -> int8 function on the ALU's activation table (configs with
    /// `ALU_LUT`; refused otherwise, for the CPU) reading `x`.
    pub fn table_activation(
        &mut self,
        layer: &lut::TableActivation,
        x: Tensor,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        lut::check(&self.ctx, &layer.name)?;
        let shape = self.shape(x);
        let lanes = (cfg.batch() * cfg.block_out()) as usize;
        let input = self.bind(x, cfg.block_out() as usize, &layer.name)?;
        let bytes = layer.segment_bytes(lanes);
        let tname = self.unique(&format!("{}.table", layer.name));
        let table = self.ctx.b.buffer(
            &tname,
            DType::I8,
            vec![bytes.len()],
            Role::default(),
            Some(bytes),
        );
        let (y, out) = self.produce(&format!("{}.out", layer.name), shape);
        let k0 = self.begin();
        let tiles = lut::emit(&mut self.ctx, layer, shape, input, out, table)?;
        self.end(
            self.eltwise_info(&layer.name, LayerKind::TableActivation, tiles),
            k0,
        );
        Ok(y)
    }

    /// Finishes the program; `outputs` become its output segments.
    pub fn finish(self, outputs: &[Tensor]) -> Result<LayerProgram, BackendError> {
        let mut out_segs = Vec::new();
        for &t in outputs {
            let st = &self.tensors[t.0];
            let Some((_, layout)) = st.bound else {
                return Err(BackendError::Layout {
                    tensor: st.name.clone(),
                    reason: "an output must be written by a layer".into(),
                });
            };
            if st.input {
                return Err(BackendError::Layout {
                    tensor: st.name.clone(),
                    reason: "a network input cannot be an output".into(),
                });
            }
            out_segs.push(TensorSegment {
                name: st.name.clone(),
                layout,
            });
        }
        let inputs = self
            .tensors
            .iter()
            .filter(|s| s.input)
            .filter_map(|s| {
                s.bound.map(|(_, layout)| TensorSegment {
                    name: s.name.clone(),
                    layout,
                })
            })
            .collect();
        let mut program = self.ctx.b.finish()?;
        for seg in &mut program.segments {
            if out_segs.iter().any(|o| o.name == seg.name) {
                seg.role.output = true;
            }
        }
        Ok(LayerProgram {
            device: DeviceProgram {
                program,
                inputs,
                outputs: out_segs,
            },
            layers: self.layers,
        })
    }
}
