//! The cycle-accurate simulator: the accelerator's RTL (`vta_hw`'s `vta_top` for the config)
//! in Verilator, its DRAM served by the Rust AXI4 memory model with configurable latency
//! and bandwidth ([`hdl::widgets::axi4_memory::AxiMemory`]), and the host driving the
//! AXI4-Lite registers with the board driver's sequence ([`vta_hw::regs::run`]); the
//! accelerator's ports in simulation are [`accelerator::Accelerator`].
//!
//! * **Models**: the default config's model is compiled into this crate by `build.rs` (when
//!   Verilator and a C++ compiler are there at build time); any other config is generated,
//!   verilated, compiled and loaded on first use, and cached on disk by `hdl` under a hash
//!   of its sources ([`model::instance`]; `$VTA_HDL_CACHE`, else `~/.cache/vta-hdl`).
//! * **Runs** ([`RtlSim::run`]): the cycle count and the per-module busy/stall counters come
//!   from the hardware's own counters; the spec's counters (bytes, micro-ops, instructions)
//!   are those of the instruction stream (`Counters::of_stream`), checked against the
//!   hardware's micro-op and instruction counters.
//! * **Limits**: a cycle bound, a wall-clock bound, and a hang detector: a run that makes no
//!   progress (no instruction taken or completed, no micro-op, no AXI data beat) for
//!   [`RunLimits::hang_cycles`] cycles stops with the state of the three modules, the
//!   execution core, the token queues and the memory ([`RtlError::Hang`]).
//! * **Observability**: an instruction trace in the Chrome/Perfetto format ([`trace`]), a
//!   VCD waveform over a window of cycles (with a model built for tracing).

pub mod accelerator;
mod device;
pub mod model;
pub mod multicore;
pub mod trace;
mod watch;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use accelerator::{Accelerator, AcceleratorError};
use hdl::verilator::BuildError;
use hdl::widgets::axi4_memory::AxiMemory;
use isa::{Codec, HwConfig, Insn, INSN_BYTES};
use vta_hw::regs;

pub use device::RtlDevice;
pub use hdl::widgets::axi4_memory::{
    BurstMatch, ErrorResp, ErrorRule, MemFaults, MemStats, MemTiming, Stalls,
};
pub use model::ModelOrigin;
pub use trace::{Trace, TraceEvent, TraceTrack};

use crate::Counters;
use watch::{InsnInfo, Watch};

/// Why a model could not be had or a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RtlError {
    /// The config cannot be generated.
    #[error("cannot generate the accelerator: {0}")]
    Generate(#[from] vta_hw::GenerateError),
    /// Verilating, compiling or loading the model failed (a missing tool says how to install
    /// it).
    #[error("cannot build the RTL model: {0}")]
    Build(#[from] BuildError),
    /// The instruction stream cannot be run.
    #[error("{0}")]
    Program(String),
    /// The run did not finish within the cycle or wall-clock bound.
    #[error("{what} (at cycle {cycle} of the run); state:{state}")]
    Timeout {
        what: String,
        cycle: u64,
        state: String,
    },
    /// No progress for too long.
    #[error(
        "the run hung: no progress (no instruction taken or completed, no micro-op, no memory \
         beat) for {idle} cycles, at cycle {cycle} of the run; state:{state}"
    )]
    Hang {
        idle: u64,
        cycle: u64,
        state: String,
    },
    /// The accelerator broke an AXI rule, accessed memory outside the model, or reported an
    /// error (a micro-op index past its buffer, an AXI error response).
    #[error("{0}")]
    Accelerator(AcceleratorError),
    /// The hardware's counters disagree with the instruction stream.
    #[error("hardware counter mismatch: {0}")]
    Counters(String),
    /// The waveform could not be written.
    #[error("VCD trace: {0}")]
    Vcd(String),
    /// The generated design breaks an assumption of the simulation harness (a bug in
    /// `vta-hw`, not in the config).
    #[error("the RTL harness cannot simulate this design: {0}")]
    Harness(String),
}

