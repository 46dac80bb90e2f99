//! A simulation model of an AXI4 slave memory for Verilated designs with an AXI4 master
//! port (such as one built around [`axi4_master`](super::axi4_master)): configurable
//! latency and bandwidth ([`MemTiming`]), traffic statistics and an optional burst log.
//!
//! Each cycle the memory drives its outputs from its state, like registered logic
//! ([`AxiMemory::drive`]), the model evaluates, and the memory samples the master's outputs
//! and completes the cycle's handshakes ([`AxiMemory::sample`]). It checks the AXI4 rules a
//! simple burst master promises (INCR bursts of the full bus width, at most 256 beats,
//! aligned, never crossing 4 KiB, WLAST on the last beat, only addresses inside the memory)
//! and records every violation instead of stopping the simulation.

use std::collections::VecDeque;

use crate::verilator::{Model, PortId};

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
    /// W beats received ahead of their burst's completion: (data, strobes, last, cycle).
    wbeats: VecDeque<(Vec<u8>, Vec<bool>, bool, u64)>,
    /// Cycles at which write responses are due.
    bresp: VecDeque<u64>,
    violations: Vec<String>,
    stats: MemStats,
    /// An R beat was offered and not taken: AXI requires it to stay valid.
    r_hold: bool,
    /// Completed bursts, when logging.
    log: Option<Vec<BurstRecord>>,
    /// Reused beat buffer (R and W data) as 32-bit words.
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
            bresp: VecDeque::new(),
            violations: vec![],
            stats: MemStats::default(),
            r_hold: false,
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
        let latency = if ch == "AR" {
            self.timing.read_latency
        } else {
            self.timing.write_latency
        };
        Burst {
            addr: a.addr,
            beats,
            done: 0,
            ready_at: cycle + latency as u64,
            accepted: cycle,
            first_beat: 0,
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
                if let Some(i) = self.wbeats.iter().position(|w| w.2) {
                    let (addr, beats) = (b.addr, b.beats);
                    self.violation(
                        cycle,
                        format!(
                            "WLAST on beat {} of the {beats}-beat burst at {addr:#x}",
                            i + 1
                        ),
                    );
                    self.wbeats.drain(..=i);
                    self.writes.pop_front();
                    continue;
                }
                return;
            }
            let b = self.writes.pop_front().unwrap();
            let first_beat = self.wbeats[0].3;
            let mut last_beat = first_beat;
            for i in 0..need {
                let (data, strb, last, at) = self.wbeats.pop_front().unwrap();
                last_beat = at;
                if last != (i + 1 == need) {
                    self.violation(
                        cycle,
                        format!(
                            "WLAST {} on beat {} of the {need}-beat burst at {:#x}",
                            last as u8,
                            i + 1,
                            b.addr
                        ),
                    );
                }
                let addr = b.addr + (i * self.bus_bytes) as u64;
                if let Some(off) = self.offset(addr, self.bus_bytes) {
                    for (k, (&d, &s)) in data.iter().zip(&strb).enumerate() {
                        if s {
                            self.data[off + k] = d;
                        }
                    }
                }
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
            self.bresp
                .push_back(cycle + self.timing.write_latency as u64);
        }
    }
}

/// A sampled address channel.
struct AxiAddr {
    addr: u64,
    len: u32,
    size: u32,
    burst: u32,
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
    /// A data beat slot of the bandwidth model (W may be taken, R offered).
    beat_slot: bool,
    r_valid: bool,
    r_last: bool,
    b_valid: bool,
}

impl AxiMemory {
    /// Drops the bursts in flight (the master was reset) and drives the inputs that never
    /// change: OKAY responses.
    pub fn reset(&mut self, m: &mut Model, p: &AxiPorts) {
        self.reads.clear();
        self.writes.clear();
        self.wbeats.clear();
        self.bresp.clear();
        self.r_hold = false;
        m.set(p.r[3], 0);
        m.set(p.b[2], 0);
    }

