//! Channel concatenation ([`QConcat`]) and channel slices ([`QSlice`], which Split lowers to)
//! on the accelerator, free where the layout allows it and as copies of whole channel blocks
//! elsewhere, so the tensors stay in device memory between the layers around them.
//!
//! In the packed layout a channel block is `BLOCK_OUT` lanes of every pixel, so a block can
//! only move as a whole: each input of a concatenation must start at a channel that is a
//! multiple of `BLOCK_OUT` (all but the last input hold a multiple of `BLOCK_OUT` channels),
//! and a slice must start at one. Other layers are refused (and run on the CPU).
//!
//! With one sample block (batch 1, or up to BATCH samples) a channel block is one contiguous
//! plane, so a concatenation is its inputs' blocks laid end to end and a slice is a run of its
//! input's blocks:
//! - **Free**: the inputs' producers wrote them straight into the concatenation's output (a
//!   reservation, [`NetBuilder::reserve`]), so the concatenation emits nothing; a slice is a
//!   view of its input's segment.
//! - **Copied** (the fallback: several sample blocks, inputs that come from the host or from
//!   another program, or that were not written in place): every plane of a block is loaded
//!   into ACC (ACC8) and stored to the block it becomes; a concatenation copies only the
//!   inputs that are not in place.
//!
//! The padding lanes of a last partial block carry whatever its producer or the source held
//! there (a slice's padding lanes are the next channels of its input), which every consumer
//! ignores (see [`vta_runtime::layout`]).

use isa::builder::Buf;
use isa::MemType;

use super::emit::{coalesce, Ctx, Dma, Pipeline};
use super::layout::ActLayout;
use super::net::{Home, LayerKind, Movement, NetBuilder, Tensor};
use super::tiling::{splits, MAX_DMA};
use super::BackendError;
use crate::qlayer::{QConcat, QSlice};

/// One copy tile: `kp` channel blocks (or a band of one block's plane) of one sample block.
struct Copy {
    src: Buf,
    sl: ActLayout,
    /// First source block, first destination block.
    sc: usize,
    dc: usize,
    nb: usize,
    kp: usize,
    p0: usize,
    len: usize,
}

/// The copy tiles moving `blocks` channel blocks of `src` (from block `sc`) to `dst` (from
/// block `dc`), both of plane `hw`.
fn copies(ctx: &Ctx, src: Buf, sl: ActLayout, sc: usize, dc: usize, blocks: usize) -> Vec<Copy> {
    let half = ctx.budget.acc_half.min(MAX_DMA);
    let hw = sl.plane();
    let (kp, len) = if hw <= half {
        ((half / hw).clamp(1, blocks), hw)
    } else {
        (1, hw.div_ceil(hw.div_ceil(half)))
    };
    let mut v = Vec::new();
    for nb in 0..sl.n_blocks() {
        for (c0, k) in splits(blocks, kp) {
            for (p0, l) in splits(hw, len) {
                v.push(Copy {
                    src,
                    sl,
                    sc: sc + c0,
                    dc: dc + c0,
                    nb,
                    kp: k,
                    p0,
                    len: l,
                });
            }
        }
    }
    v
}

/// Emits the copy tiles into `dst` (layout `dl`), double-buffered over the halves of ACC.
fn emit_copies(ctx: &mut Ctx, tiles: &[Copy], dst: Buf, dl: ActLayout) -> Result<(), BackendError> {
    let half = ctx.budget.acc_half;
    let mut pipe: Pipeline<()> = Pipeline::new(tiles.len(), 0);
    for t in tiles {
        let at = pipe.acc_half() * half;
        pipe.begin_tile(ctx, ());
        let rows = |mem: MemType, buf: Buf, l: &ActLayout, c0: usize| -> Vec<Dma> {
            (0..t.kp)
                .map(|k| {
                    Dma::row(
                        mem,
                        at + k * t.len,
                        buf,
                        l.elem_index(t.nb, c0 + k, 0, 0) + t.p0,
                        t.len,
                    )
                })
                .collect()
        };
        for d in coalesce(rows(MemType::Acc8, t.src, &t.sl, t.sc)) {
            ctx.load(d)?;
        }
        pipe.results_ready(ctx);
        for d in coalesce(rows(MemType::Out, dst, &dl, t.dc)) {
            ctx.store(d)?;
        }
        pipe.end_tile(ctx);
    }
    pipe.finish()
}

fn unaligned(ctx: &Ctx, layer: &str, what: String) -> BackendError {
    BackendError::Unsupported {
        layer: layer.into(),
        config: ctx.cfg.config_string(),
        reason: format!(
            "{what}, not a multiple of BLOCK_OUT ({}): channel blocks move only as a whole",
            ctx.cfg.block_out()
        ),
    }
}

