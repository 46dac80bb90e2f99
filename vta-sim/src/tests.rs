//! Unit tests of the simulator against `isa::spec`, one group per rule.

use isa::{
    AluInsn, AluOp, Codec, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Uop, UopLoop,
};

use crate::{Blocked, Counters, Dram, Fsim, FsimError, Limits, Memory, Queue};

const BASE: u64 = 0x1000_0000;
const DRAM_SIZE: usize = 4 << 20;
/// Where test instruction streams are placed.
const INSN_OFF: u64 = 3 << 20;

fn json(extra: &str) -> String {
    format!(
        r#"{{"TARGET":"sim","HW_VER":"0.0.2","LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":10,
        "LOG_WGT_BUFF_SIZE":12,"LOG_ACC_BUFF_SIZE":11,{extra}}}"#
    )
}

/// 1x4x4, int8 inputs, int32 accumulators, small buffers.
fn small() -> HwConfig {
    HwConfig::preset("small").unwrap()
}

/// 1x4x4 with 16-bit accumulators.
fn acc16() -> HwConfig {
    HwConfig::from_json_str(
        &json(
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":4,"LOG_BATCH":0,"LOG_BLOCK":2"#,
        ),
        "acc16",
    )
    .unwrap()
}

/// 2x4x4 with int4 inputs and weights.
fn int4() -> HwConfig {
    HwConfig::from_json_str(
        &json(
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":5,"LOG_BATCH":1,"LOG_BLOCK":2"#,
        ),
        "int4",
    )
    .unwrap()
}

struct Rig {
    cfg: HwConfig,
    codec: Codec,
    dram: Dram,
    sim: Fsim,
}

impl Rig {
    fn new(cfg: HwConfig) -> Self {
        Rig {
            codec: Codec::new(&cfg),
            sim: Fsim::new(&cfg),
            dram: Dram::new(BASE, DRAM_SIZE),
            cfg,
        }
    }

    /// Element address of byte offset `off` (a multiple of 4096) for memory type `m`.
    fn ea(&self, m: MemType, off: u64) -> u32 {
        ((BASE + off) / u64::from(self.cfg.elem_bytes(m))) as u32
    }

    fn put(&mut self, off: u64, bytes: &[u8]) {
        self.dram.write(BASE + off, bytes).unwrap();
    }

    fn get(&self, off: u64, len: usize) -> Vec<u8> {
        self.dram.slice(BASE + off, len).unwrap().to_vec()
    }

    fn put_uops(&mut self, off: u64, uops: &[(u32, u32, u32)]) {
        let bytes: Vec<u8> = uops
            .iter()
            .flat_map(|&(d, s, w)| {
                self.codec
                    .encode_uop(&Uop {
                        dst_idx: d,
                        src_idx: s,
                        wgt_idx: w,
                    })
                    .unwrap()
            })
            .collect();
        self.put(off, &bytes);
    }

    /// Loads micro-ops placed at `off` into the UOP buffer from 0 (a compute instruction).
    fn load_uops(&self, off: u64, n: u16) -> Insn {
        Insn::Load(mem(MemType::Uop, 0, self.ea(MemType::Uop, off), 1, n, n))
    }

    fn try_run(&mut self, insns: &[Insn]) -> Result<Counters, FsimError> {
        self.try_run_limited(insns, &Limits::default())
    }

    fn try_run_limited(&mut self, insns: &[Insn], limits: &Limits) -> Result<Counters, FsimError> {
        let stream = self.codec.encode_stream(insns).unwrap();
        self.dram.write(BASE + INSN_OFF, &stream).unwrap();
        self.sim
            .run(&mut self.dram, BASE + INSN_OFF, insns.len() as u32, limits)
    }

    fn run(&mut self, insns: &[Insn]) -> Counters {
        self.try_run(insns)
            .unwrap_or_else(|e| panic!("run failed: {e}"))
    }
}

fn mem(
    memory_type: MemType,
    sram_base: u16,
    dram_base: u32,
    y: u16,
    x: u16,
    stride: u16,
) -> MemInsn {
    MemInsn::transfer(memory_type, sram_base, dram_base, y, x, stride)
}

/// Sets the flags named in `flags` ("pop_prev push_next" ...).
fn with(mut insn: Insn, flags: &str) -> Insn {
    let d = insn.deps_mut();
    for f in flags.split_whitespace() {
        match f {
            "pop_prev" => d.pop_prev = true,
            "pop_next" => d.pop_next = true,
            "push_prev" => d.push_prev = true,
            "push_next" => d.push_next = true,
            _ => panic!("unknown flag {f}"),
        }
    }
    insn
}

fn lp(reset: bool, uops: (u16, u16), iters: (u16, u16)) -> UopLoop {
    UopLoop {
        reset_reg: reset,
        uop_bgn: uops.0,
        uop_end: uops.1,
        iter_out: iters.0,
        iter_in: iters.1,
        ..UopLoop::default()
    }
}

fn gemm(l: UopLoop) -> Insn {
    Insn::Gemm(GemmInsn {
        deps: DepFlags::NONE,
        lp: l,
        wgt_factor_out: 0,
        wgt_factor_in: 0,
    })
}

fn alu(op: AluOp, imm: Option<i16>, l: UopLoop) -> Insn {
    Insn::Alu(AluInsn {
        deps: DepFlags::NONE,
        lp: l,
        op,
        use_imm: imm.is_some(),
        imm: imm.unwrap_or(0),
    })
}

fn finish() -> Insn {
    Insn::Finish(DepFlags::NONE)
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn noise(len: usize, seed: u64) -> Vec<u8> {
    isa::rng::Rng::new(seed).bytes(len)
}

// ---------------------------------------------------------------------------------------- LOAD

#[test]
fn load_inp_writes_padding_rows_and_columns_densely() {
    let mut r = Rig::new(HwConfig::default()); // INP element: 16 int8
                                               // Dirty the target rows first so that zero padding is visible.
    r.put(0x1000, &[0x55; 16 * 64]);
    let dirty = mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 64, 64);
    // DRAM: 2 rows of 3 elements, stride 4 elements; element e has every lane = e + 1.
    let data: Vec<u8> = (0..8u8).flat_map(|e| [e + 1; 16]).collect();
    r.put(0x2000, &data);
    let mut ld = mem(MemType::Inp, 5, r.ea(MemType::Inp, 0x2000), 2, 3, 4);
    (ld.y_pad_0, ld.y_pad_1, ld.x_pad_0, ld.x_pad_1) = (1, 2, 1, 2);
    let c = r.run(&[Insn::Load(dirty), Insn::Load(ld), finish()]);
    // Width 1 + 3 + 2 = 6; rows 1 + 2 + 2 = 5: SRAM rows 5..35.
    let lane = |row: u32| r.sim.inp_row(row)[0];
    assert_eq!(lane(4), 0x55, "row before sram_base untouched");
    assert_eq!(lane(35), 0x55, "row after the padded block untouched");
    let expect: Vec<i16> = (0..30)
        .map(|i| {
            let (y, x) = (i / 6, i % 6);
            if (1..3).contains(&y) && (1..4).contains(&x) {
                ((y - 1) * 4 + (x - 1) + 1) as i16
            } else {
                0
            }
        })
        .collect();
    let got: Vec<i16> = (5..35).map(lane).collect();
    assert_eq!(got, expect);
    assert!(r.sim.inp_row(12).iter().all(|&v| v == 1));
    assert_eq!(c.inp_load_bytes, 16 * 64 + 16 * 6, "pads read nothing");
    assert_eq!(c.load_insns, 2);
    assert_eq!(c.compute_insns, 1);
}

