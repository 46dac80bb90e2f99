//! Randomized differential testing of the cycle-accurate RTL simulator against the functional
//! simulator: random valid programs with random token choreography on the five presets and on
//! random configs, each run on both backends with a random memory latency and bandwidth (and,
//! for a quarter of them, random stalls on every AXI channel); outputs must agree byte for
//! byte and counters exactly.
//!
//! A program is `n` load -> compute -> store blocks over `k` scratchpad regions (k = 1: VTA's
//! single buffer, 2 or 3: virtual threads whose loads overlap another block's compute); block
//! `i` uses region `i mod k`. Tokens order exactly the accesses that conflict (load `i` after
//! compute `i - k` freed the region, compute `i` after load `i` and after store `i - k`,
//! store `i` after compute `i`), with random choices of where each pop and push sits (early or
//! late, on a real instruction or on a sync of its own), random extra round trips on any queue
//! (placed only where the queue is balanced, so they never shift which push a pop matches),
//! random shapes, strides, paddings and DRAM alignments, GEMM and every ALU op with random
//! micro-op loops, and ACC initialized by LOAD ACC, LOAD ACC8 or a reset. Every scratchpad
//! element a block reads was written in the same program, so the programs are race-free and
//! their results timing-independent (spec 5.5); the stream order is a valid schedule, so they
//! are deadlock-free.
//!
//! On a mismatch the test reports the first STORE whose data differs (found by bisecting over
//! the program with the later STOREs turned into syncs that keep their tokens), the output
//! byte, its DRAM address, the OUT/ACC row and lane, both values, and the last compute
//! instruction that wrote that row.
//!
//! Besides the presets, `random_programs_on_random_configs` draws configs at random within the
//! valid ranges and builds each into a Verilator model on demand.
//!
//! `VTA_DIFF_PROGRAMS=N` scales the number of programs per config (default: as below);
//! `VTA_DIFF_CONFIGS=N` sets the number of random configs (default 2); `VTA_DIFF_SEED=S`
//! changes the seeds (of programs and of random configs).

#[path = "support/rtl.rs"]
mod rtl_support;

use drivers::{run_program, Buffer, Device, DeviceError, ProgramRun, RunReport, RunTimeout};
use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::rng::Rng;
use isa::{AluOp, DType, HwConfig, Insn, MemType, Module, Program, Queue, Uop};
use vta_sim::rtl::{MemFaults, MemTiming, Stalls};
use vta_sim::FsimDevice;

/// The program builder with token bookkeeping and random choreography.
struct Gen {
    r: Rng,
    b: ProgramBuilder,
    /// Pushes minus pops issued so far, per queue of [`Queue::ALL`].
    balance: [i64; 4],
}

impl Gen {
    fn q(from: Module, to: Module) -> usize {
        Queue::between(from, to).expect("adjacent modules") as usize
    }

    fn push(&mut self, from: Module, to: Module) {
        // Sometimes on a sync instruction of its own rather than the last real one.
        if self.r.chance(20) {
            self.sync(from);
        }
        self.b.dep_push(from, to);
        self.balance[Self::q(from, to)] += 1;
    }

    fn pop(&mut self, from: Module, to: Module) {
        self.b.dep_pop(from, to);
        self.balance[Self::q(from, to)] -= 1;
        if self.r.chance(20) {
            self.sync(to);
        }
    }

    /// A sync instruction (moves nothing) on `m`, absorbing its pending pops.
    fn sync(&mut self, m: Module) {
        let insn = match m {
            Module::Load => Insn::Load(isa::MemInsn::sync(if self.r.chance(50) {
                MemType::Inp
            } else {
                MemType::Wgt
            })),
            Module::Compute => Insn::Load(isa::MemInsn::sync(MemType::Uop)),
            Module::Store => Insn::Store(isa::MemInsn::sync(MemType::Out)),
        };
        self.b.emit(insn);
    }

    /// With some probability, an extra round trip on a random queue that is balanced now:
    /// its push and pop then match each other.
    fn maybe_extra(&mut self) {
        if !self.r.chance(35) {
            return;
        }
        let q = self.r.range(0, 3) as usize;
        if self.balance[q] == 0 {
            let (from, to) = (Queue::ALL[q].from(), Queue::ALL[q].to());
            self.push(from, to);
            self.pop(from, to);
        }
    }
}

