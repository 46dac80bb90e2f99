//! The compiled-model file: writer and reader (the format is specified in the module
//! documentation of [`crate::runtime`]).

use std::time::Duration;

use isa::container::{self, fnv1a};
use isa::HwConfig;

use super::{AccelStep, Calibration, Error, Model, Placement};
use crate::backend::{
    ActLayout, LayerInfo, LayerKind, LayerProgram, LoopOrder, TensorSegment, Tiling,
};
use crate::graph::{FrontendOptions, RequantFidelity};

/// The first 8 bytes of every compiled-model file.
pub const MAGIC: [u8; 8] = *b"VTAMODEL";

/// The format version this toolkit writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Why a compiled-model file cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(
        "not a compiled model (the file does not start with the magic bytes \"VTAMODEL\"){hint}"
    )]
    NotModel { hint: &'static str },
    #[error("format version {found} is newer than this toolkit's {supported}; upgrade vta")]
    NewerVersion { found: u32, supported: u32 },
    #[error(
        "format version {0} is not a valid version (versions start at 1); the file is corrupted"
    )]
    BadVersion(u32),
    #[error(
        "truncated at byte {offset} while reading {what}; the file is incomplete or corrupted"
    )]
    Truncated { offset: usize, what: String },
    #[error(
        "checksum mismatch (stored {stored:016x}, computed {computed:016x}): the file is corrupted"
    )]
    Checksum { stored: u64, computed: u64 },
    #[error("malformed compiled model at byte {offset}: {problem}")]
    Malformed { offset: usize, problem: String },
    #[error("the embedded config is invalid: {0}")]
    Config(String),
    #[error(
        "the stored ISA hash {stored:016x} does not match the embedded config {config} (hash \
         {hash:016x}); the file is inconsistent"
    )]
    HashMismatch {
        stored: u64,
        config: String,
        hash: u64,
    },
    #[error(
        "the model was compiled for config {model} but the selected config is {selected}; \
         recompile it with `vta compile --config ...` for {selected}, or run it with the config \
         it was compiled for"
    )]
    WrongConfig { model: String, selected: String },
    #[error("the program of step {step} ({name}): {source}")]
    Program {
        step: usize,
        name: String,
        source: container::ContainerError,
    },
    #[error(
        "the stored programs do not match the plan rebuilt from the stored ONNX model ({0}); the \
         file was written by a different version of the compiler: recompile the model"
    )]
    Rebuild(String),
    #[error("the model is too large for the file format ({0})")]
    TooLarge(&'static str),
}

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: usize, what: &'static str) -> Result<(), BundleError> {
        let v = u32::try_from(v).map_err(|_| BundleError::TooLarge(what))?;
        self.0.extend(v.to_le_bytes());
        Ok(())
    }
    fn u64(&mut self, v: u64) {
        self.0.extend(v.to_le_bytes());
    }
    fn str(&mut self, s: &str, what: &'static str) -> Result<(), BundleError> {
        self.u32(s.len(), what)?;
        self.0.extend(s.as_bytes());
        Ok(())
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend(b);
    }
}

fn kind_code(k: LayerKind) -> u8 {
    match k {
        LayerKind::Conv => 0,
        LayerKind::Dense => 1,
        LayerKind::Add => 2,
        LayerKind::MaxPool => 3,
        LayerKind::GlobalAvgPool => 4,
    }
}

fn kind_of(c: u8) -> Option<LayerKind> {
    Some(match c {
        0 => LayerKind::Conv,
        1 => LayerKind::Dense,
        2 => LayerKind::Add,
        3 => LayerKind::MaxPool,
        4 => LayerKind::GlobalAvgPool,
        _ => return None,
    })
}

fn put_segment(w: &mut W, s: &TensorSegment) -> Result<(), BundleError> {
    w.str(&s.name, "segment name")?;
    for d in s.layout.shape {
        w.u64(d as u64);
    }
    w.u32(s.layout.batch, "layout batch")?;
    w.u32(s.layout.block, "layout block")
}

