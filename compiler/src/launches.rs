//! Grouping the plan's accelerator steps into launches: every maximal run of consecutive
//! accelerator steps the back end accepts becomes one device program ([`NetBuilder`]), its
//! intermediate activations kept packed in device memory. A CPU step, or a step the back end
//! refuses, ends the run (the refused step then runs on the CPU, exactly). A step whose input
//! layout the open program cannot provide (BLOCK_IN != BLOCK_OUT) starts a new launch, which
//! takes that tensor from the host in the layout it reads. A tensor an earlier launch left in
//! device memory is declared as such ([`NetBuilder::device_input`]), so no convolution folds
//! it (which would send it through the host).
//!
//! Each launch binds every plan value it touches to a segment: inputs (computed before it),
//! outputs (used after it: by a CPU step, a later launch or as a model output) and internal
//! values (only `vta run --check` reads them back).
//!
//! Channel concatenations are planned before anything is emitted (`plan_slots`): an input
//! an accelerator layer produces is written by that layer straight into its place in the
//! concatenation's output (reserved in the launch when its first producer is emitted), so the
//! concatenation copies nothing; for an input that is a channel slice, the sliced tensor is
//! placed so that the slice, a view, lands where the input goes. Where the launch breaks
//! between producer and concatenation, or a producer is refused, the concatenation copies
//! what is not in place, and views a launch must output are copied out at its end
//! ([`NetBuilder::finish`]).

use std::collections::{HashMap, HashSet};

use isa::HwConfig;
use vta_runtime::launch::{Binding, Launch};
use vta_runtime::model::{AccelStep, Placement};

use crate::backend::{ActLayout, BackendError, Home, LayerInfo, NetBuilder, Tensor};
use crate::graph::plan::{StepKind, ValueId};
use crate::graph::{Layer, Plan};
use crate::qlayer::{QAdd, QConv2d};

/// How a plan's accelerator steps were grouped.
pub struct Grouped {
    /// One per accelerator step, in step order.
    pub accel: Vec<AccelStep>,
    pub launches: Vec<Launch>,
    /// Per accelerator step: how the back end compiled its layer, or why it refused it.
    pub layers: Vec<(usize, Result<LayerInfo, String>)>,
    /// Values the launches so far leave in device memory (their outputs).
    on_device: HashSet<ValueId>,
}

/// A launch being built.
struct Open {
    net: NetBuilder,
    steps: Vec<usize>,
    /// The builder's tensor of every plan value it has seen.
    tensors: HashMap<ValueId, Tensor>,
    inputs: Vec<ValueId>,
    produced: Vec<ValueId>,
    /// The reservation of each concatenation step's output, once a producer wrote into it.
    homes: HashMap<usize, Home>,
}

/// Where a value is written in place: into the output of concatenation step `concat`, from
/// channel `channel` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    concat: usize,
    channel: usize,
}

/// The inputs of `step` that are tensors (not constants).
fn tensor_inputs(plan: &Plan, step: usize) -> impl Iterator<Item = ValueId> + '_ {
    plan.steps[step]
        .inputs
        .iter()
        .copied()
        .filter(|&v| plan.values[v].constant.is_none())
}

/// Checks that every tensor input of step `k` fits the core's input lanes (a value of
/// unknown range is taken as all of int8).
fn check_input_ranges(cfg: &HwConfig, plan: &Plan, k: usize) -> Result<(), BackendError> {
    let (min, max) = crate::backend::lane_range(cfg.inp_width());
    for v in tensor_inputs(plan, k) {
        let (lo, hi) = plan.values[v].range.unwrap_or((i8::MIN, i8::MAX));
        if i32::from(lo) < min || i32::from(hi) > max {
            return Err(BackendError::Unsupported {
                layer: plan.steps[k].name.clone(),
                config: cfg.config_string(),
                reason: format!(
                    "its input '{}' spans [{lo}, {hi}] and the core's {}-bit input lanes hold \
                     [{min}, {max}]",
                    plan.values[v].name,
                    cfg.inp_width()
                ),
            });
        }
    }
    Ok(())
}

