//! Driving the Verilated `vta_top` from Rust: an AXI4 slave memory model with configurable
//! latency and bandwidth ([`AxiMemory`]), and the host's side of the AXI4-Lite control port
//! ([`Accelerator`]: register reads and writes, and the run sequence of [`crate::regs`]).
//!
//! Each call of [`Accelerator::cycle`] is one clock cycle: the memory drives its outputs
//! from its state (like registered logic), the model evaluates, the memory and the host
//! sample the accelerator's outputs and complete the handshakes of this cycle, and the
//! clock ticks. The memory checks the AXI4 rules the accelerator promises (INCR bursts of
//! the full bus width, at most 256 beats, aligned, never crossing 4 KiB, WLAST on the last
//! beat, only addresses inside the memory) and records every violation; it can also log
//! every burst ([`AxiMemory::set_burst_log`], for traces).
//!
//! The host's run sequence is [`crate::regs::run`] over the [`crate::regs::Host`] that
//! [`Accelerator`] implements, the same code a board driver runs over memory-mapped
//! registers. A [`Monitor`] sees every cycle (the cycle-accurate simulator of `vta-sim`
//! follows the debug outputs with one, for instruction traces, hang detection and waveform
//! windows).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use vta_hw::sim::{Accelerator, AxiMemory, MemTiming};
//! let cfg = isa::HwConfig::preset("small")?;
//! let g = vta_hw::generate(&cfg)?;
//! let mem = AxiMemory::new(0x1000_0000, 1 << 20, cfg.axi_data_width, MemTiming::default());
//! let mut acc = Accelerator::build(&g, &hdl::verilator::default_cache_dir(), mem, &mut |s| eprintln!("{s}"))?;
//! acc.memory_mut().write(0x1000_0000, &[0u8; 16]); // ... the instructions and data
//! let run = acc.run(0x1000_0000, 1, 100_000)?;
//! println!("{} cycles", run.cycles);
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::path::Path;

use hdl::verilator::{BuildError, Model, PortId};
use isa::HwConfig;

use crate::regs;
use crate::Generated;

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
    pub read_bursts: u64,
    pub read_beats: u64,
    pub write_bursts: u64,
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
    /// Cycles of the first and the last data beat.
    pub first_beat: u64,
    pub last_beat: u64,
}

/// An AXI4 slave memory: `size` bytes at byte address `base`, on a `bus_bits`-wide bus.
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

/// Port handles of the top.
struct Ports {
    ar: [PortId; 5], // valid, ready, addr, len, size
    arburst: PortId,
    r: [PortId; 5], // valid, ready, data, resp, last
    aw: [PortId; 5],
    awburst: PortId,
    w: [PortId; 5], // valid, ready, data, strb, last
    b: [PortId; 3], // valid, ready, resp
    // AXI-Lite: awvalid, awready, awaddr, wvalid, wready, wdata, wstrb, bvalid, bready,
    // bresp, arvalid, arready, araddr, rvalid, rready, rdata, rresp
    lite: [PortId; 17],
}

impl Ports {
    fn new(m: &Model) -> Ports {
        let a = |s: &str| m.port(&format!("m_axi_{s}"));
        let l = |s: &str| m.port(&format!("s_axi_control_{s}"));
        Ports {
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
            lite: [
                l("awvalid"),
                l("awready"),
                l("awaddr"),
                l("wvalid"),
                l("wready"),
                l("wdata"),
                l("wstrb"),
                l("bvalid"),
                l("bready"),
                l("bresp"),
                l("arvalid"),
                l("arready"),
                l("araddr"),
                l("rvalid"),
                l("rready"),
                l("rdata"),
                l("rresp"),
            ],
        }
    }
}

/// The host's AXI4-Lite transaction in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lite {
    Idle,
    /// A write: address and data not yet accepted (flags), then waiting for the response.
    Write {
        addr: u32,
        data: u32,
        aw: bool,
        w: bool,
    },
    /// A read: address not yet accepted, then waiting for the data.
    Read {
        addr: u32,
        ar: bool,
    },
}

