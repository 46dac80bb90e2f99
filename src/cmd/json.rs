//! `--json` output: the machine-readable documents of `vta run`, `vta compile` and `vta bench`,
//! built from the same figures their text reports print.

use serde_json::Value;
use vta_runtime::report::RunResult;

pub use vta_runtime::report::{json_counters as counters, json_ms as ms};

/// The per-step and per-launch breakdown of a run (see [`RunResult::to_json`]).
pub fn run_result(r: &RunResult) -> Value {
    r.to_json()
}

/// Pretty JSON text with a final newline, as every `--json` prints it.
pub fn text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    s
}