/// A convolution step and the residual add step after it that can run in its epilogue.
#[derive(Clone, Copy)]
struct Fusion<'p> {
    conv: &'p QConv2d,
    add: &'p QAdd,
    /// The convolution's input and the add's other operand.
    input: ValueId,
    shortcut: ValueId,
    conv_is_a: bool,
}

/// The fusion of convolution step `k` with step `k + 1`, when that is an add of the
/// convolution's output, which nothing else reads (nor is it a model output), and another
/// tensor ([`NetBuilder::conv_add`]).
fn fusable_add<'p>(plan: &'p Plan, k: usize, readers: &[Vec<usize>]) -> Option<Fusion<'p>> {
    let StepKind::Accel(Layer::Conv2d(conv)) = &plan.steps[k].kind else {
        return None;
    };
    let StepKind::Accel(Layer::Add(add)) = &plan.steps.get(k + 1)?.kind else {
        return None;
    };
    let (&[y], Some(input)) = (&plan.steps[k].outputs[..], tensor_inputs(plan, k).next()) else {
        return None;
    };
    if readers[y] != [k + 1] || plan.outputs.contains(&y) {
        return None;
    }
    let (shortcut, conv_is_a) = match tensor_inputs(plan, k + 1).collect::<Vec<_>>()[..] {
        [a, b] if a == y && b != y => (b, true),
        [a, b] if b == y && a != y => (a, false),
        _ => return None,
    };
    Some(Fusion {
        conv,
        add,
        input,
        shortcut,
        conv_is_a,
    })
}

/// Plans which values are written straight into the output of a channel concatenation
/// (see the module documentation): concatenations the back end will accept (inputs starting
/// at block boundaries) of one sample block; inputs produced before them by accelerator steps,
/// not model outputs, each in one concatenation only (the first). An input that a channel
/// slice produced places the sliced tensor instead, where its whole channel range fits the
/// output without covering another input.
fn plan_slots(plan: &Plan, cfg: &HwConfig) -> HashMap<ValueId, Slot> {
    let bo = cfg.block_out() as usize;
    if cfg.inp_width() != 8 {
        // The back end refuses concatenations there (they copy through ACC8 loads).
        return HashMap::new();
    }
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (k, s) in plan.steps.iter().enumerate() {
        for &v in &s.outputs {
            producer.insert(v, k);
        }
    }
    let channels = |v: ValueId| plan.values[v].fact.nchw().ok();
    let mut slots: HashMap<ValueId, Slot> = HashMap::new();
    for (c, step) in plan.steps.iter().enumerate() {
        let StepKind::Accel(Layer::Concat(_)) = &step.kind else {
            continue;
        };
        let xs: Vec<ValueId> = tensor_inputs(plan, c).collect();
        let Some(shapes) = xs.iter().map(|&v| channels(v)).collect::<Option<Vec<_>>>() else {
            continue;
        };
        let Some(out) = step.outputs.first().and_then(|&y| channels(y)) else {
            continue;
        };
        if ActLayout::out(cfg, out).n_blocks() != 1 {
            continue;
        }
        // Each input's first channel; all at block boundaries, or the back end copies nothing
        // (it refuses the concatenation).
        let starts: Vec<usize> = shapes
            .iter()
            .scan(0, |at, s| {
                let start = *at;
                *at += s[1];
                Some(start)
            })
            .collect();
        if starts.iter().any(|s| !s.is_multiple_of(bo)) {
            continue;
        }
        let blocks = |start: usize, len: usize| start / bo..(start + len).div_ceil(bo);
        let accel = |k: usize| matches!(plan.steps[k].kind, StepKind::Accel(_));
        let placeable = |v: ValueId, slots: &HashMap<ValueId, Slot>| {
            !slots.contains_key(&v)
                && !plan.outputs.contains(&v)
                && producer.get(&v).is_some_and(|&p| p < c && accel(p))
        };
        // Per input: the slice step's first channel and source, if a slice produced it.
        let sliced: Vec<Option<(usize, ValueId)>> = xs
            .iter()
            .map(|v| {
                let p = *producer.get(v)?;
                match &plan.steps[p].kind {
                    StepKind::Accel(Layer::Slice(l)) => {
                        Some((l.start, tensor_inputs(plan, p).next()?))
                    }
                    _ => None,
                }
            })
            .collect();
        for (i, &v) in xs.iter().enumerate() {
            if xs[..i].contains(&v) {
                continue;
            }
            let Some((offset, src)) = sliced[i] else {
                if placeable(v, &slots) {
                    slots.insert(
                        v,
                        Slot {
                            concat: c,
                            channel: starts[i],
                        },
                    );
                }
                continue;
            };
            // A slice: place its source so that the slice lands at its input's place, if no
            // other input is in the source's way (other slices of it landing right are not).
            let (Some(src_shape), Some(at)) = (channels(src), starts[i].checked_sub(offset)) else {
                continue;
            };
            let region = blocks(at, src_shape[1]);
            let in_the_way = (0..xs.len()).any(|j| {
                let b = blocks(starts[j], shapes[j][1]);
                let lands = matches!(sliced[j], Some((o, u)) if u == src && o + at == starts[j]);
                b.start < region.end && region.start < b.end && !lands
            });
            if at.is_multiple_of(bo)
                && at + src_shape[1] <= out[1]
                && !in_the_way
                && placeable(src, &slots)
            {
                slots.insert(
                    src,
                    Slot {
                        concat: c,
                        channel: at,
                    },
                );
            }
        }
    }
    slots
}