#[test]
fn load_wgt_acc_and_uop() {
    let mut r = Rig::new(small()); // WGT tile 4x4 int8 = 16 B; ACC row 4 x i32 = 16 B
    let tile: Vec<u8> = (0..16u8).map(|v| v.wrapping_mul(17)).collect();
    r.put(0x1000, &tile);
    r.put(0x2000, &i32s(&[1, -2, i32::MAX, i32::MIN]));
    r.put_uops(0x3000, &[(1, 2, 3), (7, 0, 5)]);
    let mut w = mem(MemType::Wgt, 2, r.ea(MemType::Wgt, 0x1000), 1, 1, 1);
    w.x_pad_0 = 1; // padding on WGT is allowed: a zero tile
    let c = r.run(&[
        Insn::Load(w),
        Insn::Load(mem(MemType::Acc, 3, r.ea(MemType::Acc, 0x2000), 1, 1, 1)),
        r.load_uops(0x3000, 2),
        finish(),
    ]);
    assert!(r.sim.wgt_tile(2).iter().all(|&v| v == 0));
    let want: Vec<i16> = tile.iter().map(|&b| i16::from(b as i8)).collect();
    assert_eq!(r.sim.wgt_tile(3), want);
    assert_eq!(r.sim.acc_row(3), &[1, -2, i32::MAX, i32::MIN]);
    assert_eq!(
        r.sim.uop(1),
        Uop {
            dst_idx: 7,
            src_idx: 0,
            wgt_idx: 5
        }
    );
    assert_eq!(
        (c.wgt_load_bytes, c.acc_load_bytes, c.uop_load_bytes),
        (16, 16, 8)
    );
    assert_eq!((c.load_insns, c.compute_insns), (1, 3));
}

#[test]
fn load_acc8_sign_extends_bytes() {
    let mut r = Rig::new(HwConfig::preset("batched").unwrap()); // 4x8: ACC8 element 32 B
    let bytes: Vec<u8> = (0..64u8).map(|v| v.wrapping_mul(37)).collect();
    r.put(0x1000, &bytes);
    let mut l = mem(MemType::Acc8, 0, r.ea(MemType::Acc8, 0x1000), 2, 1, 1);
    l.y_pad_0 = 1;
    let c = r.run(&[Insn::Load(l), finish()]);
    assert!(r.sim.acc_row(0).iter().all(|&v| v == 0));
    let want: Vec<i32> = bytes.iter().map(|&b| i32::from(b as i8)).collect();
    assert_eq!(r.sim.acc_row(1), &want[..32]);
    assert_eq!(r.sim.acc_row(2), &want[32..]);
    assert_eq!(c.acc_load_bytes, 64, "ACC8 counts the bytes actually read");
}

#[test]
fn sync_loads_and_stores_move_nothing() {
    let mut r = Rig::new(small());
    r.put(0x1000, &[7; 64]);
    r.run(&[
        Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 4, 4, 4)),
        finish(),
    ]);
    let mut sync = mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 4, 0, 4);
    (sync.y_pad_0, sync.x_pad_0) = (3, 3); // pads are ignored by a sync
    let mut usync = mem(MemType::Uop, 0, 0, 1, 0, 0);
    usync.x_pad_1 = 2; // even on UOP, where padding is otherwise an error
    let st = mem(MemType::Out, 0, 0, 9, 0, 0); // dram_base 0 is never touched
    let c = r.run(&[
        Insn::Load(sync),
        with(Insn::Load(usync), "push_next"),
        with(Insn::Store(st), "pop_prev push_prev"),
        with(finish(), "pop_next"),
    ]);
    assert!(r.sim.inp_row(0).iter().all(|&v| v == 7));
    assert_eq!(c.inp_load_bytes + c.uop_load_bytes + c.out_store_bytes, 0);
    assert_eq!((c.load_insns, c.compute_insns, c.store_insns), (1, 2, 1));
}