fn put_program(w: &mut W, lp: &LayerProgram) -> Result<(), BundleError> {
    w.u32(lp.inputs.len(), "program inputs")?;
    for s in &lp.inputs {
        put_segment(w, s)?;
    }
    w.u32(lp.outputs.len(), "program outputs")?;
    for s in &lp.outputs {
        put_segment(w, s)?;
    }
    w.u32(lp.layers.len(), "layer infos")?;
    for l in &lp.layers {
        w.str(&l.name, "layer name")?;
        w.u8(kind_code(l.kind));
        match &l.tiling {
            Some(t) => {
                w.u8(1);
                for v in [t.tn, t.th, t.tw, t.tco, t.tci] {
                    w.u32(v, "tiling")?;
                }
                w.u8(match t.order {
                    LoopOrder::CoOuter => 0,
                    LoopOrder::SpatialOuter => 1,
                });
                w.u8(u8::from(t.col_skip));
            }
            None => w.u8(0),
        }
        w.u64(l.tiles as u64);
        w.u64(l.insns as u64);
        w.u64(l.kernels as u64);
    }
    let bytes = container::write(&lp.program).map_err(|_| BundleError::TooLarge("program"))?;
    w.bytes(&bytes);
    Ok(())
}

/// Writes `m` in the compiled-model format.
pub(super) fn write(m: &Model) -> Result<Vec<u8>, BundleError> {
    let mut w = W(Vec::with_capacity(m.onnx.len() + (1 << 20)));
    w.0.extend(MAGIC);
    w.u32(FORMAT_VERSION as usize, "version")?;
    w.str(&m.config.config_string(), "config string")?;
    w.u64(m.config.isa_hash());
    w.str(&m.config.to_json(), "config JSON")?;
    w.str(&m.source, "source name")?;
    w.u8(match m.options.fidelity {
        RequantFidelity::WithinOneLsb => 0,
        RequantFidelity::BitExact => 1,
    });
    w.u8(u8::from(m.options.offload));
    w.bytes(&m.onnx);
    match &m.calibration {
        Some(c) => {
            w.u8(1);
            w.u32(c.samples, "calibration samples")?;
            w.u32(c.ranges.len(), "calibration tensors")?;
            for (name, v) in &c.ranges {
                w.str(name, "tensor name")?;
                w.0.extend(v.to_bits().to_le_bytes());
            }
        }
        None => w.u8(0),
    }
    w.u32(m.plan.steps.len(), "plan steps")?;
    w.u32(m.accel.len(), "accelerator steps")?;
    for a in &m.accel {
        w.u32(a.step, "step index")?;
        w.str(&a.name, "step name")?;
        w.str(&a.kind, "layer kind")?;
        w.u64(a.fingerprint);
        match &a.placement {
            Placement::Refused(reason) => {
                w.u8(0);
                w.str(reason, "reason")?;
            }
            Placement::Program(lp) => {
                w.u8(1);
                put_program(&mut w, lp)?;
            }
        }
    }
    let sum = fnv1a(&w.0);
    w.u64(sum);
    Ok(w.0)
}

/// A cursor over the checked body of a file.
struct R<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> R<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], BundleError> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.b.len() - self.pos);
        let Some(n) = n else {
            return Err(BundleError::Truncated {
                offset: self.pos,
                what: what.to_string(),
            });
        };
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, BundleError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, BundleError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }
    fn usize32(&mut self, what: &str) -> Result<usize, BundleError> {
        Ok(self.u32(what)? as usize)
    }
    fn u64(&mut self, what: &str) -> Result<u64, BundleError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }
    fn str(&mut self, what: &str) -> Result<String, BundleError> {
        let n = self.u32(what)?;
        let at = self.pos;
        let b = self.take(u64::from(n), what)?;
        String::from_utf8(b.to_vec()).map_err(|_| BundleError::Malformed {
            offset: at,
            problem: format!("{what} is not UTF-8"),
        })
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], BundleError> {
        let n = self.u64(what)?;
        self.take(n, what)
    }
    fn flag(&mut self, what: &str) -> Result<bool, BundleError> {
        let at = self.pos;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(BundleError::Malformed {
                offset: at,
                problem: format!("{what} is {v}, expected 0 or 1"),
            }),
        }
    }
    fn malformed(&self, problem: String) -> BundleError {
        BundleError::Malformed {
            offset: self.pos,
            problem,
        }
    }
    /// A count of items that each take at least `min_bytes`: refused when the rest of the
    /// file cannot hold them (so a corrupted count never allocates much).
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, BundleError> {
        let n = self.usize32(what)?;
        if n.saturating_mul(min_bytes) > self.b.len() - self.pos {
            return Err(BundleError::Truncated {
                offset: self.pos,
                what: format!("{n} {what}"),
            });
        }
        Ok(n)
    }
}

