//! Running a model on several samples in turn, as `vta run`, `vta demo` and the Python
//! package's `CompiledModel.run` do: one load onto the device, one run per sample, the
//! per-layer figures summed, and (with checking) every layer compared with the integer
//! reference. Here so that a build without the CLI (the board build of the Python package)
//! runs models the same way; what the caller draws meanwhile (a progress bar, nothing) and
//! when it stops (Ctrl-C) come through a [`SampleObserver`].

use drivers::Device;

use crate::model::{Check, Error, Model};
use crate::resident::LoadOptions;
use crate::tensor::Tensor;
use crate::RunResult;

/// What running samples gave.
pub struct Samples {
    /// Per model output, one tensor per sample.
    pub outputs: Vec<Vec<Tensor>>,
    /// The per-layer breakdown, summed over the samples.
    pub total: RunResult,
    /// With checking: (layers, accelerator layers, elements compared), all bit-exact.
    pub checked: Option<(usize, usize, usize)>,
}

/// Why running samples failed; the messages are `vta run`'s.
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    #[error("{file}: cannot load the model onto {backend}")]
    Load {
        file: String,
        backend: String,
        source: Box<Error>,
    },
    #[error("{file}: run failed on {backend}")]
    Run {
        file: String,
        backend: String,
        source: Box<Error>,
    },
    /// A layer's output differs from the integer reference's.
    #[error("{file}: --check failed{sample}: {mismatch}")]
    CheckFailed {
        file: String,
        /// ` (sample i)` when there are several samples.
        sample: String,
        mismatch: String,
    },
    /// The integer reference itself could not run.
    #[error(transparent)]
    Reference(Box<Error>),
    #[error("no input samples")]
    NoSamples,
}

/// What the caller sees of a run in progress.
pub trait SampleObserver {
    /// What is being done now ("running", "sample 2/5: checking against ...").
    fn message(&mut self, text: &str);
    /// A step finished (of a run or of the reference); `false` stops the run with the
    /// runtime's [`Error::Interrupted`].
    fn step(&mut self) -> bool;
}

/// Runs `model` on each sample of `runs` in turn on `dev`; with `check`, compares every layer
/// with the integer reference and fails at the first mismatch. `file` names the model in
/// messages.
pub fn run_samples(
    model: &Model,
    dev: &mut dyn Device,
    runs: &[Vec<Tensor>],
    check: bool,
    file: &str,
    observer: &mut dyn SampleObserver,
) -> Result<Samples, SamplesError> {
    let mut total: Option<RunResult> = None;
    let mut outputs: Vec<Vec<Tensor>> = vec![Vec::new(); model.plan.outputs.len()];
    let mut checked: Option<(usize, usize, usize)> = None;
    let backend = dev.name().to_string();
    observer.message("loading the model onto the device");
    // Checking compares every step's output, so every intermediate tensor is kept and read.
    let keep = LoadOptions {
        keep_intermediates: check,
    };
    let mut resident = model.load(dev, keep).map_err(|source| SamplesError::Load {
        file: file.to_string(),
        backend: backend.clone(),
        source: Box::new(source),
    })?;
    for (i, ins) in runs.iter().enumerate() {
        let sample = |what: &str| {
            if runs.len() > 1 {
                format!("sample {}/{}: {what}", i + 1, runs.len())
            } else {
                what.to_string()
            }
        };
        observer.message(&sample("running"));
        let r = resident
            .run_until(ins, &mut |_| observer.step())
            .map_err(|source| SamplesError::Run {
                file: file.to_string(),
                backend: backend.clone(),
                source: Box::new(source),
            })?;
        if check {
            observer.message(&sample("checking against the integer reference"));
            match model
                .check_observed(ins, &r, &mut |_| {
                    observer.step();
                })
                .map_err(|e| SamplesError::Reference(Box::new(e)))?
            {
                Check::BitExact {
                    layers,
                    accel_layers,
                    elements,
                } => {
                    let c = checked.get_or_insert((layers, accel_layers, 0));
                    c.2 += elements;
                }
                mismatch => {
                    return Err(SamplesError::CheckFailed {
                        file: file.to_string(),
                        sample: if runs.len() > 1 {
                            format!(" (sample {i})")
                        } else {
                            String::new()
                        },
                        mismatch: mismatch.to_string(),
                    });
                }
            }
        }
        for (o, t) in outputs.iter_mut().zip(&r.outputs) {
            o.push(t.clone());
        }
        match &mut total {
            Some(t) => t.accumulate(&r),
            None => total = Some(r),
        }
    }
    let total = total.ok_or(SamplesError::NoSamples)?;
    Ok(Samples {
        outputs,
        total,
        checked,
    })
}

/// The document `vta run --json` prints (and the Python package's run report): the model,
/// its step counts, `outputs` (one object per output), the run's per-step and per-launch
/// figures and the check's counts.
pub fn run_document(
    file: &str,
    model: &Model,
    outputs: Vec<serde_json::Value>,
    total: &RunResult,
    checked: Option<(usize, usize, usize)>,
) -> serde_json::Value {
    let (na, nc) = model.counts();
    serde_json::json!({
        "model": file,
        "source": model.source,
        "config": model.config.config_string(),
        "steps": model.plan.steps.len(),
        "accel_steps": na,
        "cpu_steps": nc,
        "outputs": outputs,
        "run": total.to_json(),
        "check": checked.map(|(layers, accel, elements)| serde_json::json!({
            "bit_exact": true, "layers": layers, "accel_layers": accel, "elements": elements,
        })),
    })
}
