//! `vta_exec`: instruction decode, the micro-op loop generator, the pipeline's control and
//! index path, the scratchpads, forwarding, and the write port.

use hdl::{Module, ModuleBuilder, Sig};
use isa::layout::{Field, Layout, Slot, INSN_BITS, UOP_BITS};
use isa::{AluOp, Codec, HwConfig, Opcode};

use super::{alu, dot, ExecParams};

/// Bits of the loop iteration counters (`iter_out`, `iter_in`).
const ITER_BITS: u32 = isa::config::LOOP_ITER_BITS;
/// Extra bits that make `base + o*factor_out + i*factor_in` exact (no wrap): each product
/// is below `2^(index bits + 14)`, their sum below `2^(index bits + 15)`.
const INDEX_EXTRA: u32 = ITER_BITS + 2;

/// A signal registered through consecutive stages: `at(k)` is its value in stage `k`.
struct Staged<'a> {
    first: u32,
    sigs: Vec<Sig<'a>>,
}

impl<'a> Staged<'a> {
    /// `value` is the signal in stage `first`; registers carry it up to stage `last`.
    /// Control bits (`reset`) clear on reset; data registers have none.
    fn new(
        m: &'a ModuleBuilder,
        name: &str,
        value: Sig<'a>,
        first: u32,
        last: u32,
        reset: bool,
    ) -> Staged<'a> {
        let mut sigs = vec![value];
        for k in first + 1..=last {
            let n = format!("{name}_s{k}");
            let r = if reset {
                m.reg(&n, value.width(), 0)
            } else {
                m.reg_noreset(&n, value.width())
            };
            m.next(r, *sigs.last().unwrap());
            sigs.push(r);
        }
        Staged { first, sigs }
    }

    #[track_caller]
    fn at(&self, k: u32) -> Sig<'a> {
        assert!(
            k >= self.first && k < self.first + self.sigs.len() as u32,
            "stage {k} outside {}..{}",
            self.first,
            self.first + self.sigs.len() as u32
        );
        self.sigs[(k - self.first) as usize]
    }
}

/// The bits of `word` in `slot`; a zero-width field (a buffer of depth 1) reads as a 1-bit 0.
fn slot_bits<'a>(word: Sig<'a>, slot: Slot) -> Sig<'a> {
    if slot.width == 0 {
        word.module().zero(1)
    } else {
        word.slice(slot.lsb + slot.width - 1, slot.lsb)
    }
}

