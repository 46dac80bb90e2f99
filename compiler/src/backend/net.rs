//! Programs of one or more layers: [`NetBuilder`] places every tensor in DRAM and emits the
//! layers one after another into one instruction stream; [`LayerProgram`] runs the result.
//!
//! A tensor usually gets a segment of its own, but may be a *view* inside another tensor's
//! segment: the inputs of a channel concatenation written by their producers straight into
//! the concatenation's output ([`NetBuilder::reserve`], [`NetBuilder::set_output_home`]), and
//! channel slices that start at a block boundary ([`NetBuilder::slice_channels`]). With one
//! sample block a channel block is one contiguous plane, so such a tensor is a run of whole
//! blocks of the larger one. Views are internal to the program: one that the program must
//! output is copied into a segment of its own at the end ([`NetBuilder::finish`]).

use std::collections::HashSet;
use std::time::Duration;

use drivers::{Device, RunTimeout};
use isa::builder::{Buf, ProgramBuilder};
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
use super::slice;
use super::tiling::{self, ConvGeom, CostEstimate, Tiling};
use super::{check_config, dense_as_conv, BackendError, RunError};
use crate::qlayer::{QAdd, QConv2d, QDense, QGlobalAvgPool, QMaxPool};

/// A DRAM segment for an activation tensor in layout `l`.
fn act_segment(b: &mut ProgramBuilder, name: &str, l: &ActLayout, role: Role) -> Buf {
    let (dtype, shape) = l.segment_shape();
    b.buffer(name, dtype, shape, role, None)
}

/// A residual add fused into the convolution whose output it reads
/// ([`NetBuilder::conv_add`]).
struct Residual<'a> {
    add: &'a QAdd,
    shortcut: Tensor,
    conv_is_a: bool,
}

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
    /// Concatenations and slices: whether they copied data or were free.
    pub movement: Option<Movement>,
    /// A residual add run in the epilogue of the convolution named here
    /// ([`NetBuilder::conv_add`]): its tiles and instructions are the convolution's.
    pub fused_into: Option<String>,
    /// GEMM passes: 1, or the weight digits of a layer whose weights are wider than the
    /// core's weight lanes ([`super::slice`]).
    pub passes: usize,
    /// Output digit planes: 1, or those of outputs wider than the core's output lanes
    /// ([`super::out_digits`]).
    pub out_planes: usize,
}

/// How a channel concatenation or slice got its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// No instructions: every input of the concatenation was written in place by its
    /// producer, or the slice reads a run of blocks of its input's segment.
    InPlace,
    /// `copied` of the `inputs` inputs were copied block by block through ACC (the others
    /// were in place); a slice copies its one input.
    Copied { copied: usize, inputs: usize },
}

impl std::fmt::Display for Movement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Movement::InPlace => write!(f, "in place (no copy)"),
            Movement::Copied { inputs: 1, .. } => write!(f, "(ALU) copied"),
            Movement::Copied { copied, inputs } => {
                write!(f, "(ALU) {copied} of {inputs} inputs copied")
            }
        }
    }
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
    /// Buffer (a segment or a view inside one) and layout, once placed.
    bound: Option<(Buf, ActLayout)>,
    /// The name of the segment holding it: its own, or the one it is a view into.
    segment: String,
    input: bool,
    /// A network input the host packs for this program (so its first reader may fold it).
    from_host: bool,
    /// Whether it lives inside a segment that holds more than it.
    view: bool,
    /// The layer that wrote it (an index into the layers), if any.
    layer: Option<usize>,
}

/// A destination reserved for the output of a channel concatenation, so that its inputs'
/// producers can write straight into it ([`NetBuilder::reserve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Home(usize);

