//! A model loaded onto one device of a pool: weights, micro-ops and every launch's
//! instruction stream in one constants buffer, and one arena holding one launch's tensors at
//! a time. Unlike [`crate::resident`], no tensor stays in device memory between launches: a
//! launch's inputs are written from the host before it runs and its outputs read back after,
//! so any launch of any request may run on any device of the pool, in any order the task
//! graph allows. Each request's tensors live on the host, in the executor's per-request
//! value table; that is what lets several inferences be in flight at once.

use std::collections::HashMap;
use std::time::Instant;

use drivers::{Buffer, Device, RunReport, RunTimeout, DEVICE_TO_HOST, HOST_TO_DEVICE};
use isa::{Codec, Program};
use ndarray::IxDyn;

use crate::model::Model;
use crate::plan::ValueId;
use crate::tensor::Tensor;

/// Byte pattern the arena starts with (as in [`crate::resident`]).
const POISON: u8 = 0xA5;

/// Where one launch's tensors are, and its instructions.
struct Placed {
    insn_addr: u64,
    insn_count: u32,
    /// Per program input and output: the byte offset of its segment in the arena.
    inputs: Vec<u64>,
    outputs: Vec<u64>,
}

/// A model on one device (see the module documentation). Frees its memory when dropped.
pub struct Loaded {
    dev: Box<dyn Device>,
    constants: Option<Buffer>,
    arena: Option<Buffer>,
    placed: Vec<Placed>,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        for b in [self.constants.take(), self.arena.take()]
            .into_iter()
            .flatten()
        {
            let _ = self.dev.free(b);
        }
    }
}

impl Loaded {
    /// Loads every launch of `model` onto `dev`.
    pub fn load(model: &Model, mut dev: Box<dyn Device>) -> Result<Loaded, String> {
        if dev.config().isa_hash() != model.config.isa_hash() {
            return Err(format!(
                "the model was compiled for config {} but the device is {}",
                model.config.config_string(),
                dev.config().config_string()
            ));
        }
        let align = Program::dram_align(&model.config);
        // Constants: every initialized segment and every instruction stream, one after the
        // other. Arena: per launch, its other segments from offset 0 (one launch at a time).
        let mut constants = 0u64;
        let mut arena = 0u64;
        let mut places: Vec<Vec<(bool, u64)>> = Vec::new();
        let mut streams = Vec::new();
        for launch in &model.launches {
            let p = &launch.program.program;
            let mut at = 0u64;
            let mut these = Vec::with_capacity(p.segments.len());
            for seg in &p.segments {
                if seg.init.is_some() {
                    these.push((true, constants));
                    constants = (constants + seg.size()).next_multiple_of(align);
                } else {
                    these.push((false, at));
                    at = (at + seg.size()).next_multiple_of(align);
                }
            }
            arena = arena.max(at);
            streams.push(constants);
            constants =
                (constants + p.insns.len() as u64 * isa::INSN_BYTES as u64).next_multiple_of(align);
            places.push(these);
        }
        let c = if constants > 0 {
            Some(dev.alloc(constants, align).map_err(|e| e.to_string())?)
        } else {
            None
        };
        let a = if arena > 0 {
            match dev.alloc(arena, align) {
                Ok(a) => Some(a),
                Err(e) => {
                    if let Some(c) = c {
                        let _ = dev.free(c);
                    }
                    return Err(e.to_string());
                }
            }
        } else {
            None
        };
        // From here on, dropping the half-filled `Loaded` frees both buffers.
        Self::fill(model, dev, c, a, places, streams)
    }

