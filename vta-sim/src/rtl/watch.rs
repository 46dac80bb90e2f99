//! The per-cycle monitor of an RTL run: reads `vta_top`'s debug outputs (`vta_hw::debug`)
//! every cycle to notice progress (for hang detection), to follow which instruction each
//! module is executing (for hang diagnoses and traces), to record trace slices, and to open
//! and close a VCD waveform over a window of cycles.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::PathBuf;

use hdl::verilator::{Model, PortId};
use hdl::widgets::axi4_memory::AxiMemory;
use isa::{HwConfig, Insn};
use serde_json::json;
use vta_hw::debug::{self, DebugState, SeqState};

use super::accelerator::Monitor;
use super::trace::{Trace, TraceEvent, TraceTrack};

/// Bits of `dbg_state` that are one-cycle events (progress even when repeated).
const PULSES: u64 = TRACKED_PULSES | 1 << debug::UOP_EVENT;

/// The pulses instruction tracking follows (a micro-op's write-back is only progress).
const TRACKED_PULSES: u64 =
    1 << debug::EXEC_HANDED | 1 << debug::EXEC_DONE | 1 << debug::DISPATCHED;

/// What the monitor knows about one instruction of the stream.
#[derive(Clone, Debug)]
pub(crate) struct InsnInfo {
    /// `GEMM`, `LOAD INP`, `ALU MAX`, ...
    pub label: String,
    /// Its assembly text.
    pub text: String,
    /// Module index (0 load, 1 compute, 2 store).
    pub module: usize,
    /// Queues it pops, and pushes.
    pub pops: Vec<&'static str>,
    pub pushes: Vec<&'static str>,
}

impl InsnInfo {
    pub fn new(cfg: &HwConfig, insn: &Insn) -> InsnInfo {
        let label = match insn {
            Insn::Load(m) => format!("LOAD {}", m.memory_type.name().to_uppercase()),
            Insn::Store(_) => "STORE".into(),
            Insn::Gemm(g) if g.lp.reset_reg => "GEMM reset".into(),
            Insn::Gemm(_) => "GEMM".into(),
            Insn::Alu(a) => format!("ALU {}", a.op.name().to_uppercase()),
            Insn::Finish(_) => "FINISH".into(),
        };
        let text = isa::asm::print_insns(cfg, std::slice::from_ref(insn));
        let text = text.split(';').next().unwrap_or("").trim().to_string();
        let d = insn.deps();
        let module = insn.module();
        // Flags that are illegal on a module are ignored by the hardware (spec 5.2).
        let set = |push: bool| -> Vec<&'static str> {
            isa::tokens::legal_flags(module)
                .filter(|&(f, _)| f.is_push() == push && d.get(f))
                .map(|(_, q)| q.name())
                .collect()
        };
        let (pops, pushes) = (set(false), set(true));
        InsnInfo {
            label,
            text,
            module: module as usize,
            pops,
            pushes,
        }
    }
}

/// Instruction tracking of the run in progress.
struct Track {
    insns: Vec<InsnInfo>,
    /// Stream indices of each module's instructions, in order.
    lists: [Vec<u32>; 3],
    /// Instructions each module has taken.
    pos: [usize; 3],
    /// Each module's instruction in progress: (stream index, cycle taken).
    cur: [Option<(u32, u64)>; 3],
    /// Since when each module waits to pop (queues named), or to push.
    wait: [Option<(u64, String)>; 3],
    push: [Option<(u64, String)>; 3],
    /// GEMM/ALU instructions in the execution core: (stream index, cycle handed over).
    core: VecDeque<(u32, u64)>,
    core_end: u64,
    dispatched: u64,
}

/// A VCD window: open the waveform at `start`, close it at `end` (cycles from the start of
/// the next run, made absolute when it begins).
struct Vcd {
    path: PathBuf,
    clock_mhz: f64,
    start: u64,
    end: u64,
    absolute: bool,
    open: bool,
    done: bool,
}

/// The monitor (see the module docs).
pub(crate) struct Watch {
    state_port: PortId,
    token_ports: [PortId; 4],
    last_state: u64,
    last_beats: u64,
    /// Last cycle with progress: a change of the debug state, an event pulse, or an AXI
    /// data beat.
    pub last_progress: u64,
    track: Option<Track>,
    trace: Option<Trace>,
    vcd: Option<Vcd>,
    /// Why the waveform could not be opened.
    pub vcd_error: Option<String>,
}