struct HomeState {
    buf: Buf,
    segment: String,
    shape: [usize; 4],
    /// Inside another reservation (rather than a segment of its own).
    nested: bool,
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
    homes: Vec<HomeState>,
    /// Where the next layer writes its output ([`NetBuilder::set_output_home`]).
    output_home: Option<(Home, usize)>,
    /// The identity weight tile, once a layer asks for it ([`NetBuilder::identity`]).
    identity: Option<Buf>,
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
            homes: Vec::new(),
            output_home: None,
            identity: None,
        })
    }

    /// The program's identity weight tile ([`super::layout::identity_tile`]), with which the
    /// GEMM core copies activation rows from INP into ACC ([`Ctx::copy_rows`]); `None` when
    /// the config's INP rows do not hold activations as they are.
    pub(super) fn identity(&mut self) -> Option<Buf> {
        if self.identity.is_none() {
            let tile = super::layout::identity_tile(&self.ctx.cfg)?;
            let cfg = &self.ctx.cfg;
            let (bo, bi) = (cfg.block_out() as usize, cfg.block_in() as usize);
            let (dtype, shape) = WeightLayout::new(cfg, bo, bi, 1, 1, 1).segment_shape();
            let name = self.unique("identity");
            self.identity =
                Some(
                    self.ctx
                        .b
                        .buffer(&name, dtype, shape, Role::default(), Some(tile)),
                );
        }
        self.identity
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

    /// The segment and layout of `t`, once a layer wrote or read it (for a view: the segment
    /// it lives in and its offset there).
    pub fn segment(&self, t: Tensor) -> Option<TensorSegment> {
        let st = &self.tensors[t.0];
        st.bound.map(|(buf, layout)| TensorSegment {
            name: st.segment.clone(),
            layout,
            offset: buf.offset(),
        })
    }

    /// Reserves the output of a channel concatenation of shape `shape` (named `name`), so
    /// that layers can write its inputs in place ([`NetBuilder::set_output_home`]) and
    /// [`NetBuilder::concat`] need not copy them; `within`: inside another reservation, from
    /// that channel on (a concatenation that is itself an input of a concatenation). `None`
    /// when the layout does not allow it: more than one sample block, or `within` not at a
    /// block boundary, of another plane, or too small.
    pub fn reserve(
        &mut self,
        name: &str,
        shape: [usize; 4],
        within: Option<(Home, usize)>,
    ) -> Option<Home> {
        let (buf, segment) = match within {
            Some(slot) => (
                self.slot_buf(slot, shape)?,
                self.homes[slot.0 .0].segment.clone(),
            ),
            None => {
                let l = ActLayout::out(&self.ctx.cfg, shape);
                if l.n_blocks() != 1 {
                    return None;
                }
                let name = self.unique(&format!("{name}.out"));
                let buf = act_segment(&mut self.ctx.b, &name, &l, Role::default());
                (buf, name)
            }
        };
        self.homes.push(HomeState {
            buf,
            segment,
            shape,
            nested: within.is_some(),
        });
        Some(Home(self.homes.len() - 1))
    }

    /// The view of reservation `home` from channel `channel` on for a tensor of `shape`, if
    /// the layout allows it there.
    fn slot_buf(&self, (home, channel): (Home, usize), shape: [usize; 4]) -> Option<Buf> {
        let h = &self.homes[home.0];
        let bo = self.ctx.cfg.block_out() as usize;
        let outer = ActLayout::out(&self.ctx.cfg, h.shape);
        let fits = outer.n_blocks() == 1
            && channel.is_multiple_of(bo)
            && [shape[0], shape[2], shape[3]] == [h.shape[0], h.shape[2], h.shape[3]]
            && channel / bo + shape[1].div_ceil(bo) <= outer.c_blocks()
            && (channel + shape[1] <= h.shape[1]);
        fits.then(|| {
            h.buf
                .view((outer.elem_index(0, channel / bo, 0, 0) * outer.elem_bytes()) as u64)
        })
    }

    /// Makes the next layer write its output into reservation `home` from channel `channel`
    /// on (where the layout allows it; elsewhere, and with `None`, into a segment of its own).
    /// Applies to the next layer only, whether it is compiled or refused.
    pub fn set_output_home(&mut self, slot: Option<(Home, usize)>) {
        self.output_home = slot;
    }

    pub(super) fn unique(&mut self, name: &str) -> String {
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
            segment: name.clone(),
            name,
            shape,
            bound: None,
            input: true,
            from_host,
            view: false,
            layer: None,
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
            Some((_, l)) if l.digits > 1 => Err(BackendError::Layout {
                tensor: st.name.clone(),
                reason: format!(
                    "its values are wider than the core's {}-bit lanes and it is stored as {} \
                     digit planes, which only the host reads; '{reader}' cannot take it",
                    l.bits, l.digits
                ),
            }),
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
                let l = ActLayout::new(st.shape, cfg.batch() as usize, block)
                    .with_bits(cfg.inp_width() as usize);
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
        let buf = act_segment(&mut self.ctx.b, &name, &layout, Role::INPUT);
        self.tensors[t.0].bound = Some((buf, layout));
        buf
    }

    /// A new tensor written by the layer being added (BLOCK_OUT layout): in the reservation
    /// [`NetBuilder::set_output_home`] gave, where the layout allows it, else in a segment of
    /// its own.
    pub(super) fn produce(&mut self, name: &str, shape: [usize; 4]) -> (Tensor, Buf) {
        let name = self.unique(name);
        let l = ActLayout::out(&self.ctx.cfg, shape);
        let slot = self.output_home.take();
        match slot.and_then(|s| Some((self.slot_buf(s, shape)?, s.0))) {
            Some((buf, home)) => {
                let segment = self.homes[home.0].segment.clone();
                (self.push_produced(name, segment, shape, buf, true), buf)
            }
            None => {
                let buf = act_segment(&mut self.ctx.b, &name, &l, Role::default());
                (
                    self.push_produced(name.clone(), name, shape, buf, false),
                    buf,
                )
            }
        }
    }

    /// Adds a tensor of `shape` written by the layer being added (or the layers before it)
    /// at `buf` of `segment`; `view`: that segment holds more than it.
    pub(super) fn push_produced(
        &mut self,
        name: String,
        segment: String,
        shape: [usize; 4],
        buf: Buf,
        view: bool,
    ) -> Tensor {
        self.output_home = None;
        let layout = ActLayout::out(&self.ctx.cfg, shape);
        self.tensors.push(TensorState {
            name,
            shape,
            bound: Some((buf, layout)),
            segment,
            input: false,
            from_host: false,
            view,
            layer: Some(self.layers.len()),
        });
        Tensor(self.tensors.len() - 1)
    }

    /// Reservation `home` as the output of the concatenation being added, if its shape is
    /// `shape`: its name, buffer, segment and whether it is a view.
    pub(super) fn adopt_home(
        &mut self,
        home: Home,
        name: &str,
        shape: [usize; 4],
    ) -> Option<(String, Buf, String, bool)> {
        let h = &self.homes[home.0];
        if h.shape != shape {
            return None;
        }
        let (buf, segment, nested) = (h.buf, h.segment.clone(), h.nested);
        // A reservation of its own already took the output's name for its segment.
        let name = if nested {
            self.unique(name)
        } else {
            segment.clone()
        };
        Some((name, buf, segment, nested))
    }

    /// The buffer, layout and segment name of tensor `t`, once placed.
    pub(super) fn placed(&self, t: Tensor) -> Option<(Buf, ActLayout, String)> {
        let st = &self.tensors[t.0];
        st.bound.map(|(b, l)| (b, l, st.segment.clone()))
    }

    /// Gives view `t` a segment of its own (named after it) and returns it; the caller
    /// copies the data there.
    pub(super) fn detach(&mut self, t: Tensor) -> Buf {
        let st = &self.tensors[t.0];
        let (name, layout) = (st.name.clone(), ActLayout::out(&self.ctx.cfg, st.shape));
        let buf = act_segment(&mut self.ctx.b, &name, &layout, Role::default());
        let st = &mut self.tensors[t.0];
        st.bound = Some((buf, layout));
        st.segment = name;
        st.view = false;
        buf
    }

    /// Counts a copy of `t` (`tiles` tiles, `insns` instructions) to the layer that wrote it.
    pub(super) fn count_copy(&mut self, t: Tensor, tiles: usize, insns: usize) {
        if let Some(info) = self.tensors[t.0].layer.and_then(|l| self.layers.get_mut(l)) {
            info.tiles += tiles;
            info.insns += insns;
            if info.movement == Some(Movement::InPlace) {
                info.movement = Some(Movement::Copied {
                    copied: 1,
                    inputs: 1,
                });
            }
        }
    }

    /// Records a layer that emitted no instructions (no barrier before it either).
    pub(super) fn free_layer(&mut self, info: LayerInfo) {
        self.layers.push(info);
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
        // Outputs wider than the lanes are stored as digit planes (`ConvGeom::out_planes`).
        let ep = epilogue::plan_wide(cfg, &layer.name, &layer.requant, Some(&layer.bias), o)?;
        let g = ConvGeom::new(cfg, layer, &ep)?;
        let (t, e) = match tiling {
            None => tiling::choose(cfg, &layer.name, &g)?,
            Some(t) => {
                let e = tiling::estimate(&tiling::Budget::new(cfg), &g, &t).ok_or_else(|| {
                    BackendError::Unsupported {
                        layer: layer.name.clone(),
                        config: cfg.config_string(),
                        reason: if g.passes > 1 && t.resident {
                            format!(
                                "tiling {t:?} is resident, and the layer runs bit-sliced ({} \
                                 passes over its weights), which takes no resident tiling",
                                g.passes
                            )
                        } else {
                            format!("tiling {t:?} does not fit the scratchpads")
                        },
                    }
                })?;
                (t, e)
            }
        };
        Ok((ep, g, t, e))
    }

    /// Adds a convolution reading `x`; returns its output.
    pub fn conv(&mut self, layer: &QConv2d, x: Tensor) -> Result<Tensor, BackendError> {
        self.conv_with(layer, x, None, LayerKind::Conv, None)
    }

    /// Whether [`NetBuilder::conv_add`] can take convolution `layer`: any but a depthwise
    /// convolution on the ALU, on a core with 8-bit activations (the shortcut comes through
    /// an ACC8 load). (A fused convolution never folds its input.)
    pub fn can_fuse_add(&self, layer: &QConv2d) -> bool {
        self.ctx.cfg.inp_width() == 8
            && !(self.depthwise_alu && depthwise::applies(&self.ctx.cfg, layer))
    }

    /// Adds convolution `layer` reading `x` and residual add `add` of its output and
    /// `shortcut` as one layer: the add runs in the convolution's epilogue, over the
    /// shortcut loaded into ACC beside each tile's accumulators
    /// ([`super::epilogue::with_residual`]); the convolution's output is never stored.
    /// `conv_is_a`: the convolution's output is the add's first operand. Returns the add's
    /// output; records two layers, the add's [`LayerInfo::fused_into`] the convolution.
    /// Refused (nothing emitted) like either layer would be, or when the tiles cannot hold
    /// the shortcut too ([`NetBuilder::can_fuse_add`] tells the other cases).
    pub fn conv_add(
        &mut self,
        layer: &QConv2d,
        x: Tensor,
        add: &QAdd,
        shortcut: Tensor,
        conv_is_a: bool,
    ) -> Result<Tensor, BackendError> {
        if !self.can_fuse_add(layer) {
            return Err(BackendError::Unsupported {
                layer: add.name.clone(),
                config: self.ctx.cfg.config_string(),
                reason: format!(
                    "the add cannot run in the epilogue of '{}', a depthwise convolution on \
                     the ALU",
                    layer.name
                ),
            });
        }
        let y = self.conv_with(
            layer,
            x,
            None,
            LayerKind::Conv,
            Some(Residual {
                add,
                shortcut,
                conv_is_a,
            }),
        )?;
        let mut info = self.eltwise_info(&add.name, LayerKind::Add, 0);
        info.fused_into = Some(layer.name.clone());
        self.layers.push(info);
        Ok(y)
    }

    /// [`NetBuilder::conv`] with a given tiling instead of the cost model's choice.
    pub fn conv_tiled(
        &mut self,
        layer: &QConv2d,
        x: Tensor,
        tiling: Tiling,
    ) -> Result<Tensor, BackendError> {
        self.conv_with(layer, x, Some(tiling), LayerKind::Conv, None)
    }

    fn conv_with(
        &mut self,
        layer: &QConv2d,
        x: Tensor,
        tiling: Option<Tiling>,
        kind: LayerKind,
        residual: Option<Residual>,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        self.check_shape(&layer.name, x, layer.input_shape)?;
        if self.depthwise_alu
            && tiling.is_none()
            && kind == LayerKind::Conv
            && residual.is_none()
            && depthwise::applies(&cfg, layer)
        {
            return self.depthwise(layer, x);
        }
        let plain = match &residual {
            None => Self::plan_conv(&cfg, layer, tiling),
            Some(r) => self.plan_conv_add(layer, r),
        };
        // An invalid layer stays refused; one the accelerator cannot run unfolded (a wide
        // horizontal padding, say) may still run folded.
        let folding = self.fold_inputs
            && tiling.is_none()
            && residual.is_none()
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
        let wbytes = slice::pack(&wl, layer.weight.view(), g.groups, g.passes);
        let wname = self.unique(&format!("{}.weight", layer.name));
        let (wtype, mut wshape) = wl.segment_shape();
        // The digits of a bit-sliced layer one after another.
        wshape[0] *= g.passes;
        let weights = self
            .ctx
            .b
            .buffer(&wname, wtype, wshape, Role::default(), Some(wbytes));
        let consts = self.consts(&layer.name, &ep, g.cob);
        let shortcut = match &residual {
            Some(r) => Some(self.bind(r.shortcut, cfg.block_out() as usize, &r.add.name)?),
            None => None,
        };
        let out_name = residual.as_ref().map_or(&layer.name, |r| &r.add.name);
        let shape = [g.n, g.o, g.oh, g.ow];
        let (y, output) = if g.out_planes > 1 {
            // Digit planes (outputs wider than the lanes): a segment of their own, for the
            // host.
            let name = self.unique(&format!("{out_name}.out"));
            let l = ActLayout::out(&cfg, shape).in_digits();
            let buf = act_segment(&mut self.ctx.b, &name, &l, Role::default());
            let y = self.push_produced(name.clone(), name, shape, buf, false);
            self.tensors[y.0].bound = Some((buf, l));
            (y, buf)
        } else {
            self.produce(&format!("{out_name}.out"), shape)
        };
        let k0 = self.begin();
        let bufs = ConvBufs {
            input,
            output,
            weights,
            // Never read when the epilogue has no constants.
            consts: consts.unwrap_or(weights),
            shortcut,
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
            movement: None,
            fused_into: None,
            passes: g.passes,
            out_planes: g.out_planes,
        };
        self.end(info, k0);
        Ok(y)
    }

    /// Plans convolution `layer` with residual add `r` in its epilogue: checks the add, and
    /// chooses the tiling for the fused epilogue (its tiles hold the shortcut too).
    fn plan_conv_add(
        &self,
        layer: &QConv2d,
        r: &Residual,
    ) -> Result<(Epilogue, ConvGeom, Tiling, CostEstimate), BackendError> {
        let cfg = &self.ctx.cfg;
        let shape = layer.output_shape();
        self.check_shape(&r.add.name, r.shortcut, shape)?;
        eltwise::check_add(&self.ctx, r.add)?;
        let o = shape[1];
        let conv_ep = epilogue::plan(cfg, &layer.name, &layer.requant, Some(&layer.bias), o)?;
        let add_ep = epilogue::plan(cfg, &r.add.name, &r.add.requant, None, o)?;
        let ep = epilogue::with_residual(cfg, r.add, conv_ep, &add_ep, r.conv_is_a)?;
        let g = ConvGeom::new(cfg, layer, &ep)?;
        let (t, e) = tiling::choose(cfg, &layer.name, &g)?;
        Ok((ep, g, t, e))
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
        self.conv_with(&conv, x, None, LayerKind::Dense, None)
    }

    /// Adds a residual add of `a` and `b` (same shape).
    pub fn add(&mut self, layer: &QAdd, a: Tensor, b: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
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
            movement: None,
            fused_into: None,
            passes: 1,
            out_planes: 1,
        }
    }

    /// Adds a max pool reading `x`.
    pub fn max_pool(&mut self, layer: &QMaxPool, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let shape = self.shape(x);
        eltwise::check_max_pool(&self.ctx, layer, shape)?;
        let input = self.bind(x, cfg.block_out() as usize, &layer.name)?;
        let (oh, ow) = layer.output_hw(shape[2], shape[3]);
        let (y, out) = self.produce(&format!("{}.out", layer.name), [shape[0], shape[1], oh, ow]);
        let k0 = self.begin();
        let identity = self.identity();
        let tiles = eltwise::emit_max_pool(&mut self.ctx, layer, shape, input, out, identity)?;
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
        super::check_acc8_reads(&cfg, &layer.name)?;
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
        super::check_acc8_reads(&cfg, &layer.name)?;
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

    /// Finishes the program; `outputs` become its output segments. An output that is a view
    /// is copied into a segment of its own first (the copy counts to the layer that wrote it).
    pub fn finish(mut self, outputs: &[Tensor]) -> Result<LayerProgram, BackendError> {
        let mut out_segs = Vec::new();
        for &t in outputs {
            if self.tensors[t.0].view {
                self.own_segment(t)?;
            }
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
            out_segs.push(TensorSegment::new(st.segment.clone(), layout));
        }
        let inputs = self
            .tensors
            .iter()
            .filter(|s| s.input)
            .filter_map(|s| {
                s.bound
                    .map(|(_, layout)| TensorSegment::new(s.segment.clone(), layout))
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
