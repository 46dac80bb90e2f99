//! Shared support of the execution-core tests (included by the `exec_*` test binaries with
//! `#[path = "exec_common.rs"] mod common;`): configs, a reference model written from
//! `isa::spec` sections 8-9, a Verilator harness that plays the shell and the INP/WGT
//! memories, and a random instruction generator.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use hdl::verilator::{Model, PortId};
use isa::{AluInsn, AluOp, Codec, DepFlags, GemmInsn, HwConfig, Insn, MemType, Uop, UopLoop};
use vta_hw::exec::issue::{alu_footprint, row_banks};
use vta_hw::exec::{exec_design, exec_timing, ALU_QUEUE};

// ----- configs -----------------------------------------------------------------------------

fn cfg_json(body: &str) -> String {
    format!(r#"{{"TARGET":"sim","HW_VER":"0.0.2",{body}}}"#)
}

/// Configs beyond the presets, one per datapath variant.
pub fn extra_configs() -> Vec<(String, HwConfig)> {
    let list = [
        // 4-bit inputs and weights, 16-bit ACC, batch 2, BLOCK_IN != BLOCK_OUT: three
        // products per multiplier and a last channel on its own.
        (
            "i4w4a16",
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":4,"LOG_BATCH":1,
               "LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":10"#,
        ),
        // 4-bit inputs and weights, BLOCK_OUT 8: two groups of three products per multiplier
        // and a group of two.
        (
            "i4w4bo8",
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":4,"LOG_BATCH":0,
               "LOG_BLOCK_IN":2,"LOG_BLOCK_OUT":3,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":10"#,
        ),
        // int4 x int2 (LUT products from partial products), 16-bit ACC, batch 2.
        (
            "i4w2a16",
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":1,"LOG_ACC_WIDTH":4,"LOG_BATCH":1,
               "LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":10"#,
        ),
        // int8 x int4 packed two per multiplier (S = 11), batch 4, no ALU MUL.
        (
            "i8w4nomul",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":5,"LOG_BATCH":2,
               "LOG_BLOCK_IN":1,"LOG_BLOCK_OUT":3,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":10,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":13,"ALU_MUL":false"#,
        ),
        // int16 x int16 into 16-bit ACC (products wrap), BLOCK_OUT 1 (no packing).
        (
            "i16w16a16",
            r#""LOG_INP_WIDTH":4,"LOG_WGT_WIDTH":4,"LOG_ACC_WIDTH":4,"LOG_BATCH":0,
               "LOG_BLOCK_IN":2,"LOG_BLOCK_OUT":0,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":10,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":10"#,
        ),
        // BLOCK_IN 1 (no adder tree), int4 x int8 packed, batch 8.
        (
            "i4w8bi1",
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":3,
               "LOG_BLOCK_IN":0,"LOG_BLOCK_OUT":1,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":9,"LOG_ACC_BUFF_SIZE":12"#,
        ),
        // 2-bit inputs and weights (four lanes a byte), 16-bit ACC, BLOCK_IN 16.
        (
            "i2w2a16",
            r#""LOG_INP_WIDTH":1,"LOG_WGT_WIDTH":1,"LOG_ACC_WIDTH":4,"LOG_BATCH":0,
               "LOG_BLOCK_IN":4,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":10"#,
        ),
        // int8 x int2 (bipolar-capable weights; LUT products although a product has 10
        // bits), 32-bit ACC, batch 2, 64 ACC rows.
        (
            "i8w2a32",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":1,"LOG_ACC_WIDTH":5,"LOG_BATCH":1,
               "LOG_BLOCK_IN":2,"LOG_BLOCK_OUT":3,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":10,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":12"#,
        ),
        // The activation table (ALU_LUT) with 16-bit ACC and 8 lanes, ACC of 128 rows (fewer
        // than the table's 256 entries).
        (
            "a16lut",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":4,"LOG_BATCH":1,
               "LOG_BLOCK_IN":2,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":9,
               "LOG_WGT_BUFF_SIZE":10,"LOG_ACC_BUFF_SIZE":11,"ALU_LUT":true"#,
        ),
        // Buffers of a single element (zero-width indices): ACC and WGT of depth 1.
        (
            "depth1",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
               "LOG_BLOCK_IN":2,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":5,"LOG_INP_BUFF_SIZE":3,
               "LOG_WGT_BUFF_SIZE":4,"LOG_ACC_BUFF_SIZE":4"#,
        ),
    ];
    list.iter()
        .map(|(name, body)| {
            let cfg = HwConfig::from_json_str(&cfg_json(body), name)
                .unwrap_or_else(|e| panic!("test config {name}: {e}"));
            (name.to_string(), cfg)
        })
        .collect()
}

/// A config by name: a preset or one of [`extra_configs`].
pub fn config(name: &str) -> HwConfig {
    HwConfig::preset(name).unwrap_or_else(|_| {
        extra_configs()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no test config {name}"))
            .1
    })
}

// ----- numbers -----------------------------------------------------------------------------

/// `v` reduced modulo `2^bits` into the signed range.
pub fn wrap(v: i128, bits: u32) -> i64 {
    let m = 1i128 << bits;
    let r = v.rem_euclid(m);
    (if r >= m / 2 { r - m } else { r }) as i64
}

/// Lanes of `width` bits packed little-endian into 32-bit words (spec section 2).
pub fn pack(lanes: &[i64], width: u32) -> Vec<u32> {
    let bits = lanes.len() as u32 * width;
    let mut words = vec![0u32; bits.div_ceil(32) as usize];
    for (l, &v) in lanes.iter().enumerate() {
        for b in 0..width {
            if (v >> b) & 1 != 0 {
                let pos = l as u32 * width + b;
                words[(pos / 32) as usize] |= 1 << (pos % 32);
            }
        }
    }
    words
}

/// The inverse of [`pack`]: `n` signed lanes of `width` bits.
pub fn unpack(words: &[u32], n: usize, width: u32) -> Vec<i64> {
    (0..n)
        .map(|l| {
            let mut v: i128 = 0;
            for b in 0..width {
                let pos = l as u32 * width + b;
                if (words[(pos / 32) as usize] >> (pos % 32)) & 1 != 0 {
                    v |= 1 << b;
                }
            }
            wrap(v, width)
        })
        .collect()
}

// ----- reference model ---------------------------------------------------------------------

/// Counters of spec section 11 that the core reports as events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub gemm_uops: u64,
    pub reset_uops: u64,
    pub alu_uops: u64,
}