/// A rectangle of `rows x cols` SRAM elements written by one padded LOAD of
/// `(rows - pads) x (cols - pads)` elements: (y, x, pads).
fn padded_shape(r: &mut Rng, rows: u32, cols: u32) -> (u16, u16, [u8; 4]) {
    let p = |r: &mut Rng, n: u32| -> (u8, u8) {
        if n >= 2 && r.chance(40) {
            let a = r.range(0, (n - 1).min(2));
            let b = r.range(0, (n - 1 - a).min(2));
            (a as u8, b as u8)
        } else {
            (0, 0)
        }
    };
    let (y0, y1) = p(r, rows);
    let (x0, x1) = p(r, cols);
    (
        (rows - y0 as u32 - y1 as u32) as u16,
        (cols - x0 as u32 - x1 as u32) as u16,
        [y0, y1, x0, x1],
    )
}

/// Random micro-op loops over a kernel of `len` micro-ops whose indices stay in
/// `[base, base + n)` of each buffer: (kernel, loops). `bases`/`ns` are (dst, src, wgt).
fn kernel(r: &mut Rng, len: u32, bases: [u32; 3], ns: [u32; 3]) -> (Vec<Uop>, UopLoops) {
    let iter_out = r.range(1, 3) as u16;
    let iter_in = r.range(1, 4) as u16;
    let factors = |r: &mut Rng, n: u32| -> (u16, u16) {
        let span = n.saturating_sub(1);
        let fo = r.range(0, (span / (iter_out as u32 * 2).max(1)).min(3)) as u16;
        let fi = r.range(0, (span / (iter_in as u32 * 2).max(1)).min(2)) as u16;
        if (iter_out as u32 - 1) * fo as u32 + (iter_in as u32 - 1) * fi as u32 >= n {
            (0, 0)
        } else {
            (fo, fi)
        }
    };
    let f: Vec<(u16, u16)> = ns.iter().map(|&n| factors(r, n)).collect();
    let reach =
        |(o, i): (u16, u16)| (iter_out as u32 - 1) * o as u32 + (iter_in as u32 - 1) * i as u32;
    let idx = |r: &mut Rng, k: usize| bases[k] + r.range(0, ns[k] - 1 - reach(f[k]));
    let uops = (0..len)
        .map(|_| Uop {
            dst_idx: idx(r, 0),
            src_idx: idx(r, 1),
            wgt_idx: idx(r, 2),
        })
        .collect();
    (
        uops,
        UopLoops {
            iter_out,
            iter_in,
            dst: f[0],
            src: f[1],
            wgt: f[2],
        },
    )
}