impl Open {
    fn new(cfg: &HwConfig, depthwise_on_gemm: bool) -> Result<Open, BackendError> {
        let mut net = NetBuilder::new(cfg)?;
        net.set_depthwise_alu(!depthwise_on_gemm);
        Ok(Open {
            net,
            steps: Vec::new(),
            tensors: HashMap::new(),
            inputs: Vec::new(),
            produced: Vec::new(),
            homes: HashMap::new(),
        })
    }

    /// The reservation for concatenation step `c`'s output, made now if needed (inside the
    /// reservation of the concatenation it is itself placed in, where there is one); `None`
    /// when the layout does not allow one.
    fn home(&mut self, plan: &Plan, c: usize, slots: &HashMap<ValueId, Slot>) -> Option<Home> {
        if let Some(&h) = self.homes.get(&c) {
            return Some(h);
        }
        let y = *plan.steps[c].outputs.first()?;
        let shape = plan.values[y].fact.nchw().ok()?;
        let within = slots
            .get(&y)
            .and_then(|s| Some((self.home(plan, s.concat, slots)?, s.channel)));
        let h = self
            .net
            .reserve(&plan.steps[c].name, shape, within)
            .or_else(|| self.net.reserve(&plan.steps[c].name, shape, None))?;
        self.homes.insert(c, h);
        Some(h)
    }