/// The scratchpads the core owns or reads, and spec 8's micro-op loop over them.
#[derive(Clone)]
pub struct Reference {
    pub cfg: HwConfig,
    /// `acc[row][lane]`, lane `b*BLOCK_OUT + n`.
    pub acc: Vec<Vec<i64>>,
    /// `inp[row][lane]`, lane `b*BLOCK_IN + k`.
    pub inp: Vec<Vec<i64>>,
    /// `wgt[tile][lane]`, lane `n*BLOCK_IN + k`.
    pub wgt: Vec<Vec<i64>>,
    pub uop: Vec<Uop>,
    /// The activation table (configs with ALU_LUT; spec 8.3), entries as signed bytes.
    pub table: Vec<i64>,
    pub counts: Counts,
}

/// The micro-op iterations of one instruction: `(u, dst, src, wgt)` in loop order.
pub fn iterations(lp: &UopLoop, uops: &[Uop], wgt_f: (u16, u16)) -> Vec<(usize, u64, u64, u64)> {
    let mut v = vec![];
    for o in 0..u64::from(lp.iter_out) {
        for i in 0..u64::from(lp.iter_in) {
            for u in lp.uop_bgn..lp.uop_end.max(lp.uop_bgn) {
                let x = uops[u as usize];
                v.push((
                    u as usize,
                    u64::from(x.dst_idx)
                        + o * u64::from(lp.dst_factor_out)
                        + i * u64::from(lp.dst_factor_in),
                    u64::from(x.src_idx)
                        + o * u64::from(lp.src_factor_out)
                        + i * u64::from(lp.src_factor_in),
                    u64::from(x.wgt_idx) + o * u64::from(wgt_f.0) + i * u64::from(wgt_f.1),
                ));
            }
        }
    }
    v
}

impl Reference {
    pub fn new(cfg: &HwConfig) -> Reference {
        let lanes = |m: MemType| -> usize {
            match m {
                MemType::Inp => (cfg.batch() * cfg.block_in()) as usize,
                MemType::Wgt => (cfg.block_out() * cfg.block_in()) as usize,
                _ => (cfg.batch() * cfg.block_out()) as usize,
            }
        };
        Reference {
            cfg: cfg.clone(),
            acc: vec![vec![0; lanes(MemType::Acc)]; cfg.depth(MemType::Acc) as usize],
            inp: vec![vec![0; lanes(MemType::Inp)]; cfg.depth(MemType::Inp) as usize],
            wgt: vec![vec![0; lanes(MemType::Wgt)]; cfg.depth(MemType::Wgt) as usize],
            uop: vec![Uop::default(); cfg.depth(MemType::Uop) as usize],
            table: vec![0; isa::config::LUT_ENTRIES as usize],
            counts: Counts::default(),
        }
    }

    /// OUT row `r`: the low OUT_WIDTH bits of each ACC lane (spec 9).
    pub fn out_row(&self, r: usize) -> Vec<i64> {
        let ow = self.cfg.out_width();
        self.acc[r].iter().map(|&v| wrap(v as i128, ow)).collect()
    }

    /// Micro-op iterations of `insn` with an index past its buffer (spec 8: an error).
    pub fn faults(&self, insn: &Insn) -> u64 {
        let (lp, gemm, use_imm, wf) = match insn {
            Insn::Gemm(g) => (&g.lp, true, false, (g.wgt_factor_out, g.wgt_factor_in)),
            Insn::Alu(a) => (&a.lp, false, a.use_imm, (0, 0)),
            _ => unreachable!(),
        };
        // A LUTW's dst is a table entry (spec 8.3).
        let dst_depth = match insn {
            Insn::Alu(a) if a.op == AluOp::LutWrite && !lp.reset_reg => {
                u64::from(isa::config::LUT_ENTRIES)
            }
            _ => u64::from(self.cfg.depth(MemType::Acc)),
        };
        let c = &self.cfg;
        let (da, di, dw) = (
            u64::from(c.depth(MemType::Acc)),
            u64::from(c.depth(MemType::Inp)),
            u64::from(c.depth(MemType::Wgt)),
        );
        iterations(lp, &self.uop, wf)
            .into_iter()
            .filter(|&(_, d, s, w)| {
                let uses_src = !lp.reset_reg && (gemm || !use_imm);
                let uses_wgt = gemm && !lp.reset_reg;
                d >= dst_depth
                    || (uses_src && s >= if gemm { di } else { da })
                    || (uses_wgt && w >= dw)
            })
            .count() as u64
    }

