//! The functional simulator: scratchpads, token-checked scheduling of the three modules, and
//! the execution of every instruction as `isa::spec` defines it.

use std::time::Instant;

use isa::config::LUT_ENTRIES;
use isa::tokens::{self, DepFlag};
use isa::INSN_BYTES;
use isa::{
    AluInsn, AluOp, Codec, GemmInsn, HwConfig, Insn, MemInsn, MemType, Module, StreamError, Uop,
    UopLoop,
};

use crate::error::{buffer_name, describe, Blocked, Deadlock, Fault, FsimError, Limits, Queue};
use crate::kernels::{self, Loop, Shape, WgtLanes};
use crate::mem::Memory;
use crate::races::RaceDetector;

/// Entries of the activation table.
const TABLE_LEN: usize = LUT_ENTRIES as usize;
use crate::Counters;
use isa::lanes;

/// Bit-exact, token-checked functional model of one accelerator config.
///
/// Scratchpads (INP, WGT, ACC, UOP) persist across runs, as on hardware; they start zeroed.
/// The OUT buffer is not stored: by the spec it always equals the low OUT_WIDTH bits of each
/// ACC lane, so STORE derives it from ACC.
pub struct Fsim {
    cfg: HwConfig,
    codec: Codec,
    sh: Shape,
    depth: Depths,
    /// `depth(INP) * BATCH * BLOCK_IN` lanes, each sign-extended to i16.
    inp: Vec<i16>,
    /// `depth(WGT)` tiles of `BLOCK_OUT x BLOCK_IN` lanes, sign-extended (to i8 or i16, see
    /// [`WgtLanes`]), each stored in the pair-interleaved order of [`kernels::wgt_slot`].
    wgt: WgtLanes,
    /// `depth(ACC) * BATCH * BLOCK_OUT` lanes, each a sign-extended ACC_WIDTH-bit value.
    acc: Vec<i32>,
    uop: Vec<Uop>,
    /// The activation table of configs with `ALU_LUT` (spec 8.3), indexed by [`lut_index`].
    table: [i8; TABLE_LEN],
    /// Reused DMA row buffer.
    row: Vec<u8>,
    /// Reused buffer of WGT lanes in natural order.
    lanes: Vec<i16>,
    /// Check every run for races ([`crate::races`]).
    check_races: bool,
}

#[derive(Debug, Clone, Copy)]
struct Depths {
    inp: u32,
    wgt: u32,
    acc: u32,
    uop: u32,
}

impl Depths {
    fn of(&self, m: MemType) -> u32 {
        match m {
            MemType::Inp => self.inp,
            MemType::Wgt => self.wgt,
            MemType::Acc | MemType::Acc8 | MemType::Out => self.acc,
            MemType::Uop => self.uop,
        }
    }
}

/// The queues an instruction pops before it starts and pushes after it completes.
type FlagQueues = ([Option<Queue>; 2], [Option<Queue>; 2]);

/// Where the dependency flags of an instruction lead, by module (spec "Tokens"); the error
/// names a flag that is illegal on the module.
fn flag_queues(module: Module, insn: &Insn) -> Result<FlagQueues, &'static str> {
    let d = insn.deps();
    let (mut pops, mut pushes) = ([None; 2], [None; 2]);
    for flag in DepFlag::ALL.into_iter().filter(|&f| d.get(f)) {
        let q = tokens::route(module, flag).ok_or(flag.name())?;
        let slots = if flag.is_push() {
            &mut pushes
        } else {
            &mut pops
        };
        // "prev" flags take the first slot, "next" flags the second.
        slots[flag as usize % 2] = Some(q);
    }
    Ok((pops, pushes))
}

fn module_index(m: Module) -> usize {
    match m {
        Module::Load => 0,
        Module::Compute => 1,
        Module::Store => 2,
    }
}

/// Micro-op iterations of a GEMM/ALU loop.
fn loop_uops(lp: &UopLoop) -> u64 {
    u64::from(lp.iter_out)
        * u64::from(lp.iter_in)
        * u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
}