#[test]
fn uop_padding_is_an_error() {
    let mut r = Rig::new(small());
    let mut l = mem(MemType::Uop, 0, r.ea(MemType::Uop, 0x1000), 1, 2, 2);
    l.y_pad_0 = 1;
    let e = r.try_run(&[Insn::Load(l), finish()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "instruction 0 (LOAD uop): y_pad_0 = 1: micro-op loads take no padding; set every pad \
         field to 0"
    );
}

#[test]
fn load_past_the_buffer_or_dram_is_an_error() {
    let mut r = Rig::new(small()); // INP depth 512
    assert_eq!(r.cfg.depth(MemType::Inp), 512);
    let mut l = mem(MemType::Inp, 505, r.ea(MemType::Inp, 0x1000), 2, 4, 4);
    l.x_pad_1 = 1;
    let e = r
        .try_run(&[Insn::Load(l), finish()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "instruction 0 (LOAD inp): would write INP rows 505..515, past the INP buffer's 512 rows"
    );
    // Second row runs off the end of DRAM.
    let last = (BASE + DRAM_SIZE as u64) / 4 - 4;
    let l = mem(MemType::Inp, 0, last as u32, 2, 4, 4);
    let e = r
        .try_run(&[finish(), Insn::Load(l)])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "instruction 1 (LOAD inp): row 1 at element address 0x4100000: DRAM read \
                       of 16 bytes at 0x10400000 is outside memory [0x10000000, 0x10400000)"
        ),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------- GEMM

/// Reference GEMM of one micro-op in i64, wrapped to `acc_bits`.
fn gemm_ref(cfg: &HwConfig, acc: &mut [i32], inp: &[i16], wgt: &[i16], acc_bits: u32) {
    let (b, bi, bo) = (
        cfg.batch() as usize,
        cfg.block_in() as usize,
        cfg.block_out() as usize,
    );
    for bb in 0..b {
        for n in 0..bo {
            let mut s = i64::from(acc[bb * bo + n]);
            for k in 0..bi {
                s += i64::from(inp[bb * bi + k]) * i64::from(wgt[n * bi + k]);
            }
            let sh = 64 - acc_bits;
            acc[bb * bo + n] = ((s << sh) >> sh) as i32;
        }
    }
}

/// Random INP/WGT/ACC, a kernel with loop factors; compares every touched row with the
/// reference, for the given config.
fn gemm_matches_reference(cfg: HwConfig) {
    let mut r = Rig::new(cfg.clone());
    let eb = |m| u64::from(cfg.elem_bytes(m));
    let (n_inp, n_wgt, n_acc) = (16u64, 8u64, 24u64);
    r.put(0x1_0000, &noise((n_inp * eb(MemType::Inp)) as usize, 1));
    r.put(0x2_0000, &noise((n_wgt * eb(MemType::Wgt)) as usize, 2));
    r.put(0x3_0000, &noise((n_acc * eb(MemType::Acc)) as usize, 3));
    // Micro-ops: dst 0/1 (reused: sequential), src, wgt.
    let kernel = [(0, 0, 0), (1, 3, 1), (0, 5, 2), (2, 1, 3)];
    r.put_uops(0x4_0000, &kernel);
    let loop_ = UopLoop {
        reset_reg: false,
        uop_bgn: 0,
        uop_end: 4,
        iter_out: 3,
        iter_in: 2,
        dst_factor_out: 6,
        dst_factor_in: 3,
        src_factor_out: 2,
        src_factor_in: 1,
    };
    let g = Insn::Gemm(GemmInsn {
        deps: DepFlags::NONE,
        lp: loop_,
        wgt_factor_out: 1,
        wgt_factor_in: 2,
    });
    let c = r.run(&[
        Insn::Load(mem(
            MemType::Inp,
            0,
            r.ea(MemType::Inp, 0x1_0000),
            1,
            n_inp as u16,
            0,
        )),
        with(
            Insn::Load(mem(
                MemType::Wgt,
                0,
                r.ea(MemType::Wgt, 0x2_0000),
                1,
                n_wgt as u16,
                0,
            )),
            "push_next",
        ),
        Insn::Load(mem(
            MemType::Acc,
            0,
            r.ea(MemType::Acc, 0x3_0000),
            1,
            n_acc as u16,
            0,
        )),
        r.load_uops(0x4_0000, 4),
        with(g, "pop_prev"),
        finish(),
    ]);
    // Reference from the loaded data.
    let sim0 = {
        let mut s = Fsim::new(&cfg);
        let mut d = r.dram.clone();
        let insns = [
            Insn::Load(mem(
                MemType::Inp,
                0,
                r.ea(MemType::Inp, 0x1_0000),
                1,
                n_inp as u16,
                0,
            )),
            Insn::Load(mem(
                MemType::Wgt,
                0,
                r.ea(MemType::Wgt, 0x2_0000),
                1,
                n_wgt as u16,
                0,
            )),
            Insn::Load(mem(
                MemType::Acc,
                0,
                r.ea(MemType::Acc, 0x3_0000),
                1,
                n_acc as u16,
                0,
            )),
            finish(),
        ];
        s.run_insns(&mut d, &insns, &Limits::default()).unwrap();
        s
    };
    let mut acc: Vec<Vec<i32>> = (0..n_acc as u32)
        .map(|i| sim0.acc_row(i).to_vec())
        .collect();
    for o in 0..3u32 {
        for i in 0..2u32 {
            for &(d, s, w) in &kernel {
                let (d, s, w) = (d + o * 6 + i * 3, s + o * 2 + i, w + o + 2 * i);
                gemm_ref(
                    &cfg,
                    &mut acc[d as usize],
                    sim0.inp_row(s),
                    &sim0.wgt_tile(w),
                    cfg.acc_width(),
                );
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        assert_eq!(r.sim.acc_row(i as u32), &row[..], "{cfg}: ACC row {i}");
    }
    assert_eq!(c.gemm_uops, 24);
    assert_eq!(c.macs, 24 * cfg.macs_per_uop());
    assert_eq!(c.reset_uops, 0);
}

#[test]
fn gemm_matches_reference_default() {
    gemm_matches_reference(HwConfig::default());
}

#[test]
fn gemm_matches_reference_batched_and_rect() {
    gemm_matches_reference(HwConfig::preset("batched").unwrap());
    gemm_matches_reference(HwConfig::preset("rect").unwrap());
}

#[test]
fn gemm_matches_reference_acc16_and_int4() {
    gemm_matches_reference(acc16());
    gemm_matches_reference(int4());
}

#[test]
fn gemm_matches_reference_odd_shapes_and_int16() {
    for (name, extra) in [
        (
            "block_in 1",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":1,
               "LOG_BLOCK_IN":0,"LOG_BLOCK_OUT":3"#,
        ),
        (
            "block_out 1",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
               "LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":0"#,
        ),
        (
            "int16 x int16",
            r#""LOG_INP_WIDTH":4,"LOG_WGT_WIDTH":4,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
               "LOG_BLOCK":2"#,
        ),
        (
            "int4 x int8, acc16",
            r#""LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":4,"LOG_BATCH":1,
               "LOG_BLOCK":2"#,
        ),
        (
            "int2 x int2",
            r#""LOG_INP_WIDTH":1,"LOG_WGT_WIDTH":1,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
               "LOG_BLOCK":3"#,
        ),
        (
            "int8 x int2, acc16",
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":1,"LOG_ACC_WIDTH":4,"LOG_BATCH":0,
               "LOG_BLOCK":2"#,
        ),
        (
            "int2 x int4, batch 2",
            r#""LOG_INP_WIDTH":1,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":4,"LOG_BATCH":1,
               "LOG_BLOCK":2"#,
        ),
    ] {
        gemm_matches_reference(HwConfig::from_json_str(&json(extra), name).unwrap());
    }
}

#[test]
fn gemm_int16_extremes_wrap() {
    // (-32768)^2 * 4 = 2^32: wraps to 0 in a 32-bit accumulator.
    let cfg = HwConfig::from_json_str(
        &json(
            r#""LOG_INP_WIDTH":4,"LOG_WGT_WIDTH":4,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
              "LOG_BLOCK":2"#,
        ),
        "int16",
    )
    .unwrap();
    let mut r = Rig::new(cfg);
    let min: Vec<u8> = [[0x00, 0x80]; 16].concat();
    r.put(0x1000, &min[..8]);
    r.put(0x2000, &min);
    r.put(0x3000, &i32s(&[5; 4]));
    r.put_uops(0x4000, &[(0, 0, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 1, 1)),
        with(
            Insn::Load(mem(MemType::Wgt, 0, r.ea(MemType::Wgt, 0x2000), 1, 1, 1)),
            "push_next",
        ),
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 1, 1)),
        r.load_uops(0x4000, 1),
        with(gemm(lp(false, (0, 1), (1, 1))), "pop_prev"),
        finish(),
    ]);
    assert_eq!(r.sim.acc_row(0), &[5; 4]);
}

#[test]
fn gemm_wraps_at_32_bits_and_uops_are_sequential() {
    let mut r = Rig::new(small());
    // INP row: four 127s; WGT tile: all 127 -> each uop adds 4 * 127 * 127 = 64516.
    r.put(0x1000, &[127; 4]);
    r.put(0x2000, &[127; 16]);
    r.put(0x3000, &i32s(&[i32::MAX - 64515, 0, -5, 1]));
    // The same dst twice in a row: the second sees the first's result.
    r.put_uops(0x4000, &[(0, 0, 0), (0, 0, 0)]);
    let c = r.run(&[
        Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 1, 1)),
        with(
            Insn::Load(mem(MemType::Wgt, 0, r.ea(MemType::Wgt, 0x2000), 1, 1, 1)),
            "push_next",
        ),
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 1, 1)),
        r.load_uops(0x4000, 2),
        with(gemm(lp(false, (0, 2), (1, 1))), "pop_prev"),
        finish(),
    ]);
    let row = r.sim.acc_row(0);
    assert_eq!(row[0], i32::MIN + 64516, "wraps modulo 2^32");
    assert_eq!(row[1..], [2 * 64516, 2 * 64516 - 5, 2 * 64516 + 1]);
    assert_eq!(c.gemm_uops, 2);
}

#[test]
fn gemm_reset_zeroes_and_counts_separately() {
    let mut r = Rig::new(small());
    r.put(0x3000, &i32s(&[9; 12]));
    // src and wgt reach past INP (512) and WGT (256) in the second iteration: a reset reads
    // neither, so they are not checked.
    r.put_uops(0x4000, &[(0, 511, 255), (2, 511, 255)]);
    let mut l = lp(true, (0, 2), (1, 2));
    l.src_factor_in = 1;
    let c = r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 3, 3)),
        r.load_uops(0x4000, 2),
        Insn::Gemm(GemmInsn {
            deps: DepFlags::NONE,
            lp: l,
            wgt_factor_out: 0,
            wgt_factor_in: 1,
        }),
        finish(),
    ]);
    assert_eq!(r.sim.acc_row(0), &[0; 4]);
    assert_eq!(r.sim.acc_row(1), &[9; 4]);
    assert_eq!(r.sim.acc_row(2), &[0; 4]);
    assert_eq!((c.gemm_uops, c.reset_uops, c.macs), (0, 4, 0));
}