    /// Executes a GEMM or ALU instruction; panics on an index error (tests generate none
    /// unless they check faults, and then do not execute on the reference).
    pub fn exec(&mut self, insn: &Insn) {
        assert_eq!(
            self.faults(insn),
            0,
            "the reference does not execute erroneous {insn:?}"
        );
        let aw = self.cfg.acc_width();
        let (bsz, bi, bo) = (
            self.cfg.batch() as usize,
            self.cfg.block_in() as usize,
            self.cfg.block_out() as usize,
        );
        match insn {
            Insn::Gemm(g) => {
                for (_, d, s, w) in
                    iterations(&g.lp, &self.uop, (g.wgt_factor_out, g.wgt_factor_in))
                {
                    let (d, s, w) = (d as usize, s as usize, w as usize);
                    if g.lp.reset_reg {
                        self.counts.reset_uops += 1;
                        self.acc[d].iter_mut().for_each(|x| *x = 0);
                        continue;
                    }
                    self.counts.gemm_uops += 1;
                    for b in 0..bsz {
                        for n in 0..bo {
                            let mut sum = i128::from(self.acc[d][b * bo + n]);
                            for k in 0..bi {
                                sum += i128::from(self.inp[s][b * bi + k])
                                    * i128::from(self.wgt[w][n * bi + k]);
                            }
                            self.acc[d][b * bo + n] = wrap(sum, aw);
                        }
                    }
                }
            }
            Insn::Alu(a) => {
                let log_aw = self.cfg.log_acc_width;
                for (_, d, s, _) in iterations(&a.lp, &self.uop, (0, 0)) {
                    let (d, s) = (d as usize, s as usize);
                    if a.lp.reset_reg {
                        self.counts.reset_uops += 1;
                        self.acc[d].iter_mut().for_each(|x| *x = 0);
                        continue;
                    }
                    if a.op == AluOp::LutWrite {
                        // Entry d gets the low byte of operand lane d mod LANES.
                        self.counts.alu_uops += 1;
                        let lanes = bsz * bo;
                        let y = if a.use_imm {
                            i64::from(a.imm)
                        } else {
                            self.acc[s][d % lanes]
                        };
                        self.table[d] = wrap(i128::from(y), 8);
                        continue;
                    }
                    self.counts.alu_uops += 1;
                    let src_row = if a.use_imm {
                        None
                    } else {
                        Some(self.acc[s].clone())
                    };
                    for l in 0..bsz * bo {
                        let x = self.acc[d][l];
                        let y = match &src_row {
                            None => i64::from(a.imm),
                            Some(r) => r[l],
                        };
                        self.acc[d][l] = match a.op {
                            AluOp::Min => x.min(y),
                            AluOp::Max => x.max(y),
                            AluOp::Add => wrap(i128::from(x) + i128::from(y), aw),
                            AluOp::Mul => wrap(i128::from(x) * i128::from(y), aw),
                            AluOp::Shr => {
                                let s = wrap(i128::from(y), log_aw + 1);
                                if s >= 0 {
                                    x >> s
                                } else {
                                    wrap(i128::from(x) << (-s), aw)
                                }
                            }
                            // The entry of y saturated to int8, as its two's-complement byte.
                            AluOp::Lut => self.table[y.clamp(-128, 127) as u8 as usize],
                            AluOp::LutWrite => unreachable!("handled above"),
                        };
                    }
                }
            }
            _ => unreachable!("the core runs GEMM and ALU only"),
        }
    }
}

// ----- random numbers ----------------------------------------------------------------------

pub use isa::rng::Rng;

/// Random lane values for the datapath tests.
pub trait RngLanes {
    /// A random signed value of `bits` bits.
    fn signed(&mut self, bits: u32) -> i64;
    /// Like [`signed`](Self::signed), but often an extreme value.
    fn edgy(&mut self, bits: u32) -> i64;
}

impl RngLanes for Rng {
    fn signed(&mut self, bits: u32) -> i64 {
        wrap(i128::from(self.next_u64()), bits)
    }
    fn edgy(&mut self, bits: u32) -> i64 {
        let max = (1i64 << (bits - 1)) - 1;
        match self.below(8) {
            0 => max,
            1 => -max - 1,
            // A small value (of 3 bits, or of the lane's 2).
            2 => self.signed(bits.min(3)),
            _ => self.signed(bits),
        }
    }
}

// ----- the harness -------------------------------------------------------------------------

/// Models built in this test binary, by config name; each test takes a fresh instance.
static MODELS: Mutex<Option<HashMap<String, Model>>> = Mutex::new(None);

fn cache_dir() -> PathBuf {
    // The same cache as the hdl crate's simulation tests: Verilator's runtime is compiled
    // once per target directory.
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hdl-cache")
}

/// A fresh instance of the core built for config `name`, in reset.
pub fn model(name: &str) -> Model {
    let mut guard = MODELS.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if !map.contains_key(name) {
        let design = exec_design(&config(name));
        let start = Instant::now();
        let m = Model::build(&design, &cache_dir(), &mut |stage| {
            eprintln!(
                "[vta_exec {name}] {stage} ({:.1}s)",
                start.elapsed().as_secs_f64()
            )
        })
        .unwrap_or_else(|e| panic!("building the Verilator model of vta_exec ({name}): {e}"));
        map.insert(name.to_string(), m);
    }
    let mut m = map[name].new_instance();
    m.reset(2);
    m
}

struct Ports {
    insn_valid: PortId,
    insn_ready: PortId,
    insn: PortId,
    done_gemm: PortId,
    done_alu: PortId,
    uop_wr_en: PortId,
    uop_wr_addr: PortId,
    uop_wr_data: PortId,
    inp_rd_en: PortId,
    inp_rd_addr: PortId,
    inp_rd_data: PortId,
    wgt_rd_en: PortId,
    wgt_rd_addr: PortId,
    wgt_rd_data: PortId,
    acc_wr_en: PortId,
    acc_wr_addr: PortId,
    acc_wr_data: PortId,
    out_rd_en: PortId,
    out_rd_addr: PortId,
    out_rd_data: PortId,
    ev_gemm_uop: PortId,
    ev_reset_uop: PortId,
    ev_alu_uop: PortId,
    busy: PortId,
    fault: PortId,
}

/// One instruction's life in the core, as observed.
#[derive(Clone, Debug)]
pub struct Issued {
    pub insn: Insn,
    /// First cycle `insn_valid` was high with it.
    pub presented: u64,
    /// Cycle it was accepted (valid && ready).
    pub accepted: u64,
    /// Cycle of its `done` pulse.
    pub done: Option<u64>,
}