fn get_segment(r: &mut R) -> Result<TensorSegment, BundleError> {
    let name = r.str("segment name")?;
    let mut shape = [0usize; 4];
    for d in &mut shape {
        *d = usize::try_from(r.u64("segment shape")?).map_err(|_| r.malformed("shape".into()))?;
    }
    let batch = r.usize32("layout batch")?;
    let block = r.usize32("layout block")?;
    if batch == 0 || block == 0 {
        return Err(r.malformed(format!("segment '{name}' has an empty layout")));
    }
    let size = shape
        .iter()
        .chain([&batch, &block])
        .try_fold(1u64, |a, &d| a.checked_mul(d.max(1) as u64));
    if size.is_none_or(|s| s > 1 << 40) {
        return Err(r.malformed(format!(
            "segment '{name}' has an impossible shape {shape:?}"
        )));
    }
    Ok(TensorSegment {
        name,
        layout: ActLayout::new(shape, batch, block),
    })
}

fn get_program(
    r: &mut R,
    cfg: &HwConfig,
    step: usize,
    name: &str,
) -> Result<LayerProgram, BundleError> {
    let n = r.count("program inputs", 28)?;
    let inputs = (0..n)
        .map(|_| get_segment(r))
        .collect::<Result<Vec<_>, _>>()?;
    let n = r.count("program outputs", 28)?;
    let outputs = (0..n)
        .map(|_| get_segment(r))
        .collect::<Result<Vec<_>, _>>()?;
    let n = r.count("layer infos", 30)?;
    let mut layers = Vec::with_capacity(n);
    for _ in 0..n {
        let lname = r.str("layer name")?;
        let code = r.u8("layer kind")?;
        let kind = kind_of(code).ok_or_else(|| r.malformed(format!("layer kind {code}")))?;
        let tiling = if r.flag("tiling flag")? {
            let mut v = [0usize; 5];
            for x in &mut v {
                *x = r.usize32("tiling")?;
            }
            let order = match r.u8("loop order")? {
                0 => LoopOrder::CoOuter,
                1 => LoopOrder::SpatialOuter,
                o => return Err(r.malformed(format!("loop order {o}"))),
            };
            let col_skip = r.flag("column skip")?;
            Some(Tiling {
                tn: v[0],
                th: v[1],
                tw: v[2],
                tco: v[3],
                tci: v[4],
                order,
                col_skip,
            })
        } else {
            None
        };
        let tiles = r.u64("tiles")? as usize;
        let insns = r.u64("instructions")? as usize;
        let kernels = r.u64("kernels")? as usize;
        layers.push(LayerInfo {
            name: lname,
            kind,
            tiling,
            estimate: None,
            tiles,
            insns,
            kernels,
        });
    }
    let bytes = r.bytes("program container")?;
    let program = container::read_for(bytes, cfg).map_err(|source| BundleError::Program {
        step,
        name: name.to_string(),
        source,
    })?;
    for s in inputs.iter().chain(&outputs) {
        let ok = program
            .segment(&s.name)
            .is_some_and(|seg| seg.size() == s.layout.bytes() as u64);
        if !ok {
            return Err(BundleError::Program {
                step,
                name: name.to_string(),
                source: container::ContainerError::InvalidProgram(format!(
                    "no segment '{}' of {} bytes",
                    s.name,
                    s.layout.bytes()
                )),
            });
        }
    }
    Ok(LayerProgram {
        program,
        inputs,
        outputs,
        layers,
    })
}

/// Reads a compiled-model file; with `select`, it must have been compiled for that config's
/// ISA (and runs on that config).
pub(super) fn read(bytes: &[u8], file: &str, select: Option<&HwConfig>) -> Result<Model, Error> {
    read_inner(bytes, select).map_err(|e| match e {
        Error::Bundle { source, .. } => Error::Bundle {
            file: file.to_string(),
            source,
        },
        other => other,
    })
}

