//! `--json` output: the machine-readable documents of `vta run`, `vta compile` and `vta bench`,
//! built from the same figures their text reports print.

use serde_json::Value;

pub use vta_runtime::report::{json_counters as counters, json_ms as ms};

/// Pretty JSON text with a final newline, as every `--json` prints it.
pub fn text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    s
}
