//! The accelerator, described with the `hdl` crate: every size is taken from an
//! [`isa::HwConfig`] at run time, every instruction field position from [`isa::layout`], and
//! every behaviour from [`isa::spec`].
//!
//! [`generate`] builds the top level `vta_top` for a config and returns its Verilog (with
//! the config string, ISA hash and config JSON in the header), the register map ([`regs`])
//! as JSON and the port manifest. `vta hw verilog` writes them; `vta hw report` runs yosys
//! on them ([`report`]).
//!
//! # Modules
//!
//! | file | module | does |
//! |---|---|---|
//! | [`top`] | `vta_top` | `ap_clk`, `ap_rst_n`, `m_axi_*` (AXI4 master to DRAM), `s_axi_control_*` (AXI4-Lite); the INP and WGT scratchpads |
//! | [`control`] | `vta_control` | the AXI4-Lite slave, start/running/done, performance counters |
//! | [`fetch`] | `vta_fetch` | reads `INSN_COUNT` instructions from `INSN_ADDR`, dispatches them to the three command queues |
//! | [`util::lutram_fifo`] | `lutram_fifo_*` | the command queues (`CMD_QUEUE_DEPTH` x 128 bits) |
//! | [`load`] | `vta_load` | LOAD INP / WGT |
//! | [`compute`] | `vta_compute` | LOAD UOP / ACC / ACC8, GEMM and ALU handed to [`exec`], FINISH |
//! | [`store`] | `vta_store` | STORE |
//! | [`tokens`] | `vta_tokens` | the dependency-token queues `l2g`, `g2l`, `g2s`, `s2g` (counters) |
//! | [`dma`] | `load_engine_*`, `store_engine_*`, `dma_unpack_*`, `dma_read_arbiter_*` | 2D strided DMA with padding, gearboxes, read arbitration |
//! | `hdl::widgets::axi4_master` | `vta_axi_master` | bursts on the AXI4 bus |
//! | [`exec`] | `vta_exec` | the execution core (GEMM, tensor ALU; UOP, ACC and OUT memories) |
//!
//! [`soc`] wraps `vta_top` into `vta_soc` for boards without a CPU: device memory in block
//! RAM and a UART host bridge.
//!
//! `vta_top` also has debug outputs (`dbg_*`, [`debug`]): the per-cycle state of the three
//! modules, the execution core and the token queues, for simulation.
//!
//! Load, compute and store each run one instruction at a time through the same
//! sequencer: pop tokens as the instruction leaves its queue, run it, push its tokens when
//! it is complete (spec 5.3).
//!
//! # Key decisions
//!
//! * **Gearbox** ([`dma`]): elements and the bus are powers of two. An element at least as
//!   wide as the bus is whole beats (shifted into an element register, one beat per cycle);
//!   a narrower element sits in one of `B/E` slots of a beat, at any slot (DRAM alignment
//!   is per element): each row request records its first slot and length, and the unpacker
//!   picks slots (one element per cycle, the scratchpad write rate), the packer fills slots
//!   and writes with byte strobes.
//! * **Bursts**: one DMA request per DRAM row, in beats from the beat-aligned address; the
//!   AXI4 master splits requests into INCR bursts of up to 256 beats that never cross a
//!   4 KiB boundary, with up to 8 reads and 4 writes in flight. Long transfers run at one
//!   beat per cycle (or one element per cycle for elements narrower than the bus).
//! * **Arbitration**: fetch, load and compute share the read side through a round-robin
//!   arbiter per request; data returns in request order and is routed by a queue of
//!   granted client indices. Every client accepts its data unconditionally (fetch reserves
//!   room in its instruction buffer before asking; the load engines write scratchpads at
//!   full rate), so one client's stall never blocks another's data. Store is the only
//!   writer.
//! * **Resources**: INP and WGT are single memories (one write port from load, one read
//!   port to the core); the command queues are split into 64-entry banks so they map to
//!   distributed RAM, keeping block RAM for the scratchpads; the load engines register
//!   their write port so zero padding costs flip-flop resets instead of multiplexers.