#[test]
fn gemm_index_past_depth_is_an_error_not_a_wrap() {
    let mut r = Rig::new(small()); // ACC depth 512
    assert_eq!(r.cfg.depth(MemType::Acc), 512);
    r.put_uops(0x4000, &[(0, 0, 0), (500, 0, 0)]);
    let mut l = lp(false, (0, 2), (2, 3));
    (l.dst_factor_out, l.dst_factor_in) = (6, 3);
    // u=1: o=0 -> 500, 503, 506; o=1 -> 506, 509, 512: first out of range at (1, 2).
    let e = r
        .try_run(&[r.load_uops(0x4000, 2), gemm(l), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "instruction 1 (GEMM): micro-op 1 at iteration (iter_out 1, iter_in 2): \
                       dst index 512 is past the ACC buffer's 512 rows"
        ),
        "{e}"
    );
    // src past the INP depth, wgt past the WGT depth.
    r.put_uops(0x4000, &[(0, 511, 0)]);
    let mut l = lp(false, (0, 1), (1, 2));
    l.src_factor_in = 1;
    let e = r
        .try_run(&[r.load_uops(0x4000, 1), gemm(l), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("src index 512 is past the INP buffer's 512 rows"),
        "{e}"
    );
    let g = Insn::Gemm(GemmInsn {
        deps: DepFlags::NONE,
        lp: lp(false, (0, 1), (3, 1)),
        wgt_factor_out: 200,
        wgt_factor_in: 0,
    });
    let e = r
        .try_run(&[r.load_uops(0x4000, 1), g, finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "iteration (iter_out 2, iter_in 0): wgt index 400 is past the WGT buffer's \
                    256 rows"
        ),
        "{e}"
    );
}

// ----------------------------------------------------------------------------------------- ALU

/// Runs one ALU instruction over ACC rows 0 (dst) and 1 (src) loaded with `dst` and `src`
/// and returns row 0.
fn alu_case(cfg: &HwConfig, op: AluOp, imm: Option<i16>, dst: [i32; 4], src: [i32; 4]) -> Vec<i32> {
    let mut r = Rig::new(cfg.clone());
    let bytes: Vec<u8> = if cfg.acc_width() == 16 {
        dst.iter()
            .chain(&src)
            .flat_map(|&v| (v as i16).to_le_bytes())
            .collect()
    } else {
        i32s(&[dst, src].concat())
    };
    r.put(0x3000, &bytes);
    r.put_uops(0x4000, &[(0, 1, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 2, 2)),
        r.load_uops(0x4000, 1),
        alu(op, imm, lp(false, (0, 1), (1, 1))),
        finish(),
    ]);
    r.sim.acc_row(0).to_vec()
}

#[test]
fn alu_min_max_add_mul() {
    let c = small();
    let d = [5, -7, i32::MAX, i32::MIN];
    let s = [-3, 2, 1, -1];
    assert_eq!(alu_case(&c, AluOp::Min, None, d, s), [-3, -7, 1, i32::MIN]);
    assert_eq!(alu_case(&c, AluOp::Max, None, d, s), [5, 2, i32::MAX, -1]);
    assert_eq!(
        alu_case(&c, AluOp::Add, None, d, s),
        [2, -5, i32::MIN, i32::MAX],
        "ADD wraps"
    );
    assert_eq!(
        alu_case(&c, AluOp::Mul, None, d, [3, -2, 2, 1]),
        [15, 14, -2, i32::MIN],
        "MUL keeps the low 32 bits"
    );
    assert_eq!(
        alu_case(&c, AluOp::Min, Some(-6), d, s),
        [-6, -7, -6, i32::MIN]
    );
    assert_eq!(
        alu_case(&c, AluOp::Max, Some(-6), d, s),
        [5, -6, i32::MAX, -6]
    );
    assert_eq!(
        alu_case(&c, AluOp::Add, Some(-1), d, s),
        [4, -8, i32::MAX - 1, i32::MAX]
    );
    assert_eq!(
        alu_case(&c, AluOp::Mul, Some(-32768), [1, -1, 2, 0], s),
        [-32768, 32768, -65536, 0]
    );
}

#[test]
fn alu_shr_positive_negative_and_amount_bits() {
    let c = small();
    let d = [-256, 256, 0x4000_0001, -1];
    // Tensor amounts: the low 6 bits, signed: 64+3 -> 3, 63 -> -1, 32 -> -32, 31 -> 31.
    assert_eq!(
        alu_case(&c, AluOp::Shr, None, d, [67, 63, 32, 31]),
        [-32, 512, 0, -1]
    );
    assert_eq!(
        alu_case(&c, AluOp::Shr, None, d, [-31, -24, -1, 0]),
        [0, 0, -0x7fff_fffe, -1],
        "left shifts wrap"
    );
    assert_eq!(
        alu_case(&c, AluOp::Shr, Some(4), d, d),
        [-16, 16, 0x0400_0000, -1]
    );
    assert_eq!(
        alu_case(&c, AluOp::Shr, Some(-2), d, d),
        [-1024, 1024, 4, -4]
    );
    // Immediate 0x43 = 67 -> 3.
    assert_eq!(
        alu_case(&c, AluOp::Shr, Some(67), d, d),
        [-32, 32, 0x0800_0000, -1]
    );
}

#[test]
fn alu_src_equal_to_dst_and_loops() {
    let mut r = Rig::new(small());
    r.put(0x3000, &i32s(&(0..16).collect::<Vec<_>>()));
    r.put_uops(0x4000, &[(0, 0, 0)]);
    // Loop over rows 0..4 adding each row to itself: x2.
    let mut l = lp(false, (0, 1), (2, 2));
    (
        l.dst_factor_out,
        l.dst_factor_in,
        l.src_factor_out,
        l.src_factor_in,
    ) = (2, 1, 2, 1);
    let c = r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 4, 4)),
        r.load_uops(0x4000, 1),
        alu(AluOp::Add, None, l),
        finish(),
    ]);
    for i in 0..4u32 {
        let want: Vec<i32> = (0..4).map(|k| 2 * (4 * i as i32 + k)).collect();
        assert_eq!(r.sim.acc_row(i), &want[..]);
    }
    assert_eq!(c.alu_uops, 4);
}

#[test]
fn alu_reset_writes_zeros() {
    let mut r = Rig::new(small());
    r.put(0x3000, &i32s(&[3; 8]));
    r.put_uops(0x4000, &[(1, 500, 0)]); // src out of range: a reset reads nothing
    let c = r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 2, 2)),
        r.load_uops(0x4000, 1),
        alu(AluOp::Add, None, lp(true, (0, 1), (1, 1))),
        finish(),
    ]);
    assert_eq!(r.sim.acc_row(0), &[3; 4]);
    assert_eq!(r.sim.acc_row(1), &[0; 4]);
    assert_eq!((c.alu_uops, c.reset_uops), (0, 1));
}

#[test]
fn alu_src_past_depth_is_an_error_but_not_with_an_immediate() {
    let mut r = Rig::new(small());
    r.put_uops(0x4000, &[(0, 511, 0)]);
    let mut l = lp(false, (0, 1), (1, 2));
    l.src_factor_in = 1;
    let e = r
        .try_run(&[r.load_uops(0x4000, 1), alu(AluOp::Max, None, l), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "(ALU max): micro-op 0 at iteration (iter_out 0, iter_in 1): src index 512 \
                    is past the ACC buffer's 512 rows"
        ),
        "{e}"
    );
    r.run(&[
        r.load_uops(0x4000, 1),
        alu(AluOp::Max, Some(1), l),
        finish(),
    ]);
}

// ----------------------------------------------------------------- ALU activation table (8.3)

/// The small preset (1x4x4, 4 lanes per ACC row) with the activation table.
fn small_lut() -> HwConfig {
    HwConfig {
        alu_lut: true,
        ..small()
    }
}

/// Loads `table` (256 bytes at 0x5000) as 64 ACC8 rows from row 100 and writes it into the
/// activation table with one LUTW (micro-op 0: dst 0, src 100; 64 x 4 iterations).
fn write_table(r: &mut Rig, table: &[i8; 256]) -> Vec<Insn> {
    let bytes: Vec<u8> = table.iter().map(|&v| v as u8).collect();
    r.put(0x5000, &bytes);
    r.put_uops(0x4000, &[(0, 100, 0)]);
    let mut l = lp(false, (0, 1), (64, 4));
    (l.dst_factor_out, l.dst_factor_in, l.src_factor_out) = (4, 1, 1);
    vec![
        Insn::Load(mem(
            MemType::Acc8,
            100,
            r.ea(MemType::Acc8, 0x5000),
            1,
            64,
            64,
        )),
        r.load_uops(0x4000, 1),
        alu(AluOp::LutWrite, None, l),
    ]
}

