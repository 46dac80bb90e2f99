//! Cycles of a network compiled for a config: from the analytic model ([`crate::timing`]), in
//! milliseconds, or from the RTL simulator (the accelerator's Verilog in Verilator), exact but
//! seconds per network and a model build of minutes per new config.

use drivers::Device;
use vta_runtime::model::Model;
use vta_runtime::resident::LoadOptions;
use vta_sim::rtl::{MemTiming, RtlDevice, RtlOptions};

use crate::timing::{self, CALIBRATION};
use crate::Error;

/// Where cycle counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CycleSource {
    /// The analytic model.
    Model,
    /// The RTL simulator.
    Rtl,
}

impl CycleSource {
    pub fn name(self) -> &'static str {
        match self {
            CycleSource::Model => "model",
            CycleSource::Rtl => "rtl",
        }
    }
}

/// Accelerator cycles of one inference, per launch, by the analytic model with memory
/// timing `mem`.
pub fn modelled(model: &Model, mem: &MemTiming) -> Result<Vec<u64>, Error> {
    model
        .launches
        .iter()
        .map(|l| {
            Ok(timing::program_cycles(
                &l.program.program,
                mem,
                &CALIBRATION,
            )?)
        })
        .collect()
}

/// Accelerator cycles of one inference, per launch, on the RTL simulator with memory timing
/// `mem`; `progress` hears the Verilator model's build stages (minutes on a config's first
/// use, cached afterwards).
pub fn simulated(
    model: &Model,
    mem: &MemTiming,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<u64>, Error> {
    let cfg = &model.config;
    let rtl = |e: &dyn std::fmt::Display| Error::Rtl(format!("{}: {e}", cfg.config_string()));
    let opts = RtlOptions {
        timing: *mem,
        ..RtlOptions::default()
    };
    let mut dev = RtlDevice::with_options(cfg, &opts, progress).map_err(|e| rtl(&e))?;
    let inputs = crate::network::sample_inputs(model);
    let dev: &mut dyn Device = &mut dev;
    let mut resident = model
        .load(dev, LoadOptions::default())
        .map_err(|e| rtl(&e))?;
    let run = resident.run(&inputs).map_err(|e| rtl(&e))?;
    run.launches
        .iter()
        .map(|l| {
            l.get("cycles")
                .ok_or_else(|| rtl(&"the RTL run reported no cycle count"))
        })
        .collect()
}