/// A random program for `cfg` (see the module docs).
fn program(cfg: &HwConfig, seed: u64) -> Program {
    let mut g = Gen {
        r: Rng::new(seed),
        b: ProgramBuilder::new(cfg),
        balance: [0; 4],
    };
    // Regions in flight bound the tokens a queue holds at once (see `Gen::maybe_extra`);
    // they stay within its capacity, so that stream order remains a valid schedule.
    let k = g.r.range(1, cfg.token_queue_depth.min(3));
    let n = g.r.range(1, 5);
    let eb = |m: MemType| cfg.elem_bytes(m) as usize;
    // Region sizes (elements) and their row x column shapes for the LOADs.
    let (ir, ic) = (g.r.range(1, 4), g.r.range(1, 4));
    let (wr, wc) = (g.r.range(1, 3), g.r.range(1, 3));
    let (ar, ac) = (g.r.range(1, 4), g.r.range(1, 4));
    let (inp_n, wgt_n, acc_n) = (ir * ic, wr * wc, ar * ac);
    assert!(k * inp_n <= cfg.depth(MemType::Inp) && k * wgt_n <= cfg.depth(MemType::Wgt));
    assert!(k * acc_n <= cfg.depth(MemType::Acc));
    // DRAM sources: big enough for any LOAD at any offset.
    let src_elems = 96usize;
    let x = {
        let d = g.r.bytes(src_elems * eb(MemType::Inp));
        g.b.input("x", DType::I8, vec![d.len()], d)
    };
    let w = {
        let d = g.r.bytes(src_elems * eb(MemType::Wgt));
        g.b.input("w", DType::I8, vec![d.len()], d)
    };
    let a = {
        let d = g.r.bytes(src_elems * eb(MemType::Acc));
        g.b.input("a", DType::I8, vec![d.len()], d)
    };
    let out_elems = 112 * n as usize;
    let y =
        g.b.output("y", DType::I8, vec![out_elems * eb(MemType::Out)]);
    let mut out_at = 0u32;
    let alu_ops: Vec<AluOp> = AluOp::ALL
        .into_iter()
        .filter(|&o| o != AluOp::Mul || cfg.alu_mul)
        .collect();

    for i in 0..n {
        let reg = i % k;
        let (ib, wb, ab) = (reg * inp_n, reg * wgt_n, reg * acc_n);
        let later = i + k < n;

        // ---- load: the region's INP and WGT, fully, in random order ----
        if i >= k {
            g.pop(Module::Compute, Module::Load);
        }
        let wgt_first = g.r.chance(50);
        for step in 0..2 {
            let (mt, buf, base, rows, cols) = if (step == 0) == wgt_first {
                (MemType::Wgt, w, wb, wr, wc)
            } else {
                (MemType::Inp, x, ib, ir, ic)
            };
            let (yy, xx, pad) = padded_shape(&mut g.r, rows, cols);
            let stride = xx + g.r.range(0, 3) as u16;
            let off =
                g.r.range(0, 96 - (yy as u32 - 1) * stride as u32 - xx as u32);
            g.b.load_padded(mt, base, buf, off, yy, xx, stride, pad);
            if g.r.chance(25) {
                // A second LOAD over part of the region (the later one wins).
                let len = g.r.range(1, rows * cols);
                let at = g.r.range(0, rows * cols - len);
                let off = g.r.range(0, 96 - len);
                g.b.load_2d(mt, base + at, buf, off, 1, len as u16, len as u16);
            }
        }
        g.maybe_extra();
        g.push(Module::Load, Module::Compute);

        // ---- compute ----
        let early = g.r.chance(50);
        if early {
            g.pop(Module::Load, Module::Compute);
        }
        if i >= k {
            g.pop(Module::Store, Module::Compute);
        }
        // Initialize the ACC region: LOAD ACC or ACC8 (with padding), or a reset GEMM
        // (then perhaps an ALU op on the zeros).
        if g.r.chance(60) {
            let mt = if g.r.chance(30) {
                MemType::Acc8
            } else {
                MemType::Acc
            };
            let (yy, xx, pad) = padded_shape(&mut g.r, ar, ac);
            let stride = xx + g.r.range(0, 2) as u16;
            let off =
                g.r.range(0, 96 - (yy as u32 - 1) * stride as u32 - xx as u32);
            g.b.load_padded(mt, ab, a, off, yy, xx, stride, pad);
        } else {
            let kern = g.b.kernel(&[Uop {
                dst_idx: ab,
                src_idx: 0,
                wgt_idx: 0,
            }]);
            g.b.gemm(kern, UopLoops::inner(acc_n as u16, 1, 0), true);
            if g.r.chance(50) {
                let imm = g.r.range(0, 2000) as i16 - 1000;
                let kern = g.b.kernel(&[Uop {
                    dst_idx: ab,
                    src_idx: ab,
                    wgt_idx: 0,
                }]);
                let lp = UopLoops::inner(acc_n as u16, 1, 1);
                g.b.alu(kern, lp, AluOp::Add, Operand::Imm(imm));
            }
        }
        if !early {
            g.pop(Module::Load, Module::Compute);
        }
        let n_gemm = g.r.range(1, 3);
        let n_alu = g.r.range(0, 3);
        let mut ops: Vec<bool> = (0..n_gemm)
            .map(|_| true)
            .chain((0..n_alu).map(|_| false))
            .collect();
        // Random interleaving, the GEMMs' order kept.
        for j in (1..ops.len()).rev() {
            let s = g.r.range(0, j as u32) as usize;
            ops.swap(j, s);
        }
        let last_gemm = ops.iter().rposition(|&o| o).unwrap();
        let release_early = g.r.chance(50);
        for (j, &is_gemm) in ops.iter().enumerate() {
            if is_gemm {
                let len = g.r.range(1, 3);
                let (kern, lp) = kernel(&mut g.r, len, [ab, ib, wb], [acc_n, inp_n, wgt_n]);
                let kern = g.b.kernel(&kern);
                let reset = g.r.chance(10);
                g.b.gemm(kern, lp, reset);
            } else {
                let op = alu_ops[g.r.range(0, alu_ops.len() as u32 - 1) as usize];
                let len = g.r.range(1, 2);
                let (kern, mut lp) = kernel(&mut g.r, len, [ab, ab, 0], [acc_n, acc_n, 1]);
                lp.wgt = (0, 0);
                let kern = g.b.kernel(&kern);
                let operand = if g.r.chance(50) {
                    Operand::Imm(match op {
                        AluOp::Shr => g.r.range(0, 80) as i16 - 40,
                        AluOp::Mul => g.r.range(0, 400) as i16 - 200,
                        _ => g.r.range(0, 60000) as i16,
                    })
                } else {
                    Operand::Tensor
                };
                g.b.alu(kern, lp, op, operand);
            }
            if j == last_gemm && release_early && later {
                g.push(Module::Compute, Module::Load);
            }
            if g.r.chance(15) {
                g.maybe_extra();
            }
        }
        if !release_early && later {
            g.push(Module::Compute, Module::Load);
        }
        g.push(Module::Compute, Module::Store);

        // ---- store ----
        g.pop(Module::Compute, Module::Store);
        for _ in 0..g.r.range(1, 2) {
            let sy = g.r.range(1, ar.min(3));
            let sx = g.r.range(1, acc_n / sy);
            let stride = sx + g.r.range(0, 2);
            let s_base = ab + g.r.range(0, acc_n - sy * sx);
            out_at += g.r.range(0, 2);
            g.b.store_2d(s_base, y, out_at, sy as u16, sx as u16, stride as u16);
            out_at += (sy - 1) * stride + sx;
            assert!(out_at as usize <= out_elems, "output segment too small");
        }
        if later {
            g.push(Module::Store, Module::Compute);
        }
        g.maybe_extra();
    }
    assert_eq!(g.balance, [0; 4], "every token is popped");
    g.b.finish().unwrap()
}

