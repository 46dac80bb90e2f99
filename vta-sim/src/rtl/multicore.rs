//! Several cores in one cycle-accurate simulation: `vta_hw::multicore`'s
//! `vta_multicore_<n>` in Verilator, its shared master port on one AXI4 memory model, and
//! one simulated host per core that drives that core's control port with the run sequence
//! of `vta_hw::regs` (write INSN_ADDR, INSN_COUNT, START; poll CONTROL; read the registers).
//! Every core sees the same clock, so runs on different cores overlap and contend for the
//! memory as on a board with several cores on one DDR controller.
//!
//! * [`MultiCoreSim`] starts a run on a core ([`MultiCoreSim::start`]) and steps the clock
//!   ([`MultiCoreSim::step`]) until some run finishes; [`MultiCoreSim::run_together`] runs one
//!   program per core at once.
//! * [`MultiCoreDevice`] is one core as a `drivers::Device` (`--devices rtl-cores:N` opens
//!   the N cores of one simulation, [`open_cores`]): the cores share the simulation and its
//!   memory; whichever core's worker waits for its run drives the clock for all of them.
//!
//! A run's report is that of [`RtlRun`]: cycles from its first register write to DONE, the
//! spec's counters checked against the core's, the core's registers; `mem` is the traffic
//! of the shared memory during the run, every core's. A run that fails (a bound, a hang, an
//! AXI violation, an error response) fails the runs in flight on the other cores too, and
//! the simulation is reset: the cores share one bus, so none of them can be trusted after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use drivers::{Allocator, Buffer, Device, DeviceError, RunReport, RunTimeout, PAGE_SIZE};
use hdl::verilator::{Model, PortId};
use hdl::widgets::axi4_memory::{AxiMemory, AxiPorts, MemFaults, MemStats};
use isa::{Codec, HwConfig};
use vta_hw::debug::{DebugState, UOP_EVENT};
use vta_hw::regs;

use super::accelerator::{idle_inputs, AcceleratorError, LiteMaster};
use super::device::{run_error, run_report};
use super::{
    check_counters, place_program, read_outputs, read_stream, ModelOrigin, RtlError, RtlOptions,
    RtlRun, RunLimits, POLL_INTERVAL_CYCLES,
};
use crate::Counters;

/// One core's simulated host and its run in progress.
struct Core {
    lite: LiteMaster,
    /// The valids the host offered this cycle (between driving and sampling).
    offered: (bool, bool, bool),
    dbg: PortId,
    last_dbg: u64,
    /// The last cycle the core's debug state changed or it wrote back a micro-op.
    last_progress: u64,
    job: Option<Job>,
    result: Option<Result<RtlRun, RtlError>>,
}

/// A run on one core.
struct Job {
    writes: [(u32, u32); 3],
    step: Step,
    insn_count: u32,
    counters: Counters,
    limits: RunLimits,
    t0: u64,
    wall0: Instant,
    mem0: MemStats,
    /// The cycle the transaction in flight on the control port began.
    since: u64,
    control: u32,
    registers: Vec<u32>,
}

/// Where a run's register sequence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Writing `writes[i]`.
    Write(usize),
    /// Waiting until this cycle to read CONTROL again.
    Wait(u64),
    /// A read of CONTROL in flight.
    Poll,
    /// Reading register `regs::MAP[i]`.
    Read(usize),
}

/// The multi-core design in Verilator with its memory and one host per core (see the
/// module docs).
pub struct MultiCoreSim {
    model: Model,
    mem: AxiMemory,
    axi: AxiPorts,
    cores: Vec<Core>,
    cfg: HwConfig,
    codec: Codec,
    cycle: u64,
    origin: ModelOrigin,
}