/// The core under test plus the bench around it: the INP/WGT memories, the shell's write
/// ports, an instruction feeder, and event monitors.
pub struct Core {
    pub name: String,
    pub cfg: HwConfig,
    pub codec: Codec,
    pub sim: Model,
    p: Ports,
    /// INP/WGT contents as port words, per element.
    inp_words: Vec<Vec<u32>>,
    wgt_words: Vec<Vec<u32>>,
    pub cycle: u64,
    pub log: Vec<Issued>,
    /// Indices in `log` of the GEMM and of the ALU instructions accepted and not done, in
    /// order (each pipeline completes its own in order).
    gemm_due: VecDeque<usize>,
    alu_due: VecDeque<usize>,
    pub events: Counts,
    pub faults: u64,
    pub max_busy_gap: u64,
}

impl Core {
    pub fn new(name: &str) -> Core {
        let cfg = config(name);
        let sim = model(name);
        let port = |n: &str| sim.port(n);
        let p = Ports {
            insn_valid: port("insn_valid"),
            insn_ready: port("insn_ready"),
            insn: port("insn"),
            done_gemm: port("done_gemm"),
            done_alu: port("done_alu"),
            uop_wr_en: port("uop_wr_en"),
            uop_wr_addr: port("uop_wr_addr"),
            uop_wr_data: port("uop_wr_data"),
            inp_rd_en: port("inp_rd_en"),
            inp_rd_addr: port("inp_rd_addr"),
            inp_rd_data: port("inp_rd_data"),
            wgt_rd_en: port("wgt_rd_en"),
            wgt_rd_addr: port("wgt_rd_addr"),
            wgt_rd_data: port("wgt_rd_data"),
            acc_wr_en: port("acc_wr_en"),
            acc_wr_addr: port("acc_wr_addr"),
            acc_wr_data: port("acc_wr_data"),
            out_rd_en: port("out_rd_en"),
            out_rd_addr: port("out_rd_addr"),
            out_rd_data: port("out_rd_data"),
            ev_gemm_uop: port("ev_gemm_uop"),
            ev_reset_uop: port("ev_reset_uop"),
            ev_alu_uop: port("ev_alu_uop"),
            busy: port("busy"),
            fault: port("fault"),
        };
        let di = cfg.depth(MemType::Inp) as usize;
        let dw = cfg.depth(MemType::Wgt) as usize;
        let wi = cfg.elem_bits(MemType::Inp).div_ceil(32) as usize;
        let ww = cfg.elem_bits(MemType::Wgt).div_ceil(32) as usize;
        Core {
            name: name.to_string(),
            codec: Codec::new(&cfg),
            cfg,
            sim,
            p,
            inp_words: vec![vec![0; wi]; di],
            wgt_words: vec![vec![0; ww]; dw],
            cycle: 0,
            log: vec![],
            gemm_due: VecDeque::new(),
            alu_due: VecDeque::new(),
            events: Counts::default(),
            faults: 0,
            max_busy_gap: 0,
        }
    }

    /// Sets the bench's INP and WGT memories from the reference's.
    pub fn set_operands(&mut self, r: &Reference) {
        let (iw, ww) = (self.cfg.inp_width(), self.cfg.wgt_width());
        for (dst, row) in self.inp_words.iter_mut().zip(&r.inp) {
            *dst = pack(row, iw);
        }
        for (dst, row) in self.wgt_words.iter_mut().zip(&r.wgt) {
            *dst = pack(row, ww);
        }
    }

    /// One clock cycle: evaluate, monitor the outputs, tick, and answer INP/WGT reads (the
    /// memories are registered: data for a read issued now is visible next cycle).
    fn clock(&mut self) {
        self.sim.eval();
        let get = |s: &Model, p: PortId| s.get(p) != 0;
        for (port, due) in [
            (self.p.done_gemm, &mut self.gemm_due),
            (self.p.done_alu, &mut self.alu_due),
        ] {
            if get(&self.sim, port) {
                let i = due.pop_front().unwrap_or_else(|| {
                    panic!(
                        "{}: done without an instruction at cycle {}",
                        self.name, self.cycle
                    )
                });
                self.log[i].done = Some(self.cycle);
            }
        }
        self.events.gemm_uops += self.sim.get(self.p.ev_gemm_uop);
        self.events.reset_uops += self.sim.get(self.p.ev_reset_uop);
        self.events.alu_uops += self.sim.get(self.p.ev_alu_uop);
        self.faults += self.sim.get(self.p.fault);
        let inp =
            get(&self.sim, self.p.inp_rd_en).then(|| self.sim.get(self.p.inp_rd_addr) as usize);
        let wgt =
            get(&self.sim, self.p.wgt_rd_en).then(|| self.sim.get(self.p.wgt_rd_addr) as usize);
        self.sim.tick();
        self.cycle += 1;
        if let Some(a) = inp {
            let words = self
                .inp_words
                .get(a)
                .cloned()
                .unwrap_or_else(|| vec![0; self.inp_words[0].len()]);
            self.sim.set_wide(self.p.inp_rd_data, &words);
        }
        if let Some(a) = wgt {
            let words = self
                .wgt_words
                .get(a)
                .cloned()
                .unwrap_or_else(|| vec![0; self.wgt_words[0].len()]);
            self.sim.set_wide(self.p.wgt_rd_data, &words);
        }
    }

    fn busy(&mut self) -> bool {
        self.sim.eval();
        self.sim.get(self.p.busy) != 0
    }

