//! A compiled model loaded onto a device: weights, constants, micro-ops and every launch's
//! instruction stream uploaded once into a constants buffer, activations in one arena placed
//! by liveness ([`crate::arena`]). An inference then copies to the device only the tensors the
//! host computed (model inputs, CPU steps' outputs that a launch reads) and copies back only
//! what the host needs (CPU steps' inputs, model outputs): a tensor one launch writes and a
//! later launch reads stays in device memory, in its packed layout.
//!
//! With [`LoadOptions::keep_intermediates`] every tensor gets bytes of its own for the whole
//! inference and the host reads back every step's output after its launch, so
//! [`crate::Model::check`] can compare each one with the integer reference.

use std::collections::HashMap;
use std::time::Instant;

use drivers::{Buffer, Device, RunTimeout, DEVICE_TO_HOST, HOST_TO_DEVICE};
use isa::{Codec, Program};
use ndarray::IxDyn;

use crate::arena::{self, Lifetime};
use crate::layout::ActLayout;
use crate::model::{Error, Model, Place, Placement};
use crate::plan::ValueId;
use crate::reference;
use crate::report::{DeviceMemory, LaunchRun, LayerRun, RunResult};
use crate::tensor::Tensor;

/// Byte pattern the activation arena starts with: a program that reads a tensor nobody wrote
/// (instead of relying on zeroed memory) shows up as a mismatch, not as luck.
const POISON: u8 = 0xA5;

/// How a model is loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Give every tensor its own device bytes and read every step's output back (for
    /// [`Model::check`]), instead of reusing memory by liveness and reading back only what
    /// the host needs.
    pub keep_intermediates: bool,
}

/// Where a resident tensor's bytes are: an arena slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SlotKey {
    /// A plan value in one packed layout.
    Value(ValueId, ActLayout),
    /// A program segment bound to no plan value (a launch's own scratch): launch, segment.
    Scratch(usize, usize),
}

/// One tensor crossing the host-device boundary before or after a launch.
#[derive(Debug, Clone)]
struct Transfer {
    value: ValueId,
    layout: ActLayout,
    /// Byte offset in the arena.
    offset: u64,
}

/// A launch as placed on the device.
#[derive(Debug, Clone)]
struct PlacedLaunch {
    insn_addr: u64,
    insn_count: u32,
    /// Inputs the host writes before the launch (the others are already on the device).
    uploads: Vec<Transfer>,
    /// Values the host reads after the launch.
    downloads: Vec<Transfer>,
}

/// A model loaded onto a device (see the module documentation). Frees its device memory when
/// dropped.
pub struct Resident<'a> {
    model: &'a Model,
    dev: &'a mut dyn Device,
    constants: Option<Buffer>,
    arena: Option<Buffer>,
    launches: Vec<PlacedLaunch>,
    memory: DeviceMemory,
}

impl Drop for Resident<'_> {
    fn drop(&mut self) {
        // Freeing can only fail for a buffer the device does not know, which would be a bug
        // here; there is nobody to report it to in a destructor.
        for b in [self.constants.take(), self.arena.take()]
            .into_iter()
            .flatten()
        {
            let _ = self.dev.free(b);
        }
    }
}

/// The steps of the plan, by launch: which launch (if any) runs each step.
fn launch_of_steps(model: &Model) -> Vec<Option<usize>> {
    let mut of = vec![None; model.plan.steps.len()];
    for a in &model.accel {
        if let Placement::Launch(l) = a.placement {
            of[a.step] = Some(l);
        }
    }
    of
}

