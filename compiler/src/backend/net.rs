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
use super::eltwise;
use super::emit::Ctx;
use super::epilogue::{self, Epilogue};
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
    /// Output tiles.
    pub tiles: usize,
    /// Instructions emitted for the layer (without the synchronization between layers).
    pub insns: usize,
    /// Distinct micro-op kernels the layer registered (kernels shared with earlier layers
    /// are not counted again).
    pub kernels: usize,
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
pub struct NetBuilder {
    pub(super) ctx: Ctx,
    tensors: Vec<TensorState>,
    layers: Vec<LayerInfo>,
    names: HashSet<String>,
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
        })
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
    /// used, in the layout its first consumer reads).
    pub fn input(&mut self, name: &str, shape: [usize; 4]) -> Tensor {
        let name = self.unique(name);
        self.tensors.push(TensorState {
            name,
            shape,
            bound: None,
            input: true,
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
            Some((buf, l)) if l.block == block => Ok(buf),
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
                let name = st.name.clone();
                let buf = self
                    .ctx
                    .b
                    .buffer(&name, DType::I8, l.segment_shape(), Role::INPUT, None);
                self.tensors[t.0].bound = Some((buf, l));
                Ok(buf)
            }
        }
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
        let (ep, g, t, e) = Self::plan_conv(&cfg, layer, tiling)?;
        let input = self.bind(x, cfg.block_in() as usize, &layer.name)?;
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
            tiles: e.tiles as usize,
            insns: 0,
            kernels: 0,
        };
        self.end(info, k0);
        Ok(y)
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
            tiles,
            insns: 0,
            kernels: 0,
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