/// How to build an [`RtlSim`].
#[derive(Clone, Debug)]
pub struct RtlOptions {
    /// Where models are cached (`None`: `hdl::verilator::default_cache_dir()`).
    pub cache_dir: Option<PathBuf>,
    /// The memory's latency and bandwidth.
    pub timing: MemTiming,
    /// Faults the memory injects in every run (none by default; see
    /// [`RtlSim::set_faults`]).
    pub faults: MemFaults,
    /// Physical address and size of the simulated DRAM.
    pub mem_base: u64,
    pub mem_size: u64,
    /// Use a model compiled with VCD tracing (built on demand; needed by
    /// [`RtlSim::set_vcd`]).
    pub vcd: bool,
}

impl Default for RtlOptions {
    fn default() -> Self {
        RtlOptions {
            cache_dir: None,
            timing: MemTiming::default(),
            faults: MemFaults::none(),
            mem_base: 0x1000_0000,
            mem_size: 256 << 20,
            vcd: false,
        }
    }
}

impl RtlOptions {
    /// The simulated DRAM these options describe, for `cfg`'s bus.
    fn memory(&self, cfg: &HwConfig) -> AxiMemory {
        let mut mem = AxiMemory::new(
            self.mem_base,
            usize::try_from(self.mem_size).expect("memory size fits the address space"),
            cfg.axi_data_width,
            self.timing,
        );
        mem.set_faults(self.faults.clone());
        mem
    }

    /// The model cache directory in use.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(hdl::verilator::default_cache_dir)
    }
}

/// Bounds on one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Cycles from the run's first register write (`None`: no bound).
    pub max_cycles: Option<u64>,
    /// Host time.
    pub wall: Option<Duration>,
    /// Cycles without progress after which the run is declared hung.
    pub hang_cycles: u64,
}

impl RunLimits {
    /// Default of [`RunLimits::hang_cycles`]: far longer than any memory latency or
    /// pipeline drain.
    pub const DEFAULT_HANG_CYCLES: u64 = 100_000;

    /// Default of [`RunLimits::max_cycles`]: 2^28 cycles, a few minutes of simulation at about
    /// 1 M cycles/s; a longer run needs `--max-cycles`.
    pub const DEFAULT_MAX_CYCLES: u64 = 1 << 28;
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_cycles: Some(Self::DEFAULT_MAX_CYCLES),
            wall: None,
            hang_cycles: Self::DEFAULT_HANG_CYCLES,
        }
    }
}

/// What a completed run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtlRun {
    /// Clock cycles from start to DONE (the hardware's CYCLES register, widened to 64 bits
    /// with the host's count).
    pub cycles: u64,
    /// Cycles the host spent on the run, from its first register write to reading the
    /// counters.
    pub host_cycles: u64,
    /// The spec's counters (of the instruction stream, checked against the hardware's).
    pub counters: Counters,
    /// Every register of the map after the run.
    pub registers: Vec<(&'static str, u32)>,
    /// The memory traffic of this run.
    pub mem: MemStats,
    /// Host time.
    pub wall: Duration,
}

impl RtlRun {
    /// A register by name.
    pub fn register(&self, name: &str) -> Option<u32> {
        self.registers.iter().find(|r| r.0 == name).map(|r| r.1)
    }

    /// Backend-specific figures for `drivers::RunReport::extras`: `cycles`, the hardware's
    /// per-module busy and stall counters (`load_busy`, `load_stall`, ..., `dma_busy`; each
    /// wraps at 2^32), the memory's `axi_read_beats` and `axi_write_beats`, and
    /// `host_cycles`.
    pub fn extras(&self) -> Vec<(String, u64)> {
        let mut v = vec![("cycles".to_string(), self.cycles)];
        for r in [
            "LOAD_BUSY",
            "LOAD_STALL",
            "COMPUTE_BUSY",
            "COMPUTE_STALL",
            "STORE_BUSY",
            "STORE_STALL",
            "DMA_BUSY",
        ] {
            v.push((r.to_lowercase(), self.register(r).unwrap_or(0) as u64));
        }
        v.push(("axi_read_beats".into(), self.mem.read_beats));
        v.push(("axi_write_beats".into(), self.mem.write_beats));
        v.push(("host_cycles".into(), self.host_cycles));
        v
    }
}