    /// LOAD UOP through the write port (the core must be idle).
    pub fn write_uops(&mut self, base: usize, uops: &[Uop]) {
        assert!(!self.busy(), "writing UOP while busy");
        for (i, u) in uops.iter().enumerate() {
            let word = u32::from_le_bytes(self.codec.encode_uop(u).expect("micro-op fits"));
            self.sim.set(self.p.uop_wr_en, 1);
            self.sim.set(self.p.uop_wr_addr, (base + i) as u64);
            self.sim.set(self.p.uop_wr_data, u64::from(word));
            self.clock();
        }
        self.sim.set(self.p.uop_wr_en, 0);
    }

    /// LOAD ACC through the write port (the core must be idle).
    pub fn write_acc(&mut self, base: usize, rows: &[Vec<i64>]) {
        assert!(!self.busy(), "writing ACC while busy");
        let aw = self.cfg.acc_width();
        for (i, row) in rows.iter().enumerate() {
            self.sim.set(self.p.acc_wr_en, 1);
            self.sim.set(self.p.acc_wr_addr, (base + i) as u64);
            self.sim.set_wide(self.p.acc_wr_data, &pack(row, aw));
            self.clock();
        }
        self.sim.set(self.p.acc_wr_en, 0);
    }

    /// Reads OUT rows `0..n` through the store port, one per cycle.
    pub fn read_out(&mut self, n: usize) -> Vec<Vec<i64>> {
        let lanes = (self.cfg.batch() * self.cfg.block_out()) as usize;
        let ow = self.cfg.out_width();
        let mut rows = vec![];
        for r in 0..n {
            self.sim.set(self.p.out_rd_en, 1);
            self.sim.set(self.p.out_rd_addr, r as u64);
            self.clock();
            rows.push(unpack(&self.sim.get_wide(self.p.out_rd_data), lanes, ow));
        }
        self.sim.set(self.p.out_rd_en, 0);
        rows
    }

    /// Encodes an instruction as the 4 words of the `insn` port.
    pub fn words(&self, insn: &Insn) -> [u32; 4] {
        let b = self.codec.encode(insn).expect("encodable instruction");
        let w = u128::from_le_bytes(b);
        [
            w as u32,
            (w >> 32) as u32,
            (w >> 64) as u32,
            (w >> 96) as u32,
        ]
    }

    /// Feeds `insns` in order, waiting `gaps[k]` idle cycles (valid low) before offering
    /// instruction k, then runs until the core is idle. Returns the log entries.
    pub fn run(&mut self, insns: &[Insn], gaps: &[u64]) -> &[Issued] {
        let start = self.log.len();
        for (k, insn) in insns.iter().enumerate() {
            for _ in 0..gaps.get(k).copied().unwrap_or(0) {
                self.clock();
            }
            let words = self.words(insn);
            self.sim.set(self.p.insn_valid, 1);
            self.sim.set_wide(self.p.insn, &words);
            let presented = self.cycle;
            loop {
                self.sim.eval();
                let ready = self.sim.get(self.p.insn_ready) != 0;
                if ready {
                    let due = match insn {
                        Insn::Gemm(_) => &mut self.gemm_due,
                        _ => &mut self.alu_due,
                    };
                    due.push_back(self.log.len());
                    self.log.push(Issued {
                        insn: *insn,
                        presented,
                        accepted: self.cycle,
                        done: None,
                    });
                }
                self.clock();
                if ready {
                    break;
                }
                assert!(
                    self.cycle - presented < 1_000_000,
                    "{}: instruction never accepted",
                    self.name
                );
            }
            self.sim.set(self.p.insn_valid, 0);
        }
        let mut idle_since = self.cycle;
        while self.busy() {
            self.clock();
            assert!(
                self.cycle - idle_since < 10_000_000,
                "{}: core never idle",
                self.name
            );
        }
        idle_since = self.cycle;
        let _ = idle_since;
        assert!(
            self.gemm_due.is_empty() && self.alu_due.is_empty(),
            "{}: {} GEMM and {} ALU instructions accepted and never done",
            self.name,
            self.gemm_due.len(),
            self.alu_due.len()
        );
        &self.log[start..]
    }
}

// ----- timing model ------------------------------------------------------------------------

/// Micro-op iterations of an instruction: `iter_out * iter_in * max(0, end - bgn)`.
pub fn uop_count(insn: &Insn) -> u64 {
    let lp = match insn {
        Insn::Gemm(g) => &g.lp,
        Insn::Alu(a) => &a.lp,
        _ => unreachable!(),
    };
    u64::from(lp.iter_out)
        * u64::from(lp.iter_in)
        * u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
}

/// A tensor ALU instruction: two ACC reads per micro-op, so one issue every other cycle.
pub fn is_tensor(insn: &Insn) -> bool {
    matches!(insn, Insn::Alu(a) if !a.use_imm && !a.lp.reset_reg)
}

/// An ALU MUL instruction with at least one micro-op on a config with ALU MUL: its micro-ops
/// take the multiplier pipeline.
pub fn is_mul(cfg: &HwConfig, insn: &Insn) -> bool {
    cfg.alu_mul
        && uop_count(insn) > 0
        && matches!(insn, Insn::Alu(a) if a.op == AluOp::Mul && !a.lp.reset_reg)
}

