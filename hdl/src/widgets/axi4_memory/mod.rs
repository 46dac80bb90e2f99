//! A simulation model of an AXI4 slave memory for Verilated designs with an AXI4 master
//! port (such as one built around [`axi4_master`](super::axi4_master)): configurable
//! latency and bandwidth ([`MemTiming`]), traffic statistics and an optional burst log.
//!
//! Each cycle the memory drives its outputs from its state, like registered logic
//! ([`AxiMemory::drive`]), the model evaluates, and the memory samples the master's outputs
//! and completes the cycle's handshakes ([`AxiMemory::sample`]). It checks the AXI4 rules a
//! simple burst master promises (INCR bursts of the full bus width, at most 256 beats,
//! aligned, never crossing 4 KiB, WLAST on the last beat, only addresses inside the memory)
//! and that VALID stays high with a stable payload until its handshake, and records every
//! violation instead of stopping the simulation.
//!
//! It can also inject faults ([`MemFaults`]: random stalls on every channel, SLVERR/DECERR
//! responses, a memory that stops answering), set with [`AxiMemory::set_faults`].

mod faults;

use std::collections::VecDeque;

use crate::verilator::{Model, PortId};

pub use faults::{BurstMatch, ErrorResp, ErrorResponse, ErrorRule, MemFaults, Stalls};
use faults::{Held, StallGen};

/// Timing of the memory model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemTiming {
    /// Cycles from a read burst's address handshake to its first data beat (at least 1).
    pub read_latency: u32,
    /// Cycles from a write burst's last data beat to its response (at least 1).
    pub write_latency: u32,
    /// Cycles per data beat on each of the R and W channels (1 = a beat every cycle; 2 =
    /// half the bus bandwidth; ...).
    pub beat_interval: u32,
    /// Read bursts the memory accepts before answering the first one (address queue
    /// depth); write bursts likewise.
    pub max_outstanding: usize,
}

impl Default for MemTiming {
    /// A DDR-like memory behind an interconnect: 20 cycles of read latency, full bandwidth.
    fn default() -> Self {
        MemTiming {
            read_latency: 20,
            write_latency: 10,
            beat_interval: 1,
            max_outstanding: 8,
        }
    }
}

/// Traffic the memory served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Read bursts accepted (AR handshakes).
    pub read_bursts: u64,
    /// Read data beats delivered.
    pub read_beats: u64,
    /// Write bursts completed (all their beats written).
    pub write_bursts: u64,
    /// Write data beats received.
    pub write_beats: u64,
}

struct Burst {
    addr: u64,
    beats: u32,
    /// Beats done so far.
    done: u32,
    /// Cycle from which it may be served.
    ready_at: u64,
    /// Cycle of the address handshake.
    accepted: u64,
    /// Cycle of the first data beat (reads).
    first_beat: u64,
    /// Its number in its direction since the faults were (re)started, from 1.
    nth: u64,
    /// The injected error response, if any.
    resp: Option<ErrorResp>,
}

/// One burst as the memory served it (see [`AxiMemory::set_burst_log`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstRecord {
    /// A write (AW/W/B) rather than a read (AR/R).
    pub write: bool,
    /// Byte address of the first beat.
    pub addr: u64,
    /// Beats of the burst.
    pub beats: u32,
    /// Cycle of the address handshake.
    pub accepted: u64,
    /// Cycle of the first data beat.
    pub first_beat: u64,
    /// Cycle of the last data beat.
    pub last_beat: u64,
}

/// Error responses [`AxiMemory`] keeps a record of (it counts all).
pub const MAX_ERROR_LOG: usize = 64;

