//! The compiled-model file: writer and reader. A compiled model is an executable artifact: the
//! file holds everything a run needs (the plan with its constants and CPU steps, every device
//! program with the packed weights in its DRAM segments, the layouts of the tensors they read
//! and write, the input and output quantization), so loading runs neither the ONNX importer nor
//! the quantizer.
//!
//! # Format version 11
//!
//! One little-endian binary file (by convention `.vtab`, like program containers; the magic
//! tells them apart). A `str` is a `u32` byte length and that many bytes of UTF-8.
//!
//! | size | field |
//! |---|---|
//! | 8 | magic `VTAMODEL` |
//! | 4 | `u32` format version, `11` |
//! | 8 | `u64` length of the whole file in bytes |
//! | str | config string ([`HwConfig::config_string`]) |
//! | 8 | `u64` ISA hash ([`HwConfig::isa_hash`]) |
//! | str | config JSON ([`HwConfig::to_json`]) |
//! | 8 | `u64` body length `B` |
//! | B | the body: the [postcard](https://postcard.jamesmunns.com/wire-format) 1.x encoding of [`Body`] |
//! | 8 | `u64` FNV-1a checksum of every byte before it |
//!
//! The body is the model's [`Plan`] (values with their facts, quantization and constant
//! tensors; steps with their quantized layers and CPU ops, every field as the Rust types
//! declare it, in declaration order), one [`StoredStep`] per accelerator step (the back end's
//! reason for running it on the CPU, or the index of its launch) and one [`StoredLaunch`] per
//! launch: the steps it runs, its program as an `isa::container` (`VTAPROG`), and the plan
//! value and segment (name, packed layout and byte offset in the segment: internal tensors
//! may be views inside another tensor's segment) of each of its inputs, outputs and internal
//! tensors.
//!
//! A reader checks, in order: the magic, the version (newer versions are refused before
//! anything else is read; older ones — version 1 stored the ONNX model and rebuilt the plan at
//! load, version 2 one program per layer, version 3 had neither the element-wise layers
//! (table activations, affine, binary, leaky ReLU, upsampling) nor their CPU operators,
//! version 4 no folded input layouts, version 5 neither the accumulator clamp of
//! requantizations nor the ReduceMean, Pow and Sqrt CPU operators, version 6 no tensor views
//! (offsets of tensors in segments), version 7 neither lane widths in tensor layouts nor value
//! ranges and saturation bounds of input quantization (sub-byte cores), version 8 neither the
//! narrow saturation range of QuantizeLinear CPU operators (int4/int2 and clipped QDQ imports)
//! nor the I8Offset operator (narrow tensors held centred in the lanes), version 9 neither the
//! DynamicQuantizeLinear nor the RNN/GRU/LSTM operators, version 10 no digit planes in tensor
//! layouts (outputs wider than a core's lanes) — are
//! refused with a request to recompile), the
//! length (a shorter file is truncated, a
//! longer one has trailing bytes), the checksum, the config (valid, its hash matching the stored
//! one and, with a selected config, that config's ISA), the body's encoding, every program
//! container (`isa::container::read_for`) and its segments against their layouts, and the plan
//! itself ([`Plan::validate`], accelerator steps and launches matching the plan,
//! [`Launch::check`]). Every failure is an error
//! naming what is wrong; no input makes it panic.

use isa::container;
use isa::container::frame::{self, FrameError};
use isa::HwConfig;
use serde::{Deserialize, Serialize};

use crate::launch::{Binding, Launch};
use crate::model::{AccelStep, Model, Placement};
use crate::plan::{Plan, StepKind};
use crate::program::DeviceProgram;

/// The first 8 bytes of every compiled-model file.
pub const MAGIC: [u8; 8] = *b"VTAMODEL";

/// The format version this toolkit writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 11;

/// Bytes before the config string: magic, version, length.
const HEAD: usize = frame::HEADER_BYTES;

/// The file's frame: header, length and checksum.
const FRAME: frame::Format = frame::Format {
    magic: MAGIC,
    kind: "compiled model",
    version: FORMAT_VERSION,
    older: "recompile the model with `vta compile`",
    other_file: other_file_hint,
};

/// Why a compiled-model file cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("malformed compiled model: {0}")]
    Malformed(String),
    #[error("the embedded config is invalid: {0}")]
    Config(String),
    #[error(transparent)]
    HashMismatch(#[from] isa::config::IdentityMismatch),
    #[error(
        "the model was compiled for config {model} but the selected config is {selected}; \
         recompile it with `vta compile --config ...` for {selected}, or run it with the config \
         it was compiled for"
    )]
    WrongConfig { model: String, selected: String },
    #[error("launch {launch}: {problem}")]
    Launch { launch: usize, problem: String },
    #[error("the model is too large for the file format ({0})")]
    TooLarge(String),
}