/// The accelerator in Verilator with its memory and host (see the module docs).
pub struct RtlSim {
    acc: Accelerator<Watch>,
    cfg: HwConfig,
    codec: Codec,
    origin: ModelOrigin,
    traced: bool,
    /// The last run did not complete: reset before the next.
    dirty: bool,
}

impl RtlSim {
    /// A simulator of `cfg` with a fresh model instance (built or loaded as needed;
    /// `progress` hears the build stages).
    pub fn new(
        cfg: &HwConfig,
        opts: &RtlOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<RtlSim, RtlError> {
        let (m, origin) = model::instance(cfg, opts.vcd, &opts.cache_dir(), progress)?;
        let mem = opts.memory(cfg);
        let watch = Watch::new(&m);
        let mut acc = Accelerator::with_monitor(m, cfg, mem, watch);
        acc.check_identity(cfg).map_err(RtlError::Accelerator)?;
        Ok(RtlSim {
            acc,
            cfg: cfg.clone(),
            codec: Codec::new(cfg),
            origin,
            traced: opts.vcd,
            dirty: false,
        })
    }

    /// The config.
    pub fn config(&self) -> &HwConfig {
        &self.cfg
    }

    /// Where the model came from.
    pub fn origin(&self) -> &ModelOrigin {
        &self.origin
    }

    /// The simulated DRAM.
    pub fn memory(&self) -> &AxiMemory {
        self.acc.memory()
    }

    /// The simulated DRAM, to fill it.
    pub fn memory_mut(&mut self) -> &mut AxiMemory {
        self.acc.memory_mut()
    }

    /// Changes the memory's latency and bandwidth (for the following runs).
    pub fn set_timing(&mut self, t: MemTiming) {
        self.acc.memory_mut().set_timing(t);
    }

    /// Changes the faults the memory injects (for the following runs). Each run starts
    /// them afresh: burst numbers count from its first burst, the stall pattern from its
    /// seed. A run that meets an error response fails naming the bursts (the accelerator
    /// itself only raises its error flag and runs on); a hang is caught by the hang bound or
    /// the run's deadline; either way the next run starts from a reset.
    pub fn set_faults(&mut self, faults: MemFaults) {
        self.acc.memory_mut().set_faults(faults);
    }

    /// Cycles simulated since the simulator was created.
    pub fn cycles(&self) -> u64 {
        self.acc.cycles()
    }

    /// Starts recording an instruction trace of the following runs ([`RtlSim::take_trace`]).
    pub fn start_trace(&mut self) {
        self.acc.monitor_mut().start_trace(&self.cfg);
        self.acc.memory_mut().set_burst_log(true);
    }

    /// Stops recording and returns the trace.
    pub fn take_trace(&mut self) -> Option<Trace> {
        self.acc.memory_mut().set_burst_log(false);
        self.acc.monitor_mut().take_trace()
    }

    /// Writes a VCD waveform of the next run to `path`, over cycles `window` (`start..end`,
    /// counted from the run's first register write; `None`: the whole run). Needs a model
    /// built with [`RtlOptions::vcd`].
    pub fn set_vcd(&mut self, path: &Path, window: Option<(u64, u64)>) -> Result<(), RtlError> {
        if !self.traced {
            return Err(RtlError::Vcd(
                "the model was built without tracing (RtlOptions::vcd)".into(),
            ));
        }
        let (s, e) = window.unwrap_or((0, u64::MAX));
        if e <= s {
            return Err(RtlError::Vcd(format!(
                "the window {s}:{e} is empty (START must be below END)"
            )));
        }
        let mhz = f64::from(self.cfg.clock_mhz);
        self.acc
            .monitor_mut()
            .set_vcd(path.to_path_buf(), mhz, s, e);
        Ok(())
    }

    /// Runs `insn_count` instructions at byte address `insn_addr` with the host's register
    /// sequence, within `limits`.
    pub fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        limits: &RunLimits,
    ) -> Result<RtlRun, RtlError> {
        let start_wall = Instant::now();
        let insns = self.read_stream(insn_addr, insn_count)?;
        let counters = Counters::of_stream(&self.cfg, &insns);
        let infos: Vec<InsnInfo> = insns.iter().map(|i| InsnInfo::new(&self.cfg, i)).collect();
        if self.dirty {
            self.acc.reset();
            self.dirty = false;
        }
        let t0 = self.acc.cycles();
        self.acc.memory_mut().restart_faults();
        let mem0 = self.acc.memory().stats();
        if self.acc.monitor().tracing() {
            // Bursts of earlier activity do not belong to this run.
            self.acc.memory_mut().take_burst_log();
        }
        let watch = self.acc.monitor_mut();
        watch.vcd_error = None;
        watch.begin_run(t0, infos);
        let result = self.run_sequence(insn_addr as u32, insn_count, limits, t0, start_wall);
        let now = self.acc.cycles();
        let bursts = self.acc.memory_mut().take_burst_log();
        let watch = self.acc.monitor_mut();
        watch.end_run(now);
        watch.add_events(bursts.iter().map(burst_event));
        let vcd_error = watch.vcd_error.take();
        let (model, watch) = self.acc.model_and_monitor();
        watch.close_vcd(model);
        let done = match result {
            Ok(d) => d,
            Err(e) => {
                self.dirty = true;
                return Err(e);
            }
        };
        if let Some(e) = vcd_error {
            return Err(RtlError::Vcd(e));
        }
        let host_cycles = self.acc.cycles() - t0;
        let res = self.acc.finish(done, t0).map_err(|e| {
            self.dirty = true;
            RtlError::Accelerator(e)
        })?;
        let reg = |n: &str| res.get(n).unwrap_or(0);
        // CYCLES wraps at 2^32; the host's count (a few cycles more) gives the high bits.
        let hw = reg("CYCLES") as u64;
        let cycles = host_cycles - (host_cycles.wrapping_sub(hw) & 0xffff_ffff);
        let mem1 = self.acc.memory().stats();
        let run = RtlRun {
            cycles,
            host_cycles,
            counters,
            mem: MemStats {
                read_bursts: mem1.read_bursts - mem0.read_bursts,
                read_beats: mem1.read_beats - mem0.read_beats,
                write_bursts: mem1.write_bursts - mem0.write_bursts,
                write_beats: mem1.write_beats - mem0.write_beats,
            },
            registers: res.registers,
            wall: start_wall.elapsed(),
        };
        check_counters(&run, insn_count)?;
        Ok(run)
    }