/// An AXI4 slave memory: `size` bytes at byte address `base`, on a `bus_bits`-wide bus.
/// It serves a model's master ports named through [`AxiPorts`] ([`AxiMemory::drive`] before
/// the model evaluates, [`AxiMemory::sample`] after).
pub struct AxiMemory {
    base: u64,
    data: Vec<u8>,
    bus_bytes: usize,
    timing: MemTiming,
    reads: VecDeque<Burst>,
    writes: VecDeque<Burst>,
    /// W beats received ahead of their burst's completion.
    wbeats: VecDeque<WBeat>,
    /// Buffers of retired W beats, reused for the next ones (no allocation per beat).
    spare_beats: Vec<WBeat>,
    /// Write responses: the cycle each is due, and the injected error it carries.
    bresp: VecDeque<(u64, Option<ErrorResponse>)>,
    violations: Vec<String>,
    stats: MemStats,
    /// An R beat was offered and not taken: AXI requires it to stay valid.
    r_hold: bool,
    /// Likewise a write response.
    b_hold: bool,
    /// Payloads shown with VALID and not taken last cycle, which must not change.
    ar_wait: Option<AxiAddr>,
    aw_wait: Option<AxiAddr>,
    w_wait: Option<WBeat>,
    /// What [`AxiMemory::drive`] last wrote to the model's inputs (`None`: unknown, after a
    /// reset), so that each cycle writes only what changed.
    driven: Option<Driven>,
    /// The R data on the model's inputs is the offered beat's (cleared when it is taken).
    r_data_driven: bool,
    faults: MemFaults,
    stall_gen: Option<StallGen>,
    /// Read and write bursts accepted since the faults were (re)started.
    read_n: u64,
    write_n: u64,
    /// Cycle the injected hang began.
    hung_at: Option<u64>,
    /// Error responses given (the first [`MAX_ERROR_LOG`]) and their count.
    error_log: Vec<ErrorResponse>,
    errors_total: u64,
    /// Completed bursts, when logging.
    log: Option<Vec<BurstRecord>>,
    /// Reused R beat buffer as 32-bit words.
    beat: Vec<u32>,
}

impl AxiMemory {
    /// A zeroed memory of `size` bytes at `base`.
    pub fn new(base: u64, size: usize, bus_bits: u32, timing: MemTiming) -> AxiMemory {
        assert!(
            bus_bits.is_power_of_two() && bus_bits >= 32,
            "bus width {bus_bits}"
        );
        assert!(timing.read_latency >= 1 && timing.write_latency >= 1 && timing.beat_interval >= 1);
        AxiMemory {
            base,
            data: vec![0; size],
            bus_bytes: bus_bits as usize / 8,
            timing,
            reads: VecDeque::new(),
            writes: VecDeque::new(),
            wbeats: VecDeque::new(),
            spare_beats: vec![],
            bresp: VecDeque::new(),
            violations: vec![],
            stats: MemStats::default(),
            r_hold: false,
            b_hold: false,
            ar_wait: None,
            aw_wait: None,
            w_wait: None,
            driven: None,
            r_data_driven: false,
            faults: MemFaults::default(),
            stall_gen: None,
            read_n: 0,
            write_n: 0,
            hung_at: None,
            error_log: vec![],
            errors_total: 0,
            log: None,
            beat: vec![0; bus_bits as usize / 32],
        }
    }

    /// Starts (or stops) recording every completed burst, for traces.
    pub fn set_burst_log(&mut self, on: bool) {
        self.log = on.then(Vec::new);
    }

    /// The bursts recorded since the last call (empty when not logging).
    pub fn take_burst_log(&mut self) -> Vec<BurstRecord> {
        match &mut self.log {
            Some(l) => std::mem::take(l),
            None => vec![],
        }
    }