/// A table that is no simple function of the index: entry e = (e * 37 + 11) mod 256.
fn scrambled_table() -> [i8; 256] {
    std::array::from_fn(|e| ((e * 37 + 11) % 256) as u8 as i8)
}

#[test]
fn lutw_writes_the_table_from_acc8_rows_and_lut_looks_up_saturated_values() {
    let mut r = Rig::new(small_lut());
    let t = scrambled_table();
    let mut insns = write_table(&mut r, &t);
    // Row 0 (dst) is overwritten from row 1 (src): values inside, at and beyond int8.
    let src = [-129, 127, 300, -1];
    r.put(0x3000, &i32s(&[[7, 7, 7, 7], src].concat()));
    r.put_uops(0x4100, &[(0, 1, 0)]);
    insns.extend([
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 2, 2)),
        Insn::Load(mem(MemType::Uop, 1, r.ea(MemType::Uop, 0x4100), 1, 1, 1)),
        alu(AluOp::Lut, None, lp(false, (1, 2), (1, 1))),
        finish(),
    ]);
    let c = r.run(&insns);
    assert_eq!(r.sim.table(), &t);
    let entry = |v: i8| i32::from(t[usize::from(v as u8)]);
    assert_eq!(
        r.sim.acc_row(0),
        &[entry(-128), entry(127), entry(127), entry(-1)]
    );
    assert_eq!(r.sim.acc_row(1), &src, "the operand row is not written");
    assert_eq!(c.alu_uops, 256 + 1);
}

#[test]
fn lut_with_an_immediate_and_lutw_of_one_entry_with_an_immediate() {
    let mut r = Rig::new(small_lut());
    r.put_uops(0x4000, &[(3, 0, 0), (0xfe, 0, 0)]);
    r.run(&[
        r.load_uops(0x4000, 2),
        // TABLE[0xfe] = low 8 bits of 0x1_85 = -123; row 3 = TABLE[index(-2)] = TABLE[0xfe].
        alu(AluOp::LutWrite, Some(0x185), lp(false, (1, 2), (1, 1))),
        alu(AluOp::Lut, Some(-2), lp(false, (0, 1), (1, 1))),
        finish(),
    ]);
    assert_eq!(r.sim.table()[0xfe], -123);
    assert_eq!(r.sim.acc_row(3), &[-123; 4]);
}

#[test]
fn lutw_dst_is_a_table_entry_checked_against_256_not_acc() {
    let mut r = Rig::new(small_lut());
    // Entries 200..=255 exist; entry 256 does not, although ACC has 512 rows.
    r.put_uops(0x4000, &[(200, 0, 0)]);
    let mut l = lp(false, (0, 1), (1, 57));
    l.dst_factor_in = 1;
    let e = r
        .try_run(&[
            r.load_uops(0x4000, 1),
            alu(AluOp::LutWrite, Some(1), l),
            finish(),
        ])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dst index 256 is past the TABLE buffer's 256 rows"),
        "{e}"
    );
    // With reset_reg it is an ordinary ALU reset of ACC rows.
    l.reset_reg = true;
    let c = r.run(&[
        r.load_uops(0x4000, 1),
        alu(AluOp::LutWrite, Some(1), l),
        finish(),
    ]);
    assert_eq!((c.reset_uops, c.alu_uops), (57, 0));
    assert_eq!(r.sim.table(), &[0; 256], "a reset leaves the table alone");
}

#[test]
fn table_ops_are_decode_errors_without_alu_lut() {
    let mut r = Rig::new(small());
    r.put_uops(0x4000, &[(0, 0, 0)]);
    for op in [AluOp::Lut, AluOp::LutWrite] {
        let insns = [alu(op, Some(1), lp(false, (0, 1), (1, 1))), finish()];
        let e = r.sim.run_insns(&mut r.dram, &insns, &Limits::default());
        let e = e.unwrap_err().to_string();
        assert!(e.contains("ALU_LUT is false"), "{e}");
    }
}

#[test]
fn the_table_persists_across_runs_and_clear_zeroes_it() {
    let mut r = Rig::new(small_lut());
    let t = scrambled_table();
    let mut insns = write_table(&mut r, &t);
    insns.push(finish());
    r.run(&insns);
    r.put(0x3000, &i32s(&[5, -5, 0, 127]));
    r.put_uops(0x4000, &[(0, 0, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 1, 1)),
        r.load_uops(0x4000, 1),
        alu(AluOp::Lut, None, lp(false, (0, 1), (1, 1))),
        finish(),
    ]);
    let entry = |v: i8| i32::from(t[usize::from(v as u8)]);
    assert_eq!(
        r.sim.acc_row(0),
        &[entry(5), entry(-5), entry(0), entry(127)]
    );
    r.sim.clear();
    assert_eq!(r.sim.table(), &[0; 256]);
}

#[test]
fn a_table_write_races_with_no_store_but_a_lookup_into_a_stored_row_does() {
    // compute: ADD into row 0, hand it to store, then a table op on dst 0 without waiting for
    // the store's token. LUTW's dst 0 is a table entry (compute-only state): no race; LUT
    // writes ACC row 0 while the STORE may still read it: a race.
    let mut r = Rig::new(small_lut());
    r.sim.set_race_check(true);
    r.put_uops(0, &[(0, 0, 0)]);
    let out = r.ea(MemType::Out, 4096);
    let uops = r.load_uops(0, 1);
    let prog = |op| {
        vec![
            uops,
            with(
                alu(AluOp::Add, Some(1), lp(false, (0, 1), (1, 1))),
                "push_next",
            ),
            with(
                Insn::Store(mem(MemType::Out, 0, out, 1, 1, 1)),
                "pop_prev push_prev",
            ),
            alu(op, Some(3), lp(false, (0, 1), (1, 1))),
            with(finish(), "pop_next"),
        ]
    };
    r.run(&prog(AluOp::LutWrite));
    let e = r.try_run(&prog(AluOp::Lut)).unwrap_err();
    assert!(
        matches!(e, FsimError::Race { .. }) && e.to_string().contains("race on ACC/OUT row 0"),
        "{e}"
    );
}

#[test]
fn acc16_wraps_everything_at_16_bits() {
    let c = acc16();
    assert_eq!(
        alu_case(&c, AluOp::Add, None, [32767, -32768, 100, 0], [1, -1, 5, 0]),
        [-32768, 32767, 105, 0]
    );
    assert_eq!(
        alu_case(&c, AluOp::Mul, Some(300), [300, -2, 0, 1], [0; 4]),
        [90000i32 as i16 as i32, -600, 0, 300]
    );
    // Amount = low 5 bits, signed: 16 -> -16 (left by 16 -> 0), 15 -> 15, 17 -> -15.
    assert_eq!(
        alu_case(
            &c,
            AluOp::Shr,
            None,
            [-32768, -32768, 1, 3],
            [16, 15, 17, 33]
        ),
        [0, -1, -32768, 1]
    );
    // GEMM: 4 * 127 * 127 = 64516 -> wraps to 64516 - 65536 = -1020.
    let mut r = Rig::new(c);
    r.put(0x1000, &[127; 4]);
    r.put(0x2000, &[127; 16]);
    r.put_uops(0x4000, &[(0, 0, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 1, 1)),
        with(
            Insn::Load(mem(MemType::Wgt, 0, r.ea(MemType::Wgt, 0x2000), 1, 1, 1)),
            "push_next",
        ),
        r.load_uops(0x4000, 1),
        with(gemm(lp(false, (0, 1), (1, 1))), "pop_prev"),
        finish(),
    ]);
    assert_eq!(r.sim.acc_row(0), &[-1020; 4]);
}