pub mod compute;
pub mod control;
pub mod debug;
pub mod dma;
pub mod exec;
pub mod fetch;
pub mod load;
pub mod multicore;
pub mod regs;
pub mod report;
mod seq;
pub mod soc;
pub mod store;
pub mod tokens;
pub mod top;
pub mod util;

use hdl::Design;
use isa::HwConfig;

/// Why a design could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The config is not valid (the message is `HwConfig::validate`'s).
    #[error("invalid config: {0}")]
    Config(String),
    /// A multi-core design of a core count it cannot have.
    #[error("{0}")]
    Cores(String),
    /// A module failed the hdl crate's checks (a bug in the hardware description).
    #[error("the generated design is not well formed: {0}")]
    Design(#[from] hdl::DesignError),
}

/// A generated accelerator.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The config it was generated for.
    pub config: HwConfig,
    /// The design (top `vta_top`), e.g. to simulate it with `hdl::verilator`.
    pub design: Design,
    /// The whole design as one Verilog-2005 file, with the config in its header.
    pub verilog: String,
    /// The control register map as JSON ([`regs::json`]).
    pub regs_json: String,
    /// The port manifest of every module (JSON, from the hdl crate).
    pub ports_json: String,
}

/// The header comment of the Verilog: config string, ISA hash and the config's JSON.
pub fn header(cfg: &HwConfig) -> String {
    format!(
        "vta_top: a VTA-class accelerator\n\
         config: {}\n\
         isa_hash: {:016x}\n\
         AXI data width: {} bits; control registers: see regs.json\n\
         \n\
         config JSON:\n{}",
        cfg.config_string(),
        cfg.isa_hash(),
        cfg.axi_data_width,
        cfg.to_json()
    )
}

/// Builds `vta_top` for `cfg` with the execution core [`exec::exec_core`]: the Verilog
/// (header: config string, ISA hash, config JSON), the register map JSON and the port
/// manifest. An invalid config gets `HwConfig::validate`'s message.
pub fn generate(cfg: &HwConfig) -> Result<Generated, GenerateError> {
    cfg.validate().map_err(GenerateError::Config)?;
    let top = top::vta_top(cfg, &exec::exec_core(cfg));
    let design = Design::new(top);
    Ok(Generated {
        config: cfg.clone(),
        verilog: design.verilog(&header(cfg)),
        regs_json: regs::json(cfg),
        ports_json: design.manifest_json(),
        design,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_config_gets_the_validation_message() {
        let cfg = HwConfig {
            log_block_in: 11,
            ..HwConfig::default()
        };
        let e = generate(&cfg).unwrap_err().to_string();
        assert!(
            e.contains("LOG_BLOCK") && e.contains("between 0 and 6"),
            "{e}"
        );
    }

    #[test]
    fn outputs_carry_the_config() {
        let cfg = HwConfig::preset("small").unwrap();
        let g = generate(&cfg).unwrap();
        let head: String = g.verilog.lines().take(40).collect::<Vec<_>>().join("\n");
        assert!(head.contains(&cfg.config_string()), "{head}");
        assert!(head.contains(&format!("{:016x}", cfg.isa_hash())), "{head}");
        assert!(head.contains("\"LOG_BLOCK\": 2"), "{head}");
        assert!(g.verilog.contains("module vta_top ("));
        let ports: serde_json::Value = serde_json::from_str(&g.ports_json).unwrap();
        assert!(ports.to_string().contains("m_axi_araddr"));
        let regs: serde_json::Value = serde_json::from_str(&g.regs_json).unwrap();
        assert_eq!(regs["config_string"], cfg.config_string());
    }

    /// The RTL simulator's harness samples `vta_top`'s outputs before it evaluates the
    /// cycle's inputs (`vta_sim::rtl::Accelerator::cycle`): they must be registered.
    #[test]
    fn outputs_are_registered() {
        for (name, _, _) in isa::PRESETS {
            let cfg = HwConfig::preset(name).unwrap();
            let g = generate(&cfg).unwrap();
            assert!(g.design.top().outputs_registered(), "{name}");
        }
    }
}