    /// Read and write bursts accepted and not yet completed (answered, for writes).
    pub fn outstanding(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len() + self.bresp.len())
    }

    /// First byte address.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Width of the data bus in bits.
    pub fn bus_bits(&self) -> u32 {
        self.bus_bytes as u32 * 8
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The timing model.
    pub fn timing(&self) -> MemTiming {
        self.timing
    }

    /// Changes the timing (takes effect for bursts accepted from now on).
    pub fn set_timing(&mut self, t: MemTiming) {
        self.timing = t;
    }

    /// The faults injected.
    pub fn faults(&self) -> &MemFaults {
        &self.faults
    }

    /// Injects `faults` from now on (and restarts them, see [`AxiMemory::restart_faults`]).
    pub fn set_faults(&mut self, faults: MemFaults) {
        self.faults = faults;
        self.restart_faults();
    }

    /// Changes only the stalls (the new pattern starts from its seed; burst numbers, a hang
    /// and the error responses given are kept).
    pub fn set_stalls(&mut self, stalls: Option<Stalls>) {
        self.faults.stalls = stalls;
        self.stall_gen = stalls.map(StallGen::new);
    }

    /// Starts the faults afresh: burst numbers count from 1 again, the stall pattern starts
    /// over from its seed, a hang is lifted (until it triggers again), and the error
    /// responses given are forgotten.
    pub fn restart_faults(&mut self) {
        self.stall_gen = self.faults.stalls.map(StallGen::new);
        self.read_n = 0;
        self.write_n = 0;
        self.hung_at = None;
        self.error_log.clear();
        self.errors_total = 0;
    }

    /// The error responses given since the faults were (re)started (at most the first
    /// [`MAX_ERROR_LOG`]), forgetting them, and how many there were in all.
    pub fn take_error_responses(&mut self) -> (Vec<ErrorResponse>, u64) {
        let n = std::mem::take(&mut self.errors_total);
        (std::mem::take(&mut self.error_log), n)
    }

    /// The cycle at which the injected hang began, if it has.
    pub fn hung_since(&self) -> Option<u64> {
        self.hung_at
    }

    /// What the injected faults have done so far, for a diagnosis (`None` when none are
    /// set); cycles are counted from `origin`.
    pub fn describe_faults(&self, origin: u64) -> Option<String> {
        let f = &self.faults;
        if f.is_none() {
            return None;
        }
        let mut parts = vec![];
        if let Some(s) = f.stalls {
            parts.push(format!(
                "random stalls (AR {}%, R {}%, AW {}%, W {}%, B {}%, seed {})",
                s.ar, s.r, s.aw, s.w, s.b, s.seed
            ));
        }
        if let Some(n) = f.hang_after_bursts {
            parts.push(match self.hung_at {
                Some(c) => format!(
                    "a hang: the memory stopped answering at cycle {} after accepting {n} \
                     burst(s)",
                    c.saturating_sub(origin)
                ),
                None => format!("a hang after {n} burst(s), not reached"),
            });
        }
        if !f.errors.is_empty() {
            parts.push(match self.error_log.first() {
                Some(e) => format!(
                    "{} error response(s), the first: {e} at cycle {}",
                    self.errors_total,
                    e.cycle.saturating_sub(origin)
                ),
                None => "error responses, none given yet".into(),
            });
        }
        Some(format!("injected faults: {}", parts.join("; ")))
    }

    /// True while the injected hang holds (it begins once enough bursts were accepted).
    fn hung(&mut self, now: u64) -> bool {
        match self.faults.hang_after_bursts {
            Some(n) if self.read_n + self.write_n >= n => {
                self.hung_at.get_or_insert(now);
                true
            }
            _ => false,
        }
    }

    fn record_error(&mut self, e: ErrorResponse) {
        self.errors_total += 1;
        if self.error_log.len() < MAX_ERROR_LOG {
            self.error_log.push(e);
        }
    }

    fn offset(&self, addr: u64, len: usize) -> Option<usize> {
        let off = addr.checked_sub(self.base)? as usize;
        (off.checked_add(len)? <= self.data.len()).then_some(off)
    }

    /// Writes `bytes` at byte address `addr` (host access; panics outside the memory).
    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        let off = self.offset(addr, bytes.len()).unwrap_or_else(|| {
            panic!(
                "host write of {} bytes at {addr:#x} is outside the memory",
                bytes.len()
            )
        });
        self.data[off..off + bytes.len()].copy_from_slice(bytes);
    }

    /// Reads `out.len()` bytes at byte address `addr` (host access; panics outside).
    pub fn read(&self, addr: u64, out: &mut [u8]) {
        let off = self.offset(addr, out.len()).unwrap_or_else(|| {
            panic!(
                "host read of {} bytes at {addr:#x} is outside the memory",
                out.len()
            )
        });
        out.copy_from_slice(&self.data[off..off + out.len()]);
    }

    /// The AXI rule violations seen so far.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// The AXI rule violations seen so far, forgetting them.
    pub fn take_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.violations)
    }

    /// Traffic served so far.
    pub fn stats(&self) -> MemStats {
        self.stats
    }

    /// True when no burst is in progress.
    pub fn idle(&self) -> bool {
        self.reads.is_empty()
            && self.writes.is_empty()
            && self.wbeats.is_empty()
            && self.bresp.is_empty()
    }

    fn violation(&mut self, cycle: u64, what: String) {
        if self.violations.len() < 100 {
            self.violations.push(format!("cycle {cycle}: {what}"));
        }
    }

    /// Checks an address handshake and returns the burst.
    fn burst(&mut self, cycle: u64, ch: &str, a: &AxiAddr) -> Burst {
        let bb = self.bus_bytes as u64;
        if a.burst != 1 {
            self.violation(cycle, format!("{ch}BURST = {} (not INCR)", a.burst));
        }
        if 1u64 << a.size != bb {
            self.violation(cycle, format!("{ch}SIZE = {} for a {bb}-byte bus", a.size));
        }
        if a.addr & (bb - 1) != 0 {
            self.violation(
                cycle,
                format!("{ch}ADDR {:#x} is not aligned to the bus", a.addr),
            );
        }
        let beats = a.len + 1;
        let end = a.addr + beats as u64 * bb;
        if a.addr / 4096 != (end - 1) / 4096 {
            self.violation(
                cycle,
                format!(
                    "{ch} burst at {:#x} of {beats} beats crosses a 4 KiB boundary",
                    a.addr
                ),
            );
        }
        if self.offset(a.addr, (end - a.addr) as usize).is_none() {
            self.violation(
                cycle,
                format!(
                    "{ch} burst at {:#x} of {beats} beats is outside the memory [{:#x}, {:#x})",
                    a.addr,
                    self.base,
                    self.base + self.data.len() as u64
                ),
            );
        }
        let write = ch == "AW";
        let (latency, nth) = if write {
            self.write_n += 1;
            (self.timing.write_latency, self.write_n)
        } else {
            self.read_n += 1;
            (self.timing.read_latency, self.read_n)
        };
        let bytes = beats as u64 * bb;
        let resp = self
            .faults
            .errors
            .iter()
            .find_map(|r| r.answer(write, nth, a.addr, bytes));
        Burst {
            addr: a.addr,
            beats,
            done: 0,
            ready_at: cycle + latency as u64,
            accepted: cycle,
            first_beat: 0,
            nth,
            resp,
        }
    }

    /// The beat at `addr` as little-endian 32-bit words (zeros outside the memory).
    fn beat_words(&self, addr: u64, out: &mut [u32]) {
        match self.offset(addr, self.bus_bytes) {
            Some(off) => {
                for (w, c) in out.iter_mut().zip(self.data[off..].chunks_exact(4)) {
                    *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            None => out.fill(0),
        }
    }

    /// Completes write bursts whose beats have all arrived.
    fn retire_writes(&mut self, cycle: u64) {
        loop {
            let Some(b) = self.writes.front() else { return };
            let need = b.beats as usize;
            if self.wbeats.len() < need {
                // Beats may still be coming; a LAST too early is an error.
                if let Some(i) = self.wbeats.iter().position(|w| w.last) {
                    let (addr, beats) = (b.addr, b.beats);
                    self.violation(
                        cycle,
                        format!(
                            "WLAST on beat {} of the {beats}-beat burst at {addr:#x}",
                            i + 1
                        ),
                    );
                    let dropped: Vec<WBeat> = self.wbeats.drain(..=i).collect();
                    self.spare_beats.extend(dropped);
                    self.writes.pop_front();
                    continue;
                }
                return;
            }
            let b = self.writes.pop_front().unwrap();
            let first_beat = self.wbeats[0].cycle;
            let mut last_beat = first_beat;
            for i in 0..need {
                let beat = self.wbeats.pop_front().unwrap();
                last_beat = beat.cycle;
                if beat.last != (i + 1 == need) {
                    self.violation(
                        cycle,
                        format!(
                            "WLAST {} on beat {} of the {need}-beat burst at {:#x}",
                            beat.last as u8,
                            i + 1,
                            b.addr
                        ),
                    );
                }
                let addr = b.addr + (i * self.bus_bytes) as u64;
                // A burst answered with an error is not written.
                if b.resp.is_none() {
                    if let Some(off) = self.offset(addr, self.bus_bytes) {
                        let bytes = &mut self.data[off..off + self.bus_bytes];
                        for (k, byte) in bytes.iter_mut().enumerate() {
                            if beat.strb[k / 32] >> (k % 32) & 1 == 1 {
                                *byte = (beat.data[k / 4] >> (8 * (k % 4))) as u8;
                            }
                        }
                    }
                }
                self.spare_beats.push(beat);
            }
            self.stats.write_bursts += 1;
            if let Some(log) = &mut self.log {
                log.push(BurstRecord {
                    write: true,
                    addr: b.addr,
                    beats: b.beats,
                    accepted: b.accepted,
                    first_beat,
                    last_beat,
                });
            }
            let error = b.resp.map(|resp| ErrorResponse {
                write: true,
                nth: b.nth,
                addr: b.addr,
                beats: b.beats,
                resp,
                cycle: 0,
            });
            self.bresp
                .push_back((cycle + self.timing.write_latency as u64, error));
        }
    }
}

/// A sampled address channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AxiAddr {
    addr: u64,
    len: u32,
    size: u32,
    burst: u32,
}