    /// Places `p` in the memory (its DRAM region at the memory's base, with its initial
    /// data and zeros elsewhere; the relocated instructions after it) for [`RtlSim::run`];
    /// returns (instruction address, count). For benchmarks and tools without a device
    /// allocator (`vta_sim::rtl::RtlDevice` does this through the device HAL).
    pub fn load_program(&mut self, p: &isa::Program) -> Result<(u64, u32), RtlError> {
        let base = self.memory().base();
        place_program(self.acc.memory_mut(), &self.codec, p, base)
    }

    /// The output segments of a program placed by [`RtlSim::load_program`].
    pub fn read_outputs(&self, p: &isa::Program) -> Vec<(String, Vec<u8>)> {
        read_outputs(self.memory(), p, self.memory().base())
    }

    /// Reads and decodes the instruction stream (the driver refuses what it cannot decode).
    fn read_stream(&self, insn_addr: u64, insn_count: u32) -> Result<Vec<Insn>, RtlError> {
        read_stream(self.acc.memory(), &self.codec, insn_addr, insn_count)
    }

    fn run_sequence(
        &mut self,
        insn_addr: u32,
        insn_count: u32,
        limits: &RunLimits,
        t0: u64,
        start_wall: Instant,
    ) -> Result<regs::Completion, RtlError> {
        let mut host = Host {
            acc: &mut self.acc,
            cfg: &self.cfg,
            limits,
            t0,
            start_wall,
        };
        regs::run(&mut host, insn_addr, insn_count)
    }
}