/// The body of the file (see the module documentation).
#[derive(Serialize, Deserialize)]
pub struct Body {
    /// The model file it was compiled from, for messages.
    pub source: String,
    pub plan: Plan,
    pub accel: Vec<StoredStep>,
    pub launches: Vec<StoredLaunch>,
}

/// One accelerator step as stored.
#[derive(Serialize, Deserialize)]
pub struct StoredStep {
    /// Index in [`Plan::steps`].
    pub step: usize,
    pub placement: StoredPlacement,
}

/// How an accelerator step runs, as stored.
#[derive(Serialize, Deserialize)]
pub enum StoredPlacement {
    /// The back end refused the layer: its reason; the step runs on the CPU.
    Refused(String),
    /// Index of the launch that runs it.
    Launch(usize),
}

/// One launch as stored.
#[derive(Serialize, Deserialize)]
pub struct StoredLaunch {
    /// The plan steps it runs.
    pub steps: Vec<usize>,
    pub inputs: Vec<Binding>,
    pub outputs: Vec<Binding>,
    pub internal: Vec<Binding>,
    /// The program as an `isa::container` (`VTAPROG`).
    #[serde(with = "serde_bytes")]
    pub container: Vec<u8>,
}

fn put_str(out: &mut Vec<u8>, s: &str, what: &str) -> Result<(), FileError> {
    let n = u32::try_from(s.len()).map_err(|_| FileError::TooLarge(what.into()))?;
    out.extend(n.to_le_bytes());
    out.extend(s.as_bytes());
    Ok(())
}

/// Writes `m` in the compiled-model format.
pub fn write(m: &Model) -> Result<Vec<u8>, FileError> {
    let accel = m
        .accel
        .iter()
        .map(|a| StoredStep {
            step: a.step,
            placement: match &a.placement {
                Placement::Refused(r) => StoredPlacement::Refused(r.clone()),
                Placement::Launch(l) => StoredPlacement::Launch(*l),
            },
        })
        .collect();
    let launches = m
        .launches
        .iter()
        .enumerate()
        .map(|(l, launch)| {
            let p = &launch.program;
            let bind = |values: &[usize], tensors: &[crate::program::TensorSegment]| {
                values
                    .iter()
                    .zip(tensors)
                    .map(|(&value, t)| Binding {
                        value,
                        tensor: t.clone(),
                    })
                    .collect()
            };
            Ok(StoredLaunch {
                steps: launch.steps.clone(),
                inputs: bind(&launch.inputs, &p.inputs),
                outputs: bind(&launch.outputs, &p.outputs),
                internal: launch.internal.clone(),
                container: container::write(&p.program).map_err(|e| FileError::Launch {
                    launch: l,
                    problem: e.to_string(),
                })?,
            })
        })
        .collect::<Result<Vec<_>, FileError>>()?;
    let body = Body {
        source: m.source.clone(),
        plan: m.plan.clone(),
        accel,
        launches,
    };
    let body = postcard::to_stdvec(&body).map_err(|e| FileError::TooLarge(e.to_string()))?;
    let mut out = frame::start(&FRAME, body.len() + 4096);
    put_str(&mut out, &m.config.config_string(), "config string")?;
    out.extend(m.config.isa_hash().to_le_bytes());
    put_str(&mut out, &m.config.to_json(), "config JSON")?;
    out.extend((body.len() as u64).to_le_bytes());
    out.extend(&body);
    Ok(frame::finish(out))
}

/// A cursor over the checked part of a file.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], FileError> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| {
                FileError::Malformed(format!("{what} at byte {} runs past the end", self.pos))
            })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u64(&mut self, what: &str) -> Result<u64, FileError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn str(&mut self, what: &str) -> Result<String, FileError> {
        let n = u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes"));
        let b = self.take(u64::from(n), what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| FileError::Malformed(format!("{what} is not UTF-8")))
    }
}

/// What a file that is not a compiled model is, when its first bytes tell.
fn other_file_hint(bytes: &[u8]) -> &'static str {
    if container::is_container(bytes) {
        " but it is a program container (VTAPROG): run it with `vta sim`"
    } else if bytes.len() > 4 && bytes[0] == 0x08 {
        " (it looks like an ONNX model: compile it with `vta compile` first)"
    } else {
        ""
    }
}

/// Checks the header, length and checksum; returns the checked bytes (without the checksum).
fn checked(bytes: &[u8]) -> Result<&[u8], FileError> {
    Ok(frame::read(&FRAME, bytes)?)
}