/// The lexicographically first (o, i) with `base + o*fo + i*fi >= depth`, if any.
fn first_out_of_range(
    base: u64,
    fo: u64,
    fi: u64,
    io: u64,
    ii: u64,
    depth: u64,
) -> Option<(u64, u64)> {
    if base + (io - 1) * fo + (ii - 1) * fi < depth {
        return None;
    }
    let need_o = depth.saturating_sub(base + (ii - 1) * fi);
    let o = if need_o == 0 { 0 } else { need_o.div_ceil(fo) };
    let need_i = depth.saturating_sub(base + o * fo);
    let i = if need_i == 0 { 0 } else { need_i.div_ceil(fi) };
    Some((o, i))
}

struct ModState {
    /// Indices (in the whole stream) of this module's instructions, in program order.
    insns: Vec<usize>,
    /// Next instruction to start.
    pos: usize,
    /// Pushes the last executed instruction still owes (its queue was full).
    owed: [Option<Queue>; 2],
}

impl Fsim {
    /// A simulator with zeroed scratchpads.
    pub fn new(cfg: &HwConfig) -> Self {
        let depth = Depths {
            inp: cfg.depth(MemType::Inp),
            wgt: cfg.depth(MemType::Wgt),
            acc: cfg.depth(MemType::Acc),
            uop: cfg.depth(MemType::Uop),
        };
        let (b, bi, bo) = (
            cfg.batch() as usize,
            cfg.block_in() as usize,
            cfg.block_out() as usize,
        );
        let sh = Shape {
            block_in: bi,
            block_out: bo,
            inp_lanes: b * bi,
            wgt_lanes: bi.div_ceil(2) * 2 * bo,
            acc_lanes: b * bo,
            acc_shift: 32 - cfg.acc_width(),
            log_acc_width: cfg.log_acc_width,
        };
        Fsim {
            cfg: cfg.clone(),
            codec: Codec::new(cfg),
            sh,
            depth,
            inp: vec![0; depth.inp as usize * sh.inp_lanes],
            wgt: WgtLanes::new(cfg.wgt_width(), depth.wgt as usize * sh.wgt_lanes),
            acc: vec![0; depth.acc as usize * sh.acc_lanes],
            uop: vec![Uop::default(); depth.uop as usize],
            table: [0; TABLE_LEN],
            row: Vec::new(),
            lanes: Vec::new(),
            check_races: false,
        }
    }

    /// Whether runs check that the dependency tokens order every pair of conflicting accesses
    /// by different modules ([`crate::races`]); a race fails the run with
    /// [`FsimError::Race`]. Off by default: it costs about as much as the simulation.
    pub fn set_race_check(&mut self, on: bool) {
        self.check_races = on;
    }

    pub fn config(&self) -> &HwConfig {
        &self.cfg
    }