/// Places `p` in `mem` with its DRAM region at `base` (its initial data, zeros elsewhere)
/// and the relocated instructions after it; returns (instruction address, count).
fn place_program(
    mem: &mut AxiMemory,
    codec: &Codec,
    p: &isa::Program,
    base: u64,
) -> Result<(u64, u32), RtlError> {
    let region = p.dram_size();
    let insns = p.relocated(base).map_err(RtlError::Program)?;
    let stream = codec
        .encode_stream(&insns)
        .map_err(|e| RtlError::Program(e.to_string()))?;
    let insn_addr = base + region.next_multiple_of(4096);
    let end = mem.base() + mem.size() as u64;
    if base < mem.base() || insn_addr + stream.len() as u64 > end {
        return Err(RtlError::Program(format!(
            "the program needs {} bytes from {base:#x}; the simulated memory is [{:#x}, {end:#x})",
            insn_addr + stream.len() as u64 - base,
            mem.base()
        )));
    }
    mem.write(base, &vec![0; region as usize]);
    for seg in &p.segments {
        if let Some(data) = &seg.init {
            mem.write(base + seg.offset, data);
        }
    }
    mem.write(insn_addr, &stream);
    Ok((insn_addr, insns.len() as u32))
}

/// The output segments of a program placed at `base` by [`place_program`].
fn read_outputs(mem: &AxiMemory, p: &isa::Program, base: u64) -> Vec<(String, Vec<u8>)> {
    p.segments
        .iter()
        .filter(|s| s.role.output)
        .map(|s| {
            let mut data = vec![0; s.size() as usize];
            mem.read(base + s.offset, &mut data);
            (s.name.clone(), data)
        })
        .collect()
}

/// Reads and decodes `insn_count` instructions at `insn_addr` of `mem`.
fn read_stream(
    mem: &AxiMemory,
    codec: &Codec,
    insn_addr: u64,
    insn_count: u32,
) -> Result<Vec<Insn>, RtlError> {
    if !insn_addr.is_multiple_of(INSN_BYTES as u64) || insn_addr > u32::MAX as u64 {
        return Err(RtlError::Program(format!(
            "instruction address {insn_addr:#x} is not a {INSN_BYTES}-byte aligned 32-bit \
             address"
        )));
    }
    let len = insn_count as u64 * INSN_BYTES as u64;
    let end = mem.base() + mem.size() as u64;
    if insn_addr < mem.base() || insn_addr + len > end {
        return Err(RtlError::Program(format!(
            "{insn_count} instructions at {insn_addr:#x} are outside the simulated memory \
             [{:#x}, {end:#x})",
            mem.base()
        )));
    }
    let mut bytes = vec![0u8; len as usize];
    mem.read(insn_addr, &mut bytes);
    bytes
        .chunks_exact(INSN_BYTES)
        .enumerate()
        .map(|(i, c)| {
            codec
                .decode(c.try_into().expect("an instruction's bytes"))
                .map_err(|e| RtlError::Program(format!("instruction {i}: {e}")))
        })
        .collect()
}

/// Cycles the simulated host waits after a read of CONTROL that did not show DONE, as a
/// driver sleeps between polls. Each read is an AXI-Lite transaction the model simulates
/// (read back to back, about 2% of ResNet-18's simulation instructions); DONE is seen at
/// most this many cycles late, which moves `host_cycles` but not the hardware's CYCLES.
const POLL_INTERVAL_CYCLES: u32 = 32;

/// The simulated host: AXI-Lite transactions, and the limits checked between polls.
struct Host<'a> {
    acc: &'a mut Accelerator<Watch>,
    cfg: &'a HwConfig,
    limits: &'a RunLimits,
    t0: u64,
    start_wall: Instant,
}

impl Host<'_> {
    /// The diagnosis, then the registers (read through the control port, as a driver
    /// would).
    fn state(&mut self) -> String {
        let acc = &*self.acc;
        let mut s = acc.monitor().diagnose(acc.model(), acc.memory(), self.cfg);
        if let Some(f) = acc.memory().describe_faults(self.t0) {
            s.push_str("\n  ");
            s.push_str(&f);
        }
        let status = self.acc.status();
        s.push_str("\n  ");
        s.push_str(&status);
        s
    }
}