impl AxiAddr {
    /// The payload of address channel `c` (`[valid, ready, addr, len, size]`, burst).
    fn sample(m: &Model, c: &[PortId; 5], burst: PortId) -> AxiAddr {
        AxiAddr {
            addr: m.get(c[2]),
            len: m.get(c[3]) as u32,
            size: m.get(c[4]) as u32,
            burst: m.get(burst) as u32,
        }
    }
}

impl std::fmt::Display for AxiAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "(addr {:#x}, len {}, size {}, burst {})",
            self.addr, self.len, self.size, self.burst
        )
    }
}

/// A sampled W beat: data and strobes as 32-bit words, WLAST, and the cycle it was sampled.
#[derive(Clone, Debug)]
struct WBeat {
    data: Vec<u32>,
    strb: Vec<u32>,
    last: bool,
    cycle: u64,
}

impl WBeat {
    /// The same payload (data, strobes, WLAST).
    fn same_payload(&self, other: &WBeat) -> bool {
        self.data == other.data && self.strb == other.strb && self.last == other.last
    }
}

/// The slave's outputs as last driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Driven {
    ar_ready: bool,
    aw_ready: bool,
    w_ready: bool,
    r_valid: bool,
    r_last: bool,
    r_resp: u64,
    b_valid: bool,
    b_resp: u64,
}