fn timing(r: &mut Rng) -> MemTiming {
    MemTiming {
        read_latency: r.range(1, 60),
        write_latency: r.range(1, 30),
        beat_interval: r.range(1, 4),
        max_outstanding: r.range(1, 8) as usize,
    }
}

fn run(dev: &mut dyn Device, p: &Program) -> Result<ProgramRun, String> {
    run_program(dev, p, &[], RunTimeout::default()).map_err(|e| e.to_string())
}

/// `p` with every STORE after the `keep` first ones turned into a sync with the same tokens:
/// the DRAM after the run is what the first `keep` STOREs wrote.
fn stores_upto(p: &Program, keep: usize) -> Program {
    let mut q = p.clone();
    let mut seen = 0;
    for insn in &mut q.insns {
        if let Insn::Store(m) = insn {
            if m.x_size > 0 {
                seen += 1;
                if seen > keep {
                    m.x_size = 0;
                }
            }
        }
    }
    q
}

/// The first differing output byte: (segment, byte offset).
fn first_diff(a: &ProgramRun, b: &ProgramRun) -> Option<(String, usize)> {
    for ((name, x), (_, y)) in a.outputs.iter().zip(&b.outputs) {
        if let Some(i) = x.iter().zip(y).position(|(u, v)| u != v) {
            return Some((name.clone(), i));
        }
    }
    None
}