    /// Drives the slave's outputs for cycle `now` from the memory's state.
    pub fn drive(&mut self, m: &mut Model, p: &AxiPorts, now: u64) -> Offered {
        let t = self.timing;
        let beat_slot = t.beat_interval == 1 || now % t.beat_interval as u64 == 0;
        m.set(p.ar[1], (self.reads.len() < t.max_outstanding) as u64);
        m.set(p.aw[1], (self.writes.len() < t.max_outstanding) as u64);
        m.set(p.w[1], beat_slot as u64);
        let r_valid =
            self.r_hold || (beat_slot && self.reads.front().is_some_and(|b| b.ready_at <= now));
        m.set(p.r[0], r_valid as u64);
        let r_last;
        if r_valid {
            let b = self.reads.front().unwrap();
            let addr = b.addr + (b.done as u64) * self.bus_bytes as u64;
            r_last = b.done + 1 == b.beats;
            let mut beat = std::mem::take(&mut self.beat);
            self.beat_words(addr, &mut beat);
            m.set(p.r[4], r_last as u64);
            m.set_wide(p.r[2], &beat);
            self.beat = beat;
        } else {
            r_last = false;
            m.set(p.r[4], 0);
        }
        let b_valid = self.bresp.front().is_some_and(|&c| c <= now);
        m.set(p.b[0], b_valid as u64);
        Offered {
            now,
            beat_slot,
            r_valid,
            r_last,
            b_valid,
        }
    }

    /// Samples the master's outputs of the evaluated model and completes the handshakes of
    /// the cycle [`AxiMemory::drive`] offered.
    pub fn sample(&mut self, m: &Model, p: &AxiPorts, o: Offered) {
        let now = o.now;
        let t = self.timing;
        if m.get_bool(p.ar[0]) && self.reads.len() < t.max_outstanding {
            let a = AxiAddr {
                addr: m.get(p.ar[2]),
                len: m.get(p.ar[3]) as u32,
                size: m.get(p.ar[4]) as u32,
                burst: m.get(p.arburst) as u32,
            };
            let b = self.burst(now, "AR", &a);
            self.stats.read_bursts += 1;
            self.reads.push_back(b);
        }
        self.r_hold = o.r_valid && !m.get_bool(p.r[1]);
        if o.r_valid && m.get_bool(p.r[1]) {
            self.stats.read_beats += 1;
            let b = self.reads.front_mut().unwrap();
            if b.done == 0 {
                b.first_beat = now;
            }
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
        if m.get_bool(p.aw[0]) && self.writes.len() < t.max_outstanding {
            let a = AxiAddr {
                addr: m.get(p.aw[2]),
                len: m.get(p.aw[3]) as u32,
                size: m.get(p.aw[4]) as u32,
                burst: m.get(p.awburst) as u32,
            };
            let b = self.burst(now, "AW", &a);
            self.writes.push_back(b);
        }
        let w_fire = o.beat_slot && m.get_bool(p.w[0]);
        let wbeat = if w_fire {
            let words = &mut self.beat;
            m.get_wide_into(p.w[2], words);
            let data: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let strb_bits = self.bus_bytes;
            let mut sw = [0u32; 2];
            m.get_wide_into(p.w[3], &mut sw[..strb_bits.div_ceil(32)]);
            let strb: Vec<bool> = (0..strb_bits)
                .map(|i| sw[i / 32] >> (i % 32) & 1 == 1)
                .collect();
            Some((data, strb, m.get_bool(p.w[4]), now))
        } else {
            None
        };
        if o.b_valid && m.get_bool(p.b[1]) {
            self.bresp.pop_front();
        }
        if let Some(wb) = wbeat {
            self.stats.write_beats += 1;
            self.wbeats.push_back(wb);
        }
        self.retire_writes(now);
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
        m.wbeats
            .push_back((vec![1, 2, 3, 4], vec![true, false, true, false], false, 1));
        m.retire_writes(1);
        assert_eq!(m.bresp.len(), 0, "half a burst is not written");
        m.wbeats
            .push_back((vec![5, 6, 7, 8], vec![false, false, false, true], true, 2));
        m.retire_writes(2);
        let mut out = [0u8; 8];
        m.read(0, &mut out);
        assert_eq!(out, [1, 0xaa, 3, 0xaa, 0xaa, 0xaa, 0xaa, 8]);
        assert_eq!(m.bresp.len(), 1);
        assert!(m.violations().is_empty(), "{:?}", m.violations());
    }
}