/// Whether micro-op `j` (in issue order) of `insn` (micro-op memory `uops`) follows the
/// previous one without the gap its kind needs otherwise: in a pass of the inner loop of a
/// one-micro-op kernel, not the pass's first micro-op, and either a tensor ALU micro-op (not
/// MUL, not a table operation) whose inner loop keeps `src`, or a MUL whose inner loop moves
/// `dst`: with an immediate, or (from the pass's third micro-op) with a tensor operand the
/// loop keeps when the micro-op before did not write the operand's row.
pub fn streams(cfg: &HwConfig, insn: &Insn, j: u64, uops: &[Uop]) -> bool {
    let Insn::Alu(a) = insn else { return false };
    let lp = &a.lp;
    if lp.reset_reg || lp.uop_end != lp.uop_bgn + 1 || lp.iter_in == 0 {
        return false;
    }
    let (o, i) = (j / u64::from(lp.iter_in), j % u64::from(lp.iter_in));
    if i == 0 {
        return false;
    }
    if is_mul(cfg, insn) {
        if lp.dst_factor_in == 0 {
            return false;
        }
        if a.use_imm {
            return true;
        }
        let u = &uops[usize::from(lp.uop_bgn)];
        let first = u64::from(u.dst_idx) + o * u64::from(lp.dst_factor_out);
        let previous = first + (i - 1) * u64::from(lp.dst_factor_in);
        let operand = u64::from(u.src_idx) + o * u64::from(lp.src_factor_out);
        i >= 2 && lp.src_factor_in == 0 && operand != previous
    } else {
        let table = cfg.alu_lut && matches!(a.op, AluOp::Lut | AluOp::LutWrite);
        !a.use_imm && !table && lp.src_factor_in == 0
    }
}

/// The ACC bank of a GEMM micro-op's `dst` (as a bit mask), or `None` when the micro-op
/// faults (it writes nothing, so it never waits for a bank).
fn gemm_bank(cfg: &HwConfig, g: &GemmInsn, u: &Uop, o: u64, i: u64) -> Option<u32> {
    let lp = &g.lp;
    let dst =
        u64::from(u.dst_idx) + o * u64::from(lp.dst_factor_out) + i * u64::from(lp.dst_factor_in);
    let src =
        u64::from(u.src_idx) + o * u64::from(lp.src_factor_out) + i * u64::from(lp.src_factor_in);
    let wgt =
        u64::from(u.wgt_idx) + o * u64::from(g.wgt_factor_out) + i * u64::from(g.wgt_factor_in);
    let depth = |m| u64::from(cfg.depth(m));
    let bad = dst >= depth(MemType::Acc)
        || (!lp.reset_reg && (src >= depth(MemType::Inp) || wgt >= depth(MemType::Wgt)));
    (!bad).then(|| row_banks(cfg, dst, 0))
}

/// An ALU instruction as the GEMM pipeline's bank stall sees it.
struct Pending {
    taken: u64,
    done: u64,
    banks: u32,
}

impl Pending {
    /// Whether it holds `bank` (a bit mask) in cycle `x`: in its footprint cycle every bank,
    /// then its own banks up to and including its `done` cycle.
    fn holds(&self, bank: u32, x: u64) -> bool {
        x == self.taken + 1 || (self.taken + 2 <= x && x <= self.done && self.banks & bank != 0)
    }
}

/// Checks the observed accept and done cycles of `log` (instructions fed in order, each
/// offered from its `presented` cycle) against the documented issue rules (the module docs
/// of `vta_hw::exec`), given micro-op memory `uops`:
///
/// - GEMM pipeline: one micro-op (or the end marker of an empty instruction) per cycle, the
///   next GEMM accepted in the cycle the previous one issues its last micro-op; a micro-op
///   stays in stage 2 while an earlier ALU instruction holds its `dst` bank, and nothing
///   moves or issues behind it meanwhile.
/// - ALU instructions are taken once the GEMM pipeline's front is empty (the cycle after
///   the last GEMM micro-op left stage 2) and the queue has room; the ALU pipeline accepts one two cycles after it was taken at
///   the earliest; there, a tensor micro-op only after a cycle without issue, no issue in
///   the `mul_extra` cycles after a MUL micro-op (except for the micro-ops that [`streams`]
///   lets follow at once).
/// - `done` exactly `done_latency` (`mul_done_latency` for MUL) cycles after the last issue,
///   plus the cycles a GEMM's last micro-op waited in stages 1 and 2.
pub fn check_timing(cfg: &HwConfig, log: &[Issued], uops: &[Uop]) {
    let t = exec_timing(cfg);
    // GEMM pipeline.
    let mut gemm_free = 0u64; // first cycle the next GEMM could be accepted
    let mut gemm_prev_issue = 0u64; // cycle of its latest issue
    let mut gemm_last_leave = 0u64; // last cycle its latest slot spent in stage 2
    let mut gemm_stage2: Vec<(u64, u64)> = vec![]; // (entry, leave) of its latest two slots
    let mut gemm_quiet = 0u64; // first cycle the GEMM pipeline's front is empty
                               // ALU pipeline.
    let mut last_issue: Option<u64> = None; // cycle of its most recent issue
    let mut issue_from = 0u64; // first cycle the MUL pipeline lets anything issue
    let mut alu_free = 0u64; // first cycle it could accept the next instruction
    let mut alus: Vec<Pending> = vec![];
    let mut alu_accepts: Vec<(u64, u64)> = vec![]; // (taken, accepted by the pipeline)
    for (k, e) in log.iter().enumerate() {
        match &e.insn {
            Insn::Gemm(g) => {
                let accept = e.presented.max(gemm_free);
                assert_eq!(
                    e.accepted, accept,
                    "instruction {k} ({:?}) accepted late: {log:#?}",
                    e.insn
                );
                let held = |bank: u32, x: u64| alus.iter().any(|a| a.holds(bank, x));
                let lp = &g.lp;
                // Per slot (micro-op, or the end marker of an empty instruction): its issue
                // cycle, then its stage-2 entry and last cycle there (`entry`, `leave`). A
                // slot issues only while the one in stage 2 is not held.
                let mut slots: Vec<Option<u32>> = vec![];
                for o in 0..u64::from(lp.iter_out) {
                    for i in 0..u64::from(lp.iter_in) {
                        for u in lp.uop_bgn..lp.uop_end {
                            slots.push(gemm_bank(cfg, g, &uops[usize::from(u)], o, i));
                        }
                    }
                }
                if slots.is_empty() {
                    slots.push(None);
                }
                let mut c = accept + 1;
                let (mut li, mut leave) = (c, c);
                for bank in slots {
                    c = c.max(gemm_prev_issue + 1);
                    while let Some(&(_, l)) = gemm_stage2.iter().find(|&&(e, l)| e <= c && c < l) {
                        c = l;
                    }
                    let entry = (c + 2).max(gemm_last_leave + 1);
                    leave = entry;
                    if let Some(bank) = bank {
                        while held(bank, leave) {
                            leave += 1;
                        }
                    }
                    gemm_stage2.push((entry, leave));
                    if gemm_stage2.len() > 2 {
                        gemm_stage2.remove(0);
                    }
                    (li, gemm_prev_issue, gemm_last_leave) = (c, c, leave);
                }
                gemm_free = li;
                let done = leave + u64::from(t.done_latency) - 2;
                assert_eq!(
                    e.done,
                    Some(done),
                    "instruction {k} ({:?}): done at {:?}, expected {done}",
                    e.insn,
                    e.done
                );
                gemm_quiet = leave + 1;
            }
            Insn::Alu(a) => {
                // Room: fewer than ALU_QUEUE - 1 taken (in the queue from two cycles after)
                // and not yet accepted by the pipeline.
                let queued = |x: u64| {
                    alu_accepts
                        .iter()
                        .filter(|&&(tk, acc)| tk + 2 <= x && x <= acc)
                        .count() as u32
                };
                let mut take = e.presented.max(gemm_quiet);
                while queued(take) >= ALU_QUEUE - 1 {
                    take += 1;
                }
                assert_eq!(
                    e.accepted, take,
                    "instruction {k} ({:?}) taken late: {log:#?}",
                    e.insn
                );
                let accept = (take + 2).max(alu_free);
                alu_accepts.push((take, accept));
                let slots = uop_count(&e.insn).max(1);
                let mul = is_mul(cfg, &e.insn);
                let mut c = accept + 1;
                for j in 0..slots {
                    if !streams(cfg, &e.insn, j, uops) {
                        c = c.max(issue_from);
                        if is_tensor(&e.insn) && last_issue == Some(c - 1) {
                            c += 1;
                        }
                    }
                    last_issue = Some(c);
                    c += 1;
                    if mul {
                        issue_from = c + u64::from(t.mul_extra);
                    }
                }
                let li = last_issue.unwrap();
                alu_free = li;
                let lat = u64::from(if mul {
                    t.mul_done_latency
                } else {
                    t.done_latency
                });
                assert_eq!(
                    e.done,
                    Some(li + lat),
                    "instruction {k} ({:?}): done at {:?}, expected {}",
                    e.insn,
                    e.done,
                    li + lat
                );
                alus.push(Pending {
                    taken: take,
                    done: li + lat,
                    banks: alu_footprint(cfg, a, uops.get(usize::from(a.lp.uop_bgn))),
                });
            }
            _ => unreachable!("the core runs GEMM and ALU only"),
        }
    }
}