pub(super) fn build(cfg: &HwConfig, p: &ExecParams) -> Module {
    let codec = Codec::new(cfg);
    let t = p.timing();
    let w = t.compute_stage;
    let e = t.mul_extra;
    let lanes = p.lanes();
    let acc_bits = lanes * p.acc_width;
    let out_bits = lanes * p.out_width;
    let inp_bits = p.batch * p.block_in * p.inp_width;
    let wgt_bits = p.block_out * p.block_in * p.wgt_width;

    let dot_mod = dot::dot_module(p);
    let lane_mod = alu::lane_module(p);
    let m = ModuleBuilder::new("vta_exec");

    // ----- ports ------------------------------------------------------------------------
    let insn_valid = m.input("insn_valid", 1);
    let insn_ready = m.output("insn_ready", 1);
    let insn = m.input("insn", INSN_BITS);
    let done = m.output("done", 1);
    let uop_wr_en = m.input("uop_wr_en", 1);
    let uop_wr_addr = m.input("uop_wr_addr", p.a_uop);
    let uop_wr_data = m.input("uop_wr_data", UOP_BITS);
    let inp_rd_en = m.output("inp_rd_en", 1);
    let inp_rd_addr = m.output("inp_rd_addr", p.a_inp);
    let inp_rd_data = m.input("inp_rd_data", inp_bits);
    let wgt_rd_en = m.output("wgt_rd_en", 1);
    let wgt_rd_addr = m.output("wgt_rd_addr", p.a_wgt);
    let wgt_rd_data = m.input("wgt_rd_data", wgt_bits);
    let acc_wr_en = m.input("acc_wr_en", 1);
    let acc_wr_addr = m.input("acc_wr_addr", p.a_acc);
    let acc_wr_data = m.input("acc_wr_data", acc_bits);
    let out_rd_en = m.input("out_rd_en", 1);
    let out_rd_addr = m.input("out_rd_addr", p.a_acc);
    let out_rd_data = m.output("out_rd_data", out_bits);
    let ev_gemm_uop = m.output("ev_gemm_uop", 1);
    let ev_reset_uop = m.output("ev_reset_uop", 1);
    let ev_alu_uop = m.output("ev_alu_uop", 1);
    let busy = m.output("busy", 1);
    let fault = m.output("fault", 1);
    m.allow_unused(
        insn,
        "dependency flags, layout gaps and opcode bits that do not tell GEMM from ALU: \
         the shell routes instructions and handles tokens",
    );

    // ----- decode (field positions from isa::layout only) -------------------------------
    let field = |l: &Layout, f: Field| slot_bits(insn, l.slot(f));
    let (lg, la) = (&codec.gemm, &codec.alu);
    let is_alu = m.named("dec_alu", field(lg, Field::Opcode).eq(Opcode::Alu as u64));
    // A loop field: one slot if GEMM and ALU agree, else chosen by the opcode; zero-extended
    // to `width`.
    let loop_field = |f: Field, width: u32| {
        let g = field(lg, f).zext(width);
        if lg.slot(f) == la.slot(f) {
            g
        } else {
            m.mux(is_alu, field(la, f).zext(width), g)
        }
    };
    let uw = p.a_uop + 1; // uop_end is exclusive
    let dec_reset = loop_field(Field::ResetReg, 1);
    let dec_bgn = loop_field(Field::UopBgn, p.a_uop);
    let dec_end = loop_field(Field::UopEnd, uw);
    let dec_iter_out = loop_field(Field::IterOut, ITER_BITS);
    let dec_iter_in = loop_field(Field::IterIn, ITER_BITS);
    let dec_dfo = loop_field(Field::DstFactorOut, p.a_acc);
    let dec_dfi = loop_field(Field::DstFactorIn, p.a_acc);
    let dec_sfo = loop_field(Field::SrcFactorOut, p.src_bits);
    let dec_sfi = loop_field(Field::SrcFactorIn, p.src_bits);
    let dec_wfo = field(lg, Field::WgtFactorOut).zext(p.a_wgt);
    let dec_wfi = field(lg, Field::WgtFactorIn).zext(p.a_wgt);
    let dec_op = field(la, Field::AluOpcode);
    let dec_use_imm = field(la, Field::UseImm);
    let dec_imm = field(la, Field::Imm);
    let dec_empty = dec_bgn.zext(uw).ge(dec_end) | dec_iter_out.eq(0) | dec_iter_in.eq(0);

    // ----- instruction registers, loaded when an instruction is accepted ---------------
    let accept = m.wire("accept", 1);
    let load = |name: &str, value: Sig<'_>| {
        let r = m.reg_noreset(name, value.width());
        m.next_when(r, accept, value);
        r
    };
    let i_gemm = load("i_gemm", !is_alu);
    let i_clear = load("i_clear", dec_reset);
    let i_op = load("i_op", dec_op);
    let i_use_imm = load("i_use_imm", is_alu & dec_use_imm);
    let i_imm = load("i_imm", dec_imm);
    // A tensor ALU micro-op reads ACC twice (dst and src).
    let i_tensor = load("i_tensor", is_alu & !dec_use_imm & !dec_reset);
    // Table operations (ALU_LUT): a LUT reads the table, a LUTW writes it and no ACC row.
    let table_ops = p.alu_lut.then(|| {
        let lut = load("i_lut", is_alu & dec_op.eq(AluOp::Lut as u64) & !dec_reset);
        let lutw = load(
            "i_lutw",
            is_alu & dec_op.eq(AluOp::LutWrite as u64) & !dec_reset,
        );
        (lut, lutw)
    });
    // Micro-ops of an ALU MUL take the multiplier pipeline (`mul_extra` more cycles).
    let i_mul = (e > 0).then(|| {
        let is_mul = dec_op.eq(AluOp::Mul as u64);
        load("i_mul", is_alu & is_mul & !dec_reset & !dec_empty)
    });
    // Loop shapes that let micro-ops issue back to back (see the issue rule below): a
    // kernel of one micro-op, an inner loop that keeps `src` (a tensor ALU operand row read
    // once per pass) or moves `dst` (consecutive MUL micro-ops never share a row).
    let one_uop = (dec_bgn.zext(uw) + 1).eq(dec_end);
    let i_src_kept = load("i_src_kept", one_uop & dec_sfi.eq(0));
    let i_dst_moves = load("i_dst_moves", one_uop & dec_dfi.ne(0));
    let i_bgn = load("i_bgn", dec_bgn);
    let i_end = load("i_end", dec_end);
    let i_iter_out = load("i_iter_out", dec_iter_out);
    let i_iter_in = load("i_iter_in", dec_iter_in);
    let i_empty = load("i_empty", dec_empty);
    let i_dst_fi = load("i_dst_fi", dec_dfi);
    let factors = [
        ("dst", load("i_dst_fo", dec_dfo), i_dst_fi, p.a_acc),
        (
            "src",
            load("i_src_fo", dec_sfo),
            load("i_src_fi", dec_sfi),
            p.src_bits,
        ),
        (
            "wgt",
            load("i_wgt_fo", dec_wfo),
            load("i_wgt_fi", dec_wfi),
            p.a_wgt,
        ),
    ];

    // ----- loop generator (stage 0) -----------------------------------------------------
    let active = m.reg("active", 1, 0);
    let issued_prev = m.reg("issued_prev", 1, 0);
    let u = m.reg_noreset("loop_u", p.a_uop);
    let ic = m.reg_noreset("loop_i", ITER_BITS);
    let oc = m.reg_noreset("loop_o", ITER_BITS);
    // A tensor micro-op issues only after an idle cycle (see the ACC read port below), and
    // nothing issues in the `mul_extra` cycles after a MUL micro-op (see forwarding below),
    // with exceptions inside one pass of the inner loop (not its first micro-op) of a
    // one-micro-op kernel: a tensor micro-op whose inner loop keeps `src` reads no row, it
    // takes the previous micro-op's operand (`reuse`); MUL micro-ops whose inner loop moves
    // `dst` follow each other every cycle (their rows differ, so none waits for another's
    // product): with an immediate from the pass's second micro-op, with a kept tensor
    // operand from its third, unless the micro-op before wrote the operand's row
    // (`prev_wrote_operand`, below).
    let issue = m.wire("issue", 1);
    let in_pass = m.named("in_pass", ic.ne(0));
    let mut kept_tensor = i_tensor & i_src_kept & in_pass;
    if let Some((i_lut, i_lutw)) = table_ops {
        kept_tensor = kept_tensor & !i_lut & !i_lutw;
    }
    // `mul`: the slot holds a MUL micro-op.
    let mul =
        i_mul.map(|i_mul| Staged::new(&m, "mul", issue & i_mul, 0, t.write_stage + 1 + e, true));
    let prev_wrote_operand = i_mul.map(|_| m.reg("prev_wrote_operand", 1, 1));
    let (reuse_now, mul_stream) = match (i_mul, prev_wrote_operand) {
        (Some(i_mul), Some(prev_wrote_operand)) => {
            let tensor_stream = i_src_kept & !prev_wrote_operand & ic.gt(1);
            let stream = i_mul & i_dst_moves & in_pass & (i_use_imm | tensor_stream);
            let reuse = kept_tensor & (!i_mul | (i_dst_moves & tensor_stream));
            (reuse, Some(m.named("mul_stream", stream)))
        }
        _ => (kept_tensor, None),
    };
    let reuse_now = m.named("reuse_now", reuse_now);
    let mut may_issue = active & (!i_tensor | reuse_now | !issued_prev);
    if let (Some(mul), Some(mul_stream)) = (&mul, mul_stream) {
        for k in 1..=e {
            may_issue = may_issue & (!mul.at(k) | mul_stream);
        }
    }
    m.assign(issue, may_issue);
    let u_last = m.named("u_last", (u.zext(uw) + 1).eq(i_end));
    let i_last = m.named("i_last", (ic + 1).eq(i_iter_in));
    let o_last = m.named("o_last", (oc + 1).eq(i_iter_out));
    let is_final = m.named("is_final", i_empty | (u_last & i_last & o_last));
    let step = m.named("step", issue & !i_empty);
    let finishing = m.named("finishing", issue & is_final);
    m.assign(insn_ready, !active | finishing);
    m.assign(accept, insn_valid & insn_ready);
    m.next(active, accept | (active & !finishing));
    m.next(issued_prev, issue);
    let inner_wrap = step & u_last;
    let outer_wrap = inner_wrap & i_last;
    m.next_when(
        u,
        accept | step,
        m.mux(accept, dec_bgn, m.mux(u_last, i_bgn, u + 1)),
    );
    m.next_when(
        ic,
        accept | inner_wrap,
        m.mux(accept, 0, m.mux(i_last, 0, ic + 1)),
    );
    m.next_when(oc, accept | outer_wrap, m.mux(accept, 0, oc + 1));
    // Offsets o*factor_out + i*factor_in, exact: `base` is o*factor_out, `cur` adds i*factor_in.
    let mut offsets = vec![];
    for (name, fo, fi, bits) in factors {
        let ow = bits + INDEX_EXTRA;
        let base = m.reg_noreset(&format!("{name}_off_base"), ow);
        let cur = m.reg_noreset(&format!("{name}_off"), ow);
        let next_base = base + fo.zext(ow);
        m.next_when(base, accept | outer_wrap, m.mux(accept, 0, next_base));
        m.next_when(
            cur,
            accept | inner_wrap,
            m.mux(accept, 0, m.mux(i_last, next_base, cur + fi.zext(ow))),
        );
        offsets.push(cur);
    }

    if [Field::DstIdx, Field::SrcIdx, Field::WgtIdx]
        .iter()
        .all(|&f| codec.uop.slot(f).width == 0)
    {
        // Every buffer holds one element: micro-ops carry no bits and UOP is never read.
        for port in [uop_wr_en, uop_wr_addr, uop_wr_data] {
            m.allow_unused(port, "micro-ops have no index bits in this config");
        }
    }
    let uop_mem = m.mem("uop_mem", 32, 1 << p.a_uop);
    uop_mem.write(uop_wr_en, uop_wr_addr, uop_wr_data);
    let uop = uop_mem.read_en(step, u);

    // ----- per-micro-op control, stage 1 onwards -----------------------------------------
    let wb = t.write_stage;
    // `occ`: a slot holds a micro-op or an instruction's end marker; `v`: a micro-op.
    let occ = Staged::new(&m, "occ", issue, 0, wb, true);
    let v = Staged::new(&m, "v", step, 0, wb, true);
    let last = Staged::new(&m, "last", finishing, 0, wb + 1 + e, true);
    let gemm = Staged::new(&m, "gemm", i_gemm, 0, wb, false);
    let clear = Staged::new(&m, "clear", i_clear, 0, wb, false);
    let tensor = Staged::new(&m, "tensor", i_tensor, 0, w - 3, false);
    let reuse = Staged::new(&m, "reuse", reuse_now, 0, w - 1, false);
    let op = Staged::new(&m, "op", i_op, 0, w, false);
    let use_imm = Staged::new(&m, "use_imm", i_use_imm, 0, w - 1, false);
    let imm = Staged::new(&m, "imm", i_imm, 0, w - 1, false);
    let lut = table_ops.map(|(i_lut, i_lutw)| {
        (
            Staged::new(&m, "lut", i_lut, 0, w - 1, false),
            Staged::new(&m, "lutw", i_lutw, 0, w, false),
        )
    });
    let offs: Vec<Staged> = ["dst_off", "src_off", "wgt_off"]
        .iter()
        .zip(&offsets)
        .map(|(n, o)| Staged::new(&m, n, *o, 0, 1, false))
        .collect();

    // Stage 1: exact indices and their range checks (spec 8: only used indices count).
    let uf = |f: Field| slot_bits(uop, codec.uop.slot(f));
    let [dst_x, src_x, wgt_x] = [
        ("dst_exact", Field::DstIdx),
        ("src_exact", Field::SrcIdx),
        ("wgt_exact", Field::WgtIdx),
    ]
    .into_iter()
    .zip(&offs)
    .map(|((name, f), off)| {
        let o = off.at(1);
        m.named(name, uf(f).zext(o.width()) + o)
    })
    .collect::<Vec<_>>()
    .try_into()
    .expect("three indices");
    let (g1, c1) = (gemm.at(1), clear.at(1));
    let uses_src = !c1 & (g1 | !use_imm.at(1));
    let uses_wgt = g1 & !c1;
    let src_bad = m.mux(g1, src_x.ge(p.depth_inp), src_x.ge(p.depth_acc));
    // A LUTW's dst is a table entry (spec 8.3), checked against the table instead of ACC.
    let dst_bad = match &lut {
        Some((_, lutw)) => m.mux(
            lutw.at(1),
            dst_x.ge(isa::config::LUT_ENTRIES),
            dst_x.ge(p.depth_acc),
        ),
        None => dst_x.ge(p.depth_acc),
    };
    let bad = dst_bad | (uses_src & src_bad) | (uses_wgt & wgt_x.ge(p.depth_wgt));
    let faulty = Staged::new(&m, "fault", m.named("bad_index", bad), 1, w + e, false);
    // Whether the micro-op issued last in the pass wrote the pass's operand row (a tensor
    // MUL's): the next one then waits for its product and reads the row again instead of
    // streaming. The pass's rows rise by `dst_factor_in` from the first micro-op's, so
    // `pass_row` steps to each next micro-op's row by one addition: set from the first
    // micro-op's indices in its stage 2 (then the second micro-op's row is compared, in
    // time for the third's issue), stepped and compared at each later issue.
    if let Some(prev_wrote_operand) = prev_wrote_operand {
        let pass_first = Staged::new(&m, "pass_first", !in_pass, 0, 2, false);
        let d = Staged::new(&m, "pass_dst", dst_x, 1, 2, false).at(2);
        let s = Staged::new(&m, "pass_src", src_x, 1, 2, false).at(2);
        let width = d.width().max(s.width());
        let s = m.named("pass_operand", s.zext(width));
        let operand = m.reg_noreset("pass_operand_row", width);
        let row = m.reg_noreset("pass_row", width);
        let fi = i_dst_fi.zext(width);
        let second = m.named("pass_second_row", d.zext(width) + fi);
        let init = m.named("pass_init", v.at(2) & pass_first.at(2));
        let later = m.named("pass_later_issue", issue & ic.gt(1));
        m.next_when(operand, init, s);
        m.next_when(row, init | later, m.mux(init, second + fi, row + fi));
        m.next_when(
            prev_wrote_operand,
            init | later,
            m.mux(init, second.eq(s), row.eq(operand)),
        );
    }
    let dst = Staged::new(&m, "dst", dst_x.trunc(p.a_acc), 1, w + e, false);
    // The table entry a LUTW writes: its (range-checked) dst.
    let entry = lut
        .as_ref()
        .map(|_| Staged::new(&m, "lut_entry", dst_x.trunc(LUT_ADDR_BITS), 1, w - 1, false));
    let src = Staged::new(&m, "src", src_x.trunc(p.src_bits), 1, w - 1, false);
    let wgt = Staged::new(&m, "wgt", wgt_x.trunc(p.a_wgt), 1, 2, false);

    // Stage 2: operand reads and the fault pulse.
    let gemm_rd = v.at(2) & gemm.at(2) & !clear.at(2);
    m.assign(inp_rd_en, gemm_rd);
    m.assign(inp_rd_addr, src.at(2).resize(p.a_inp));
    m.assign(wgt_rd_en, gemm_rd);
    m.assign(wgt_rd_addr, wgt.at(2));
    m.assign(fault, v.at(2) & faulty.at(2));

    // Stages 3 .. W-1: the dot-product array.
    let dot_inst = m.instance("gemm_array", &dot_mod);
    dot_inst.connect("inp", inp_rd_data);
    dot_inst.connect("wgt", wgt_rd_data);
    // The operands read in stage 2 arrive in stage 3.
    dot_inst.connect("en", m.named("dot_en", v.at(3) & gemm.at(3) & !clear.at(3)));
    let dot = dot_inst.output("dot");

    // ----- ACC: one read port, one write port --------------------------------------------
    // Stage W-2 reads dst; a tensor ALU micro-op reads src one stage earlier, in the slot
    // left free in front of it. Both rows are registered (forwarded) before stage W uses
    // them, so that the block RAM's output feeds no lane logic.
    let acc_mem = m.mem("acc_mem", acc_bits, 1 << p.a_acc);
    let rd_src = m.named(
        "acc_rd_src",
        v.at(w - 3) & tensor.at(w - 3) & !reuse.at(w - 3),
    );
    let rd_dst = m.named("acc_rd_dst", v.at(w - 2) & !clear.at(w - 2));
    let acc_raddr = m.mux(rd_src, src.at(w - 3).resize(p.a_acc), dst.at(w - 2));
    let acc_rdata = acc_mem.read_en(rd_src | rd_dst, acc_raddr);
    // Results enter `res1` in order, one per cycle at most: a micro-op's from stage W, a
    // MUL's from stage W+mul_extra (the slot that would collide with it stays empty).
    // `we` marks a result that is written, `wdst` its row; `res1`, `res2` follow them.
    let mut we_w = v.at(w) & !faulty.at(w);
    if let Some((_, lutw)) = &lut {
        we_w = we_w & !lutw.at(w);
    }
    let mut wdst_w = dst.at(w);
    if let Some(mul) = &mul {
        let mul_done = mul.at(w + e);
        we_w = (we_w & !mul.at(w)) | (mul_done & !faulty.at(w + e));
        wdst_w = m.mux(mul_done, dst.at(w + e), wdst_w);
    }
    let we = Staged::new(&m, "we", m.named("we_w", we_w), w, w + 1, true);
    let wdst = Staged::new(&m, "wdst", wdst_w, w, w + 1, false);
    // Forwarding: a result in `res1`, `res2` or entering `res1` is not yet visible to a read
    // issued one cycle earlier; a micro-op takes the newest one that matches its row. Which
    // one is decided a cycle ahead, into registers. A row read in cycle `c` misses the
    // results that enter `res1` at the ends of cycles `c-1`, `c` and `c+1`: the first two
    // are in `res2`, `res1` when the data arrives (cycle `c+1`) and are forwarded into the
    // operand register; the third is in `res1` one cycle later and is forwarded after it.
    let res1 = m.reg_noreset("res1", acc_bits);
    let res2 = m.reg_noreset("res2", acc_bits);
    m.next(res2, res1);
    let hit = |name: &str, we: Sig<'_>, row: Sig<'_>, idx: Sig<'_>| {
        let r = m.reg(name, 1, 0);
        m.next(r, we & row.eq(idx));
        r
    };
    // dst, read in stage W-2, is registered in `x_row` in stage W-1 and used in stage W.
    let d_rd = dst.at(w - 2);
    let dst_in_res1 = hit("dst_in_res1", we.at(w), wdst.at(w), d_rd);
    let dst_in_res2 = hit("dst_in_res2", we.at(w + 1), wdst.at(w + 1), d_rd);
    let dst_in_prev = hit("dst_in_prev", we.at(w), wdst.at(w), dst.at(w - 1));
    let x_row = m.reg_noreset("x_row", acc_bits);
    m.next(
        x_row,
        m.mux(dst_in_res1, res1, m.mux(dst_in_res2, res2, acc_rdata)),
    );
    let x_op = m.named("x_op", m.mux(dst_in_prev, res1, x_row));
    // A tensor src, read in stage W-3, is registered in `src_row` in stage W-2, and the ALU
    // operand register `y_row` takes it (or the immediate) in stage W-1, so that stage W
    // starts from flip-flops. The slot in front of a tensor micro-op is empty, so after the
    // results forwarded into `src_row` only two more can concern it, both forwarded into
    // `y_row`: the one that entered `res1` at the end of stage W-2 (the slot two ahead) and
    // a MUL product about to enter it in stage W-1 (a MUL three ahead). Nothing enters
    // `res1` at the end of its stage W-1 but that product, so `y_row` is final there and
    // the activation table can look it up.
    let s_rd = src.at(w - 3).resize(p.a_acc);
    let src_in_res1 = hit("src_in_res1", we.at(w), wdst.at(w), s_rd);
    let src_in_res2 = hit("src_in_res2", we.at(w + 1), wdst.at(w + 1), s_rd);
    let src_row = m.reg_noreset("src_row", acc_bits);
    m.next(
        src_row,
        m.mux(src_in_res1, res1, m.mux(src_in_res2, res2, acc_rdata)),
    );
    let s_next = src.at(w - 2).resize(p.a_acc);
    let src_in_prev = hit("src_in_prev", we.at(w), wdst.at(w), s_next);
    let src_in_mul = mul.as_ref().map(|mul| {
        let k = w + e - 1;
        hit("src_in_mul", mul.at(k) & !faulty.at(k), dst.at(k), s_next)
    });
    let y_row = m.reg_noreset("y_row", acc_bits);
    // A micro-op that reuses its predecessor's operand row takes that operand (final for
    // every earlier micro-op) into `y_row` in stage W-1, and in stage W the predecessor's
    // own result instead when it wrote the row.
    let y_in_prev = hit(
        "y_in_prev",
        reuse.at(w - 1) & we.at(w),
        wdst.at(w),
        src.at(w - 1).resize(p.a_acc),
    );
    let y_op = m.named("y_op", m.mux(y_in_prev, res1, y_row));
    // The activation-table entries the lanes read in stage W (assigned below, from the
    // operand entering `y_row`).
    let entries: Option<Vec<Sig>> = lut.as_ref().map(|_| {
        (0..lanes)
            .map(|l| m.wire(&format!("lut_entry{l}"), 8))
            .collect()
    });

    // Stage W: the lanes.
    let mut results = vec![];
    let mut products = vec![];
    for l in 0..lanes {
        let lane = m.instance(&format!("lane{l}"), &lane_mod);
        lane.connect("x", x_op.lane(l, p.acc_width));
        lane.connect("y", y_op.lane(l, p.acc_width));
        let d = dot.lane(l, p.dot_width).as_signed().sext(p.acc_width);
        lane.connect("d", d.as_unsigned());
        lane.connect("gemm", gemm.at(w));
        lane.connect("clear", clear.at(w));
        lane.connect("op", op.at(w));
        if let Some(entries) = &entries {
            lane.connect("t", entries[l as usize]);
        }
        results.push(lane.output("r"));
        if let Some(mul) = &mul {
            lane.connect("mul_load", mul.at(w));
            lane.connect("mul_step", mul.at(w + 1));
            products.push(lane.output("p"));
        }
    }
    // Loaded only by a result that is written: every reader of res1, res2 is selected by the
    // `we` of the stage that produced it.
    let result = match &mul {
        Some(mul) => m.mux(mul.at(w + e), m.pack(&products), m.pack(&results)),
        None => m.pack(&results),
    };
    m.next_when(res1, we.at(w), result);

    let mut src_op = m.mux(src_in_prev, res1, src_row);
    if let Some(hit) = src_in_mul {
        src_op = m.mux(hit, m.pack(&products), src_op);
    }
    let imm_row = m.pack(&vec![
        imm.at(w - 1)
            .as_signed()
            .sext(p.acc_width)
            .as_unsigned();
        lanes as usize
    ]);
    let alu_w1 = v.at(w - 1) & !gemm.at(w - 1) & !clear.at(w - 1);
    let y_next = m.mux(
        use_imm.at(w - 1),
        imm_row,
        m.mux(reuse.at(w - 1), y_op, src_op),
    );
    m.next_when(y_row, alu_w1, y_next);
    if let (Some((lut, lutw)), Some(entry), Some(wires)) = (&lut, &entry, &entries) {
        let ctl = TableCtl {
            y_next: m.named("y_next", y_next),
            lookup: v.at(w - 1) & lut.at(w - 1),
            write: v.at(w - 1) & lutw.at(w - 1) & !faulty.at(w - 1),
            entry: entry.at(w - 1),
        };
        for (wire, e) in wires.iter().zip(table(&m, p, &ctl)) {
            m.assign(*wire, e);
        }
    }

    // Stage W+1: write ACC and its OUT mirror; the shell's LOAD ACC writes when idle.
    let wr = we.at(wb);
    let acc_we = wr | acc_wr_en;
    let acc_waddr = m.named("acc_waddr", m.mux(wr, wdst.at(wb), acc_wr_addr));
    let acc_wdata = m.named("acc_wdata", m.mux(wr, res1, acc_wr_data));
    acc_mem.write(acc_we, acc_waddr, acc_wdata);
    let out_mem = m.mem("out_mem", out_bits, 1 << p.a_acc);
    let out_lanes: Vec<Sig> = (0..lanes)
        .map(|l| acc_wdata.lane(l, p.acc_width).trunc(p.out_width))
        .collect();
    out_mem.write(acc_we, acc_waddr, m.pack(&out_lanes));
    m.assign(out_rd_data, out_mem.read_en(out_rd_en, out_rd_addr));

    let (vw, gw, cw) = (v.at(wb), gemm.at(wb), clear.at(wb));
    m.assign(ev_gemm_uop, vw & gw & !cw);
    m.assign(ev_reset_uop, vw & cw);
    m.assign(ev_alu_uop, vw & !gw & !cw);

    // Stage W+2 (W+2+mul_extra after a MUL): done. Busy while anything is issued or in
    // flight.
    let mut done_q = last.at(wb + 1);
    let mut any = active;
    for k in 1..=wb {
        any = any | occ.at(k);
    }
    if let Some(mul) = &mul {
        done_q = (done_q & !mul.at(wb + 1)) | (last.at(wb + 1 + e) & mul.at(wb + 1 + e));
        for k in wb + 1..=wb + e {
            any = any | mul.at(k);
        }
    }
    m.assign(done, done_q);
    any = any | done_q;
    m.assign(busy, any);

    m.finish().expect("vta_exec is well formed")
}