impl Watch {
    pub fn new(model: &Model) -> Watch {
        let token_ports = isa::Queue::ALL.map(|q| model.port(&debug::tokens_port(q.name())));
        Watch {
            state_port: model.port(debug::STATE_PORT),
            token_ports,
            last_state: 0,
            last_beats: 0,
            last_progress: 0,
            track: None,
            trace: None,
            vcd: None,
            vcd_error: None,
        }
    }

    /// Starts following a run whose first register write is at cycle `t0`.
    pub fn begin_run(&mut self, t0: u64, insns: Vec<InsnInfo>) {
        let mut lists: [Vec<u32>; 3] = Default::default();
        for (i, info) in insns.iter().enumerate() {
            lists[info.module].push(i as u32);
        }
        self.track = Some(Track {
            insns,
            lists,
            pos: [0; 3],
            cur: [None; 3],
            wait: Default::default(),
            push: Default::default(),
            core: VecDeque::new(),
            core_end: 0,
            dispatched: 0,
        });
        self.last_progress = t0;
        if let Some(t) = &mut self.trace {
            t.run_starts.push(t0);
        }
        if let Some(v) = &mut self.vcd {
            if !v.absolute {
                v.start = v.start.saturating_add(t0);
                v.end = v.end.saturating_add(t0);
                v.absolute = true;
            }
        }
    }

    /// Ends following the run at cycle `now`: open slices are closed there.
    pub fn end_run(&mut self, now: u64) {
        if let (Some(tr), Some(trace)) = (&mut self.track, &mut self.trace) {
            for k in 0..3 {
                if let Some((c, name)) = tr.wait[k].take() {
                    trace.events.push(wait_event(k, name, c, now));
                }
                if let Some((c, name)) = tr.push[k].take() {
                    trace.events.push(push_event(k, name, c, now));
                }
                if let Some((i, c)) = tr.cur[k].take() {
                    trace.events.push(insn_event(tr, k, i, c, now));
                }
            }
            while let Some((i, c)) = tr.core.pop_front() {
                trace
                    .events
                    .push(core_event(tr, i, c.max(tr.core_end), now));
            }
        }
        self.track = None;
    }

    /// Starts recording a trace (kept across runs until taken).
    pub fn start_trace(&mut self, cfg: &HwConfig) {
        self.trace = Some(Trace {
            config: cfg.config_string(),
            clock_mhz: cfg.clock_mhz,
            events: vec![],
            run_starts: vec![],
        });
    }

    /// Whether a trace is being recorded.
    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    /// Adds slices to the trace being recorded.
    pub fn add_events(&mut self, ev: impl IntoIterator<Item = TraceEvent>) {
        if let Some(t) = &mut self.trace {
            t.events.extend(ev);
        }
    }

    /// Stops recording and returns the trace.
    pub fn take_trace(&mut self) -> Option<Trace> {
        self.trace.take()
    }

    /// Writes a VCD waveform to `path` from cycle `start` to `end` of the next run, its time
    /// stamps in picoseconds at `clock_mhz`.
    pub fn set_vcd(&mut self, path: PathBuf, clock_mhz: f64, start: u64, end: u64) {
        self.vcd = Some(Vcd {
            path,
            clock_mhz,
            start,
            end,
            absolute: false,
            open: false,
            done: false,
        });
    }

    /// Closes the waveform if it is open; forgets the window.
    pub fn close_vcd(&mut self, model: &mut Model) {
        if let Some(v) = self.vcd.take() {
            if v.open && !v.done {
                model.trace_close();
            }
        }
    }