// ----- random programs ---------------------------------------------------------------------

/// Random scratchpad contents and micro-ops, with hazards made likely: half of all indices
/// fall in a small window of rows, at the start of the buffer or around its middle (where
/// ACC's two banks meet: GEMMs and ALUs then share or just miss a bank).
pub fn randomize(r: &mut Reference, rng: &mut Rng, uops: usize) {
    let c = r.cfg.clone();
    let (iw, ww, aw) = (c.inp_width(), c.wgt_width(), c.acc_width());
    for row in r.inp.iter_mut() {
        row.iter_mut().for_each(|x| *x = rng.edgy(iw));
    }
    for row in r.wgt.iter_mut() {
        row.iter_mut().for_each(|x| *x = rng.edgy(ww));
    }
    for row in r.acc.iter_mut() {
        row.iter_mut().for_each(|x| *x = rng.edgy(aw));
    }
    let (da, di, dw) = (
        u64::from(c.depth(MemType::Acc)),
        u64::from(c.depth(MemType::Inp)),
        u64::from(c.depth(MemType::Wgt)),
    );
    let src_depth = da.min(di);
    for u in r.uop.iter_mut().take(uops) {
        let near = rng.chance(50);
        let middle = rng.chance(50);
        let pick = |rng: &mut Rng, depth: u64| {
            if near {
                let base = if middle {
                    (depth / 2).saturating_sub(2)
                } else {
                    0
                };
                base + rng.below((depth - base).min(4))
            } else {
                rng.below(depth)
            }
        };
        *u = Uop {
            dst_idx: pick(rng, da) as u32,
            src_idx: pick(rng, src_depth) as u32,
            wgt_idx: pick(rng, dw) as u32,
        };
    }
}