/// Why a simulated run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Building the Verilator model failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// DONE did not come within the cycle bound.
    #[error("the run did not finish within {limit} cycles; {status}")]
    Timeout { limit: u64, status: String },
    /// The accelerator broke an AXI rule, or accessed memory outside the model.
    #[error("AXI protocol violations: {}", .0.join("; "))]
    Protocol(Vec<String>),
    /// The accelerator reported an error (CONTROL bit 2).
    #[error("the accelerator reported an error (CONTROL = {control:#x}); {status}")]
    Fault { control: u32, status: String },
    /// The bitstream is not the expected one.
    #[error("identity check failed: {0}")]
    Identity(String),
}

/// What a run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// Clock cycles the host observed, from the start write to seeing DONE.
    pub cycles: u64,
    /// Every register of the map after the run, by name, in map order.
    pub registers: Vec<(&'static str, u32)>,
}

impl RunResult {
    /// A register's value by name.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.registers.iter().find(|(n, _)| *n == name).map(|r| r.1)
    }
}

/// Watches every clock cycle of an [`Accelerator`] (instruction traces, hang detection,
/// waveform windows). [`Monitor::cycle`] is called once per cycle, after the model has
/// evaluated the cycle's inputs and the handshakes were sampled, just before the clock edge.
pub trait Monitor {
    /// `cycle` counts cycles since the accelerator was created; `model` may be read (its
    /// outputs show the cycle's state) or have a waveform opened or closed.
    fn cycle(&mut self, cycle: u64, model: &mut Model, mem: &AxiMemory);

    /// Whether a waveform is being written: the clock then advances through
    /// [`Model::tick`], which records both clock edges (otherwise the accelerator drives the
    /// clock port itself and saves an evaluation per cycle).
    fn waveform(&self) -> bool {
        false
    }
}

/// No monitor.
impl Monitor for () {
    #[inline(always)]
    fn cycle(&mut self, _: u64, _: &mut Model, _: &AxiMemory) {}
}

/// The Verilated `vta_top` with its DRAM and host, watched by a [`Monitor`] `M`.
pub struct Accelerator<M: Monitor = ()> {
    model: Model,
    cfg: HwConfig,
    mem: AxiMemory,
    p: Ports,
    lite: Lite,
    lite_result: Option<u32>,
    cycle: u64,
    /// Reused beat buffer (R and W data).
    rbuf: Vec<u32>,
    /// The clock port.
    clk: PortId,
    monitor: M,
}

impl Accelerator {
    /// Builds (or loads from `cache_dir`) the model of `g` and resets it.
    pub fn build(
        g: &Generated,
        cache_dir: &Path,
        mem: AxiMemory,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Accelerator, SimError> {
        let model = Model::build(&g.design, cache_dir, progress)?;
        Ok(Accelerator::new(model, &g.config, mem))
    }

    /// Wraps a built model of `vta_top` for `cfg`, resets it and idles the ports.
    pub fn new(model: Model, cfg: &HwConfig, mem: AxiMemory) -> Accelerator {
        Accelerator::with_monitor(model, cfg, mem, ())
    }
}

impl<M: Monitor> Accelerator<M> {
    /// [`Accelerator::new`] with a monitor watching every cycle.
    pub fn with_monitor(model: Model, cfg: &HwConfig, mem: AxiMemory, monitor: M) -> Self {
        assert_eq!(
            mem.bus_bytes * 8,
            cfg.axi_data_width as usize,
            "the memory's bus width must be the config's AXI_DATA_WIDTH"
        );
        let p = Ports::new(&model);
        let beat_words = cfg.axi_data_width as usize / 32;
        let clk = (0..model.ports().len())
            .map(PortId)
            .find(|&i| model.info(i).role == hdl::PortRole::Clock)
            .expect("vta_top has a clock");
        let mut a = Accelerator {
            clk,
            model,
            cfg: cfg.clone(),
            mem,
            p,
            lite: Lite::Idle,
            lite_result: None,
            cycle: 0,
            rbuf: vec![0; beat_words],
            monitor,
        };
        a.reset();
        a
    }

    /// The monitor.
    pub fn monitor(&self) -> &M {
        &self.monitor
    }

    /// The monitor, to change or read it between runs.
    pub fn monitor_mut(&mut self) -> &mut M {
        &mut self.monitor
    }