/// Handles of an AXI4 master's ports on a model, named `{prefix}arvalid`, `{prefix}rdata`, ...
pub struct AxiPorts {
    ar: [PortId; 5], // valid, ready, addr, len, size
    arburst: PortId,
    r: [PortId; 5], // valid, ready, data, resp, last
    aw: [PortId; 5],
    awburst: PortId,
    w: [PortId; 5], // valid, ready, data, strb, last
    b: [PortId; 3], // valid, ready, resp
}

impl AxiPorts {
    /// The master port of `model` whose signals start with `prefix` (`"m_axi_"`); panics
    /// naming a missing port.
    pub fn new(model: &Model, prefix: &str) -> AxiPorts {
        let a = |s: &str| model.port(&format!("{prefix}{s}"));
        AxiPorts {
            ar: [
                a("arvalid"),
                a("arready"),
                a("araddr"),
                a("arlen"),
                a("arsize"),
            ],
            arburst: a("arburst"),
            r: [a("rvalid"), a("rready"), a("rdata"), a("rresp"), a("rlast")],
            aw: [
                a("awvalid"),
                a("awready"),
                a("awaddr"),
                a("awlen"),
                a("awsize"),
            ],
            awburst: a("awburst"),
            w: [a("wvalid"), a("wready"), a("wdata"), a("wstrb"), a("wlast")],
            b: [a("bvalid"), a("bready"), a("bresp")],
        }
    }
}

