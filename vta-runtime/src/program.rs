//! Device programs of a compiled model: an instruction stream with its DRAM segments, and the
//! packed tensors it reads and writes. Running one packs its inputs on the host, runs it on a
//! device of the HAL and unpacks its outputs.

use drivers::{run_program, Device, RunReport, RunTimeout};
use isa::Program;
use ndarray::{Array4, ArrayView4};

use crate::layout::ActLayout;

/// A packed tensor in the program's DRAM: its segment, where in it, and its layout.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TensorSegment {
    /// Segment name in [`DeviceProgram::program`].
    pub name: String,
    pub layout: ActLayout,
    /// Byte offset of the tensor in the segment: 0 for a tensor with a segment of its own,
    /// more for a view (a tensor another tensor's segment holds, such as one input of a
    /// channel concatenation written straight into the concatenation's output). Only a
    /// program's internal tensors are views; its inputs and outputs own their segments.
    pub offset: u64,
}

impl TensorSegment {
    /// A tensor owning segment `name`.
    pub fn new(name: impl Into<String>, layout: ActLayout) -> Self {
        TensorSegment {
            name: name.into(),
            layout,
            offset: 0,
        }
    }
}

/// An accelerator program: one layer or a chain of layers.
#[derive(Debug, Clone)]
pub struct DeviceProgram {
    /// Instructions and DRAM segments: packed inputs (role input), weights and constants
    /// (initialized), intermediate activations, packed outputs (role output), micro-ops.
    pub program: Program,
    /// Input tensors, in the order [`DeviceProgram::run_all`] takes them.
    pub inputs: Vec<TensorSegment>,
    /// Output tensors, in the order [`DeviceProgram::run_all`] returns them.
    pub outputs: Vec<TensorSegment>,
}

/// Why a device program did not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the program takes {expected} input tensors, {got} given")]
    InputCount { expected: usize, got: usize },
    #[error("input '{name}' has shape {got:?}; the program was compiled for {expected:?}")]
    InputShape {
        name: String,
        expected: [usize; 4],
        got: Vec<usize>,
    },
    #[error("input '{name}': {reason}")]
    InputValue { name: String, reason: String },
    #[error(transparent)]
    Device(#[from] drivers::DeviceError),
    #[error("the run returned no output segment '{0}'")]
    MissingOutput(String),
}

impl DeviceProgram {
    /// Packs `inputs` (NCHW int8, one per [`DeviceProgram::inputs`]), runs the program on
    /// `dev` and unpacks every output; also returns the device's report (counters, time).
    pub fn run_all(
        &self,
        dev: &mut dyn Device,
        inputs: &[ArrayView4<i8>],
        timeout: RunTimeout,
    ) -> Result<(Vec<Array4<i8>>, RunReport), RunError> {
        if inputs.len() != self.inputs.len() {
            return Err(RunError::InputCount {
                expected: self.inputs.len(),
                got: inputs.len(),
            });
        }
        let mut data = Vec::with_capacity(inputs.len());
        for (x, seg) in inputs.iter().zip(&self.inputs) {
            if x.shape() != seg.layout.shape {
                return Err(RunError::InputShape {
                    name: seg.name.clone(),
                    expected: seg.layout.shape,
                    got: x.shape().to_vec(),
                });
            }
            let bytes = seg
                .layout
                .pack(x.view())
                .map_err(|reason| RunError::InputValue {
                    name: seg.name.clone(),
                    reason,
                })?;
            data.push((seg.name.clone(), bytes));
        }
        let run = run_program(dev, &self.program, &data, timeout)?;
        let outs = self
            .outputs
            .iter()
            .map(|seg| {
                run.output(&seg.name)
                    .map(|bytes| seg.layout.unpack(bytes))
                    .ok_or_else(|| RunError::MissingOutput(seg.name.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((outs, run.report))
    }

    /// Checks that every tensor segment exists in the program with the size its layout
    /// needs (a program read from a file is checked before it runs).
    pub fn check_segments(&self) -> Result<(), String> {
        for (what, segs) in [("input", &self.inputs), ("output", &self.outputs)] {
            for s in segs.iter() {
                self.check_tensor(what, s, false)?;
            }
        }
        Ok(())
    }

    /// Checks that tensor `s` (`what`: input, output, ...) is a segment of the program with
    /// the size its layout needs, or, with `view_allowed`, lies inside one.
    pub fn check_tensor(
        &self,
        what: &str,
        s: &TensorSegment,
        view_allowed: bool,
    ) -> Result<(), String> {
        let need = s
            .layout
            .checked_bytes()
            .map_err(|e| format!("{what} '{}': {e}", s.name))?;
        let seg = self
            .program
            .segment(&s.name)
            .ok_or_else(|| format!("{what} '{}' is not a segment of the program", s.name))?;
        let have = seg.size();
        if !view_allowed && (s.offset != 0 || need != have) {
            return Err(format!(
                "{what} '{}' needs {need} bytes in its layout at byte 0 of its own segment, \
                 the segment has {have} and the tensor starts at byte {}",
                s.name, s.offset
            ));
        }
        if s.offset.checked_add(need).is_none_or(|end| end > have) {
            return Err(format!(
                "{what} at byte {} of segment '{}' needs {need} bytes in its layout, the \
                 segment has {have}",
                s.offset, s.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isa::{HwConfig, Role};

    #[test]
    fn only_internal_tensors_may_be_views_inside_a_segment() {
        let cfg = HwConfig::default();
        let whole = ActLayout::out(&cfg, [1, 48, 4, 4]);
        let part = ActLayout::out(&cfg, [1, 16, 4, 4]);
        let mut program = Program {
            config: cfg.clone(),
            insns: Vec::new(),
            segments: Vec::new(),
        };
        let (dtype, shape) = whole.segment_shape();
        program.push_segment("cat", dtype, shape, Role::default(), None);
        let p = DeviceProgram {
            program,
            inputs: Vec::new(),
            outputs: vec![TensorSegment::new("cat", whole)],
        };
        p.check_segments().unwrap();
        let view = |offset| TensorSegment {
            name: "cat".into(),
            layout: part,
            offset,
        };
        let block = part.bytes() as u64;
        for at in [0, block, 2 * block] {
            p.check_tensor("internal tensor", &view(at), true).unwrap();
            assert!(p.check_tensor("output", &view(at), false).is_err());
        }
        let e = p
            .check_tensor("internal tensor", &view(2 * block + 1), true)
            .unwrap_err();
        assert!(e.contains("segment 'cat'"), "{e}");
    }
}