/// Reads a compiled-model file; with `select`, the model runs on that config (which must have
/// the same ISA), else on its own. A model whose tensors would take more than `budget` bytes
/// (see [`crate::budget`]) is refused before anything is allocated.
pub fn read(bytes: &[u8], select: Option<&HwConfig>, budget: u64) -> Result<Model, FileError> {
    let body = checked(bytes)?;
    let mut r = Cursor { b: body, pos: HEAD };
    let config_string = r.str("the config string")?;
    let hash = r.u64("the ISA hash")?;
    let json = r.str("the config JSON")?;
    let cfg = HwConfig::from_json_str(&json, "the embedded config")
        .map_err(|e| FileError::Config(e.to_string()))?;
    cfg.check_identity(&config_string, hash)?;
    let cfg = match select {
        Some(sel) if sel.isa_hash() != cfg.isa_hash() => {
            return Err(FileError::WrongConfig {
                model: cfg.config_string(),
                selected: sel.config_string(),
            })
        }
        Some(sel) => sel.clone(),
        None => cfg,
    };
    let n = r.u64("the body length")?;
    let encoded = r.take(n, "the body")?;
    if r.pos != body.len() {
        return Err(FileError::Malformed(format!(
            "{} bytes between the body and the checksum",
            body.len() - r.pos
        )));
    }
    let body: Body = postcard::from_bytes(encoded)
        .map_err(|e| FileError::Malformed(format!("the body does not decode: {e}")))?;
    body.plan
        .check_budget(budget)
        .map_err(FileError::Malformed)?;
    body.plan.validate().map_err(FileError::Malformed)?;
    let launches = launches(&cfg, &body.plan, body.launches)?;
    let accel = accel_steps(&body.plan, body.accel, &launches)?;
    Ok(Model {
        config: cfg,
        source: body.source,
        plan: body.plan,
        accel,
        launches,
    })
}

/// Why a launch's embedded program container was refused, with advice for a compiled model:
/// the container's own advice for an old version (re-assemble with `vta asm`) does not apply.
fn container_problem(e: container::ContainerError) -> String {
    match e {
        container::ContainerError::Frame(FrameError::OlderVersion {
            found, supported, ..
        }) => {
            format!(
                "its program container has format version {found} (written by an older vta), \
                 this toolkit reads version {supported}: recompile the model with `vta compile`"
            )
        }
        e => e.to_string(),
    }
}

/// The stored launches, checked against the plan and the config.
fn launches(
    cfg: &HwConfig,
    plan: &Plan,
    stored: Vec<StoredLaunch>,
) -> Result<Vec<Launch>, FileError> {
    stored
        .into_iter()
        .enumerate()
        .map(|(l, s)| {
            let bad = |problem: String| FileError::Launch { launch: l, problem };
            let program =
                container::read_for(&s.container, cfg).map_err(|e| bad(container_problem(e)))?;
            let split = |b: Vec<Binding>| -> (Vec<usize>, Vec<_>) {
                b.into_iter().map(|b| (b.value, b.tensor)).unzip()
            };
            let (inputs, in_segs) = split(s.inputs);
            let (outputs, out_segs) = split(s.outputs);
            let launch = Launch {
                steps: s.steps,
                program: DeviceProgram {
                    program,
                    inputs: in_segs,
                    outputs: out_segs,
                },
                inputs,
                outputs,
                internal: s.internal,
            };
            launch.check(plan).map_err(bad)?;
            Ok(launch)
        })
        .collect()
}

/// The stored accelerator steps, checked against the plan and the launches: every
/// accelerator step of the plan once, in order, and each in the launch that lists it.
fn accel_steps(
    plan: &Plan,
    stored: Vec<StoredStep>,
    launches: &[Launch],
) -> Result<Vec<AccelStep>, FileError> {
    let want: Vec<usize> = (0..plan.steps.len())
        .filter(|&k| matches!(plan.steps[k].kind, StepKind::Accel(_)))
        .collect();
    let have: Vec<usize> = stored.iter().map(|s| s.step).collect();
    if want != have {
        return Err(FileError::Malformed(format!(
            "the plan has accelerator steps {want:?}, the file places {have:?}"
        )));
    }
    let mut listed = 0;
    let accel = stored
        .into_iter()
        .map(|s| {
            let placement = match s.placement {
                StoredPlacement::Refused(r) => Placement::Refused(r),
                StoredPlacement::Launch(l) => {
                    if !launches.get(l).is_some_and(|x| x.steps.contains(&s.step)) {
                        return Err(FileError::Malformed(format!(
                            "step {} is placed in launch {l}, which does not run it",
                            s.step
                        )));
                    }
                    listed += 1;
                    Placement::Launch(l)
                }
            };
            Ok(AccelStep {
                step: s.step,
                placement,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let run: usize = launches.iter().map(|l| l.steps.len()).sum();
    if run != listed {
        return Err(FileError::Malformed(format!(
            "the launches run {run} steps, {listed} accelerator steps are placed in them"
        )));
    }
    Ok(accel)
}