/// Indices of the ACC rows a compute instruction writes (UOP contents from `uop_buf`).
fn acc_writes(insn: &Insn, uop_buf: &[Uop]) -> Vec<u32> {
    let lp = match insn {
        Insn::Load(m) if matches!(m.memory_type, MemType::Acc | MemType::Acc8) && m.x_size > 0 => {
            let w = m.x_pad_0 as u32 + m.x_size as u32 + m.x_pad_1 as u32;
            let h = m.y_pad_0 as u32 + m.y_size as u32 + m.y_pad_1 as u32;
            return (0..w * h).map(|e| m.sram_base as u32 + e).collect();
        }
        Insn::Gemm(gm) => gm.lp,
        Insn::Alu(al) => al.lp,
        _ => return vec![],
    };
    let mut v = vec![];
    for o in 0..lp.iter_out as u32 {
        for i in 0..lp.iter_in as u32 {
            for u in lp.uop_bgn..lp.uop_end {
                let uop = uop_buf.get(u as usize).copied().unwrap_or_default();
                v.push(uop.dst_idx + o * lp.dst_factor_out as u32 + i * lp.dst_factor_in as u32);
            }
        }
    }
    v
}

/// Finds and describes the first STORE whose data differ between the backends.
fn diagnose(cfg: &HwConfig, p: &Program, rtl: &mut dyn Device) -> String {
    let stores: Vec<usize> = p
        .insns
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Insn::Store(m) if m.x_size > 0))
        .map(|(k, _)| k)
        .collect();
    let differs = |keep: usize, rtl: &mut dyn Device| -> Option<(ProgramRun, ProgramRun)> {
        let q = stores_upto(p, keep);
        let f = run(&mut FsimDevice::new(cfg), &q).ok()?;
        let r = run(rtl, &q).ok()?;
        first_diff(&f, &r).map(|_| (f, r))
    };
    // Smallest number of STOREs whose data already differ.
    let (mut lo, mut hi) = (0usize, stores.len());
    if differs(hi, rtl).is_none() {
        return "the outputs of the full program differ, but no prefix of STOREs reproduces it \
                (a failing run?)"
            .into();
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if differs(mid, rtl).is_some() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let (f, r) = differs(hi, rtl).expect("reproduces");
    let (seg_name, byte) = first_diff(&f, &r).unwrap();
    let seg = p.segment(&seg_name).unwrap();
    let sk = stores[hi - 1];
    let Insn::Store(m) = p.insns[sk] else {
        unreachable!()
    };
    let eb = cfg.elem_bytes(MemType::Out) as u64;
    let elem = (seg.offset + byte as u64) / eb;
    let lane_bytes = (cfg.out_width() / 8).max(1) as u64;
    let lane = ((seg.offset + byte as u64) % eb) / lane_bytes;
    let rel = elem - m.dram_base as u64;
    let (row, col) = (rel / m.x_stride as u64, rel % m.x_stride as u64);
    let sram = m.sram_base as u64 + row * m.x_size as u64 + col;
    // The last compute instruction before the STORE that writes ACC row `sram`.
    let mut uop_buf = vec![Uop::default(); cfg.depth(MemType::Uop) as usize];
    let mut writer = None;
    for (k, insn) in p.insns[..sk].iter().enumerate() {
        if let Insn::Load(l) = insn {
            if l.memory_type == MemType::Uop && l.x_size > 0 {
                if let Some((s, at)) = p.locate(MemType::Uop, l.dram_base as u64) {
                    let uops = p.uops(s);
                    for j in 0..l.x_size as usize {
                        if let Some(u) = uops.get(at as usize + j) {
                            uop_buf[l.sram_base as usize + j] = *u;
                        }
                    }
                }
            }
        }
        if insn.module() == Module::Compute && acc_writes(insn, &uop_buf).contains(&(sram as u32)) {
            writer = Some(k);
        }
    }
    let text = |k: usize| {
        isa::asm::print_insns(cfg, &[p.insns[k]])
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    format!(
        "first differing STORE: instruction {sk} ({}) of {} STOREs; output '{seg_name}' byte {byte} \
         (DRAM element {elem} of OUT at the program's offset {:#x}): OUT/ACC row {sram}, lane {lane}: \
         fsim {:#04x}, rtl {:#04x}; last writer of ACC row {sram}: {}",
        text(sk),
        stores.len(),
        seg.offset + byte as u64,
        f.outputs.iter().find(|o| o.0 == seg_name).unwrap().1[byte],
        r.outputs.iter().find(|o| o.0 == seg_name).unwrap().1[byte],
        writer
            .map(|k| format!("instruction {k} ({})", text(k)))
            .unwrap_or_else(|| "none before it".into())
    )
}

/// The value of the environment variable `key`, or `default` when it is not set; a value
/// that is not a number fails the test naming the variable.
fn env_number(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

fn differential(preset: &str, programs: u64) {
    differential_on(preset, &HwConfig::preset(preset).unwrap(), programs);
}

fn differential_on(name: &str, cfg: &HwConfig, programs: u64) {
    let cfg = cfg.clone();
    let scale = env_number("VTA_DIFF_PROGRAMS", 1);
    let base = env_number("VTA_DIFF_SEED", 0);
    let mut rtl = rtl_support::device(&cfg);
    let mut tr = Rng::new(cfg.isa_hash() ^ base);
    // Stalls from a generator of their own, so that programs and timings stay those of the
    // seed.
    let mut sr = Rng::new(!(cfg.isa_hash() ^ base));
    let (mut cycles, mut insns, mut nonzero) = (0u64, 0usize, 0u64);
    let start = std::time::Instant::now();
    let total = programs * scale;
    for s in 0..total {
        let seed = base * 1_000_003 + s + 1;
        let p = program(&cfg, seed ^ cfg.isa_hash());
        let t = timing(&mut tr);
        rtl.sim_mut().set_timing(t);
        let stalls = sr
            .chance(25)
            .then(|| Stalls::uniform(sr.range(5, 60), sr.next_u64()));
        rtl.sim_mut().set_faults(MemFaults {
            stalls,
            ..MemFaults::none()
        });
        let want = run(&mut FsimDevice::checking_races(&cfg), &p)
            .unwrap_or_else(|e| panic!("{name} program {seed}: fsim refused it: {e}"));
        let got = run(&mut rtl, &p).unwrap_or_else(|e| {
            panic!(
                "{name} program {seed} ({} insns, {t:?}, stalls {stalls:?}): the RTL run failed: {e}",
                p.insns.len()
            )
        });
        if first_diff(&want, &got).is_some() {
            let why = diagnose(&cfg, &p, &mut rtl);
            panic!(
                "{name} program {seed} ({} insns, memory {t:?}, stalls {stalls:?}): outputs differ between fsim and rtl.\n{why}\nprogram:\n{}",
                p.insns.len(),
                isa::asm::print_program(&p)
            );
        }
        assert_eq!(
            want.report.counters, got.report.counters,
            "{name} program {seed}: counters differ"
        );
        if want.outputs[0].1.iter().any(|&b| b != 0) {
            nonzero += 1;
        }
        cycles += got.report.get("cycles").unwrap();
        insns += p.insns.len();
    }
    eprintln!(
        "{name}: {total} random programs, {insns} instructions, {cycles} cycles, identical on fsim and rtl ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    assert!(
        nonzero * 10 >= total * 9,
        "only {nonzero} of {total} programs stored anything but zeros"
    );
}

#[test]
fn random_programs_small() {
    differential("small", 1000);
}

#[test]
fn random_programs_default() {
    differential("default", 200);
}

#[test]
fn random_programs_batched() {
    differential("batched", 200);
}

#[test]
fn random_programs_rect() {
    differential("rect", 200);
}

#[test]
fn random_programs_wide_bus() {
    differential("wide-bus", 200);
}

/// 2-bit lanes on both backends: the small preset with int2 inputs and weights and 16-bit
/// accumulators, where four lanes share a byte and ACC arithmetic wraps at 16 bits.
#[test]
fn random_programs_int2() {
    let mut cfg = HwConfig::preset("small").unwrap();
    (cfg.log_inp_width, cfg.log_wgt_width, cfg.log_acc_width) = (1, 1, 4);
    cfg.validate().unwrap();
    differential_on("small, int2 x int2 -> int16", &cfg, 300);
}

/// Random configs within the valid ranges (`HwConfig::random`), each built into a Verilator
/// model on demand: `VTA_DIFF_CONFIGS` of them (default 2), 100 programs each (times
/// `VTA_DIFF_PROGRAMS`). A failure names the config seed and prints the config's JSON.
#[test]
fn random_programs_on_random_configs() {
    let configs = env_number("VTA_DIFF_CONFIGS", 2);
    let base = env_number("VTA_DIFF_SEED", 0);
    let bounds = isa::config::SampleBounds {
        log_depth: 7..=10,
        ..Default::default()
    };
    for c in 0..configs {
        let seed = base.wrapping_mul(0x9e37_79b9).wrapping_add(c);
        let cfg = HwConfig::random(&mut Rng::new(seed), &bounds).unwrap();
        let name = format!("random config {seed} ({cfg})");
        eprintln!("{name}:\n{}", cfg.to_json());
        differential_on(&name, &cfg, 100);
    }
}

/// A backend with a bug: the RTL, except that after a run whose stream has at least
/// `store + 1` STOREs, the first byte STORE number `store` wrote is flipped.
struct Faulty {
    rtl: vta_sim::rtl::RtlDevice,
    store: usize,
}

impl Device for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }
    fn config(&self) -> &HwConfig {
        self.rtl.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.rtl.alloc(size, align)
    }
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.rtl.free(buf)
    }
    fn copy_to_device(&mut self, b: &Buffer, off: u64, d: &[u8]) -> Result<(), DeviceError> {
        self.rtl.copy_to_device(b, off, d)
    }
    fn copy_from_device(&mut self, b: &Buffer, off: u64, d: &mut [u8]) -> Result<(), DeviceError> {
        self.rtl.copy_from_device(b, off, d)
    }
    fn flush(&mut self, b: &Buffer, off: u64, n: u64) -> Result<(), DeviceError> {
        self.rtl.flush(b, off, n)
    }
    fn invalidate(&mut self, b: &Buffer, off: u64, n: u64) -> Result<(), DeviceError> {
        self.rtl.invalidate(b, off, n)
    }
    fn run(&mut self, addr: u64, count: u32, t: RunTimeout) -> Result<RunReport, DeviceError> {
        let report = self.rtl.run(addr, count, t)?;
        let cfg = self.rtl.config().clone();
        let mut bytes = vec![0u8; count as usize * 16];
        self.rtl.sim().memory().read(addr, &mut bytes);
        let stream = isa::Codec::new(&cfg).decode_stream(&bytes).unwrap();
        let store = stream
            .iter()
            .filter_map(|i| match i {
                Insn::Store(m) if m.x_size > 0 => Some(*m),
                _ => None,
            })
            .nth(self.store);
        if let Some(m) = store {
            let at = m.dram_base as u64 * cfg.elem_bytes(MemType::Out) as u64;
            let mut b = [0u8];
            self.rtl.sim().memory().read(at, &mut b);
            self.rtl.sim_mut().memory_mut().write(at, &[b[0] ^ 0x5a]);
        }
        Ok(report)
    }
}