// --------------------------------------------------------------------------------------- STORE

#[test]
fn store_writes_low_bits_of_acc_with_stride() {
    let mut r = Rig::new(small()); // OUT element 4 int8
    let vals: Vec<i32> = (0..12).map(|i| i * 100 - 600).collect();
    r.put(0x3000, &i32s(&vals));
    r.put(0x5000, &[0xee; 32]);
    // LOAD ACC then STORE with no ALU: OUT mirrors ACC (VTA's HLS would store stale OUT).
    let c = r.run(&[
        with(
            Insn::Load(mem(MemType::Acc, 4, r.ea(MemType::Acc, 0x3000), 1, 3, 3)),
            "push_next",
        ),
        with(
            Insn::Store(mem(MemType::Out, 4, r.ea(MemType::Out, 0x5000), 3, 1, 2)),
            "pop_prev push_prev",
        ),
        with(finish(), "pop_next"),
    ]);
    let out = r.get(0x5000, 24);
    for row in 0..3 {
        let want: Vec<u8> = vals[row * 4..row * 4 + 4]
            .iter()
            .map(|&v| v as u8)
            .collect();
        assert_eq!(&out[row * 8..row * 8 + 4], &want[..], "row {row}");
        assert_eq!(
            &out[row * 8 + 4..row * 8 + 8],
            &[0xee; 4],
            "stride gap untouched"
        );
    }
    assert_eq!(c.out_store_bytes, 12);
    assert_eq!(c.store_insns, 1);
    assert_eq!(
        r.sim.out_row(4),
        vals[..4]
            .iter()
            .map(|&v| (v as i8).into())
            .collect::<Vec<i32>>()
    );
}

#[test]
fn store_past_out_depth_or_dram_is_an_error() {
    let mut r = Rig::new(small());
    let go = with(Insn::Load(mem(MemType::Uop, 0, 0, 0, 0, 0)), "push_next");
    let st = mem(MemType::Out, 500, r.ea(MemType::Out, 0x5000), 4, 4, 4);
    let prog = |st| {
        [
            go,
            with(Insn::Store(st), "pop_prev push_prev"),
            with(finish(), "pop_next"),
        ]
    };
    let e = r.try_run(&prog(st)).unwrap_err().to_string();
    assert_eq!(
        e,
        "instruction 1 (STORE out): would read OUT rows 500..516, past the OUT buffer's 512 rows"
    );
    let st = mem(MemType::Out, 0, 4, 1, 1, 1); // byte address 16: below the DRAM base
    let e = r.try_run(&prog(st)).unwrap_err().to_string();
    assert!(
        e.contains("DRAM write of 4 bytes at 0x10 is outside memory"),
        "{e}"
    );
}

#[test]
fn int4_packs_nibbles_low_first() {
    let cfg = int4(); // 2x4x4, int4: INP element 4 B, WGT 8 B, OUT 4 B
    let mut r = Rig::new(cfg.clone());
    // INP row: batch 0 = [1, -1, 7, -8], batch 1 = [2, 0, 0, 0].
    r.put(0x1000, &[0xf1, 0x87, 0x02, 0x00]);
    // WGT tile: identity-ish: row n has 1 at column n.
    let mut tile = [0u8; 8];
    for n in 0..4 {
        let lane = n * 4 + n;
        tile[lane / 2] |= 1 << (4 * (lane % 2));
    }
    r.put(0x2000, &tile);
    r.put_uops(0x4000, &[(0, 0, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 1, 1)),
        with(
            Insn::Load(mem(MemType::Wgt, 0, r.ea(MemType::Wgt, 0x2000), 1, 1, 1)),
            "push_next",
        ),
        r.load_uops(0x4000, 1),
        with(gemm(lp(true, (0, 1), (1, 1))), "pop_prev"),
        with(gemm(lp(false, (0, 1), (1, 1))), "push_next"),
        with(
            Insn::Store(mem(MemType::Out, 0, r.ea(MemType::Out, 0x5000), 1, 1, 1)),
            "pop_prev push_prev",
        ),
        with(finish(), "pop_next"),
    ]);
    assert_eq!(r.sim.inp_row(0), &[1, -1, 7, -8, 2, 0, 0, 0]);
    assert_eq!(r.sim.acc_row(0), &[1, -1, 7, -8, 2, 0, 0, 0]);
    assert_eq!(r.get(0x5000, 4), [0xf1, 0x87, 0x02, 0x00]);
}

// -------------------------------------------------------------------------------------- TOKENS

/// The classic pipeline: load INP/WGT -> compute GEMM -> store, with WAR tokens back.
fn pipeline(r: &Rig, rounds: u16) -> Vec<Insn> {
    let mut v = vec![r.load_uops(0x4000, 1)];
    for k in 0..rounds {
        let inp = Insn::Load(mem(MemType::Inp, 0, r.ea(MemType::Inp, 0x1000), 1, 1, 1));
        v.push(with(
            inp,
            if k == 0 {
                "push_next"
            } else {
                "pop_next push_next"
            },
        ));
        let g = gemm(lp(false, (0, 1), (1, 1)));
        v.push(with(
            g,
            if k == 0 {
                "pop_prev push_prev push_next"
            } else {
                "pop_prev pop_next push_prev push_next"
            },
        ));
        let st = Insn::Store(mem(
            MemType::Out,
            0,
            r.ea(MemType::Out, 0x5000) + u32::from(k),
            1,
            1,
            1,
        ));
        v.push(with(st, "pop_prev push_prev"));
    }
    // Drain: load's last g2l token and the store's last s2g token.
    v.push(with(
        Insn::Load(mem(MemType::Inp, 0, 0, 0, 0, 0)),
        "pop_next",
    ));
    v.push(with(finish(), "pop_next"));
    v
}

#[test]
fn token_pipeline_runs_and_counts_per_module() {
    let mut r = Rig::new(small());
    r.put(0x1000, &[1; 4]);
    r.put_uops(0x4000, &[(0, 0, 0)]);
    let insns = pipeline(&r, 5);
    let c = r.run(&insns);
    assert_eq!((c.load_insns, c.compute_insns, c.store_insns), (6, 7, 5));
    assert_eq!(c.insns(), insns.len() as u64);
    assert_eq!(c.gemm_uops, 5);
}

#[test]
fn deadlock_lists_every_module_and_queue() {
    let mut r = Rig::new(small());
    r.put_uops(0x4000, &[(0, 0, 0)]);
    // Compute waits for a load token that never comes; store waits for compute.
    let insns = [
        r.load_uops(0x4000, 1),
        with(gemm(lp(false, (0, 1), (1, 1))), "pop_prev push_next"),
        with(
            Insn::Store(mem(MemType::Out, 0, 0, 0, 0, 0)),
            "pop_prev push_prev",
        ),
        with(finish(), "pop_next"),
    ];
    let t = std::time::Instant::now();
    let e = r.try_run(&insns).unwrap_err();
    assert!(t.elapsed().as_secs_f64() < 1.0);
    let FsimError::Deadlock(d) = &e else {
        panic!("{e}")
    };
    assert!(matches!(d.modules[0].1, Blocked::Done { executed: 0 }));
    assert_eq!(
        e.to_string(),
        "deadlock: no module can make progress and FINISH has not retired\n  \
         load:    has no instructions\n  \
         compute: waits before instruction 1 (GEMM) to pop l2g: empty\n  \
         store:   waits before instruction 2 (STORE out) to pop g2s: empty\n  \
         tokens:  l2g=0 g2l=0 g2s=0 s2g=0 (capacity 16 each)"
    );
}