    /// Each module's state, the core, the token queues, fetch and the memory, for a hang or
    /// timeout message.
    pub fn diagnose(&self, model: &Model, mem: &AxiMemory, cfg: &HwConfig) -> String {
        let st = DebugState::decode(model.get(self.state_port));
        let mut s = String::new();
        let tr = self.track.as_ref();
        let describe = |i: u32| match tr.and_then(|t| t.insns.get(i as usize)) {
            Some(info) => format!("instruction {i} ({})", info.text),
            None => format!("instruction {i}"),
        };
        for (k, name) in debug::MODULES.iter().enumerate() {
            let m = st.modules[k];
            let _ = write!(s, "\n  {name:<8} ");
            let next = tr.and_then(|t| t.lists[k].get(t.pos[k]).copied());
            let total = tr.map_or(0, |t| t.lists[k].len());
            let taken = tr.map_or(0, |t| t.pos[k]);
            match m.state {
                SeqState::Exec => {
                    let cur = tr.and_then(|t| t.cur[k]).map(|(i, _)| describe(i));
                    let _ = write!(
                        s,
                        "executing {}",
                        cur.unwrap_or_else(|| "an instruction".into())
                    );
                }
                SeqState::Push => {
                    let cur = tr.and_then(|t| t.cur[k]);
                    let q = cur
                        .and_then(|(i, _)| tr.and_then(|t| t.insns.get(i as usize)))
                        .map(|info| info.pushes.join(" and "))
                        .unwrap_or_default();
                    let _ = write!(
                        s,
                        "{} done, waiting for room to push {q}",
                        cur.map(|(i, _)| describe(i))
                            .unwrap_or_else(|| "an instruction".into())
                    );
                }
                SeqState::Idle if m.waiting_pop => {
                    let q = next
                        .and_then(|i| tr.and_then(|t| t.insns.get(i as usize)))
                        .map(|info| info.pops.join(" and "))
                        .unwrap_or_default();
                    let _ = write!(
                        s,
                        "idle; {} waits to pop {q}",
                        next.map(describe)
                            .unwrap_or_else(|| "the next instruction".into())
                    );
                }
                SeqState::Idle if m.queued => {
                    let _ = write!(s, "idle with an instruction queued");
                }
                SeqState::Idle if taken == total => {
                    let _ = write!(s, "idle, all {total} of its instructions done");
                }
                SeqState::Idle => {
                    let _ = write!(
                        s,
                        "idle, command queue empty ({taken} of {total} instructions taken; next: {})",
                        next.map(describe).unwrap_or_default()
                    );
                }
            }
            if k == 1 {
                let inflight = tr.map_or(0, |t| t.core.len());
                let _ = write!(
                    s,
                    "; execution core {}",
                    if st.exec_busy {
                        format!("busy ({inflight} instruction(s) in flight)")
                    } else {
                        "idle".into()
                    }
                );
            }
        }
        let counts: Vec<String> = isa::Queue::ALL
            .iter()
            .zip(&self.token_ports)
            .map(|(q, &p)| format!("{q} {}", model.get(p)))
            .collect();
        let _ = write!(
            s,
            "\n  tokens   {} (capacity {} each)",
            counts.join(", "),
            cfg.token_queue_depth
        );
        if let Some(t) = tr {
            let _ = write!(
                s,
                "\n  fetch    {} of {} instructions dispatched",
                t.dispatched,
                t.insns.len()
            );
        }
        let (r, w) = mem.outstanding();
        let _ = write!(
            s,
            "\n  memory   {r} read and {w} write burst(s) outstanding"
        );
        s
    }

