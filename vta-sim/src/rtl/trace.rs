//! Instruction traces of RTL runs in the Chrome / Perfetto trace-event format: a JSON object
//! with a `traceEvents` array of complete (`"ph": "X"`) events, one thread (track) per
//! module, which `ui.perfetto.dev` and `chrome://tracing` open.
//!
//! Tracks: **load**, **compute** and **store** show each instruction from the cycle it is
//! taken from its command queue (its tokens popped) to the cycle its tokens are pushed
//! (name: opcode and index in the stream, e.g. `GEMM #12`), and each wait on a token as a
//! slice of its own (`wait l2g` before an instruction that pops an empty queue; `push g2s`
//! inside an instruction that waits for room in a full queue). **core** shows each GEMM/ALU
//! instruction in the execution core, from its hand-over by compute to its completion
//! (compute retires a GEMM/ALU without pushes at the hand-over and takes the next
//! instruction while the core works; the core accepts the next one as the current one
//! issues its last micro-op, and the slice of the next one starts where the previous one's
//! ends). **DMA read** and **DMA write** show each AXI burst's data phase, first beat to
//! last. Time stamps are the cycle at the config's `CLOCK_MHZ`; every event also carries its
//! cycle numbers (counted from the start of the run) in `args`.

use serde_json::{json, Value};

/// The tracks of a trace, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceTrack {
    Load,
    Compute,
    Core,
    Store,
    DmaRead,
    DmaWrite,
}

impl TraceTrack {
    pub const ALL: [TraceTrack; 6] = [
        TraceTrack::Load,
        TraceTrack::Compute,
        TraceTrack::Core,
        TraceTrack::Store,
        TraceTrack::DmaRead,
        TraceTrack::DmaWrite,
    ];

    /// The track's name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            TraceTrack::Load => "load",
            TraceTrack::Compute => "compute",
            TraceTrack::Core => "compute: execution core",
            TraceTrack::Store => "store",
            TraceTrack::DmaRead => "DMA read",
            TraceTrack::DmaWrite => "DMA write",
        }
    }

    fn tid(self) -> u32 {
        self as u32 + 1
    }
}

/// One slice: `[start, end)` in cycles since the accelerator was created.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    pub track: TraceTrack,
    pub name: String,
    /// `insn`, `token` or `dma`.
    pub cat: &'static str,
    pub start: u64,
    pub end: u64,
    /// Extra fields shown with the slice.
    pub args: Vec<(&'static str, Value)>,
}

/// A recorded trace of one or more runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The config string, for the process name.
    pub config: String,
    /// Cycles per microsecond.
    pub clock_mhz: u32,
    /// Every slice, in the order they ended.
    pub events: Vec<TraceEvent>,
    /// Cycle at which each traced run started (its first register write), for `args`.
    pub run_starts: Vec<u64>,
}

impl Trace {
    /// The events of one track, in start order.
    pub fn track(&self, t: TraceTrack) -> Vec<&TraceEvent> {
        let mut v: Vec<&TraceEvent> = self.events.iter().filter(|e| e.track == t).collect();
        v.sort_by_key(|e| (e.start, e.end));
        v
    }

    /// The start of the run an event at `cycle` belongs to.
    fn run_start(&self, cycle: u64) -> u64 {
        self.run_starts
            .iter()
            .rev()
            .find(|&&s| s <= cycle)
            .copied()
            .unwrap_or(0)
    }

    /// The trace as Chrome trace-event JSON.
    pub fn to_json(&self) -> String {
        let us = |c: u64| c as f64 / self.clock_mhz.max(1) as f64;
        let mut ev: Vec<Value> = vec![json!({
            "name": "process_name", "ph": "M", "pid": 1, "tid": 0,
            "args": {"name": format!("vta RTL simulation ({})", self.config)}
        })];
        for t in TraceTrack::ALL {
            ev.push(json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": t.tid(),
                "args": {"name": t.name()}
            }));
            ev.push(json!({
                "name": "thread_sort_index", "ph": "M", "pid": 1, "tid": t.tid(),
                "args": {"sort_index": t.tid()}
            }));
        }
        let mut sorted: Vec<&TraceEvent> = self.events.iter().collect();
        // Enclosing slices first, so viewers nest them.
        sorted.sort_by_key(|e| (e.track, e.start, std::cmp::Reverse(e.end)));
        for e in sorted {
            let t0 = self.run_start(e.start);
            let mut args = serde_json::Map::new();
            args.insert("start_cycle".into(), json!(e.start - t0));
            args.insert("cycles".into(), json!(e.end - e.start));
            for (k, v) in &e.args {
                args.insert(k.to_string(), v.clone());
            }
            ev.push(json!({
                "name": e.name,
                "cat": e.cat,
                "ph": "X",
                "pid": 1,
                "tid": e.track.tid(),
                "ts": us(e.start),
                "dur": us(e.end - e.start),
                "args": Value::Object(args),
            }));
        }
        let v = json!({
            "traceEvents": ev,
            "displayTimeUnit": "ns",
            "otherData": {
                "config": self.config,
                "clock_mhz": self.clock_mhz,
                "time": "1 cycle = 1/CLOCK_MHZ microseconds",
            },
        });
        serde_json::to_string(&v).expect("a trace serializes") + "\n"
    }
}