impl MultiCoreSim {
    /// A simulation of `cores` (2 to `vta_hw::multicore::MAX_CORES`) cores of `cfg` with a
    /// fresh model instance (built or loaded as needed; `progress` hears the build stages);
    /// every core's identity is checked.
    pub fn new(
        cfg: &HwConfig,
        cores: u32,
        opts: &RtlOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<MultiCoreSim, RtlError> {
        vta_hw::multicore::check_cores(cores)?;
        if opts.vcd {
            return Err(RtlError::Vcd(
                "waveforms of the multi-core simulation are not supported; trace one core with \
                 `--backend rtl`"
                    .into(),
            ));
        }
        let (model, origin) =
            super::model::instance_of(cfg, cores, false, &opts.cache_dir(), progress)?;
        let mem = opts.memory(cfg);
        let axi = AxiPorts::new(&model, "m_axi_");
        let cores = (0..cores)
            .map(|k| Core {
                lite: LiteMaster::new(&model, &vta_hw::multicore::control_prefix(k)),
                offered: (false, false, false),
                dbg: model.port(&vta_hw::multicore::dbg_state_port(k)),
                last_dbg: 0,
                last_progress: 0,
                job: None,
                result: None,
            })
            .collect();
        let mut sim = MultiCoreSim {
            model,
            mem,
            axi,
            cores,
            cfg: cfg.clone(),
            codec: Codec::new(cfg),
            cycle: 0,
            origin,
        };
        sim.reset();
        for k in 0..sim.cores.len() {
            let mut host = CoreHost { sim: &mut sim, k };
            regs::check_identity(&mut host, cfg)
                .map_err(RtlError::Accelerator)?
                .map_err(|e| RtlError::Accelerator(AcceleratorError::Identity(e)))?;
        }
        Ok(sim)
    }

    /// Where the model came from.
    pub fn origin(&self) -> &ModelOrigin {
        &self.origin
    }

    /// The shared memory.
    pub fn memory(&self) -> &AxiMemory {
        &self.mem
    }

    /// The shared memory, to fill it.
    pub fn memory_mut(&mut self) -> &mut AxiMemory {
        &mut self.mem
    }

    /// Changes the faults the memory injects (for the following runs; see
    /// `RtlSim::set_faults`).
    pub fn set_faults(&mut self, faults: MemFaults) {
        self.mem.set_faults(faults);
    }

    /// Cycles simulated since the simulation was created.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }

    /// Places `p` with its DRAM region at `base` (inside the memory; the relocated
    /// instructions follow the region) for a run on any core; returns (instruction address,
    /// count).
    pub fn load_program(&mut self, p: &isa::Program, base: u64) -> Result<(u64, u32), RtlError> {
        place_program(&mut self.mem, &self.codec, p, base)
    }

    /// The output segments of a program placed at `base` by [`MultiCoreSim::load_program`].
    pub fn read_outputs(&self, p: &isa::Program, base: u64) -> Vec<(String, Vec<u8>)> {
        read_outputs(&self.mem, p, base)
    }

    /// Holds reset for 4 cycles with every input idle; in-flight bursts are dropped.
    fn reset(&mut self) {
        idle_inputs(&mut self.model);
        self.model.reset(4);
        self.mem.reset(&mut self.model, &self.axi);
        for c in &mut self.cores {
            c.lite.reset(&mut self.model);
        }
    }

    /// A run on core `k` is in progress.
    pub fn busy(&self, k: usize) -> bool {
        self.cores[k].job.is_some()
    }

    /// Starts `insn_count` instructions at `insn_addr` on core `k` within `limits` (its
    /// result comes from [`MultiCoreSim::take_result`] once the clock has run it).
    pub fn start(
        &mut self,
        k: usize,
        insn_addr: u64,
        insn_count: u32,
        limits: RunLimits,
    ) -> Result<(), RtlError> {
        let n = self.cores.len();
        let core = self.cores.get(k).ok_or_else(|| {
            RtlError::Program(format!("core {k}: the simulation has cores 0 to {}", n - 1))
        })?;
        if core.job.is_some() || core.result.is_some() {
            return Err(RtlError::Program(format!(
                "core {k} has a run in progress or an untaken result"
            )));
        }
        let insns = read_stream(&self.mem, &self.codec, insn_addr, insn_count)?;
        let counters = Counters::of_stream(&self.cfg, &insns);
        if self.cores.iter().all(|c| c.job.is_none()) {
            self.mem.restart_faults();
        }
        let core = &mut self.cores[k];
        let writes = [
            (regs::INSN_ADDR, insn_addr as u32),
            (regs::INSN_COUNT, insn_count),
            (regs::CONTROL, regs::CONTROL_START),
        ];
        core.lite.begin_write(writes[0].0, writes[0].1);
        core.last_progress = self.cycle;
        core.job = Some(Job {
            writes,
            step: Step::Write(0),
            insn_count,
            counters,
            limits,
            t0: self.cycle,
            wall0: Instant::now(),
            mem0: self.mem.stats(),
            since: self.cycle,
            control: 0,
            registers: Vec::with_capacity(regs::MAP.len()),
        });
        Ok(())
    }

    /// Core `k`'s finished run, once.
    pub fn take_result(&mut self, k: usize) -> Option<Result<RtlRun, RtlError>> {
        self.cores.get_mut(k)?.result.take()
    }

    /// Runs the clock for at most `max_cycles` cycles, stopping after the cycle in which a
    /// run finishes (or fails), or at once when no run is in progress; returns the cycles
    /// run.
    pub fn step(&mut self, max_cycles: u64) -> u64 {
        let mut ran = 0;
        while ran < max_cycles && self.cores.iter().any(|c| c.job.is_some()) {
            self.cycle_once();
            ran += 1;
            if self.advance_hosts() {
                break;
            }
        }
        ran
    }

    /// Runs `jobs[k]` (instruction address, count) on core `k`, all at once, and returns
    /// each core's result.
    pub fn run_together(
        &mut self,
        jobs: &[(u64, u32)],
        limits: &RunLimits,
    ) -> Result<Vec<Result<RtlRun, RtlError>>, RtlError> {
        if jobs.len() > self.cores.len() {
            return Err(RtlError::Program(format!(
                "{} programs for {} cores",
                jobs.len(),
                self.cores.len()
            )));
        }
        for (k, &(addr, count)) in jobs.iter().enumerate() {
            if let Err(e) = self.start(k, addr, count, *limits) {
                // Not one run of a refused set: the ones started are abandoned.
                for c in &mut self.cores[..k] {
                    c.job = None;
                }
                self.reset();
                return Err(e);
            }
        }
        while self.cores.iter().any(|c| c.job.is_some()) {
            self.step(u64::MAX);
        }
        Ok((0..jobs.len())
            .map(|k| self.take_result(k).expect("every started run finished"))
            .collect())
    }

    /// One clock cycle: the memory and every host drive, the handshakes complete, the
    /// clock ticks.
    fn cycle_once(&mut self) {
        let now = self.cycle;
        let m = &mut self.model;
        let offered = self.mem.drive(m, &self.axi, now);
        for c in &mut self.cores {
            c.offered = c.lite.drive(m);
        }
        self.mem.sample(m, &self.axi, offered);
        for c in &mut self.cores {
            c.lite.sample(m, c.offered);
            let d = m.get(c.dbg);
            if d != c.last_dbg || d >> UOP_EVENT & 1 == 1 {
                c.last_dbg = d;
                c.last_progress = now;
            }
        }
        m.tick();
        self.cycle += 1;
    }

    /// Moves every run's register sequence on after a cycle; true when a run finished or
    /// failed.
    fn advance_hosts(&mut self) -> bool {
        let now = self.cycle;
        let mut failure = None;
        let mut finished = false;
        for k in 0..self.cores.len() {
            let core = &mut self.cores[k];
            let Some(job) = core.job.as_mut() else {
                continue;
            };
            let value = core.lite.take_result();
            if value.is_some() {
                job.since = now;
            }
            match (job.step, value) {
                (Step::Write(i), Some(_)) if i + 1 < job.writes.len() => {
                    let (reg, v) = job.writes[i + 1];
                    core.lite.begin_write(reg, v);
                    job.step = Step::Write(i + 1);
                }
                (Step::Write(_), Some(_)) => job.step = Step::Wait(now),
                (Step::Wait(at), None) if now >= at => {
                    if let Err(e) = check_limits(job, (core.last_dbg, core.last_progress), now, k) {
                        failure = Some((k, e));
                        break;
                    }
                    core.lite.begin_read(regs::CONTROL);
                    job.step = Step::Poll;
                }
                (Step::Poll, Some(c)) if c & regs::CONTROL_DONE != 0 => {
                    job.control = c;
                    core.lite.begin_read(regs::MAP[0].offset);
                    job.step = Step::Read(0);
                }
                (Step::Poll, Some(_)) => {
                    job.step = Step::Wait(now + u64::from(POLL_INTERVAL_CYCLES));
                }
                (Step::Read(i), Some(v)) => {
                    job.registers.push(v);
                    if i + 1 < regs::MAP.len() {
                        core.lite.begin_read(regs::MAP[i + 1].offset);
                        job.step = Step::Read(i + 1);
                    } else {
                        let job = core.job.take().expect("the run in progress");
                        let result = self.complete(job, k);
                        if result.is_err() {
                            failure = Some((k, result.expect_err("a failed run")));
                            break;
                        }
                        self.cores[k].result = Some(result);
                        finished = true;
                    }
                }
                (_, None) if !core.lite.idle() && now - job.since > LITE_STALL_CYCLES => {
                    let e = RtlError::Accelerator(AcceleratorError::ControlPort(format!(
                        "core {k}'s transaction"
                    )));
                    failure = Some((k, e));
                    break;
                }
                _ => {}
            }
        }
        if let Some((k, e)) = failure {
            self.fail_all(k, e);
            return true;
        }
        finished
    }

    /// A run that read its registers: checks the memory's findings, the error bit and the
    /// counters.
    fn complete(&mut self, job: Job, k: usize) -> Result<RtlRun, RtlError> {
        let registers: Vec<(&'static str, u32)> = regs::MAP
            .iter()
            .map(|r| r.name)
            .zip(job.registers.iter().copied())
            .collect();
        let violations = self.mem.take_violations();
        if !violations.is_empty() {
            return Err(RtlError::Accelerator(AcceleratorError::Protocol(
                violations,
            )));
        }
        let (responses, total) = self.mem.take_error_responses();
        if total > 0 {
            return Err(RtlError::Accelerator(AcceleratorError::ErrorResponses {
                responses,
                total,
                control: job.control,
                t0: job.t0,
            }));
        }
        if job.control & regs::CONTROL_ERROR != 0 {
            let status: Vec<String> = registers.iter().map(|(n, v)| format!("{n}={v}")).collect();
            return Err(RtlError::Accelerator(AcceleratorError::Fault {
                control: job.control,
                status: format!("core {k}'s registers: {}", status.join(" ")),
            }));
        }
        let host_cycles = self.cycle - job.t0;
        let hw = registers
            .iter()
            .find(|r| r.0 == "CYCLES")
            .map_or(0, |r| u64::from(r.1));
        // CYCLES wraps at 2^32; the host's count (a few cycles more) gives the high bits.
        let cycles = host_cycles - (host_cycles.wrapping_sub(hw) & 0xffff_ffff);
        let mem1 = self.mem.stats();
        let run = RtlRun {
            cycles,
            host_cycles,
            counters: job.counters,
            mem: MemStats {
                read_bursts: mem1.read_bursts - job.mem0.read_bursts,
                read_beats: mem1.read_beats - job.mem0.read_beats,
                write_bursts: mem1.write_bursts - job.mem0.write_bursts,
                write_beats: mem1.write_beats - job.mem0.write_beats,
            },
            registers,
            wall: job.wall0.elapsed(),
        };
        check_counters(&run, job.insn_count)?;
        Ok(run)
    }

    /// Core `k`'s run failed with `e`: every other run in flight is abandoned and the
    /// simulation reset (see the module docs).
    fn fail_all(&mut self, k: usize, e: RtlError) {
        let why = e.to_string();
        for (j, c) in self.cores.iter_mut().enumerate() {
            if j == k {
                c.job = None;
                c.result = Some(Err(RtlError::Program(format!("core {k}: {why}"))));
            } else if c.job.take().is_some() {
                c.result = Some(Err(RtlError::Program(format!(
                    "core {j}'s run was abandoned: core {k}'s run on the shared bus failed \
                     ({why}), and the simulation was reset"
                ))));
            }
        }
        self.reset();
    }
}

/// Cycles a run may spend waiting for one control-port transaction.
const LITE_STALL_CYCLES: u64 = 1000;

/// The run's cycle, hang and wall-clock bounds, checked between polls.
/// `seen` is the core's last debug state and the cycle of its last progress.
fn check_limits(job: &Job, seen: (u64, u64), now: u64, k: usize) -> Result<(), RtlError> {
    let (dbg, last_progress) = seen;
    let cycle = now - job.t0;
    let state = || format!(" core {k}: {:?}", DebugState::decode(dbg));
    if let Some(max) = job.limits.max_cycles {
        if cycle > max {
            return Err(RtlError::Timeout {
                what: format!(
                    "core {k}'s run did not finish within {max} cycles (raise the bound with \
                     --max-cycles if the program is meant to run this long)"
                ),
                cycle,
                state: state(),
            });
        }
    }
    let idle = now - last_progress;
    if idle > job.limits.hang_cycles {
        return Err(RtlError::Hang {
            idle,
            cycle,
            state: state(),
        });
    }
    if let Some(wall) = job.limits.wall {
        if job.wall0.elapsed() > wall {
            return Err(RtlError::Timeout {
                what: format!(
                    "core {k}'s run did not finish within {:.3} s of host time",
                    wall.as_secs_f64()
                ),
                cycle,
                state: state(),
            });
        }
    }
    Ok(())
}

/// Core `k`'s control port as a blocking `regs::Host` (for the identity check before any
/// run: the clock runs for this core alone).
struct CoreHost<'a> {
    sim: &'a mut MultiCoreSim,
    k: usize,
}

impl CoreHost<'_> {
    fn transaction(&mut self) -> Result<u32, AcceleratorError> {
        for _ in 0..LITE_STALL_CYCLES {
            self.sim.cycle_once();
            if let Some(v) = self.sim.cores[self.k].lite.take_result() {
                return Ok(v);
            }
        }
        Err(AcceleratorError::ControlPort(format!(
            "core {}'s identity registers",
            self.k
        )))
    }
}