    /// Emits step `k`'s layer; on a refusal nothing is emitted and the builder stays usable.
    /// `on_device`: values earlier launches left in device memory.
    fn emit(
        &mut self,
        plan: &Plan,
        k: usize,
        layer: &Layer,
        on_device: &HashSet<ValueId>,
        slots: &HashMap<ValueId, Slot>,
    ) -> Result<(), BackendError> {
        let step = &plan.steps[k];
        check_input_ranges(self.net.config(), plan, k)?;
        let out_home = step
            .outputs
            .first()
            .and_then(|y| slots.get(y))
            .and_then(|s| {
                let h = self.home(plan, s.concat, slots)?;
                Some((h, s.channel))
            });
        self.net.set_output_home(out_home);
        let mut xs = Vec::new();
        let mut declared = Vec::new();
        for v in tensor_inputs(plan, k) {
            let t = match self.tensors.get(&v) {
                Some(&t) => t,
                None => {
                    let t = self.declare(plan, v, &step.name, on_device)?;
                    declared.push((v, t));
                    t
                }
            };
            xs.push(t);
        }
        let missing = || BackendError::InvalidLayer {
            layer: step.name.clone(),
            reason: format!("{} input tensors for a {} layer", xs.len(), layer.kind()),
        };
        let y = match layer {
            Layer::Conv2d(l) => self.net.conv(l, *xs.first().ok_or_else(missing)?),
            Layer::Dense(l) => self.net.dense(l, *xs.first().ok_or_else(missing)?),
            Layer::Add(l) => match xs[..] {
                [a, b] => self.net.add(l, a, b),
                _ => Err(missing()),
            },
            Layer::MaxPool(l) => self.net.max_pool(l, *xs.first().ok_or_else(missing)?),
            Layer::GlobalAvgPool(l) => self
                .net
                .global_avg_pool(l, *xs.first().ok_or_else(missing)?),
            Layer::Table(l) => self.net.table(l, *xs.first().ok_or_else(missing)?),
            Layer::Affine(l) => self.net.affine(l, *xs.first().ok_or_else(missing)?),
            Layer::Binary(l) => match xs[..] {
                [a, b] => self.net.binary(l, a, b),
                _ => Err(missing()),
            },
            Layer::LeakyRelu(l) => self.net.leaky_relu(l, *xs.first().ok_or_else(missing)?),
            Layer::Upsample(l) => self.net.upsample(l, *xs.first().ok_or_else(missing)?),
            Layer::Concat(l) if !xs.is_empty() => {
                let home = self.homes.get(&k).copied();
                self.net.concat(l, &xs, home)
            }
            Layer::Concat(_) => Err(missing()),
            Layer::Slice(l) => self.net.slice_channels(l, *xs.first().ok_or_else(missing)?),
        }?;
        for (v, t) in declared {
            self.tensors.insert(v, t);
            self.inputs.push(v);
        }
        let out = step.outputs[0];
        self.tensors.insert(out, y);
        self.produced.push(out);
        self.steps.push(k);
        Ok(())
    }

    /// Declares plan value `v`, read by step `reader`, as an input of the launch.
    fn declare(
        &mut self,
        plan: &Plan,
        v: ValueId,
        reader: &str,
        on_device: &HashSet<ValueId>,
    ) -> Result<Tensor, BackendError> {
        // A tensor of another rank (a detector's [N, anchors, H, W, box] decoding, say) is
        // no accelerator operand: the step is refused and runs on the CPU.
        let shape = plan.values[v]
            .fact
            .nchw()
            .map_err(|reason| BackendError::Unsupported {
                layer: reader.into(),
                config: self.net.config().config_string(),
                reason: format!("{reason}: accelerator programs take rank 2 to 4 (NCHW)"),
            })?;
        let name = &plan.values[v].name;
        Ok(if on_device.contains(&v) {
            self.net.device_input(name, shape)
        } else {
            self.net.input(name, shape)
        })
    }

    /// Emits convolution step `k` with add step `k + 1` in its epilogue (`fusion`, from
    /// [`fusable_add`]); on a refusal nothing is emitted (inputs it declared stay declared,
    /// for the steps emitted on their own instead).
    fn emit_conv_add(
        &mut self,
        plan: &Plan,
        k: usize,
        fusion: Fusion,
        on_device: &HashSet<ValueId>,
        slots: &HashMap<ValueId, Slot>,
    ) -> Result<(), BackendError> {
        let mut xs = Vec::new();
        for (step, v) in [(k, fusion.input), (k + 1, fusion.shortcut)] {
            let t = match self.tensors.get(&v) {
                Some(&t) => t,
                None => {
                    let t = self.declare(plan, v, &plan.steps[step].name, on_device)?;
                    self.tensors.insert(v, t);
                    self.inputs.push(v);
                    t
                }
            };
            xs.push(t);
        }
        let out = plan.steps[k + 1].outputs[0];
        let home = slots
            .get(&out)
            .and_then(|s| Some((self.home(plan, s.concat, slots)?, s.channel)));
        self.net.set_output_home(home);
        let y = self
            .net
            .conv_add(fusion.conv, xs[0], fusion.add, xs[1], fusion.conv_is_a)?;
        self.tensors.insert(out, y);
        self.produced.push(out);
        self.steps.extend([k, k + 1]);
        Ok(())
    }

