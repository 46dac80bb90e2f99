//! `--json` output: the machine-readable documents of `vta run`, `vta compile` and `vta bench`,
//! built from the same figures their text reports print.

use serde_json::{json, Map, Value};
use vta_runtime::report::{LaunchRun, LayerRun, RunResult};

/// Milliseconds of a duration, as scripts compare them.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Named counters as a JSON object, in their order.
pub fn counters<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(n, v)| (n.to_string(), Value::from(v)))
            .collect::<Map<_, _>>(),
    )
}

fn layer(l: &LayerRun) -> Value {
    json!({
        "step": l.step,
        "name": l.name,
        "kind": l.kind,
        "place": l.place.to_string(),
        "launch": l.launch,
        "note": l.note,
        "host_ms": ms(l.wall),
    })
}

fn launch(l: &LaunchRun) -> Value {
    let r = &l.report;
    json!({
        "launch": l.launch,
        "steps": l.steps,
        "host_ms": ms(l.wall),
        "device_ms": ms(r.wall_time),
        "counters": counters(r.counters.iter().map(|(n, v)| (n.as_str(), *v))),
        "extras": counters(r.extras.iter().map(|(n, v)| (n.as_str(), *v))),
        "dram_bytes": l.dram_bytes(),
    })
}

/// The per-step and per-launch breakdown of a run (summed over its samples) and its totals
/// (host-device traffic per inference).
pub fn run_result(r: &RunResult) -> Value {
    json!({
        "backend": r.backend,
        "samples": r.samples,
        "host_ms": ms(r.wall),
        "device_launches": r.launches.len(),
        "host_to_device_bytes": r.host_to_device_bytes(),
        "device_to_host_bytes": r.device_to_host_bytes(),
        "device_memory_bytes": {
            "total": r.memory.total(),
            "constants": r.memory.constants,
            "activations": r.memory.arena,
            "loaded": r.memory.loaded,
        },
        "steps": r.layers.iter().map(layer).collect::<Vec<_>>(),
        "launches": r.launches.iter().map(launch).collect::<Vec<_>>(),
    })
}

/// Pretty JSON text with a final newline, as every `--json` prints it.
pub fn text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    s
}