/// Bits of an activation-table address.
const LUT_ADDR_BITS: u32 = isa::config::LUT_ENTRIES.trailing_zeros();

/// The stage W-1 signals the activation table works from.
struct TableCtl<'a> {
    /// The ALU operand row about to enter `y_row`.
    y_next: Sig<'a>,
    /// A LUT micro-op: every lane reads its entry.
    lookup: Sig<'a>,
    /// A LUTW micro-op that is not faulty: entry `entry` is written.
    write: Sig<'a>,
    entry: Sig<'a>,
}

/// The activation table (spec 8.3) as one 256 x 8 memory per lane, all written alike (the
/// low byte of operand lane `entry mod LANES` at `entry`, one entry per LUTW micro-op) and
/// each read by its lane at the operand saturated to int8. Both happen in stage W-1, so a
/// LUT sees every earlier LUTW; the entries read arrive in stage W. Returns them, one 8-bit
/// signal per lane.
fn table<'a>(m: &'a ModuleBuilder, p: &ExecParams, c: &TableCtl<'a>) -> Vec<Sig<'a>> {
    let lanes = p.lanes();
    let entries = isa::config::LUT_ENTRIES;
    let operand: Vec<Sig> = c.y_next.lanes(p.acc_width);
    // Entries 0..256 reach lanes 0..min(LANES, 256).
    let sel_bits = lanes.min(entries).trailing_zeros();
    let data = if sel_bits == 0 {
        operand[0].slice(7, 0)
    } else {
        let low: Vec<Sig> = operand[..lanes.min(entries) as usize]
            .iter()
            .map(|y| y.slice(7, 0))
            .collect();
        m.index(c.entry.slice(sel_bits - 1, 0), &low)
    };
    let data = m.named("lut_wdata", data);
    operand
        .iter()
        .enumerate()
        .map(|(l, y)| {
            let mem = m.mem(&format!("lut_mem{l}"), 8, entries);
            mem.write(c.write, c.entry, data);
            // index(y) = y saturated to int8, as its two's-complement byte.
            let high = y.slice(p.acc_width - 1, 7);
            let in_range = high.all() | !high.any();
            let limit = m.mux(y.msb(), m.lit(0x80, 8), m.lit(0x7f, 8));
            let index = m.named(
                &format!("lut_index{l}"),
                m.mux(in_range, y.slice(7, 0), limit),
            );
            mem.read_en(c.lookup, index)
        })
        .collect()
}