    /// Finishes the launch: values used after its last step become outputs.
    fn finish(
        self,
        plan: &Plan,
        used_after: &dyn Fn(ValueId, usize) -> bool,
    ) -> Result<Option<(Launch, Vec<LayerInfo>)>, BackendError> {
        let Some(&last) = self.steps.last() else {
            return Ok(None);
        };
        let (outputs, internal): (Vec<ValueId>, Vec<ValueId>) = self
            .produced
            .iter()
            .partition(|&&v| plan.outputs.contains(&v) || used_after(v, last));
        let out_tensors: Vec<Tensor> = outputs.iter().map(|v| self.tensors[v]).collect();
        let internal: Vec<Binding> = internal
            .into_iter()
            .map(|v| Binding {
                value: v,
                tensor: self
                    .net
                    .segment(self.tensors[&v])
                    .expect("a produced tensor is bound"),
            })
            .collect();
        // The program lists the inputs a layer read, in declaration order: as declared here.
        let inputs: Vec<ValueId> = self
            .inputs
            .into_iter()
            .filter(|v| self.net.segment(self.tensors[v]).is_some())
            .collect();
        let lp = self.net.finish(&out_tensors)?;
        Ok(Some((
            Launch {
                steps: self.steps,
                program: lp.device,
                inputs,
                outputs,
                internal,
            },
            lp.layers,
        )))
    }
}