impl NetBuilder {
    /// Adds a concatenation of `xs` along the channels, into reservation `home` if given
    /// (inputs already written there in place are not copied; `home` must have the output's
    /// shape).
    pub fn concat(
        &mut self,
        layer: &QConcat,
        xs: &[Tensor],
        home: Option<Home>,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let bo = cfg.block_out() as usize;
        let shapes: Vec<[usize; 4]> = xs.iter().map(|&x| self.shape(x)).collect();
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let out = QConcat::output_shape(&refs).map_err(|reason| BackendError::InvalidLayer {
            layer: layer.name.clone(),
            reason,
        })?;
        let oshape: [usize; 4] = out.try_into().expect("4-D");
        let mut at = 0usize;
        for (k, s) in shapes.iter().enumerate() {
            if !at.is_multiple_of(bo) {
                return Err(unaligned(
                    &self.ctx,
                    &layer.name,
                    format!("input {k} starts at channel {at}"),
                ));
            }
            at += s[1];
        }
        let mut srcs = Vec::new();
        for (&x, s) in xs.iter().zip(&shapes) {
            srcs.push((self.bind(x, bo, &layer.name)?, ActLayout::out(&cfg, *s)));
        }
        let ol = ActLayout::out(&cfg, oshape);
        let adopted = match home {
            Some(h) => Some(self.adopt_home(h, &layer.name, oshape).ok_or_else(|| {
                BackendError::Internal(format!(
                    "'{}': its reservation does not have the output's shape {oshape:?}",
                    layer.name
                ))
            })?),
            None => None,
        };
        let (y, dst) = match adopted {
            Some((name, buf, segment, nested)) => {
                (self.push_produced(name, segment, oshape, buf, nested), buf)
            }
            None => self.produce(&format!("{}.out", layer.name), oshape),
        };
        let mut tiles = Vec::new();
        let mut copied = 0;
        let mut dc = 0;
        for (buf, sl) in srcs {
            let in_place = ol.n_blocks() == 1
                && buf == dst.view((ol.elem_index(0, dc, 0, 0) * ol.elem_bytes()) as u64);
            if !in_place {
                tiles.extend(copies(&self.ctx, buf, sl, 0, dc, sl.c_blocks()));
                copied += 1;
            }
            dc += sl.c_blocks();
        }
        let mut info = self.eltwise_info(&layer.name, LayerKind::Concat, tiles.len());
        info.movement = Some(match copied {
            0 => Movement::InPlace,
            _ => Movement::Copied {
                copied,
                inputs: xs.len(),
            },
        });
        if tiles.is_empty() {
            self.free_layer(info);
        } else {
            let k0 = self.begin();
            emit_copies(&mut self.ctx, &tiles, dst, ol)?;
            self.end(info, k0);
        }
        Ok(y)
    }

    /// Adds the channel slice `layer` of `x`: with one sample block a view of `x`'s
    /// segment, else a copy.
    pub fn slice_channels(&mut self, layer: &QSlice, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let bo = cfg.block_out() as usize;
        let shape = self.shape(x);
        if layer.len == 0 || layer.start + layer.len > shape[1] {
            return Err(BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason: format!(
                    "channels {}..{} of {shape:?}",
                    layer.start,
                    layer.start + layer.len
                ),
            });
        }
        if !layer.start.is_multiple_of(bo) {
            return Err(unaligned(
                &self.ctx,
                &layer.name,
                format!("the slice starts at channel {}", layer.start),
            ));
        }
        let oshape = [shape[0], layer.len, shape[2], shape[3]];
        let buf = self.bind(x, bo, &layer.name)?;
        let sl = ActLayout::out(&cfg, shape);
        if sl.n_blocks() == 1 {
            let (_, _, segment) = self.placed(x).expect("bound above");
            let at = sl.elem_index(0, layer.start / bo, 0, 0) * sl.elem_bytes();
            let name = self.unique(&format!("{}.out", layer.name));
            let y = self.push_produced(name, segment, oshape, buf.view(at as u64), true);
            let mut info = self.eltwise_info(&layer.name, LayerKind::Slice, 0);
            info.movement = Some(Movement::InPlace);
            self.free_layer(info);
            return Ok(y);
        }
        let tiles = copies(
            &self.ctx,
            buf,
            sl,
            layer.start / bo,
            0,
            layer.len.div_ceil(bo),
        );
        let (y, dst) = self.produce(&format!("{}.out", layer.name), oshape);
        let k0 = self.begin();
        emit_copies(&mut self.ctx, &tiles, dst, ActLayout::out(&cfg, oshape))?;
        let mut info = self.eltwise_info(&layer.name, LayerKind::Slice, tiles.len());
        info.movement = Some(Movement::Copied {
            copied: 1,
            inputs: 1,
        });
        self.end(info, k0);
        Ok(y)
    }

    /// Copies view `t` into a segment of its own (an output of the program must own its
    /// segment), after everything emitted so far; the copy counts to the layer that wrote it.
    pub(super) fn own_segment(&mut self, t: Tensor) -> Result<(), BackendError> {
        let (src, sl, _) = self
            .placed(t)
            .ok_or_else(|| BackendError::Internal("a view that is not placed".into()))?;
        let tiles = copies(&self.ctx, src, sl, 0, 0, sl.c_blocks());
        let dst = self.detach(t);
        let insns_before = self.ctx.stats.insns;
        self.ctx.barrier();
        emit_copies(&mut self.ctx, &tiles, dst, sl)?;
        let insns = self.ctx.stats.insns - insns_before;
        self.count_copy(t, tiles.len(), insns);
        Ok(())
    }
}