impl regs::Host for Host<'_> {
    type Error = RtlError;
    fn read_reg(&mut self, offset: u32) -> Result<u32, RtlError> {
        self.acc.read_reg(offset).map_err(RtlError::Accelerator)
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), RtlError> {
        self.acc
            .write_reg(offset, value)
            .map_err(RtlError::Accelerator)
    }
    fn poll_wait(&mut self, _polls: u64) -> Result<(), RtlError> {
        let now = self.acc.cycles();
        let cycle = now - self.t0;
        if let Some(max) = self.limits.max_cycles {
            if cycle > max {
                let state = self.state();
                return Err(RtlError::Timeout {
                    what: format!(
                        "the run did not finish within {max} cycles (raise the bound with \
                         `vta sim --max-cycles` if the program is meant to run this long)"
                    ),
                    cycle,
                    state,
                });
            }
        }
        let idle = now - self.acc.monitor().last_progress;
        if idle > self.limits.hang_cycles {
            let state = self.state();
            return Err(RtlError::Hang { idle, cycle, state });
        }
        if let Some(wall) = self.limits.wall {
            if self.start_wall.elapsed() > wall {
                let state = self.state();
                return Err(RtlError::Timeout {
                    what: format!(
                        "the run did not finish within {:.3} s of host time",
                        wall.as_secs_f64()
                    ),
                    cycle,
                    state,
                });
            }
        }
        for _ in 0..POLL_INTERVAL_CYCLES {
            self.acc.cycle();
        }
        Ok(())
    }
}

fn burst_event(b: &hdl::widgets::axi4_memory::BurstRecord) -> TraceEvent {
    TraceEvent {
        track: if b.write {
            TraceTrack::DmaWrite
        } else {
            TraceTrack::DmaRead
        },
        name: format!(
            "{} {} beat{}",
            if b.write { "write" } else { "read" },
            b.beats,
            if b.beats == 1 { "" } else { "s" }
        ),
        cat: "dma",
        start: b.first_beat,
        end: b.last_beat + 1,
        args: vec![
            ("addr", serde_json::json!(format!("{:#x}", b.addr))),
            ("beats", serde_json::json!(b.beats)),
            (
                "address_accepted_cycles_before",
                serde_json::json!(b.first_beat.saturating_sub(b.accepted)),
            ),
        ],
    }
}

/// The hardware's micro-op and instruction counters (32 bits) against the stream's.
fn check_counters(run: &RtlRun, insn_count: u32) -> Result<(), RtlError> {
    let c = &run.counters;
    let mut bad = vec![];
    for (reg, want) in [
        ("GEMM_UOPS", c.gemm_uops),
        ("ALU_UOPS", c.alu_uops),
        ("RESET_UOPS", c.reset_uops),
        ("INSNS", insn_count as u64),
    ] {
        let got = run.register(reg).unwrap_or(0);
        if got as u64 != want & 0xffff_ffff {
            bad.push(format!("{reg} = {got}, the instruction stream has {want}"));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(RtlError::Counters(bad.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control port that never answers (held in reset here; broken RTL in life) fails the
    /// transaction with a message instead of a panic, and a reset makes the port work again.
    #[test]
    fn an_unanswered_control_port_is_an_error_and_a_reset_recovers() {
        let cfg = HwConfig::default();
        let mut sim = RtlSim::new(&cfg, &RtlOptions::default(), &mut |_| {}).unwrap();
        let (m, _) = sim.acc.model_and_monitor();
        let rst = m.port("ap_rst_n");
        m.set(rst, 0);
        let e = sim.acc.read_reg(regs::CONTROL).unwrap_err().to_string();
        assert!(
            e.contains("did not answer a read of register 0x0 within 1000 cycles"),
            "{e}"
        );
        assert!(sim.acc.status().starts_with("registers unreadable: "));
        sim.acc.reset();
        assert!(sim.acc.check_identity(&cfg).is_ok());
    }
}