/// The mismatch report: a backend whose STORE number 2 corrupts a byte is found out, and
/// the report names that STORE (its index in the stream), the output byte, its ACC row and
/// both values; a program that runs the same on both backends is not blamed.
#[test]
fn a_mismatch_is_bisected_to_the_first_differing_store() {
    let cfg = HwConfig::preset("small").unwrap();
    let p = (1..)
        .map(|s| program(&cfg, s))
        .find(|p| {
            p.insns
                .iter()
                .filter(|i| matches!(i, Insn::Store(m) if m.x_size > 0))
                .count()
                >= 4
        })
        .unwrap();
    let stores: Vec<usize> = p
        .insns
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Insn::Store(m) if m.x_size > 0))
        .map(|(k, _)| k)
        .collect();
    let mut rtl = rtl_support::device(&cfg);
    let msg = diagnose(&cfg, &p, &mut rtl);
    assert!(msg.contains("no prefix of STOREs reproduces"), "{msg}");
    let mut faulty = Faulty { rtl, store: 2 };
    let want = run(&mut FsimDevice::new(&cfg), &p).unwrap();
    let got = run(&mut faulty, &p).unwrap();
    assert!(first_diff(&want, &got).is_some());
    let msg = diagnose(&cfg, &p, &mut faulty);
    eprintln!("{msg}");
    assert!(
        msg.contains(&format!(
            "first differing STORE: instruction {} (",
            stores[2]
        )),
        "{msg}"
    );
    assert!(
        msg.contains("OUT/ACC row") && msg.contains("last writer of ACC row"),
        "{msg}"
    );
}