/// A random loop over `uops[0..n_uops]` whose indices stay in range for the given kind
/// (`gemm`, or ALU reading src unless `use_imm`).
/// `dst_depth` bounds dst (ACC, or the table for a LUTW).
fn random_loop(
    r: &Reference,
    rng: &mut Rng,
    n_uops: usize,
    gemm: bool,
    reads_src: bool,
    dst_depth: u64,
) -> (UopLoop, (u16, u16)) {
    let c = &r.cfg;
    let (da, di, dw) = (
        u64::from(c.depth(MemType::Acc)),
        u64::from(c.depth(MemType::Inp)),
        u64::from(c.depth(MemType::Wgt)),
    );
    let bgn = rng.below(n_uops as u64);
    let len = match rng.below(10) {
        0 => 0,
        1 => rng.range(1, 12),
        _ => rng.range(1, 4),
    };
    let mut end = (bgn + len).min(n_uops as u64);
    if rng.chance(3) {
        end = bgn.saturating_sub(1); // empty: end before begin
    }
    let iter = |rng: &mut Rng| match rng.below(12) {
        0 => 0,
        1 => rng.range(5, 9),
        _ => rng.range(1, 4),
    };
    let (io, ii) = (iter(rng), iter(rng));
    let span = |rng: &mut Rng, max0: u64, depth: u64| -> (u16, u16) {
        // o*fo + i*fi <= depth - 1 - max0 for every o < io, i < ii.
        let budget = depth.saturating_sub(1 + max0);
        let pick = |rng: &mut Rng, n: u64| -> u64 {
            if n <= 1 {
                return rng.below(3).min(budget / 2);
            }
            let limit = budget / 2 / (n - 1);
            match rng.below(4) {
                0 => 0,
                1 => rng.below(2).min(limit),
                _ => rng.below(limit + 1),
            }
        };
        (pick(rng, io) as u16, pick(rng, ii) as u16)
    };
    let range = bgn as usize..(end.max(bgn)) as usize;
    let max = |f: fn(&Uop) -> u32| {
        r.uop[range.clone()]
            .iter()
            .map(|u| u64::from(f(u)))
            .max()
            .unwrap_or(0)
    };
    let (dfo, dfi) = span(rng, max(|u| u.dst_idx), dst_depth);
    let (sfo, sfi) = if gemm {
        span(rng, max(|u| u.src_idx), di)
    } else if reads_src {
        span(rng, max(|u| u.src_idx), da)
    } else {
        // Unused: anything that fits the field.
        let m = da - 1;
        ((rng.below(4) & m) as u16, (rng.below(4) & m) as u16)
    };
    let wf = if gemm {
        span(rng, max(|u| u.wgt_idx), dw)
    } else {
        (0, 0)
    };
    (
        UopLoop {
            reset_reg: false,
            uop_bgn: bgn as u16,
            uop_end: end as u16,
            iter_out: io as u16,
            iter_in: ii as u16,
            dst_factor_out: dfo,
            dst_factor_in: dfi,
            src_factor_out: sfo,
            src_factor_in: sfi,
        },
        wf,
    )
}

/// A random, error-free GEMM or ALU instruction over `uops[0..n_uops]`.
pub fn random_insn(r: &Reference, rng: &mut Rng, n_uops: usize) -> Insn {
    let c = &r.cfg;
    loop {
        let gemm = rng.chance(45);
        let reset = rng.chance(8);
        let insn = if gemm {
            let da = u64::from(c.depth(MemType::Acc));
            let (mut lp, wf) = random_loop(r, rng, n_uops, true, true, da);
            lp.reset_reg = reset;
            Insn::Gemm(GemmInsn {
                deps: DepFlags::NONE,
                lp,
                wgt_factor_out: wf.0,
                wgt_factor_in: wf.1,
            })
        } else {
            let mut ops: Vec<AluOp> = if c.alu_mul {
                AluOp::ALL.to_vec()
            } else {
                AluOp::ALL[..4].to_vec()
            };
            if c.alu_lut {
                // About as often as all the others together.
                let n = ops.len() / 2;
                for _ in 0..n {
                    ops.extend(AluOp::TABLE);
                }
            }
            let op = ops[rng.below(ops.len() as u64) as usize];
            let use_imm = rng.chance(50);
            let dst_depth = if op == AluOp::LutWrite && !reset {
                u64::from(isa::config::LUT_ENTRIES)
            } else {
                u64::from(c.depth(MemType::Acc))
            };
            let (mut lp, _) = random_loop(r, rng, n_uops, false, !use_imm && !reset, dst_depth);
            lp.reset_reg = reset;
            let imm = match op {
                AluOp::Shr if rng.chance(80) => rng.range(0, 80) as i16 - 40,
                _ => rng.edgy(16) as i16,
            };
            Insn::Alu(AluInsn {
                deps: DepFlags::NONE,
                lp,
                op,
                use_imm,
                imm,
            })
        };
        if r.faults(&insn) == 0 {
            return insn;
        }
    }
}

/// Checks every bit of every ACC row against the reference: OUT (the low OUT_WIDTH bits),
/// then repeatedly an ALU `SHR` by OUT_WIDTH over all of ACC (on the core and on the
/// reference) and OUT again, until every bit was seen. Destroys ACC; uses UOP entry
/// `depth(UOP) - 1`.
pub fn check_all_acc(core: &mut Core, r: &mut Reference, what: &str) {
    let c = core.cfg.clone();
    let rows = c.depth(MemType::Acc) as usize;
    let u = c.depth(MemType::Uop) as usize - 1;
    core.write_uops(u, &[Uop::default()]);
    r.uop[u] = Uop::default();
    let (io, ii) = if rows <= 8192 {
        (1, rows)
    } else {
        (rows / 8192, 8192)
    };
    let shift = Insn::Alu(AluInsn {
        deps: DepFlags::NONE,
        lp: UopLoop {
            reset_reg: false,
            uop_bgn: u as u16,
            uop_end: u as u16 + 1,
            iter_out: io as u16,
            iter_in: ii as u16,
            dst_factor_out: if io > 1 { ii as u16 } else { 0 },
            dst_factor_in: u16::from(rows > 1),
            src_factor_out: 0,
            src_factor_in: 0,
        },
        op: AluOp::Shr,
        use_imm: true,
        imm: c.out_width() as i16,
    });
    let passes = c.acc_width().div_ceil(c.out_width());
    for pass in 0..passes {
        if pass > 0 {
            core.run(&[shift], &[0]);
            r.exec(&shift);
        }
        let got = core.read_out(rows);
        for (row, g) in got.iter().enumerate() {
            let want = r.out_row(row);
            assert_eq!(
                *g, want,
                "{}: {what}: ACC row {row} bits [{}..{}) differ (pass {pass}): got {g:?}, want {want:?}",
                core.name,
                pass * c.out_width(),
                (pass + 1) * c.out_width()
            );
        }
    }
}