    fn step(&mut self, now: u64, st: u64, model: &Model) {
        let (Some(tr), prev) = (&mut self.track, DebugState::decode(self.last_state)) else {
            return;
        };
        let d = DebugState::decode(st);
        let mut none = vec![];
        let tracing = self.trace.is_some();
        let out = match &mut self.trace {
            Some(t) => &mut t.events,
            None => &mut none,
        };
        if d.dispatched {
            tr.dispatched += 1;
        }
        for k in 0..3 {
            let (m, p) = (d.modules[k], prev.modules[k]);
            // Waiting to pop.
            if tracing && m.state == SeqState::Idle && m.waiting_pop && tr.wait[k].is_none() {
                let next = tr.lists[k].get(tr.pos[k]).copied();
                let empty: Vec<&str> = next
                    .and_then(|i| tr.insns.get(i as usize))
                    .map(|info| {
                        info.pops
                            .iter()
                            .copied()
                            .filter(|q| {
                                let qi = isa::Queue::ALL.iter().position(|x| x.name() == *q);
                                qi.is_none_or(|qi| model.get(self.token_ports[qi]) == 0)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                tr.wait[k] = Some((now, format!("wait {}", empty.join("+"))));
            }
            // Taken: idle -> executing.
            if p.state == SeqState::Idle && m.state != SeqState::Idle {
                if let Some((c, name)) = tr.wait[k].take() {
                    if tracing {
                        out.push(wait_event(k, name, c, now));
                    }
                }
                let idx = tr.lists[k].get(tr.pos[k]).copied().unwrap_or(u32::MAX);
                tr.pos[k] += 1;
                tr.cur[k] = Some((idx, now));
            }
            // Waiting to push.
            if tracing && m.state == SeqState::Push && p.state != SeqState::Push {
                let q = tr.cur[k]
                    .and_then(|(i, _)| tr.insns.get(i as usize))
                    .map(|info| info.pushes.join("+"))
                    .unwrap_or_default();
                tr.push[k] = Some((now, format!("push {q}")));
            }
            if p.state == SeqState::Push && m.state != SeqState::Push {
                if let Some((c, name)) = tr.push[k].take() {
                    if tracing {
                        out.push(push_event(k, name, c, now));
                    }
                }
            }
            // Complete: back to idle.
            if p.state != SeqState::Idle && m.state == SeqState::Idle {
                if let Some((i, c)) = tr.cur[k].take() {
                    if tracing {
                        out.push(insn_event(tr, k, i, c, now));
                    }
                }
            }
        }
        // The execution core: hand-over in the cycle compute's GEMM/ALU leaves EXEC or later.
        if d.exec_handed {
            let idx = tr.cur[1].map_or(u32::MAX, |(i, _)| i);
            tr.core.push_back((idx, now));
        }
        if d.exec_done {
            if let Some((i, c)) = tr.core.pop_front() {
                let start = c.max(tr.core_end);
                if tracing {
                    out.push(core_event(tr, i, start, now + 1));
                }
                tr.core_end = now + 1;
            }
        }
    }
}

fn track_of(k: usize) -> TraceTrack {
    [TraceTrack::Load, TraceTrack::Compute, TraceTrack::Store][k]
}

fn wait_event(k: usize, name: String, start: u64, end: u64) -> TraceEvent {
    TraceEvent {
        track: track_of(k),
        name,
        cat: "token",
        start,
        end,
        args: vec![],
    }
}

fn push_event(k: usize, name: String, start: u64, end: u64) -> TraceEvent {
    TraceEvent {
        track: track_of(k),
        name,
        cat: "token",
        start,
        end,
        args: vec![],
    }
}

fn insn_args(tr: &Track, i: u32) -> (String, Vec<(&'static str, serde_json::Value)>) {
    match tr.insns.get(i as usize) {
        Some(info) => (
            format!("{} #{i}", info.label),
            vec![("insn", json!(i)), ("text", json!(info.text))],
        ),
        None => ("?".into(), vec![]),
    }
}

fn insn_event(tr: &Track, k: usize, i: u32, start: u64, end: u64) -> TraceEvent {
    let (name, args) = insn_args(tr, i);
    TraceEvent {
        track: track_of(k),
        name,
        cat: "insn",
        start,
        end,
        args,
    }
}

fn core_event(tr: &Track, i: u32, start: u64, end: u64) -> TraceEvent {
    let (name, args) = insn_args(tr, i);
    TraceEvent {
        track: TraceTrack::Core,
        name,
        cat: "insn",
        start,
        end: end.max(start),
        args,
    }
}

impl Monitor for Watch {
    #[inline]
    fn cycle(&mut self, cycle: u64, model: &mut Model, mem: &AxiMemory) {
        let st = model.get(self.state_port);
        let s = mem.stats();
        let beats = s.read_beats + s.write_beats;
        if st != self.last_state || st & PULSES != 0 || beats != self.last_beats {
            self.last_progress = cycle;
            self.last_beats = beats;
            // Without a trace, only state changes and the tracked pulses move the tracking
            // (most cycles of a GEMM are a micro-op pulse or a data beat and nothing else).
            let tracked = self.trace.is_some() || st != self.last_state || st & TRACKED_PULSES != 0;
            if tracked && self.track.is_some() {
                self.step(cycle, st, model);
            }
            self.last_state = st;
        }
        if let Some(v) = &mut self.vcd {
            if !v.absolute {
                return;
            }
            if !v.open && cycle >= v.start {
                v.open = true;
                if let Err(e) = model.trace_open(&v.path, v.clock_mhz) {
                    self.vcd_error = Some(e.to_string());
                    v.done = true;
                }
            }
            if v.open && !v.done && cycle >= v.end {
                model.trace_close();
                v.done = true;
            }
        }
    }
}
