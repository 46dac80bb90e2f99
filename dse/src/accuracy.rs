//! Accuracy as a sweep objective: a labelled evaluation set (the digits CNN's embedded test
//! digits, or `.npy` inputs and integer labels) run through the network compiled for each
//! config on the functional simulator, top-1 against the labels. Quantization follows the
//! config's data widths, so this is where precision shows up in a sweep.

use std::path::Path;

use compiler::zoo::digits;
use drivers::Device;
use isa::npy;
use vta_runtime::io as runtime;
use vta_runtime::model::Model;
use vta_runtime::resident::LoadOptions;
use vta_runtime::tensor::Tensor;
use vta_sim::FsimDevice;

use crate::Error;

/// Labelled samples: inputs stacked along the first axis, one class per sample.
#[derive(Debug, Clone)]
pub struct EvalSet {
    /// What the set is, for tables (`digits test set (100)`, a file name).
    pub name: String,
    input: Tensor,
    labels: Vec<usize>,
    /// A hash of the inputs and labels (16 hex digits), for cache keys.
    pub hash: String,
}

fn read_npy(bytes: &[u8], what: &str) -> Result<npy::Array, Error> {
    npy::decode(bytes).map_err(|e| Error::Network(format!("{what}: {e}")))
}

/// Integer labels of a `.npy` array (any integer type, one per sample).
fn labels_of(a: &npy::Array, what: &str) -> Result<Vec<usize>, Error> {
    let t = runtime::tensor_from_npy(a).map_err(|e| Error::Network(format!("{what}: {e}")))?;
    let bad = || {
        Error::Network(format!(
            "{what}: labels must be non-negative integers (int64, int32 or uint8), one per \
             sample; got {}",
            t.fact()
        ))
    };
    let v: Vec<i64> = match &t {
        Tensor::I64(a) => a.iter().copied().collect(),
        Tensor::I32(a) => a.iter().map(|&x| i64::from(x)).collect(),
        Tensor::U8(a) => a.iter().map(|&x| i64::from(x)).collect(),
        _ => return Err(bad()),
    };
    v.into_iter()
        .map(|x| usize::try_from(x).map_err(|_| bad()))
        .collect()
}

impl EvalSet {
    fn new(name: String, input_npy: &npy::Array, labels: Vec<usize>) -> Result<EvalSet, Error> {
        let input = runtime::tensor_from_npy(input_npy)
            .map_err(|e| Error::Network(format!("{name}: {e}")))?;
        let n = input.shape().first().copied().unwrap_or(0);
        if n != labels.len() || n == 0 {
            return Err(Error::Network(format!(
                "{name}: {n} input sample(s) (the first axis of {}) but {} label(s); give one \
                 label per sample",
                input.fact(),
                labels.len()
            )));
        }
        let mut h = input_npy.data.clone();
        h.extend(labels.iter().flat_map(|&l| (l as u64).to_le_bytes()));
        Ok(EvalSet {
            name,
            input,
            labels,
            hash: format!("{:016x}", isa::container::fnv1a(&h)),
        })
    }

    /// The digits CNN's 100 held-out test digits and their labels.
    pub fn digits() -> Result<EvalSet, Error> {
        let x = read_npy(digits::TEST_NPY, "embedded test digits")?;
        let y = read_npy(digits::TEST_LABELS_NPY, "embedded labels")?;
        let labels = labels_of(&y, "embedded labels")?;
        EvalSet::new(format!("digits test set ({})", labels.len()), &x, labels)
    }

    /// Inputs from `x` (the model's input, samples stacked on the first axis) and labels
    /// from `y`.
    pub fn from_files(x: &Path, y: &Path) -> Result<EvalSet, Error> {
        let read = |p: &Path| {
            let bytes = std::fs::read(p)
                .map_err(|e| Error::Network(format!("cannot read {}: {e}", p.display())))?;
            read_npy(&bytes, &p.display().to_string())
        };
        let labels = labels_of(&read(y)?, &y.display().to_string())?;
        EvalSet::new(x.display().to_string(), &read(x)?, labels)
    }

    /// Samples in the set.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Top-1 accuracy (0..=1) of `model` on the set, run on the functional simulator.
    pub fn top1(&self, model: &Model) -> Result<f64, String> {
        let plan = &model.plan;
        if plan.inputs.len() != 1 {
            return Err(format!(
                "accuracy needs a model with one input; this one has {}",
                plan.inputs.len()
            ));
        }
        let runs = model
            .split_samples(vec![self.input.clone()])
            .map_err(|e| format!("{}: {e}", self.name))?;
        let mut dev = FsimDevice::new(&model.config);
        let dev: &mut dyn Device = &mut dev;
        let mut resident = model
            .load(dev, LoadOptions::default())
            .map_err(|e| e.to_string())?;
        let mut right = 0;
        for (sample, &label) in runs.iter().zip(&self.labels) {
            let out = resident.run(sample).map_err(|e| e.to_string())?;
            let scores = out
                .outputs
                .first()
                .ok_or("the model has no output")?
                .to_f64_vec();
            let class = (0..scores.len())
                .max_by(|&i, &j| scores[i].total_cmp(&scores[j]).then(j.cmp(&i)))
                .ok_or("the model's first output is empty")?;
            right += usize::from(class == label);
        }
        Ok(right as f64 / self.labels.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_must_match_the_samples() {
        let x = read_npy(digits::TEST_NPY, "x").unwrap();
        let e = EvalSet::new("x.npy".into(), &x, vec![0; 3]).unwrap_err();
        assert!(e.to_string().contains("100 input sample(s)"), "{e}");
        assert!(e.to_string().contains("but 3 label(s)"), "{e}");
        let set = EvalSet::digits().unwrap();
        assert_eq!(set.len(), 100);
    }
}