impl<'a> Resident<'a> {
    /// Loads `model` onto `dev` (which must implement the model's config).
    pub fn load(
        model: &'a Model,
        dev: &'a mut dyn Device,
        opts: LoadOptions,
    ) -> Result<Resident<'a>, Error> {
        if dev.config().isa_hash() != model.config.isa_hash() {
            return Err(Error::DeviceConfig {
                model: model.config.config_string(),
                device: dev.config().config_string(),
            });
        }
        let layout = Layout::plan(model, opts)?;
        let mut r = Resident {
            model,
            dev,
            constants: None,
            arena: None,
            launches: Vec::new(),
            memory: DeviceMemory::default(),
        };
        let align = Program::dram_align(&model.config);
        let device = |e: drivers::DeviceError| Error::Load(e.to_string());
        if layout.constants_size > 0 {
            r.constants = Some(r.dev.alloc(layout.constants_size, align).map_err(device)?);
        }
        if layout.arena_size > 0 {
            r.arena = Some(r.dev.alloc(layout.arena_size, align).map_err(device)?);
        }
        let base = |b: &Option<Buffer>| b.as_ref().map_or(0, |b| b.phys_addr);
        let (cbase, abase) = (base(&r.constants), base(&r.arena));
        let mut loaded = 0u64;
        for (l, launch) in model.launches.iter().enumerate() {
            let p = &launch.program.program;
            let at = &layout.segments[l];
            let insns = p
                .relocated_segments(&|k| match at[k] {
                    SegmentPlace::Constant(o) => cbase + o,
                    SegmentPlace::Arena(o) => abase + o,
                })
                .map_err(|e| Error::Load(format!("launch {l}: {e}")))?;
            let stream = Codec::new(&model.config)
                .encode_stream(&insns)
                .map_err(|e| Error::Load(format!("launch {l}: {e}")))?;
            let constants = r.constants.as_ref().expect("streams are constants");
            let off = layout.streams[l];
            r.dev
                .copy_to_device(constants, off, &stream)
                .map_err(device)?;
            loaded += stream.len() as u64;
            for (seg, place) in p.segments.iter().zip(at) {
                if let (Some(init), SegmentPlace::Constant(o)) = (&seg.init, place) {
                    r.dev.copy_to_device(constants, *o, init).map_err(device)?;
                    loaded += init.len() as u64;
                }
            }
            r.launches.push(PlacedLaunch {
                insn_addr: constants.phys_addr + off,
                insn_count: u32::try_from(insns.len())
                    .map_err(|_| Error::Load(format!("launch {l}: too many instructions")))?,
                uploads: layout.uploads[l].clone(),
                downloads: layout.downloads[l].clone(),
            });
        }
        if let Some(a) = &r.arena {
            r.dev
                .copy_to_device(a, 0, &vec![POISON; a.size as usize])
                .map_err(device)?;
            r.dev.flush(a, 0, a.size).map_err(device)?;
        }
        if let Some(c) = &r.constants {
            r.dev.flush(c, 0, c.size).map_err(device)?;
        }
        r.memory = DeviceMemory {
            constants: layout.constants_size,
            arena: layout.arena_size,
            loaded,
        };
        Ok(r)
    }

    /// Device memory the loaded model holds.
    pub fn memory(&self) -> DeviceMemory {
        self.memory
    }

    /// Runs one inference: `inputs` in the order of the model's inputs, with their ONNX types
    /// and shapes.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<RunResult, Error> {
        self.run_observed(inputs, &mut |_| {})
    }

    /// [`Resident::run`], telling `step_done` the index of every step it finishes (for
    /// progress: a launch on the RTL simulator can take seconds).
    pub fn run_observed(
        &mut self,
        inputs: &[Tensor],
        step_done: &mut dyn FnMut(usize),
    ) -> Result<RunResult, Error> {
        self.run_until(inputs, &mut |k| {
            step_done(k);
            true
        })
    }

    /// [`Resident::run_observed`] that stops when `step_done` returns `false`, with
    /// [`Error::Interrupted`] naming the last step run (for runs a user may interrupt, such
    /// as the Python package's on Ctrl-C).
    pub fn run_until(
        &mut self,
        inputs: &[Tensor],
        step_done: &mut dyn FnMut(usize) -> bool,
    ) -> Result<RunResult, Error> {
        let model = self.model;
        model.check_inputs(inputs)?;
        let t_all = Instant::now();
        let plan = &model.plan;
        let launch_of = launch_of_steps(model);
        let mut values: Vec<Option<Tensor>> = plan
            .values
            .iter()
            .map(|v| v.constant.as_deref().cloned())
            .collect();
        for (&v, t) in plan.inputs.iter().zip(inputs) {
            values[v] = Some(t.clone());
        }
        let mut layers = Vec::with_capacity(plan.steps.len());
        let mut launches = Vec::new();
        for (k, step) in plan.steps.iter().enumerate() {
            let fail = |message: String| Error::Exec {
                step: k,
                name: step.name.clone(),
                message,
            };
            let mut layer = LayerRun {
                step: k,
                name: step.name.clone(),
                kind: step.kind_name(),
                place: Place::Cpu,
                launch: launch_of[k],
                note: None,
                wall: std::time::Duration::ZERO,
                samples: 1,
            };
            if let Some(l) = launch_of[k] {
                layer.place = Place::Accelerator;
                if model.launches[l].steps[0] == k {
                    launches.push(self.run_launch(l, &mut values).map_err(fail)?);
                }
            } else {
                let t = Instant::now();
                let outs = reference::eval_step(step, &values).map_err(fail)?;
                layer.wall = t.elapsed();
                if outs.len() < step.outputs.len() {
                    return Err(fail("too few outputs".into()));
                }
                for (&o, y) in step.outputs.iter().zip(outs) {
                    if y.fact() != plan.values[o].fact {
                        return Err(fail(format!(
                            "produced {}, the plan expects {}",
                            y.fact(),
                            plan.values[o].fact
                        )));
                    }
                    values[o] = Some(y);
                }
                layer.note = model.refusal(k).map(str::to_string);
            }
            layers.push(layer);
            if !step_done(k) {
                return Err(Error::Interrupted {
                    step: k,
                    name: step.name.clone(),
                    steps: plan.steps.len(),
                });
            }
        }
        let outputs = plan
            .outputs
            .iter()
            .map(|&o| {
                values[o].clone().ok_or_else(|| Error::Exec {
                    step: plan.steps.len(),
                    name: "outputs".into(),
                    message: format!("output %{o} was not read back from the device"),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(RunResult {
            outputs,
            values,
            layers,
            launches,
            wall: t_all.elapsed(),
            backend: self.dev.name().to_string(),
            samples: 1,
            memory: self.memory,
        })
    }

    /// Runs launch `l`: writes the inputs the host holds, runs, reads back what the host
    /// needs into `values`.
    fn run_launch(&mut self, l: usize, values: &mut [Option<Tensor>]) -> Result<LaunchRun, String> {
        let t = Instant::now();
        let plan = &self.model.plan;
        let placed = &self.launches[l];
        let arena = self.arena.as_ref();
        let dev = &mut *self.dev;
        let mut to_device = 0u64;
        for up in &placed.uploads {
            let Some(Tensor::I8(a)) = values[up.value].as_ref() else {
                return Err(format!(
                    "input %{} is not a computed int8 tensor ({})",
                    up.value, plan.values[up.value].fact
                ));
            };
            // Row-major, whatever layout the step that computed it left.
            let a = a.as_standard_layout();
            let a4 = a
                .view()
                .into_shape_with_order(up.layout.shape)
                .map_err(|e| e.to_string())?;
            let bytes = up
                .layout
                .pack(a4)
                .map_err(|e| format!("input '{}': {e}", plan.values[up.value].name))?;
            let arena = arena.ok_or("an upload without an arena")?;
            dev.copy_to_device(arena, up.offset, &bytes)
                .map_err(|e| e.to_string())?;
            dev.flush(arena, up.offset, bytes.len() as u64)
                .map_err(|e| e.to_string())?;
            to_device += bytes.len() as u64;
        }
        let mut report = dev
            .run(placed.insn_addr, placed.insn_count, RunTimeout::default())
            .map_err(|e| e.to_string())?;
        let mut from_device = 0u64;
        for down in &placed.downloads {
            let arena = arena.ok_or("a download without an arena")?;
            let mut bytes = vec![0u8; down.layout.bytes()];
            dev.invalidate(arena, down.offset, bytes.len() as u64)
                .map_err(|e| e.to_string())?;
            dev.copy_from_device(arena, down.offset, &mut bytes)
                .map_err(|e| e.to_string())?;
            from_device += bytes.len() as u64;
            let y = down.layout.unpack(&bytes);
            let shape = plan.values[down.value].fact.shape.clone();
            let y = y
                .into_dyn()
                .into_shape_with_order(IxDyn(&shape))
                .map_err(|e| format!("output shape: {e}"))?;
            values[down.value] = Some(Tensor::I8(y));
        }
        report.extras.push((HOST_TO_DEVICE.into(), to_device));
        report.extras.push((DEVICE_TO_HOST.into(), from_device));
        Ok(LaunchRun {
            launch: l,
            steps: self.model.launches[l].steps.clone(),
            wall: t.elapsed(),
            report,
            samples: 1,
        })
    }
}

/// Where a program segment is placed: at a byte offset of the constants buffer or the arena.
#[derive(Debug, Clone, Copy)]
enum SegmentPlace {
    Constant(u64),
    Arena(u64),
}

/// The device-memory layout of a loaded model, computed before anything is allocated.
struct Layout {
    constants_size: u64,
    arena_size: u64,
    /// Per launch, per program segment.
    segments: Vec<Vec<SegmentPlace>>,
    /// Per launch, the offset of its instruction stream in the constants buffer.
    streams: Vec<u64>,
    uploads: Vec<Vec<Transfer>>,
    downloads: Vec<Vec<Transfer>>,
}

/// Arena slots being collected: one per [`SlotKey`], with the union of its uses' lifetimes.
#[derive(Default)]
struct Slots {
    index: HashMap<SlotKey, usize>,
    lifetimes: Vec<Lifetime>,
}

impl Slots {
    /// The slot of `key`, created with `size` bytes if new, alive at least over
    /// `first..=last`.
    fn use_slot(&mut self, key: SlotKey, size: u64, first: usize, last: usize) -> usize {
        let lifetimes = &mut self.lifetimes;
        let i = *self.index.entry(key).or_insert_with(|| {
            lifetimes.push(Lifetime { size, first, last });
            lifetimes.len() - 1
        });
        let lt = &mut self.lifetimes[i];
        lt.first = lt.first.min(first);
        lt.last = lt.last.max(last);
        i
    }

    fn has(&self, key: SlotKey) -> bool {
        self.index.contains_key(&key)
    }
}

/// A transfer before the slots have offsets: value, layout, slot, byte offset in the slot.
type PendingTransfer = (ValueId, ActLayout, usize, u64);

impl Layout {
    fn plan(model: &Model, opts: LoadOptions) -> Result<Layout, Error> {
        let plan = &model.plan;
        let align = Program::dram_align(&model.config);
        let launch_of = launch_of_steps(model);
        let nsteps = plan.steps.len();
        let mut constants = 0u64;
        let mut take = |size: u64| {
            let at = constants;
            constants = (constants + size).next_multiple_of(align);
            at
        };
        let mut slots = Slots::default();
        let mut segments = Vec::new();
        let mut seg_slots: Vec<Vec<Option<usize>>> = Vec::new();
        let mut streams = Vec::new();
        let mut uploads: Vec<Vec<PendingTransfer>> = Vec::new();
        let mut downloads: Vec<Vec<PendingTransfer>> = Vec::new();
        let readers = |v: ValueId| (0..nsteps).filter(move |&k| plan.steps[k].inputs.contains(&v));
        for (l, launch) in model.launches.iter().enumerate() {
            let p = &launch.program.program;
            let (first, last) = (launch.steps[0], *launch.steps.last().expect("checked"));
            // With every intermediate kept, nothing shares bytes: all slots live throughout.
            let until = |k: usize| if opts.keep_intermediates { nsteps } else { k };
            // Per segment, the tensors it holds: the one owning it and any views inside it.
            let mut binding: HashMap<&str, Vec<(ValueId, ActLayout, u64)>> = HashMap::new();
            for (v, t) in launch.bindings() {
                binding
                    .entry(t.name.as_str())
                    .or_default()
                    .push((v, t.layout, t.offset));
            }
            let mut places = Vec::with_capacity(p.segments.len());
            let mut these = Vec::with_capacity(p.segments.len());
            let (mut ups, mut downs) = (Vec::new(), Vec::new());
            for (k, seg) in p.segments.iter().enumerate() {
                if seg.init.is_some() {
                    places.push(SegmentPlace::Constant(take(seg.size())));
                    these.push(None);
                    continue;
                }
                places.push(SegmentPlace::Arena(0)); // its slot's offset, once placed
                let bound = binding
                    .get(seg.name.as_str())
                    .map_or(&[][..], Vec::as_slice);
                // The slot is the owner's (the tensor filling the segment from byte 0; one the
                // launch reads or leaves on the device if several do), alive while any tensor
                // in the segment is.
                let fills = |&&(_, l, off): &&(ValueId, ActLayout, u64)| {
                    off == 0 && l.bytes() as u64 == seg.size()
                };
                let crosses =
                    |v: ValueId| launch.inputs.contains(&v) || launch.outputs.contains(&v);
                let owner = bound
                    .iter()
                    .filter(fills)
                    .find(|b| crosses(b.0))
                    .or_else(|| bound.iter().find(fills));
                let key = match owner {
                    Some(&(v, layout, _)) => SlotKey::Value(v, layout),
                    None => SlotKey::Scratch(l, k),
                };
                let (mut lo, mut hi) = match owner {
                    Some(_) => (usize::MAX, 0),
                    None => (first, until(last)),
                };
                let mut upload = None;
                let mut seg_downs = Vec::new();
                for &(v, layout, offset) in bound {
                    if launch.inputs.contains(&v) {
                        if !slots.has(key) {
                            upload = Some((v, layout));
                        }
                        let read = readers(v).filter(|k| launch.steps.contains(k)).max();
                        lo = lo.min(first);
                        hi = hi.max(until(read.unwrap_or(last)));
                        continue;
                    }
                    let Some(producer) = launch
                        .steps
                        .iter()
                        .copied()
                        .find(|&k| plan.steps[k].outputs.contains(&v))
                    else {
                        return Err(Error::Load(format!(
                            "launch {l}: value %{v} is not produced by its steps"
                        )));
                    };
                    // The host reads it when a CPU step, a model output or a launch reading
                    // it in another layout needs it.
                    let on_host = opts.keep_intermediates
                        || plan.outputs.contains(&v)
                        || readers(v).any(|k| match launch_of[k] {
                            None => true,
                            Some(m) => model.launches[m]
                                .bindings()
                                .any(|(u, t)| u == v && t.layout != layout),
                        });
                    let device_read = readers(v).filter(|&k| launch_of[k].is_some()).max();
                    let mut end = device_read.unwrap_or(producer).max(producer);
                    if on_host {
                        end = end.max(last);
                        seg_downs.push((v, layout, offset));
                    }
                    lo = lo.min(producer);
                    hi = hi.max(until(end));
                }
                let slot = slots.use_slot(key, seg.size(), lo, hi);
                if let Some((v, layout)) = upload {
                    ups.push((v, layout, slot, 0));
                }
                downs.extend(seg_downs.into_iter().map(|(v, lt, off)| (v, lt, slot, off)));
                these.push(Some(slot));
            }
            streams.push(take(p.insns.len() as u64 * isa::INSN_BYTES as u64));
            segments.push(places);
            seg_slots.push(these);
            uploads.push(ups);
            downloads.push(downs);
        }
        let (offsets, arena_size) = arena::place(&slots.lifetimes, align);
        for (places, these) in segments.iter_mut().zip(&seg_slots) {
            for (p, s) in places.iter_mut().zip(these) {
                if let Some(s) = s {
                    *p = SegmentPlace::Arena(offsets[*s]);
                }
            }
        }
        let placed = |t: Vec<Vec<PendingTransfer>>| -> Vec<Vec<Transfer>> {
            t.into_iter()
                .map(|ts| {
                    ts.into_iter()
                        .map(|(value, layout, s, at)| Transfer {
                            value,
                            layout,
                            offset: offsets[s] + at,
                        })
                        .collect()
                })
                .collect()
        };
        Ok(Layout {
            constants_size: constants,
            arena_size,
            segments,
            streams,
            uploads: placed(uploads),
            downloads: placed(downloads),
        })
    }
}
