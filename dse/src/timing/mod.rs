//! The analytic cycle model: the cycles an instruction stream takes on the accelerator,
//! estimated in milliseconds instead of the RTL simulator's seconds.
//!
//! It is an instruction-level discrete-event simulation of the hardware `vta_hw` builds:
//!
//! * **fetch** reads the stream in chunks of [`CHUNK`] instructions into a buffer of
//!   [`BUFFER_DEPTH`] and dispatches one instruction per cycle, in order, to the load,
//!   compute or store command queue (`CMD_QUEUE_DEPTH` deep), stalling on a full queue;
//! * each **module** takes its queue's head when the tokens it pops are there (spec 5.3),
//!   does the work and pushes its tokens when the work is complete;
//! * a **LOAD** (of INP and WGT on the load module; UOP, ACC and ACC8 on compute) reads one
//!   request per DRAM row, split into AXI bursts (at most 256 beats, never across 4 KiB),
//!   with at most [`MAX_OUTSTANDING_READS`] bursts in flight (at most the unpacker's
//!   descriptor depth of rows when elements are narrower than the bus), and writes the
//!   padded rectangle at one element per cycle; the **read channel** (one beat per cycle) is
//!   shared by fetch and both modules' loads ([`channel`]);
//! * a **STORE** reads OUT at one element per cycle and writes one burst per row on the write
//!   channel, done when every write is answered;
//! * **GEMM and ALU** go to the execution core's two pipelines (`vta_hw::exec`). Each
//!   issues one micro-op per cycle (the ALU pipeline a tensor-operand micro-op every other
//!   cycle, an ALU MUL every `1 + mul_extra`, both one per cycle inside a pass of the loop
//!   shapes `vta_hw::exec` streams), takes its next instruction as the last micro-op of the
//!   current one issues, and finishes an instruction its pipeline depth
//!   ([`vta_hw::exec::exec_timing`]) after its last issue. An ALU instruction is taken three
//!   cycles after the last GEMM micro-op before it issued, when the ALU queue has room, and
//!   reaches its pipeline two cycles later. A GEMM waits while an earlier ALU instruction
//!   holds one of its ACC banks, when the micro-ops are known ([`program_cycles`] loads
//!   them as the program's LOAD UOPs do): its first micro-op waits, the rest follow it. The
//!   compute module hands each one over and goes on; the tokens of one that pushes are
//!   pushed the cycle after it and everything before it is done. LOADs, FINISH and syncs
//!   that push wait for an idle core.
//!
//! Everything the stream does is known from the instructions and the micro-ops they load
//! (no data-dependent control), so a run is simulated without touching any data. The
//! constants the RTL does not fix in the instruction's terms (cycles of DMA set-up and
//! wind-down, of launching a run) are [`Calibration`]: fitted to RTL runs, with the error on
//! those runs in the README, and checked by `vta dse --validate`. Not modelled: the token
//! queues' capacity (1024 by default, never reached by compiled programs), the compute
//! shell's limits of instructions in flight and of deferred pushes, and a GEMM micro-op
//! other than the first waiting for a bank.

mod channel;

use std::collections::{HashMap, VecDeque};

use isa::tokens::{queues, Queue};
use isa::{AluOp, HwConfig, Insn, MemInsn, MemType, Module, Program, Uop, UopLoop};
use vta_hw::dma::{Gear, DESC_DEPTH, ROUTE_DEPTH};
use vta_hw::exec::issue::{alu_footprint, row_banks};
use vta_hw::exec::{acc_banks, exec_timing, streamed_uops, ExecTiming, ALU_QUEUE};
use vta_hw::fetch::{BUFFER_DEPTH, CHUNK};
use vta_hw::top::{MAX_BURST_BEATS, MAX_OUTSTANDING_READS, MAX_OUTSTANDING_WRITES};
pub use vta_sim::rtl::MemTiming;

use channel::Channel;

