//! The simulated SoC with the ULX3S's SDR SDRAM as device memory: the LiteDRAM controller the
//! open flow generates for the board (installed and generated into the tool cache on first
//! use) and a model of the chip (`vta_sim::sdram_model`), at the simulation's clock.

use std::path::PathBuf;

use bitstreams::openflow::{board, sdram};
use isa::HwConfig;
use vta_sim::sdram_model::SdramChip;
use vta_sim::soc::{self, SimMemory, SimOptions};

/// The simulation options of `cfg`'s SoC with the ULX3S-85F's SDRAM, models cached in
/// `model_cache`.
pub fn sdram_options(cfg: &HwConfig, model_cache: PathBuf) -> SimOptions {
    let b = board::builtin()
        .into_iter()
        .find(|b| b.name == "ulx3s-85f")
        .expect("the ULX3S-85F board");
    let sd = b.sdram.as_ref().expect("the ULX3S has SDRAM");
    let params = vta_hw::soc::SocParams {
        mem_bytes: sd.mib << 20,
        ..soc::sim_params(cfg)
    };
    let cache = bitstreams::cache_dir().expect("a cache directory (HOME or VTA_CACHE_DIR)");
    let ctl = sdram::controller(&cache, sd, params.clock_hz, cfg.axi_data_width, &mut |s| {
        eprintln!("[litedram] {s}")
    })
    .unwrap_or_else(|e| panic!("no SDRAM controller: {e}"));
    SimOptions {
        params: Some(params),
        cache_dir: Some(model_cache),
        memory: SimMemory::Sdram {
            controller: ctl.device_memory(sd),
            chip: SdramChip::mt48lc16m16(),
        },
        ..SimOptions::default()
    }
}