    /// Holds reset for 4 cycles with every input idle; in-flight bursts are dropped.
    pub fn reset(&mut self) {
        for id in self.input_ports() {
            let w = self.model.info(id).width;
            if w <= 64 {
                self.model.set(id, 0);
            } else {
                self.model.set_wide(id, &[]);
            }
        }
        self.mem.reads.clear();
        self.mem.writes.clear();
        self.mem.wbeats.clear();
        self.mem.bresp.clear();
        self.mem.r_hold = false;
        self.lite = Lite::Idle;
        self.model.reset(4);
        // Inputs that never change: OKAY responses, the host always ready, full strobes.
        let (p, m) = (&self.p, &mut self.model);
        m.set(p.r[3], 0);
        m.set(p.b[2], 0);
        m.set(p.lite[8], 1); // bready
        m.set(p.lite[14], 1); // rready
        m.set(p.lite[6], 0xf); // wstrb
    }

    fn input_ports(&self) -> Vec<PortId> {
        (0..self.model.ports().len())
            .map(PortId)
            .filter(|&i| {
                let p = self.model.info(i);
                p.dir == hdl::Dir::Input && p.role == hdl::PortRole::Data
            })
            .collect()
    }

    /// The config the design was generated for.
    pub fn config(&self) -> &HwConfig {
        &self.cfg
    }

    /// The memory.
    pub fn memory(&self) -> &AxiMemory {
        &self.mem
    }

    /// The memory, to change its contents between runs.
    pub fn memory_mut(&mut self) -> &mut AxiMemory {
        &mut self.mem
    }

    /// The model (to read ports or open a trace).
    pub fn model_mut(&mut self) -> &mut Model {
        &mut self.model
    }

    /// The model, to read ports.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model and the monitor together (e.g. for the monitor to close a waveform).
    pub fn model_and_monitor(&mut self) -> (&mut Model, &mut M) {
        (&mut self.model, &mut self.monitor)
    }

    /// Cycles simulated since the accelerator was created.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }

    /// One clock cycle: memory and host drive their outputs, the model evaluates, the
    /// handshakes of this cycle complete, the monitor looks, the clock ticks.
    ///
    /// Without a waveform the falling clock edge is evaluated together with the new inputs
    /// (nothing in the design acts on it), then the rising edge: two evaluations per cycle
    /// instead of [`Model::tick`]'s two after the inputs' own.
    pub fn cycle(&mut self) {
        let now = self.cycle;
        let t = self.mem.timing;
        let beat_slot = t.beat_interval == 1 || now % t.beat_interval as u64 == 0;
        let p = &self.p;
        let waveform = self.monitor.waveform();
        let (m, mem) = (&mut self.model, &mut self.mem);
        if !waveform {
            m.set(self.clk, 0);
        }

        // ---- drive the slave's outputs ----------------------------------------------------
        m.set(p.ar[1], (mem.reads.len() < t.max_outstanding) as u64);
        m.set(p.aw[1], (mem.writes.len() < t.max_outstanding) as u64);
        m.set(p.w[1], beat_slot as u64);
        let r_valid =
            mem.r_hold || (beat_slot && mem.reads.front().is_some_and(|b| b.ready_at <= now));
        m.set(p.r[0], r_valid as u64);
        let r_last;
        if r_valid {
            let b = mem.reads.front().unwrap();
            let addr = b.addr + (b.done as u64) * mem.bus_bytes as u64;
            r_last = b.done + 1 == b.beats;
            mem.beat_words(addr, &mut self.rbuf);
            m.set(p.r[4], r_last as u64);
            m.set_wide(p.r[2], &self.rbuf);
        } else {
            r_last = false;
            m.set(p.r[4], 0);
        }
        let b_valid = mem.bresp.front().is_some_and(|&c| c <= now);
        m.set(p.b[0], b_valid as u64);

        // ---- drive the host's AXI-Lite outputs --------------------------------------------
        let l = &p.lite;
        let (mut awv, mut wv, mut arv) = (false, false, false);
        match self.lite {
            Lite::Write { addr, data, aw, w } => {
                awv = !aw;
                wv = !w;
                m.set(l[2], addr as u64);
                m.set(l[5], data as u64);
            }
            Lite::Read { addr, ar } => {
                arv = !ar;
                m.set(l[12], addr as u64);
            }
            Lite::Idle => {}
        }
        m.set(l[0], awv as u64);
        m.set(l[3], wv as u64);
        m.set(l[10], arv as u64);

        m.eval();

        // ---- sample and complete handshakes ------------------------------------------------
        if m.get_bool(p.ar[0]) && mem.reads.len() < t.max_outstanding {
            let a = AxiAddr {
                addr: m.get(p.ar[2]),
                len: m.get(p.ar[3]) as u32,
                size: m.get(p.ar[4]) as u32,
                burst: m.get(p.arburst) as u32,
            };
            let b = mem.burst(now, "AR", &a);
            mem.stats.read_bursts += 1;
            mem.reads.push_back(b);
        }
        mem.r_hold = r_valid && !m.get_bool(p.r[1]);
        if r_valid && m.get_bool(p.r[1]) {
            mem.stats.read_beats += 1;
            let b = mem.reads.front_mut().unwrap();
            if b.done == 0 {
                b.first_beat = now;
            }
            b.done += 1;
            if r_last {
                let b = mem.reads.pop_front().unwrap();
                if let Some(log) = &mut mem.log {
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
        if m.get_bool(p.aw[0]) && mem.writes.len() < t.max_outstanding {
            let a = AxiAddr {
                addr: m.get(p.aw[2]),
                len: m.get(p.aw[3]) as u32,
                size: m.get(p.aw[4]) as u32,
                burst: m.get(p.awburst) as u32,
            };
            let b = mem.burst(now, "AW", &a);
            mem.writes.push_back(b);
        }
        let w_fire = beat_slot && m.get_bool(p.w[0]);
        let wbeat = if w_fire {
            let words = &mut self.rbuf;
            m.get_wide_into(p.w[2], words);
            let data: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let strb_bits = mem.bus_bytes;
            let mut sw = [0u32; 2];
            m.get_wide_into(p.w[3], &mut sw[..strb_bits.div_ceil(32)]);
            let strb: Vec<bool> = (0..strb_bits)
                .map(|i| sw[i / 32] >> (i % 32) & 1 == 1)
                .collect();
            Some((data, strb, m.get_bool(p.w[4]), now))
        } else {
            None
        };
        if b_valid && m.get_bool(p.b[1]) {
            mem.bresp.pop_front();
        }
        if let Some(wb) = wbeat {
            mem.stats.write_beats += 1;
            mem.wbeats.push_back(wb);
        }
        mem.retire_writes(now);

        // AXI-Lite.
        match &mut self.lite {
            Lite::Write { aw, w, .. } => {
                if awv && m.get_bool(l[1]) {
                    *aw = true;
                }
                if wv && m.get_bool(l[4]) {
                    *w = true;
                }
                if m.get_bool(l[7]) {
                    self.lite = Lite::Idle;
                    self.lite_result = Some(0);
                }
            }
            Lite::Read { ar, .. } => {
                if arv && m.get_bool(l[11]) {
                    *ar = true;
                }
                if m.get_bool(l[13]) {
                    self.lite_result = Some(m.get(l[15]) as u32);
                    self.lite = Lite::Idle;
                }
            }
            Lite::Idle => {}
        }

        self.monitor.cycle(now, m, mem);
        if waveform || self.monitor.waveform() {
            m.tick();
        } else {
            m.set(self.clk, 1);
            m.eval();
        }
        self.cycle += 1;
    }

    fn lite_transaction(&mut self, t: Lite) -> u32 {
        assert_eq!(self.lite, Lite::Idle, "one AXI-Lite transaction at a time");
        self.lite = t;
        self.lite_result = None;
        for _ in 0..1000 {
            self.cycle();
            if let Some(v) = self.lite_result.take() {
                return v;
            }
        }
        panic!("the control port did not answer {t:?} within 1000 cycles");
    }

    /// Writes a control register (one AXI-Lite write, all byte strobes).
    pub fn write_reg(&mut self, offset: u32, value: u32) {
        self.lite_transaction(Lite::Write {
            addr: offset,
            data: value,
            aw: false,
            w: false,
        });
    }

    /// Reads a control register.
    pub fn read_reg(&mut self, offset: u32) -> u32 {
        self.lite_transaction(Lite::Read {
            addr: offset,
            ar: false,
        })
    }

    /// Reads every register of the map.
    pub fn read_all(&mut self) -> Vec<(&'static str, u32)> {
        let Ok(r) = regs::read_all(self);
        r
    }

    /// Checks VERSION and the ISA hash against `cfg` (what a driver does before running a
    /// program built for `cfg`: [`regs::check_identity`]).
    pub fn check_identity(&mut self, cfg: &HwConfig) -> Result<(), SimError> {
        let Ok(r) = regs::check_identity(self, cfg);
        r.map_err(SimError::Identity)
    }

    /// Every register as `NAME=value`, for messages.
    pub fn status(&mut self) -> String {
        let regs: Vec<String> = self
            .read_all()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!("registers: {}", regs.join(" "))
    }

    /// The host's run sequence ([`regs::run`]: INSN_ADDR, INSN_COUNT, start, poll CONTROL
    /// until DONE, read every register) with at most `max_cycles` cycles of polling, then
    /// waits for the memory to go idle. Fails on a timeout (call [`Accelerator::reset`]
    /// before the next run), on AXI violations seen during the run, or when CONTROL
    /// reports an error.
    pub fn run(
        &mut self,
        insn_addr: u32,
        insn_count: u32,
        max_cycles: u64,
    ) -> Result<RunResult, SimError> {
        self.clear_violations();
        let t0 = self.cycle;
        let mut host = Bounded {
            acc: self,
            t0,
            max_cycles,
        };
        let done = regs::run(&mut host, insn_addr, insn_count)?;
        self.finish(done, t0)
    }

    /// Completes a run that reached DONE (started at cycle `t0`, the first write of
    /// [`regs::run`]): lets the memory drain, then checks for AXI violations and CONTROL's
    /// error bit. For drivers of their own [`regs::Host`] over this accelerator.
    pub fn finish(&mut self, done: regs::Completion, t0: u64) -> Result<RunResult, SimError> {
        // Writes are answered before DONE; let anything else drain.
        for _ in 0..1000 {
            if self.mem.idle() {
                break;
            }
            self.cycle();
        }
        let violations = std::mem::take(&mut self.mem.violations);
        if !violations.is_empty() {
            return Err(SimError::Protocol(violations));
        }
        if done.control & regs::CONTROL_ERROR != 0 {
            let status = self.status();
            return Err(SimError::Fault {
                control: done.control,
                status,
            });
        }
        Ok(RunResult {
            cycles: self.cycle - t0,
            registers: done.registers,
        })
    }

    /// Forgets the AXI violations seen so far (before a run).
    pub fn clear_violations(&mut self) {
        self.mem.violations.clear();
    }
}

/// The simulated control port: AXI4-Lite transactions on the model; waiting between polls
/// is the clock running on (a read of CONTROL itself takes a few cycles).
impl<M: Monitor> regs::Host for Accelerator<M> {
    type Error = std::convert::Infallible;
    fn read_reg(&mut self, offset: u32) -> Result<u32, Self::Error> {
        Ok(Accelerator::read_reg(self, offset))
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), Self::Error> {
        Accelerator::write_reg(self, offset, value);
        Ok(())
    }
    fn poll_wait(&mut self, _polls: u64) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// [`Accelerator::run`]'s host: the accelerator with a cycle bound.
struct Bounded<'a, M: Monitor> {
    acc: &'a mut Accelerator<M>,
    t0: u64,
    max_cycles: u64,
}

impl<M: Monitor> regs::Host for Bounded<'_, M> {
    type Error = SimError;
    fn read_reg(&mut self, offset: u32) -> Result<u32, SimError> {
        Ok(self.acc.read_reg(offset))
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), SimError> {
        self.acc.write_reg(offset, value);
        Ok(())
    }
    fn poll_wait(&mut self, _polls: u64) -> Result<(), SimError> {
        if self.acc.cycle - self.t0 > self.max_cycles {
            let status = self.acc.status();
            return Err(SimError::Timeout {
                limit: self.max_cycles,
                status,
            });
        }
        Ok(())
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