    /// Writes the constants and streams into the allocated buffers.
    fn fill(
        model: &Model,
        dev: Box<dyn Device>,
        constants: Option<Buffer>,
        arena: Option<Buffer>,
        places: Vec<Vec<(bool, u64)>>,
        streams: Vec<u64>,
    ) -> Result<Loaded, String> {
        let mut r = Loaded {
            dev,
            constants,
            arena,
            placed: Vec::new(),
        };
        let base = |b: &Option<Buffer>| b.as_ref().map_or(0, |b| b.phys_addr);
        let (cbase, abase) = (base(&r.constants), base(&r.arena));
        let err = |e: drivers::DeviceError| e.to_string();
        for (l, launch) in model.launches.iter().enumerate() {
            let p = &launch.program.program;
            let at = &places[l];
            let insns = p
                .relocated_segments(&|k| match at[k] {
                    (true, o) => cbase + o,
                    (false, o) => abase + o,
                })
                .map_err(|e| format!("launch {l}: {e}"))?;
            let stream = Codec::new(&model.config)
                .encode_stream(&insns)
                .map_err(|e| format!("launch {l}: {e}"))?;
            let c = r.constants.as_ref().ok_or("no constants buffer")?;
            r.dev.copy_to_device(c, streams[l], &stream).map_err(err)?;
            for (seg, &(constant, o)) in p.segments.iter().zip(at) {
                if let (Some(init), true) = (&seg.init, constant) {
                    r.dev.copy_to_device(c, o, init).map_err(err)?;
                }
            }
            let index: HashMap<&str, usize> = p
                .segments
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_str(), i))
                .collect();
            let offset = |t: &crate::program::TensorSegment| -> Result<u64, String> {
                let &i = index
                    .get(t.name.as_str())
                    .ok_or_else(|| format!("launch {l}: no segment '{}'", t.name))?;
                match at[i] {
                    (false, o) => Ok(o + t.offset),
                    (true, _) => Err(format!("launch {l}: tensor '{}' is a constant", t.name)),
                }
            };
            let prog = &launch.program;
            r.placed.push(Placed {
                insn_addr: c.phys_addr + streams[l],
                insn_count: u32::try_from(insns.len())
                    .map_err(|_| format!("launch {l}: too many instructions"))?,
                inputs: prog.inputs.iter().map(offset).collect::<Result<_, _>>()?,
                outputs: prog.outputs.iter().map(offset).collect::<Result<_, _>>()?,
            });
        }
        if let Some(a) = &r.arena {
            r.dev
                .copy_to_device(a, 0, &vec![POISON; a.size as usize])
                .map_err(err)?;
            r.dev.flush(a, 0, a.size).map_err(err)?;
        }
        if let Some(c) = &r.constants {
            r.dev.flush(c, 0, c.size).map_err(err)?;
        }
        Ok(r)
    }

    /// The device's name ([`Device::name`]).
    pub fn name(&self) -> &str {
        self.dev.name()
    }

    /// Runs launch `l` of `model` with its inputs (one per [`crate::launch::Launch::inputs`]):
    /// writes them, runs, reads every output back.
    pub fn run_launch(
        &mut self,
        model: &Model,
        l: usize,
        inputs: &[&Tensor],
    ) -> Result<(Vec<(ValueId, Tensor)>, RunReport), String> {
        let t = Instant::now();
        let launch = &model.launches[l];
        let prog = &launch.program;
        let placed = &self.placed[l];
        let plan = &model.plan;
        let dev = &mut *self.dev;
        let mut to_device = 0u64;
        if inputs.len() != prog.inputs.len() {
            return Err(format!(
                "launch {l} takes {} inputs, {} given",
                prog.inputs.len(),
                inputs.len()
            ));
        }
        for (((&v, seg), &off), x) in launch
            .inputs
            .iter()
            .zip(&prog.inputs)
            .zip(&placed.inputs)
            .zip(inputs)
        {
            let Tensor::I8(a) = x else {
                return Err(format!(
                    "input %{v} is not a computed int8 tensor ({})",
                    plan.values[v].fact
                ));
            };
            let a = a.as_standard_layout();
            let a4 = a
                .view()
                .into_shape_with_order(seg.layout.shape)
                .map_err(|e| format!("input %{v}: {e}"))?;
            let bytes = seg
                .layout
                .pack(a4)
                .map_err(|e| format!("input '{}': {e}", plan.values[v].name))?;
            let arena = self.arena.as_ref().ok_or("an input without an arena")?;
            dev.copy_to_device(arena, off, &bytes)
                .map_err(|e| e.to_string())?;
            dev.flush(arena, off, bytes.len() as u64)
                .map_err(|e| e.to_string())?;
            to_device += bytes.len() as u64;
        }
        let mut report = dev
            .run(placed.insn_addr, placed.insn_count, RunTimeout::default())
            .map_err(|e| e.to_string())?;
        let mut from_device = 0u64;
        let mut outs = Vec::with_capacity(prog.outputs.len());
        for ((&v, seg), &off) in launch
            .outputs
            .iter()
            .zip(&prog.outputs)
            .zip(&placed.outputs)
        {
            let arena = self.arena.as_ref().ok_or("an output without an arena")?;
            let mut bytes = vec![0u8; seg.layout.bytes()];
            dev.invalidate(arena, off, bytes.len() as u64)
                .map_err(|e| e.to_string())?;
            dev.copy_from_device(arena, off, &mut bytes)
                .map_err(|e| e.to_string())?;
            from_device += bytes.len() as u64;
            let y = seg
                .layout
                .unpack(&bytes)
                .into_dyn()
                .into_shape_with_order(IxDyn(&plan.values[v].fact.shape))
                .map_err(|e| format!("output %{v}: {e}"))?;
            outs.push((v, Tensor::I8(y)));
        }
        report.extras.push((HOST_TO_DEVICE.into(), to_device));
        report.extras.push((DEVICE_TO_HOST.into(), from_device));
        report.wall_time = t.elapsed();
        Ok((outs, report))
    }
}