impl regs::Host for CoreHost<'_> {
    type Error = AcceleratorError;
    fn read_reg(&mut self, offset: u32) -> Result<u32, AcceleratorError> {
        self.sim.cores[self.k].lite.begin_read(offset);
        self.transaction()
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), AcceleratorError> {
        self.sim.cores[self.k].lite.begin_write(offset, value);
        self.transaction().map(|_| ())
    }
    fn poll_wait(&mut self, _polls: u64) -> Result<(), AcceleratorError> {
        Ok(())
    }
}

/// What the cores of one simulation share: the simulation and the allocator of its memory.
struct Shared {
    sim: MultiCoreSim,
    alloc: Allocator,
}

/// The shared state and the number of threads waiting for it (the thread driving the
/// clock lets them in between its slices, so a core's worker is never locked out).
struct Group {
    shared: Mutex<Shared>,
    waiting: AtomicUsize,
}

impl Group {
    fn lock(&self) -> Result<MutexGuard<'_, Shared>, DeviceError> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let g = self.shared.lock();
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        g.map_err(|_| DeviceError::Unavailable {
            backend: BACKEND.into(),
            source: "another core's worker panicked while simulating".into(),
        })
    }
}

/// The backend name of every core.
const BACKEND: &str = "rtl-cores";

/// Cycles the waiting worker simulates before it lets the others in.
const SLICE_CYCLES: u64 = 2048;