fn read_inner(bytes: &[u8], select: Option<&HwConfig>) -> Result<Model, Error> {
    if !bytes.starts_with(&MAGIC) {
        let hint = if container::is_container(bytes) {
            " but it is a program container (VTAPROG): run it with `vta sim`"
        } else if bytes.len() > 4 && bytes[0] == 0x08 {
            " (it looks like an ONNX model: compile it with `vta compile` first)"
        } else {
            ""
        };
        return Err(BundleError::NotModel { hint }.into());
    }
    let mut r = R { b: bytes, pos: 8 };
    let version = r.u32("the format version")?;
    if version > FORMAT_VERSION {
        return Err(BundleError::NewerVersion {
            found: version,
            supported: FORMAT_VERSION,
        }
        .into());
    }
    if version == 0 {
        return Err(BundleError::BadVersion(version).into());
    }
    if bytes.len() < 20 {
        return Err(BundleError::Truncated {
            offset: bytes.len(),
            what: "the checksum".into(),
        }
        .into());
    }
    let body = &bytes[..bytes.len() - 8];
    let stored = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().expect("8"));
    let computed = fnv1a(body);
    if stored != computed {
        return Err(BundleError::Checksum { stored, computed }.into());
    }
    let mut r = R { b: body, pos: 12 };
    let config_string = r.str("the config string")?;
    let hash = r.u64("the ISA hash")?;
    let json = r.str("the config JSON")?;
    let cfg = HwConfig::from_json_str(&json, "the embedded config")
        .map_err(|e| BundleError::Config(e.to_string()))?;
    if cfg.isa_hash() != hash {
        return Err(BundleError::HashMismatch {
            stored: hash,
            config: format!("{config_string} / {}", cfg.config_string()),
            hash: cfg.isa_hash(),
        }
        .into());
    }
    let cfg = match select {
        Some(sel) if sel.isa_hash() != cfg.isa_hash() => {
            return Err(BundleError::WrongConfig {
                model: cfg.config_string(),
                selected: sel.config_string(),
            }
            .into())
        }
        Some(sel) => sel.clone(),
        None => cfg,
    };
    let source = r.str("the source name")?;
    let at = r.pos;
    let fidelity = match r.u8("the fidelity")? {
        0 => RequantFidelity::WithinOneLsb,
        1 => RequantFidelity::BitExact,
        v => {
            return Err(BundleError::Malformed {
                offset: at,
                problem: format!("fidelity {v}"),
            }
            .into())
        }
    };
    let offload = r.flag("the offload flag")?;
    let onnx = r.bytes("the ONNX model")?.to_vec();
    let calibration = if r.flag("the calibration flag")? {
        let samples = r.usize32("calibration samples")?;
        let n = r.count("calibration tensors", 8)?;
        let mut ranges = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str("a calibration tensor name")?;
            let v = f32::from_bits(r.u32("a calibration range")?);
            ranges.push((name, v));
        }
        Some(Calibration { samples, ranges })
    } else {
        None
    };
    let step_count = r.usize32("the plan step count")?;
    let n = r.count("accelerator steps", 22)?;
    let mut accel: Vec<AccelStep> = Vec::with_capacity(n);
    for _ in 0..n {
        let step = r.usize32("a step index")?;
        if step >= step_count || accel.last().is_some_and(|a| a.step >= step) {
            return Err(r
                .malformed(format!("step index {step} out of order or range"))
                .into());
        }
        let name = r.str("a step name")?;
        let kind = r.str("a layer kind")?;
        let fingerprint = r.u64("a layer fingerprint")?;
        let placement = if r.flag("a placement")? {
            Placement::Program(Box::new(get_program(&mut r, &cfg, step, &name)?))
        } else {
            Placement::Refused(r.str("a refusal reason")?)
        };
        accel.push(AccelStep {
            step,
            name,
            kind,
            fingerprint,
            placement,
            compile_time: Duration::ZERO,
        });
    }
    if r.pos != body.len() {
        return Err(r
            .malformed(format!(
                "{} unexpected bytes before the checksum",
                body.len() - r.pos
            ))
            .into());
    }
    let options = FrontendOptions { fidelity, offload };
    Model::rebuild(cfg, source, onnx, options, calibration, step_count, accel)
}