/// What [`AxiMemory::drive`] offered this cycle, for [`AxiMemory::sample`].
#[derive(Clone, Copy, Debug)]
pub struct Offered {
    /// The cycle.
    now: u64,
    ar_ready: bool,
    aw_ready: bool,
    w_ready: bool,
    r_valid: bool,
    r_last: bool,
    b_valid: bool,
}

impl Offered {
    /// Whether RVALID was offered.
    pub fn r_valid(&self) -> bool {
        self.r_valid
    }

    /// Whether BVALID was offered.
    pub fn b_valid(&self) -> bool {
        self.b_valid
    }

    /// Whether ARREADY, AWREADY and WREADY were offered.
    pub fn readies(&self) -> (bool, bool, bool) {
        (self.ar_ready, self.aw_ready, self.w_ready)
    }
}

impl AxiMemory {
    /// Drops the bursts in flight (the master was reset) and drives OKAY responses.
    pub fn reset(&mut self, m: &mut Model, p: &AxiPorts) {
        self.reads.clear();
        self.writes.clear();
        self.wbeats.clear();
        self.bresp.clear();
        self.r_hold = false;
        self.b_hold = false;
        self.ar_wait = None;
        self.aw_wait = None;
        self.w_wait = None;
        self.driven = None;
        self.r_data_driven = false;
        m.set(p.r[3], 0);
        m.set(p.b[2], 0);
    }

    /// Drives the slave's outputs for cycle `now` from the memory's state (and the faults'
    /// stalls for this cycle). Only the inputs that changed since the last cycle are written;
    /// an offered R beat's data is read from the memory once, and held while it waits.
    pub fn drive(&mut self, m: &mut Model, p: &AxiPorts, now: u64) -> Offered {
        let t = self.timing;
        let held = self
            .stall_gen
            .as_mut()
            .map_or(Held::default(), StallGen::cycle);
        let hung = self.hung(now);
        let beat_slot = t.beat_interval == 1 || now.is_multiple_of(t.beat_interval as u64);
        let r_valid = self.r_hold
            || (!hung
                && !held.r
                && beat_slot
                && self.reads.front().is_some_and(|b| b.ready_at <= now));
        let b_valid =
            self.b_hold || (!hung && !held.b && self.bresp.front().is_some_and(|&(c, _)| c <= now));
        let r_burst = self.reads.front().filter(|_| r_valid);
        let next = Driven {
            ar_ready: !hung && !held.ar && self.reads.len() < t.max_outstanding,
            aw_ready: !hung && !held.aw && self.writes.len() < t.max_outstanding,
            w_ready: !hung && !held.w && beat_slot,
            r_valid,
            r_last: r_burst.is_some_and(|b| b.done + 1 == b.beats),
            r_resp: r_burst.and_then(|b| b.resp).map_or(0, ErrorResp::code),
            b_valid,
            b_resp: match self.bresp.front() {
                Some(&(_, Some(e))) if b_valid => ErrorResp::code(e.resp),
                _ => 0,
            },
        };
        let last = self.driven.replace(next);
        // Most cycles drive what the last one did.
        if last != Some(next) {
            macro_rules! put {
                ($port:expr, $field:ident) => {
                    if last.is_none_or(|l| l.$field != next.$field) {
                        m.set($port, next.$field as u64);
                    }
                };
            }
            put!(p.ar[1], ar_ready);
            put!(p.aw[1], aw_ready);
            put!(p.w[1], w_ready);
            put!(p.r[0], r_valid);
            put!(p.r[4], r_last);
            put!(p.r[3], r_resp);
            put!(p.b[0], b_valid);
            put!(p.b[2], b_resp);
        }
        if let Some(b) = r_burst {
            if !self.r_data_driven {
                let addr = b.addr + (b.done as u64) * self.bus_bytes as u64;
                let mut beat = std::mem::take(&mut self.beat);
                self.beat_words(addr, &mut beat);
                m.set_wide(p.r[2], &beat);
                self.beat = beat;
                self.r_data_driven = true;
            }
        }
        Offered {
            now,
            ar_ready: next.ar_ready,
            aw_ready: next.aw_ready,
            w_ready: next.w_ready,
            r_valid,
            r_last: next.r_last,
            b_valid,
        }
    }

