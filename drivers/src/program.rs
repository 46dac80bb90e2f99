//! Running an [`isa::Program`] on any [`Device`].

use isa::{Codec, Program};

use crate::{Buffer, Device, DeviceError, RunReport, RunTimeout};

/// [`RunReport::extras`] of a [`run_program`]: bytes the host copied into the device's memory
/// (every segment, initialized or zeroed, and the instruction stream) ...
pub const HOST_TO_DEVICE: &str = "host_to_device_bytes";
/// ... and bytes it copied back (the output segments) ...
pub const DEVICE_TO_HOST: &str = "device_to_host_bytes";
/// ... and the device memory the run held: the program's DRAM region and its instructions.
pub const DEVICE_MEMORY: &str = "device_memory_bytes";

/// The result of [`run_program`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRun {
    /// Every output segment's bytes, in segment order.
    pub outputs: Vec<(String, Vec<u8>)>,
    pub report: RunReport,
}

impl ProgramRun {
    /// The bytes of output `name`.
    pub fn output(&self, name: &str) -> Option<&[u8]> {
        self.outputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
    }
}

/// Runs `p` on `dev`: allocates the program's DRAM region (aligned to
/// [`Program::dram_align`]), writes every segment (the given input, else its initial data,
/// else zeros), relocates the instructions to the region, writes them to a buffer of their
/// own, runs, and reads back every output segment. Both buffers are freed afterwards, also
/// when the run fails.
pub fn run_program(
    dev: &mut dyn Device,
    p: &Program,
    inputs: &[(String, Vec<u8>)],
    timeout: RunTimeout,
) -> Result<ProgramRun, DeviceError> {
    if p.config.isa_hash() != dev.config().isa_hash() {
        return Err(DeviceError::ConfigMismatch {
            program: p.config.config_string(),
            device: dev.config().config_string(),
        });
    }
    p.validate().map_err(DeviceError::Program)?;
    // Every input must name an input segment, once, with exactly its size.
    let input_names = || {
        p.segments
            .iter()
            .filter(|s| s.role.input)
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };
    for (i, (name, data)) in inputs.iter().enumerate() {
        let seg =
            p.segment(name)
                .filter(|s| s.role.input)
                .ok_or_else(|| DeviceError::UnknownInput {
                    name: name.clone(),
                    inputs: input_names(),
                })?;
        if inputs[..i].iter().any(|(n, _)| n == name) {
            return Err(DeviceError::DuplicateInput { name: name.clone() });
        }
        if data.len() as u64 != seg.size() {
            return Err(DeviceError::InputSize {
                name: name.clone(),
                expected: seg.size(),
                got: data.len() as u64,
                shape: format!("{} x {:?}", seg.dtype.name(), seg.shape),
            });
        }
    }

    let region = dev.alloc(p.dram_size(), Program::dram_align(&p.config))?;
    let mut insn_buf: Option<Buffer> = None;
    let result = run_in(dev, p, inputs, timeout, &region, &mut insn_buf);
    let freed_insns = insn_buf.map_or(Ok(()), |b| dev.free(b));
    let freed_region = dev.free(region);
    // A failed run's own error says more than a failure to free after it (a remote device
    // given up after a timeout can free nothing).
    let run = result?;
    freed_insns?;
    freed_region?;
    Ok(run)
}

fn run_in(
    dev: &mut dyn Device,
    p: &Program,
    inputs: &[(String, Vec<u8>)],
    timeout: RunTimeout,
    region: &Buffer,
    insn_buf: &mut Option<Buffer>,
) -> Result<ProgramRun, DeviceError> {
    let mut to_device = 0u64;
    for seg in &p.segments {
        to_device += seg.size();
        let given = inputs.iter().find(|(n, _)| *n == seg.name).map(|(_, d)| d);
        match given.or(seg.init.as_ref()) {
            Some(data) => dev.copy_to_device(region, seg.offset, data)?,
            // Zeros: the region may hold a previous run's data.
            None => dev.copy_to_device(region, seg.offset, &vec![0; seg.size() as usize])?,
        }
    }
    dev.flush(region, 0, region.size)?;

    let insns = p
        .relocated(region.phys_addr)
        .map_err(DeviceError::Program)?;
    let stream = Codec::new(&p.config)
        .encode_stream(&insns)
        .map_err(|e| DeviceError::Program(e.to_string()))?;
    let count = u32::try_from(insns.len())
        .map_err(|_| DeviceError::Program(format!("{} instructions is too many", insns.len())))?;
    let buf = insn_buf.insert(dev.alloc(stream.len() as u64, isa::INSN_BYTES as u64)?);
    dev.copy_to_device(buf, 0, &stream)?;
    to_device += stream.len() as u64;
    dev.flush(buf, 0, buf.size)?;
    let insn_addr = buf.phys_addr;

    let mut report = dev.run(insn_addr, count, timeout)?;

    dev.invalidate(region, 0, region.size)?;
    let mut outputs = Vec::new();
    for seg in p.segments.iter().filter(|s| s.role.output) {
        let mut data = vec![0; seg.size() as usize];
        dev.copy_from_device(region, seg.offset, &mut data)?;
        outputs.push((seg.name.clone(), data));
    }
    let from_device = outputs.iter().map(|(_, d)| d.len() as u64).sum();
    report.extras.push((HOST_TO_DEVICE.into(), to_device));
    report.extras.push((DEVICE_TO_HOST.into(), from_device));
    report
        .extras
        .push((DEVICE_MEMORY.into(), region.size + buf.size));
    Ok(ProgramRun { outputs, report })
}