/// Groups `plan`'s accelerator steps into launches for `cfg`; with `per_layer`, every step
/// gets a launch of its own (per-layer device counters, at the cost of host round trips);
/// with `depthwise_on_gemm`, depthwise convolutions use diagonal GEMM tiles instead of the ALU
/// ([`crate::backend::depthwise`]); with `split_branches`, a step that does not read the
/// output of the step emitted before it starts a new launch (independent branches become
/// launches of their own, for the pool executor to overlap).
/// `stage` hears about every step compiled. Errors other than a refusal (unsupported layer,
/// config or layout) fail the whole compilation, naming the step.
pub fn group(
    plan: &Plan,
    cfg: &HwConfig,
    per_layer: bool,
    depthwise_on_gemm: bool,
    split_branches: bool,
    stage: &mut dyn FnMut(usize),
) -> Result<Grouped, (usize, BackendError)> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); plan.values.len()];
    for (k, s) in plan.steps.iter().enumerate() {
        for &v in &s.inputs {
            readers[v].push(k);
        }
    }
    let used_after = |v: ValueId, last: usize| readers[v].iter().any(|&k| k > last);
    let mut producer: Vec<Option<usize>> = vec![None; plan.values.len()];
    for (k, s) in plan.steps.iter().enumerate() {
        for &v in &s.outputs {
            producer[v] = Some(k);
        }
    }
    // depends[b][a] (a < b): step b reads, through any path, what step a wrote. Steps are in
    // topological order. Only --split-branches asks.
    let depends: Vec<Vec<bool>> = if split_branches {
        let mut d: Vec<Vec<bool>> = Vec::with_capacity(plan.steps.len());
        for (b, s) in plan.steps.iter().enumerate() {
            let mut row = vec![false; b];
            for a in s.inputs.iter().filter_map(|&v| producer[v]) {
                row[a] = true;
                for (r, &via) in row.iter_mut().zip(&d[a]) {
                    *r |= via;
                }
            }
            d.push(row);
        }
        d
    } else {
        Vec::new()
    };
    // A launch per layer outputs every tensor: nothing could stay in place.
    let slots = if per_layer {
        HashMap::new()
    } else {
        plan_slots(plan, cfg)
    };
    let mut g = Grouped {
        accel: Vec::new(),
        launches: Vec::new(),
        layers: Vec::new(),
        on_device: HashSet::new(),
    };
    let new = |k: usize| Open::new(cfg, depthwise_on_gemm).map_err(|e| (k, e));
    let mut open = new(0)?;
    let close = |open: Open, g: &mut Grouped, k: usize| -> Result<(), (usize, BackendError)> {
        if let Some((launch, infos)) = open.finish(plan, &used_after).map_err(|e| (k, e))? {
            let l = g.launches.len();
            g.on_device.extend(launch.outputs.iter().copied());
            for (&step, info) in launch.steps.iter().zip(infos) {
                g.accel.push(AccelStep {
                    step,
                    placement: Placement::Launch(l),
                });
                g.layers.push((step, Ok(info)));
            }
            g.launches.push(launch);
        }
        Ok(())
    };
    let mut refused: Vec<(usize, String)> = Vec::new();
    let mut fused_with_previous = false;
    for (k, step) in plan.steps.iter().enumerate() {
        if std::mem::take(&mut fused_with_previous) {
            continue;
        }
        let StepKind::Accel(layer) = &step.kind else {
            close(std::mem::replace(&mut open, new(k)?), &mut g, k)?;
            continue;
        };
        stage(k);
        // With --split-branches, a launch ends before a step that does not continue its
        // last layer, before the first step of a branch (one of two readers of a tensor of
        // the launch, neither of which depends on the other: a fire module's expands, an
        // inception block's first branch), and before the join of branches (a step reading
        // the outputs of two steps neither of which depends on the other), so that the
        // branches run as launches of their own and may overlap.
        let independent = |a: usize, b: usize| a != b && !depends[a.max(b)][a.min(b)];
        if split_branches
            && (open
                .produced
                .last()
                .is_some_and(|&y| !tensor_inputs(plan, k).any(|v| v == y))
                || tensor_inputs(plan, k).any(|y| {
                    open.produced.contains(&y) && readers[y].iter().any(|&j| independent(j, k))
                })
                || {
                    let from: Vec<usize> =
                        tensor_inputs(plan, k).filter_map(|y| producer[y]).collect();
                    from.iter()
                        .any(|&a| from.iter().any(|&b| independent(a, b)))
                })
        {
            close(std::mem::replace(&mut open, new(k)?), &mut g, k)?;
        }
        // A residual add runs in its convolution's epilogue where it can; where that is
        // refused (before anything is emitted), each runs alone.
        if let Some(f) = fusable_add(plan, k, &readers).filter(|f| open.net.can_fuse_add(f.conv)) {
            match open.emit_conv_add(plan, k, f, &g.on_device, &slots) {
                Err(BackendError::Unsupported { .. } | BackendError::Layout { .. }) => {}
                Err(e) => return Err((k, e)),
                Ok(()) => {
                    stage(k + 1);
                    fused_with_previous = true;
                    if per_layer {
                        close(std::mem::replace(&mut open, new(k)?), &mut g, k)?;
                    }
                    continue;
                }
            }
        }
        let mut result = open.emit(plan, k, layer, &g.on_device, &slots);
        if let Err(BackendError::Layout { .. }) = result {
            if !open.steps.is_empty() {
                // A fresh launch takes the tensor from the host in the layout it reads.
                close(std::mem::replace(&mut open, new(k)?), &mut g, k)?;
                result = open.emit(plan, k, layer, &g.on_device, &slots);
            }
        }
        match result {
            Ok(()) if per_layer => close(std::mem::replace(&mut open, new(k)?), &mut g, k)?,
            Ok(()) => {}
            Err(
                e @ (BackendError::Unsupported { .. }
                | BackendError::UnsupportedConfig { .. }
                | BackendError::Layout { .. }),
            ) => {
                close(std::mem::replace(&mut open, new(k)?), &mut g, k)?;
                refused.push((k, e.to_string()));
            }
            Err(e) => return Err((k, e)),
        }
    }
    close(open, &mut g, plan.steps.len())?;
    for (k, reason) in refused {
        g.accel.push(AccelStep {
            step: k,
            placement: Placement::Refused(reason.clone()),
        });
        g.layers.push((k, Err(reason)));
    }
    g.accel.sort_by_key(|a| a.step);
    g.layers.sort_by_key(|(k, _)| *k);
    Ok(g)
}