    /// The GEMM loop this simulator runs on this CPU: `avx2` (x86-64 with AVX2, whole
    /// 8-lane output vectors and paired input channels) or `portable`.
    pub fn gemm_kernel(&self) -> &'static str {
        kernels::gemm_kernel_name(&self.sh)
    }

    /// Zeroes every scratchpad (the state of a freshly reset device).
    pub fn clear(&mut self) {
        self.inp.fill(0);
        let lanes = self.depth.wgt as usize * self.sh.wgt_lanes;
        self.wgt.zero(0..lanes);
        self.acc.fill(0);
        self.uop.fill(Uop::default());
        self.table.fill(0);
    }

    /// INP row `idx`: `BATCH * BLOCK_IN` lanes, batch-major.
    pub fn inp_row(&self, idx: u32) -> &[i16] {
        let n = self.sh.inp_lanes;
        &self.inp[idx as usize * n..][..n]
    }

    /// WGT tile `idx`: `BLOCK_OUT * BLOCK_IN` lanes, lane `n * BLOCK_IN + k` (row n =
    /// output channel).
    pub fn wgt_tile(&self, idx: u32) -> Vec<i16> {
        let (bi, bo) = (self.sh.block_in, self.sh.block_out);
        let tile = idx as usize * self.sh.wgt_lanes;
        (0..bo * bi)
            .map(|l| self.wgt.get(tile + kernels::wgt_slot(bo, l / bi, l % bi)))
            .collect()
    }

    /// ACC row `idx`: `BATCH * BLOCK_OUT` lanes, batch-major.
    pub fn acc_row(&self, idx: u32) -> &[i32] {
        let n = self.sh.acc_lanes;
        &self.acc[idx as usize * n..][..n]
    }

    /// OUT row `idx` as signed OUT_WIDTH-bit lanes: the low bits of ACC row `idx`.
    pub fn out_row(&self, idx: u32) -> Vec<i32> {
        let s = 32 - self.cfg.out_width();
        self.acc_row(idx).iter().map(|&v| (v << s) >> s).collect()
    }

    /// Micro-op `idx` of the UOP buffer.
    pub fn uop(&self, idx: u32) -> Uop {
        self.uop[idx as usize]
    }

    /// The activation table (configs with `ALU_LUT`; spec 8.3): entry `e` is the value for
    /// the int8 input `e as u8 as i8`.
    pub fn table(&self) -> &[i8; TABLE_LEN] {
        &self.table
    }

    /// Fetches `insn_count` instructions at byte address `insn_addr`, decodes them and runs
    /// them until FINISH retires. Token queues start empty; scratchpads keep their contents.
    pub fn run(
        &mut self,
        mem: &mut dyn Memory,
        insn_addr: u64,
        insn_count: u32,
        limits: &Limits,
    ) -> Result<Counters, FsimError> {
        // Fetch in chunks so that a bogus count faults at the end of memory instead of
        // allocating for all of it up front.
        const CHUNK: u64 = 4096;
        let mut insns = Vec::new();
        let mut bytes = Vec::new();
        let mut done = 0u64;
        while done < u64::from(insn_count) {
            let n = CHUNK.min(u64::from(insn_count) - done);
            bytes.resize(n as usize * INSN_BYTES, 0);
            mem.read(insn_addr + done * INSN_BYTES as u64, &mut bytes)
                .map_err(|fault| FsimError::Fetch {
                    addr: insn_addr,
                    count: insn_count,
                    fault,
                })?;
            let chunk = self.codec.decode_stream(&bytes).map_err(|e| match e {
                StreamError::At { index, source } => FsimError::Decode(StreamError::At {
                    index: index + done as usize,
                    source,
                }),
                other => FsimError::Decode(other),
            })?;
            insns.extend(chunk);
            done += n;
        }
        self.run_insns(mem, &insns, limits)
    }

    /// Runs already-decoded instructions (as if fetched); each is checked as the decoder would.
    pub fn run_insns(
        &mut self,
        mem: &mut dyn Memory,
        insns: &[Insn],
        limits: &Limits,
    ) -> Result<Counters, FsimError> {
        let start = Instant::now();
        // Static checks: encodable under the config, legal flags, a FINISH without pushes.
        let mut flags = Vec::with_capacity(insns.len());
        let mut mods: [ModState; 3] = std::array::from_fn(|_| ModState {
            insns: Vec::new(),
            pos: 0,
            owed: [None; 2],
        });
        for (index, insn) in insns.iter().enumerate() {
            self.codec
                .check(insn)
                .map_err(|source| FsimError::Decode(StreamError::At { index, source }))?;
            let module = insn.module();
            let f = flag_queues(module, insn).map_err(|flag| FsimError::IllegalFlag {
                index,
                insn: describe(insn),
                module,
                flag,
            })?;
            if let Insn::Finish(d) = insn {
                if let Some(flag) = [DepFlag::PushPrev, DepFlag::PushNext]
                    .into_iter()
                    .find(|&f| d.get(f))
                {
                    return Err(FsimError::FinishPush {
                        index,
                        flag: flag.name(),
                    });
                }
            }
            flags.push(f);
            mods[module_index(module)].insns.push(index);
        }
        if !insns.iter().any(|i| matches!(i, Insn::Finish(_))) {
            return Err(FsimError::NoFinish { count: insns.len() });
        }

        let cap = self.cfg.token_queue_depth;
        let mut races = self.check_races.then(|| RaceDetector::new(&self.cfg));
        let mut tokens = [0u32; 4];
        let mut c = Counters::default();
        let mut steps = 0u64;
        loop {
            let mut progress = false;
            for m in 0..3 {
                loop {
                    let st = &mut mods[m];
                    // Finish the pushes of the last instruction first.
                    for slot in &mut st.owed {
                        if let Some(q) = *slot {
                            if tokens[q as usize] < cap {
                                tokens[q as usize] += 1;
                                *slot = None;
                                progress = true;
                                if let Some(r) = &mut races {
                                    r.push(Module::ALL[m], q);
                                }
                            }
                        }
                    }
                    if st.owed.iter().any(Option::is_some) || st.pos == st.insns.len() {
                        break;
                    }
                    let index = st.insns[st.pos];
                    let (pops, pushes) = flags[index];
                    if pops.iter().flatten().any(|&q| tokens[q as usize] == 0) {
                        break;
                    }
                    let insn = &insns[index];
                    let cost = 1 + match insn {
                        Insn::Gemm(g) => loop_uops(&g.lp),
                        Insn::Alu(a) => loop_uops(&a.lp),
                        _ => 0,
                    };
                    if steps.saturating_add(cost) > limits.max_steps {
                        return Err(FsimError::StepLimit {
                            limit: limits.max_steps,
                            index,
                            insn: describe(insn),
                            done: steps,
                            needed: cost,
                        });
                    }
                    if let Some(limit) = limits.max_time {
                        if start.elapsed() > limit {
                            return Err(FsimError::Timeout {
                                limit,
                                index,
                                insn: describe(insn),
                            });
                        }
                    }
                    steps += cost;
                    for &q in pops.iter().flatten() {
                        tokens[q as usize] -= 1;
                    }
                    st.pos += 1;
                    st.owed = pushes;
                    progress = true;
                    match m {
                        0 => c.load_insns += 1,
                        1 => c.compute_insns += 1,
                        _ => c.store_insns += 1,
                    }
                    if let (Insn::Finish(_), Some(r)) = (insn, &mut races) {
                        r.begin(Module::Compute, index, pops.iter().flatten().copied());
                        let last = std::array::from_fn(|k| {
                            mods[k].pos.checked_sub(1).map(|p| mods[k].insns[p])
                        });
                        r.finish(index, last);
                        if let Some(race) = r.race() {
                            return Err(FsimError::race(race, insns));
                        }
                    }
                    if let Insn::Finish(_) = insn {
                        c.macs = c.gemm_uops * self.cfg.macs_per_uop();
                        return self.finish_check(insns, index, &mods, &tokens).map(|()| c);
                    }
                    if let Some(r) = &mut races {
                        let module = Module::ALL[m];
                        r.begin(module, index, pops.iter().flatten().copied());
                        let uops = match insn {
                            Insn::Gemm(GemmInsn { lp, .. }) | Insn::Alu(AluInsn { lp, .. }) => self
                                .uop
                                .get(usize::from(lp.uop_bgn)..usize::from(lp.uop_end))
                                .unwrap_or(&[]),
                            _ => &[],
                        };
                        r.execute(module, insn, uops);
                        if let Some(race) = r.race() {
                            return Err(FsimError::race(race, insns));
                        }
                    }
                    self.execute(mem, insn, &mut c)
                        .map_err(|fault| FsimError::At {
                            index,
                            insn: describe(insn),
                            fault,
                        })?;
                }
            }
            if !progress {
                return Err(self.deadlock(insns, &mods, tokens, cap));
            }
        }
    }

    /// The checks at FINISH: nothing left to do anywhere, every queue empty.
    fn finish_check(
        &self,
        insns: &[Insn],
        index: usize,
        mods: &[ModState; 3],
        tokens: &[u32; 4],
    ) -> Result<(), FsimError> {
        let mut problems = Vec::new();
        for (m, st) in Module::ALL.iter().zip(mods) {
            let left = &st.insns[st.pos..];
            if let Some(&first) = left.first() {
                if *m == Module::Compute {
                    problems.push(format!(
                        "the compute module has {} instruction(s) after it (first: instruction \
                         {first}, {}); FINISH must be the last compute instruction",
                        left.len(),
                        describe(&insns[first])
                    ));
                } else {
                    problems.push(format!(
                        "the {} module has {} instruction(s) not executed (first: instruction \
                         {first}, {}); make FINISH wait for them through tokens",
                        m.name(),
                        left.len(),
                        describe(&insns[first])
                    ));
                }
            } else if st.owed.iter().any(Option::is_some) {
                problems.push(format!(
                    "the {} module's last instruction is still waiting to push a token",
                    m.name()
                ));
            }
        }
        for q in Queue::ALL {
            let n = tokens[q as usize];
            if n == 0 {
                continue;
            }
            let hint = match q {
                Queue::L2g => {
                    "compute never popped what load pushed (push_next on LOAD needs a \
                               pop_prev on a compute instruction)"
                }
                Queue::G2l => {
                    "load never popped what compute pushed (push_prev on compute needs \
                               a pop_next on a LOAD INP/WGT)"
                }
                Queue::G2s => {
                    "store never popped what compute pushed (push_next on compute \
                               needs a pop_prev on a STORE)"
                }
                Queue::S2g => "FINISH should pop the store's token: set pop_next on FINISH",
            };
            problems.push(format!("token queue {q} still holds {n} token(s): {hint}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(FsimError::Unfinished { index, problems })
        }
    }

    fn deadlock(
        &self,
        insns: &[Insn],
        mods: &[ModState; 3],
        tokens: [u32; 4],
        cap: u32,
    ) -> FsimError {
        let modules = Module::ALL
            .iter()
            .zip(mods)
            .map(|(&m, st)| {
                let blocked = if st.owed.iter().any(Option::is_some) {
                    let index = st.insns[st.pos - 1];
                    Blocked::Push {
                        index,
                        insn: describe(&insns[index]),
                        queues: st.owed.iter().flatten().copied().collect(),
                    }
                } else if st.pos < st.insns.len() {
                    let index = st.insns[st.pos];
                    let insn = &insns[index];
                    let (pops, _) = flag_queues(m, insn).expect("checked before the run");
                    Blocked::Pop {
                        index,
                        insn: describe(insn),
                        queues: pops
                            .iter()
                            .flatten()
                            .copied()
                            .filter(|&q| tokens[q as usize] == 0)
                            .collect(),
                    }
                } else {
                    Blocked::Done {
                        executed: st.insns.len(),
                    }
                };
                (m, blocked)
            })
            .collect();
        FsimError::Deadlock(Box::new(Deadlock {
            modules,
            tokens,
            capacity: cap,
        }))
    }

    fn execute(
        &mut self,
        mem: &mut dyn Memory,
        insn: &Insn,
        c: &mut Counters,
    ) -> Result<(), Fault> {
        match insn {
            Insn::Load(m) => {
                let bytes = self.load(mem, m)?;
                match m.memory_type {
                    MemType::Inp => c.inp_load_bytes += bytes,
                    MemType::Wgt => c.wgt_load_bytes += bytes,
                    MemType::Acc | MemType::Acc8 => c.acc_load_bytes += bytes,
                    MemType::Uop => c.uop_load_bytes += bytes,
                    MemType::Out => unreachable!("Codec::check refuses LOAD OUT"),
                }
            }
            Insn::Store(m) => c.out_store_bytes += self.store(mem, m)?,
            Insn::Gemm(g) => {
                let n = self.gemm(g)?;
                if g.lp.reset_reg {
                    c.reset_uops += n;
                } else {
                    c.gemm_uops += n;
                }
            }
            Insn::Alu(a) => {
                let n = self.alu(a)?;
                if a.lp.reset_reg {
                    c.reset_uops += n;
                } else {
                    c.alu_uops += n;
                }
            }
            Insn::Finish(_) => {}
        }
        Ok(())
    }

    /// LOAD (spec "LOAD"); returns the DRAM bytes read.
    fn load(&mut self, mem: &dyn Memory, m: &MemInsn) -> Result<u64, Fault> {
        if m.x_size == 0 {
            return Ok(0);
        }
        let mt = m.memory_type;
        if mt == MemType::Uop {
            for (field, value) in [
                ("y_pad_0", m.y_pad_0),
                ("y_pad_1", m.y_pad_1),
                ("x_pad_0", m.x_pad_0),
                ("x_pad_1", m.x_pad_1),
            ] {
                if value != 0 {
                    return Err(Fault::UopPadding { field, value });
                }
            }
        }
        let width = u64::from(m.x_pad_0) + u64::from(m.x_size) + u64::from(m.x_pad_1);
        let rows = u64::from(m.y_pad_0) + u64::from(m.y_size) + u64::from(m.y_pad_1);
        let start = u64::from(m.sram_base);
        let end = start + width * rows;
        let depth = self.depth.of(mt);
        if end > u64::from(depth) {
            return Err(Fault::SramRange {
                buffer: buffer_name(mt),
                access: "write",
                start,
                end,
                depth,
            });
        }
        let eb = u64::from(self.cfg.elem_bytes(mt));
        let (s, e) = (start as usize, end as usize);
        // Zero the whole padded region, then copy the data rows into it.
        match mt {
            MemType::Inp => self.inp[s * self.sh.inp_lanes..e * self.sh.inp_lanes].fill(0),
            MemType::Wgt => self.wgt.zero(s * self.sh.wgt_lanes..e * self.sh.wgt_lanes),
            MemType::Acc | MemType::Acc8 => {
                self.acc[s * self.sh.acc_lanes..e * self.sh.acc_lanes].fill(0)
            }
            MemType::Uop | MemType::Out => {}
        }
        let x = usize::from(m.x_size);
        let mut row = std::mem::take(&mut self.row);
        row.resize(x * eb as usize, 0);
        let result = (|| {
            for r in 0..u32::from(m.y_size) {
                let elem_addr = u64::from(m.dram_base) + u64::from(r) * u64::from(m.x_stride);
                mem.read(elem_addr * eb, &mut row)
                    .map_err(|fault| Fault::Dram {
                        row: r,
                        elem_addr,
                        fault,
                    })?;
                let first = s
                    + (usize::from(m.y_pad_0) + r as usize) * width as usize
                    + usize::from(m.x_pad_0);
                self.unpack_row(mt, first, x, &row);
            }
            Ok(u64::from(m.x_size) * u64::from(m.y_size) * eb)
        })();
        self.row = row;
        result
    }

    /// Writes `count` elements of `mt` decoded from `bytes` into its buffer from row `first`.
    fn unpack_row(&mut self, mt: MemType, first: usize, count: usize, bytes: &[u8]) {
        let sh = self.sh;
        match mt {
            MemType::Inp => lanes::unpack_i16(
                bytes,
                self.cfg.inp_width(),
                &mut self.inp[first * sh.inp_lanes..][..count * sh.inp_lanes],
            ),
            MemType::Wgt => {
                let bits = self.cfg.wgt_width();
                let tiles = (first, count);
                self.wgt
                    .write_tiles(&sh, tiles, bytes, bits, &mut self.lanes)
            }
            MemType::Acc => lanes::unpack_i32(
                bytes,
                self.cfg.acc_width(),
                &mut self.acc[first * sh.acc_lanes..][..count * sh.acc_lanes],
            ),
            MemType::Acc8 => lanes::unpack_i32(
                bytes,
                8,
                &mut self.acc[first * sh.acc_lanes..][..count * sh.acc_lanes],
            ),
            MemType::Uop => {
                for (u, b) in self.uop[first..first + count]
                    .iter_mut()
                    .zip(bytes.chunks_exact(isa::UOP_BYTES))
                {
                    *u = self
                        .codec
                        .decode_uop(b.try_into().expect("a micro-op's bytes"));
                }
            }
            MemType::Out => unreachable!("Codec::check refuses LOAD OUT"),
        }
    }

    /// STORE (spec "STORE"); returns the DRAM bytes written.
    fn store(&mut self, mem: &mut dyn Memory, m: &MemInsn) -> Result<u64, Fault> {
        if m.x_size == 0 {
            return Ok(0);
        }
        let start = u64::from(m.sram_base);
        let end = start + u64::from(m.x_size) * u64::from(m.y_size);
        if end > u64::from(self.depth.acc) {
            return Err(Fault::SramRange {
                buffer: "OUT",
                access: "read",
                start,
                end,
                depth: self.depth.acc,
            });
        }
        let eb = u64::from(self.cfg.elem_bytes(MemType::Out));
        let x = usize::from(m.x_size);
        let al = self.sh.acc_lanes;
        let bits = self.cfg.out_width();
        let mut row = std::mem::take(&mut self.row);
        row.resize(x * eb as usize, 0);
        let result = (|| {
            for r in 0..usize::from(m.y_size) {
                let first = start as usize + r * x;
                lanes::pack_low(&self.acc[first * al..][..x * al], bits, &mut row);
                let elem_addr = u64::from(m.dram_base) + r as u64 * u64::from(m.x_stride);
                mem.write(elem_addr * eb, &row)
                    .map_err(|fault| Fault::Dram {
                        row: r as u32,
                        elem_addr,
                        fault,
                    })?;
            }
            Ok(u64::from(m.x_size) * u64::from(m.y_size) * eb)
        })();
        self.row = row;
        result
    }

    /// Range-checks every index the loop will form (dst always, in ACC unless `dst` names
    /// another buffer; src/wgt unless reset or immediate) and reports the first out-of-range
    /// one in execution order.
    fn check_indices(
        &self,
        lp: &UopLoop,
        dst: Option<(&'static str, u32)>,
        src: Option<(&'static str, u32)>,
        wgt: Option<(u16, u16)>,
    ) -> Result<(), Fault> {
        let (dst_buffer, dst_depth) = dst.unwrap_or(("ACC", self.depth.acc));
        let (io, ii) = (u64::from(lp.iter_out), u64::from(lp.iter_in));
        let mut worst: Option<(u64, u64, u32, Fault)> = None;
        for u in lp.uop_bgn..lp.uop_end {
            let uop = &self.uop[usize::from(u)];
            let fields = [
                Some((
                    "dst",
                    dst_buffer,
                    uop.dst_idx,
                    (lp.dst_factor_out, lp.dst_factor_in),
                    dst_depth,
                )),
                src.map(|(buffer, depth)| {
                    (
                        "src",
                        buffer,
                        uop.src_idx,
                        (lp.src_factor_out, lp.src_factor_in),
                        depth,
                    )
                }),
                wgt.map(|f| ("wgt", "WGT", uop.wgt_idx, f, self.depth.wgt)),
            ];
            for (field, buffer, base, (fo, fi), depth) in fields.into_iter().flatten() {
                let (base, fo, fi) = (u64::from(base), u64::from(fo), u64::from(fi));
                if let Some((o, i)) = first_out_of_range(base, fo, fi, io, ii, u64::from(depth)) {
                    let key = (o, i, u32::from(u));
                    if worst.as_ref().is_none_or(|w| key < (w.0, w.1, w.2)) {
                        let fault = Fault::Index {
                            field,
                            buffer,
                            index: base + o * fo + i * fi,
                            depth,
                            uop: u32::from(u),
                            iter_out: o,
                            iter_in: i,
                        };
                        worst = Some((o, i, u32::from(u), fault));
                    }
                }
            }
        }
        match worst {
            Some((.., fault)) => Err(fault),
            None => Ok(()),
        }
    }

    fn loop_of(lp: &UopLoop, wgt: (u16, u16)) -> Loop {
        Loop {
            iter_out: usize::from(lp.iter_out),
            iter_in: usize::from(lp.iter_in),
            dst: (
                usize::from(lp.dst_factor_out),
                usize::from(lp.dst_factor_in),
            ),
            src: (
                usize::from(lp.src_factor_out),
                usize::from(lp.src_factor_in),
            ),
            wgt: (usize::from(wgt.0), usize::from(wgt.1)),
        }
    }

    /// GEMM (spec "GEMM"); returns the micro-op iterations executed.
    fn gemm(&mut self, g: &GemmInsn) -> Result<u64, Fault> {
        let lp = &g.lp;
        let n = loop_uops(lp);
        if n == 0 {
            return Ok(0);
        }
        let uops = &self.uop[usize::from(lp.uop_bgn)..usize::from(lp.uop_end)];
        let l = Self::loop_of(lp, (g.wgt_factor_out, g.wgt_factor_in));
        if lp.reset_reg {
            self.check_indices(lp, None, None, None)?;
            kernels::reset(&self.sh, &mut self.acc, uops, &l);
        } else {
            self.check_indices(
                lp,
                None,
                Some(("INP", self.depth.inp)),
                Some((g.wgt_factor_out, g.wgt_factor_in)),
            )?;
            kernels::gemm(&self.sh, &mut self.acc, &self.inp, &self.wgt, uops, &l);
        }
        Ok(n)
    }

    /// ALU (spec "ALU"); returns the micro-op iterations executed.
    fn alu(&mut self, a: &AluInsn) -> Result<u64, Fault> {
        let lp = &a.lp;
        let n = loop_uops(lp);
        if n == 0 {
            return Ok(0);
        }
        let uops = &self.uop[usize::from(lp.uop_bgn)..usize::from(lp.uop_end)];
        let l = Self::loop_of(lp, (0, 0));
        let imm = a.use_imm.then_some(i32::from(a.imm));
        let src = (!a.use_imm).then_some(("ACC", self.depth.acc));
        if lp.reset_reg {
            self.check_indices(lp, None, None, None)?;
            kernels::reset(&self.sh, &mut self.acc, uops, &l);
        } else if a.op == AluOp::Lut {
            self.check_indices(lp, None, src, None)?;
            lut_lookup(&self.sh, &mut self.acc, &self.table, uops, &l, imm);
        } else if a.op == AluOp::LutWrite {
            self.check_indices(lp, Some(("TABLE", LUT_ENTRIES)), src, None)?;
            lut_write(&self.sh, &self.acc, &mut self.table, uops, &l, imm);
        } else {
            self.check_indices(lp, None, src, None)?;
            kernels::alu(&self.sh, &mut self.acc, uops, &l, a.op, imm);
        }
        Ok(n)
    }
}

/// `index(v)` of spec 8.3: `v` saturated to int8, as its two's-complement byte.
fn lut_index(v: i32) -> usize {
    usize::from(v.clamp(-128, 127) as i8 as u8)
}

/// ALU LUT (spec 8.3): every lane of `acc[dst]` becomes the table entry of the same lane of
/// the operand (`imm`, or `acc[src]`).
fn lut_lookup(
    sh: &Shape,
    acc: &mut [i32],
    table: &[i8; TABLE_LEN],
    uops: &[Uop],
    lp: &Loop,
    imm: Option<i32>,
) {
    let al = sh.acc_lanes;
    let mut y = vec![0i32; al];
    for o in 0..lp.iter_out {
        for i in 0..lp.iter_in {
            for u in uops {
                let d = u.dst_idx as usize + o * lp.dst.0 + i * lp.dst.1;
                match imm {
                    Some(v) => y.fill(v),
                    None => {
                        let s = u.src_idx as usize + o * lp.src.0 + i * lp.src.1;
                        y.copy_from_slice(&acc[s * al..][..al]);
                    }
                }
                for (x, &v) in acc[d * al..][..al].iter_mut().zip(&y) {
                    *x = i32::from(table[lut_index(v)]);
                }
            }
        }
    }
}

/// ALU LUTW (spec 8.3): table entry `dst` becomes the low 8 bits of lane `dst mod lanes` of
/// the operand (`imm`, or `acc[src]`).
fn lut_write(
    sh: &Shape,
    acc: &[i32],
    table: &mut [i8; TABLE_LEN],
    uops: &[Uop],
    lp: &Loop,
    imm: Option<i32>,
) {
    let al = sh.acc_lanes;
    for o in 0..lp.iter_out {
        for i in 0..lp.iter_in {
            for u in uops {
                let e = u.dst_idx as usize + o * lp.dst.0 + i * lp.dst.1;
                let v = imm.unwrap_or_else(|| {
                    let s = u.src_idx as usize + o * lp.src.0 + i * lp.src.1;
                    acc[s * al + e % al]
                });
                table[e] = v as i8;
            }
        }
    }
}