/// The model's constants that the instruction stream does not determine, in cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// From a DMA engine's start to its first request reaching the memory (request
    /// generator, arbiter, AXI master).
    pub dma_request: u64,
    /// From a load's last data beat (or padding write) to the instruction's completion.
    pub load_tail: u64,
    /// From a store's start to its first write beat (OUT read, packer).
    pub store_setup: u64,
    /// Around a run: from the start register to the first fetch request, and from FINISH
    /// to the cycle counter stopping.
    pub run_overhead: u64,
    /// Requests (DRAM rows) of a transfer on the read channel that a transfer of another
    /// client, started while it runs, waits behind: the read arbiter grants requests
    /// round-robin, so a small LOAD UOP on the compute module waits for the load module's
    /// rows in flight, not for the rest of its tile (fitted; before, it waited for all of
    /// it, and ResNet-18 on the default config was modelled 0.24% slow).
    pub wait_rows: u64,
}

/// The constants in use: fitted to RTL runs of the digits CNN and of ResNet-18 layers on
/// several configs (see the README's "Design-space exploration").
pub const CALIBRATION: Calibration = Calibration {
    dma_request: 1,
    load_tail: 2,
    store_setup: 3,
    run_overhead: 6,
    wait_rows: 2,
};

/// Why a stream cannot be timed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// Every module waits on a token that is never pushed (the RTL would hang).
    #[error("the program deadlocks: {0}")]
    Deadlock(String),
    /// A flag the instruction's module cannot have.
    #[error("instruction {index}: {flag} is not a legal flag on the {module} module")]
    IllegalFlag {
        index: usize,
        flag: String,
        module: &'static str,
    },
    /// A stream without FINISH never ends.
    #[error("the program has no FINISH instruction")]
    NoFinish,
}

/// Cycles `insns` take on the accelerator `cfg` with memory timing `mem`, from the start
/// register to FINISH (the RTL's cycle counter). Without the micro-ops the stream loads
/// (see [`program_cycles`]), no GEMM waits for an ALU instruction's ACC bank.
pub fn cycles(
    cfg: &HwConfig,
    insns: &[Insn],
    mem: &MemTiming,
    cal: &Calibration,
) -> Result<u64, TimingError> {
    Sim::new(cfg, insns, mem, cal)?.run()
}

/// [`cycles`] of `program`, whose LOAD UOPs bring their micro-ops from its segments: the
/// model then knows which ACC banks each GEMM and ALU instruction uses, and makes a GEMM
/// wait while an earlier ALU instruction holds one of its banks.
pub fn program_cycles(
    program: &Program,
    mem: &MemTiming,
    cal: &Calibration,
) -> Result<u64, TimingError> {
    let mut sim = Sim::new(&program.config, &program.insns, mem, cal)?;
    sim.uops = Some(Uops {
        program,
        buffer: vec![None; program.config.depth(MemType::Uop) as usize],
        decoded: HashMap::new(),
    });
    sim.run()
}

/// The model's micro-op buffer, filled by LOAD UOPs from the program's segments.
struct Uops<'a> {
    program: &'a Program,
    buffer: Vec<Option<Uop>>,
    /// Decoded `uop` segments, by offset.
    decoded: HashMap<u64, Vec<Uop>>,
}

impl Uops<'_> {
    /// A LOAD UOP: `x_size` micro-ops from DRAM element `dram_base` to `sram_base`.
    fn load(&mut self, mi: &MemInsn) {
        let (sram, n) = (mi.sram_base as usize, mi.x_size as usize);
        let found = self
            .program
            .locate(MemType::Uop, u64::from(mi.dram_base))
            .map(|(seg, at)| (seg.offset, seg, at as usize));
        for k in 0..n {
            let uop = found.and_then(|(offset, seg, at)| {
                let list = self
                    .decoded
                    .entry(offset)
                    .or_insert_with(|| self.program.uops(seg));
                list.get(at + k).copied()
            });
            if let Some(slot) = self.buffer.get_mut(sram + k) {
                *slot = uop;
            }
        }
    }

    /// The ACC banks of the `dst` rows a GEMM's micro-ops write (every bank when one is not
    /// known or a row leaves ACC).
    fn gemm_banks(&self, cfg: &HwConfig, lp: &UopLoop) -> u32 {
        let all = (1u32 << acc_banks(cfg.depth(MemType::Acc))) - 1;
        let span = u64::from(lp.iter_out.saturating_sub(1)) * u64::from(lp.dst_factor_out)
            + u64::from(lp.iter_in.saturating_sub(1)) * u64::from(lp.dst_factor_in);
        let mut banks = 0;
        for u in lp.uop_bgn..lp.uop_end {
            let Some(Some(uop)) = self.buffer.get(usize::from(u)) else {
                return all;
            };
            banks |= row_banks(cfg, u64::from(uop.dst_idx), span);
        }
        banks
    }
}

