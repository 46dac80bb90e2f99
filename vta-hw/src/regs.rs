//! The register map of the AXI4-Lite control port as the hardware's generator sees it: the
//! map itself is `drivers::regs` (re-exported here, so a board binary reaches it without the
//! HDL), plus the map as JSON ([`json()`]) for the bitstream's manifest and drivers in other
//! languages.

pub use drivers::regs::*;

use serde_json::{json, Value};

/// The register map as JSON for drivers: the port, address width, version value, the
/// config it was generated for (string, ISA hash) and every register with its offset,
/// access and description, plus CONTROL's bits.
pub fn json(cfg: &isa::HwConfig) -> String {
    let regs: Vec<Value> = MAP
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "offset": r.offset,
                "offset_hex": format!("0x{:02x}", r.offset),
                "access": r.access.name(),
                "description": r.doc,
            })
        })
        .collect();
    let hash = cfg.isa_hash();
    let v = json!({
        "port": "s_axi_control",
        "addr_bits": ADDR_BITS,
        "data_bits": 32,
        "version_value": VERSION_VALUE,
        "config_string": cfg.config_string(),
        "isa_hash": format!("{hash:016x}"),
        "isa_hash_lo": hash as u32,
        "isa_hash_hi": (hash >> 32) as u32,
        "control_bits": {
            "start": CONTROL_START,
            "running": CONTROL_RUNNING,
            "done": CONTROL_DONE,
            "error": CONTROL_ERROR,
        },
        "registers": regs,
    });
    serde_json::to_string_pretty(&v).expect("register map serializes") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_every_register() {
        let cfg = isa::HwConfig::default();
        let v: Value = serde_json::from_str(&json(&cfg)).unwrap();
        assert_eq!(v["registers"].as_array().unwrap().len(), MAP.len());
        assert_eq!(v["isa_hash"], format!("{:016x}", cfg.isa_hash()));
    }
}
