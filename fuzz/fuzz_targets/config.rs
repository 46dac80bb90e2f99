//! The config loader (`isa::HwConfig::from_json_str`). A config that loads must write JSON
//! that loads to the same config.
#![no_main]

use isa::HwConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = HwConfig::from_json_str(text, "fuzz.json") {
        let again = HwConfig::from_json_str(&cfg.to_json(), "to_json").expect("it reloads");
        assert_eq!(again, cfg);
    }
});