/// One core of a multi-core simulation as a device (see the module docs).
pub struct MultiCoreDevice {
    group: Arc<Group>,
    core: usize,
    cfg: HwConfig,
    name: String,
    /// Limits of every run; [`RunTimeout`] overrides the cycle and wall-clock bounds.
    pub limits: RunLimits,
}

/// The `cores` cores of one new simulation of `cfg` (see [`MultiCoreSim::new`]), as
/// devices sharing its memory (`opts.mem_base`, `opts.mem_size`).
pub fn open_cores(
    cfg: &HwConfig,
    cores: u32,
    opts: &RtlOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<MultiCoreDevice>, DeviceError> {
    assert!(
        opts.mem_base.is_multiple_of(PAGE_SIZE) && opts.mem_size.is_multiple_of(PAGE_SIZE),
        "memory must be whole pages"
    );
    let sim =
        MultiCoreSim::new(cfg, cores, opts, progress).map_err(|e| DeviceError::Unavailable {
            backend: BACKEND.into(),
            source: Box::new(e),
        })?;
    let group = Arc::new(Group {
        shared: Mutex::new(Shared {
            sim,
            alloc: Allocator::new(opts.mem_base, opts.mem_size, PAGE_SIZE),
        }),
        waiting: AtomicUsize::new(0),
    });
    Ok((0..cores as usize)
        .map(|core| MultiCoreDevice {
            group: group.clone(),
            core,
            cfg: cfg.clone(),
            name: format!("{BACKEND}:{cores}#{core}"),
            limits: RunLimits::default(),
        })
        .collect())
}

impl Device for MultiCoreDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> &HwConfig {
        &self.cfg
    }

    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.group.lock()?.alloc.alloc(size, align)
    }

    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.group.lock()?.alloc.free(&buf)
    }

    fn copy_to_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        let mut g = self.group.lock()?;
        let addr = g
            .alloc
            .access("copy to device", buf, offset, data.len() as u64)?;
        g.sim.memory_mut().write(addr, data);
        Ok(())
    }

    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        let g = self.group.lock()?;
        let addr = g
            .alloc
            .access("copy from device", buf, offset, out.len() as u64)?;
        g.sim.memory().read(addr, out);
        Ok(())
    }

    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        let g = self.group.lock()?;
        g.alloc.access("flush", buf, offset, size).map(|_| ())
    }

    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        let g = self.group.lock()?;
        g.alloc.access("invalidate", buf, offset, size).map(|_| ())
    }

    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        let limits = RunLimits {
            max_cycles: timeout.work.or(self.limits.max_cycles),
            wall: timeout.wall.or(self.limits.wall),
            hang_cycles: self.limits.hang_cycles,
        };
        let t = Instant::now();
        let mut g = self.group.lock()?;
        g.sim
            .start(self.core, insn_addr, insn_count, limits)
            .map_err(|e| run_error(&self.name, e))?;
        let run = loop {
            if let Some(r) = g.sim.take_result(self.core) {
                break r.map_err(|e| run_error(&self.name, e))?;
            }
            g.sim.step(SLICE_CYCLES);
            drop(g);
            while self.group.waiting.load(Ordering::SeqCst) > 0 {
                std::thread::yield_now();
            }
            g = self.group.lock()?;
        };
        Ok(run_report(&self.name, &run, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::gen;
    use crate::FsimDevice;
    use drivers::{run_program, ProgramRun};

    fn small() -> HwConfig {
        HwConfig::preset("small").unwrap()
    }

    fn fsim(cfg: &HwConfig, p: &isa::Program) -> ProgramRun {
        run_program(&mut FsimDevice::new(cfg), p, &[], RunTimeout::default()).unwrap()
    }

    /// Two cores run different programs at once, each in its own region of the shared
    /// memory: both store what the functional simulator stores, and the runs overlapped
    /// (the simulation took fewer cycles than the two runs' sum).
    #[test]
    fn two_cores_at_once_store_what_fsim_stores() {
        let cfg = small();
        let opts = RtlOptions::default();
        let mut sim = MultiCoreSim::new(&cfg, 2, &opts, &mut |_| {}).unwrap();
        for seeds in [(1, 2), (3, 4), (5, 5)] {
            let programs = [
                gen::program(&cfg, seeds.0).unwrap(),
                gen::program(&cfg, seeds.1).unwrap(),
            ];
            let bases = [opts.mem_base, opts.mem_base + (64 << 20)];
            let jobs: Vec<(u64, u32)> = programs
                .iter()
                .zip(bases)
                .map(|(p, base)| sim.load_program(p, base).unwrap())
                .collect();
            let before = sim.cycles();
            let runs = sim.run_together(&jobs, &RunLimits::default()).unwrap();
            let elapsed = sim.cycles() - before;
            let mut sum = 0;
            for (k, run) in runs.into_iter().enumerate() {
                let run = run.unwrap_or_else(|e| panic!("seeds {seeds:?}, core {k}: {e}"));
                sum += run.cycles;
                let want = fsim(&cfg, &programs[k]);
                assert_eq!(
                    sim.read_outputs(&programs[k], bases[k]),
                    want.outputs,
                    "seeds {seeds:?}: core {k}'s outputs"
                );
                let counters: Vec<(String, u64)> = run
                    .counters
                    .iter()
                    .map(|(n, v)| (n.to_string(), v))
                    .collect();
                assert_eq!(counters, want.report.counters, "core {k}'s counters");
            }
            assert!(
                elapsed < sum,
                "seeds {seeds:?}: {elapsed} cycles for runs of {sum}"
            );
        }
    }

    /// The cores as devices on two worker threads, as a pool runs them: each equals fsim.
    #[test]
    fn cores_as_devices_on_two_threads_equal_fsim() {
        let cfg = small();
        let devices = open_cores(&cfg, 2, &RtlOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(devices[1].name(), "rtl-cores:2#1");
        std::thread::scope(|s| {
            for (k, mut dev) in devices.into_iter().enumerate() {
                let cfg = cfg.clone();
                s.spawn(move || {
                    for seed in [10 + k as u64, 20 + k as u64] {
                        let p = gen::program(&cfg, seed).unwrap();
                        let got = run_program(&mut dev, &p, &[], RunTimeout::default())
                            .unwrap_or_else(|e| panic!("core {k}, seed {seed}: {e}"));
                        assert_eq!(got.outputs, fsim(&cfg, &p).outputs, "core {k}, seed {seed}");
                        assert!(got.report.get("cycles").unwrap() > 0);
                    }
                });
            }
        });
    }

    /// A memory that stops answering hangs one run: both runs in flight fail saying so, and
    /// after the reset the cores run again.
    #[test]
    fn a_hung_bus_fails_every_run_in_flight_and_a_reset_recovers() {
        let cfg = small();
        let opts = RtlOptions::default();
        let mut sim = MultiCoreSim::new(&cfg, 2, &opts, &mut |_| {}).unwrap();
        let p = gen::program(&cfg, 7).unwrap();
        let bases = [opts.mem_base, opts.mem_base + (64 << 20)];
        let jobs: Vec<(u64, u32)> = bases
            .iter()
            .map(|&b| sim.load_program(&p, b).unwrap())
            .collect();
        sim.set_faults(MemFaults {
            hang_after_bursts: Some(4),
            ..MemFaults::none()
        });
        let limits = RunLimits {
            hang_cycles: 5_000,
            ..RunLimits::default()
        };
        let runs = sim.run_together(&jobs, &limits).unwrap();
        let errors: Vec<String> = runs
            .into_iter()
            .map(|r| r.unwrap_err().to_string())
            .collect();
        assert!(
            errors.iter().any(|e| e.contains("the run hung")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("was abandoned")),
            "{errors:?}"
        );
        sim.set_faults(MemFaults::none());
        let runs = sim.run_together(&jobs, &limits).unwrap();
        for (k, run) in runs.into_iter().enumerate() {
            run.unwrap();
            assert_eq!(sim.read_outputs(&p, bases[k]), fsim(&cfg, &p).outputs);
        }
    }

    #[test]
    fn a_core_outside_the_simulation_is_refused() {
        let cfg = small();
        let mut sim = MultiCoreSim::new(&cfg, 2, &RtlOptions::default(), &mut |_| {}).unwrap();
        let e = sim
            .start(2, 0x1000_0000, 1, RunLimits::default())
            .unwrap_err();
        assert!(e.to_string().contains("cores 0 to 1"), "{e}");
        let e = MultiCoreSim::new(&cfg, 1, &RtlOptions::default(), &mut |_| {})
            .err()
            .unwrap();
        assert!(e.to_string().contains("2 to 8"), "{e}");
    }

    /// A set of runs one of which is refused starts none: the cores stay usable.
    #[test]
    fn a_refused_run_leaves_no_core_busy() {
        let cfg = small();
        let opts = RtlOptions::default();
        let mut sim = MultiCoreSim::new(&cfg, 2, &opts, &mut |_| {}).unwrap();
        let p = gen::program(&cfg, 3).unwrap();
        let good = sim.load_program(&p, opts.mem_base).unwrap();
        let e = sim
            .run_together(&[good, (opts.mem_base + 2, 1)], &RunLimits::default())
            .unwrap_err();
        assert!(e.to_string().contains("not a 16-byte aligned"), "{e}");
        assert!(!sim.busy(0) && !sim.busy(1));
        let runs = sim.run_together(&[good], &RunLimits::default()).unwrap();
        runs.into_iter().next().unwrap().unwrap();
        assert_eq!(sim.read_outputs(&p, opts.mem_base), fsim(&cfg, &p).outputs);
    }
}