    /// Samples the master's outputs of the evaluated model and completes the handshakes of
    /// the cycle [`AxiMemory::drive`] offered.
    pub fn sample(&mut self, m: &Model, p: &AxiPorts, o: Offered) {
        let now = o.now;
        let ar = self.sample_addr(m, now, false, o.ar_ready, &p.ar, p.arburst);
        if let Some(a) = ar {
            let b = self.burst(now, "AR", &a);
            self.stats.read_bursts += 1;
            self.reads.push_back(b);
        }
        let r_taken = o.r_valid && m.get_bool(p.r[1]);
        self.r_hold = o.r_valid && !r_taken;
        if r_taken {
            self.stats.read_beats += 1;
            self.r_data_driven = false;
            let b = self.reads.front_mut().unwrap();
            if b.done == 0 {
                b.first_beat = now;
                if let Some(resp) = b.resp {
                    let e = ErrorResponse {
                        write: false,
                        nth: b.nth,
                        addr: b.addr,
                        beats: b.beats,
                        resp,
                        cycle: now,
                    };
                    self.record_error(e);
                }
            }
            let b = self.reads.front_mut().unwrap();
            b.done += 1;
            if o.r_last {
                let b = self.reads.pop_front().unwrap();
                if let Some(log) = &mut self.log {
                    log.push(BurstRecord {
                        write: false,
                        addr: b.addr,
                        beats: b.beats,
                        accepted: b.accepted,
                        first_beat: b.first_beat,
                        last_beat: now,
                    });
                }
            }
        }
        let aw = self.sample_addr(m, now, true, o.aw_ready, &p.aw, p.awburst);
        if let Some(a) = aw {
            let b = self.burst(now, "AW", &a);
            self.writes.push_back(b);
        }
        let wbeat = self.sample_w(m, p, o);
        let b_taken = o.b_valid && m.get_bool(p.b[1]);
        self.b_hold = o.b_valid && !b_taken;
        if b_taken {
            if let Some((_, Some(mut e))) = self.bresp.pop_front() {
                e.cycle = now;
                self.record_error(e);
            }
        }
        if let Some(wb) = wbeat {
            self.stats.write_beats += 1;
            self.wbeats.push_back(wb);
        }
        self.retire_writes(now);
    }

    /// The address channel's (AW if `write`, else AR) payload when its handshake completes
    /// this cycle; checks that a payload offered and not taken last cycle is still offered,
    /// unchanged.
    fn sample_addr(
        &mut self,
        m: &Model,
        now: u64,
        write: bool,
        ready: bool,
        c: &[PortId; 5],
        burst: PortId,
    ) -> Option<AxiAddr> {
        let valid = m.get_bool(c[0]);
        let waiting = if write {
            self.aw_wait.take()
        } else {
            self.ar_wait.take()
        };
        if !valid && waiting.is_none() {
            return None;
        }
        let ch = if write { "AW" } else { "AR" };
        let a = valid.then(|| AxiAddr::sample(m, c, burst));
        if let Some(w) = waiting {
            match a {
                None => self.violation(now, format!("{ch}VALID dropped before its handshake")),
                Some(a) if a != w => self.violation(
                    now,
                    format!("{ch} payload changed before its handshake: {w} became {a}"),
                ),
                Some(_) => {}
            }
        }
        if !ready {
            if write {
                self.aw_wait = a;
            } else {
                self.ar_wait = a;
            }
            return None;
        }
        a
    }