#[test]
fn deadlock_on_a_full_queue() {
    let cfg = HwConfig::from_json_str(
        &json(
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
              "LOG_BLOCK":2,"TOKEN_QUEUE_DEPTH":1"#,
        ),
        "tiny queues",
    )
    .unwrap();
    let mut r = Rig::new(cfg);
    let sync = Insn::Load(mem(MemType::Inp, 0, 0, 0, 0, 0));
    let insns = [
        with(sync, "push_next"),
        with(sync, "push_next"),
        with(sync, ""),
        with(finish(), "pop_next"),
    ];
    let e = r.try_run(&insns).unwrap_err().to_string();
    assert!(
        e.contains("load:    waits after instruction 1 (LOAD inp) to push l2g: full (1 tokens)"),
        "{e}"
    );
    assert!(
        e.contains("compute: waits before instruction 3 (FINISH) to pop s2g: empty"),
        "{e}"
    );
    assert!(e.contains("store:   has no instructions"), "{e}");
    assert!(
        e.contains("l2g=1 g2l=0 g2s=0 s2g=0 (capacity 1 each)"),
        "{e}"
    );
}

#[test]
fn load_runs_ahead_up_to_the_queue_capacity() {
    // 16 loads each pushing l2g before compute pops any: fits the 16-token queue of `small`.
    let mut r = Rig::new(small());
    let sync = Insn::Load(mem(MemType::Inp, 0, 0, 0, 0, 0));
    let cs = Insn::Load(mem(MemType::Uop, 0, 0, 0, 0, 0));
    let mut insns = vec![with(sync, "push_next"); 16];
    insns.extend(vec![with(cs, "pop_prev"); 16]);
    insns.push(finish());
    r.run(&insns);
    // A 17th load blocks on its push until compute pops one.
    insns.insert(0, with(sync, "push_next"));
    insns.insert(17, with(cs, "pop_prev"));
    r.run(&insns);
}

#[test]
fn illegal_flags_are_named() {
    let mut r = Rig::new(small());
    let ld = Insn::Load(mem(MemType::Wgt, 0, 0, 0, 0, 0));
    let e = r
        .try_run(&[finish(), with(ld, "pop_prev")])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "instruction 1 (LOAD wgt) runs on the load module, where pop_prev is illegal (it names no \
         queue); clear it"
    );
    let st = Insn::Store(mem(MemType::Out, 0, 0, 0, 0, 0));
    let e = r
        .try_run(&[with(st, "push_next"), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("instruction 0 (STORE out) runs on the store module, where push_next"),
        "{e}"
    );
    // LOAD UOP/ACC run on compute, where every flag is legal.
    let cl = Insn::Load(mem(MemType::Acc, 0, 0, 0, 0, 0));
    let e = r
        .try_run(&[with(cl, "pop_prev"), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("compute: waits before instruction 0 (LOAD acc) to pop l2g"),
        "{e}"
    );
}

#[test]
fn finish_checks_leftover_tokens_and_instructions() {
    let mut r = Rig::new(small());
    let st = Insn::Store(mem(MemType::Out, 0, 0, 0, 0, 0));
    let g = gemm(lp(false, (0, 0), (0, 0)));
    let e = r
        .try_run(&[
            with(g, "push_next"),
            with(st, "pop_prev push_prev"),
            finish(),
        ])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "FINISH (instruction 2) retired, but the store module has 1 instruction(s) \
                       not executed (first: instruction 1, STORE out)"
        ) && e.contains("; token queue g2s still holds 1 token(s)"),
        "{e}"
    );
    let cs = Insn::Load(mem(MemType::Uop, 0, 0, 0, 0, 0));
    let e = r
        .try_run(&[
            with(g, "push_next"),
            with(st, "pop_prev push_prev"),
            with(st, "push_prev"),
            with(cs, "pop_next"),
            finish(),
        ])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "FINISH (instruction 4) retired, but token queue s2g still holds 1 token(s): FINISH \
         should pop the store's token: set pop_next on FINISH"
    );
    let ld = Insn::Load(mem(MemType::Inp, 0, 0, 0, 0, 0));
    let e = r
        .try_run(&[with(ld, "pop_next"), finish()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "FINISH (instruction 1) retired, but the load module has 1 instruction(s) not executed \
         (first: instruction 0, LOAD inp); make FINISH wait for them through tokens"
    );
    let e = r.try_run(&[finish(), g]).unwrap_err().to_string();
    assert!(
        e.contains("compute module has 1 instruction(s) after it"),
        "{e}"
    );
    let e = r
        .try_run(&[with(finish(), "push_next")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("instruction 0 (FINISH) sets push_next"), "{e}");
    let e = r.try_run(&[g]).unwrap_err().to_string();
    assert!(
        e.starts_with("the stream of 1 instructions has no FINISH"),
        "{e}"
    );
}

#[test]
fn store_left_running_at_finish_is_reported() {
    let mut r = Rig::new(small());
    let st = Insn::Store(mem(MemType::Out, 0, 0, 0, 0, 0));
    // Store never gets its g2s token; FINISH does not wait for it.
    let e = r
        .try_run(&[with(st, "pop_prev"), finish()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the store module has 1 instruction(s) not executed"),
        "{e}"
    );
}

// --------------------------------------------------------------------------- run-level checks

#[test]
fn step_limit_names_the_limit() {
    let mut r = Rig::new(small());
    r.put_uops(0x4000, &[(0, 0, 0)]);
    let insns = [
        r.load_uops(0x4000, 1),
        gemm(lp(false, (0, 1), (100, 100))),
        finish(),
    ];
    let e = r
        .try_run_limited(&insns, &Limits::steps(5000))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "step limit of 5000 exceeded at instruction 1 (GEMM), which needs 10001 steps after 1 \
         done; raise the step limit (`vta sim --max-steps`, `Limits::max_steps`) if the program is meant to run this long"
    );
    r.try_run_limited(&insns, &Limits::steps(10003)).unwrap();
}

#[test]
fn decode_and_fetch_errors_name_the_instruction() {
    let cfg = small();
    let codec = Codec::new(&cfg);
    let mut dram = Dram::new(BASE, 4096);
    let mut stream = codec.encode_stream(&[finish(), finish()]).unwrap();
    stream[16] = 7; // opcode 7
    dram.write(BASE, &stream).unwrap();
    let mut sim = Fsim::new(&cfg);
    let e = sim.run(&mut dram, BASE, 2, &Limits::default()).unwrap_err();
    assert!(matches!(e, FsimError::Decode(_)));
    assert!(
        e.to_string()
            .starts_with("instruction 1 (byte offset 16): unknown opcode 7"),
        "{e}"
    );
    let e = sim
        .run(&mut dram, BASE + 4000, 10, &Limits::default())
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot fetch 10 instructions at 0x10000fa0"),
        "{e}"
    );
    // MUL encoded for a config that has it, run on one that does not.
    let nomul = HwConfig::from_json_str(
        &json(
            r#""LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
              "LOG_BLOCK":2,"ALU_MUL":false"#,
        ),
        "nomul",
    )
    .unwrap();
    let with_mul = HwConfig {
        alu_mul: true,
        ..nomul.clone()
    };
    let s = Codec::new(&with_mul)
        .encode_stream(&[
            alu(AluOp::Mul, Some(2), lp(false, (0, 0), (1, 1))),
            finish(),
        ])
        .unwrap();
    dram.write(BASE, &s).unwrap();
    let e = Fsim::new(&nomul)
        .run(&mut dram, BASE, 2, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("instruction 0") && e.contains("ALU_MUL is false"),
        "{e}"
    );
}

