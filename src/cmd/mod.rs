//! The subcommands, and the helpers they share.

pub mod asm;
pub mod bench;
pub mod bitstream;
pub mod compile;
pub mod config;
pub mod demo;
pub mod disasm;
pub mod dse;
pub mod hw;
pub mod json;
pub mod openflow;
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
pub const CONFIG_HELP: &str = "Config: a JSON file or a preset name (see `vta config presets`)";

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

/// Parses a byte count: a whole number with an optional binary unit (`B`, `KiB`, `MiB`, `GiB`,
/// `TiB`; `K`, `M`, `G`, `T` mean the same).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let not_a_size =
        || format!("'{s}' is not a size; write e.g. 512MiB, 8GiB or a number of bytes");
    if digits.is_empty() {
        return Err(not_a_size());
    }
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        u => {
            return Err(format!(
                "unknown unit '{u}' in '{s}'; write a whole number of bytes, optionally with \
                 KiB, MiB, GiB or TiB (e.g. 8GiB)"
            ))
        }
    };
    let n: u64 = digits.parse().map_err(|_| {
        format!("'{s}' is not a size; write e.g. 512MiB, 8GiB or a number of bytes")
    })?;
    n.checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("'{s}' is not a usable size: it must be above 0 and below 16 EiB"))
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_parse_with_binary_units_and_bad_ones_are_named() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("2 TiB"), Ok(2 << 40));
        assert!(parse_bytes("8GB")
            .unwrap_err()
            .contains("unknown unit 'GB'"));
        assert!(parse_bytes("lots").unwrap_err().contains("is not a size"));
        assert!(parse_bytes("0").unwrap_err().contains("above 0"));
        assert!(parse_bytes("99999999T")
            .unwrap_err()
            .contains("below 16 EiB"));
    }
}