/// One instruction, decoded for the simulation.
struct Entry {
    module: Module,
    pops: Vec<Queue>,
    pushes: Vec<Queue>,
}

/// The simulation state (see the module docs).
struct Sim<'a> {
    cfg: &'a HwConfig,
    insns: &'a [Insn],
    entries: Vec<Entry>,
    mem: MemTiming,
    cal: Calibration,
    exec: ExecTiming,
    read: Channel,
    /// Per module, its instructions' indices in stream order and how many it has taken.
    lists: [Vec<usize>; 3],
    taken: [usize; 3],
    /// Per module, the first cycle it can take its next instruction.
    free: [u64; 3],
    /// Per instruction, when fetch dispatched it and when its module took it.
    dispatched: Vec<Option<u64>>,
    took: Vec<Option<u64>>,
    /// Position of each instruction in its module's list.
    position: Vec<usize>,
    /// Fetch: the next instruction to dispatch, and when each chunk's data is in.
    next_dispatch: usize,
    chunk_ready: Vec<Option<u64>>,
    /// Per token queue, the cycles of its pushes so far, and how many were popped.
    pushes: [Vec<u64>; 4],
    popped: [usize; 4],
    /// The execution core: when each pipeline accepts its next instruction (for GEMM: the
    /// cycle its last micro-op issued), when every instruction handed over is done and its
    /// tokens pushed, and
    /// (taken, accepted by the pipeline) of recent ALU instructions, for the queue's room.
    gemm_accept: u64,
    alu_accept: u64,
    core_done: u64,
    core_pushed: u64,
    /// ALU instructions handed over, as (done, ACC banks), for the GEMMs' bank stall.
    alu_banks: Vec<(u64, u32)>,
    /// The micro-op buffer, when the program's micro-ops are known.
    uops: Option<Uops<'a>>,
    alu_recent: VecDeque<(u64, u64)>,
    /// When FINISH completed.
    finished: Option<u64>,
}

/// An actor's next action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Actor {
    Fetch,
    Module(Module),
}