#[test]
fn scratchpads_persist_across_runs_and_tokens_do_not() {
    let mut r = Rig::new(small());
    r.put(0x3000, &i32s(&[1, 2, 3, 4]));
    r.put_uops(0x4000, &[(0, 0, 0)]);
    r.run(&[
        Insn::Load(mem(MemType::Acc, 0, r.ea(MemType::Acc, 0x3000), 1, 1, 1)),
        r.load_uops(0x4000, 1),
        finish(),
    ]);
    // Second run: uses the micro-op and ACC row left by the first.
    let c = r.run(&[
        alu(AluOp::Add, Some(10), lp(false, (0, 1), (1, 1))),
        finish(),
    ]);
    assert_eq!(r.sim.acc_row(0), &[11, 12, 13, 14]);
    assert_eq!(c.alu_uops, 1);
    assert_eq!(c.acc_load_bytes, 0, "counters restart each run");
    // A failed run leaves a token behind; the next run starts with empty queues.
    let sync = Insn::Load(mem(MemType::Inp, 0, 0, 0, 0, 0));
    assert!(r.try_run(&[with(sync, "push_next"), finish()]).is_err());
    r.run(&[finish()]);
    r.sim.clear();
    assert_eq!(r.sim.acc_row(0), &[0; 4]);
}

#[test]
fn empty_loops_do_nothing() {
    let mut r = Rig::new(small());
    let c = r.run(&[
        gemm(lp(false, (3, 1), (5, 5))),
        gemm(lp(false, (0, 4), (0, 5))),
        alu(AluOp::Add, None, lp(false, (0, 4), (5, 0))),
        finish(),
    ]);
    assert_eq!(c.gemm_uops + c.alu_uops, 0);
}

#[test]
fn counters_display_and_iter_agree() {
    let c = Counters {
        macs: 7,
        load_insns: 2,
        ..Counters::default()
    };
    let text = c.to_string();
    assert_eq!(text.lines().count(), c.iter().count());
    assert!(text.contains("macs             7"), "{text}");
    assert_eq!(c.get("load_insns"), Some(2));
    assert_eq!(c.get("nope"), None);
}

#[test]
fn queue_names() {
    assert_eq!(
        Queue::ALL.map(|q| q.to_string()),
        ["l2g", "g2l", "g2s", "s2g"]
    );
}

#[test]
fn bench_programs_run_on_small_configs() {
    for cfg in [small(), acc16(), int4(), HwConfig::preset("rect").unwrap()] {
        let g = crate::bench::gemm_program(&cfg, 2);
        let m = crate::bench::measure(&cfg, &g, 1).unwrap();
        let k = u64::from(cfg.depth(MemType::Uop).min(8192));
        assert_eq!(m.counters.gemm_uops, 2 * k, "{cfg}");
        let a = crate::bench::alu_program(&cfg, 3);
        let m = crate::bench::measure(&cfg, &a, 1).unwrap();
        assert_eq!(m.counters.alu_uops, 3 * k, "{cfg}");
    }
}

#[test]
fn fetch_is_chunked_and_indices_stay_global() {
    let cfg = small();
    let codec = Codec::new(&cfg);
    let mut dram = Dram::new(BASE, 1 << 20);
    let mut stream = codec.encode_stream(&vec![finish(); 5000]).unwrap();
    stream[4321 * 16] = 6; // opcode 6, in the second 4096-instruction chunk
    dram.write(BASE, &stream).unwrap();
    let mut sim = Fsim::new(&cfg);
    let e = sim
        .run(&mut dram, BASE, 5000, &Limits::default())
        .unwrap_err();
    assert!(e.to_string().starts_with("instruction 4321 "), "{e}");
    // A bogus count faults at the end of memory rather than allocating 64 GiB.
    let e = sim
        .run(&mut dram, BASE + 5000 * 16, u32::MAX, &Limits::default())
        .unwrap_err();
    assert!(matches!(e, FsimError::Fetch { .. }), "{e}");
}

// ---------------------------------------------------------------------------------- races

/// A rig whose runs check for races; micro-op (0, 0, 0) loaded at offset 0.
fn race_rig() -> Rig {
    let mut r = Rig::new(HwConfig::default());
    r.sim.set_race_check(true);
    r.put_uops(0, &[(0, 0, 0)]);
    r
}

fn race_of(r: &mut Rig, insns: &[Insn]) -> Option<String> {
    match r.try_run(insns) {
        Ok(_) => None,
        Err(e @ FsimError::Race { .. }) => Some(e.to_string()),
        Err(e) => panic!("not a race: {e}"),
    }
}

#[test]
fn a_gemm_reading_an_unsynchronized_load_is_a_race() {
    let mut r = race_rig();
    let inp = r.ea(MemType::Inp, 4096);
    let wgt = r.ea(MemType::Wgt, 8192);
    let uops = r.load_uops(0, 1);
    let prog = |sync: bool| {
        let flags = |f: &'static str| if sync { f } else { "" };
        vec![
            uops,
            with(Insn::Load(mem(MemType::Inp, 0, inp, 1, 1, 1)), ""),
            with(
                Insn::Load(mem(MemType::Wgt, 0, wgt, 1, 1, 1)),
                flags("push_next"),
            ),
            with(gemm(lp(false, (0, 1), (1, 1))), flags("pop_prev")),
            finish(),
        ]
    };
    let e = race_of(&mut r, &prog(false)).expect("the race is found");
    assert!(
        e.contains("race on INP row 0")
            && e.contains("load module")
            && e.contains("compute module"),
        "{e}"
    );
    assert_eq!(race_of(&mut r, &prog(true)), None);
}

#[test]
fn reloading_a_buffer_a_gemm_still_reads_is_a_race() {
    // Load INP, signal compute, load INP again at once: the second load may overwrite the row
    // before the GEMM reads it, unless it waits for compute's "buffer free" token.
    let mut r = race_rig();
    let inp = r.ea(MemType::Inp, 4096);
    let uops = r.load_uops(0, 1);
    let prog = |sync: bool| {
        vec![
            uops,
            with(Insn::Load(mem(MemType::Inp, 0, inp, 1, 1, 1)), "push_next"),
            with(
                Insn::Load(mem(MemType::Inp, 0, inp, 1, 1, 1)),
                if sync {
                    "pop_next push_next"
                } else {
                    "push_next"
                },
            ),
            with(
                gemm(lp(false, (0, 1), (1, 1))),
                if sync {
                    "pop_prev push_prev"
                } else {
                    "pop_prev"
                },
            ),
            with(gemm(lp(false, (0, 1), (1, 1))), "pop_prev"),
            finish(),
        ]
    };
    let e = race_of(&mut r, &prog(false)).expect("the race is found");
    assert!(e.contains("race on INP row 0"), "{e}");
    assert_eq!(race_of(&mut r, &prog(true)), None);
}

#[test]
fn loading_what_a_store_writes_needs_a_token_chain() {
    // compute -> store writes DRAM; a LOAD of the same bytes must wait for the store
    // (store -> compute -> load), or it may read them before or after the store.
    let mut r = race_rig();
    let out = r.ea(MemType::Out, 4096);
    let inp = r.ea(MemType::Inp, 4096);
    let uops = r.load_uops(0, 1);
    let prog = |sync: bool| {
        let mut p = vec![
            uops,
            with(
                alu(AluOp::Add, Some(1), lp(false, (0, 1), (1, 1))),
                "push_next",
            ),
            with(
                Insn::Store(mem(MemType::Out, 0, out, 1, 1, 1)),
                "pop_prev push_prev",
            ),
        ];
        if sync {
            p.push(with(gemm(lp(true, (0, 1), (1, 1))), "pop_next push_prev"));
            p.push(with(
                Insn::Load(mem(MemType::Inp, 0, inp, 1, 1, 1)),
                "pop_next push_next",
            ));
            p.push(with(finish(), "pop_prev"));
        } else {
            p.push(with(
                Insn::Load(mem(MemType::Inp, 0, inp, 1, 1, 1)),
                "push_next",
            ));
            p.push(with(finish(), "pop_prev pop_next"));
        }
        p
    };
    let e = race_of(&mut r, &prog(false)).expect("the race is found");
    assert!(e.contains("race on DRAM bytes"), "{e}");
    assert_eq!(race_of(&mut r, &prog(true)), None);
}
