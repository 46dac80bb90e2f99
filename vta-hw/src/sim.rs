//! Driving the Verilated `vta_top` from Rust: an AXI4 slave memory model with configurable
//! latency and bandwidth ([`AxiMemory`]), and the host's side of the AXI4-Lite control port
//! ([`Accelerator`]: register reads and writes, and the run sequence of [`crate::regs`]).
//!
//! Each call of [`Accelerator::cycle`] is one clock cycle: the memory drives its outputs
//! from its state (like registered logic), the model evaluates, the memory and the host
//! sample the accelerator's outputs and complete the handshakes of this cycle, and the
//! clock ticks. The memory checks the AXI4 rules the accelerator promises (INCR bursts of
//! the full bus width, at most 256 beats, aligned, never crossing 4 KiB, WLAST on the last
//! beat, only addresses inside the memory) and records every violation.
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
}

/// An AXI4 slave memory: `size` bytes at byte address `base`, on a `bus_bits`-wide bus.
pub struct AxiMemory {
    base: u64,
    data: Vec<u8>,
    bus_bytes: usize,
    timing: MemTiming,
    reads: VecDeque<Burst>,
    writes: VecDeque<Burst>,
    /// W beats received ahead of their burst's completion: (data, strobes, last).
    wbeats: VecDeque<(Vec<u8>, Vec<bool>, bool)>,
    /// Cycles at which write responses are due.
    bresp: VecDeque<u64>,
    violations: Vec<String>,
    stats: MemStats,
    /// An R beat was offered and not taken: AXI requires it to stay valid.
    r_hold: bool,
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
        }
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
        }
    }

    fn beat_bytes(&self, addr: u64) -> Vec<u8> {
        match self.offset(addr, self.bus_bytes) {
            Some(off) => self.data[off..off + self.bus_bytes].to_vec(),
            None => vec![0; self.bus_bytes],
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
            for i in 0..need {
                let (data, strb, last) = self.wbeats.pop_front().unwrap();
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

/// The Verilated `vta_top` with its DRAM and host.
pub struct Accelerator {
    model: Model,
    cfg: HwConfig,
    mem: AxiMemory,
    p: Ports,
    lite: Lite,
    lite_result: Option<u32>,
    cycle: u64,
    beat_words: usize,
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
        assert_eq!(
            mem.bus_bytes * 8,
            cfg.axi_data_width as usize,
            "the memory's bus width must be the config's AXI_DATA_WIDTH"
        );
        let p = Ports::new(&model);
        let mut a = Accelerator {
            model,
            cfg: cfg.clone(),
            beat_words: cfg.axi_data_width as usize / 32,
            mem,
            p,
            lite: Lite::Idle,
            lite_result: None,
            cycle: 0,
        };
        a.reset();
        a
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

    /// Cycles simulated since the accelerator was created.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }

    /// One clock cycle: memory and host drive their outputs, the model evaluates, the
    /// handshakes of this cycle complete, the clock ticks.
    pub fn cycle(&mut self) {
        let now = self.cycle;
        let t = self.mem.timing;
        let beat_slot = now.checked_rem(t.beat_interval as u64) == Some(0);
        let p = &self.p;
        let (m, mem) = (&mut self.model, &mut self.mem);

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
            let bytes = mem.beat_bytes(addr);
            m.set(p.r[3], 0);
            m.set(p.r[4], r_last as u64);
            let words: Vec<u32> = bytes
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            m.set_wide(p.r[2], &words);
        } else {
            r_last = false;
            m.set(p.r[4], 0);
        }
        let b_valid = mem.bresp.front().is_some_and(|&c| c <= now);
        m.set(p.b[0], b_valid as u64);
        m.set(p.b[2], 0);

        // ---- drive the host's AXI-Lite outputs --------------------------------------------
        let l = &p.lite;
        let (mut awv, mut wv, mut arv) = (false, false, false);
        match self.lite {
            Lite::Write { addr, data, aw, w } => {
                awv = !aw;
                wv = !w;
                m.set(l[2], addr as u64);
                m.set(l[5], data as u64);
                m.set(l[6], 0xf);
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
        m.set(l[8], 1); // bready
        m.set(l[14], 1); // rready

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
            b.done += 1;
            if r_last {
                mem.reads.pop_front();
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
            let mut words = vec![0u32; self.beat_words];
            m.get_wide_into(p.w[2], &mut words);
            let data: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let strb_bits = mem.bus_bytes;
            let mut sw = vec![0u32; strb_bits.div_ceil(32)];
            m.get_wide_into(p.w[3], &mut sw);
            let strb: Vec<bool> = (0..strb_bits)
                .map(|i| sw[i / 32] >> (i % 32) & 1 == 1)
                .collect();
            Some((data, strb, m.get_bool(p.w[4])))
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

        m.tick();
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
        regs::MAP
            .iter()
            .map(|r| (r.name, self.read_reg(r.offset)))
            .collect()
    }

    /// Checks VERSION and the ISA hash against `cfg` (what a driver does before running a
    /// program built for `cfg`).
    pub fn check_identity(&mut self, cfg: &HwConfig) -> Result<(), SimError> {
        let v = self.read_reg(regs::VERSION);
        if v != regs::VERSION_VALUE {
            return Err(SimError::Identity(format!(
                "VERSION reads {v:#x}, expected {:#x}",
                regs::VERSION_VALUE
            )));
        }
        let hash = self.read_reg(regs::ISA_HASH_LO) as u64
            | (self.read_reg(regs::ISA_HASH_HI) as u64) << 32;
        if hash != cfg.isa_hash() {
            return Err(SimError::Identity(format!(
                "the accelerator's ISA hash is {hash:016x} but config {} has {:016x}",
                cfg.config_string(),
                cfg.isa_hash()
            )));
        }
        Ok(())
    }

    fn status(&mut self) -> String {
        let regs: Vec<String> = self
            .read_all()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!("registers: {}", regs.join(" "))
    }

    /// The host's run sequence: writes INSN_ADDR and INSN_COUNT, starts, polls CONTROL
    /// until DONE for at most `max_cycles` cycles, waits for the memory to go idle, and
    /// reads every register. Fails on a timeout (call [`Accelerator::reset`] before the
    /// next run), on AXI violations seen during the run, or when CONTROL reports an error.
    pub fn run(
        &mut self,
        insn_addr: u32,
        insn_count: u32,
        max_cycles: u64,
    ) -> Result<RunResult, SimError> {
        self.mem.violations.clear();
        self.write_reg(regs::INSN_ADDR, insn_addr);
        self.write_reg(regs::INSN_COUNT, insn_count);
        let t0 = self.cycle;
        self.write_reg(regs::CONTROL, regs::CONTROL_START);
        let control = loop {
            let c = self.read_reg(regs::CONTROL);
            if c & regs::CONTROL_DONE != 0 {
                break c;
            }
            if self.cycle - t0 > max_cycles {
                let status = self.status();
                return Err(SimError::Timeout {
                    limit: max_cycles,
                    status,
                });
            }
        };
        let cycles = self.cycle - t0;
        // Writes answered before DONE; let anything else drain.
        for _ in 0..1000 {
            if self.mem.idle() {
                break;
            }
            self.cycle();
        }
        if !self.mem.violations.is_empty() {
            return Err(SimError::Protocol(self.mem.violations.clone()));
        }
        if control & regs::CONTROL_ERROR != 0 {
            let status = self.status();
            return Err(SimError::Fault { control, status });
        }
        Ok(RunResult {
            cycles,
            registers: self.read_all(),
        })
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
            .push_back((vec![1, 2, 3, 4], vec![true, false, true, false], false));
        m.retire_writes(1);
        assert_eq!(m.bresp.len(), 0, "half a burst is not written");
        m.wbeats
            .push_back((vec![5, 6, 7, 8], vec![false, false, false, true], true));
        m.retire_writes(2);
        let mut out = [0u8; 8];
        m.read(0, &mut out);
        assert_eq!(out, [1, 0xaa, 3, 0xaa, 0xaa, 0xaa, 0xaa, 8]);
        assert_eq!(m.bresp.len(), 1);
        assert!(m.violations().is_empty(), "{:?}", m.violations());
    }
}
