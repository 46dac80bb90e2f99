//! The subcommands, and the helpers they share.

pub mod asm;
pub mod bench;
pub mod bitstream;
pub mod check;
pub mod compile;
pub mod config;
pub mod demo;
pub mod disasm;
pub mod dse;
pub mod hw;
pub mod json;
pub mod openflow;
pub mod pool;
pub mod progress;
pub mod run;
pub mod serve;
pub mod sim;
pub mod soc;
pub mod zoo;

use std::path::Path;

use anyhow::{Context, Result};
use isa::HwConfig;

/// Help text of every `--config` option.
pub const CONFIG_HELP: &str = "Config: a JSON file, a preset name (see `vta config presets`), or \
    a preset with other data widths: i4w4 (the default preset's), small:i8w2a16";

/// Loads `--config`, a file or a preset name; `None` gives the `default` preset.
pub fn load_config(spec: Option<&str>) -> Result<HwConfig> {
    Ok(HwConfig::load(spec.unwrap_or("default"))?)
}

/// Reads a whole input file; the error names it.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Help text of every `--memory-budget` option.
pub const MEMORY_BUDGET_HELP: &str = "Most memory all of the model's tensors together may take \
    (e.g. 512MiB, 8GiB, or bytes); a model beyond it is refused, naming the tensor, before \
    anything is allocated [default: 4GiB]";