    /// The W beat taken this cycle; checks that a beat offered and not taken last cycle is
    /// still offered, unchanged.
    fn sample_w(&mut self, m: &Model, p: &AxiPorts, o: Offered) -> Option<WBeat> {
        let valid = m.get_bool(p.w[0]);
        let waiting = self.w_wait.take();
        if !valid {
            if let Some(w) = waiting {
                self.violation(o.now, "WVALID dropped before its handshake".into());
                self.spare_beats.push(w);
            }
            return None;
        }
        let mut beat = self.spare_beats.pop().unwrap_or_else(|| WBeat {
            data: vec![0; self.bus_bytes / 4],
            strb: vec![0; self.bus_bytes.div_ceil(32)],
            last: false,
            cycle: 0,
        });
        m.get_wide_into(p.w[2], &mut beat.data);
        m.get_wide_into(p.w[3], &mut beat.strb);
        beat.last = m.get_bool(p.w[4]);
        beat.cycle = o.now;
        if let Some(w) = waiting {
            if !w.same_payload(&beat) {
                self.violation(o.now, "W beat changed before its handshake".into());
            }
            self.spare_beats.push(w);
        }
        if !o.w_ready {
            self.w_wait = Some(beat);
            return None;
        }
        Some(beat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_crossing_4k_or_leaving_memory_are_violations() {
        let mut m = AxiMemory::new(0x1000, 0x2000, 64, MemTiming::default());
        let ok = AxiAddr {
            addr: 0x1f80,
            len: 15,
            size: 3,
            burst: 1,
        };
        m.burst(0, "AR", &ok);
        assert!(m.violations().is_empty(), "{:?}", m.violations());
        let cross = AxiAddr {
            addr: 0x1f80,
            len: 16,
            size: 3,
            burst: 1,
        };
        m.burst(1, "AR", &cross);
        assert!(m.violations()[0].contains("crosses a 4 KiB boundary"));
        let outside = AxiAddr {
            addr: 0x3000,
            len: 0,
            size: 3,
            burst: 1,
        };
        m.burst(2, "AW", &outside);
        assert!(m.violations()[1].contains("outside the memory"));
        let fixed = AxiAddr {
            addr: 0x1000,
            len: 0,
            size: 2,
            burst: 0,
        };
        m.burst(3, "AR", &fixed);
        assert_eq!(m.violations().len(), 4, "{:?}", m.violations());
    }

    #[test]
    fn writes_honour_strobes_and_wlast() {
        let mut m = AxiMemory::new(0, 4096, 32, MemTiming::default());
        m.write(0, &[0xaa; 8]);
        let b = m.burst(
            0,
            "AW",
            &AxiAddr {
                addr: 0,
                len: 1,
                size: 2,
                burst: 1,
            },
        );
        m.writes.push_back(b);
        m.wbeats.push_back(WBeat {
            data: vec![u32::from_le_bytes([1, 2, 3, 4])],
            strb: vec![0b0101],
            last: false,
            cycle: 1,
        });
        m.retire_writes(1);
        assert_eq!(m.bresp.len(), 0, "half a burst is not written");
        m.wbeats.push_back(WBeat {
            data: vec![u32::from_le_bytes([5, 6, 7, 8])],
            strb: vec![0b1000],
            last: true,
            cycle: 2,
        });
        m.retire_writes(2);
        let mut out = [0u8; 8];
        m.read(0, &mut out);
        assert_eq!(out, [1, 0xaa, 3, 0xaa, 0xaa, 0xaa, 0xaa, 8]);
        assert_eq!(m.bresp.len(), 1);
        assert!(m.violations().is_empty(), "{:?}", m.violations());
    }
}