impl<'a> Sim<'a> {
    fn new(
        cfg: &'a HwConfig,
        insns: &'a [Insn],
        mem: &MemTiming,
        cal: &Calibration,
    ) -> Result<Sim<'a>, TimingError> {
        if !insns.iter().any(|i| matches!(i, Insn::Finish(_))) {
            return Err(TimingError::NoFinish);
        }
        let mut entries = Vec::with_capacity(insns.len());
        let mut lists: [Vec<usize>; 3] = Default::default();
        let mut position = Vec::with_capacity(insns.len());
        for (index, insn) in insns.iter().enumerate() {
            let module = insn.module();
            let (pops, pushes) =
                queues(module, &insn.deps()).map_err(|flag| TimingError::IllegalFlag {
                    index,
                    flag: flag.name().to_string(),
                    module: module.name(),
                })?;
            position.push(lists[module as usize].len());
            lists[module as usize].push(index);
            entries.push(Entry {
                module,
                pops,
                pushes,
            });
        }
        let chunks = insns.len().div_ceil(CHUNK as usize);
        let mut sim = Sim {
            cfg,
            insns,
            entries,
            mem: *mem,
            cal: *cal,
            exec: exec_timing(cfg),
            read: Channel::new(u64::from(mem.beat_interval)),
            lists,
            taken: [0; 3],
            free: [0; 3],
            dispatched: vec![None; insns.len()],
            took: vec![None; insns.len()],
            position,
            next_dispatch: 0,
            chunk_ready: vec![None; chunks],
            pushes: Default::default(),
            popped: [0; 4],
            gemm_accept: 0,
            alu_accept: 0,
            core_done: 0,
            core_pushed: 0,
            alu_banks: Vec::new(),
            uops: None,
            alu_recent: VecDeque::new(),
            finished: None,
        };
        // The buffer holds BUFFER_DEPTH / CHUNK chunks: those are requested at once.
        for c in 0..(BUFFER_DEPTH / CHUNK) as usize {
            sim.request_chunk(c, c as u64);
        }
        Ok(sim)
    }

    fn run(mut self) -> Result<u64, TimingError> {
        loop {
            if let Some(end) = self.finished {
                if self.next_dispatch == self.insns.len()
                    && Module::ALL
                        .iter()
                        .all(|&m| self.taken[m as usize] == self.lists[m as usize].len())
                {
                    return Ok(end + 1 + self.cal.run_overhead);
                }
            }
            let next = [
                Actor::Fetch,
                Actor::Module(Module::Load),
                Actor::Module(Module::Compute),
                Actor::Module(Module::Store),
            ]
            .into_iter()
            .filter_map(|a| self.ready(a).map(|t| (t, a)))
            .min_by_key(|&(t, _)| t);
            let Some((t, actor)) = next else {
                return Err(TimingError::Deadlock(self.blocked()));
            };
            self.read.forget_before(t);
            match actor {
                Actor::Fetch => self.dispatch(t),
                Actor::Module(m) => self.take(m, t),
            }
        }
    }

    /// When `actor` can act next; `None` while it waits on another actor (or is done).
    fn ready(&self, actor: Actor) -> Option<u64> {
        match actor {
            Actor::Fetch => {
                let k = self.next_dispatch;
                if k == self.insns.len() {
                    return None;
                }
                let arrived = self.arrival(k)?;
                let after_previous = k
                    .checked_sub(1)
                    .map_or(0, |p| self.dispatched[p].expect("dispatched in order") + 1);
                // Room in the command queue: the instruction CMD_QUEUE_DEPTH places ahead
                // in the same queue has been taken.
                let m = self.entries[k].module as usize;
                let depth = self.cfg.cmd_queue_depth as usize;
                let room = match self.position[k].checked_sub(depth) {
                    Some(ahead) => self.took[self.lists[m][ahead]]? + 1,
                    None => 0,
                };
                Some(arrived.max(after_previous).max(room))
            }
            Actor::Module(m) => {
                let i = m as usize;
                let &k = self.lists[i].get(self.taken[i])?;
                let mut t = self.free[i].max(self.dispatched[k]? + 1);
                for &q in &self.entries[k].pops {
                    let token = *self.pushes[q as usize].get(self.popped[q as usize])?;
                    t = t.max(token + 1);
                }
                Some(t)
            }
        }
    }

    /// What every module waits for, for a deadlock report.
    fn blocked(&self) -> String {
        let mut why = Vec::new();
        for m in Module::ALL {
            let i = m as usize;
            let Some(&k) = self.lists[i].get(self.taken[i]) else {
                continue;
            };
            let waits: Vec<&str> = self.entries[k]
                .pops
                .iter()
                .filter(|&&q| self.pushes[q as usize].len() <= self.popped[q as usize])
                .map(|q| q.name())
                .collect();
            if !waits.is_empty() {
                why.push(format!(
                    "{} waits at instruction {k} for a {} token",
                    m.name(),
                    waits.join(" and ")
                ));
            }
        }
        if why.is_empty() {
            "the command queues are full".into()
        } else {
            why.join("; ")
        }
    }

    /// Fetch asks for chunk `c` at cycle `t` (if it exists).
    fn request_chunk(&mut self, c: usize, t: u64) {
        if c >= self.chunk_ready.len() {
            return;
        }
        let first = c * CHUNK as usize;
        let n = (self.insns.len() - first).min(CHUNK as usize) as u64;
        let beats = (n * 16).div_ceil(u64::from(self.cfg.axi_data_width / 8));
        let start = t + self.cal.dma_request + u64::from(self.mem.read_latency);
        let interval = u64::from(self.mem.beat_interval);
        // One request: a later transfer waits for all of it.
        self.chunk_ready[c] = Some(self.read.book(start, beats, beats * interval));
    }

    /// When instruction `k`'s last byte is in the fetch buffer (its chunk's beats arrive in
    /// order, ending when the chunk's booking ends), if its chunk has been requested.
    fn arrival(&self, k: usize) -> Option<u64> {
        let c = k / CHUNK as usize;
        let end = self.chunk_ready[c]?;
        let last = ((c + 1) * CHUNK as usize).min(self.insns.len());
        let bytes_after = (last - 1 - k) as u64 * 16;
        let beats_after = bytes_after / u64::from(self.cfg.axi_data_width / 8);
        Some(end - beats_after * u64::from(self.mem.beat_interval))
    }

    fn dispatch(&mut self, t: u64) {
        let k = self.next_dispatch;
        self.dispatched[k] = Some(t);
        self.next_dispatch += 1;
        // With this one dispatched the buffer has room for another chunk.
        let dispatched = self.next_dispatch;
        if dispatched.is_multiple_of(CHUNK as usize) {
            let c = (dispatched + BUFFER_DEPTH as usize) / CHUNK as usize - 1;
            self.request_chunk(c, t + 1);
        }
    }

    /// Module `m` takes its head instruction at cycle `t`: pops, work, pushes.
    fn take(&mut self, m: Module, t: u64) {
        let i = m as usize;
        let k = self.lists[i][self.taken[i]];
        self.taken[i] += 1;
        self.took[k] = Some(t);
        for q in self.entries[k].pops.clone() {
            self.popped[q as usize] += 1;
        }
        let pushes = !self.entries[k].pushes.is_empty();
        let launch = t + 1;
        let (done, free) = match (m, self.insns[k]) {
            (Module::Load, Insn::Load(mi)) => {
                let d = self.load(&mi, launch);
                (d, d + 1)
            }
            (Module::Store, Insn::Store(mi)) => {
                let d = self.store(&mi, launch);
                (d, d + 1)
            }
            (Module::Compute, Insn::Gemm(g)) => {
                let banks = self
                    .uops
                    .as_ref()
                    .map_or(0, |u| u.gemm_banks(self.cfg, &g.lp));
                self.execute(launch, &g.lp, Rate::Gemm, banks, pushes)
            }
            (Module::Compute, Insn::Alu(a)) => {
                let streamed = streamed_uops(self.cfg, &a);
                let rate = if a.lp.reset_reg {
                    Rate::Immediate
                } else if a.op == AluOp::Mul && self.cfg.alu_mul {
                    Rate::Mul { streamed }
                } else if a.use_imm {
                    Rate::Immediate
                } else {
                    Rate::Tensor { streamed }
                };
                let banks = self.uops.as_ref().map_or(0, |u| {
                    let first = u.buffer.get(usize::from(a.lp.uop_bgn)).copied().flatten();
                    alu_footprint(self.cfg, &a, first.as_ref())
                });
                self.execute(launch, &a.lp, rate, banks, pushes)
            }
            (Module::Compute, Insn::Load(mi)) if mi.x_size == 0 && !pushes => (launch, launch + 1),
            (Module::Compute, insn) => {
                // LOAD UOP/ACC/ACC8, FINISH and pushing syncs wait for an idle core.
                let start = launch.max(self.core_done + 1).max(self.core_pushed + 1);
                let d = match insn {
                    Insn::Load(mi) => {
                        if let (Some(u), MemType::Uop) = (&mut self.uops, mi.memory_type) {
                            u.load(&mi);
                        }
                        self.load(&mi, start)
                    }
                    _ => start,
                };
                if matches!(insn, Insn::Finish(_)) {
                    self.finished = Some(d);
                }
                (d, d + 1)
            }
            // A sync, or an instruction the module does not execute (the decoder treats it as
            // a sync): only its tokens act.
            _ => (launch, launch + 1),
        };
        for q in self.entries[k].pushes.clone() {
            self.pushes[q as usize].push(done);
        }
        self.free[i] = free;
    }

    /// A GEMM or ALU instruction using ACC banks `banks` (bit per bank), handed to the core
    /// from `launch`: (the cycle its tokens are pushed, module free).
    fn execute(
        &mut self,
        launch: u64,
        lp: &UopLoop,
        rate: Rate,
        banks: u32,
        pushes: bool,
    ) -> (u64, u64) {
        let n = u64::from(lp.iter_out)
            * u64::from(lp.iter_in)
            * u64::from(lp.uop_end.saturating_sub(lp.uop_bgn));
        let x = &self.exec;
        let (span, latency) = match (rate, n) {
            (_, 0) => (1, x.done_latency),
            (Rate::Gemm | Rate::Immediate, n) => (n, x.done_latency),
            // A streamed micro-op follows the previous one at once; the others (but the
            // first) wait their kind's gap.
            (Rate::Tensor { streamed }, n) => (2 * n - 1 - streamed, x.done_latency),
            (Rate::Mul { streamed }, n) => (
                n + (n - 1 - streamed) * u64::from(x.mul_extra),
                x.mul_done_latency,
            ),
        };
        let (handoff, done) = if rate == Rate::Gemm {
            let accept = launch.max(self.gemm_accept);
            // Its first micro-op waits in stage 2 until every earlier ALU instruction that
            // holds one of its banks is done; the rest follow it.
            self.alu_banks.retain(|&(done, _)| done + 1 >= accept);
            let held = self.alu_banks.iter().filter(|&&(_, b)| b & banks != 0);
            let start = held
                .map(|&(done, _)| done.saturating_sub(2))
                .fold(accept, u64::max);
            self.gemm_accept = start + span;
            (accept, start + span + u64::from(latency))
        } else {
            // Taken three cycles after the last GEMM micro-op before it issued, when the
            // queue has room; in the pipeline two cycles later at the earliest.
            let queued = |x: u64, recent: &VecDeque<(u64, u64)>| {
                recent
                    .iter()
                    .filter(|&&(taken, accepted)| taken + 2 <= x && x <= accepted)
                    .count() as u32
            };
            let mut take = launch.max(self.gemm_accept + 3);
            while queued(take, &self.alu_recent) >= ALU_QUEUE - 1 {
                take += 1;
            }
            let accept = (take + 2).max(self.alu_accept);
            if self.alu_recent.len() == ALU_QUEUE as usize {
                self.alu_recent.pop_front();
            }
            self.alu_recent.push_back((take, accept));
            self.alu_accept = accept + span;
            let done = accept + span + u64::from(latency);
            if banks != 0 {
                self.alu_banks.push((done, banks));
            }
            (take, done)
        };
        self.core_done = self.core_done.max(done);
        if pushes {
            // The tokens wait for this and every instruction handed over before it.
            self.core_pushed = self.core_done + 1;
            (self.core_pushed, handoff + 1)
        } else {
            (handoff, handoff + 1)
        }
    }

    /// A LOAD's data movement started at `start`; returns its completion cycle.
    fn load(&mut self, mi: &MemInsn, start: u64) -> u64 {
        if mi.x_size == 0 {
            return start;
        }
        let gear = Gear {
            elem_bits: self.cfg.elem_bits(mi.memory_type),
            bus_bits: self.cfg.axi_data_width,
        };
        let rows = self.rows(mi, gear);
        // Rows in flight: the memory's bursts, and for narrow elements the unpacker's
        // descriptors; each holds its slot for the latency plus its beats.
        let inflight = if gear.wide() {
            MAX_OUTSTANDING_READS.min(ROUTE_DEPTH)
        } else {
            MAX_OUTSTANDING_READS.min(DESC_DEPTH)
        } as u64;
        let latency = u64::from(self.mem.read_latency);
        let interval = u64::from(self.mem.beat_interval);
        // Requests go out from `issue`; each burst holds a slot from its request to its last
        // beat, so the data takes at least the slots' turnover.
        let issue = start + self.cal.dma_request;
        let turnover = (latency + rows.beats_per_row * interval) * rows.count / inflight;
        // Another client's transfer starting meanwhile waits for a few of this one's rows,
        // not all of them (the arbiter grants requests round-robin).
        let per_request = rows.beats / u64::from(mi.y_size).max(1);
        let grain = self.cal.wait_rows * per_request * interval;
        let channel_end = self.read.book(issue + latency, rows.beats, grain);
        let data_end = channel_end.max(issue + turnover);
        // The writer: one element per cycle over the padded rectangle, the data elements
        // no sooner than they arrive.
        let cols = u64::from(mi.x_pad_0) + u64::from(mi.x_size) + u64::from(mi.x_pad_1);
        let all_rows = u64::from(mi.y_pad_0) + u64::from(mi.y_size) + u64::from(mi.y_pad_1);
        let after_data = u64::from(mi.x_pad_1) + u64::from(mi.y_pad_1) * cols;
        let writer_end = (start + cols * all_rows).max(data_end + after_data);
        writer_end + self.cal.load_tail
    }

    /// Beats and rows of a LOAD's or STORE's DRAM rows, as the engines request them
    /// (`vta_hw::dma::row_request`).
    fn rows(&self, mi: &MemInsn, gear: Gear) -> Rows {
        let (x, y) = (u64::from(mi.x_size), u64::from(mi.y_size));
        let beat_bytes = u64::from(gear.bus_bits / 8);
        let elem_bytes = u64::from(gear.elem_bits / 8);
        let bursts_in = |byte_addr: u64, beats: u64| -> u64 {
            // Split at 4 KiB boundaries and at MAX_BURST_BEATS.
            let mut n = 0;
            let (mut a, mut left) = (byte_addr, beats);
            while left > 0 {
                let to_page = (4096 - a % 4096) / beat_bytes;
                let b = left.min(to_page).min(u64::from(MAX_BURST_BEATS));
                n += 1;
                left -= b;
                a += b * beat_bytes;
            }
            n
        };
        let mut beats = 0;
        let mut bursts = 0;
        for r in 0..y {
            let elem = u64::from(mi.dram_base) + r * u64::from(mi.x_stride);
            let (addr, b) = if gear.wide() {
                (elem * elem_bytes, x * u64::from(gear.beats_per_elem()))
            } else {
                let k = u64::from(gear.elems_per_beat());
                let skip = elem % k;
                ((elem - skip) * elem_bytes, (skip + x).div_ceil(k))
            };
            beats += b;
            bursts += bursts_in(addr, b);
        }
        Rows {
            count: bursts.max(1),
            beats,
            beats_per_row: beats / bursts.max(1),
        }
    }

    /// A STORE started at `start`; returns its completion (every write answered). The store
    /// module is the only writer, and a STORE completes only once its writes are answered,
    /// so the write channel is always free when one starts.
    fn store(&mut self, mi: &MemInsn, start: u64) -> u64 {
        if mi.x_size == 0 {
            return start;
        }
        let gear = Gear {
            elem_bits: self.cfg.elem_bits(MemType::Out),
            bus_bits: self.cfg.axi_data_width,
        };
        let rows = self.rows(mi, gear);
        let interval = u64::from(self.mem.beat_interval);
        let latency = u64::from(self.mem.write_latency);
        // OUT is read one element per cycle; beats leave one per interval; each burst holds
        // one of the master's write slots from its first beat to its response.
        let reads = u64::from(mi.x_size) * u64::from(mi.y_size);
        let paced = (rows.beats_per_row * interval + latency) * rows.count
            / u64::from(MAX_OUTSTANDING_WRITES);
        start + self.cal.store_setup + reads.max(rows.beats * interval).max(paced) + latency
    }
}

/// How fast the core issues an instruction's micro-ops; `streamed` of them follow the
/// previous one at once ([`streamed_uops`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rate {
    Gemm,
    Immediate,
    Tensor { streamed: u64 },
    Mul { streamed: u64 },
}

/// A transfer's bursts.
struct Rows {
    /// Bursts (at least 1).
    count: u64,
    beats: u64,
    /// Average beats per burst.
    beats_per_row: u64,
}

#[cfg(test)]
mod tests;
