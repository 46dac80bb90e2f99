//! The report of a run that reached DONE on real hardware (a board's fabric, the SoC behind
//! a serial link): CONTROL's error bit and the hardware's micro-op and instruction counters
//! checked against the instruction stream's, the hardware's cycle, busy and stall counters
//! as extras.

use crate::{regs, Counters, DeviceError, RunReport};

/// The report of the run `done` of `insn_count` instructions whose stream has `counters`,
/// on `backend`; its `wall_time` is for the caller to set.
pub(crate) fn report(
    backend: &str,
    counters: &Counters,
    done: &regs::Completion,
    insn_count: u32,
) -> Result<RunReport, DeviceError> {
    let reg = |name: &str| u64::from(done.get(name).unwrap_or(0));
    let fail = |detail: String| DeviceError::Run {
        backend: backend.into(),
        source: detail.into(),
    };
    if done.control & regs::CONTROL_ERROR != 0 {
        return Err(fail(format!(
            "the accelerator reported an error (CONTROL = {:#x}: an AXI error response or \
             a micro-op index past its buffer) after {} cycles",
            done.control,
            reg("CYCLES")
        )));
    }
    let bad: Vec<String> = [
        ("GEMM_UOPS", counters.gemm_uops),
        ("ALU_UOPS", counters.alu_uops),
        ("RESET_UOPS", counters.reset_uops),
        ("INSNS", u64::from(insn_count)),
    ]
    .into_iter()
    .filter(|&(r, want)| reg(r) != want & 0xffff_ffff)
    .map(|(r, want)| format!("{r} = {}, the instruction stream has {want}", reg(r)))
    .collect();
    if !bad.is_empty() {
        return Err(fail(format!(
            "hardware counter mismatch: {}",
            bad.join("; ")
        )));
    }
    let mut extras = vec![("cycles".to_string(), reg("CYCLES"))];
    for r in [
        "LOAD_BUSY",
        "LOAD_STALL",
        "COMPUTE_BUSY",
        "COMPUTE_STALL",
        "STORE_BUSY",
        "STORE_STALL",
        "DMA_BUSY",
    ] {
        extras.push((r.to_lowercase(), reg(r)));
    }
    extras.push(("polls".into(), done.polls));
    Ok(RunReport {
        backend: backend.into(),
        counters: counters.iter().map(|(n, v)| (n.to_string(), v)).collect(),
        extras,
        wall_time: std::time::Duration::ZERO,
    })
}
