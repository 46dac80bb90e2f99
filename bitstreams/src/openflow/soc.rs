//! The accelerator's SoC (`vta_hw::soc`: the accelerator, on-chip device memory, the UART
//! bridge) as a design of the open flow, and [`resources_and_fmax`]: the flow through place
//! and route for it, cached, for every command that asks what a config takes of a board
//! (`vta hw bitstream --no-bitstream`, `vta dse --board`).

use std::path::{Path, PathBuf};

use isa::{HwConfig, MemType};

use super::board::Sdram;
use super::fit::Memory;
use super::flow::{self, FlowError, Outcome};
use super::sdram::{Controller, SdramError};
use super::tools::{self, Toolbox};
use super::{top, OpenBoard};

/// The SoC for `cfg` with `memory_kib` of device memory, with its memories for the block-RAM
/// pre-check.
pub fn soc_design(cfg: &HwConfig, memory_kib: u32) -> Result<top::Design, vta_hw::soc::SocError> {
    let mut params = vta_hw::soc::SocParams::for_config(cfg);
    params.mem_bytes = memory_kib.checked_mul(1024).ok_or_else(|| {
        vta_hw::soc::SocError::Memory(format!("{memory_kib} KiB of device memory is too large"))
    })?;
    let g = vta_hw::soc::generate(cfg, &params)?;
    let mut memories = scratchpads(cfg);
    let bits = u64::from(cfg.axi_data_width);
    memories.push(Memory {
        name: "device memory".into(),
        key: None,
        depth: u64::from(params.mem_bytes) * 8 / bits,
        width: bits,
    });
    Ok(top::Design {
        verilog: g.verilog,
        top: "vta_soc".into(),
        ports: soc_ports(&params, false),
        memories,
        description: format!(
            "vta_soc (accelerator, {memory_kib} KiB device memory, UART bridge at {} baud)",
            params.baud
        ),
    })
}

/// The SoC for `cfg` with the board's SDRAM (`sdram`) as device memory behind `controller`
/// (see [`super::sdram::controller`]); only the scratchpads count for the block-RAM
/// pre-check.
pub fn soc_design_sdram(
    cfg: &HwConfig,
    sdram: &Sdram,
    controller: &Controller,
) -> Result<top::Design, SdramError> {
    let params = super::sdram::soc_params(cfg, sdram);
    let g = vta_hw::soc::generate_with(cfg, &params, &controller.device_memory(sdram))?;
    Ok(top::Design {
        verilog: g.verilog,
        top: "vta_soc".into(),
        ports: soc_ports(&params, true),
        memories: scratchpads(cfg),
        description: format!(
            "vta_soc (accelerator, {} MiB SDR SDRAM through LiteDRAM, UART bridge at {} baud)",
            sdram.mib, params.baud
        ),
    })
}

/// The SoC's pins (`vta_hw::soc`'s top), with the SDRAM's when it has them.
fn soc_ports(params: &vta_hw::soc::SocParams, sdram: bool) -> top::Ports {
    top::Ports {
        clock: "clk".into(),
        reset: params.reset_pin().into(),
        uart_rx: "uart_rx".into(),
        uart_tx: "uart_tx".into(),
        leds: top::LedPorts::Bits(vec![
            "led_busy".into(),
            "led_done".into(),
            "led_error".into(),
        ]),
        sdram,
    }
}

/// The accelerator's scratchpads, for the block-RAM pre-check.
pub fn scratchpads(cfg: &HwConfig) -> Vec<Memory> {
    [
        (MemType::Uop, "UOP", Some("LOG_UOP_BUFF_SIZE")),
        (MemType::Inp, "INP", Some("LOG_INP_BUFF_SIZE")),
        (MemType::Wgt, "WGT", Some("LOG_WGT_BUFF_SIZE")),
        (MemType::Acc, "ACC", Some("LOG_ACC_BUFF_SIZE")),
        // OUT mirrors ACC: it shrinks with LOG_ACC_BUFF_SIZE.
        (MemType::Out, "OUT", None),
    ]
    .into_iter()
    .map(|(m, name, key)| Memory {
        name: name.into(),
        key: key.map(str::to_string),
        depth: u64::from(cfg.depth(m)),
        width: u64::from(cfg.elem_bits(m)),
    })
    .collect()
}

/// Resources and Fmax of `design` on `board` with the design clock at `clock_mhz`: the open
/// flow through place and route, no bitstream, with the tools of the cache at `cache_root`
/// and run in a work directory under it (`<cache_root>/openflow/<board>-<hash>`), where the
/// outcome is kept, keyed by a hash of the design's Verilog, the board, the clock, the seed
/// and the tool versions, so asking again costs nothing. Returns the outcome, the work
/// directory and whether it came from the cache.
pub fn resources_and_fmax(
    cache_root: &Path,
    board: &OpenBoard,
    design: &top::Design,
    clock_mhz: f64,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<(Outcome, PathBuf, bool), FlowError> {
    let key = isa::container::fnv1a(
        format!(
            "{}\n{board:?}\n{clock_mhz}\n{seed}\n{:?}",
            design.verilog,
            tools::PACKAGES
        )
        .as_bytes(),
    );
    let work = cache_root.join(format!("openflow/{}-{key:016x}", board.name));
    let saved = work.join("outcome.json");
    if let Ok(text) = std::fs::read_to_string(&saved) {
        if let Ok(o) = serde_json::from_str(&text) {
            return Ok((o, work, true));
        }
    }
    let spec = flow::Spec {
        board,
        design,
        clock_mhz,
        out: &work,
        pack: false,
        seed,
    };
    let outcome = flow::run(&spec, &Toolbox::new(cache_root), progress)?;
    // A cache entry that cannot be written only costs the next call the run again.
    if let Ok(text) = serde_json::to_string(&outcome) {
        let _ = std::fs::write(&saved, text);
    }
    Ok((outcome, work, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soc_design_lists_its_memories_and_refuses_an_impossible_memory() {
        let cfg = HwConfig::preset("small").unwrap();
        let d = soc_design(&cfg, 32).unwrap();
        assert_eq!(d.top, "vta_soc");
        assert!(d.verilog.contains("module vta_soc"));
        let names: Vec<&str> = d.memories.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["UOP", "INP", "WGT", "ACC", "OUT", "device memory"]);
        let mem = d.memories.last().unwrap();
        assert_eq!(mem.bytes(), 32 * 1024);
        let e = soc_design(&cfg, u32::MAX).unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
    }
}
