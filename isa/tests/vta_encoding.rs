//! VTA-encoded instructions and micro-ops (produced by VTA's own `hw_spec.h`, see data/README.md)
//! decode to exactly VTA's field values, and encode back to the same bytes.

use isa::{Codec, HwConfig};
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn check_golden(config_file: &str, golden: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let cfg = HwConfig::load(&format!("{dir}{config_file}")).unwrap();
    let codec = Codec::new(&cfg);
    let text = std::fs::read_to_string(format!("{dir}{golden}")).unwrap();
    let (mut insns, mut uops) = (0, 0);
    for (line_no, line) in text.lines().enumerate() {
        let mut row: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
        if let Some(Value::String(b)) = row.remove("uop") {
            let bytes: [u8; 4] = hex(&b).try_into().unwrap();
            let u = codec.decode_uop(&bytes);
            assert_eq!(
                codec.uop_to_json(&u),
                Value::Object(row),
                "{golden}:{}",
                line_no + 1
            );
            assert_eq!(codec.encode_uop(&u).unwrap(), bytes);
            uops += 1;
        } else {
            let Some(Value::String(b)) = row.remove("bytes") else {
                panic!("{golden}:{}: no bytes", line_no + 1)
            };
            let bytes: [u8; 16] = hex(&b).try_into().unwrap();
            let insn = codec
                .decode(&bytes)
                .unwrap_or_else(|e| panic!("{golden}:{}: {e}", line_no + 1));
            assert_eq!(
                codec.to_vta_json(&insn).unwrap(),
                Value::Object(row),
                "{golden}:{}",
                line_no + 1
            );
            assert_eq!(
                codec.encode(&insn).unwrap(),
                bytes,
                "{golden}:{}",
                line_no + 1
            );
            insns += 1;
        }
    }
    assert!(
        insns >= 50 && uops >= 20,
        "the golden file covers too little"
    );
}

#[test]
fn default_config_matches_vta_encoding() {
    check_golden("vta_config.json", "vta_golden_default.jsonl");
}

#[test]
fn small_config_matches_vta_encoding() {
    check_golden("vta_config_small.json", "vta_golden_small.jsonl");
}
