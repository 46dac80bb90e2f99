//! Several accelerators sharing one memory: `vta_multicore_<n>` is `n` copies of `vta_top`
//! (the same config), each with its own AXI4-Lite control port, whose AXI4 masters meet in
//! an in-order N:1 interconnect ([`axi4_interconnect`]) on one master port to the memory.
//! It is what a board with two cores on one DDR controller looks like to the cores, and
//! what the RTL simulator runs for `--devices rtl-cores:N`.
//!
//! ```text
//!  s_axi_control0 ──> u_core0 (vta_top) ──m_axi──> s0 ┐
//!  s_axi_control1 ──> u_core1 (vta_top) ──m_axi──> s1 ├ vta_axi_interconnect ──> m_axi
//!  ...                                                 ┘
//! ```
//!
//! # Ports of `vta_multicore_<n>`
//!
//! | port | meaning |
//! |---|---|
//! | `ap_clk`, `ap_rst_n` | as `vta_top`'s: one clock and one active-low synchronous reset for every core |
//! | `s_axi_control<k>_*` | core `k`'s control port (the register map of `vta_hw::regs`) |
//! | `m_axi_*` | the shared AXI4 master port (the subset of `vta_top`'s, no IDs: the memory answers in order) |
//! | `core<k>_dbg_state` | core `k`'s `dbg_state` ([`crate::debug`]), for the simulator's hang detection |
//!
//! Each core runs its own instruction stream in its own buffers; the cores share nothing
//! but the memory bus, so a core's results are those it computes alone, only later when the
//! other cores keep the bus busy.

mod interconnect;

pub use interconnect::axi4_interconnect;

use hdl::{Design, Module, ModuleBuilder};
use isa::HwConfig;

use crate::{GenerateError, Generated};

/// The most cores a design may have: the interconnect's queues and the simulator's
/// per-cycle work grow with the count, and no board has more memory ports to spread them on.
pub const MAX_CORES: u32 = 8;

/// The control port prefix of core `k` in `vta_multicore_<n>`.
pub fn control_prefix(k: u32) -> String {
    format!("s_axi_control{k}_")
}

/// The debug-state port of core `k`.
pub fn dbg_state_port(k: u32) -> String {
    format!("core{k}_{}", crate::debug::STATE_PORT)
}

/// Checks a core count: 2 to [`MAX_CORES`] (one core is plain `vta_top`).
pub fn check_cores(cores: u32) -> Result<(), GenerateError> {
    if (2..=MAX_CORES).contains(&cores) {
        Ok(())
    } else {
        Err(GenerateError::Cores(format!(
            "{cores} cores: a multi-core design has 2 to {MAX_CORES} (one core is vta_top itself)"
        )))
    }
}

/// Builds `vta_multicore_<cores>` for `cfg` (see the module docs).
pub fn vta_multicore(cfg: &HwConfig, cores: u32) -> Result<Module, GenerateError> {
    cfg.validate().map_err(GenerateError::Config)?;
    check_cores(cores)?;
    let m = ModuleBuilder::new(&format!("vta_multicore_{cores}"));
    m.set_clock("ap_clk");
    m.set_reset("ap_rst_n", true);
    let core = crate::top::vta_top(cfg, &crate::exec::exec_core(cfg));
    let ic = m.instance(
        "u_interconnect",
        &axi4_interconnect(cores, cfg.axi_data_width),
    );
    for k in 0..cores {
        let c = m.instance(&format!("u_core{k}"), &core);
        let prefix = control_prefix(k);
        for p in core.ports() {
            let Some(signal) = p.name.strip_prefix("s_axi_control_") else {
                continue;
            };
            let name = format!("{prefix}{signal}");
            match p.dir {
                hdl::Dir::Input => c.connect(&p.name, m.input(&name, p.width)),
                hdl::Dir::Output => {
                    m.output_from(&name, c.output(&p.name));
                }
            }
        }
        crate::soc::axi::connect(&c, "m_axi", &ic, &format!("s{k}_axi"));
        m.output_from(&dbg_state_port(k), c.output(crate::debug::STATE_PORT));
    }
    crate::util::forward_ports(&m, &ic, |n| n.starts_with("m_axi_"));
    Ok(m.finish()?)
}

/// The header comment of the multi-core Verilog.
fn header(cfg: &HwConfig, cores: u32) -> String {
    format!(
        "vta_multicore_{cores}: {cores} VTA-class accelerators sharing one AXI4 master port\n\
         through an in-order interconnect; core k's control port is s_axi_control<k>_*\n\
         (registers: see regs.json).\n\
         \n{}",
        crate::header(cfg)
    )
}

/// Builds `vta_multicore_<cores>` for `cfg` and prints it, as [`crate::generate`] does for
/// one core.
pub fn generate(cfg: &HwConfig, cores: u32) -> Result<Generated, GenerateError> {
    let design = Design::new(vta_multicore(cfg, cores)?);
    Ok(Generated {
        config: cfg.clone(),
        verilog: design.verilog(&header(cfg, cores)),
        regs_json: crate::regs::json(cfg),
        ports_json: design.manifest_json(),
        design,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_counts_outside_the_range_are_refused() {
        let cfg = HwConfig::default();
        for n in [0, 1, MAX_CORES + 1] {
            let e = vta_multicore(&cfg, n).unwrap_err().to_string();
            assert!(e.contains("2 to 8"), "{e}");
        }
    }

    #[test]
    fn every_core_has_its_control_port_and_the_outputs_are_registered() {
        let cfg = HwConfig::default();
        let top = vta_multicore(&cfg, 3).unwrap();
        for k in 0..3 {
            assert!(top.port(&format!("{}awaddr", control_prefix(k))).is_some());
            assert!(top.port(&dbg_state_port(k)).is_some());
        }
        assert!(top.port("m_axi_araddr").is_some());
        // The RTL simulator samples outputs before it evaluates the cycle's inputs.
        assert!(top.outputs_registered());
    }
}
